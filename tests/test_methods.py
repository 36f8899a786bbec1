"""The federated methods: registry, user-level sensitivity (Theorems 1 and 3), noise std, weights, sampling, flags."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings, strategies as st
from torch import nn

from uldp.data.base import Allocation
from uldp.method_names import FAMILIES
from uldp.methods import (
    KNOWN_METHODS,
    METHOD_CLASSES,
    EveryRecordSiloNoise,
    FedAvgMethod,
    Federation,
    Hyperparameters,
    Method,
    UserLevelMethod,
    aggregate,
    enhanced_weights,
    heavy_user_federation,
    make_method,
    parse_method,
    required_hyperparameters,
    uldp_avg,
    uniform_weights,
    weighted_sum,
)
from uldp.methods.group import contribution_flags, resolve_group_size
from uldp.models import bce_loss

CLIP, SIGMA = 0.3, 5.0
HP = Hyperparameters(
    global_lr=10.0, local_lr=0.5, local_epochs=2, batch_size=4, clip=CLIP, sigma=SIGMA
)


def params_of(fed: Federation) -> torch.Tensor:
    return torch.cat([p.detach().flatten() for p in fed.model.parameters()]) + 0.5


def test_registry_names_and_errors():
    assert parse_method("ULDP-GROUP-08").name == "ULDP-GROUP-8"
    assert parse_method("ULDP-GROUP-median").group_size == "median"
    assert (
        parse_method("ULDP-SGD-w").family == "ULDP-SGD"
        and parse_method("ULDP-SGD-w").enhanced_weights
    )
    for bad in ("FEDAVG", "ULDP-GROUP-0", "ULDP-GROUP-x", "uldp-avg"):
        with pytest.raises(ValueError, match="known methods: DEFAULT, ULDP-NAIVE"):
            parse_method(bad)
    with pytest.raises(ValueError, match="only defined for ULDP-SGD/AVG"):
        make_method("ULDP-NAIVE", Hyperparameters(1.0, 0.1, 1, 4, 0.1, 5.0, q=0.5))
    with pytest.raises(ValueError, match="needs clip"):
        make_method("ULDP-AVG", Hyperparameters(1.0, 0.1, 1, 4, None, 5.0))
    assert len(KNOWN_METHODS) == 9


@pytest.mark.parametrize(
    "name", ["DEFAULT", "ULDP-NAIVE", "ULDP-GROUP-3", "ULDP-SGD", "ULDP-AVG-w"]
)
def test_registry_builds_every_family_from_exactly_its_required_hyperparameters(name):
    """Each family has a class; it needs the hyperparameters its class lists (a missing one is named) and no
    others; what it builds follows the Method protocol and says its group size."""
    assert set(METHOD_CLASSES) == set(FAMILIES)
    family = parse_method(name).family
    required = required_hyperparameters(family)
    optional = ("local_lr", "local_epochs", "clip", "sigma")
    assert set(required) <= set(optional)
    left_out: dict[str, Any] = {field: None for field in optional if field not in required}
    bare = replace(HP, **left_out)
    method = make_method(name, bare)
    assert isinstance(method, Method) and isinstance(method, METHOD_CLASSES[family])
    fed = heavy_user_federation(n_users=5, n_silos=2, seed=0, heavy=6)
    assert method.group_size(fed) == (3 if family == "ULDP-GROUP" else None)
    seed = np.random.SeedSequence(
        1
    )  # a round and the accountant run without the hyperparameters left out
    prepared = method.prepare(fed, seed)
    assert torch.isfinite(method.round(params_of(fed), prepared, seed)).all()
    assert (method.epsilon(prepared, 2) is None) == (family == "DEFAULT")
    for field in required:
        missing: dict[str, Any] = {field: None}
        with pytest.raises(ValueError, match=f"{name} needs {field}"):
            make_method(name, replace(HP, **missing))


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 10_000),
    n_silos=st.integers(2, 5),
    family=st.sampled_from(["ULDP-AVG", "ULDP-SGD"]),
    weighting=st.sampled_from(["uniform", "enhanced", "random"]),
)
def test_uldp_sgd_avg_user_sensitivity_is_at_most_c(seed, n_silos, family, weighting):
    fed = heavy_user_federation(n_users=12, n_silos=n_silos, seed=seed)
    weights = None
    if weighting == "random":  # any valid weights: a random point of the simplex per user
        weights = np.random.default_rng(seed).dirichlet(np.full(n_silos, 0.5), size=12).T
    name = family + ("-w" if weighting == "enhanced" else "")
    method = make_method(name, HP, user_weights=weights)
    assert isinstance(method, UserLevelMethod)
    round_seed = np.random.SeedSequence(seed)
    params = params_of(fed)
    full = method.clean_update(params, fed, round_seed)
    for user in (0, 1, 2):  # the heavy user and two light ones
        change = (full - method.clean_update(params, fed.without_user(user), round_seed)).norm()
        assert change <= CLIP * (1 + 1e-5)
    heavy_change = (full - method.clean_update(params, fed.without_user(0), round_seed)).norm()
    assert (
        heavy_change > 0.5 * CLIP
    )  # the bound is nearly reached: the heavy user's deltas are clipped


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), n_silos=st.integers(2, 5))
def test_naive_user_sensitivity_bound(seed, n_silos):
    fed = heavy_user_federation(n_users=12, n_silos=n_silos, seed=seed)
    method = make_method("ULDP-NAIVE", HP)
    assert isinstance(method, FedAvgMethod)
    round_seed = np.random.SeedSequence(seed)
    params = params_of(fed)
    full = method.silo_deltas(params, fed, round_seed)
    for user in (0, 1):
        without = method.silo_deltas(params, fed.without_user(user), round_seed)
        per_silo = [(a - b).norm() for a, b in zip(full, without, strict=True)]
        # each silo's clipped delta lies in the C-ball: it moves by at most 2C (add/remove), so the sum by 2|S|C
        assert max(per_silo) <= 2 * CLIP * (1 + 1e-6)
        assert sum(per_silo) <= 2 * n_silos * CLIP * (1 + 1e-6)
        assert (
            torch.stack(full).sum(0) - torch.stack(without).sum(0)
        ).norm() <= 2 * n_silos * CLIP * (1 + 1e-6)


def test_naive_silo_change_can_exceed_c():
    """The paper's Theorem 1 proof says one user moves a silo's clipped delta by at most C; removal can move it ~2C."""
    x = torch.tensor([[1.0]] * 4 + [[-1.0]] * 12)
    y = torch.tensor([1.0] * 4 + [1.0] * 12)  # user 1 pulls the weight down, user 0 pulls it up
    user = np.array([0] * 4 + [1] * 12)
    model = nn.Linear(1, 1, bias=False)
    fed = Federation(
        model, bce_loss, x, y, Allocation(user, np.zeros(16, dtype=int), 2, 1, "test", 0)
    )
    method = make_method("ULDP-NAIVE", Hyperparameters(1.0, 1.0, 20, 16, 0.1, 5.0))
    assert isinstance(method, FedAvgMethod)
    params = torch.zeros(1)
    seed = np.random.SeedSequence(0)
    change = (
        method.silo_deltas(params, fed, seed)[0]
        - method.silo_deltas(params, fed.without_user(1), seed)[0]
    )
    assert change.norm() > 1.9 * 0.1


@pytest.mark.parametrize(
    "name, sum_std_over_sigma",
    [
        ("ULDP-NAIVE", lambda s, c: 2 * s * c),
        ("ULDP-AVG", lambda s, c: c),
        ("ULDP-SGD-w", lambda s, c: c),
    ],
)
def test_noise_has_the_theorems_std(name, sum_std_over_sigma):
    n_silos, size = 4, 200_000
    method = make_method(name, HP)
    assert isinstance(method, EveryRecordSiloNoise)
    noise = method.noise(size, n_silos, np.random.SeedSequence(7))
    # Theorem 1 / 3: the summed noise is N(0, (sigma * sensitivity)^2), sensitivity 2|S|C (NAIVE, corrected) or C
    total_std = float(torch.stack(noise).sum(0).std())
    expected = SIGMA * sum_std_over_sigma(n_silos, CLIP)
    assert abs(total_std / expected - 1) < 0.01  # sd of the estimate ~ 0.16 %: 6 sigma away
    for z in noise:
        assert abs(float(z.std()) / (expected / math.sqrt(n_silos)) - 1) < 0.01
        assert abs(float(z.mean())) < 5 * expected / math.sqrt(n_silos * size)
    # independent across silos
    assert abs(float(torch.corrcoef(torch.stack(noise[:2]))[0, 1])) < 0.01


@pytest.mark.parametrize("name", ["ULDP-NAIVE", "ULDP-AVG", "ULDP-AVG-w", "ULDP-SGD"])
def test_round_adds_exactly_the_noise_and_scales_the_step(name):
    fed = heavy_user_federation(n_users=6, n_silos=3, seed=1, heavy=20)
    method = make_method(name, HP)
    assert isinstance(method, (FedAvgMethod, UserLevelMethod))
    seed = np.random.SeedSequence(3)
    params = params_of(fed)
    new = method.round(params, fed, seed)
    noise = torch.stack(method.noise(params.numel(), 3, seed)).sum(0)
    scale = HP.global_lr / (3 if name == "ULDP-NAIVE" else HP.q * 6 * 3)
    torch.testing.assert_close(
        new, params + scale * (method.clean_update(params, fed, seed) + noise)
    )


def test_enhanced_weights_call_the_pluggable_aggregation():
    fed = heavy_user_federation(n_users=6, n_silos=3, seed=2, heavy=20)
    method = make_method("ULDP-AVG-w", HP)
    calls = []

    def spy(deltas, counts, sampled, noise):
        calls.append((len(deltas), deltas[0].shape, counts.shape, sampled.shape, len(noise)))
        return aggregate(deltas, counts, sampled, noise)

    params = params_of(fed)
    seed = np.random.SeedSequence(0)
    torch.testing.assert_close(
        method.round(params, fed, seed, spy), method.round(params, fed, seed)
    )
    assert calls == [(3, torch.Size([6, params.numel()]), (3, 6), (6,), 3)]


def test_weights_sum_to_one_and_aggregate_matches_loop():
    rng = np.random.default_rng(0)
    counts = rng.integers(0, 4, size=(3, 7))
    counts[:, 2] = 0  # a user without records
    sampled = rng.random(7) < 0.6
    for weights in (enhanced_weights(counts, sampled), uniform_weights(counts, sampled)):
        sums = weights.sum(axis=0)
        assert np.allclose(sums[sampled & (counts.sum(0) > 0)], 1.0) and np.allclose(
            sums[~sampled], 0.0
        )
    deltas = [
        torch.randn(7, 5, dtype=torch.float64) * torch.from_numpy(counts[s] > 0)[:, None]
        for s in range(3)
    ]
    noise = [torch.randn(5, dtype=torch.float64) for _ in range(3)]
    expected = sum(noise)
    for s in range(3):
        for u in range(7):
            if sampled[u] and counts[:, u].sum() > 0:
                expected = expected + counts[s, u] / counts[:, u].sum() * deltas[s][u]
    torch.testing.assert_close(aggregate(deltas, counts, sampled, noise), expected)
    torch.testing.assert_close(
        weighted_sum(deltas, enhanced_weights(counts, sampled), noise), expected
    )


@pytest.mark.parametrize("name", ["ULDP-AVG", "ULDP-AVG-w", "ULDP-SGD-w"])
def test_clear_rounds_sum_each_silo_one_chunk_of_users_at_a_time(name, monkeypatch):
    """A clear round and a silo's clear update never build a silo's ``[U, d]`` deltas: they sum one chunk of users at a
    time (here one user per chunk), and equal the weighted sum of the whole deltas."""
    fed = heavy_user_federation(n_users=12, n_silos=3, seed=4, heavy=20)
    method = make_method(name, HP)
    assert isinstance(method, UserLevelMethod)
    params, seed = params_of(fed), np.random.SeedSequence(5)
    sampled = method.sample_users(fed.n_users, seed)
    weights = method.weights(fed.counts, sampled)
    noise = method.noise(params.numel(), fed.n_silos, seed)
    deltas = method.user_deltas(params, fed, seed, sampled)
    expected = method.server_step(
        params, weighted_sum(deltas, weights, noise), n_users=fed.n_users, n_silos=fed.n_silos
    )

    def whole(*args, **kwargs):
        raise AssertionError("a clear round built a silo's [U, d] deltas")

    monkeypatch.setattr(UserLevelMethod, "silo_user_deltas", whole)
    monkeypatch.setattr("uldp.training.per_user.chunk_floats_for", lambda device: 1)
    chunk_sizes: list[int] = []
    clip_rows = uldp_avg.clip_rows

    def counted(rows, clip):
        chunk_sizes.append(rows.shape[0])
        return clip_rows(rows, clip)

    monkeypatch.setattr(uldp_avg, "clip_rows", counted)
    torch.testing.assert_close(method.round(params, fed, seed), expected)
    assert chunk_sizes and set(chunk_sizes) == {1}
    assert len(chunk_sizes) == int(((fed.counts > 0) & sampled[None, :]).sum())
    torch.testing.assert_close(
        method.silo_update(params, fed, seed, 1, sampled=sampled, counts=fed.counts),
        torch.from_numpy(weights[1]).float() @ deltas[1] + noise[1],
    )


def test_user_sampling_rate_and_zero_weights_of_unsampled_users():
    q = 0.3
    method = make_method("ULDP-AVG", Hyperparameters(1.0, 0.1, 1, 4, 0.1, 5.0, q=q))
    assert isinstance(method, UserLevelMethod)
    sampled = np.stack(
        [method.sample_users(1000, np.random.SeedSequence(0, spawn_key=(t,))) for t in range(20)]
    )
    n = sampled.size
    assert abs(sampled.mean() - q) < 6 * math.sqrt(q * (1 - q) / n)
    assert not np.array_equal(sampled[0], sampled[1])  # fresh draw each round
    weights = method.weights(np.ones((2, 1000), dtype=int), sampled[0])
    assert np.all(weights[:, ~sampled[0]] == 0) and np.allclose(weights[:, sampled[0]], 0.5)


def test_group_flags_keep_at_most_k_records_per_user():
    rng = np.random.default_rng(0)
    user = rng.zipf(1.6, 2000) % 50
    counts = np.bincount(user, minlength=50)
    for k in (1, 2, 8):
        keep = contribution_flags(user, k, np.random.default_rng(k))
        np.testing.assert_array_equal(np.bincount(user[keep], minlength=50), np.minimum(counts, k))
    assert resolve_group_size("max", counts) == counts.max()
    assert resolve_group_size("median", counts) == int(np.median(counts[counts > 0]))
    with pytest.raises(ValueError, match="positive integer"):
        resolve_group_size(0, counts)


@pytest.mark.parametrize(("n_silos", "colluders"), [(3, 0), (3, 2), (5, 1)])
def test_against_t_colluders_the_honest_silos_noise_alone_has_the_runs_std(n_silos, colluders):
    """Issue 41 item 6: each silo's share is scaled by sqrt(|S| / (|S| - t)), so the noise of the |S| - t honest silos
    (the colluders subtract theirs) has variance (sigma C)^2 per coordinate: measured on their drawn noise, within
    the sample variance's 6 standard errors (chi-square: sd = var sqrt(2 / n))."""
    from uldp.policy import PolicyRefusal

    hp = Hyperparameters(1.0, 0.1, 1, 4, 0.5, 3.0)
    method = UserLevelMethod(parse_method("ULDP-AVG-w"), hp, colluders=colluders)
    size, seed = 200_000, np.random.SeedSequence(7)
    honest = torch.stack(
        [method.silo_noise(size, n_silos, seed, s).double() for s in range(colluders, n_silos)]
    ).sum(dim=0)
    expected = (3.0 * 0.5) ** 2  # (sigma C)^2
    assert float(honest.var()) == pytest.approx(expected, abs=6 * expected * math.sqrt(2 / size))
    if colluders:  # the paper's shares leave the colluders' victims sigma sqrt((|S| - t) / |S|)
        plain = UserLevelMethod(parse_method("ULDP-AVG-w"), hp)
        assert plain.noise_std(n_silos) ** 2 * (n_silos - colluders) < 0.9 * expected
    with pytest.raises(PolicyRefusal, match=r"colluders < \|S\|"):
        replace(method, colluders=n_silos).noise_std(n_silos)
