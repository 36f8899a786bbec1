"""A Flower ``Grid`` that hands every message to ClientApps in this process, one ``Context`` per silo.

The same :class:`~uldp.flower.UldpStrategy` and ``ClientApp`` objects, the same ``Message`` and record types and
the same per-node context state as on a SuperLink with SuperNodes, without their processes: to try a federation
in a notebook or a test before deploying it (``tests/test_flower_loopback.py`` runs the real processes).
"""

from __future__ import annotations

import tempfile
from typing import TYPE_CHECKING, Any

from flwr.app import Context, Error, Message, RecordDict
from flwr.serverapp import Grid
from flwr.supercore.task_identity import TaskIdentity

if TYPE_CHECKING:
    from collections.abc import Iterable

    from flwr.supercore.run import Run


class LocalGrid(Grid):
    """The nodes ``101, 102, ...``, one per node config, each running ``app`` (a ``ClientApp``).

    Args:
        app: The ClientApp every node runs.
        node_configs: Per node, what ``flower-supernode --node-config`` would give it.
    """

    def __init__(self, app: Any, node_configs: list[dict]) -> None:
        TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = (
            1,
            1,
            1,
        )  # what a ServerApp process sets
        self.app = app
        # one grid is one run (run id 1): a silo's ledger lives with the grid unless its config names one
        self._ledgers = tempfile.TemporaryDirectory(prefix="uldp-local-grid-")
        self.contexts = {
            node: Context(
                run_id=1,
                node_id=node,
                node_config={"uldp-ledger": f"{self._ledgers.name}/{node}.json", **config},
                state=RecordDict(),
                run_config={},
            )
            for node, config in enumerate(node_configs, start=101)
        }

    def set_run(self, run: Run) -> None:
        """Nothing to set: one run."""

    @property
    def run(self) -> Any:
        """No SuperLink run."""
        return None

    def create_message(
        self,
        content: RecordDict,
        message_type: str,
        dst_node_id: int,
        group_id: str,
        ttl: float | None = None,
    ) -> Message:
        """A message to ``dst_node_id``."""
        return Message(
            content, dst_node_id=dst_node_id, message_type=message_type, group_id=group_id
        )

    def get_node_ids(self) -> Iterable[int]:
        """The node ids."""
        return list(self.contexts)

    def push_messages(self, messages: Iterable[Message]) -> Iterable[str]:
        """Not used: :meth:`send_and_receive` delivers at once."""
        raise NotImplementedError("LocalGrid delivers through send_and_receive")

    def pull_messages(self, message_ids: Iterable[str]) -> Iterable[Message]:
        """Not used: :meth:`send_and_receive` delivers at once."""
        raise NotImplementedError("LocalGrid delivers through send_and_receive")

    def send_and_receive(
        self, messages: Iterable[Message], *, timeout: float | None = None
    ) -> Iterable[Message]:
        """Each message's reply from its node's ClientApp (an error reply when the ClientApp raises, as a
        SuperNode answers)."""
        replies = []
        for message in messages:
            try:
                replies.append(self.app(message, self.contexts[message.metadata.dst_node_id]))
            except (
                Exception
            ) as error:  # a SuperNode answers a failing ClientApp with an error reply
                replies.append(
                    Message(
                        Error(code=0, reason=f"{type(error).__name__}: {error}"), reply_to=message
                    )
                )
        return replies
