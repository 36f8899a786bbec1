"""The fast per-user engine against the plain per-user loop (its oracle), and its building blocks."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings, strategies as st
from per_user_checks import assert_fast_path_equals_loop
from torch import nn

from uldp.training.per_user import (
    ParameterLayout,
    clip_rows,
    flat_parameters,
    record_keys,
    train_user_chunks,
    train_users,
    user_gradient_chunks,
    user_gradients,
)
from uldp.training.unfold import vmap_friendly


def cross_entropy(outputs, targets, weight):
    per_record = F.cross_entropy(outputs, targets, reduction="none")
    weight = torch.ones_like(per_record) if weight is None else weight
    return (per_record * weight).sum() / weight.sum().clamp_min(1.0)


class TinyCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1, self.conv2 = nn.Conv2d(1, 3, 3), nn.Conv2d(3, 4, 3, stride=2, padding=1)
        self.dropout, self.fc = nn.Dropout(0.5), nn.Linear(36, 3)

    def forward(self, x):
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        return self.fc(self.dropout(F.relu(self.conv2(x)).flatten(1)))


def mlp() -> nn.Module:
    return nn.Sequential(
        nn.Linear(5, 8), nn.ReLU(), nn.GroupNorm(2, 8), nn.Dropout(0.5), nn.Linear(8, 3)
    )


def problem(n_records: int, n_users: int, shape: tuple[int, ...], seed: int):
    gen = torch.Generator().manual_seed(seed)
    x, y = (
        torch.randn((n_records, *shape), generator=gen),
        torch.randint(0, 3, (n_records,), generator=gen),
    )
    owner = (
        np.random.default_rng(seed).zipf(1.5, n_records) % n_users
    )  # skewed: some users hold many records
    groups = [np.flatnonzero(owner == u) for u in np.unique(owner)]
    return x, y, groups


@pytest.mark.parametrize(
    "batch_size, chunk_floats, dtype, tolerance",
    [
        (1000, 2**22, torch.float32, 1e-5),  # deterministic full-batch: the 1e-5 in float32
        (
            3,
            2**22,
            torch.float64,
            1e-10,
        ),  # many mini-batch steps amplify float32 rounding; float64 shows equality
        (3, 5000, torch.float64, 1e-10),  # and chunking changes nothing
    ],
)
def test_fast_path_equals_loop_on_mlp(batch_size, chunk_floats, dtype, tolerance):
    torch.manual_seed(0)
    model = mlp().to(dtype).eval()  # deterministic: dropout off
    x, y, groups = problem(200, 30, (5,), seed=1)
    x = x.to(dtype)
    assert_fast_path_equals_loop(
        model,
        x,
        y,
        groups,
        loss_fn=cross_entropy,
        local_lr=0.2,
        epochs=3,
        batch_size=batch_size,
        key_seed=2,
        atol=tolerance,
        moved=1e-3,
        chunk_floats=chunk_floats,
    )


@pytest.mark.parametrize("convert", [False, True])
def test_fast_path_equals_loop_on_cnn(convert):
    torch.manual_seed(0)
    model = TinyCNN().eval()
    x, y, groups = problem(60, 10, (1, 12, 12), seed=3)
    assert_fast_path_equals_loop(
        model,
        x,
        y,
        groups,
        loss_fn=cross_entropy,
        local_lr=0.1,
        epochs=2,
        batch_size=4,
        key_seed=4,
        atol=1e-5,
        fast_model=vmap_friendly(model) if convert else None,
    )


def test_user_gradients_equal_autograd_per_user():
    torch.manual_seed(0)
    model = mlp().eval()
    x, y, groups = problem(80, 12, (5,), seed=5)
    grads = user_gradients(
        model, flat_parameters(model), x, y, groups, loss_fn=cross_entropy, chunk_floats=3000
    )
    for row, records in enumerate(groups):
        model.zero_grad()
        cross_entropy(model(x[records]), y[records], None).backward()
        expected = torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])
        torch.testing.assert_close(grads[row], expected, atol=1e-6, rtol=1e-5)


def _chunks_of(call, **kwargs) -> list[tuple[np.ndarray, torch.Tensor]]:
    chunks: list[tuple[np.ndarray, torch.Tensor]] = []
    call(consume=lambda rows, values: chunks.append((rows.copy(), values.clone())), **kwargs)
    return chunks


@pytest.mark.parametrize("engine", ["train", "gradients"])
def test_chunks_hand_every_user_once_within_the_bound_and_equal_the_whole_result(engine):
    """The streamed engines (what a silo's weighted sum consumes) give each user's row once, in chunks that fit the
    memory bound, with the values of the whole ``[len(groups), d]`` result."""
    torch.manual_seed(0)
    model = mlp().eval()
    x, y, groups = problem(300, 40, (5,), seed=6)
    d = flat_parameters(model).numel()
    common: dict[str, Any] = dict(
        model=model, params=flat_parameters(model), x=x, y=y, groups=groups, loss_fn=cross_entropy
    )
    bound = 40 * d  # a few users per chunk
    if engine == "train":
        training: dict[str, Any] = dict(
            local_lr=0.2, epochs=2, batch_size=3, keys=record_keys(300, 2, torch.Generator())
        )
        chunks = _chunks_of(train_user_chunks, **common, **training, chunk_floats=bound)
        whole = train_users(**common, **training, chunk_floats=bound)
        # the engine's count per user, besides its records: local model, gradient and step
        per_user = 3 * d
    else:
        chunks = _chunks_of(user_gradient_chunks, **common, chunk_floats=bound)
        whole = user_gradients(**common, chunk_floats=bound)
        per_user = d
    rows = np.concatenate([r for r, _ in chunks])
    assert len(chunks) > 2 and sorted(rows.tolist()) == list(range(len(groups)))
    assert all(len(r) == 1 or len(r) * per_user <= bound for r, _ in chunks)
    streamed = torch.zeros_like(whole)
    for r, values in chunks:
        assert values.shape == (len(r), d)
        streamed[torch.from_numpy(r)] = values
    assert torch.equal(streamed, whole)


def test_dropout_draws_differ_between_users():
    model = mlp().train()
    x = torch.randn(4, 5).repeat(2, 1)
    y = torch.zeros(8, dtype=torch.long)
    groups = [np.arange(4), np.arange(4, 8)]  # two users with identical records
    deltas = train_users(
        model,
        flat_parameters(model),
        x,
        y,
        groups,
        loss_fn=cross_entropy,
        local_lr=0.5,
        epochs=1,
        batch_size=4,
        keys=torch.zeros(1, 8),
    )
    assert not torch.allclose(deltas[0], deltas[1])


@settings(max_examples=25, deadline=None)
@given(st.lists(st.floats(-100, 100), min_size=3, max_size=3), st.floats(0.01, 10))
def test_clip_rows_bounds_norm_and_keeps_direction(values, clip):
    row = torch.tensor([values], dtype=torch.float64)
    clipped = clip_rows(row, clip)
    assert clipped.norm() <= clip * (1 + 1e-9)
    if row.norm() <= clip:
        torch.testing.assert_close(clipped, row)
    else:
        torch.testing.assert_close(clipped * row.norm() / clip, row)


def test_layout_round_trip_and_errors():
    model = TinyCNN()
    layout = ParameterLayout.of(model)
    flat = flat_parameters(model)
    assert layout.size == flat.numel() == sum(p.numel() for p in model.parameters())
    torch.testing.assert_close(layout.flatten(layout.unflatten(flat)), flat)
    with pytest.raises(ValueError, match="layout needs"):
        layout.unflatten(flat[:-1])
    with pytest.raises(ValueError, match="local_lr"):
        train_users(
            model,
            flat,
            torch.zeros(2, 1, 12, 12),
            torch.zeros(2, dtype=torch.long),
            [np.arange(2)],
            loss_fn=cross_entropy,
            local_lr=0.0,
            epochs=1,
            batch_size=1,
            keys=torch.zeros(1, 2),
        )


@pytest.mark.parametrize(
    ("groups", "message"),
    [
        ([np.arange(3), np.array([], dtype=np.int64)], "every user group must hold at least one"),
        ([np.arange(3), np.array([4, 12])], r"must lie in \[0, 12\), got 4\.\.12"),
        ([np.array([-1, 2]), np.arange(3)], r"must lie in \[0, 12\), got -1\.\.2"),
    ],
)
def test_bad_groups_are_refused_naming_the_first_bad_range(groups, message):
    model = nn.Linear(3, 2)
    with pytest.raises(ValueError, match=message):
        train_users(
            model,
            flat_parameters(model),
            torch.randn(12, 3),
            torch.arange(12) % 2,
            groups,
            loss_fn=cross_entropy,
            local_lr=0.1,
            epochs=1,
            batch_size=2,
            keys=torch.rand(1, 12),
        )
