"""The federation round with every party in this process, messages passed by call: the transport of the simulation,
of tests and of small runs, next to :mod:`uldp.flower` and :mod:`uldp.deploy` (which carry the same stages over the
network).

- :class:`InProcessFederation` holds the server's :class:`~uldp.federation.ServerAggregation` and each silo's
  :class:`~uldp.federation.MethodSilo` with its :class:`~uldp.federation.SiloAggregation`;
  :meth:`~InProcessFederation.aggregate` runs one round's stages (Protocol 1's shares and update, or the single
  update stage) and returns the decoded sum, checked against the bounds as every transport checks it.
- :class:`InProcessAggregator` is the methods' aggregation hook over the same round, for the simulation
  (:func:`uldp.simulation.run` with ``secure=True``), whose silos' deltas and noise are computed all at once: called
  with per-user deltas for ULDP-AVG-w / ULDP-SGD-w (Protocol 1), :meth:`~InProcessAggregator.sum_updates` with the
  silos' finished updates for every other method (the masked sum), as Flower's silos send them;
  :class:`SecureAggregator` is its Protocol 1 form under its public name.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from uldp.federation.aggregation import SERVER_AGGREGATIONS, SILO_SESSIONS
from uldp.federation.silo import update_bounds
from uldp.method_names import PROTOCOL_1
from uldp.methods import enhanced_weights
from uldp.methods.base import needed
from uldp.methods.uldp_avg import silo_weighted_sum

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from uldp.federation.aggregation import Payloads, RoundWork, ServerAggregation, SiloAggregation
    from uldp.federation.silo import MethodSilo
    from uldp.methods import Method
    from uldp.secure.config import ProtocolConfig, ProtocolParameters


class InProcessFederation:
    """The server's and every silo's side of one aggregation in this process; the set-up runs on construction.

    Args:
        silos: Every silo's :class:`~uldp.federation.MethodSilo`, in silo order.
        kind: The aggregation (:func:`uldp.federation.aggregation_kind`).
        protocol: Protocol 1's session parameters (Protocol 1 only).
    """

    def __init__(
        self, silos: Sequence[MethodSilo], kind: str, *, protocol: ProtocolConfig | None = None
    ) -> None:
        def session() -> ProtocolConfig:
            if protocol is None:
                raise ValueError(
                    "Protocol 1 needs its session parameters (protocol=ProtocolConfig)"
                )
            return protocol

        self.silos = list(silos)
        self.sides = [
            SILO_SESSIONS[kind].start(
                None,
                silo_id=silo.silo_id,
                n_silos=len(self.silos),
                counts=silo.counts[silo.silo_id],
                protocol=session,
            )
            for silo in self.silos
        ]
        self._work: dict[int, RoundWork] = {}
        self.server = SERVER_AGGREGATIONS[kind](len(self.silos), self._exchange, protocol=protocol)
        self.server.setup()

    def _exchange(
        self, stage: str, round_index: int, payloads: dict[int, Payloads]
    ) -> Mapping[int, Payloads]:
        return {
            s: self.sides[s].answer(stage, round_index, p, work=self._work.get(s))
            for s, p in payloads.items()
        }

    def aggregate(
        self,
        params: np.ndarray,
        round_index: int,
        sampled: np.ndarray,
        round_seeds: Sequence[np.random.SeedSequence],
        *,
        bounds: Sequence[float] | None = None,
    ) -> np.ndarray:
        """One round: every silo's work from its own stream, the aggregation's stages, the decoded sum.

        Args:
            params: The round's model (flat).
            round_index: The round (1, 2, ...; each at most once).
            sampled: bool [|U|], the round's users.
            round_seeds: Per silo, the stream of its noise and record order.
            bounds: Per silo, the largest norm of its honest update (:func:`uldp.federation.update_bounds`).

        Raises:
            ValueError: a refused stage, a round answered already, or a sum past the bounds.
        """
        self._work = {
            s: silo.work(params, round_seeds[s], sampled, lambda: None)
            for s, silo in enumerate(self.silos)
        }
        try:
            outgoing = self.server.begin_round(round_index, sampled)
            answers = self._exchange(self.server.round_stages[-1], round_index, outgoing)
            return self.server.finish_round(round_index, answers, params, bounds=bounds)
        finally:
            self._work = {}


def _to_numpy(values: Any) -> np.ndarray:
    if hasattr(values, "detach"):
        values = values.detach().cpu().numpy()
    return np.asarray(values, dtype=np.float64)


@dataclass
class _GivenWork:
    """A silo's round as the simulation computed it (a :class:`~uldp.federation.aggregation.RoundWork`): its clipped
    per-user deltas ``[|U|, d]`` and its noise ``[d]`` (tensors, and as float64 arrays) and its row of the round's
    enhanced weights."""

    deltas: torch.Tensor
    noise: torch.Tensor
    inputs: tuple[np.ndarray, np.ndarray]
    weights: np.ndarray

    def update(self) -> np.ndarray:
        return silo_weighted_sum(self.deltas, self.weights, self.noise).detach().cpu().numpy()

    def secure_inputs(self) -> tuple[np.ndarray, np.ndarray]:
        return self.inputs


@dataclass
class _GivenUpdate:
    """A silo's finished update as the simulation computed it (a :class:`~uldp.federation.aggregation.RoundWork` of
    the methods without per-user weights): what the plain and masked-sum aggregations send."""

    values: np.ndarray

    def update(self) -> np.ndarray:
        return self.values

    def secure_inputs(self) -> tuple[np.ndarray, np.ndarray]:
        raise ValueError(
            "Protocol 1 weights per-user deltas; a silo's finished update goes through the plain or masked sum"
        )


class InProcessAggregator:
    """The methods' aggregation hook ``aggregate(deltas, counts, sampled, noise) -> Tensor[d]``
    (:data:`uldp.methods.base.AggregateFn`, what ULDP-AVG-w / ULDP-SGD-w's round calls) driven through the one
    federation round: the server's :class:`~uldp.federation.ServerAggregation` and each silo's
    :class:`~uldp.federation.SiloAggregation` of ``kind``, every message as bytes, as Flower and deploy carry them.

    It returns ``sum_s (sum_u w_su deltas[s][u] + noise[s])`` with ``w_su = n_su / N_u`` for sampled users
    (Eq. (3), Algorithm 4): bit for bit :func:`uldp.methods.aggregate`'s for :data:`~uldp.federation.PLAIN`
    (the same float sums in silo order), within P of it for Protocol 1 (Theorem 4) and within the masked sum's
    resolution for :data:`~uldp.method_names.MASKED_SUM`. :meth:`sum_updates` is the same round for the methods
    whose weights need no counts (:data:`uldp.methods.base.SumFn`): the silos' finished updates in, their sum out.

    One per run: it holds that run's keys and state. The set-up runs once per distinct ``counts`` table and is reused
    by later rounds, as in the paper; a new session keeps each silo's last answered round and its ring-Pedersen
    verifier (:meth:`~uldp.federation.Protocol1Side.start`). Users with N_u = 0 have no records, hence no delta
    (their rows must be zero) and weight 0: they are left out of the sampled set. With ``clip`` and ``sigma`` (a
    training run's C and noise multiplier) Protocol 1's no-wrap-around check (Theorem 4) uses them as the public
    bounds; without them the bounds come from the data (with headroom) and larger values later start a new session.

    Args:
        kind: The aggregation (:func:`uldp.federation.aggregation_kind`).
        parameters: Protocol 1's :class:`~uldp.secure.config.ProtocolParameters` (Protocol 1 only).
        clip: C, the bound on every delta coordinate (None: from the data).
        sigma: The noise multiplier of the per-silo noise N(0, sigma^2 C^2 / |S|) (with ``clip``).
        method: The run's method: each round's decoded sum is checked against its silos' norm bounds
            (:func:`uldp.federation.update_bounds`, as every transport checks them); None checks none (an audit's
            crafted deltas).

    Attributes:
        config: Protocol 1's session parameters of the current session (None before the first round, or for
            another aggregation).
        timings: Seconds of the current session's set-up, named after Protocol 1's parts as stored runs and the
            protocol chapter read them: ``paillier_keygen`` (until the first message: the server's keys),
            ``key_exchange`` (until the last set-up stage) and ``blinded_histogram`` (that stage; for the masked
            sum, which has no keys of the server's and no histogram, these are its key and directory stages).
        round_timings: Per call, the round's parts: ``encrypt_weights`` (until the silos are first asked),
            ``silo_weighting`` (the silos' stages) and ``aggregation`` (the server's decoding).

    Raises:
        ValueError: an unknown ``kind``, or Protocol 1 without ``parameters``.
    """

    def __init__(
        self,
        kind: str,
        *,
        parameters: ProtocolParameters | None = None,
        clip: float | None = None,
        sigma: float | None = None,
        method: Method | None = None,
    ) -> None:
        if kind not in SERVER_AGGREGATIONS:
            raise ValueError(
                f"unknown aggregation {kind!r}; known: {', '.join(SERVER_AGGREGATIONS)}"
            )
        self._server_class = SERVER_AGGREGATIONS[kind]
        if self._server_class.needs_protocol and parameters is None:
            raise ValueError(f"the {kind} aggregation needs Protocol 1's parameters (parameters=)")
        self.kind, self.parameters, self.method = kind, parameters, method
        self._clip, self._sigma = clip, sigma
        self.config: ProtocolConfig | None = None
        self.timings: dict[str, float] = {}
        self.round_timings: list[dict[str, float]] = []
        self._server: ServerAggregation | None = None
        self._sides: list[SiloAggregation] = []
        self._counts: np.ndarray | None = None
        self._round = 0
        self._work: dict[int, RoundWork] = {}
        self._marks: dict[str, tuple[float, float]] = {}

    def _exchange(
        self, stage: str, round_index: int, payloads: dict[int, Payloads]
    ) -> dict[int, Payloads]:
        """Deliver each silo's message (bytes) to its side and collect the answers (bytes), timing the stage."""
        start = time.perf_counter()
        answers = {
            s: self._sides[s].answer(stage, round_index, p, work=self._work.get(s))
            for s, p in payloads.items()
        }
        self._marks[stage] = (start, time.perf_counter())
        return answers

    def _needs_session(self, table: np.ndarray, delta_bound: float, noise_bound: float) -> bool:
        if self._server is None or self._counts is None or not np.array_equal(self._counts, table):
            return True
        config = self.config
        return (
            config is not None
            and self._clip is None
            and (delta_bound > config.clip or noise_bound > config.effective_noise_bound)
        )

    def _protocol(
        self, table: np.ndarray, delta_bound: float, noise_bound: float
    ) -> ProtocolConfig:
        """Protocol 1's session parameters for ``table``: the run's C and sigma, or the data's bounds with headroom.

        Raises:
            ValueError: before anything is sent, on N_u > N_max (Theorem 4's condition (1)) or a possible wrap-around.
        """
        from uldp.secure import encoding  # the secure extra, imported when used
        from uldp.secure.config import ProtocolConfig

        parameters = needed(self.parameters, "parameters")
        encoding.check_counts(table, n_max=parameters.n_max)
        bounds: dict[str, Any] = (
            {"clip": self._clip, "sigma": self._sigma or 0.0}
            if self._clip is not None
            else {"clip": max(1.0, 2 * delta_bound), "noise_bound": max(1.0, 2 * noise_bound)}
        )
        n_silos, n_users = table.shape
        return ProtocolConfig(n_silos=n_silos, n_users=n_users, parameters=parameters, **bounds)

    def _start_session(self, table: np.ndarray, delta_bound: float, noise_bound: float) -> None:
        """A new session: each silo's side (keeping what its previous side answered), then the server's set-up."""
        config = (
            self._protocol(table, delta_bound, noise_bound)
            if self._server_class.needs_protocol
            else None
        )

        def session() -> ProtocolConfig:
            return needed(config, "config")

        start = time.perf_counter()
        kept = self._sides if len(self._sides) == table.shape[0] else [None] * table.shape[0]
        self._marks = {}
        self._sides = [
            SILO_SESSIONS[self.kind].start(
                previous, silo_id=s, n_silos=table.shape[0], counts=table[s], protocol=session
            )
            for s, previous in enumerate(kept)
        ]
        server = self._server_class(table.shape[0], self._exchange, protocol=config)
        server.setup()
        end = time.perf_counter()
        first = min((mark[0] for mark in self._marks.values()), default=end)
        stages = self._sides[0].setup_stages
        last = self._marks[stages[-1]][0] if stages and stages[-1] in self._marks else end
        self.timings = {
            "paillier_keygen": first - start,
            "key_exchange": last - first,
            "blinded_histogram": end - last,
        }
        self._server, self.config, self._counts = server, config, table.copy()

    def aggregate_arrays(
        self, work: Sequence[RoundWork], table: np.ndarray, sampled: np.ndarray, like: np.ndarray
    ) -> np.ndarray:
        """One round through the aggregation: begin, every silo's update stage, finish (with the bounds check).

        Args:
            work: Per silo, its round (:class:`~uldp.federation.aggregation.RoundWork`).
            table: ``n[s, u]``, the current session's.
            sampled: bool [|U|], the round's users (each with N_u > 0).
            like: The sum's dtype and size.

        Returns:
            ``sum_s update_s`` as an array like ``like``.
        """
        server = needed(self._server, "session")
        self._round += 1
        self._work, self._marks = dict(enumerate(work)), {}
        bounds = (
            None
            if self.method is None
            else update_bounds(
                self.method, n_silos=len(work), sampled=sampled, size=like.size, counts=table
            )
        )
        start = time.perf_counter()
        try:
            payloads = server.begin_round(self._round, sampled)
            answers = self._exchange(server.round_stages[-1], self._round, payloads)
            asked = self._marks[server.round_stages[0]][0]
            answered = time.perf_counter()
            total = server.finish_round(self._round, answers, like, bounds=bounds)
        finally:
            self._work = {}
        self.round_timings.append(
            {
                "encrypt_weights": asked - start,
                "silo_weighting": answered - asked,
                "aggregation": time.perf_counter() - answered,
            }
        )
        return total

    def __call__(
        self, deltas: list[Any], counts: np.ndarray, sampled: np.ndarray, noise: list[Any]
    ) -> Any:
        """``sum_s (sum_u w_su deltas[s][u] + noise[s])``, ``w_su = n_su / N_u`` for sampled users, through the
        aggregation.

        Returns:
            A tensor of the dtype of ``deltas[0]`` (float64 for arrays), on the CPU.

        Raises:
            ValueError: a user without records has a non-zero delta, a sum past the method's bounds, or any
                refusal of the aggregation's stages.
        """
        table = np.asarray(counts).astype(np.int64)
        empty = table.sum(axis=0) == 0
        chosen = np.asarray(sampled, dtype=bool) & ~empty
        inputs = [(_to_numpy(d), _to_numpy(z)) for d, z in zip(deltas, noise, strict=True)]
        if any(bool(np.any(d[empty] != 0)) for d, _ in inputs):
            raise ValueError("users with N_u = 0 records must have zero deltas in every silo")
        delta_bound = max(float(np.abs(d).max(initial=0.0)) for d, _ in inputs)
        noise_bound = max(float(np.abs(z).max(initial=0.0)) for _, z in inputs)
        if self._needs_session(table, delta_bound, noise_bound):
            self._start_session(table, delta_bound, noise_bound)
        dtype = deltas[0].dtype if isinstance(deltas[0], torch.Tensor) else torch.float64
        weights = enhanced_weights(table, chosen)
        work = [
            _GivenWork(torch.as_tensor(d), torch.as_tensor(z), inputs[s], weights[s])
            for s, (d, z) in enumerate(zip(deltas, noise, strict=True))
        ]
        like = np.zeros(inputs[0][1].shape, dtype=torch.zeros(0, dtype=dtype).numpy().dtype)
        return torch.as_tensor(self.aggregate_arrays(work, table, chosen, like), dtype=dtype)

    def sum_updates(
        self, updates: list[Any], counts: np.ndarray, sampled: np.ndarray
    ) -> torch.Tensor:
        """``sum_s updates[s]`` through the aggregation: the hook of the methods whose weights need no counts
        (:data:`uldp.methods.base.SumFn`), each silo's finished update sent as Flower's silo sends it (masked, for
        :data:`~uldp.method_names.MASKED_SUM`), the sum decoded and checked against the method's bounds.

        Args:
            updates: Per silo, its update ``[d]`` (tensors or arrays).
            counts: ``n[s, u]`` (the bounds' weights; one session per distinct table).
            sampled: bool [|U|], the round's users.

        Returns:
            A tensor of the dtype of ``updates[0]`` (float64 for arrays), on its device (the CPU for arrays).

        Raises:
            ValueError: Protocol 1 (it weights per-user deltas: :meth:`__call__`), a sum past the method's bounds,
                an update past the masked sum's range, or any refusal of the aggregation's stages.
        """
        if self._server_class.needs_protocol:
            raise ValueError(
                f"the {self.kind} aggregation weights per-user deltas (call the aggregator with them); the "
                f"silos' finished updates go through the plain or masked-sum aggregation"
            )
        table = np.asarray(counts).astype(np.int64)
        if self._needs_session(table, 0.0, 0.0):
            self._start_session(table, 0.0, 0.0)
        values = [
            u.detach().cpu().numpy() if isinstance(u, torch.Tensor) else np.asarray(u, np.float64)
            for u in updates
        ]
        like = np.zeros_like(values[0])
        total = self.aggregate_arrays(
            [_GivenUpdate(v) for v in values], table, np.asarray(sampled, dtype=bool), like
        )
        device = updates[0].device if isinstance(updates[0], torch.Tensor) else None
        return torch.from_numpy(total).to(device)


class SecureAggregator(InProcessAggregator):
    """Protocol 1 as the methods' aggregation hook: an :class:`InProcessAggregator` of kind
    :data:`~uldp.method_names.PROTOCOL_1`, a thin wrapper kept because it is public API
    (formerly ``uldp.secure.SecureAggregator``; used by the deploying chapter and the audits); it adds nothing to
    the round.

    Args:
        parameters: Protocol 1's :class:`~uldp.secure.config.ProtocolParameters`.
        clip: C (None: from the data).
        sigma: The noise multiplier (with ``clip``).
        method: The run's method, whose bounds each round's sum is checked against (None: not checked).
    """

    def __init__(
        self,
        parameters: ProtocolParameters,
        *,
        clip: float | None = None,
        sigma: float | None = None,
        method: Method | None = None,
    ) -> None:
        super().__init__(PROTOCOL_1, parameters=parameters, clip=clip, sigma=sigma, method=method)
