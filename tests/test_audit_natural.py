"""Tests of uldp.audit.natural: canaries join a real federation as extra users, and runs are reproducible."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from uldp.audit.natural import (
    NaturalSetting,
    canary_records,
    natural_run,
    standardised,
    with_canaries,
)
from uldp.data import load
from uldp.simulation import build_federation

SETTING = NaturalSetting(
    rounds=1, local_epochs=1, n_users=10, max_train_records=120, canaries=4, canary_records=2
)


def test_canaries_are_flipped_test_records_and_join_as_users() -> None:
    data = load("synthetic")
    x, y = canary_records(data, SETTING, seed=3)
    assert x.shape == (4, 3, 2, data.x_test.shape[1]) and y.shape == (4, 3, 2)
    rows = [
        int(torch.nonzero((data.x_test == record).all(dim=1))[0, 0])
        for record in x.reshape(-1, x.shape[-1])
    ]
    torch.testing.assert_close(y.reshape(-1), 1 - data.y_test[rows])  # their labels flipped
    federation, _ = build_federation(SETTING.config("ULDP-AVG", sigma=1.0, seed=3), data)
    included = np.array([True, False, True, False])
    joined = with_canaries(federation, x, y, included, SETTING)
    counts = joined.counts
    assert joined.n_users == federation.n_users + 4
    np.testing.assert_array_equal(counts[:, : federation.n_users], federation.counts)
    np.testing.assert_array_equal(
        counts[:, federation.n_users :], [[2, 0, 2, 0]] * 3
    )  # r records in each silo
    torch.testing.assert_close(
        joined.x[federation.x.shape[0] :], x[[0, 2]].reshape(-1, x.shape[-1])
    )


def test_natural_runs_are_seeded_and_score_every_canary() -> None:
    data = load("synthetic")
    canaries = canary_records(data, SETTING, seed=0)
    included = np.array([True, True, False, False])
    first = natural_run(
        "ULDP-AVG", SETTING, included, sigma=2.0, seed=5, canaries=canaries, dataset=data
    )
    again = natural_run(
        "ULDP-AVG", SETTING, included, sigma=2.0, seed=5, canaries=canaries, dataset=data
    )
    np.testing.assert_array_equal(first, again)
    assert first.shape == (4,) and (first < 0).all()  # minus a cross-entropy
    with pytest.raises(ValueError, match="included"):
        natural_run(
            "ULDP-AVG", SETTING, included[:3], sigma=2.0, seed=5, canaries=canaries, dataset=data
        )


def test_standardised_centres_each_canary_over_runs() -> None:
    scores = np.array([[1.0, 10.0], [3.0, 10.0]])
    np.testing.assert_allclose(standardised(scores), [[-1.0, 0.0], [1.0, 0.0]])
