"""The hand-written weighted gradients of the paper's networks (uldp.training.closed_form) against autograd."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings, strategies as st
from recorded_uniforms import cnn_reference_logits, copies, mlp_reference_logits, recording

from uldp.models import CreditcardMLP, MnistCNN, cross_entropy_loss
from uldp.training import closed_form

#: Per network: the model, its reference forward pass, one record's shape, the classes, how far the parameter copies
#: spread, the dropout layers, and the largest copies and batch to draw (the CNN is slower).
NETWORKS = {
    "creditcard-mlp": (CreditcardMLP, mlp_reference_logits, (30,), 2, 0.3, 4, (4, 6)),
    "mnist-cnn": (MnistCNN, cnn_reference_logits, (1, 28, 28), 10, 0.05, 2, (3, 3)),
}


@pytest.mark.parametrize("network", NETWORKS)
@settings(max_examples=12, deadline=None)
@given(data=st.data(), seed=st.integers(0, 10**6), train=st.booleans())
def test_weighted_gradient_equals_autograd(network, data, seed, train):
    """Per copy, float64, with 0/1 padding weights (all-zero rows included) and, in train mode, the same dropout
    masks as the reference forward pass."""
    build, reference_logits, record_shape, n_classes, spread, dropouts, (max_copies, max_batch) = (
        NETWORKS[network]
    )
    n_copies, batch = data.draw(st.integers(1, max_copies)), data.draw(st.integers(1, max_batch))
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    model = build().double().train(train)
    params = copies(model, n_copies, gen, spread)
    x = torch.randn((n_copies, batch, *record_shape), generator=gen, dtype=torch.float64)
    y = torch.randint(0, n_classes, (n_copies, batch), generator=gen)
    weight = (torch.rand((n_copies, batch), generator=gen) < 0.7).double()
    draws, uniforms = recording(seed + 1)
    found = closed_form.for_model(model, cross_entropy_loss)
    assert found is not None
    got = found.weighted_gradient(params, x, y, weight, uniforms)
    assert len(draws) == (dropouts if train else 0)
    for g in range(n_copies):
        own = {name: value[g].clone().requires_grad_() for name, value in params.items()}
        loss = cross_entropy_loss(reference_logits(model, own, x[g], draws, g), y[g], weight[g])
        for name, value in zip(own, torch.autograd.grad(loss, list(own.values())), strict=True):
            torch.testing.assert_close(got[name][g], value, atol=1e-12, rtol=1e-10)
