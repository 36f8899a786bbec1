"""The check the per-user engine's tests share: :func:`uldp.training.per_user.train_users` (fast path) lands on its
oracle, the plain per-user loop :func:`~uldp.training.per_user.train_users_loop`, on the same mini-batches."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from uldp.training.per_user import flat_parameters, record_keys, train_users, train_users_loop

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    import numpy as np


def assert_fast_path_equals_loop(
    model: torch.nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    groups: Sequence[np.ndarray],
    *,
    loss_fn: Callable,
    local_lr: float,
    epochs: int,
    batch_size: int,
    key_seed: int,
    atol: float,
    moved: float | None = None,
    fast_model: torch.nn.Module | None = None,
    **fast_options: Any,
) -> None:
    """Train ``groups`` from ``model``'s parameters both ways and compare the deltas to ``atol``.

    Args:
        model: The model (the loop's; the fast path's too unless ``fast_model`` is given).
        x, y, groups: The records, targets and each user's record indices.
        loss_fn, local_lr, epochs, batch_size: The local training.
        key_seed: Seed of the record order keys both engines share.
        atol: Absolute tolerance.
        moved: If given, the loop's largest delta must exceed it (the users did move).
        fast_model: The fast path's model (e.g. :func:`~uldp.training.unfold.vmap_friendly` of ``model``).
        fast_options: More arguments of the fast path (``chunk_floats``).
    """
    params = flat_parameters(model)
    kwargs: dict[str, Any] = dict(
        loss_fn=loss_fn,
        local_lr=local_lr,
        epochs=epochs,
        batch_size=batch_size,
        keys=record_keys(x.shape[0], epochs, torch.Generator().manual_seed(key_seed)),
    )
    fast = train_users(
        model if fast_model is None else fast_model, params, x, y, groups, **kwargs, **fast_options
    )
    slow = train_users_loop(model, params, x, y, groups, **kwargs)
    if moved is not None:
        assert slow.abs().max() > moved
    torch.testing.assert_close(fast, slow, atol=atol, rtol=0)
