"""Closed-form gradients of linear-score models against autograd, and the engines that use them against theirs."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

from uldp.data.base import Allocation
from uldp.methods import FedAvgMethod, Federation, GroupMethod, Hyperparameters, make_method
from uldp.models import LinearScore, bce_loss, cox_loss, cross_entropy_loss
from uldp.training import linear
from uldp.training.dpsgd import dpsgd_train, dpsgd_train_silos
from uldp.training.per_user import flat_parameters, record_keys, train_users, train_users_loop


def survival_targets(gen: torch.Generator, shape: tuple[int, ...], tied: bool) -> torch.Tensor:
    events = (torch.rand(shape, generator=gen) < 0.6).double()
    times = (
        torch.randint(0, 4, shape, generator=gen).double()
        if tied
        else torch.rand(shape, generator=gen)
    )
    return torch.stack([events, times], dim=-1)


def targets_for(
    loss_fn, gen: torch.Generator, shape: tuple[int, ...], tied: bool = True
) -> torch.Tensor:
    if loss_fn is cox_loss:
        return survival_targets(gen, shape, tied)
    return (torch.rand(shape, generator=gen) < 0.5).double()


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 10**6),
    users=st.integers(1, 4),
    n=st.integers(1, 9),
    loss_name=st.sampled_from(["bce", "cox"]),
    weighted=st.booleans(),
)
def test_score_gradient_equals_autograd(seed, users, n, loss_name, weighted):
    """Per user (leading axis), with 0/1 padding masks (all-zero rows included) and tied survival times."""
    loss_fn = {"bce": bce_loss, "cox": cox_loss}[loss_name]
    gen = torch.Generator().manual_seed(seed)
    scores = (3 * torch.randn((users, n), generator=gen, dtype=torch.float64)).requires_grad_()
    targets = targets_for(loss_fn, gen, (users, n))
    weight = (torch.rand((users, n), generator=gen) < 0.7).double() if weighted else None
    closed = linear.score_gradient(loss_fn, scores.detach(), targets, weight)
    for u in range(users):
        (expected,) = torch.autograd.grad(
            loss_fn(scores[u], targets[u], None if weight is None else weight[u]), scores
        )
        torch.testing.assert_close(closed[u], expected[u], atol=1e-12, rtol=1e-10)


def test_unsupported_models_and_losses_are_named():
    assert linear.supports(LinearScore(3), bce_loss) and not linear.supports(
        torch.nn.Linear(3, 1), bce_loss
    )
    assert not linear.supports(LinearScore(3), cross_entropy_loss)
    with pytest.raises(ValueError, match=r"cross_entropy_loss.*known: bce_loss, cox_loss"):
        linear.score_gradient(cross_entropy_loss, torch.zeros(2), torch.zeros(2))
    with pytest.raises(ValueError, match="closed-form DP-SGD for Linear"):
        dpsgd_train(
            torch.nn.Linear(3, 1),
            torch.zeros(4),
            torch.zeros(5, 3),
            torch.zeros(5),
            loss_fn=bce_loss,
            local_lr=0.1,
            epochs=1,
            batch_size=2,
            clip=1.0,
            sigma=1.0,
            generator=torch.Generator(),
            engine="closed-form",
        )
    with pytest.raises(
        ValueError, match="engine must be one of auto, opacus, closed-form, got 'jax'"
    ):
        dpsgd_train(
            LinearScore(3),
            torch.zeros(4),
            torch.zeros(5, 3),
            torch.zeros(5),
            loss_fn=bce_loss,
            local_lr=0.1,
            epochs=1,
            batch_size=2,
            clip=1.0,
            sigma=1.0,
            generator=torch.Generator(),
            engine="jax",
        )


def linear_problem(loss_fn, n_records: int, n_features: int, seed: int):
    gen = torch.Generator().manual_seed(seed)
    model = LinearScore(n_features).double()
    x = torch.randn((n_records, n_features), generator=gen, dtype=torch.float64)
    y = targets_for(loss_fn, gen, (n_records,), tied=False)
    return model, flat_parameters(model), x, y


@pytest.mark.parametrize("loss_fn", [bce_loss, cox_loss])
@pytest.mark.parametrize("n_groups", [1, 7])
def test_per_user_training_equals_the_autograd_loop(loss_fn, n_groups):
    """Closed-form steps inside :func:`train_users` take the autograd loop's mini-batches and land on its result."""
    model, params, x, y = linear_problem(loss_fn, 90, 5, seed=n_groups)
    owner = np.random.default_rng(n_groups).zipf(1.6, 90) % n_groups
    groups = [np.flatnonzero(owner == u) for u in np.unique(owner)]
    keys = record_keys(90, 3, torch.Generator().manual_seed(1))
    kwargs = dict(loss_fn=loss_fn, local_lr=0.3, epochs=3, batch_size=4, keys=keys)
    fast = train_users(model, params, x, y, groups, **kwargs)
    slow = train_users_loop(model, params, x, y, groups, **kwargs)
    assert slow.abs().max() > 1e-2
    torch.testing.assert_close(fast, slow, atol=1e-10, rtol=0)


@pytest.mark.parametrize("loss_fn, batch_size", [(bce_loss, 4), (cox_loss, 8), (bce_loss, 1)])
def test_closed_form_dpsgd_equals_opacus_with_the_same_draws(loss_fn, batch_size):
    """Same generator, same batches and noise: opacus' per-record gradients, clipping and scaling give the same
    delta. Batch size 1 makes many Poisson batches empty (pure-noise steps)."""
    model, params, x, y = linear_problem(loss_fn, 37, 4, seed=batch_size)
    model = model.float()
    params, x, y = params.float(), x.float(), y.float()
    x[:3] *= 30  # records whose gradients get clipped
    kwargs = dict(
        loss_fn=loss_fn, local_lr=0.5, epochs=3, batch_size=batch_size, clip=0.5, sigma=0.7
    )
    closed = dpsgd_train(
        model,
        params,
        x,
        y,
        generator=torch.Generator().manual_seed(3),
        engine="closed-form",
        **kwargs,
    )
    reference = dpsgd_train(
        model, params, x, y, generator=torch.Generator().manual_seed(3), engine="opacus", **kwargs
    )
    assert reference.abs().max() > 1e-2
    torch.testing.assert_close(closed, reference, atol=2e-6, rtol=1e-5)


@pytest.mark.parametrize("method", ["DEFAULT", "ULDP-NAIVE"])
def test_silos_trained_together_equal_silos_trained_alone(method):
    """FedAvg's batched silo training of a linear model equals each silo's own autograd training."""
    gen = torch.Generator().manual_seed(0)
    n = 60
    x = torch.randn((n, 3), generator=gen)
    y = (x[:, 0] > 0).float()
    silo = np.random.default_rng(0).integers(0, 3, n)
    fed = Federation(
        LinearScore(3), bce_loss, x, y, Allocation(np.arange(n) % 7, silo, 7, 3, "toy", 0)
    )
    epochs = 2
    hp = Hyperparameters(
        global_lr=1.0, local_lr=0.5, local_epochs=epochs, batch_size=4, clip=0.05, sigma=1.0
    )
    algorithm = make_method(method, hp)
    assert isinstance(algorithm, FedAvgMethod)
    params = flat_parameters(fed.model)
    round_seed = np.random.SeedSequence(5)
    together = algorithm.silo_deltas(params, fed, round_seed)
    from uldp.methods.fedavg import round_keys

    keys = round_keys(fed, epochs, round_seed)
    for s in range(3):
        alone = train_users_loop(
            fed.model,
            params,
            x,
            y,
            [fed.silo_records(s)],
            loss_fn=bce_loss,
            local_lr=0.5,
            epochs=2,
            batch_size=4,
            keys=keys,
        )[0]
        if method == "ULDP-NAIVE":
            alone = alone * min(1.0, 0.05 / float(alone.norm()))
        torch.testing.assert_close(together[s], alone, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("loss_fn, batch_size", [(bce_loss, 4), (cox_loss, 8), (bce_loss, 1)])
def test_silos_running_dpsgd_together_equal_each_silo_alone(loss_fn, batch_size):
    """Silos of different sizes (different rates, steps and expected batches) in one batched run, same draws."""
    model = LinearScore(4)
    silos = []
    for n, seed in ((37, 1), (9, 2), (20, 3)):
        _, _, x, y = linear_problem(loss_fn, n, 4, seed=seed)
        silos.append((x.float(), y.float()))
    silos[0][0][:3] *= 30  # clipped records
    params = flat_parameters(model)
    kwargs = dict(
        loss_fn=loss_fn, local_lr=0.5, epochs=3, batch_size=batch_size, clip=0.5, sigma=0.7
    )
    together = dpsgd_train_silos(
        model,
        params,
        silos,
        generators=[torch.Generator().manual_seed(s) for s in range(3)],
        **kwargs,
    )
    for s, (x, y) in enumerate(silos):
        alone = dpsgd_train(
            model, params, x, y, generator=torch.Generator().manual_seed(s), **kwargs
        )
        assert alone.abs().max() > 1e-2
        torch.testing.assert_close(together[s], alone, atol=2e-6, rtol=1e-5)
    with pytest.raises(ValueError, match=r"one generator .* per silo"):
        dpsgd_train_silos(model, params, silos, generators=[torch.Generator()], **kwargs)


def test_group_method_trains_silos_together_like_one_by_one():
    gen = torch.Generator().manual_seed(0)
    n = 80
    x = torch.randn((n, 3), generator=gen)
    y = (x[:, 0] > 0).float()
    silo = np.random.default_rng(0).choice(3, n, p=[0.6, 0.3, 0.1])
    fed = Federation(
        LinearScore(3), bce_loss, x, y, Allocation(np.arange(n) % 9, silo, 9, 3, "toy", 0)
    )
    hp = Hyperparameters(
        global_lr=1.0, local_lr=0.5, local_epochs=2, batch_size=4, clip=0.05, sigma=1.0
    )
    algorithm = make_method("ULDP-GROUP-4", hp)
    assert isinstance(algorithm, GroupMethod)
    fed = algorithm.prepare(fed, np.random.SeedSequence(1))
    params = flat_parameters(fed.model)
    round_seed = np.random.SeedSequence(5)
    together = algorithm.silo_deltas(params, fed, round_seed)
    for s in range(3):
        torch.testing.assert_close(
            together[s], algorithm.silo_delta(params, fed, round_seed, s), atol=1e-6, rtol=1e-5
        )
