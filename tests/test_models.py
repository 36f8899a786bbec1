"""Models, losses and metrics (uldp.models), cross-checked against torch, sklearn, lifelines and slow oracles."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings, strategies as st
from lifelines import CoxPHFitter
from lifelines.utils import concordance_index as lifelines_concordance_index
from sklearn.metrics import accuracy_score, balanced_accuracy_score
from torch.func import functional_call, grad, vmap

from uldp.models import (
    MODELS,
    accuracy,
    balanced_accuracy,
    bce_loss,
    build_model,
    concordance_index,
    count_parameters,
    cox_loss,
    cross_entropy_loss,
    evaluate,
    loss_function,
)

INPUT_SHAPES = {
    "creditcard": (30,),
    "mnist": (1, 28, 28),
    "heart_disease": (13,),
    "tcga_brca": (39,),
    "synthetic": (15,),
}


def random_targets(name: str, n: int, generator: torch.Generator) -> torch.Tensor:
    if name in ("creditcard", "mnist"):
        return torch.randint(0, 2 if name == "creditcard" else 10, (n,), generator=generator)
    if name == "tcga_brca":
        events = torch.randint(0, 2, (n,), generator=generator).float()
        times = torch.randint(1, 6, (n,), generator=generator).float()  # small range: many ties
        return torch.stack([events, times], dim=1)
    return torch.randint(0, 2, (n,), generator=generator).float()


# --- parameter counts (settings.md: 5012, 21840, 14, 40; synthetic 16) ------------------------------------------


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("creditcard", 5012),
        ("mnist", 21840),
        ("heart_disease", 14),
        ("tcga_brca", 40),
        ("synthetic", 16),
    ],
)
def test_parameter_counts_and_output_shapes(name, expected):
    model = build_model(name)
    assert count_parameters(model) == expected
    outputs = model.eval()(torch.zeros(3, *INPUT_SHAPES[name]))
    assert outputs.shape == (3, {"creditcard": 2, "mnist": 10}.get(name, 1))


def test_build_model_seed_is_reproducible_and_leaves_global_state():
    state = torch.random.get_rng_state()
    first, second = build_model("creditcard", seed=3), build_model("creditcard", seed=3)
    assert torch.equal(torch.random.get_rng_state(), state)
    assert all(
        torch.equal(a, b) for a, b in zip(first.parameters(), second.parameters(), strict=True)
    )
    with pytest.raises(ValueError, match="'cifar'"):
        build_model("cifar")


# --- classification losses ---------------------------------------------------------------------------------------


def test_cross_entropy_matches_torch_and_masks_padding():
    generator = torch.Generator().manual_seed(0)
    logits, targets = (
        torch.randn(9, 4, generator=generator),
        torch.randint(0, 4, (9,), generator=generator),
    )
    assert torch.allclose(cross_entropy_loss(logits, targets), F.cross_entropy(logits, targets))
    weight = torch.tensor([1, 0, 1, 1, 0, 0, 1, 1, 1], dtype=torch.float32)
    real = weight.bool()
    assert torch.allclose(
        cross_entropy_loss(logits, targets, weight), F.cross_entropy(logits[real], targets[real])
    )


def test_bce_matches_torch_and_masks_padding():
    generator = torch.Generator().manual_seed(1)
    logits, targets = (
        5 * torch.randn(8, 1, generator=generator),
        torch.randint(0, 2, (8,), generator=generator).float(),
    )
    reference = F.binary_cross_entropy(torch.sigmoid(logits.squeeze(1)).double(), targets.double())
    assert torch.allclose(bce_loss(logits, targets).double(), reference, atol=1e-5)
    weight = torch.tensor([0, 1, 1, 0, 1, 1, 1, 0], dtype=torch.float32)
    real = weight.bool()
    assert torch.allclose(bce_loss(logits, targets, weight), bce_loss(logits[real], targets[real]))


def test_all_padding_gives_zero_loss():
    for name in MODELS:
        generator = torch.Generator().manual_seed(2)
        model = build_model(name, seed=0).eval()
        with torch.no_grad():
            outputs = model(torch.randn(4, *INPUT_SHAPES[name], generator=generator))
        loss = loss_function(name)(outputs, random_targets(name, 4, generator), torch.zeros(4))
        assert float(loss) == 0.0


# --- Cox partial likelihood ----------------------------------------------------------------------------------------


def cox_oracle(scores, events, times, weight=None) -> float:
    """Slow Breslow negative log partial likelihood over weight-1 records, divided by their number."""
    n = len(scores)
    weight = np.ones(n) if weight is None else np.asarray(weight)
    total = 0.0
    for i in range(n):
        if weight[i] == 0 or events[i] == 0:
            continue
        risk_set = [j for j in range(n) if weight[j] == 1 and times[j] >= times[i]]
        total += math.log(sum(math.exp(scores[j]) for j in risk_set)) - scores[i]
    return total / max(weight.sum(), 1)


def flamby_cox_loss(scores: torch.Tensor, truth: torch.Tensor) -> torch.Tensor:
    """FLamby's BaselineLoss (sort by decreasing time, cumulative log-sum-exp), as a second reference."""
    order = torch.argsort(-truth[:, 1], stable=True)
    ordered, events = scores.squeeze(1)[order], truth[order, 0]
    shifted = ordered - ordered.max()
    return (-(shifted - torch.log(torch.exp(shifted).cumsum(0))) * events).mean()


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 12), seed=st.integers(0, 10**6), tie_range=st.integers(1, 20))
def test_cox_loss_matches_slow_oracle_with_ties_and_padding(n, seed, tie_range):
    rng = np.random.default_rng(seed)
    scores = rng.normal(scale=2.0, size=n)
    events, times = rng.integers(0, 2, n), rng.integers(0, tie_range, n).astype(float)
    weight = rng.integers(0, 2, n).astype(float)
    targets = torch.tensor(np.stack([events, times], axis=1), dtype=torch.float64)
    outputs = torch.tensor(scores).unsqueeze(1)
    assert float(cox_loss(outputs, targets)) == pytest.approx(
        cox_oracle(scores, events, times), rel=1e-9, abs=1e-12
    )
    masked = float(cox_loss(outputs, targets, torch.tensor(weight)))
    assert masked == pytest.approx(cox_oracle(scores, events, times, weight), rel=1e-9, abs=1e-12)


def test_cox_loss_equals_flamby_without_ties():
    generator = torch.Generator().manual_seed(4)
    scores = torch.randn(30, 1, generator=generator, dtype=torch.float64)
    times = torch.randperm(30, generator=generator).double() + 1.0
    truth = torch.stack([torch.randint(0, 2, (30,), generator=generator).double(), times], dim=1)
    assert torch.allclose(cox_loss(scores, truth), flamby_cox_loss(scores, truth))


def test_cox_loss_equals_lifelines_log_likelihood():
    """At lifelines' fitted coefficients, -n * our loss is lifelines' partial log-likelihood (distinct times)."""
    rng = np.random.default_rng(5)
    n = 80
    covariates = rng.normal(size=(n, 3))
    times = rng.exponential(
        scale=np.exp(-covariates @ np.array([0.8, -0.5, 0.3]))
    ) + 1e-6 * np.arange(n)
    events = (rng.uniform(size=n) < 0.7).astype(float)
    frame = pd.DataFrame(covariates, columns=["a", "b", "c"]).assign(T=times, E=events)
    fitter = CoxPHFitter().fit(frame, duration_col="T", event_col="E")
    scores = torch.tensor(covariates @ fitter.params_.to_numpy()).unsqueeze(1)
    targets = torch.tensor(np.stack([events, times], axis=1))
    assert -n * float(cox_loss(scores, targets)) == pytest.approx(fitter.log_likelihood_, rel=1e-6)


# --- metrics -------------------------------------------------------------------------------------------------------


def harrell_c_index(times: np.ndarray, risk: np.ndarray, events: np.ndarray) -> float:
    """Harrell's C-index by its definition over all pairs, O(n^2) (the library's hand-written code until it called
    lifelines): comparable when i had an event and T_i < T_j, or T_i = T_j with j censored; ties in risk count 1/2."""
    events = events.astype(bool)
    comparable = events[:, None] & (
        (times[:, None] < times[None, :]) | ((times[:, None] == times[None, :]) & ~events[None, :])
    )
    if comparable.sum() == 0:
        raise ZeroDivisionError
    score = (risk[:, None] > risk[None, :]) + 0.5 * (risk[:, None] == risk[None, :])
    return float((score * comparable).sum() / comparable.sum())


@settings(max_examples=40, deadline=None)
@given(n=st.integers(2, 60), seed=st.integers(0, 10**6), tie_range=st.integers(1, 10))
def test_c_index_is_harrells_definition_with_ties(n, seed, tie_range):
    rng = np.random.default_rng(seed)
    times, events = rng.integers(0, tie_range, n).astype(float), rng.integers(0, 2, n)
    risk = rng.integers(0, 5, n).astype(float)  # tied risks too
    try:
        expected = harrell_c_index(times, risk, events)
    except ZeroDivisionError:
        with pytest.raises(ValueError, match="comparable"):
            concordance_index(times, risk, events)
        return
    assert concordance_index(times, risk, events) == pytest.approx(expected, abs=1e-12)
    # the sign: a higher risk means an earlier event (lifelines itself takes predicted times, FLamby passes -risk)
    assert lifelines_concordance_index(times, -risk, events) == pytest.approx(expected, abs=1e-12)


def test_c_index_of_a_diverged_model_is_nan():
    times, events = np.array([1.0, 2.0, 3.0]), np.array([1, 1, 0])
    assert np.isnan(concordance_index(times, np.array([1.0, np.nan, 0.0]), events))


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 50), n_classes=st.integers(2, 5), seed=st.integers(0, 10**6))
def test_accuracy_and_balanced_accuracy_are_their_definitions(n, n_classes, seed):
    rng = np.random.default_rng(seed)
    y_true, y_pred = rng.integers(0, n_classes, n), rng.integers(0, n_classes, n)
    assert accuracy(y_true, y_pred) == pytest.approx(np.mean(y_true == y_pred), abs=1e-12)
    recalls = [
        np.mean(y_pred[y_true == label] == label) for label in np.unique(y_true)
    ]  # classes with a label
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning escapes for a predicted class that no label has
        assert balanced_accuracy(y_true, y_pred) == pytest.approx(np.mean(recalls), abs=1e-12)


def test_evaluate_classification_and_survival():
    generator = torch.Generator().manual_seed(6)
    model = build_model("creditcard", seed=1)
    x, y = torch.randn(50, 30, generator=generator), torch.randint(0, 2, (50,), generator=generator)
    metrics = evaluate(model, x, y, "creditcard", batch_size=16)
    assert model.training  # mode restored
    predicted = model.eval()(x).argmax(dim=1).numpy()
    assert metrics["accuracy"] == pytest.approx(accuracy_score(y.numpy(), predicted))
    assert metrics["balanced_accuracy"] == pytest.approx(
        balanced_accuracy_score(y.numpy(), predicted)
    )
    assert metrics["loss"] == pytest.approx(float(F.cross_entropy(model(x).detach(), y)), rel=1e-5)

    cox = build_model("tcga_brca", seed=2)
    x, y = torch.randn(40, 39, generator=generator), random_targets("tcga_brca", 40, generator)
    metrics = evaluate(cox, x, y, "tcga_brca")
    risk = cox(x).detach().squeeze(1).numpy()
    assert metrics["c_index"] == pytest.approx(
        lifelines_concordance_index(y[:, 1].numpy(), -risk, y[:, 0].numpy())
    )
    assert set(metrics) == {"loss", "c_index"}


# --- vmap / grad over padded users (how per-user training calls the losses) -------------------------------------


@pytest.mark.parametrize("name", sorted(MODELS))
def test_per_user_gradients_under_vmap_equal_unpadded_loop(name):
    generator = torch.Generator().manual_seed(7)
    model = build_model(name, seed=0).eval()  # eval: dropout off, so both paths are deterministic
    params = {k: v.detach() for k, v in model.named_parameters()}
    loss = loss_function(name)
    sizes, width = [3, 5, 2], 5
    x = torch.randn(len(sizes), width, *INPUT_SHAPES[name], generator=generator)
    y = torch.stack([random_targets(name, width, generator) for _ in sizes])
    weight = torch.stack([(torch.arange(width) < size).float() for size in sizes])

    def user_loss(p, xs, ys, ws):
        return loss(functional_call(model, p, (xs,)), ys, ws)

    batched = vmap(grad(user_loss), in_dims=(None, 0, 0, 0))(params, x, y, weight)
    for u, size in enumerate(sizes):
        expected = torch.func.grad(
            lambda p, u=u, size=size: loss(
                functional_call(model, p, (x[u, :size],)), y[u, :size], None
            )
        )(params)
        for key in params:
            assert torch.allclose(batched[key][u], expected[key], atol=1e-6), (name, key, u)
