"""Protocol 1 run in one process: :class:`SecureSession` (the server and every silo as objects, each message through
its bytes). The methods' aggregation hook backed by Protocol 1 drives the one
federation round instead (:class:`uldp.federation.SecureAggregator`).

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
from typing import TYPE_CHECKING

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
