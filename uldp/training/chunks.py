"""How a silo's users are trained together: chunks of users sorted by record count (:func:`user_chunks`), padded
to a common length (:func:`padded_indices`), under a memory bound (:func:`chunk_floats_for`, from the rough cost of a
record, :func:`per_record_floats`) and a fill rule (:data:`MIN_FILL`). The per-user engines of
:mod:`uldp.training.per_user` train chunk by chunk; how users are chunked changes nothing in their result, only
speed and peak memory (``tests/test_per_user.py``, ``tests/test_chunks.py``, ``benchmarks/chunk_size.py``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import Tensor

if TYPE_CHECKING:
    import contextlib
    from collections.abc import Callable

    from torch import nn

#: Default bound on the floats one chunk of users may hold at once (parameters, gradients, activations): 2**23
#: floats = 32 MiB. Chunking changes nothing in the result, only peak memory and speed; measured on a 2-core CPU
#: (benchmarks/per_user_training.py), the MNIST CNN at 1000 users ran 2.4 s at 2**23 against 3.3 s at 2**26 and
#: 3.0 s at 2**25 (the working set stays in cache), the Creditcard MLP the same at either.
DEFAULT_CHUNK_FLOATS = 2**23
#: On a GPU a chunk may hold this share of the device's free memory: there the cost is one kernel launch per layer
#: and chunk, whatever its size, and 2**23 floats (about 16 MNIST users) left it launch-bound (issue 43: 38-54k
#: record-steps per second on an H100, against 411k for one vmap over 10,000 users).
GPU_CHUNK_SHARE = 0.25


#: A chunk takes its next user (the largest so far) only while the chunk's records fill at least this share of the
#: slots it computes, every user padded to the largest's length. On a Zipf silo (200 users of 1-300 records) the
#: memory bound alone let the Creditcard MLP put them all in one chunk; with the rule it trains 1.49 (1 thread) and
#: 1.13 (2 threads) times faster, the MNIST CNN 1.09 and 1.03 times, and uniform silos chunk as before
#: (benchmarks/results/chunk_size.json, where two runs of one chunking differ by up to 11%).
MIN_FILL = 0.5


def chunk_floats_for(device: torch.device) -> int:
    """The default bound on a chunk's floats on ``device``: :data:`DEFAULT_CHUNK_FLOATS` on the CPU, and
    :data:`GPU_CHUNK_SHARE` of the free memory of a CUDA device (the estimate of :func:`user_chunks` is rough)."""
    if device.type != "cuda":
        return DEFAULT_CHUNK_FLOATS
    free, _ = torch.cuda.mem_get_info(device)
    return max(DEFAULT_CHUNK_FLOATS, int(free * GPU_CHUNK_SHARE) // 4)


def user_chunks(
    groups: list[np.ndarray],
    floats_per_user: Callable[[int], int],
    chunk_floats: int,
    padded_length: Callable[[int], int],
) -> list[np.ndarray]:
    """Split user positions, sorted by record count, into chunks whose memory estimate stays under the bound and whose
    records fill at least :data:`MIN_FILL` of the slots the chunk computes (each user padded to
    ``padded_length(n)`` of the chunk's largest count ``n``); a chunk of one user always forms. Each rule is called
    once per distinct record count."""
    counts = np.fromiter((g.size for g in groups), dtype=np.int64, count=len(groups))
    order = np.argsort(counts, kind="stable")
    sizes = counts[order]
    # the rules' terms per user, from one call per distinct count: a Python step per user was most of a call's
    # set-up at 10,000 users (43 ms on a 2-core CPU; an H200 trains their 5 epochs in a quarter of a second)
    distinct, position_of = np.unique(sizes, return_inverse=True)
    floats = np.array([floats_per_user(int(n)) for n in distinct], dtype=np.int64)[position_of]
    padded = np.array([padded_length(int(n)) for n in distinct], dtype=np.int64)[position_of]
    records_before = np.concatenate(([0], np.cumsum(sizes)))
    chunks, start = [], 0
    while start < len(order):
        stop = _chunk_stop(start, floats, padded, records_before, chunk_floats)
        chunks.append(order[start:stop])
        start = stop
    return chunks


def _chunk_stop(
    start: int,
    floats: np.ndarray,
    padded: np.ndarray,
    records_before: np.ndarray,
    chunk_floats: int,
) -> int:
    """One past the last user of the chunk that starts at ``start``: the first later user (counts grow along the
    order, so each next user sets the chunk's padded length) that would break the memory bound or the fill rule,
    looked for in windows that double, so a chunk costs time in proportion to its size."""
    window = 64
    while True:
        candidates = np.arange(start + 1, min(start + 1 + window, len(floats)))
        users = candidates + 1 - start
        too_big = users * floats[candidates] > chunk_floats
        too_sparse = records_before[candidates + 1] - records_before[start] < (
            MIN_FILL * users * padded[candidates]
        )
        broken = np.flatnonzero(too_big | too_sparse)
        if broken.size:
            return int(candidates[broken[0]])
        if candidates.size < window:  # the window reached the last user
            return len(floats)
        window *= 2


def padded_indices(
    groups: list[np.ndarray], members: np.ndarray, device: torch.device
) -> tuple[Tensor, Tensor]:
    """Record indices ``[Uc, n_max]`` (padding repeats index 0) and counts ``[Uc]`` of the chunk's users, on
    ``device`` (built on the CPU, moved once per chunk)."""
    rows = [groups[m] for m in members]
    counts = np.fromiter((row.size for row in rows), dtype=np.int64, count=len(rows))
    index = np.zeros((len(rows), int(counts.max())), dtype=np.int64)
    # the mask's row-major order is each user's records in turn: one assignment instead of a Python loop over
    # users, which was most of a call's set-up at 10,000 users (where an H200 trains 5 epochs in under half a second)
    index[np.arange(index.shape[1])[None, :] < counts[:, None]] = np.concatenate(rows)
    return torch.from_numpy(index).to(device), torch.from_numpy(counts).to(device)


def _forked_rng(device: torch.device) -> contextlib.AbstractContextManager:
    """Torch's global generator of the CPU and of ``device`` restored after the block."""
    return torch.random.fork_rng(devices=[device] if device.type == "cuda" else [])


def per_record_floats(model: nn.Module, x: Tensor) -> int:
    """A rough count of the floats one record costs in a forward/backward pass (input plus activations)."""
    activations = 0

    def count(_module: nn.Module, _inputs: object, output: object) -> None:
        nonlocal activations
        if isinstance(output, Tensor):
            activations += output[0].numel()

    handles = [m.register_forward_hook(count) for m in model.modules() if not list(m.children())]
    try:
        with torch.no_grad(), _forked_rng(x.device):  # leave the dropout draws to training
            model(x[:1])
    finally:
        for handle in handles:
            handle.remove()
    return x[0].numel() + 3 * activations
