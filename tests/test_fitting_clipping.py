"""uldp.fitting.clipping through uldp.fit: a clipping bound far above or far below the per-user update norms warns
(ClipWarning) and says how to choose it without spending the budget, one near their median does not, and the norms'
quantiles are reported in history.info["update_norms"]."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from fitting_helpers import fit_arguments, mlp, records

import uldp.fitting
from uldp.fitting import fit
from uldp.fitting.clipping import update_norms
from uldp.methods import Hyperparameters, heavy_user_federation, make_method
from uldp.training.per_user import flat_parameters


def test_a_clip_far_from_the_update_norms_warns_and_says_how_to_choose_it_for_free():
    x, y, users, silos = records()
    arguments = fit_arguments(
        users,
        silos,
        rounds=1,
        sigma=1.0,
        local_epochs=1,
        batch_size=8,
    )
    with pytest.warns(
        uldp.fitting.ClipWarning, match="times off the median per-user update norm.*public or proxy"
    ):
        _, history = fit(mlp(), x, y, clip=1000.0, **arguments)
    median = history.info["update_norms"]["50%"]
    assert history.info["update_norms"]["10%"] <= median <= history.info["update_norms"]["90%"]
    with warnings.catch_warnings():
        warnings.simplefilter("error", uldp.fitting.ClipWarning)
        fit(mlp(), x, y, clip=median, **arguments)
    with pytest.warns(uldp.fitting.ClipWarning, match="shrinks most updates"):
        fit(mlp(), x, y, clip=median / 100, **arguments)


@pytest.mark.parametrize("name", ["ULDP-AVG", "ULDP-SGD"])
def test_update_norms_are_the_same_in_one_chunk_or_one_user_per_chunk(name, monkeypatch):
    """The norms come from the engines' chunks (never ``[sample, d]`` at once), each at its own user's place."""
    federation = heavy_user_federation(n_users=10, n_silos=2, seed=3, heavy=30)
    method = make_method(name, Hyperparameters(1.0, 0.1, 2, 4, 1.0, 1.0))
    params = flat_parameters(federation.model) + 0.3
    seed = np.random.SeedSequence(7)
    together = update_norms(method, federation, params, seed)
    monkeypatch.setattr("uldp.training.per_user.chunk_floats_for", lambda device: 1)
    apart = update_norms(method, federation, params, seed)
    assert together.size > 10 and np.all(together > 0) and np.unique(together).size == together.size
    np.testing.assert_allclose(apart, together, rtol=1e-5)
