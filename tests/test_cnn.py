"""The MNIST CNN's hand-written gradients in the per-user engine and in ULDP-SGD's gradients, against autograd (the
gradient itself: tests/test_closed_form.py)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from per_user_checks import assert_fast_path_equals_loop

from uldp.models import MnistCNN, cross_entropy_loss
from uldp.training import closed_form
from uldp.training.dpsgd import dpsgd_train
from uldp.training.per_user import flat_parameters, user_gradients


def problem(n_records: int, n_users: int, seed: int, dtype: torch.dtype):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn((n_records, 1, 28, 28), generator=gen, dtype=dtype)
    y = torch.randint(0, 10, (n_records,), generator=gen)
    owner = np.random.default_rng(seed).zipf(1.5, n_records) % n_users
    return x, y, [np.flatnonzero(owner == u) for u in np.unique(owner)]


@pytest.mark.parametrize("dtype, tolerance", [(torch.float32, 1e-5), (torch.float64, 1e-10)])
def test_per_user_training_equals_the_autograd_loop(dtype, tolerance):
    """train_users takes the closed form (oneDNN channels-last convolutions in float32) and lands on the plain
    per-user loop: the issue's 1e-5 in float32, equality in float64."""
    torch.manual_seed(0)
    model = MnistCNN().to(dtype).eval()
    x, y, groups = problem(60, 9, seed=1, dtype=dtype)
    assert_fast_path_equals_loop(
        model,
        x,
        y,
        groups,
        loss_fn=cross_entropy_loss,
        local_lr=0.1,
        epochs=2,
        batch_size=4,
        key_seed=2,
        atol=tolerance,
        moved=1e-3,
    )


def test_user_gradients_use_the_closed_form_from_the_shared_model():
    torch.manual_seed(0)
    model = MnistCNN().double().eval()
    x, y, groups = problem(20, 4, seed=3, dtype=torch.float64)
    grads = user_gradients(model, flat_parameters(model), x, y, groups, loss_fn=cross_entropy_loss)
    for row, records in enumerate(groups):
        loss = cross_entropy_loss(model(x[records]), y[records])
        expected = torch.cat(
            [grad.flatten() for grad in torch.autograd.grad(loss, list(model.parameters()))]
        )
        torch.testing.assert_close(grads[row], expected, atol=1e-12, rtol=1e-10)


def test_dpsgd_of_the_cnn_stays_with_opacus():
    """No per-record closed form for convolutions here: DP-SGD's closed-form engine refuses the CNN by name."""
    model = MnistCNN().train()
    found = closed_form.for_model(model, cross_entropy_loss)
    assert found is not None and found.random
    assert closed_form.for_dpsgd(model, cross_entropy_loss) is None
    with pytest.raises(
        ValueError, match="no closed-form DP-SGD for MnistCNN with cross_entropy_loss"
    ):
        dpsgd_train(
            model,
            flat_parameters(model),
            torch.zeros(4, 1, 28, 28),
            torch.zeros(4, dtype=torch.long),
            loss_fn=cross_entropy_loss,
            local_lr=0.1,
            epochs=1,
            batch_size=2,
            clip=1.0,
            sigma=1.0,
            generator=torch.Generator(),
            engine="closed-form",
        )
