"""Protocol 1 run in one process: :class:`SecureSession` (the server and every silo as objects, each message through
its bytes) and :class:`SecureAggregator`, the methods' aggregation hook backed by it.

>>> import numpy as np
>>> from uldp.secure.config import ProtocolParameters
>>> counts = np.array([[2, 0, 1], [1, 3, 0]])
>>> deltas = np.array([[[0.1], [0.0], [-0.2]], [[0.4], [0.3], [0.0]]])
>>> noise = np.array([[0.01], [-0.02]])
>>> sampled = np.array([True, True, False])
>>> session = SecureSession(counts, ProtocolParameters(key_bits=512, n_max=6, insecure_test_key=True), clip=1.0,
...                         sigma=1.0)
>>> expected = (2/3 * 0.1 + 1/3 * 0.4) + 0.3 + 0.01 - 0.02
>>> bool(abs(session.aggregate(deltas, noise, sampled)[0] - expected) <= 1e-10)
True
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import numpy as np

from uldp.secure import encoding
from uldp.secure.config import ProtocolConfig, ProtocolParameters
from uldp.secure.driver import (
    STAGE_SEED,
    STAGE_SHARES,
    STAGE_UPDATE,
    Payloads,
    ServerDriver,
    SiloDriver,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from uldp.secure.modulus_proof import Verifier


class SecureSession:
    """Runs the server and all silos in-process: setup once, then one :meth:`aggregate` call per round.

    The roles talk through Protocol 1's one driver (:class:`~uldp.secure.driver.ServerDriver` and one
    :class:`~uldp.secure.driver.SiloDriver` per silo), every message as bytes, as a network would carry it.

    Args:
        counts: n[s, u], shape (|S|, |U|).
        clip: C (bound on every delta coordinate).
        sigma: noise multiplier (the noise bound is derived from it), or give ``noise_bound``.
        noise_bound: explicit bound on any noise coordinate (overrides sigma).
        parameters: Protocol 1's :class:`~uldp.secure.config.ProtocolParameters` (key size, P, N_max, ...).
        verifiers: Per silo, its ring-Pedersen parameters from an earlier session (``silos[s].verifier``), against
            which the server proves its modulus (beyond the paper, :mod:`uldp.secure.modulus_proof`); None: each silo
            draws its own.

    Attributes:
        server: The :class:`~uldp.secure.protocol.Server` role; silos: the :class:`~uldp.secure.protocol.Silo` roles.
        timings: Seconds of the set-up's parts (``paillier_keygen``, ``key_exchange``, ``blinded_histogram``).
        last_round_timings: Seconds of the latest round's parts (``encrypt_weights``, ``silo_weighting``,
            ``aggregation``).

    Raises:
        ValueError: before anything is sent, on N_u > N_max, a possible wrap-around, or a bad key size.
    """

    def __init__(
        self,
        counts: np.ndarray,
        parameters: ProtocolParameters,
        *,
        clip: float,
        sigma: float = 0.0,
        noise_bound: float | None = None,
        verifiers: Sequence[Verifier | None] | None = None,
    ) -> None:
        table = np.asarray(counts)
        if table.ndim != 2:
            raise ValueError(f"counts must be n[s, u] of shape (|S|, |U|), got shape {table.shape}")
        self.totals = encoding.check_counts(table, n_max=parameters.n_max)
        self.config = ProtocolConfig(
            n_silos=table.shape[0],
            n_users=table.shape[1],
            clip=clip,
            sigma=sigma,
            noise_bound=noise_bound,
            parameters=parameters,
        )
        self.timings: dict[str, float] = {}
        self.last_round_timings: dict[str, float] = {}
        self._round = 0
        self._marks: dict[str, tuple[float, float]] = {}
        self._inputs: tuple[np.ndarray, np.ndarray] | None = None
        start = time.perf_counter()
        self.driver = ServerDriver(self.config, self._exchange)
        kept = list(verifiers) if verifiers is not None else [None] * self.config.n_silos
        if len(kept) != self.config.n_silos:
            raise ValueError(
                f"verifiers must hold one entry per silo ({self.config.n_silos}), got {len(kept)}"
            )
        self.silo_drivers = [
            SiloDriver(s, table[s], self.config, verifier=kept[s])
            for s in range(self.config.n_silos)
        ]
        self.server = self.driver.server
        self.silos = [driver.role for driver in self.silo_drivers]
        self.timings["paillier_keygen"] = time.perf_counter() - start
        start = time.perf_counter()
        self.driver.setup()
        end = time.perf_counter()
        seed_start = self._marks[STAGE_SEED][0]
        self.timings["key_exchange"] = seed_start - start
        self.timings["blinded_histogram"] = end - seed_start

    def _exchange(
        self, stage: str, round_index: int, payloads: dict[int, Payloads]
    ) -> dict[int, Payloads]:
        """Deliver each silo's message (bytes) to its driver and collect the answers (bytes)."""
        start = time.perf_counter()
        answers = {}
        for silo, message in payloads.items():
            inputs = self._silo_inputs(silo) if stage == STAGE_UPDATE else None
            answers[silo] = self.silo_drivers[silo].answer(
                stage, round_index, message, inputs=inputs
            )
        self._marks[stage] = (start, time.perf_counter())
        return answers

    def _silo_inputs(self, silo: int) -> Callable[[], tuple[np.ndarray, np.ndarray]]:
        """Silo ``silo``'s clipped deltas and noise of the round :meth:`aggregate` runs."""

        def inputs() -> tuple[np.ndarray, np.ndarray]:
            if self._inputs is None:
                raise ValueError("a round's update outside aggregate()")
            deltas, noise = self._inputs
            return deltas[silo], noise[silo]

        return inputs

    def aggregate(self, deltas: np.ndarray, noise: np.ndarray, sampled: np.ndarray) -> np.ndarray:
        """One round (steps 2(a)-(c)): the decoded sum_s (sum_u w_su delta_su + z_s), w_su = n_su / N_u if sampled.

        Args:
            deltas: clipped deltas, shape (|S|, |U|, d).
            noise: per-silo noise, shape (|S|, d).
            sampled: bool (|U|,), the users sampled this round.

        Returns:
            float64 array (d,), within P of the plain computation (Theorem 4).

        Raises:
            ValueError: on a sampled user with N_u = 0, bad shapes, or values beyond the configured bounds.
        """
        deltas, noise = np.asarray(deltas, dtype=np.float64), np.asarray(noise, dtype=np.float64)
        shape = (self.config.n_silos, self.config.n_users)
        if (
            deltas.ndim != 3
            or deltas.shape[:2] != shape
            or noise.shape != (shape[0], deltas.shape[2])
        ):
            raise ValueError(
                f"deltas must be {(*shape, 'd')} and noise ({shape[0]}, d); got {deltas.shape}, {noise.shape}"
            )
        chosen = np.asarray(sampled, dtype=bool)
        empty = np.flatnonzero(chosen & (self.totals == 0))
        if empty.size:
            raise ValueError(
                f"user(s) {empty[:10].tolist()} are sampled but have N_u = 0 records; "
                "their weight n_su/N_u is undefined"
            )
        self._round += 1
        self._inputs = (deltas, noise)
        start = time.perf_counter()
        try:
            result = self.driver.round(self._round, chosen, deltas.shape[2])
        finally:
            self._inputs = None
        end = time.perf_counter()
        shares, update = self._marks[STAGE_SHARES], self._marks[STAGE_UPDATE]
        self.last_round_timings = {
            "encrypt_weights": shares[0] - start,
            "silo_weighting": update[1] - shares[0],
            "aggregation": end - update[1],
        }
        return result


def _to_numpy(values: Any) -> np.ndarray:
    if hasattr(values, "detach"):
        values = values.detach().cpu().numpy()
    return np.asarray(values, dtype=np.float64)


class SecureAggregator:
    """The aggregation hook ``aggregate(deltas, counts, sampled, noise) -> Tensor[d]`` backed by Protocol 1.

    One per run: it holds that run's keys and state. The setup (keys, blinded histogram) runs once per distinct
    ``counts`` table and is reused by later rounds, as in the paper. Users with N_u = 0 have no records, hence no
    delta (their rows must be zero) and weight 0: they are left out of the sampled set. With ``clip`` and ``sigma``
    (a training run's C and noise multiplier) the no-wrap-around check of Theorem 4 uses them, as the protocol's
    public bounds; without them the magnitude bounds come from the data (with headroom) and larger values later
    trigger a new setup.

    Attributes:
        session: the current :class:`SecureSession` (None before the first call); its ``timings`` hold the setup
            times and ``last_round_timings`` those of the latest round.
        round_timings: per call, the protocol's per-part seconds of that round.

    Args:
        parameters: Protocol 1's :class:`~uldp.secure.config.ProtocolParameters`.
        clip: C, the bound on every delta coordinate (None: from the data).
        sigma: noise multiplier of the per-silo noise N(0, sigma^2 C^2 / |S|) (with ``clip``; None: from the data).
    """

    def __init__(
        self,
        parameters: ProtocolParameters,
        *,
        clip: float | None = None,
        sigma: float | None = None,
    ) -> None:
        self.parameters = parameters
        self._clip, self._sigma = clip, sigma
        self.session: SecureSession | None = None
        self._counts: np.ndarray | None = None
        self.round_timings: list[dict[str, float]] = []

    def __call__(
        self, deltas: list[Any], counts: np.ndarray, sampled: np.ndarray, noise: list[Any]
    ) -> Any:
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
            or self._counts is None
            or not np.array_equal(self._counts, table)
            or (not fixed_bounds and delta_bound > session.config.clip)
            or (not fixed_bounds and noise_bound > session.config.effective_noise_bound)
        ):
            bounds: dict[str, Any] = (
                {"clip": self._clip, "sigma": self._sigma or 0.0}
                if fixed_bounds
                else {"clip": max(1.0, 2 * delta_bound), "noise_bound": max(1.0, 2 * noise_bound)}
            )
            kept = (
                [
                    silo.verifier for silo in session.silos
                ]  # the silos keep their ring-Pedersen parameters
                if session is not None and session.config.n_silos == table.shape[0]
                else None
            )
            session = SecureSession(table, self.parameters, verifiers=kept, **bounds)
            self.session, self._counts = session, table.copy()
        result = session.aggregate(delta_array, noise_array, chosen & ~empty)
        self.round_timings.append(dict(session.last_round_timings))
        dtype = deltas[0].dtype if isinstance(deltas[0], torch.Tensor) else torch.float64
        return torch.as_tensor(result, dtype=dtype)
