"""Per-silo record-level DP-SGD (the local subroutine of ULDP-GROUP-k, Algorithm 2 line 9).

Each silo runs Abadi et al.'s DP-SGD on its (flag-filtered) records: Poisson sampling of records at rate
``gamma = 1 / ceil(n_s / batch_size)``, per-record gradients clipped to ``C``, Gaussian noise of std ``sigma * C`` on
their sum, divided by the expected batch size (opacus' ``loss_reduction="mean"``); ``Q`` epochs of
``ceil(n_s / batch_size)`` steps each. The accountant (:func:`uldp.accounting.epsilon_group`) needs each silo's
``sample_rate`` and step count, which :func:`dpsgd_schedule` gives without training.

Two engines take the same batches and noise from the same generator (:func:`epoch_draws`: per epoch, the Poisson
masks of all its steps, then their noise), so they give the same result on the same model:

- ``"opacus"``: opacus' ``GradSampleModule`` (per-record gradients) and ``DPOptimizer`` (clip, sum, scale; the
  pre-drawn noise is added after its step); any
  model opacus supports.
- ``"closed-form"``: for the models with hand-written gradients (:func:`uldp.training.closed_form.for_model`:
  HeartDisease's and TcgaBrca's linear models, the Creditcard MLP) the clipped sum of per-record gradients in closed
  form (what opacus computes, without its hooks), about 5 times faster per step than opacus here for one silo;
  :func:`dpsgd_train_silos` also runs all silos of a round in one batched step. Dropout masks (the MLP in train
  mode) come from a generator per silo, so batched silos equal silos trained alone.

The batches are drawn here rather than by opacus' ``DPDataLoader`` because that loader takes ``int(1 / gamma)``
steps per epoch, one fewer than accounted when ``1 / (1 / k)`` rounds below ``k`` (k = 93, 99, 105, ...).
"""

from __future__ import annotations

import copy
import math
import warnings
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor, nn

from uldp.common.checks import check_integer, check_positive
from uldp.common.logs import import_quietly
from uldp.training import closed_form as closed_forms
from uldp.training.device import default_generator
from uldp.training.per_user import (
    LossFunction,
    ParameterLayout,
    flat_parameters,
    load_flat_parameters,
)

#: The DP-SGD engines (``"auto"``: closed form when the model allows it, otherwise opacus).
ENGINES = ("auto", "opacus", "closed-form")


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
    for name, value in (("n_records", n_records), ("batch_size", batch_size), ("epochs", epochs)):
        check_integer(name, value)
    batches = math.ceil(n_records / batch_size)
    return DPSGDSchedule(sample_rate=1.0 / batches, steps=epochs * batches)


@dataclass(frozen=True)
class EpochDraws:
    """The random draws of one epoch of DP-SGD: its Poisson batches and the noise of each step.

    Attributes:
        batches: Per step, the indices of the records in its batch (possibly none).
        noise: ``[steps, d]`` Gaussian noise of std ``sigma * C``, one row per step.
    """

    batches: tuple[Tensor, ...]
    noise: Tensor


def epoch_draws(
    n_records: int,
    schedule: DPSGDSchedule,
    layout: ParameterLayout,
    std: float,
    *,
    epochs: int,
    generator: torch.Generator,
    device: torch.device | None = None,
) -> EpochDraws:
    """Draw one epoch's Poisson batches, then its noise, from ``generator`` (both engines use this).

    Each record joins each step's batch independently with probability ``schedule.sample_rate``: the sampling the
    sub-sampled Gaussian accountant assumes (Lemma 4 per step). Noise is drawn per parameter tensor in layout order.
    ``generator`` is the silo's CPU generator on every device (the same draws wherever the model trains); the
    epoch's batches and noise are then moved to ``device`` at once (``None``: they stay on the CPU).
    """
    steps = schedule.steps // epochs
    chosen = torch.rand((steps, n_records), generator=generator) < schedule.sample_rate
    records = chosen.nonzero()[:, 1].to(device)
    batches = torch.split(records, chosen.sum(dim=1).tolist())
    noise = torch.cat(
        [
            torch.normal(0.0, std, (steps, *shape), generator=generator).flatten(start_dim=1)
            for shape in layout.shapes
        ],
        dim=1,
    ).to(device)
    return EpochDraws(tuple(batches), noise)


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
    engine: str = "auto",
) -> Tensor:
    """Run one silo's DP-SGD from the global model and return its model delta (local minus global).

    Record-level DP-SGD (Abadi et al. 2016, Algorithm 1) as in Algorithm 2, line 9, of the paper: the guarantee
    per silo is the sub-sampled Gaussian RDP with ``sigma`` and :func:`dpsgd_schedule`'s rate and steps.

    Args:
        model: The architecture (its parameters are replaced by ``params`` in a copy).
        params: Global model, flat ``[d]``.
        x: The silo's (filtered) records.
        y: Their targets.
        loss_fn: Weighted mean loss (used with ``weight=None``: the batch mean).
        local_lr: Learning rate > 0.
        epochs: Local epochs ``Q``.
        batch_size: Expected batch size (``sample_rate * n``).
        clip: Per-record clipping bound ``C`` > 0.
        sigma: Noise multiplier > 0.
        generator: Drives the Poisson sampling and the noise (a CPU generator: :func:`epoch_draws`).
        engine: One of :data:`ENGINES`.

    Returns:
        ``[d]`` delta ``x^Q - x_t``.

    Raises:
        ValueError: An unknown engine, or ``"closed-form"`` for a model or loss without one.
    """
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {', '.join(ENGINES)}, got {engine!r}")
    _check_arguments(
        local_lr=local_lr, clip=clip, sigma=sigma, epochs=epochs, batch_size=batch_size
    )
    closed_form = closed_forms.for_dpsgd(model, loss_fn) is not None
    if engine == "closed-form" and not closed_form:
        raise ValueError(
            f"no closed-form DP-SGD for {type(model).__name__} with {getattr(loss_fn, '__name__', loss_fn)}"
        )
    if (
        closed_form and engine != "opacus"
    ):  # one silo of the batched closed-form engine; dropout from the global RNG
        return dpsgd_train_silos(
            model,
            params,
            [(x, y)],
            loss_fn=loss_fn,
            local_lr=local_lr,
            epochs=epochs,
            batch_size=batch_size,
            clip=clip,
            sigma=sigma,
            generators=[generator],
            dropout_generators=[default_generator(params.device)],
        )[0]
    schedule = dpsgd_schedule(int(x.shape[0]), batch_size=batch_size, epochs=epochs)
    expected_batch = max(1, round(schedule.sample_rate * x.shape[0]))
    flat = _opacus_steps(
        model,
        params.detach().clone(),
        x,
        y,
        loss_fn=loss_fn,
        local_lr=local_lr,
        schedule=schedule,
        expected_batch=expected_batch,
        clip=clip,
        sigma=sigma,
        epochs=epochs,
        generator=generator,
    )
    return flat - params.detach()


def _opacus_steps(
    model: nn.Module,
    flat: Tensor,
    x: Tensor,
    y: Tensor,
    *,
    loss_fn: LossFunction,
    local_lr: float,
    schedule: DPSGDSchedule,
    expected_batch: int,
    clip: float,
    sigma: float,
    epochs: int,
    generator: torch.Generator,
) -> Tensor:
    # slow to import: only when this engine runs; opacus' import configures the root logger, undone here
    opacus, optimizers = import_quietly("opacus"), import_quietly("opacus.optimizers")

    local = copy.deepcopy(model)
    load_flat_parameters(local, flat)
    layout = ParameterLayout.of(local)
    private = opacus.GradSampleModule(local, loss_reduction="mean")
    trainable = [p for p in private.parameters() if p.requires_grad]
    # opacus clips, sums and divides by the expected batch; the noise is the pre-drawn one, added below
    optimizer = optimizers.DPOptimizer(
        torch.optim.SGD(trainable, lr=local_lr),
        noise_multiplier=0.0,
        max_grad_norm=clip,
        expected_batch_size=expected_batch,
        loss_reduction="mean",
    )
    step_size = local_lr / expected_batch
    with warnings.catch_warnings():  # inputs never need gradients
        warnings.filterwarnings("ignore", message="Full backward hook is firing")
        for _ in range(epochs):
            draws = epoch_draws(
                x.shape[0],
                schedule,
                layout,
                sigma * clip,
                epochs=epochs,
                generator=generator,
                device=flat.device,
            )
            for batch, noise in zip(draws.batches, draws.noise, strict=True):
                optimizer.zero_grad()
                loss_fn(private(x[batch]), y[batch], None).backward()
                optimizer.step()  # an empty batch still takes a pure-noise step, as accounted
                with torch.no_grad():
                    for param, piece in zip(
                        trainable, layout.unflatten(noise).values(), strict=True
                    ):
                        param.sub_(step_size * piece)
    return flat_parameters(private._module)


def dpsgd_train_silos(
    model: nn.Module,
    params: Tensor,
    silos: list[tuple[Tensor, Tensor]],
    *,
    loss_fn: LossFunction,
    local_lr: float,
    epochs: int,
    batch_size: int,
    clip: float,
    sigma: float,
    generators: list[torch.Generator],
    dropout_generators: list[torch.Generator] | None = None,
) -> Tensor:
    """Closed-form DP-SGD of several silos at once from the same global model (ULDP-GROUP-k's simulation).

    Equal to :func:`dpsgd_train` per silo with that silo's generator (each silo takes the same draws from its own
    generator, :func:`epoch_draws`), but step ``t`` of every silo runs in one batched computation, so a round costs
    the longest silo's steps instead of the sum of all silos' steps. Each silo keeps its own sampling rate, step
    count, expected batch size and noise; a silo whose epoch has fewer steps is idle (empty batch, no noise) after
    its last one.

    Args:
        model: A model with closed-form DP-SGD (:func:`uldp.training.closed_form.for_dpsgd`).
        params: Global model, flat ``[d]``.
        silos: Per silo, its (filtered, non-empty) records and targets.
        loss_fn: The model's loss.
        local_lr, epochs, batch_size, clip, sigma: As in :func:`dpsgd_train`.
        generators: One per silo (batches and noise; CPU generators, :func:`epoch_draws`).
        dropout_generators: One per silo, on the records' device, for dropout masks (a model in train mode with
            dropout); silo ``s`` draws
            ``[batch, features]`` per dropout layer and non-empty step, as it would alone with torch's global
            generator. ``None``: torch's global generator.

    Returns:
        ``[len(silos), d]`` deltas.

    Raises:
        ValueError: A model or loss without closed-form gradients, a silo without records, or not one generator per
            silo.
    """
    _check_arguments(
        local_lr=local_lr, clip=clip, sigma=sigma, epochs=epochs, batch_size=batch_size
    )
    closed_form = closed_forms.for_dpsgd(model, loss_fn)
    if closed_form is None or closed_form.clipped_gradient_sum is None:
        raise ValueError(
            f"no closed-form DP-SGD for {type(model).__name__} with {getattr(loss_fn, '__name__', loss_fn)}"
        )
    clipped_gradient_sum = closed_form.clipped_gradient_sum
    if (
        len(generators) != len(silos)
        or any(x.shape[0] == 0 for x, _ in silos)
        or (dropout_generators is not None and len(dropout_generators) != len(silos))
    ):
        silo_sizes = [int(x.shape[0]) for x, _ in silos]
        raise ValueError(
            f"need one generator (and one dropout generator, if given) per silo and records in every "
            f"silo; got {len(generators)} generators for silos of sizes {silo_sizes}"
        )
    layout = ParameterLayout.of(model)
    schedules = [
        dpsgd_schedule(int(x.shape[0]), batch_size=batch_size, epochs=epochs) for x, _ in silos
    ]
    step_sizes = torch.tensor(
        [
            local_lr / max(1, round(s.sample_rate * x.shape[0]))
            for s, (x, _) in zip(schedules, silos, strict=True)
        ],
        dtype=params.dtype,
        device=params.device,
    )[:, None]
    records, targets = (
        torch.cat([x for x, _ in silos]),
        torch.cat([y for _, y in silos]),
    )  # silo s from offsets[s]
    offsets = np.cumsum([0] + [int(x.shape[0]) for x, _ in silos[:-1]]).tolist()
    flat = params.detach().expand(len(silos), -1).clone()
    for _ in range(epochs):
        draws = [
            epoch_draws(
                x.shape[0], schedule, layout, sigma * clip, epochs=epochs, generator=generator
            )
            for (x, _), schedule, generator in zip(silos, schedules, generators, strict=True)
        ]
        index, member, sizes, noise = (
            drawn.to(flat.device)
            for drawn in _stack_draws(draws, offsets, flat.shape[1], flat.dtype)
        )  # built on the CPU, moved once per epoch
        for step in range(index.shape[0]):
            uniforms = None
            if closed_form.random and dropout_generators is not None:
                batch_sizes = sizes[step, :, 0].long()
                uniforms = closed_forms.copy_uniforms(
                    dropout_generators, batch_sizes, active=batch_sizes > 0
                )
            clipped = clipped_gradient_sum(
                layout.unflatten(flat),
                records[index[step]],
                targets[index[step]],
                member[step],
                clip,
                uniforms,
            )
            flat = flat - step_sizes * (layout.flatten(clipped, batch_dims=1) + noise[step])
    return flat - params.detach()


def _check_arguments(
    *, local_lr: float, clip: float, sigma: float, epochs: int, batch_size: int
) -> None:
    """Reject a learning rate, clip or sigma that is not a finite number > 0, or epochs / batch size < 1, by name."""
    for name, value in (("local_lr", local_lr), ("clip", clip), ("sigma", sigma)):
        check_positive(name, value)
    for name, value in (("epochs", epochs), ("batch_size", batch_size)):
        check_integer(name, value)


def _stack_draws(
    draws: list[EpochDraws], offsets: list[int], d: int, dtype: torch.dtype
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """One epoch's draws of all silos as padded tensors: record indices ``[T, S, b_max]`` (offset into the joint
    table), 0/1 membership, batch sizes ``[T, S, 1]`` and noise ``[T, S, d]``; a silo with fewer steps gets empty
    batches and zero noise after its last one."""
    n_steps, n_silos = max(len(draw.batches) for draw in draws), len(draws)
    sizes = torch.zeros((n_steps, n_silos), dtype=torch.int64)
    for s, draw in enumerate(draws):
        sizes[: len(draw.batches), s] = torch.tensor([batch.numel() for batch in draw.batches])
    width = max(1, int(sizes.max()))
    index = torch.zeros((n_steps, n_silos, width), dtype=torch.int64)
    noise = torch.zeros((n_steps, n_silos, d), dtype=dtype)
    for s, (draw, offset) in enumerate(zip(draws, offsets, strict=True)):
        counts = sizes[: len(draw.batches), s]
        step_of = torch.repeat_interleave(torch.arange(len(draw.batches)), counts)
        slot = torch.arange(step_of.numel()) - (torch.cumsum(counts, 0) - counts)[step_of]
        index[step_of, s, slot] = torch.cat(draw.batches) + offset
        noise[: len(draw.batches), s] = draw.noise
    member = (torch.arange(width)[None, None, :] < sizes[:, :, None]).to(dtype)
    return index, member, sizes[:, :, None].to(dtype), noise
