"""uldp.flower.worker's loop without a SuperNode: how often it asks for a task (a fake Runtime API client), and
that bad waits are refused by name. tests/test_flower_loopback.py runs the worker behind real SuperNodes."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from uldp.flower import worker


class FakeRuntime:
    """A Runtime API client whose ``AcquireTask`` hands a task at the given request numbers (1-based), else none."""

    def __init__(self, tasks_at: set[int]) -> None:
        self.tasks_at, self.requests = tasks_at, 0

    def AcquireTask(self, request):  # Flower's name for it
        self.requests += 1
        given = self.requests in self.tasks_at
        return SimpleNamespace(HasField=lambda field: given, token="t" if given else "")

    def close(self) -> None:
        pass


def test_an_idle_worker_asks_less_and_less_often_and_quickly_again_after_a_task(monkeypatch):
    """Each empty answer doubles the wait, up to max_poll; a task brings it back to poll."""
    runtime, waits, ran = FakeRuntime(tasks_at={7, 9}), list[float](), list[int]()
    monkeypatch.setattr(
        worker.RuntimeHttpClient, "from_server_address", lambda **_: runtime, raising=True
    )
    monkeypatch.setattr(worker.time, "sleep", waits.append)
    monkeypatch.setattr(worker, "run_task", lambda *args, **kwargs: ran.append(runtime.requests))
    done = worker.serve("127.0.0.1:1", insecure=True, poll=0.05, max_poll=0.5, max_tasks=2)
    assert done == 2 and ran == [7, 9]
    assert waits == pytest.approx([0.05, 0.1, 0.2, 0.4, 0.5, 0.5, 0.05])


@pytest.mark.parametrize(
    "poll, max_poll, message",
    [(0.0, 0.5, "poll must be"), (0.5, 0.1, "max_poll must be")],
)
def test_bad_waits_are_refused_by_name(poll, max_poll, message):
    with pytest.raises(ValueError, match=message):
        worker.serve("127.0.0.1:1", insecure=True, poll=poll, max_poll=max_poll)
