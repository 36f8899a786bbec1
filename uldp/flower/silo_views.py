"""What a silo's ClientApp reads from its own files, kept between messages while its process lives.

Stage 1 of :mod:`uldp.flower.client` loads the silo's records and its patient ids; every later message (the private
set union's steps, the federation stage, Protocol 1's stages, each round) needs the same records again. Where the
ClientApp's process outlives a message (a long-lived :mod:`uldp.flower.worker` behind ``flower-supernode
--isolation process``, or a :class:`~uldp.flower.LocalGrid` in this process), :class:`SiloViews` keeps them, so a
round reads no file and imports nothing.

Only what the silo derives from its own files and its own node config is kept: the records, the pseudonyms, the
model template and the loss. Its state -- the federation's user list and ``n[s, u]``, Protocol 1's secrets, the
ledger of the rounds it answered (:class:`uldp.policy.SiloLedger`) -- stays in Flower's node context (and the
ledger file), as without the cache, so a cached view never decides what a silo answers or has released. A view
belongs to one run, one node and one node config: another run (a resubmission reads the files again), another
node id or another node config reads them again.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable

LOGGER = logging.getLogger("uldp.flower")


def view_key(context: Any) -> tuple:
    """What a view belongs to: the run and the node config (the silo's name, files and key file)."""
    return int(context.run_id), tuple(
        sorted((str(name), repr(value)) for name, value in context.node_config.items())
    )


class SiloViews:
    """The views of the nodes one ClientApp serves, one per node id (the last run's only).

    Args:
        read: ``context -> view``: reads the silo's files (:func:`uldp.flower.client.silo_view`); what it raises
            is raised again on the next message (nothing failed is kept).
    """

    def __init__(self, read: Callable[[Any], dict]) -> None:
        self._read = read
        self._views: dict[int, tuple[tuple, dict]] = {}
        self.reads = 0

    def get(self, context: Any) -> dict:
        """The node's view for the context's run and node config, read on the first message that needs it."""
        key = view_key(context)
        held = self._views.get(int(context.node_id))
        if held is None or held[0] != key:
            self._views.pop(
                int(context.node_id), None
            )  # the old run's records go before the new ones are read
            view = self._read(context)
            self.reads += 1
            LOGGER.info(
                "silo %r read its records for run %s (kept for its next messages)",
                view.get("name"),
                context.run_id,
            )
            self._views[int(context.node_id)] = (key, view)
            return view
        return held[1]
