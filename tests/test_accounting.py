"""Tests of uldp.accounting against dp-accounting, closed forms, slow oracles and the paper's Figure 2."""

import json
import math
import warnings
from statistics import NormalDist

import dp_accounting
import mpmath
import numpy as np
import pytest
from dp_accounting import rdp as dpa_rdp
from hypothesis import given, settings, strategies as st
from scipy import optimize

from uldp.accounting import (
    ACCOUNTANTS,
    DEFAULT_ORDERS,
    Accountant,
    PrivacySpent,
    check_accountant,
    epsilon_for_method,
    epsilon_group,
    epsilon_naive,
    epsilon_uldp,
    group_dp_epsilon,
    group_epsilon_bounds,
    group_rdp_epsilon,
    paper_group_rdp_epsilon,
    rdp_subsampled_gaussian,
    rdp_to_dp,
    sigma_for_epsilon,
)
from uldp.cli import main

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


#: A coarse grid for property tests: any fixed grid must show the same monotonicity, and it is fast.
COARSE = np.array([1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0, 24.0, 32.0, 48.0, 64.0, 96.0, 128.0])


def figure2_curve(alphas):
    return rdp_subsampled_gaussian(sigma=5.0, q=0.01, steps=100_000, orders=alphas)


@pytest.mark.parametrize(
    "q,sigma,steps", [(0.01, 5.0, 1000), (0.3, 1.1, 50), (1.0, 2.0, 10), (0.05, 0.8, 7)]
)
def test_rdp_matches_dp_accounting_at_integer_orders(q, sigma, steps):
    orders = [2.0, 3.0, 8.0, 20.0, 64.0, 256.0]
    accountant = dpa_rdp.RdpAccountant(orders=orders)
    event = dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma))
    accountant.compose(event, count=steps)
    ours = rdp_subsampled_gaussian(sigma=sigma, q=q, steps=steps, orders=orders)
    np.testing.assert_allclose(ours, accountant._rdp, rtol=1e-6)
    # dp-accounting converts with the paper's Lemma 2 too (plus a KL shortcut that only applies to tiny rdp).
    ours_eps = rdp_to_dp(orders=orders, rdp=ours, delta=1e-5).epsilon
    theirs_eps, _ = dpa_rdp.rdp_privacy_accountant.compute_epsilon(orders, accountant._rdp, 1e-5)
    assert ours_eps == pytest.approx(theirs_eps, rel=1e-6)


@pytest.mark.parametrize("q,sigma", [(1 / 50, 5.0), (0.3, 1.1), (1 / 8, 0.7)])
def test_vectorised_integer_orders_equal_opacus_over_the_default_grid(q, sigma):
    """Same values as opacus' one-term-at-a-time sum, and the same unusable (nan) orders where binom overflows."""
    from opacus.accountants.analysis import rdp as opacus_rdp

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        reference = np.asarray(
            opacus_rdp.compute_rdp(
                q=q, noise_multiplier=sigma, steps=1, orders=list(DEFAULT_ORDERS)
            )
        )
    ours = rdp_subsampled_gaussian(sigma=sigma, q=q, steps=1)
    assert np.array_equal(np.isnan(ours), np.isnan(reference)) and np.isnan(ours).sum() > 0
    np.testing.assert_allclose(ours[~np.isnan(ours)], reference[~np.isnan(reference)], rtol=1e-10)


@pytest.mark.parametrize("alpha", [1.5, 2.5, 3.5, 7.3])
def test_fractional_orders_match_numerical_integration(alpha):
    """At fractional orders dp-accounting is only an upper bound; the exact value is an integral (mpmath)."""
    q, sigma = 0.01, 5.0
    mpmath.mp.dps = 30

    def integrand(z):
        return (
            mpmath.npdf(z, 0, sigma)
            * ((1 - q) + q * mpmath.e ** ((2 * z - 1) / (2 * sigma**2))) ** alpha
        )

    exact = float(
        mpmath.log(mpmath.quad(integrand, [-mpmath.inf, -50, 0, 50, 200, mpmath.inf])) / (alpha - 1)
    )
    ours = rdp_subsampled_gaussian(sigma=sigma, q=q, steps=1, orders=[alpha])[0]
    assert ours == pytest.approx(exact, rel=1e-6)
    accountant = dpa_rdp.RdpAccountant(orders=[alpha])
    accountant.compose(dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma)))
    assert accountant._rdp[0] >= ours * (1 - 1e-9)


def test_gaussian_closed_form_at_q_one():
    sigma, rounds, delta = 3.0, 40, 1e-6
    rdp = rdp_subsampled_gaussian(sigma=sigma, q=1.0, steps=rounds, orders=DEFAULT_ORDERS)
    np.testing.assert_allclose(rdp, rounds * DEFAULT_ORDERS / (2 * sigma**2), rtol=1e-12)

    def continuous(alpha):
        return (
            rounds * alpha / (2 * sigma**2)
            + math.log((alpha - 1) / alpha)
            - (math.log(delta) + math.log(alpha)) / (alpha - 1)
        )

    best = optimize.minimize_scalar(continuous, bounds=(1.01, 1000), method="bounded")
    ours = epsilon_uldp(sigma=sigma, rounds=rounds, delta=delta).epsilon
    assert best.fun <= ours <= best.fun * 1.01  # a grid can only be looser, and ours is within 1%


@pytest.mark.parametrize(
    "sigma, rounds, delta", [(5.0, 100, 1e-5), (1.3, 30, 1e-6), (0.8, 50, 1e-5), (10.0, 200, 1e-7)]
)
def test_naive_matches_opacus_rdp_accountant_of_the_gaussian(sigma, rounds, delta):
    """Theorem 1 (ULDP-NAIVE: the Gaussian mechanism composed T times), against an independent implementation:
    opacus' RDP accountant at sampling rate 1 (replaces a test of ``epsilon_naive == epsilon_uldp(q=1)``, which
    is how the code defines it and so could not fail)."""
    from opacus.accountants import RDPAccountant

    accountant = RDPAccountant()
    accountant.history = [(sigma, 1.0, rounds)]
    assert epsilon_naive(sigma=sigma, rounds=rounds, delta=delta).epsilon == pytest.approx(
        accountant.get_epsilon(delta=delta), rel=1e-9
    )


def test_naive_orders_beyond_opacus_grid_only_tighten():
    """Where the best order lies past opacus' largest (one round at sigma 20), the wider grid can only be tighter."""
    from opacus.accountants import RDPAccountant

    accountant = RDPAccountant()
    accountant.history = [(20.0, 1.0, 1)]
    assert epsilon_naive(sigma=20.0, rounds=1, delta=1e-5).epsilon < accountant.get_epsilon(
        delta=1e-5
    )


def test_figure2_record_level_and_paper_values():
    record = rdp_to_dp(orders=DEFAULT_ORDERS, rdp=figure2_curve(DEFAULT_ORDERS), delta=1e-5)
    assert round(record.epsilon, 2) == 2.85  # the paper's k = 1 value
    # The paper quotes "2100 for k = 32 and 11400 at k = 64"; the authors' grid reproduces both ...
    paper32 = paper_group_rdp_epsilon(figure2_curve, k=32, delta=1e-5)
    paper64 = paper_group_rdp_epsilon(figure2_curve, k=64, delta=1e-5)
    assert paper32.epsilon == pytest.approx(2100, rel=0.05)
    assert paper64.epsilon == pytest.approx(11400, rel=0.01)
    # ... from base orders below 2k, outside the lemma's domain.
    assert paper32.order < 64 and paper64.order < 128
    valid32 = group_rdp_epsilon(figure2_curve, k=32, delta=1e-5)
    valid64 = group_rdp_epsilon(figure2_curve, k=64, delta=1e-5)
    assert valid32.order >= 2 and valid64.order >= 2
    assert valid32.epsilon > paper32.epsilon and valid64.epsilon > paper64.epsilon


@pytest.mark.parametrize("k", [2, 4, 8])
def test_paper_grid_is_valid_for_small_k(k):
    paper = paper_group_rdp_epsilon(figure2_curve, k=k, delta=1e-5)
    assert paper.order >= 2 * k
    valid = group_rdp_epsilon(figure2_curve, k=k, delta=1e-5)
    assert valid.epsilon == pytest.approx(paper.epsilon, rel=0.01)


@pytest.mark.parametrize("k", [2, 4, 8, 16])
def test_group_rdp_bounds_exact_gaussian_group(k):
    # A Gaussian mechanism with sensitivity 1 has, for groups of k, the exact RDP alpha k^2 / (2 sigma^2).
    sigma, delta = 4.0, 1e-5

    def curve(alphas):
        return rdp_subsampled_gaussian(sigma=sigma, q=1.0, steps=10, orders=alphas)

    exact = rdp_to_dp(
        orders=DEFAULT_ORDERS, rdp=10 * DEFAULT_ORDERS * k**2 / (2 * sigma**2), delta=delta
    )
    assert group_rdp_epsilon(curve, k=k, delta=delta).epsilon >= exact.epsilon
    assert group_dp_epsilon(curve, k=k, delta=delta).epsilon >= exact.epsilon * 0.999


def slow_group_dp_oracle(curve, k, delta, orders):
    """Per order, bisect log(input delta) until the group delta of Lemma 3 equals the target."""
    best = math.inf
    for alpha in orders:
        if alpha <= k:
            continue
        rho = float(curve(np.array([alpha]))[0])
        if not math.isfinite(rho):
            continue

        def record_eps(
            log_d, rho=rho, alpha=alpha
        ):  # this iteration's order and RDP, bound at definition
            return rho + math.log((alpha - 1) / alpha) - (log_d + math.log(alpha)) / (alpha - 1)

        def gap(log_d):
            return math.log(k) + (k - 1) * record_eps(log_d) + log_d - math.log(delta)

        low, high = -1e7, -1e-12
        if gap(high) < 0 or gap(low) > 0:
            continue
        root = optimize.brentq(gap, low, high, xtol=1e-12, rtol=1e-14)
        best = min(best, k * record_eps(root))
    return best


@pytest.mark.parametrize("k", [2, 5, 16, 64])
def test_group_dp_closed_form_matches_bisection(k):
    orders = DEFAULT_ORDERS[k < DEFAULT_ORDERS][:40]
    ours = group_dp_epsilon(figure2_curve, k=k, delta=1e-5, orders=orders).epsilon
    assert ours == pytest.approx(slow_group_dp_oracle(figure2_curve, k, 1e-5, orders), rel=1e-7)


def test_group_dp_has_no_cap_at_64():
    eps64 = group_dp_epsilon(figure2_curve, k=64, delta=1e-5).epsilon
    eps100 = group_dp_epsilon(figure2_curve, k=100, delta=1e-5).epsilon
    assert math.isfinite(eps100) and eps100 > eps64


def test_non_power_of_two_reports_both_bounds():
    bounds = group_epsilon_bounds(figure2_curve, k=6, delta=1e-5)
    assert (bounds.k_lower, bounds.k_upper) == (4, 8)
    assert bounds.epsilon == group_rdp_epsilon(figure2_curve, k=8, delta=1e-5).epsilon
    assert bounds.epsilon_lower == group_rdp_epsilon(figure2_curve, k=4, delta=1e-5).epsilon
    with pytest.raises(ValueError, match="power of two"):
        group_rdp_epsilon(figure2_curve, k=6, delta=1e-5)


def test_group_uses_worst_silo():
    single = epsilon_group(sigma=1.0, sample_rates=0.2, steps=100, k=4, delta=1e-5)
    mixed = epsilon_group(
        sigma=1.0, sample_rates=[0.05, 0.2, 0.1], steps=[100, 100, 100], k=4, delta=1e-5
    )
    assert mixed.epsilon == pytest.approx(single.epsilon, rel=1e-12)


@given(
    rounds=st.integers(1, 300),
    extra=st.integers(1, 300),
    sigma=st.floats(0.5, 20),
    q=st.floats(0.01, 1.0),
)
def test_uldp_epsilon_grows_with_rounds(rounds, extra, sigma, q):
    fewer = epsilon_uldp(sigma=sigma, rounds=rounds, delta=1e-5, q=q, orders=COARSE).epsilon
    assert (
        epsilon_uldp(sigma=sigma, rounds=rounds + extra, delta=1e-5, q=q, orders=COARSE).epsilon
        >= fewer
    )


@given(sigma=st.floats(0.5, 20), factor=st.floats(1.01, 4), q=st.floats(0.01, 1.0))
def test_uldp_epsilon_decreases_with_sigma(sigma, factor, q):
    assert (
        epsilon_uldp(sigma=sigma * factor, rounds=50, delta=1e-5, q=q, orders=COARSE).epsilon
        <= epsilon_uldp(sigma=sigma, rounds=50, delta=1e-5, q=q, orders=COARSE).epsilon
    )


@given(q=st.floats(0.01, 0.99), factor=st.floats(1.01, 10))
def test_uldp_epsilon_grows_with_q(q, factor):
    larger = min(1.0, q * factor)
    assert (
        epsilon_uldp(sigma=3.0, rounds=50, delta=1e-5, q=larger, orders=COARSE).epsilon
        >= epsilon_uldp(sigma=3.0, rounds=50, delta=1e-5, q=q, orders=COARSE).epsilon
    )


@settings(max_examples=10)
@given(c=st.integers(0, 4), sigma=st.floats(2.0, 10.0))
def test_group_epsilon_grows_with_k(c, sigma):
    def curve(alphas):
        return rdp_subsampled_gaussian(sigma=sigma, q=0.05, steps=200, orders=alphas)

    k = 2**c
    assert (
        group_rdp_epsilon(curve, k=2 * k, delta=1e-5, group_orders=COARSE).epsilon
        >= group_rdp_epsilon(curve, k=k, delta=1e-5, group_orders=COARSE).epsilon
    )
    assert (
        group_dp_epsilon(curve, k=k + 1, delta=1e-5, orders=COARSE).epsilon
        >= group_dp_epsilon(curve, k=k, delta=1e-5, orders=COARSE).epsilon
    )


@pytest.mark.parametrize(
    "method,kwargs",
    [
        ("ULDP-AVG", {"q": 0.3}),
        ("ULDP-NAIVE", {}),
        ("ULDP-GROUP-4", {"sample_rates": 0.05, "steps_per_round": 20}),
    ],
)
def test_sigma_for_epsilon_inverts(method, kwargs):
    sigma = sigma_for_epsilon(method, epsilon=3.0, rounds=30, delta=1e-5, **kwargs)
    reached = epsilon_for_method(method, sigma=sigma, rounds=30, delta=1e-5, **kwargs).epsilon
    assert 3.0 * 0.999 <= reached <= 3.0
    assert (
        epsilon_for_method(method, sigma=sigma * 0.98, rounds=30, delta=1e-5, **kwargs).epsilon
        > 3.0
    )


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda: epsilon_uldp(sigma=0.0, rounds=1, delta=1e-5), "sigma"),
        (lambda: epsilon_uldp(sigma=-2.0, rounds=1, delta=1e-5), "sigma"),
        (lambda: epsilon_uldp(sigma=1.0, rounds=1, delta=1e-5, q=0.0), "q"),
        (lambda: epsilon_uldp(sigma=1.0, rounds=1, delta=1e-5, q=1.5), "q"),
        (lambda: epsilon_uldp(sigma=1.0, rounds=1, delta=1.0), "delta"),
        (lambda: epsilon_uldp(sigma=1.0, rounds=1, delta=0.0), "delta"),
        (lambda: epsilon_uldp(sigma=1.0, rounds=-1, delta=1e-5), "rounds"),
        (lambda: rdp_subsampled_gaussian(sigma=1.0, q=0.1, steps=-3), "steps"),
        (lambda: group_dp_epsilon(figure2_curve, k=0, delta=1e-5), "k"),
        (lambda: epsilon_group(sigma=1.0, sample_rates=0.1, steps=10, k=0, delta=1e-5), "k"),
        (lambda: epsilon_for_method("ULDP-FOO", sigma=1.0, rounds=1, delta=1e-5), "ULDP-FOO"),
    ],
)
def test_bad_input_names_the_value(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_default_has_no_guarantee():
    assert math.isinf(epsilon_for_method("DEFAULT", sigma=1.0, rounds=5, delta=1e-5).epsilon)


def test_edge_of_grid_warns():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rdp_to_dp(orders=[2.0, 3.0], rdp=[0.001, 0.0015], delta=1e-5)
    assert any("largest of the grid" in str(w.message) for w in caught)


def test_cli_epsilon_json(capsys):
    assert (
        main(
            [
                "epsilon",
                "--method",
                "ULDP-AVG-w",
                "--sigma",
                "5",
                "--rounds",
                "100",
                "--q",
                "0.1",
                "--delta",
                "1e-5",
                "--json",
            ]
        )
        == 0
    )
    payload = json.loads(capsys.readouterr().out)  # exactly one JSON document, repeating the inputs
    assert payload["epsilon"] == pytest.approx(
        epsilon_uldp(sigma=5, rounds=100, q=0.1, delta=1e-5).epsilon
    )
    assert (
        set(payload) == {"command", "inputs", "sigma", "epsilon", "order", "against"}
        and payload["inputs"]["q"] == 0.1
    )
    assert payload["against"] == "model readers"  # the amplified epsilon, whom it holds against
    assert payload["inputs"]["accountant"] == "rdp" and payload["sigma"] == 5.0


def test_cli_group_epsilon_json(capsys):
    assert (
        main(
            [
                "group-epsilon",
                "--sigma",
                "5",
                "--q",
                "0.01",
                "--steps",
                "1000",
                "--delta",
                "1e-5",
                "--k",
                "1",
                "2",
                "3",
                "--json",
            ]
        )
        == 0
    )
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert [row["k"] for row in rows] == [1, 2, 3]
    assert rows[0]["epsilon_rdp"] == pytest.approx(rows[0]["epsilon_dp"])
    assert rows[2]["epsilon_rdp"] >= rows[1]["epsilon_rdp"]  # k=3 is certified through k=4


class ExactGaussian(Accountant):
    """An accountant written for the test from an independent source: the exact (epsilon, delta) of ``T`` Gaussian
    rounds, one Gaussian with ``mu = sqrt(T) / sigma`` (Balle and Wang 2018, Theorem 8); ``q = 1`` only."""

    name = "exact-gaussian"

    def gaussian(self, *, sigma, rounds, delta, q, value_discretization_interval):
        assert q == 1.0 and value_discretization_interval is None
        mu, phi = math.sqrt(rounds) / sigma, NormalDist().cdf

        def gap(epsilon: float) -> float:
            return (
                phi(mu / 2 - epsilon / mu) - math.exp(epsilon) * phi(-mu / 2 - epsilon / mu) - delta
            )

        return PrivacySpent(
            epsilon=optimize.brentq(gap, 0.0, 100.0, xtol=1e-12), order=math.nan, delta=delta
        )

    def group(self, **arguments):
        raise NotImplementedError

    def known_sample(self, **arguments):
        raise NotImplementedError


def test_a_registered_accountant_is_what_the_guarantees_the_sigma_search_and_every_command_use(
    monkeypatch, capsys
):
    monkeypatch.setitem(ACCOUNTANTS, ExactGaussian.name, ExactGaussian())
    exact = epsilon_for_method(
        "ULDP-NAIVE", sigma=5.0, rounds=100, delta=1e-5, accountant="exact-gaussian"
    ).epsilon
    pld = epsilon_for_method(
        "ULDP-NAIVE", sigma=5.0, rounds=100, delta=1e-5, accountant="pld"
    ).epsilon
    assert (
        exact <= pld <= exact * 1.01
    )  # the PLD's pessimistic discretisation is within 1% of the exact value
    sigma = sigma_for_epsilon(
        "ULDP-AVG", epsilon=2.0, rounds=50, delta=1e-5, accountant="exact-gaussian"
    )
    spent = epsilon_for_method(
        "ULDP-AVG", sigma=sigma, rounds=50, delta=1e-5, accountant="exact-gaussian"
    ).epsilon
    assert 2.0 * 0.9999 <= spent <= 2.0
    assert (
        main(
            [
                "epsilon",
                "--method",
                "ULDP-NAIVE",
                "--sigma",
                "5",
                "--rounds",
                "100",
                "--delta",
                "1e-5",
                "--accountant",
                "exact-gaussian",
                "--json",
            ]
        )
        == 0
    )
    assert json.loads(capsys.readouterr().out)["epsilon"] == exact
    for command in ("run", "grid"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        assert "exact-gaussian" in capsys.readouterr().out
    with pytest.raises(ValueError, match="known accountants: rdp, pld, exact-gaussian"):
        check_accountant("prv")


def test_cli_bad_method_exits_2(capsys):
    assert (
        main(["epsilon", "--method", "NOPE", "--sigma", "1", "--rounds", "1", "--delta", "1e-5"])
        == 2
    )
    assert "NOPE" in capsys.readouterr().err


def authors_bisection(curve, k, delta):
    """The authors' ``get_normal_group_privacy_spent``, re-written: k capped at 62; bisect the log input delta
    (from -1e20 to log delta) until the group delta is within delta / 1000 of the target, the record-level
    epsilon at each step being the best over their orders up to 63."""
    from uldp.accounting.group import AUTHORS_DP_ORDERS

    k = min(k, 62)
    orders = np.array(AUTHORS_DP_ORDERS)
    rho = curve(orders)
    upper, lower, group_delta = math.log(delta), -1e20, -1e20
    while abs(delta - group_delta) > delta / 1e3:
        middle = (upper + lower) / 2
        eps = float(
            np.nanmin(
                rho - (middle + np.log(orders)) / (orders - 1) + np.log((orders - 1) / orders)
            )
        )
        group_eps, group_delta = k * eps, k * math.exp((k - 1) * eps + middle)
        upper = middle if group_delta > delta else upper
        lower = middle if group_delta < delta else lower
    return group_eps


@pytest.mark.parametrize("k", [8, 32, 62, 64])
def test_paper_dp_route_is_the_exact_solve_on_orders_up_to_63(k):
    """The paper's (epsilon, delta) blow-up comes from its orders, not its bisection: the exact per-order solve on
    the authors' orders gives the bisection's value (to its delta / 1000 tolerance), and at k = 62 and 64 a value
    many times the same route's on the wide default grid."""
    from uldp.accounting import paper_group_dp_epsilon

    paper = paper_group_dp_epsilon(figure2_curve, k=k, delta=1e-5).epsilon
    assert paper == pytest.approx(authors_bisection(figure2_curve, k, 1e-5), rel=1e-3)
    wide = group_dp_epsilon(figure2_curve, k=min(k, 62), delta=1e-5).epsilon
    assert paper > 10 * wide if k >= 62 else paper == pytest.approx(wide, rel=1e-9)


# --- the server's view without secure aggregation; a silo's own releases (issue 30, attack 4) ----------------------
def _exact_gaussian_epsilon(mu: float, delta: float) -> float:
    """The exact epsilon of a Gaussian mechanism with mu = sensitivity / std (Balle and Wang 2018, Theorem 8), by
    bisection in 60-digit arithmetic (at epsilon ~ 30 the two terms cancel beyond float64)."""
    with mpmath.workdps(60):

        def excess(epsilon: float) -> mpmath.mpf:
            e = mpmath.mpf(epsilon)
            return (
                mpmath.ncdf(mu / 2 - e / mu) - mpmath.exp(e) * mpmath.ncdf(-mu / 2 - e / mu)
            ) - delta

        return float(optimize.brentq(lambda e: float(excess(e) / delta), 0.0, 200.0, xtol=1e-12))


@settings(max_examples=15, deadline=None)
@given(
    sigma=st.floats(1.0, 20.0),
    rounds=st.integers(1, 50),
    n_silos=st.integers(2, 8),
    one_silo=st.booleans(),
)
def test_the_server_view_is_the_gaussian_of_the_silos_vector(
    sigma, rounds, n_silos, one_silo
) -> None:
    """Closed form: the server sees |S| releases with noise sigma C / sqrt(|S|); a user with weight 1 in one silo
    moves them by C, so T rounds are one Gaussian with mu = sqrt(T |S|) / sigma (exact epsilon by Balle and Wang);
    with uniform weights 1/|S| (norm 1/sqrt(|S|)) mu = sqrt(T) / sigma, the released model's own. The PLD accountant
    meets the exact epsilon within 1%, and RDP bounds it from above (to the root finder's precision)."""
    from uldp.accounting import epsilon_server_view

    norm = 1.0 if one_silo else 1 / math.sqrt(n_silos)
    mu = math.sqrt(rounds) * (math.sqrt(n_silos) if one_silo else 1.0) / sigma
    exact = _exact_gaussian_epsilon(mu, 1e-5)
    arguments = dict(sigma=sigma, rounds=rounds, delta=1e-5, n_silos=n_silos, weight_norm=norm)
    pld = epsilon_server_view(**arguments, accountant="pld").epsilon
    assert pld == pytest.approx(exact, rel=0.01)
    assert epsilon_server_view(**arguments).epsilon >= 0.999 * exact


def test_the_server_view_of_issue_30_spends_more_than_the_released_model() -> None:
    """The issue's measurement: sigma 5, T = 10, delta 1e-5 reports 2.81; the server's view spends 5.25 (|S| = 3) and
    7.08 (|S| = 5) under ULDP-AVG-w; a weight norm outside [1/sqrt(|S|), 1] is refused by name."""
    from uldp.accounting import epsilon_server_view, epsilon_uldp

    assert round(epsilon_uldp(sigma=5.0, rounds=10, delta=1e-5).epsilon, 2) == 2.81
    views = [
        epsilon_server_view(sigma=5.0, rounds=10, delta=1e-5, n_silos=s).epsilon for s in (3, 5)
    ]
    assert [round(v, 2) for v in views] == [5.25, 7.08]
    with pytest.raises(ValueError, match="weight_norm"):
        epsilon_server_view(sigma=5.0, rounds=10, delta=1e-5, n_silos=4, weight_norm=0.4)


def test_releases_of_several_multipliers_compose() -> None:
    """RDP: the sum of the rounds' curves (checked against dp-accounting's RDP accountant composing the same events);
    PLD: within 1% of dp-accounting's PLD accountant on the same events."""
    from uldp.accounting import epsilon_of_releases

    releases = [(4.0, 0.5)] * 5 + [(2.0, 1.0)] * 2 + [(8.0, 0.25)]
    events = [
        dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma))
        for sigma, q in releases
    ]
    rdp_accountant = dpa_rdp.RdpAccountant()
    for event in events:
        rdp_accountant.compose(event)
    ours = epsilon_of_releases(releases=releases, delta=1e-5).epsilon
    assert ours == pytest.approx(rdp_accountant.get_epsilon(1e-5), rel=0.05)
    pld_accountant = dp_accounting.pld.PLDAccountant()
    for event in events:
        pld_accountant.compose(event)
    assert epsilon_of_releases(
        releases=releases, delta=1e-5, accountant="pld"
    ).epsilon == pytest.approx(pld_accountant.get_epsilon(1e-5), rel=0.01)
    assert epsilon_of_releases(releases=[], delta=1e-5).epsilon == 0.0
