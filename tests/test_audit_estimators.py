"""Tests of uldp.audit.estimators against closed forms: Gaussian and randomized-response mechanisms of known epsilon.

The scores are sampled directly from the mechanisms (no training), so the true epsilon is known exactly: the
Gaussian mechanism with sensitivity/noise ``mu`` has the privacy profile
``delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)`` (Balle and Wang 2018, Theorem 8), and randomized
response that reports the bit with probability ``e^eps / (1 + e^eps)`` is exactly eps-DP.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from scipy import optimize, stats

from uldp.audit.estimators import (
    clopper_pearson,
    many_run_bound,
    one_run_bound,
    one_run_epsilon,
    one_run_p_value,
    roc_curve,
)

DELTA = 1e-5


def gaussian_epsilon(mu: float, delta: float) -> float:
    """The exact epsilon at ``delta`` of the Gaussian mechanism with ``mu = sensitivity / std`` (Balle-Wang)."""
    def profile(eps: float) -> float:
        return stats.norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * stats.norm.cdf(-eps / mu - mu / 2) - delta
    return optimize.brentq(profile, 0.0, 200.0)


def gaussian_scores(rng: np.random.Generator, mu: float, n: int) -> tuple[np.ndarray, np.ndarray]:
    return rng.normal(mu, 1.0, n), rng.normal(0.0, 1.0, n)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 200), data=st.data())
def test_clopper_pearson_inverts_the_binomial_tails(n: int, data: st.DataObject) -> None:
    k = data.draw(st.integers(0, n))
    low, high = clopper_pearson(k, n, level=0.025)
    if k > 0:  # P[Bin(n, low) >= k] = level
        assert stats.binom.sf(k - 1, n, float(low)) == pytest.approx(0.025, rel=1e-6)
    else:
        assert low == 0
    if k < n:  # P[Bin(n, high) <= k] = level
        assert stats.binom.cdf(k, n, float(high)) == pytest.approx(0.025, rel=1e-6)
    else:
        assert high == 1


def test_many_run_bound_stays_below_the_gaussian_epsilon_at_95_percent() -> None:
    rng = np.random.default_rng(1)
    mu = 1.5
    truth = gaussian_epsilon(mu, DELTA)
    bounds = [many_run_bound(*gaussian_scores(rng, mu, 2000), delta=DELTA).epsilon for _ in range(40)]
    assert np.mean(np.array(bounds) > truth) <= 0.05
    assert max(bounds) > 0.5  # and it does find leakage


def test_many_run_bound_approaches_the_gaussian_epsilon_with_many_runs() -> None:
    rng = np.random.default_rng(2)
    mu = 0.86
    truth = gaussian_epsilon(mu, DELTA)  # 3.70
    few = many_run_bound(*gaussian_scores(rng, mu, 10_000), delta=DELTA)
    many = many_run_bound(*gaussian_scores(rng, mu, 1_000_000), delta=DELTA)
    assert few.epsilon < many.epsilon <= truth
    assert many.epsilon >= 0.7 * truth
    assert many.n_in == many.n_out == 1_000_000


def test_many_run_bound_approaches_pure_epsilon_of_randomized_response() -> None:
    rng = np.random.default_rng(3)
    epsilon, n = 1.0, 400_000
    p = 1 / (1 + math.exp(-epsilon))
    bound = many_run_bound(rng.random(n) < p, rng.random(n) < 1 - p, delta=DELTA)
    assert 0.9 * epsilon <= bound.epsilon <= epsilon


def test_many_run_bound_of_a_mechanism_without_noise_is_large() -> None:
    bound = many_run_bound(np.ones(10_000), np.zeros(10_000), delta=DELTA)
    assert bound.epsilon > 7.5  # log(10000 / 3.7): all the runs can show
    assert bound.fpr == 0 and bound.tpr == 1 and bound.estimate == math.inf


def test_many_run_bound_uses_the_symmetric_inequality() -> None:
    """Leakage only in the low tail: without the canary, half the runs score -100 (the high tail shows log 2)."""
    rng = np.random.default_rng(4)
    inside = rng.normal(0.0, 1.0, 20_000)
    outside = np.where(rng.random(20_000) < 0.5, -100.0, rng.normal(0.0, 1.0, 20_000))
    bound = many_run_bound(inside, outside, delta=DELTA)
    assert bound.direction == "low" and bound.epsilon > 5


def test_many_run_bound_refuses_bad_input() -> None:
    with pytest.raises(ValueError, match="scores_in"):
        many_run_bound([], [1.0], delta=DELTA)
    with pytest.raises(ValueError, match="scores_out"):
        many_run_bound([1.0], [math.nan], delta=DELTA)
    with pytest.raises(ValueError, match="confidence"):
        many_run_bound([1.0], [0.0], delta=DELTA, confidence=1.0)
    with pytest.raises(ValueError, match="delta"):
        many_run_bound([1.0], [0.0], delta=0.0)


def test_roc_curve_is_monotone_and_ends_at_one() -> None:
    rng = np.random.default_rng(5)
    fpr, tpr = roc_curve(*gaussian_scores(rng, 1.0, 500))
    assert (np.diff(fpr) >= 0).all() and (np.diff(tpr) >= 0).all()
    assert fpr[-1] == tpr[-1] == 1


def test_one_run_p_value_without_delta_is_the_binomial_tail() -> None:
    for r, v, eps in ((10, 7, 0.5), (100, 80, 1.0), (50, 50, 3.0)):
        p = 1 / (1 + math.exp(-eps))
        assert one_run_p_value(m=200, r=r, v=v, epsilon=eps, delta=0.0) == pytest.approx(stats.binom.sf(v - 1, r, p))


def test_one_run_p_value_matches_the_theorem_written_with_tails() -> None:
    """``f(v) + 2 m delta max_i (f(v - i) - f(v)) / i`` with ``f`` the binomial upper tail, computed directly."""
    m, r, v, eps, delta = 300, 40, 33, 1.2, 1e-4
    p = 1 / (1 + math.exp(-eps))
    tail = lambda x: stats.binom.sf(x - 1, r, p)  # noqa: E731 - P[Bin >= x]
    expected = tail(v) + 2 * m * delta * max((tail(v - i) - tail(v)) / i for i in range(1, v + 1))
    assert one_run_p_value(m=m, r=r, v=v, epsilon=eps, delta=delta) == pytest.approx(expected, rel=1e-9)


def test_one_run_bound_holds_and_approaches_randomized_response() -> None:
    rng = np.random.default_rng(6)
    epsilon = 1.0
    p = 1 / (1 + math.exp(-epsilon))

    def audit(m: int) -> float:
        included = rng.random(m) < 0.5
        reported = np.where(rng.random(m) < p, included, ~included)  # randomized response: exactly eps-DP
        return one_run_bound(reported + 0.01 * rng.random(m), included, guesses=m // 2, delta=0.0).epsilon

    small = [audit(1000) for _ in range(40)]
    assert np.mean(np.array(small) > epsilon) <= 0.05
    assert 0.85 * epsilon <= audit(100_000) <= epsilon


def test_one_run_bound_stays_below_the_gaussian_epsilon() -> None:
    rng = np.random.default_rng(7)
    mu, m = 2.0, 5000
    truth = gaussian_epsilon(mu, DELTA)
    for _ in range(10):
        included = rng.random(m) < 0.5
        scores = rng.normal(mu * included, 1.0)
        bound = one_run_bound(scores, included, guesses=[50, 200, 1000], delta=DELTA)
        assert 0 < bound.epsilon <= truth
        assert bound.guesses in (100, 400, 2000)


def test_one_run_epsilon_is_zero_without_evidence_and_refuses_bad_counts() -> None:
    assert one_run_epsilon(m=100, r=100, v=50, delta=DELTA) == 0.0
    with pytest.raises(ValueError, match="v must be"):
        one_run_p_value(m=10, r=5, v=6, epsilon=1.0, delta=0.0)
    with pytest.raises(ValueError, match="guesses"):
        one_run_bound([0.0, 1.0], [False, True], guesses=2, delta=DELTA)
