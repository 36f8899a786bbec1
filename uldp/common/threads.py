"""How many CPU threads torch uses while the library trains: one by default, ``$ULDP_THREADS`` or an argument.

The methods' training runs many small tensor operations (per-user clipping, closed-form gradients of small models).
With torch's default, one intra-op thread per core, a second busy process on the machine makes those threads wait
on each other at every operation, and a round slows down far more than with one thread. ``benchmarks/threads.py``
measures it: on the project's shared 2-core machine (load average 12 to 17 from other work), a HeartDisease round
took 2.6x and 2.9x longer beside a busy process with torch's 2 threads, 1.6x and 2.5x with one thread, and one
thread was the faster setting both with the competitor (2.6x, 1.7x) and without it (1.6x, 1.4x). Large
convolutions (MNIST) may gain from more threads on a machine of their own: set ``ULDP_THREADS`` (or
``uldp run --threads``).
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from typing import TYPE_CHECKING

import torch

from uldp.common.checks import check_integer

if TYPE_CHECKING:
    from collections.abc import Iterator

#: Torch intra-op threads of a run when neither an argument nor ``$ULDP_THREADS`` says otherwise.
DEFAULT_THREADS = 1
ENVIRONMENT_VARIABLE = "ULDP_THREADS"


def thread_count(threads: int | None = None) -> int:
    """The number of threads to use: ``threads``, else ``$ULDP_THREADS``, else :data:`DEFAULT_THREADS`.

    Raises:
        ValueError: ``threads`` or ``$ULDP_THREADS`` is not an integer >= 1.

    Example:
        >>> thread_count(3)
        3
    """
    if threads is not None:
        return check_integer("threads", threads)
    text = os.environ.get(ENVIRONMENT_VARIABLE, "").strip()
    if not text:
        return DEFAULT_THREADS
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{ENVIRONMENT_VARIABLE} must be an integer >= 1, got {text!r}") from None
    return check_integer(ENVIRONMENT_VARIABLE, value)


@contextmanager
def torch_threads(threads: int | None = None) -> Iterator[int]:
    """Run the block with :func:`thread_count` ``(threads)`` torch intra-op threads; restore the previous number.

    Yields:
        The number of threads in use.
    """
    count = thread_count(threads)
    previous = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield count
    finally:
        torch.set_num_threads(previous)
