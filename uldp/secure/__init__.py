"""The private weighting protocol of the paper (Section 4, Protocol 1, Algorithm 5; Theorems 4 and 5).

- :mod:`uldp.secure.config`: :class:`ProtocolParameters`, the one parameter object of the protocol, and
  :class:`ProtocolConfig`, what one session's parties agree on.
- :mod:`uldp.secure.encoding`: fixed-point Encode/Decode, C_LCM, the checks of Theorem 4.
- :mod:`uldp.secure.keys`: Paillier (phe + gmpy2), X25519 + HKDF pairwise keys, ChaCha20-Poly1305.
- :mod:`uldp.secure.masks`: keyed ChaCha20 streams -> pairwise additive masks and blinds r_u in Z_n^*.
- :mod:`uldp.secure.messages`: typed messages with an explicit byte format.
- :mod:`uldp.secure.protocol`: the ``Server`` and ``Silo`` roles (the silo's in :mod:`uldp.secure.silo`, what they
  share in :mod:`uldp.secure.roles`).
- :mod:`uldp.secure.backends`: the round's backends behind one interface, by name (``BACKENDS``: ``"paillier"``,
  ``"packed-paillier"``, ``"lattice"``).
- :mod:`uldp.secure.weight_check`: beyond the paper, the silos' joint check that the server's encrypted weights are
  what the counts imply (against a malicious server; the Paillier backends).
- :mod:`uldp.secure.lattice` and :mod:`uldp.secure.lattice_silo`: the lattice backend's BFV engine.
- :mod:`uldp.secure.driver`: Protocol 1's one driver, ``ServerDriver`` (over an exchange callable) and
  ``SiloDriver`` (one stage at a time, in order, each round index at most once), which every transport runs.
- :mod:`uldp.secure.psu`: the silos' private set union of patient ids (commutative Diffie-Hellman blinding),
  which numbers the users U that the protocol assumes agreed on.
- :mod:`uldp.secure.session`: :class:`SecureSession` (all roles in one process).
- :mod:`uldp.secure.fast`: the fast encrypted weighted sum, packing of ciphertexts, CRT encryption and decryption.
- :mod:`uldp.secure.packing`: the packed backend (``ProtocolParameters(backend="packed-paillier")``): fixed-point
  weights rescaled with the server's help, K parameters per plaintext, and the bounds that keep it exact within P.

:class:`uldp.federation.SecureAggregator` is the protocol-backed version of the methods' aggregation hook (same
signature and, to within P, the same result as the plain one). It drives the one federation round, so it lives in
:mod:`uldp.federation`, a layer above this package; ``uldp.secure.SecureAggregator``, its old home, still resolves
to it for one release, with a ``DeprecationWarning``.
"""

from __future__ import annotations

import warnings
from importlib import import_module
from typing import TYPE_CHECKING, Any

from uldp.secure.config import ProtocolConfig, ProtocolParameters

if TYPE_CHECKING:
    from uldp.secure.protocol import Server, Silo
    from uldp.secure.session import SecureSession

__all__ = [
    "ProtocolConfig",
    "ProtocolParameters",
    "SecureSession",
    "Server",
    "Silo",
]

#: Names imported when first used, by module: they need the ``secure`` extra (phe, gmpy2, cryptography), the
#: parameters do not.
_LAZY = {
    "Server": "uldp.secure.protocol",
    "Silo": "uldp.secure.protocol",
    "SecureSession": "uldp.secure.session",
}


def __getattr__(name: str) -> Any:
    if name == "SecureAggregator":  # moved up to uldp.federation (it drives the federation round)
        warnings.warn(
            "uldp.secure.SecureAggregator is deprecated and will be removed in the next release; "
            "use uldp.federation.SecureAggregator",
            DeprecationWarning,
            stacklevel=2,
        )
        return import_module("uldp.federation").SecureAggregator
    if name not in _LAZY:
        raise AttributeError(f"module 'uldp.secure' has no attribute {name!r}")
    return getattr(import_module(_LAZY[name]), name)
