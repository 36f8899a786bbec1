"""The private weighting protocol of the paper (Section 4, Protocol 1, Algorithm 5; Theorems 4 and 5).

- :mod:`uldp.secure.encoding`: fixed-point Encode/Decode, C_LCM, the checks of Theorem 4.
- :mod:`uldp.secure.keys`: Paillier (phe + gmpy2), X25519 + HKDF pairwise keys, ChaCha20-Poly1305.
- :mod:`uldp.secure.masks`: keyed ChaCha20 streams -> pairwise additive masks and blinds r_u in Z_n^*.
- :mod:`uldp.secure.messages`: typed messages with an explicit byte format.
- :mod:`uldp.secure.protocol`: the ``Server`` and ``Silo`` roles, :class:`SecureSession`, :func:`run_secure_round`.
- :mod:`uldp.secure.fast`: the fast encrypted weighted sum and CRT decryption.

:class:`SecureAggregator` (built by :func:`make_secure_aggregate`, one per run: it holds that run's keys and state)
is the protocol-backed version of the methods' aggregation hook (same signature and, to within P, the same result
as the plain one); ``uldp.simulation.run`` uses it for ``secure=True`` runs with the run's C and sigma.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from uldp.secure.keys import DEFAULT_KEY_BITS
from uldp.secure.protocol import ProtocolConfig, SecureSession, Server, Silo, run_secure_round

__all__ = [
    "ProtocolConfig",
    "SecureAggregator",
    "SecureSession",
    "Server",
    "Silo",
    "make_secure_aggregate",
    "run_secure_round",
]


def _to_numpy(values: Any) -> np.ndarray:
    if hasattr(values, "detach"):
        values = values.detach().cpu().numpy()
    return np.asarray(values, dtype=np.float64)


class SecureAggregator:
    """The aggregation hook ``aggregate(deltas, counts, sampled, noise) -> Tensor[d]`` backed by Protocol 1.

    The setup (keys, blinded histogram) runs once per distinct ``counts`` table and is reused by later rounds,
    as in the paper. Users with N_u = 0 have no records, hence no delta (their rows must be zero) and weight 0:
    they are left out of the sampled set. With ``clip`` and ``sigma`` (a training run's C and noise multiplier)
    the no-wrap-around check of Theorem 4 uses them, as the protocol's public parameters; without them the
    magnitude bounds come from the data (with headroom) and larger values later trigger a new setup.

    Attributes:
        session: the current :class:`SecureSession` (None before the first call); its ``timings`` hold the setup
            times and ``last_round_timings`` those of the latest round.
        round_timings: per call, the protocol's per-part seconds of that round.

    Args:
        key_bits, precision, n_max, insecure_test_key, processes: see :class:`ProtocolConfig`.
        clip: C, the bound on every delta coordinate (None: from the data).
        sigma: noise multiplier of the per-silo noise N(0, sigma^2 C^2 / |S|) (with ``clip``; None: from the data).
    """

    def __init__(
        self,
        *,
        key_bits: int = DEFAULT_KEY_BITS,
        precision: float = 1e-10,
        n_max: int = 2000,
        insecure_test_key: bool = False,
        processes: int = 1,
        clip: float | None = None,
        sigma: float | None = None,
    ) -> None:
        self._settings = dict(
            key_bits=key_bits, precision=precision, n_max=n_max, insecure_test_key=insecure_test_key,
            processes=processes,
        )
        self._clip, self._sigma = clip, sigma
        self.session: SecureSession | None = None
        self._counts: np.ndarray | None = None
        self.round_timings: list[dict[str, float]] = []

    def __call__(self, deltas: list[Any], counts: np.ndarray, sampled: np.ndarray, noise: list[Any]) -> Any:
        """sum_s (sum_u w_su deltas[s][u] + noise[s]), w_su = n_su / N_u for sampled users, via Protocol 1.

        Returns:
            A tensor of the dtype of ``deltas[0]`` (float64 inside, within P of the plain sum; Theorem 4).

        Raises:
            ValueError: a user without records has a non-zero delta, or see :meth:`SecureSession.aggregate`.
        """
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
        fixed_bounds = self._clip is not None
        session = self.session
        if (
            session is None
            or not np.array_equal(self._counts, table)
            or (not fixed_bounds and delta_bound > session.config.clip)
            or (not fixed_bounds and noise_bound > session.config.effective_noise_bound)
        ):
            bounds = (
                dict(clip=self._clip, sigma=self._sigma or 0.0) if fixed_bounds
                else dict(clip=max(1.0, 2 * delta_bound), noise_bound=max(1.0, 2 * noise_bound))
            )
            session = SecureSession(table, **bounds, **self._settings)
            self.session, self._counts = session, table.copy()
        result = session.aggregate(delta_array, noise_array, chosen & ~empty)
        self.round_timings.append(dict(session.last_round_timings))
        dtype = deltas[0].dtype if isinstance(deltas[0], torch.Tensor) else torch.float64
        return torch.as_tensor(result, dtype=dtype)


def make_secure_aggregate(**settings: Any) -> SecureAggregator:
    """A fresh :class:`SecureAggregator` (keyword arguments as its constructor's)."""
    return SecureAggregator(**settings)

