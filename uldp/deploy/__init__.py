"""A real federation across processes and machines on Flower: one server process and one process per silo.

- :mod:`uldp.deploy.wire`: what travels (explicit byte formats inside Flower messages, no pickle), handshake keys.
- :mod:`uldp.common.persist` (below deploy and the simulation): the array encoding, the configuration fingerprint
  and the checkpoint, the last good model written atomically after every round.
- :mod:`uldp.deploy.keys`: the server master key, per-silo keys and the handshake HMAC.
- :mod:`uldp.deploy.roles`: the interfaces of a method's server side and silo side.
- :mod:`uldp.deploy.method_roles`: those sides for every method of :mod:`uldp.methods`, from a run configuration.
- :mod:`uldp.deploy.server`: admission, Protocol 1 setup, rounds, aborts and checkpoints (Flower gRPC server).
- :mod:`uldp.deploy.silo`: the silo's Flower client.
- :mod:`uldp.deploy.legacy_cli`: ``uldp deploy server|silo|keys``.
"""

from __future__ import annotations

import logging


def quiet_flower_deprecation() -> None:
    """Drop Flower's deprecation banner for start_server/start_client (the chapter explains the choice).

    Flower's logger keeps its own handler; it stops propagating to the root logger so lines are not doubled, and
    follows the root logger's level (``--quiet``), which Flower resets when it is imported.
    """

    class _NoDeprecation(logging.Filter):
        def filter(self, record: logging.LogRecord) -> bool:
            return "DEPRECATED FEATURE" not in record.getMessage()

    flower = logging.getLogger("flwr")
    flower.addFilter(_NoDeprecation())
    flower.propagate = False
    flower.setLevel(max(logging.getLogger().getEffectiveLevel(), logging.INFO))
