"""uldp.paper.verdicts: the standard errors of a difference over seeds, checked against scipy's t-tests."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from uldp.paper.verdicts import (
    FAILS,
    HOLDS,
    PARTLY,
    SE_MULTIPLE,
    Difference,
    difference,
    estimate,
    margin_verdict,
)


def test_paired_difference_is_scipys_paired_t_test():
    rng = np.random.default_rng(0)
    a, b = rng.normal(0.8, 0.05, 7), rng.normal(0.78, 0.05, 7)
    gap = difference(dict(enumerate(a)), dict(enumerate(b)))
    assert gap.paired and gap.seeds == 7
    assert gap.mean / gap.se == pytest.approx(stats.ttest_rel(a, b).statistic)


def test_unpaired_difference_is_welchs_t_test():
    rng = np.random.default_rng(1)
    a, b = rng.normal(0.8, 0.05, 5), rng.normal(0.7, 0.02, 4)
    gap = difference(dict(enumerate(a)), {seed + 10: value for seed, value in enumerate(b)})
    assert not gap.paired
    assert gap.mean / gap.se == pytest.approx(stats.ttest_ind(a, b, equal_var=False).statistic)


def test_one_seed_has_no_spread_and_the_mean_decides():
    gap = difference({0: 0.9}, {0: 0.8})
    assert math.isnan(gap.se) and gap.clears(0.05) and not gap.clears(0.15)


def test_the_margin_is_se_multiple_standard_errors():
    gap = Difference(0.1, 0.04, 5, True)
    assert gap.clears(0.1 - SE_MULTIPLE * 0.04 - 1e-9) and not gap.clears(
        0.1 - SE_MULTIPLE * 0.04 + 1e-9
    )
    assert [margin_verdict(Difference(m, 0.04, 5, True), 0.0) for m in (0.2, 0.05, -0.05)] == [
        HOLDS,
        PARTLY,
        FAILS,
    ]


def test_differences_of_separate_settings_add_their_variances():
    combined = Difference(0.3, 0.03, 5, True).minus(Difference(0.1, 0.04, 5, True), scale=0.5)
    assert combined.mean == pytest.approx(0.25) and combined.se == pytest.approx(
        math.hypot(0.03, 0.02)
    )
    assert estimate({0: 1.0, 1: 3.0}).se == pytest.approx(stats.sem([1.0, 3.0]))


def test_a_side_without_values_is_refused():
    with pytest.raises(ValueError, match="values on both sides"):
        difference({}, {0: 1.0})
