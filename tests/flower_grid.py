"""A Flower ``Grid`` that delivers every message to in-process ClientApps (one Context per node): the Message API
end to end, without a SuperLink (the loopback test in tests/test_flower.py runs the real processes)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from flwr.app import Context, Error, Message, RecordDict
from flwr.serverapp import Grid
from flwr.supercore.task_identity import TaskIdentity


class LocalGrid(Grid):
    def __init__(self, app: Any, node_configs: list[dict]) -> None:
        TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = 1, 1, 1  # what a ServerApp process sets
        self.app = app
        self.contexts = {node: Context(run_id=1, node_id=node, node_config=config, state=RecordDict(), run_config={})
                         for node, config in enumerate(node_configs, start=101)}

    def set_run(self, run_id: int) -> None:
        pass

    @property
    def run(self) -> Any:
        return None

    def create_message(self, content: RecordDict, message_type: str, dst_node_id: int, group_id: str,
                       ttl: float | None = None) -> Message:
        return Message(content, dst_node_id=dst_node_id, message_type=message_type, group_id=group_id)

    def get_node_ids(self) -> Iterable[int]:
        return list(self.contexts)

    def push_messages(self, messages: Iterable[Message]) -> Iterable[str]:
        raise NotImplementedError

    def pull_messages(self, message_ids: Iterable[str]) -> Iterable[Message]:
        raise NotImplementedError

    def send_and_receive(self, messages: Iterable[Message], *, timeout: float | None = None) -> Iterable[Message]:
        replies = []
        for message in messages:
            try:
                replies.append(self.app(message, self.contexts[message.metadata.dst_node_id]))
            except Exception as error:  # a SuperNode answers a failing ClientApp with an error reply
                replies.append(Message(Error(code=0, reason=f"{type(error).__name__}: {error}"), reply_to=message))
        return replies
