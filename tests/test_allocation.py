"""Allocation of records to users and silos (uldp.data.allocation) and the ``uldp allocate`` command."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

from uldp.data import allocate, load
from uldp.data.allocation import labels_per_user, summary, zipf_weights
from uldp.data.base import FederatedDataset

DATA = Path(
    os.environ.get("ULDP_DATA_DIR", Path(__file__).resolve().parents[2] / "shared" / "data")
)
needs_data = pytest.mark.skipif(
    not (DATA / "tcga_brca").is_dir(), reason=f"no dataset files in {DATA}"
)


def toy(n_records: int = 600, n_classes: int = 10, seed: int = 0) -> FederatedDataset:
    labels = torch.from_numpy(np.random.default_rng(seed).integers(n_classes, size=n_records))
    return FederatedDataset(
        "toy", "multiclass", torch.zeros(n_records, 1), labels, torch.zeros(0, 1), labels[:0]
    )


@pytest.fixture(scope="module")
def heart():
    if not (DATA / "heart_disease").is_dir():
        pytest.skip("no dataset files")
    return load("heart_disease", DATA)


@pytest.fixture(scope="module")
def tcga():
    if not (DATA / "tcga_brca").is_dir():
        pytest.skip("no dataset files")
    return load("tcga_brca", DATA)


# --- properties of every scheme ------------------------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(
    n_records=st.integers(1, 400),
    n_users=st.integers(1, 60),
    n_silos=st.integers(1, 8),
    scheme=st.sampled_from(["uniform", "zipf", "uniform-with-replacement"]),
    seed=st.integers(0, 2**32 - 1),
)
def test_every_record_gets_one_user_and_one_silo_in_range(
    n_records, n_users, n_silos, scheme, seed
):
    data = toy(n_records)
    allocation = allocate(data, n_users=n_users, n_silos=n_silos, scheme=scheme, seed=seed)
    assert allocation.user.shape == allocation.silo.shape == (n_records,)
    assert allocation.user.min() >= 0 and allocation.user.max() < n_users
    assert allocation.silo.min() >= 0 and allocation.silo.max() < n_silos
    counts = allocation.counts
    assert counts.shape == (n_silos, n_users) and counts.sum() == n_records
    again = allocate(data, n_users=n_users, n_silos=n_silos, scheme=scheme, seed=seed)
    assert np.array_equal(again.user, allocation.user) and np.array_equal(
        again.silo, allocation.silo
    )


@settings(max_examples=25, deadline=None)
@given(
    n_records=st.integers(1, 500),
    n_users=st.integers(1, 80),
    n_silos=st.integers(1, 9),
    seed=st.integers(0, 10**6),
)
def test_uniform_is_balanced_over_users_and_silos(n_records, n_users, n_silos, seed):
    allocation = allocate(
        toy(n_records), n_users=n_users, n_silos=n_silos, scheme="uniform", seed=seed
    )
    per_user, per_silo = allocation.counts.sum(axis=0), allocation.counts.sum(axis=1)
    assert per_user.max() - per_user.min() <= 1 and per_silo.max() - per_silo.min() <= 1


def test_different_seeds_give_different_allocations():
    data = toy(600)
    first, second = (allocate(data, n_users=20, n_silos=5, scheme="zipf", seed=s) for s in (1, 2))
    assert not np.array_equal(first.user, second.user)


def test_uniform_user_of_a_record_is_uniform():
    """Chi-square test of the marginal user of record 0 over many seeds (uniform over 5 users)."""
    from scipy.stats import chisquare

    firsts = [
        allocate(toy(23), n_users=5, n_silos=2, scheme="uniform", seed=s).user[0]
        for s in range(1000)
    ]
    assert chisquare(np.bincount(firsts, minlength=5)).pvalue > 1e-4


def test_with_replacement_draws_each_records_user_independently():
    """The authors' uniform: each record's user is uniform (chi-square over many seeds) and independent of the
    others, so users' sizes are binomial(n, 1/|U|) (their variance, against the balanced scheme's at most 1/4)."""
    from scipy.stats import chisquare

    firsts = [
        allocate(toy(23), n_users=5, n_silos=2, scheme="uniform-with-replacement", seed=s).user[0]
        for s in range(1000)
    ]
    assert chisquare(np.bincount(firsts, minlength=5)).pvalue > 1e-4
    sizes = np.concatenate(
        [
            allocate(
                toy(400), n_users=20, n_silos=3, scheme="uniform-with-replacement", seed=s
            ).counts.sum(axis=0)
            for s in range(50)
        ]
    )
    assert sizes.mean() == 20 and abs(sizes.var() - 400 * (1 / 20) * (19 / 20)) < 3.0


def test_with_replacement_silos_do_not_depend_on_the_number_of_users():
    """Run keys drop |U| for user-blind methods under this scheme: the silos must take the same draws."""
    few, many = (
        allocate(toy(300), n_users=n, n_silos=4, scheme="uniform-with-replacement", seed=9).silo
        for n in (3, 70)
    )
    assert np.array_equal(few, many)


@needs_data
def test_with_replacement_makes_larger_users_than_uniform_on_heart_disease(heart):
    """HeartDisease |U| = 200: balanced users hold at most 3 records; drawn with replacement, the largest holds more."""
    largest = {
        scheme: max(
            int(allocate(heart, n_users=200, scheme=scheme, seed=s).counts.sum(axis=0).max())
            for s in range(5)
        )
        for scheme in ("uniform", "uniform-with-replacement")
    }
    assert largest["uniform"] == 3 and largest["uniform-with-replacement"] > 3


def test_zipf_records_per_user_follow_zipf_over_ranks():
    n_users, alpha = 10, 0.5
    allocation = allocate(
        toy(60_000), n_users=n_users, n_silos=3, scheme="zipf", seed=7, user_alpha=alpha
    )
    shares = allocation.counts.sum(axis=0) / 60_000
    expected = np.arange(1, n_users + 1) ** -alpha
    np.testing.assert_allclose(shares, expected / expected.sum(), atol=0.01)


def test_zipf_silo_shares_follow_zipf_within_each_user():
    n_silos, alpha = 5, 2.0
    allocation = allocate(
        toy(50_000), n_users=5, n_silos=n_silos, scheme="zipf", seed=3, silo_alpha=alpha
    )
    counts = allocation.counts
    sorted_shares = np.sort(counts / counts.sum(axis=0), axis=0)[
        ::-1
    ]  # per user, silos by decreasing share
    expected = np.arange(1, n_silos + 1) ** -alpha
    np.testing.assert_allclose(sorted_shares.mean(axis=1), expected / expected.sum(), atol=0.02)
    # Each user's ranking of silos is its own random permutation: not all users share the same top silo.
    assert len(set(counts.argmax(axis=0).tolist())) > 1


def test_zipf_weights_match_closed_form():
    np.testing.assert_allclose(
        zipf_weights(3, 2.0), np.array([1, 1 / 4, 1 / 9]) / (1 + 1 / 4 + 1 / 9)
    )


# --- zipf-noniid ---------------------------------------------------------------------------------------------------


@settings(max_examples=30, deadline=None)
@given(
    n_users=st.integers(1, 120),
    n_labels=st.integers(1, 4),
    n_classes=st.integers(2, 10),
    seed=st.integers(0, 10**6),
)
def test_noniid_users_hold_at_most_n_labels(n_users, n_labels, n_classes, seed):
    data = toy(800, n_classes=n_classes, seed=seed)
    labels = data.labels
    assert labels is not None
    if n_users * min(n_labels, n_classes) < len(np.unique(labels)):
        with pytest.raises(ValueError, match="cannot cover"):
            allocate(
                data, n_users=n_users, n_silos=3, scheme="zipf-noniid", n_labels=n_labels, seed=seed
            )
        return
    allocation = allocate(
        data, n_users=n_users, n_silos=3, scheme="zipf-noniid", n_labels=n_labels, seed=seed
    )
    held = labels_per_user(allocation, labels)
    assert held.max() <= n_labels
    assert allocation.counts.sum() == 800 and allocation.user.max() < n_users


def test_noniid_labels_counted_independently():
    data = toy(1000)
    allocation = allocate(data, n_users=50, n_silos=5, scheme="zipf-noniid", n_labels=2, seed=0)
    labels = data.labels
    assert labels is not None
    for u in range(50):
        assert (
            len(set(labels[allocation.user == u].tolist()))
            == labels_per_user(allocation, labels)[u]
        )
        assert len(set(labels[allocation.user == u].tolist())) <= 2


def test_noniid_keeps_zipf_sizes_roughly():
    allocation = allocate(
        toy(20_000), n_users=20, n_silos=5, scheme="zipf-noniid", n_labels=2, seed=1
    )
    sizes = allocation.counts.sum(axis=0)
    assert (
        sizes[:3].mean() > 2 * sizes[-3:].mean()
    )  # rank 1-3 users stay much larger than ranks 18-20


# --- medical datasets (FLamby's fixed silos) --------------------------------------------------------------------


@needs_data
@settings(max_examples=40, deadline=None)
@given(
    n_users=st.integers(1, 432),
    scheme=st.sampled_from(["uniform", "zipf", "uniform-with-replacement"]),
    seed=st.integers(0, 2**32 - 1),
)
def test_tcga_every_user_silo_pair_with_records_has_at_least_two(tcga, n_users, scheme, seed):
    allocation = allocate(tcga, n_users=n_users, scheme=scheme, seed=seed)
    counts = allocation.counts
    assert counts[counts > 0].min() >= 2
    assert np.array_equal(allocation.silo, tcga.train_silo)
    assert counts.sum() == tcga.n_train
    if scheme == "zipf":
        assert counts.sum(axis=0).min() >= 2  # every user has records


@needs_data
@settings(max_examples=30, deadline=None)
@given(
    n_users=st.integers(1, 486),
    scheme=st.sampled_from(["uniform", "zipf", "uniform-with-replacement"]),
    seed=st.integers(0, 10**6),
)
def test_heart_disease_keeps_flamby_silos(heart, n_users, scheme, seed):
    allocation = allocate(heart, n_users=n_users, scheme=scheme, seed=seed)
    assert np.array_equal(allocation.silo, heart.train_silo) and allocation.n_silos == 4
    per_user = allocation.counts.sum(axis=0)
    assert per_user.sum() == heart.n_train
    if scheme == "uniform":
        assert per_user.max() - per_user.min() <= 1
    elif scheme == "zipf":
        assert per_user.min() >= 1  # drawn with replacement, a user may get no record


@needs_data
@pytest.mark.parametrize("name", ["heart_disease", "tcga_brca"])
def test_medical_zipf_puts_about_80_percent_in_the_primary_silo(name, heart, tcga):
    data = heart if name == "heart_disease" else tcga
    shares = []
    for seed in range(10):
        counts = allocate(data, n_users=20, scheme="zipf", seed=seed).counts
        per_user = counts.sum(axis=0)
        large = per_user >= 10
        shares.append(counts.max(axis=0)[large].sum() / per_user[large].sum())
    assert 0.72 < np.mean(shares) < 0.9
    uniform = allocate(data, n_users=20, scheme="uniform", seed=0).counts
    assert (
        uniform.max(axis=0) / uniform.sum(axis=0)
    ).mean() < 0.6  # the uniform scheme has no primary silo


@needs_data
def test_medical_zipf_is_skewed_over_users(heart):
    per_user = allocate(heart, n_users=50, scheme="zipf", seed=0).counts.sum(axis=0)
    assert per_user[:5].mean() > 2 * per_user[-25:].mean()


# --- bad parameters ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "pattern"),
    [
        ({"scheme": "dirichlet"}, "dirichlet"),
        ({"user_alpha": 0.0}, "user_alpha must be a finite number > 0, got 0.0"),
        ({"silo_alpha": -1.0}, "silo_alpha must be a finite number > 0, got -1.0"),
        ({"n_users": 0}, "n_users must be an integer in 1..1000000, got 0"),
        ({"n_users": True}, "n_users must be an integer in 1..1000000, got True"),
        ({"seed": -3}, "seed must be an integer >= 0, got -3"),
        ({"n_silos": None}, "n_silos=None"),
        ({"n_labels": 2}, "n_labels=2"),
        ({"scheme": "zipf-noniid", "n_labels": 0}, "n_labels must be an integer >= 1, got 0"),
    ],
)
def test_bad_parameters_raise_naming_the_value(kwargs, pattern):
    arguments = {"n_users": 10, "n_silos": 3, "scheme": "uniform", "seed": 0, **kwargs}
    with pytest.raises(ValueError, match=pattern):
        allocate(toy(100), **arguments)


@needs_data
def test_medical_bad_parameters(tcga):
    with pytest.raises(ValueError, match="n_silos=5"):
        allocate(tcga, n_users=10, n_silos=5, scheme="uniform", seed=0)
    with pytest.raises(ValueError, match="n_users=433"):
        allocate(tcga, n_users=433, scheme="zipf", seed=0)  # 432 = sum of floor(silo size / 2)
    with pytest.raises(ValueError, match="survival"):
        allocate(tcga, n_users=10, scheme="zipf-noniid", n_labels=2, seed=0)


# --- summary and CLI ---------------------------------------------------------------------------------------------


def test_summary_reports_records_per_user_and_top_silo_share():
    data = toy(12)
    allocation = allocate(data, n_users=3, n_silos=2, scheme="uniform", seed=0)
    stats = summary(allocation)
    per_user = np.bincount(allocation.user, minlength=3)
    assert (stats["records_per_user_min"], stats["records_per_user_max"]) == (
        per_user.min(),
        per_user.max(),
    )
    top = [
        np.bincount(allocation.silo[allocation.user == u], minlength=2).max() / per_user[u]
        for u in range(3)
    ]
    assert stats["top_silo_share_mean"] == pytest.approx(np.mean(top))


@needs_data
def test_cli_allocate_json(capsys):
    from uldp.cli import main

    status = main(
        [
            "allocate",
            "--dataset",
            "heart_disease",
            "--users",
            "7",
            "--dist",
            "zipf",
            "--seed",
            "4",
            "--json",
            "--data-dir",
            str(DATA),
        ]
    )
    assert status == 0
    payload = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    counts = np.array(payload["counts"])
    assert counts.shape == (4, 7) and counts.sum() == 486
    assert len(payload["labels_per_user"]) == 7 and max(payload["labels_per_user"]) <= 2
    assert payload["summary"]["n_records"] == 486 and "FLamby" in payload["summary"]["variant"]


def test_cli_allocate_default_silos_and_bad_users(capsys):
    from uldp.cli import main

    command = [
        "allocate",
        "--dataset",
        "synthetic",
        "--users",
        "4",
        "--dist",
        "uniform",
        "--seed",
        "0",
    ]
    assert main([*command, "--json"]) == 0
    payload = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert np.array(payload["counts"]).shape == (3, 4)
    assert (
        main(
            [
                "allocate",
                "--dataset",
                "synthetic",
                "--users",
                "0",
                "--dist",
                "uniform",
                "--seed",
                "0",
            ]
        )
        == 2
    )
    assert "n_users must be an integer in 1..1000000, got 0" in capsys.readouterr().err
