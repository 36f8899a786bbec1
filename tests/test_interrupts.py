"""SIGTERM handled as Ctrl-C (uldp.common.interrupts)."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from uldp.common.interrupts import sigterm_interrupts


def test_sigterm_inside_the_block_raises_keyboard_interrupt_naming_it_and_the_old_handler_comes_back():
    before = signal.getsignal(signal.SIGTERM)
    reached = []
    with pytest.raises(KeyboardInterrupt, match=r"^stopped by SIGTERM$"), sigterm_interrupts():
        try:
            os.kill(os.getpid(), signal.SIGTERM)
        finally:
            reached.append("finally")  # what a save or a temporary file's cleanup relies on
    assert reached == ["finally"]
    assert signal.getsignal(signal.SIGTERM) is before


def test_outside_the_main_thread_the_handler_is_left_alone():
    before, seen = signal.getsignal(signal.SIGTERM), []

    def inside() -> None:
        with sigterm_interrupts():
            seen.append(signal.getsignal(signal.SIGTERM))

    thread = threading.Thread(target=inside)
    thread.start()
    thread.join()
    assert seen == [before]
