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

from uldp.accounting import gaussian_epsilon as library_gaussian_epsilon
from uldp.audit.estimators import (
    clopper_pearson,
    gaussian_dp_bound,
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
        return (
            stats.norm.cdf(-eps / mu + mu / 2)
            - math.exp(eps) * stats.norm.cdf(-eps / mu - mu / 2)
            - delta
        )

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


#: Simulated audits of the coverage tests.
AUDITS = 1000


def allowed(confidence: float) -> int:
    """The most audits whose bound may exceed the truth: the 99.9% quantile of Binomial(AUDITS, 1 - confidence), so
    a valid bound fails the test with probability at most 0.001."""
    return int(stats.binom.ppf(0.999, AUDITS, 1 - confidence))


@pytest.mark.parametrize("mu, confidence", [(0.0, 0.8), (0.0, 0.95), (1.5, 0.95)])
def test_many_run_bound_covers_the_true_epsilon(mu: float, confidence: float) -> None:
    """1000 audits of 500 + 500 runs of a Gaussian mechanism of known epsilon (0: no leakage): the bound exceeds the
    truth in at most ``1 - confidence`` of them, allowing for binomial chance. Maximising over thresholds on the
    bounded runs themselves, as before, is positive in 42% of these audits without leakage at a stated 80%."""
    rng = np.random.default_rng(11)
    truth = gaussian_epsilon(mu, DELTA) if mu > 0 else 0.0
    bounds = np.array(
        [
            many_run_bound(
                *gaussian_scores(rng, mu, 500), delta=DELTA, confidence=confidence
            ).epsilon
            for _ in range(AUDITS)
        ]
    )
    assert (bounds > truth).sum() <= allowed(confidence)
    if mu > 0:
        assert (
            np.median(bounds) > 1.0
        )  # and it finds the leakage (500 runs a side certify little of 7.05)


@pytest.mark.parametrize("mu", [0.0, 0.5, 2.0])
def test_gaussian_dp_bound_covers_mu_at_95_percent_and_no_more(mu: float) -> None:
    """The lower bound on mu is exact for Gaussian scores: it exceeds the true mu in 5% of audits (between the 0.1%
    and 99.9% binomial quantiles), so epsilon exceeds the truth as often; a slack interval would fall short."""
    rng = np.random.default_rng(12)
    bounds = [gaussian_dp_bound(*gaussian_scores(rng, mu, 100), delta=DELTA) for _ in range(AUDITS)]
    above = sum(bound.mu_lower > mu for bound in bounds)
    assert stats.binom.ppf(0.001, AUDITS, 0.05) <= above <= allowed(0.95)
    truth = gaussian_epsilon(mu, DELTA) if mu > 0 else 0.0
    assert sum(bound.epsilon > truth + 1e-9 for bound in bounds) == above


def test_gaussian_dp_bound_is_near_tight_with_few_runs() -> None:
    rng = np.random.default_rng(13)
    mu = 0.86
    truth = gaussian_epsilon(mu, DELTA)  # 3.68
    gaussian = gaussian_dp_bound(*gaussian_scores(rng, mu, 20_000), delta=DELTA)
    many = many_run_bound(*gaussian_scores(rng, mu, 20_000), delta=DELTA)
    assert many.epsilon < 0.9 * truth < gaussian.epsilon <= truth
    assert gaussian.mu_lower < gaussian.mu_estimate and gaussian.estimate == pytest.approx(
        truth, rel=0.05
    )


def test_gaussian_dp_bound_refuses_bad_input() -> None:
    with pytest.raises(ValueError, match="scores_in"):
        gaussian_dp_bound([1.0], [0.0, 1.0], delta=DELTA)
    with pytest.raises(ValueError, match="spread"):
        gaussian_dp_bound([1.0, 1.0], [0.0, 0.0], delta=DELTA)


def test_library_gaussian_epsilon_matches_the_closed_form_and_dp_accounting() -> None:
    from dp_accounting.pld import privacy_loss_distribution as pld

    for mu in (0.1, 0.86, 3.0):
        finer = pld.from_gaussian_mechanism(
            1 / mu, value_discretization_interval=1e-4
        ).get_epsilon_for_delta(DELTA)
        assert library_gaussian_epsilon(mu=mu, delta=DELTA) == pytest.approx(
            gaussian_epsilon(mu, DELTA), rel=1e-9
        )
        assert library_gaussian_epsilon(mu=mu, delta=DELTA) == pytest.approx(finer, rel=1e-3)
    assert library_gaussian_epsilon(mu=0.0, delta=DELTA) == 0.0


def test_many_run_bound_approaches_the_gaussian_epsilon_with_many_runs() -> None:
    rng = np.random.default_rng(2)
    mu = 0.86
    truth = gaussian_epsilon(mu, DELTA)  # 3.70
    few = many_run_bound(*gaussian_scores(rng, mu, 10_000), delta=DELTA)
    many = many_run_bound(*gaussian_scores(rng, mu, 1_000_000), delta=DELTA)
    assert few.epsilon < many.epsilon <= truth
    assert (
        many.epsilon >= 0.65 * truth
    )  # the threshold is chosen on a fifth of the runs, the rest bound
    assert many.n_in == many.n_out == 800_000 and many.selection_runs == 400_000


def test_many_run_bound_approaches_pure_epsilon_of_randomized_response() -> None:
    rng = np.random.default_rng(3)
    epsilon, n = 1.0, 400_000
    p = 1 / (1 + math.exp(-epsilon))
    bound = many_run_bound(rng.random(n) < p, rng.random(n) < 1 - p, delta=DELTA)
    assert 0.9 * epsilon <= bound.epsilon <= epsilon


def test_many_run_bound_of_a_mechanism_without_noise_is_large() -> None:
    bound = many_run_bound(np.ones(10_000), np.zeros(10_000), delta=DELTA)
    assert bound.epsilon > 7.5  # log(8000 / 3.7): all the bounding runs can show
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
        many_run_bound([1.0, 2.0], [0.0, math.nan], delta=DELTA)
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
        assert one_run_p_value(m=200, r=r, v=v, epsilon=eps, delta=0.0) == pytest.approx(
            stats.binom.sf(v - 1, r, p)
        )


def test_one_run_p_value_matches_the_theorem_written_with_tails() -> None:
    """``f(v) + 2 m delta max_i (f(v - i) - f(v)) / i`` with ``f`` the binomial upper tail, computed directly."""
    m, r, v, eps, delta = 300, 40, 33, 1.2, 1e-4
    p = 1 / (1 + math.exp(-eps))
    tail = lambda x: stats.binom.sf(x - 1, r, p)  # noqa: E731 - P[Bin >= x]
    expected = tail(v) + 2 * m * delta * max((tail(v - i) - tail(v)) / i for i in range(1, v + 1))
    assert one_run_p_value(m=m, r=r, v=v, epsilon=eps, delta=delta) == pytest.approx(
        expected, rel=1e-9
    )


def test_one_run_bound_holds_and_approaches_randomized_response() -> None:
    rng = np.random.default_rng(6)
    epsilon = 1.0
    p = 1 / (1 + math.exp(-epsilon))

    def audit(m: int) -> float:
        included = rng.random(m) < 0.5
        reported = np.where(
            rng.random(m) < p, included, ~included
        )  # randomized response: exactly eps-DP
        return one_run_bound(
            reported + 0.01 * rng.random(m), included, guesses=m // 2, delta=0.0
        ).epsilon

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
