"""The federation round with every party in this process, messages passed by call: the transport of tests and of
small runs, next to :mod:`uldp.flower` and :mod:`uldp.deploy` (which carry the same stages over the network).

:class:`InProcessFederation` holds the server's :class:`~uldp.federation.ServerAggregation` and each silo's
:class:`~uldp.federation.MethodSilo` with its :class:`~uldp.federation.SiloAggregation`; :meth:`~InProcessFederation.
aggregate` runs one round's stages (Protocol 1's shares and update, or the single update stage) and returns the
decoded sum, checked against the bounds as every transport checks it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from uldp.federation.aggregation import SERVER_AGGREGATIONS, SILO_SESSIONS

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    import numpy as np

    from uldp.federation.aggregation import Payloads, RoundWork
    from uldp.federation.silo import MethodSilo
    from uldp.secure.config import ProtocolConfig


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
