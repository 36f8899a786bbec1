"""SIGTERM handled as Ctrl-C, so that a long command stopped by ``kill``, ``timeout`` or a scheduler saves its
progress on the way out (``finally`` blocks run; :func:`uldp.fitting.rounds.train_rounds` saves its checkpoint)."""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterator


def raise_interrupt(signum: int, frame: object) -> None:
    """Signal handler: raise ``KeyboardInterrupt("stopped by SIGTERM")`` (the signal's name), so ``finally`` blocks
    run (an atomic write in progress removes its temporary file) before the process goes.

    Raises:
        KeyboardInterrupt: Always.
    """
    raise KeyboardInterrupt(f"stopped by {signal.Signals(signum).name}")


@contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """While the block runs, SIGTERM stops it the way Ctrl-C does (:func:`raise_interrupt`); the previous handler
    comes back after it. Only the main thread may set handlers: elsewhere nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, raise_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
