"""Protocol 1's backends by name (``ProtocolParameters(backend=name)``): the interface is
:class:`~uldp.secure.backends.base.Backend`; adding one is a module with a subclass and one line in :data:`BACKENDS`.

- ``"paillier"``: the paper's (:mod:`uldp.secure.backends.paillier`);
- ``"packed-paillier"``: rescaled fixed-point weights, K parameters per ciphertext
  (:mod:`uldp.secure.backends.packed`);
- ``"lattice"``: the same rescale, then the weighted sum in BFV (:mod:`uldp.secure.backends.lattice`).
"""

from __future__ import annotations

from uldp.secure.backends.base import Backend
from uldp.secure.backends.lattice import LatticeBackend
from uldp.secure.backends.packed import PackedPaillierBackend
from uldp.secure.backends.paillier import PaillierBackend

#: Every backend by its name.
BACKENDS: dict[str, type[Backend]] = {
    "paillier": PaillierBackend,
    "packed-paillier": PackedPaillierBackend,
    "lattice": LatticeBackend,
}

__all__ = ["BACKENDS", "Backend"]
