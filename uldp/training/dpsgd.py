"""Per-silo record-level DP-SGD with opacus (the local subroutine of ULDP-GROUP-k, Algorithm 2 line 9).

Each silo runs Abadi et al.'s DP-SGD on its (flag-filtered) records: Poisson sampling of records at rate
``gamma = 1 / ceil(n_s / batch_size)`` (opacus' ``DPDataLoader``), per-record gradients (opacus'
``GradSampleModule``), clipping to ``C`` and Gaussian noise of std ``sigma * C`` on the sum (opacus' ``DPOptimizer``),
``Q`` epochs of ``ceil(n_s / batch_size)`` steps each. The accountant (:func:`uldp.accounting.epsilon_group`) needs
each silo's ``sample_rate`` and step count, which :func:`dpsgd_schedule` gives without training.
"""

from __future__ import annotations

import copy
import logging
import math
import warnings
from dataclasses import dataclass

import torch
from opacus import GradSampleModule
from opacus.data_loader import DPDataLoader
from opacus.optimizers import DPOptimizer
from torch import Tensor, nn
from torch.utils.data import TensorDataset

from uldp.training.per_user import LossFunction, flat_parameters, load_flat_parameters


@dataclass(frozen=True)
class DPSGDSchedule:
    """Record-level Poisson sampling rate and steps of one silo's DP-SGD in one round.

    Attributes:
        sample_rate: Probability ``gamma`` that a record joins a step's batch.
        steps: DP-SGD steps per round (``Q`` epochs of ``1 / gamma`` steps).
    """

    sample_rate: float
    steps: int


def dpsgd_schedule(n_records: int, *, batch_size: int, epochs: int) -> DPSGDSchedule:
    """The sampling rate and steps per round of DP-SGD on ``n_records`` records (opacus' convention).

    Example:
        >>> dpsgd_schedule(30, batch_size=4, epochs=2)
        DPSGDSchedule(sample_rate=0.125, steps=16)
    """
    if n_records < 1 or batch_size < 1 or epochs < 1:
        raise ValueError(f"n_records, batch_size and epochs must be >= 1, got {n_records}, {batch_size}, {epochs}")
    batches = math.ceil(n_records / batch_size)
    return DPSGDSchedule(sample_rate=1.0 / batches, steps=epochs * batches)


def dpsgd_train(
    model: nn.Module,
    params: Tensor,
    x: Tensor,
    y: Tensor,
    *,
    loss_fn: LossFunction,
    local_lr: float,
    epochs: int,
    batch_size: int,
    clip: float,
    sigma: float,
    generator: torch.Generator,
) -> Tensor:
    """Run one silo's DP-SGD from the global model and return its model delta (local minus global).

    Record-level DP-SGD (Abadi et al. 2016, Algorithm 1) as in Algorithm 2, line 9, of the paper: the guarantee
    per silo is the sub-sampled Gaussian RDP with ``sigma`` and :func:`dpsgd_schedule`'s rate and steps.

    Args:
        model: The architecture (deep-copied; its parameters are replaced by ``params``).
        params: Global model, flat ``[d]``.
        x: The silo's (filtered) records.
        y: Their targets.
        loss_fn: Weighted mean loss (used with ``weight=None``: the batch mean, opacus' ``loss_reduction="mean"``).
        local_lr: Learning rate > 0.
        epochs: Local epochs ``Q``.
        batch_size: Expected batch size (``sample_rate * n``).
        clip: Per-record clipping bound ``C`` > 0.
        sigma: Noise multiplier > 0.
        generator: Drives the Poisson sampling and the noise.

    Returns:
        ``[d]`` delta ``x^Q - x_t``.
    """
    schedule = dpsgd_schedule(int(x.shape[0]), batch_size=batch_size, epochs=epochs)
    local = copy.deepcopy(model)
    load_flat_parameters(local, params)
    private = GradSampleModule(local, loss_reduction="mean")
    optimizer = DPOptimizer(
        torch.optim.SGD([p for p in private.parameters() if p.requires_grad], lr=local_lr),
        noise_multiplier=sigma,
        max_grad_norm=clip,
        expected_batch_size=max(1, round(schedule.sample_rate * x.shape[0])),
        loss_reduction="mean",
        generator=generator,
    )
    loader = DPDataLoader(TensorDataset(x, y), sample_rate=schedule.sample_rate, generator=generator)
    # empty Poisson batches are expected (opacus logs each) and inputs never need gradients (torch warns)
    quiet = logging.getLogger("opacus.data_loader")
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Full backward hook is firing")
            for _ in range(epochs):
                for batch_x, batch_y in loader:
                    optimizer.zero_grad()
                    loss_fn(private(batch_x), batch_y, None).backward()
                    optimizer.step()  # an empty Poisson batch still takes a pure-noise step, as accounted
    finally:
        quiet.setLevel(level)
    return flat_parameters(private._module) - params.detach()
