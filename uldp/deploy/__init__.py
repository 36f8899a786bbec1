"""``uldp deploy``: a federation on Flower's SuperLink and SuperNodes, run from a settings file.

- :mod:`uldp.deploy.config`: :class:`~uldp.deploy.config.DeployConfig`, a built-in dataset's settings file.
- :mod:`uldp.deploy.app`: the uldp ServerApp and ClientApp (:class:`uldp.flower.UldpStrategy` and the silo ClientApp)
  driven by the settings file: a built-in dataset's run configuration, or a hospital's own table.
- :mod:`uldp.deploy.superlink`: the processes: a SuperLink running that app (server), a SuperNode with its ClientApp
  in the same process (silo), and the silo's node config from its settings.
- :mod:`uldp.deploy.credentials`: the silos' relay key and the SuperNodes' authentication keys.
- :mod:`uldp.deploy.cli`: ``uldp deploy server|silo|keys``.

The earlier runtime, on Flower's deprecated start_server/start_client, stays until the book's deployment chapter and
the fault tests move to the above, then goes: :mod:`uldp.deploy.legacy_cli` (``python -m uldp.deploy.legacy_cli``),
:mod:`uldp.deploy.server`, :mod:`uldp.deploy.silo`, :mod:`uldp.deploy.method_roles`, :mod:`uldp.deploy.roles`,
:mod:`uldp.deploy.wire`, :mod:`uldp.deploy.keys` and :mod:`uldp.deploy.settings`.
"""

from __future__ import annotations

import logging


def quiet_flower_deprecation() -> None:
    """Drop Flower's deprecation banner for start_server/start_client (the earlier runtime's; the chapter explains).

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
