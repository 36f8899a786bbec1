"""Per-silo DP-SGD (opacus): schedule and the calibration of its noise."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from uldp.training.dpsgd import dpsgd_schedule, dpsgd_train
from uldp.training.per_user import flat_parameters


def test_schedule_matches_opacus_convention():
    schedule = dpsgd_schedule(30, batch_size=4, epochs=3)
    assert schedule.sample_rate == 1 / 8 and schedule.steps == 24
    with pytest.raises(ValueError, match="n_records must be an integer >= 1, got 0"):
        dpsgd_schedule(0, batch_size=4, epochs=1)


def test_noise_per_step_is_sigma_c_over_expected_batch():
    """With a loss of zero gradient, the delta is pure DP-SGD noise: steps * (lr sigma C / B)^2 variance."""
    model = nn.Linear(100, 20)
    params = flat_parameters(model)
    x, y = torch.randn(40, 100), torch.zeros(40)
    zero_gradient = lambda outputs, targets, weight: (outputs * 0.0).sum()  # noqa: E731
    lr, sigma, clip, batch = 0.5, 2.0, 0.3, 8
    delta = dpsgd_train(
        model,
        params,
        x,
        y,
        loss_fn=zero_gradient,
        local_lr=lr,
        epochs=2,
        batch_size=batch,
        clip=clip,
        sigma=sigma,
        generator=torch.Generator().manual_seed(0),
    )
    steps = dpsgd_schedule(40, batch_size=batch, epochs=2).steps
    expected = lr * sigma * clip / batch * math.sqrt(steps)
    assert abs(float(delta.std()) / expected - 1) < 0.1  # 2020 entries: sd of the ratio ~ 1.6 %


def test_clipping_bounds_each_step():
    """Tiny noise: each step moves by at most lr * C (the mean of clipped per-record gradients), so Q steps by
    Q lr C."""
    model = nn.Linear(3, 1)
    params = flat_parameters(model)
    x, y = 100 * torch.randn(20, 3), torch.randn(20)
    mse = lambda outputs, targets, weight: ((outputs.squeeze(-1) - targets) ** 2).mean()  # noqa: E731
    delta = dpsgd_train(
        model,
        params,
        x,
        y,
        loss_fn=mse,
        local_lr=1.0,
        epochs=1,
        batch_size=20,
        clip=0.01,
        sigma=1e-6,
        generator=torch.Generator().manual_seed(1),
    )
    # one expected step (rate 1): the sum of <= 20 clipped gradients divided by the expected batch 20
    assert 0 < float(delta.norm()) <= 0.01 * (1 + 1e-3)
