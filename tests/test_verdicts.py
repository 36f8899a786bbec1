"""uldp.paper.verdicts: the standard errors of a difference over seeds, checked against scipy's t-tests, and the
verdicts' error rates on simulated paired runs where the truth is known."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from uldp.paper.verdicts import (
    CONTRADICTED,
    HOLDS,
    MISSING,
    NOT_SHOWN,
    SE_MULTIPLE,
    Difference,
    NotMeasured,
    badge,
    difference,
    estimate,
    margin_verdict,
    settings_verdict,
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
    # the paper's way beyond the margin, inside it either way, the other way beyond it
    assert [
        margin_verdict(Difference(m, 0.04, 5, True), 0.0) for m in (0.2, 0.05, -0.05, -0.2)
    ] == [HOLDS, NOT_SHOWN, NOT_SHOWN, CONTRADICTED]
    assert margin_verdict(Difference(0.03, 0.04, 5, True), 0.02) == NOT_SHOWN


def test_differences_of_separate_settings_add_their_variances():
    combined = Difference(0.3, 0.03, 5, True).minus(Difference(0.1, 0.04, 5, True), scale=0.5)
    assert combined.mean == pytest.approx(0.25) and combined.se == pytest.approx(
        math.hypot(0.03, 0.02)
    )
    assert estimate({0: 1.0, 1: 3.0}).se == pytest.approx(stats.sem([1.0, 3.0]))


def test_a_side_without_values_is_refused():
    with pytest.raises(ValueError, match="values on both sides"):
        difference({}, {0: 1.0})


def test_a_claim_over_settings_holds_in_all_and_is_contradicted_by_any():
    assert settings_verdict([HOLDS, HOLDS]) == HOLDS
    assert settings_verdict([HOLDS, NOT_SHOWN]) == NOT_SHOWN
    assert settings_verdict([HOLDS, HOLDS, CONTRADICTED]) == CONTRADICTED
    with pytest.raises(NotMeasured):
        settings_verdict([])
    with pytest.raises(ValueError, match="unknown setting verdicts"):
        settings_verdict([HOLDS, MISSING])
    with pytest.raises(ValueError, match="unknown verdict"):
        badge("partly")


def test_pairing_uses_the_common_seeds_when_one_side_has_more():
    a = {seed: 0.8 + 0.01 * seed for seed in range(20)}
    b = {seed: 0.7 + 0.01 * seed for seed in range(5)}
    gap = difference(a, b)
    assert gap.paired and gap.seeds == 5
    assert gap.mean == pytest.approx(0.1) and gap.se == pytest.approx(0.0)


def _simulated_runs(rng, *, effect, seeds, shared_sd=0.1, own_sd=0.02):
    """Two methods over ``seeds`` seeds whose runs share each seed's noise draw (a large common term), as uldp's
    do: the true difference is ``effect``."""
    shared = rng.normal(0.0, shared_sd, seeds)
    a = 0.7 + effect + shared + rng.normal(0.0, own_sd, seeds)
    b = 0.7 + shared + rng.normal(0.0, own_sd, seeds)
    return dict(enumerate(a)), dict(enumerate(b))


@pytest.mark.parametrize("seeds", [5, 20])
def test_the_margin_covers_the_true_difference_at_the_t_distributions_level(seeds):
    """mean +- SE_MULTIPLE SE covers the true difference as often as Student's t says it must (normal errors),
    because the pairing removes the shared noise; Welch's interval, blind to it, is far too wide."""
    rng = np.random.default_rng(44)
    trials, effect = 4000, 0.01
    covered = wide = 0
    for _ in range(trials):
        a, b = _simulated_runs(rng, effect=effect, seeds=seeds)
        gap = difference(a, b)
        covered += gap.lower <= effect <= gap.upper
        welch = difference(a, {seed + 100: v for seed, v in b.items()})
        wide += welch.se > 2 * gap.se
    level = 2 * stats.t.cdf(SE_MULTIPLE, seeds - 1) - 1  # 0.884 at 5 seeds, 0.940 at 20
    assert abs(covered / trials - level) < 4 * math.sqrt(level * (1 - level) / trials)
    assert wide / trials > 0.95


def test_no_effect_is_rarely_called_either_way_and_a_clear_effect_holds():
    rng = np.random.default_rng(7)
    trials = 3000
    null = [
        margin_verdict(difference(*_simulated_runs(rng, effect=0.0, seeds=20)), 0.0)
        for _ in range(trials)
    ]
    one_side = (1 - stats.t.cdf(SE_MULTIPLE, 19)) * trials  # expected calls of either side: 2.99%
    assert abs(null.count(HOLDS) - one_side) < 4 * math.sqrt(one_side)
    assert abs(null.count(CONTRADICTED) - one_side) < 4 * math.sqrt(one_side)
    # an effect of 4 standard errors of the paired difference (0.02 * sqrt(2 / 20)) is called in nearly every trial
    clear = [
        margin_verdict(difference(*_simulated_runs(rng, effect=0.025, seeds=20)), 0.0)
        for _ in range(500)
    ]
    assert clear.count(HOLDS) > 0.9 * len(clear) and CONTRADICTED not in clear
    # the paper's direction inside the spread is "not shown", never "contradicted"
    small = [
        margin_verdict(difference(*_simulated_runs(rng, effect=0.003, seeds=20)), 0.0)
        for _ in range(500)
    ]
    assert small.count(CONTRADICTED) < 0.01 * len(small) and small.count(NOT_SHOWN) > 0.5 * len(
        small
    )
