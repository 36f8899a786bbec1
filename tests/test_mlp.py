"""Hand-written gradients of the Creditcard MLP against autograd and opacus, and the engines that use them."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from per_user_checks import assert_fast_path_equals_loop
from recorded_uniforms import copies, mlp_reference_logits, recording

from uldp.data.base import Allocation
from uldp.methods import FedAvgMethod, Federation, GroupMethod, Hyperparameters, make_method
from uldp.models import CreditcardMLP, cross_entropy_loss
from uldp.training import closed_form, mlp
from uldp.training.dpsgd import dpsgd_train, dpsgd_train_silos
from uldp.training.per_user import flat_parameters, train_users


def test_clipped_sum_equals_per_record_autograd_clipping():
    """Each record's gradient (autograd, batch of one, same masks) has the norm record_norms gives, and the clipped
    sum is the sum of the records' gradients each scaled by min(1, C / norm)."""
    gen = torch.Generator().manual_seed(3)
    torch.manual_seed(3)  # the model's initialisation
    model = CreditcardMLP().double().train()
    params = copies(model, 2, gen, spread=0.3)
    x = torch.randn((2, 5, 30), generator=gen, dtype=torch.float64)
    y = torch.randint(0, 2, (2, 5), generator=gen)
    member = torch.tensor([[1.0, 1, 1, 0, 0], [1, 1, 1, 1, 1]], dtype=torch.float64)
    clip = 5.0
    draws, uniforms = recording(4)
    got = mlp.clipped_gradient_sum(model, params, x, y, member, clip=clip, uniforms=uniforms)
    norms = []
    for g in range(2):
        own = {name: value[g].clone().requires_grad_() for name, value in params.items()}
        total = {name: torch.zeros_like(value) for name, value in own.items()}
        for i in range(5):
            logits = mlp_reference_logits(model, own, x[g], draws, g)[i : i + 1]
            grads = torch.autograd.grad(
                cross_entropy_loss(logits, y[g, i : i + 1]), list(own.values())
            )
            norm = torch.sqrt(
                sum((grad.square().sum() for grad in grads), torch.zeros((), dtype=torch.float64))
            )
            norms.append(float(norm))
            for name, grad in zip(own, grads, strict=True):
                total[name] += member[g, i] * min(1.0, clip / float(norm)) * grad
        for name in own:
            torch.testing.assert_close(got[name][g], total[name], atol=1e-12, rtol=1e-10)
    assert min(norms) < clip < max(norms)  # some records clipped, some not


def test_closed_form_dpsgd_equals_opacus_with_the_same_draws():
    """Dropout off (opacus' hooks need train mode): same batches and noise, opacus' GradSampleModule/DPOptimizer
    land on the same delta."""
    gen = torch.Generator().manual_seed(0)
    model = CreditcardMLP().train()
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
    x, y = torch.randn((150, 30), generator=gen), torch.randint(0, 2, (150,), generator=gen)
    params = flat_parameters(model)
    kwargs: dict[str, Any] = dict(
        loss_fn=cross_entropy_loss, local_lr=0.5, epochs=2, batch_size=16, clip=0.3, sigma=0.7
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
    torch.testing.assert_close(closed, reference, atol=2e-5, rtol=1e-4)


def test_per_user_training_equals_the_autograd_loop():
    """train_users takes the closed form for the Creditcard MLP; in eval mode it lands on the autograd loop."""
    model = CreditcardMLP().double().eval()
    gen = torch.Generator().manual_seed(1)
    x, y = (
        torch.randn((120, 30), generator=gen, dtype=torch.float64),
        torch.randint(0, 2, (120,), generator=gen),
    )
    owner = np.random.default_rng(1).zipf(1.5, 120) % 17
    groups = [np.flatnonzero(owner == u) for u in np.unique(owner)]
    assert_fast_path_equals_loop(
        model,
        x,
        y,
        groups,
        loss_fn=cross_entropy_loss,
        local_lr=0.2,
        epochs=3,
        batch_size=4,
        key_seed=2,
        atol=1e-10,
        moved=1e-2,
    )


def creditcard_like_federation(n_records: int = 150, n_silos: int = 3) -> Federation:
    gen = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    x = torch.randn((n_records, 30), generator=gen)
    y = (x[:, 0] > 0).long()
    silo = np.random.default_rng(0).choice(n_silos, n_records, p=[0.6, 0.3, 0.1][:n_silos])
    return Federation(
        CreditcardMLP().train(),
        cross_entropy_loss,
        x,
        y,
        Allocation(np.arange(n_records) % 11, silo, 11, n_silos, "toy", 0),
    )


@pytest.mark.parametrize("method", ["DEFAULT", "ULDP-NAIVE", "ULDP-GROUP-4"])
def test_silos_trained_together_equal_silos_trained_alone_with_dropout(method):
    """Train mode: the batched silos draw each silo's dropout masks from the generator that silo seeds when it
    trains alone (the deployed path), so the deltas are the same."""
    hp = Hyperparameters(
        global_lr=1.0, local_lr=0.2, local_epochs=2, batch_size=16, clip=0.5, sigma=0.5
    )
    algorithm = make_method(method, hp)
    assert isinstance(algorithm, (FedAvgMethod, GroupMethod))
    fed = algorithm.prepare(creditcard_like_federation(), np.random.SeedSequence(1))
    params = flat_parameters(fed.model)
    round_seed = np.random.SeedSequence(5)
    together = algorithm.silo_deltas(params, fed, round_seed)
    for s in range(fed.n_silos):
        alone = algorithm.silo_delta(params, fed, round_seed, s)
        assert alone.abs().max() > 1e-3
        torch.testing.assert_close(together[s], alone, atol=1e-5, rtol=1e-4)


def test_dropout_generators_are_used_and_checked():
    model = CreditcardMLP().train()
    x, y = torch.randn((40, 30)), torch.randint(0, 2, (40,))
    groups = [np.arange(20), np.arange(20, 40)]
    kwargs: dict[str, Any] = dict(
        loss_fn=cross_entropy_loss, local_lr=0.5, epochs=1, batch_size=8, keys=torch.rand(1, 40)
    )
    params = flat_parameters(model)
    first = train_users(
        model,
        params,
        x,
        y,
        groups,
        dropout_generators=[torch.Generator().manual_seed(s) for s in (1, 2)],
        **kwargs,
    )
    again = train_users(
        model,
        params,
        x,
        y,
        groups,
        dropout_generators=[torch.Generator().manual_seed(s) for s in (1, 2)],
        **kwargs,
    )
    other = train_users(
        model,
        params,
        x,
        y,
        groups,
        dropout_generators=[torch.Generator().manual_seed(s) for s in (1, 3)],
        **kwargs,
    )
    torch.testing.assert_close(first, again, atol=0, rtol=0)
    torch.testing.assert_close(first[0], other[0], atol=0, rtol=0)  # group 0's draws are its own
    assert not torch.allclose(first[1], other[1])
    with pytest.raises(
        ValueError, match="one generator per group; got 1 for 2 groups of a CreditcardMLP"
    ):
        train_users(model, params, x, y, groups, dropout_generators=[torch.Generator()], **kwargs)
    with pytest.raises(ValueError, match=r"clip must be a finite number > 0, got -1\.0"):
        dpsgd_train_silos(
            model,
            params,
            [(x, y)],
            loss_fn=cross_entropy_loss,
            local_lr=0.1,
            epochs=1,
            batch_size=8,
            clip=-1.0,
            sigma=1.0,
            generators=[torch.Generator()],
        )
    with pytest.raises(ValueError, match="sigma must be a finite number > 0, got nan"):
        dpsgd_train(
            model,
            params,
            x,
            y,
            loss_fn=cross_entropy_loss,
            local_lr=0.1,
            epochs=1,
            batch_size=8,
            clip=1.0,
            sigma=float("nan"),
            generator=torch.Generator(),
            engine="opacus",
        )
    with pytest.raises(ValueError, match="got 1 generators"):
        dpsgd_train_silos(
            model,
            params,
            [(x, y), (x, y)],
            loss_fn=cross_entropy_loss,
            local_lr=0.1,
            epochs=1,
            batch_size=8,
            clip=1.0,
            sigma=1.0,
            generators=[torch.Generator()],
        )


def test_which_models_have_closed_forms():
    assert mlp.supports(CreditcardMLP(), cross_entropy_loss)
    trained = closed_form.for_model(CreditcardMLP().train(), cross_entropy_loss)
    evaluated = closed_form.for_model(CreditcardMLP().eval(), cross_entropy_loss)
    assert trained is not None and trained.random
    assert evaluated is not None and not evaluated.random
    assert closed_form.for_model(torch.nn.Linear(3, 2), cross_entropy_loss) is None
    with pytest.raises(
        ValueError, match=r"'1' \(GroupNorm\(2, 8.*supported: Linear, ReLU, GroupNorm\(1, C\)"
    ):
        mlp.layers_of(torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.GroupNorm(2, 8)))
