"""The private weighting protocol of the paper (Section 4, Protocol 1, Algorithm 5; Theorems 4 and 5).

- :mod:`uldp.secure.encoding`: fixed-point Encode/Decode, C_LCM, the checks of Theorem 4.
- :mod:`uldp.secure.keys`: Paillier (phe + gmpy2), X25519 + HKDF pairwise keys, ChaCha20-Poly1305.
- :mod:`uldp.secure.masks`: keyed ChaCha20 streams -> pairwise additive masks and blinds r_u in Z_n^*.
- :mod:`uldp.secure.messages`: typed messages with an explicit byte format.
- :mod:`uldp.secure.protocol`: the ``Server`` and ``Silo`` roles, :class:`SecureSession`, :func:`run_secure_round`.
- :mod:`uldp.secure.fast`: the fast encrypted weighted sum and CRT decryption.

:func:`secure_aggregate` is the protocol-backed version of the methods' aggregation hook (same signature and,
to within P, the same result as the plain one).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from uldp.secure.keys import DEFAULT_KEY_BITS
from uldp.secure.protocol import ProtocolConfig, SecureSession, Server, Silo, run_secure_round

__all__ = [
    "ProtocolConfig",
    "SecureSession",
    "Server",
    "Silo",
    "make_secure_aggregate",
    "run_secure_round",
    "secure_aggregate",
]


def _to_numpy(values: Any) -> np.ndarray:
    if hasattr(values, "detach"):
        values = values.detach().cpu().numpy()
    return np.asarray(values, dtype=np.float64)


def make_secure_aggregate(
    *,
    key_bits: int = DEFAULT_KEY_BITS,
    precision: float = 1e-10,
    n_max: int = 2000,
    insecure_test_key: bool = False,
    processes: int = 1,
) -> Callable[..., Any]:
    """Build an aggregation hook ``aggregate(deltas, counts, sampled, noise) -> Tensor[d]`` backed by Protocol 1.

    The setup (keys, blinded histogram) runs once per distinct ``counts`` table and is reused by later rounds,
    as in the paper. Users with N_u = 0 have no records, hence no delta (their rows must be zero) and weight 0:
    they are left out of the sampled set. The magnitude bounds of the no-wrap-around check come from the data
    (with headroom); larger values later trigger a new setup.

    Args:
        key_bits, precision, n_max, insecure_test_key, processes: see :class:`ProtocolConfig`.

    Returns:
        The hook; it returns a tensor of the dtype of ``deltas[0]`` (float64 inside, within P of the plain sum).
    """
    cache: dict[str, Any] = {}

    def aggregate(deltas: list[Any], counts: np.ndarray, sampled: np.ndarray, noise: list[Any]) -> Any:
        """sum_s (sum_u w_su deltas[s][u] + noise[s]), w_su = n_su / N_u for sampled users, via Protocol 1."""
        import torch

        delta_array = np.stack([_to_numpy(d) for d in deltas])
        noise_array = np.stack([_to_numpy(z) for z in noise])
        table = np.asarray(counts).astype(np.int64)
        chosen = np.asarray(sampled, dtype=bool)
        empty = table.sum(axis=0) == 0
        if np.any(delta_array[:, empty] != 0):
            raise ValueError("users with N_u = 0 records must have zero deltas in every silo")
        delta_bound = float(np.abs(delta_array).max(initial=0.0))
        noise_bound = float(np.abs(noise_array).max(initial=0.0))
        session = cache.get("session")
        if (
            session is None
            or not np.array_equal(cache["counts"], table)
            or delta_bound > session.config.clip
            or noise_bound > session.config.effective_noise_bound
        ):
            session = SecureSession(
                table, clip=max(1.0, 2 * delta_bound), noise_bound=max(1.0, 2 * noise_bound), key_bits=key_bits,
                precision=precision, n_max=n_max, insecure_test_key=insecure_test_key, processes=processes,
            )
            cache.update(session=session, counts=table.copy())
        result = session.aggregate(delta_array, noise_array, chosen & ~empty)
        dtype = deltas[0].dtype if hasattr(deltas[0], "dtype") and isinstance(deltas[0], torch.Tensor) else torch.float64
        return torch.as_tensor(result, dtype=dtype)

    return aggregate


#: The protocol-backed aggregation hook at the paper's settings (3072-bit keys, P = 1e-10, N_max = 2000).
secure_aggregate = make_secure_aggregate()
