"""The sigma search at a large delta (0.2 raised "math domain error": Lemma 2's conversion goes below 0 there), and
a delta outside (0, 1) refused by name before any search."""

from __future__ import annotations

import math

import pytest
from scipy.stats import norm

from uldp.accounting import epsilon_for_method, sigma_for_epsilon


def analytic_gaussian_delta(*, sigma: float, rounds: int, epsilon: float) -> float:
    """The exact delta at ``epsilon`` of ``rounds`` Gaussian releases with multiplier ``sigma`` (Balle and Wang 2018,
    Theorem 8): one Gaussian of ``mu = sqrt(rounds) / sigma``. An oracle independent of both accountants."""
    mu = math.sqrt(rounds) / sigma
    return float(
        norm.cdf(mu / 2 - epsilon / mu) - math.exp(epsilon) * norm.cdf(-mu / 2 - epsilon / mu)
    )


@pytest.mark.parametrize("accountant", ["rdp", "pld"])
@pytest.mark.parametrize(
    ("epsilon", "rounds"), [(0.1, 1), (1.0, 1), (4.0, 1), (0.1, 10), (4.0, 10)]
)
def test_a_large_delta_solves_to_a_valid_and_smallest_sigma(accountant, epsilon, rounds):
    delta = 0.2
    sigma = sigma_for_epsilon(
        "ULDP-AVG-w", epsilon=epsilon, rounds=rounds, delta=delta, accountant=accountant
    )
    assert math.isfinite(sigma) and sigma > 0
    spent = epsilon_for_method(
        "ULDP-AVG-w", sigma=sigma, rounds=rounds, delta=delta, accountant=accountant
    )
    assert spent.epsilon <= epsilon * (1 + 1e-6)
    # valid by the exact curve of the Gaussian: at the sigma found, delta(target) is within the promise
    assert analytic_gaussian_delta(sigma=sigma, rounds=rounds, epsilon=epsilon) <= delta * (
        1 + 1e-6
    )
    # and the smallest: a little less noise misses the target
    lower = epsilon_for_method(
        "ULDP-AVG-w", sigma=sigma * 0.98, rounds=rounds, delta=delta, accountant=accountant
    )
    assert lower.epsilon > epsilon


@pytest.mark.parametrize("delta", [0.0, 1.0, 1.5, -0.1, math.nan])
def test_a_delta_outside_the_unit_interval_is_refused_with_the_range(delta):
    with pytest.raises(ValueError, match=r"delta must be a number in \(0, 1\), got"):
        sigma_for_epsilon("ULDP-AVG-w", epsilon=1.0, rounds=1, delta=delta)
