"""Tests of the PLD accountant (uldp.accounting.pld) against independent sources: the analytic Gaussian mechanism
(Balle and Wang 2018), opacus' PRV accountant, numerical integration of a mixture's hockey-stick divergence, and
the RDP accountant it must never exceed."""

import json
import math
import warnings
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from scipy import optimize, stats

from uldp.accounting import (
    check_accountant,
    epsilon_for_method,
    epsilon_group,
    epsilon_group_pld,
    epsilon_uldp,
    epsilon_uldp_pld,
    mixture_group_curve,
    sigma_for_budget,
    sigma_for_epsilon,
)
from uldp.accounting.pld import group_sensitivities

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def analytic_gaussian_epsilon(mu: float, delta: float) -> float:
    """Exact epsilon of a Gaussian mechanism with sensitivity / std = ``mu`` (Balle and Wang 2018, Theorem 8):
    ``delta(eps) = Phi(-eps / mu + mu / 2) - e^eps Phi(-eps / mu - mu / 2)``."""

    def gap(eps: float) -> float:
        return (
            stats.norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * stats.norm.cdf(-eps / mu - mu / 2)
        ) - delta

    return optimize.brentq(gap, 0.0, 500.0, xtol=1e-12)


def prv_epsilon(*, sigma: float, q: float, steps: int, delta: float) -> float:
    from opacus.accountants import PRVAccountant

    accountant = PRVAccountant()
    accountant.history = [(sigma, q, steps)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return accountant.get_epsilon(delta=delta, eps_error=0.005)


@settings(max_examples=15, deadline=None)
@given(
    sigma=st.floats(0.5, 20.0),
    rounds=st.integers(1, 500),
    delta=st.sampled_from([1e-3, 1e-5, 1e-7]),
)
def test_gaussian_composition_matches_the_analytic_gaussian(sigma, rounds, delta):
    # T compositions of a sensitivity-1 Gaussian of multiplier sigma: one Gaussian of mu = sqrt(T) / sigma
    exact = analytic_gaussian_epsilon(math.sqrt(rounds) / sigma, delta)
    spent = epsilon_uldp_pld(sigma=sigma, rounds=rounds, delta=delta).epsilon
    assert (
        exact - 1e-9 <= spent <= exact + max(2e-3 * exact, 2e-4)
    )  # pessimistic, and within the step


def test_naive_and_avg_without_sampling_are_the_same_gaussian():
    naive = epsilon_for_method(
        "ULDP-NAIVE", sigma=3.0, rounds=50, delta=1e-5, accountant="pld"
    ).epsilon
    avg = epsilon_for_method(
        "ULDP-AVG-w", sigma=3.0, rounds=50, delta=1e-5, q=1.0, accountant="pld"
    ).epsilon
    assert (
        naive
        == avg
        == pytest.approx(analytic_gaussian_epsilon(math.sqrt(50) / 3.0, 1e-5), rel=2e-3)
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    "sigma, q, steps",
    [
        (
            6.0841848922784685,
            0.5,
            30,
        ),  # the example: ULDP-AVG-w at RDP's sigma for epsilon 2
        (5.0, 0.01, 100_000),  # Figure 2's record-level run
        (1.0, 0.1, 1000),  # ULDP-AVG-w with user sampling at small noise
    ],
)
def test_subsampled_gaussian_agrees_with_opacus_prv_within_one_percent(sigma, q, steps):
    ours = epsilon_uldp_pld(sigma=sigma, rounds=steps, delta=1e-5, q=q).epsilon
    assert ours == pytest.approx(prv_epsilon(sigma=sigma, q=q, steps=steps, delta=1e-5), rel=0.01)


def test_group_of_one_is_the_subsampled_gaussian_and_agrees_with_prv():
    group = epsilon_group_pld(sigma=5.0, sample_rates=0.01, steps=100_000, k=1, delta=1e-5).epsilon
    record = epsilon_uldp_pld(sigma=5.0, rounds=100_000, delta=1e-5, q=0.01).epsilon
    assert group == pytest.approx(record, rel=1e-3)
    assert group == pytest.approx(
        prv_epsilon(sigma=5.0, q=0.01, steps=100_000, delta=1e-5), rel=0.01
    )


def test_group_without_sampling_is_a_gaussian_of_sensitivity_k():
    spent = epsilon_group_pld(sigma=20.0, sample_rates=1.0, steps=10, k=4, delta=1e-5).epsilon
    assert spent == pytest.approx(
        analytic_gaussian_epsilon(4 * math.sqrt(10) / 20.0, 1e-5), rel=2e-3
    )


def mixture_losses(
    *, sigma: float, k: int, q: float, points: int
) -> tuple[np.ndarray, list[tuple]]:
    """One step of a k-record group on a fine grid: P = sum_j Bin(j; k, q) N(j, sigma^2) and Q = N(0, sigma^2).

    Returns the grid's cell width and, for both orders of the pair (remove: P over Q; add: Q over P), the upper
    density and the privacy loss ``log(upper / lower)`` at each grid point."""
    weights = stats.binom.pmf(np.arange(k + 1), k, q)
    x = np.linspace(-14 * sigma, k + 14 * sigma, points)
    mixture = (
        weights[:, None] * stats.norm.pdf(x[None, :], loc=np.arange(k + 1)[:, None], scale=sigma)
    ).sum(0)
    base = stats.norm.pdf(x, scale=sigma)
    return x[1] - x[0], [(mixture, np.log(mixture / base)), (base, np.log(base / mixture))]


def integrated_epsilon(*, sigma: float, k: int, q: float, steps: int, delta: float) -> float:
    """Epsilon of ``steps`` (1 or 2) steps by direct integration of the hockey-stick divergence
    ``E_upper[(1 - e^(eps - L))+]`` over the product grid (independent of dp-accounting's discretised FFT)."""
    width, orders = mixture_losses(sigma=sigma, k=k, q=q, points=4001 if steps == 1 else 1501)
    joint = []
    for density, loss in orders:
        mass = density * width
        if steps == 2:
            mass, loss = np.outer(mass, mass).ravel(), np.add.outer(loss, loss).ravel()
        joint.append((mass, loss))

    def gap(eps: float) -> float:
        return (
            max(float(np.sum(m * np.maximum(0.0, 1.0 - np.exp(eps - loss)))) for m, loss in joint)
            - delta
        )

    return optimize.brentq(gap, 1e-6, 50.0, xtol=1e-10)


@pytest.mark.slow
@pytest.mark.parametrize(
    "sigma, k, q, steps", [(1.0, 2, 0.3, 1), (2.0, 3, 0.5, 1), (0.8, 4, 0.1, 1), (1.5, 2, 0.4, 2)]
)
def test_mixture_matches_numerical_integration(sigma, k, q, steps):
    exact = integrated_epsilon(sigma=sigma, k=k, q=q, steps=steps, delta=1e-4)
    # an explicit step keeps it fast (a wide mixture costs seconds per pass); any step is a pessimistic bound
    spent = epsilon_group_pld(
        sigma=sigma,
        sample_rates=q,
        steps=steps,
        k=k,
        delta=1e-4,
        value_discretization_interval=2e-3,
    ).epsilon
    assert exact * (1 - 1e-4) <= spent <= exact * 1.003


@pytest.mark.parametrize(
    "k, finer_step, within", [(1, 3e-5, 0.003), (32, 1e-3, 0.003), (64, 1e-3, 0.01)]
)
def test_default_step_is_within_a_percent_of_a_finer_one(k, finer_step, within):
    default = epsilon_group_pld(
        sigma=5.0, sample_rates=0.01, steps=100_000, k=k, delta=1e-5
    ).epsilon
    finer = epsilon_group_pld(
        sigma=5.0,
        sample_rates=0.01,
        steps=100_000,
        k=k,
        delta=1e-5,
        value_discretization_interval=finer_step,
    ).epsilon
    coarse = epsilon_group_pld(
        sigma=5.0,
        sample_rates=0.01,
        steps=100_000,
        k=k,
        delta=1e-5,
        value_discretization_interval=5e-2,
    ).epsilon
    assert finer <= default <= finer * (1 + within) and default <= coarse


def test_mixture_is_far_below_both_group_privacy_routes_at_k_64():
    [row] = mixture_group_curve(sigma=5.0, q=0.01, steps=100_000, delta=1e-5, ks=[64])
    rdp_route = epsilon_group(sigma=5.0, sample_rates=0.01, steps=100_000, k=64, delta=1e-5).epsilon
    assert row["epsilon_mixture"] < rdp_route / 3


@settings(max_examples=12, deadline=None)
@given(
    method=st.sampled_from(["ULDP-NAIVE", "ULDP-SGD", "ULDP-AVG", "ULDP-AVG-w"]),
    sigma=st.floats(1.0, 20.0),
    rounds=st.integers(1, 200),
    q=st.sampled_from([0.1, 0.3, 0.5, 0.7, 1.0]),
)
def test_pld_never_exceeds_rdp_for_the_user_level_methods(method, sigma, rounds, q):
    rdp = epsilon_for_method(method, sigma=sigma, rounds=rounds, delta=1e-5, q=q).epsilon
    pld = epsilon_for_method(
        method, sigma=sigma, rounds=rounds, delta=1e-5, q=q, accountant="pld"
    ).epsilon
    rate = 1.0 if method == "ULDP-NAIVE" else q
    alone = epsilon_uldp_pld(
        sigma=sigma, rounds=rounds, delta=1e-5, q=rate
    ).epsilon  # without the min(PLD, RDP)
    assert pld <= rdp and alone <= rdp


def dp_accounting_epsilon(
    *, sigma: float, q: float, steps: int, delta: float, interval: float
) -> float:
    """dp-accounting's own PLD of the sub-sampled Gaussian at an explicit step (an independent construction)."""
    from dp_accounting.pld import privacy_loss_distribution as pld

    one = pld.from_gaussian_mechanism(
        sigma, sampling_prob=q, value_discretization_interval=interval
    )
    return float(one.self_compose(steps).get_epsilon_for_delta(delta))


@pytest.mark.parametrize("sigma, rounds", [(150.0, 3000), (200.0, 1000)])
def test_small_epsilons_are_accurate_and_below_rdp(sigma, rounds):
    # the settings where an absolute floor of 1e-4 on the step put PLD above RDP (0.0111 > 0.0101, 0.00485 > 0.00478)
    finer = dp_accounting_epsilon(sigma=sigma, q=0.01, steps=rounds, delta=1e-5, interval=1e-6)
    rdp = epsilon_uldp(sigma=sigma, rounds=rounds, delta=1e-5, q=0.01).epsilon
    alone = epsilon_uldp_pld(sigma=sigma, rounds=rounds, delta=1e-5, q=0.01).epsilon
    assert finer * (1 - 1e-3) <= alone <= finer * 1.01 and alone < rdp


def test_method_epsilon_is_the_smaller_of_pld_and_rdp():
    # a step of 1e-4 is too coarse here (PLD 0.0105 > RDP 0.0101): the method's "pld" guarantee falls back to RDP
    arguments: dict[str, Any] = {"sigma": 150.0, "rounds": 3000, "delta": 1e-5, "q": 0.01}
    coarse = epsilon_uldp_pld(**arguments, value_discretization_interval=1e-4).epsilon
    rdp = epsilon_for_method("ULDP-AVG-w", **arguments)
    guarded = epsilon_for_method(
        "ULDP-AVG-w", **arguments, accountant="pld", value_discretization_interval=1e-4
    )
    assert coarse > rdp.epsilon and guarded == rdp


# few values of sigma and of the rates: the RDP curves (the slow part) are cached between examples
@pytest.mark.slow
@settings(max_examples=5, deadline=None)
@given(
    sigma=st.sampled_from([1.0, 5.0]),
    k=st.integers(1, 16),
    silo_rates=st.lists(st.sampled_from([0.005, 0.05]), min_size=1, max_size=3),
    steps=st.integers(10, 3000),
)
def test_pld_never_exceeds_rdp_for_group(sigma, k, silo_rates, steps):
    arguments = {
        "sigma": sigma,
        "sample_rates": silo_rates,
        "steps_per_round": [steps] * len(silo_rates),
        "rounds": 1,
        "delta": 1e-5,
        "k": k,
    }
    rdp = epsilon_for_method("ULDP-GROUP-8", **arguments).epsilon
    pld = epsilon_for_method("ULDP-GROUP-8", accountant="pld", **arguments).epsilon
    alone = epsilon_group_pld(
        sigma=sigma, sample_rates=silo_rates, steps=steps, k=k, delta=1e-5
    ).epsilon
    assert pld <= rdp and alone <= rdp


def test_group_takes_the_worst_silo():
    both = epsilon_group_pld(
        sigma=3.0, sample_rates=[0.01, 0.05], steps=[50, 10], k=4, delta=1e-5
    ).epsilon
    alone = [
        epsilon_group_pld(sigma=3.0, sample_rates=rate, steps=count, k=4, delta=1e-5).epsilon
        for rate, count in ((0.01, 50), (0.05, 10))
    ]
    assert both == max(alone)


def test_large_groups_truncate_the_binomial_and_pay_in_delta():
    values, probs, dropped = group_sensitivities(k=2000, q=0.001)
    assert values.size < 2001 and 0 <= dropped < 1e-25 and probs.sum() == pytest.approx(1.0)
    assert math.isfinite(
        epsilon_group_pld(sigma=5.0, sample_rates=0.001, steps=10, k=2000, delta=1e-5).epsilon
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    "method, kwargs",
    [
        ("ULDP-AVG-w", {"rounds": 30, "q": 0.5}),
        ("ULDP-NAIVE", {"rounds": 100}),
        ("ULDP-GROUP-8", {"rounds": 5, "sample_rates": [0.02, 0.05], "steps_per_round": [100, 40]}),
    ],
)
def test_sigma_for_epsilon_inverts_pld_and_is_below_rdp(method, kwargs):
    pld_sigma = sigma_for_epsilon(method, epsilon=2.0, delta=1e-5, accountant="pld", **kwargs)
    spent = epsilon_for_method(
        method, sigma=pld_sigma, delta=1e-5, accountant="pld", **kwargs
    ).epsilon
    assert 2.0 * 0.999 <= spent <= 2.0
    assert pld_sigma < sigma_for_epsilon(method, epsilon=2.0, delta=1e-5, **kwargs)


def test_sigma_for_budget_brackets_from_any_start():
    assert sigma_for_budget(lambda s: 10.0 / s, epsilon=2.0, start=1e3) == pytest.approx(
        5.0, rel=1e-5
    )
    assert sigma_for_budget(lambda s: 10.0 / s, epsilon=2.0, start=1e-3) == pytest.approx(
        5.0, rel=1e-5
    )
    with pytest.raises(ValueError, match="not reachable"):
        sigma_for_budget(lambda s: 10.0 / s, epsilon=1e-9)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: check_accountant("prv"), "unknown accountant 'prv'; known accountants: rdp, pld"),
        (
            lambda: epsilon_for_method(
                "ULDP-AVG", sigma=1.0, rounds=1, delta=1e-5, accountant="RDP"
            ),
            "'RDP'",
        ),
        (lambda: epsilon_uldp_pld(sigma=0.0, rounds=1, delta=1e-5), "sigma"),
        (
            lambda: epsilon_group_pld(
                sigma=1.0, sample_rates=[0.1, 0.2], steps=[1, 2, 3], k=2, delta=1e-5
            ),
            "equal",
        ),
        (
            lambda: epsilon_group_pld(sigma=1.0, sample_rates=0.1, steps=1, k=0, delta=1e-5),
            "group size k",
        ),
        (
            lambda: epsilon_uldp_pld(
                sigma=1.0, rounds=1, delta=1e-5, value_discretization_interval=0.0
            ),
            "value_discretization_interval",
        ),
    ],
)
def test_bad_input_names_the_value(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_zero_rounds_spend_nothing():
    assert epsilon_uldp_pld(sigma=1.0, rounds=0, delta=1e-5).epsilon == 0.0
    assert (
        epsilon_for_method(
            "ULDP-GROUP-2",
            sigma=1.0,
            rounds=0,
            delta=1e-5,
            sample_rates=0.1,
            steps_per_round=3,
            accountant="pld",
        ).epsilon
        == 0.0
    )
    assert epsilon_uldp(sigma=1.0, rounds=0, delta=1e-5).epsilon == 0.0


def test_cli_epsilon_target_json_repeats_inputs_and_inverts(capsys):
    from uldp.cli import main

    assert (
        main(
            [
                "epsilon",
                "--method",
                "ULDP-AVG-w",
                "--epsilon",
                "2",
                "--rounds",
                "30",
                "--q",
                "0.5",
                "--delta",
                "1e-5",
                "--accountant",
                "pld",
                "--json",
            ]
        )
        == 0
    )
    payload = json.loads(capsys.readouterr().out)  # exactly one JSON document
    assert {
        key: payload["inputs"][key]
        for key in ("method", "rounds", "delta", "q", "accountant", "epsilon")
    } == {
        "method": "ULDP-AVG-w",
        "rounds": 30,
        "delta": 1e-5,
        "q": 0.5,
        "accountant": "pld",
        "epsilon": 2.0,
    }
    assert payload["order"] is None and 1.998 <= payload["epsilon"] <= 2.0
    assert (
        payload["epsilon"]
        == epsilon_uldp_pld(sigma=payload["sigma"], rounds=30, delta=1e-5, q=0.5).epsilon
    )


def test_cli_epsilon_needs_sigma_or_target(capsys):
    from uldp.cli import main

    with pytest.raises(SystemExit):
        main(["epsilon", "--method", "ULDP-AVG-w", "--rounds", "30", "--delta", "1e-5"])
    with pytest.raises(SystemExit):
        main(
            [
                "epsilon",
                "--method",
                "ULDP-AVG-w",
                "--rounds",
                "30",
                "--delta",
                "1e-5",
                "--sigma",
                "1",
                "--epsilon",
                "2",
            ]
        )
