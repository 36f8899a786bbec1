"""uldp.fitting.clipping through uldp.fit: a clipping bound far above or far below the per-user update norms warns
(ClipWarning) and says how to choose it without spending the budget, one near their median does not, and the norms'
quantiles are reported in history.info["update_norms"]."""

from __future__ import annotations

import warnings

import pytest
from fitting_helpers import fit_arguments, mlp, records

import uldp.fitting
from uldp.fitting import fit


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
