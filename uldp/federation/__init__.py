"""The federation round that every transport drives: the method's silo role and one aggregation interface.

- :mod:`uldp.federation.silo`: :class:`MethodSilo`, one silo's side of any method (its policy check, what an answer
  releases, the round's update or Protocol 1's inputs), and :func:`update_bounds`, the norm bound of each silo's
  honest update.
- :mod:`uldp.federation.aggregation`: :class:`ServerAggregation` (set-up, begin round, finish round with the bound
  check) and :class:`SiloAggregation` (one stage at a time), each plain, masked sum (:mod:`uldp.secure.masked_sum`)
  or Protocol 1 (:mod:`uldp.secure.driver`), chosen by :func:`aggregation_kind`.
- :mod:`uldp.federation.local`: :class:`InProcessFederation`, every party in this process (the third transport),
  and :class:`InProcessAggregator`, the methods' aggregation hook over it that the simulation drives
  (:class:`SecureAggregator`: its Protocol 1 form, formerly ``uldp.secure.SecureAggregator``).

The transports: :mod:`uldp.flower` (Flower's Message API, in process on :class:`uldp.flower.LocalGrid` or on a
SuperLink), :mod:`uldp.deploy` (``uldp deploy``) and the simulation (:mod:`uldp.simulation`, through
:class:`InProcessAggregator`); each maps a stage to its own messages and nothing else.
"""

from uldp.federation.aggregation import (
    PLAIN,
    PLAIN_UPDATE,
    SERVER_AGGREGATIONS,
    SILO_SESSIONS,
    MaskedSumAggregation,
    MaskedSumSide,
    Payloads,
    PlainServer,
    PlainSilo,
    Protocol1Aggregation,
    Protocol1Side,
    RoundWork,
    ServerAggregation,
    SiloAggregation,
    aggregation_kind,
)
from uldp.federation.local import InProcessAggregator, InProcessFederation, SecureAggregator
from uldp.federation.silo import MethodSilo, SiloRound, update_bounds

__all__ = [
    "PLAIN",
    "PLAIN_UPDATE",
    "SERVER_AGGREGATIONS",
    "SILO_SESSIONS",
    "InProcessAggregator",
    "InProcessFederation",
    "MaskedSumAggregation",
    "MaskedSumSide",
    "MethodSilo",
    "Payloads",
    "PlainServer",
    "PlainSilo",
    "Protocol1Aggregation",
    "Protocol1Side",
    "RoundWork",
    "SecureAggregator",
    "ServerAggregation",
    "SiloAggregation",
    "SiloRound",
    "aggregation_kind",
    "update_bounds",
]
