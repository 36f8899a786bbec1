"""Tests of user sampling's epsilon against a server that sees or chooses the sample (uldp.accounting.known_sample;
issue 41): the closed form against an independent mixture of analytic Gaussians, dp-accounting's PLD within 1% above
it, RDP never below it, q = 1 as plain composition, never below the amplified epsilon, and every epsilon with
sampling naming its adversary."""

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from scipy import optimize, stats

from uldp.accounting import (
    Adversary,
    epsilon_chosen_sample,
    epsilon_for_method,
    epsilon_known_sample,
    epsilon_known_sample_pld,
    epsilon_known_sample_rdp,
    epsilon_of_participation,
    epsilon_server_view,
    epsilon_uldp,
    epsilon_uldp_pld,
    sigma_for_epsilon,
)

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def mixture_oracle(*, sigma: float, q: float, rounds: int, delta: float) -> float:
    """Independent: delta(eps) = sum_k Binom(k; T, q) [Phi(mu_k/2 - eps/mu_k) - e^eps Phi(-mu_k/2 - eps/mu_k)],
    mu_k = sqrt(k) / sigma, summed term by term with scipy.stats and solved by bisection."""

    def delta_at(eps: float) -> float:
        total = 0.0
        for k in range(1, rounds + 1):
            mu = math.sqrt(k) / sigma
            term = stats.norm.cdf(mu / 2 - eps / mu) - math.exp(
                eps + stats.norm.logcdf(-mu / 2 - eps / mu)
            )
            total += stats.binom.pmf(k, rounds, q) * term
        return total - delta

    if delta_at(0.0) <= 0:
        return 0.0
    high = 1.0
    while delta_at(high) > 0:
        high *= 2
    return optimize.bisect(delta_at, 0.0, high, xtol=1e-10)


@settings(max_examples=12, deadline=None)
@given(
    sigma=st.floats(1.0, 20.0),
    q=st.floats(0.01, 0.9),
    rounds=st.integers(1, 120),
    delta=st.sampled_from([1e-3, 1e-5, 1e-7]),
)
def test_the_closed_form_is_the_mixture_of_analytic_gaussians_and_rdp_bounds_it(
    sigma, q, rounds, delta
):
    exact = epsilon_known_sample(sigma=sigma, q=q, rounds=rounds, delta=delta).epsilon
    assert exact == pytest.approx(
        mixture_oracle(sigma=sigma, q=q, rounds=rounds, delta=delta), rel=1e-6, abs=1e-8
    )
    rdp = epsilon_known_sample_rdp(sigma=sigma, q=q, rounds=rounds, delta=delta).epsilon
    assert rdp >= exact * (1 - 1e-9)
    # an adversary who knows the sample can forget it: never less than the amplified epsilon (PLD: within its 1%)
    amplified = epsilon_uldp_pld(sigma=sigma, rounds=rounds, delta=delta, q=q).epsilon
    assert exact >= 0.99 * amplified


@pytest.mark.parametrize(
    ("sigma", "q", "rounds", "delta"),
    [(5.0, 0.1, 100, 1e-5), (2.0, 0.3, 30, 1e-6), (10.0, 0.02, 400, 1e-5)],
)
def test_dp_accountings_pld_per_count_is_within_one_percent_above_the_closed_form(
    sigma, q, rounds, delta
):
    exact = epsilon_known_sample(sigma=sigma, q=q, rounds=rounds, delta=delta).epsilon
    pld = epsilon_known_sample_pld(sigma=sigma, q=q, rounds=rounds, delta=delta).epsilon
    assert exact * (1 - 1e-6) <= pld <= exact * 1.01


def test_the_readmes_example_against_the_server_is_the_issues_2_98_not_0_835():
    """Issue 41: sigma 5, T 100, q 0.1 reports 0.835 (amplified); against the server that sees the sample, 2.98;
    against one that chooses it, the q = 1 epsilon."""
    arguments: dict[str, Any] = dict(sigma=5.0, rounds=100, delta=1e-5)
    assert round(epsilon_uldp(**arguments, q=0.1).epsilon, 3) == 0.835
    known = epsilon_known_sample(**arguments, q=0.1)
    assert round(known.epsilon, 2) == 2.98
    assert known.adversary is Adversary.SERVER_SEES_SAMPLE
    chosen = epsilon_chosen_sample(**arguments)
    assert chosen.adversary is Adversary.SERVER_CHOOSES_SAMPLE
    assert chosen.epsilon == pytest.approx(mixture_oracle(**arguments, q=1.0), rel=1e-6)


@settings(max_examples=10, deadline=None)
@given(sigma=st.floats(0.5, 20.0), rounds=st.integers(1, 200))
def test_q_one_is_plain_composition_by_every_route(sigma, rounds):
    arguments: dict[str, Any] = dict(sigma=sigma, rounds=rounds, delta=1e-5)
    plain = epsilon_chosen_sample(**arguments).epsilon
    assert plain == pytest.approx(mixture_oracle(**arguments, q=1.0), rel=1e-6)
    assert epsilon_known_sample(**arguments, q=1.0).epsilon == pytest.approx(plain, rel=1e-8)
    assert epsilon_known_sample_rdp(**arguments, q=1.0).epsilon == pytest.approx(
        epsilon_uldp(**arguments).epsilon, rel=1e-9
    )


def test_one_round_is_the_gaussian_at_delta_over_q():
    """T = 1: the user is in the round with probability q, so q delta_Gauss(eps; 1/sigma) = delta."""
    for q in (0.05, 0.5):
        spent = epsilon_known_sample(sigma=2.0, q=q, rounds=1, delta=1e-5)
        assert spent.epsilon == pytest.approx(
            epsilon_of_participation(sigma=2.0, k=1, delta=1e-5 / q).epsilon, rel=1e-8
        )


def test_ex_post_a_user_in_every_round_spends_the_chosen_samples_epsilon_and_one_never_sampled_none():
    participation = np.array(
        [0, 3, 17, 20]
    )  # rounds that held each user, as a silo that knows the sample counts
    spent = [
        epsilon_of_participation(sigma=4.0, k=int(k), delta=1e-5).epsilon for k in participation
    ]
    assert spent[0] == 0.0 and spent == sorted(spent)
    assert spent[-1] == pytest.approx(
        epsilon_chosen_sample(sigma=4.0, rounds=20, delta=1e-5).epsilon
    )


def test_every_epsilon_with_sampling_names_its_adversary_and_the_servers_is_not_amplified():
    arguments: dict[str, Any] = dict(sigma=5.0, rounds=100, delta=1e-5, q=0.1)
    readers = epsilon_for_method("ULDP-AVG-w", **arguments)
    assert readers.adversary is Adversary.MODEL_READERS
    sees = epsilon_for_method(
        "ULDP-AVG-w", **arguments, adversary="server that sees the sample", accountant="pld"
    )
    assert sees.adversary is Adversary.SERVER_SEES_SAMPLE
    assert sees.epsilon == pytest.approx(epsilon_known_sample(**arguments).epsilon, rel=0.01)
    chooses = epsilon_for_method(
        "ULDP-AVG-w", **arguments, adversary=Adversary.SERVER_CHOOSES_SAMPLE
    )
    assert chooses.epsilon == epsilon_for_method("ULDP-AVG-w", **{**arguments, "q": 1.0}).epsilon
    assert readers.epsilon < sees.epsilon < chooses.epsilon
    # the server's view defaults to a server that sees the sample it draws (uniform weights: the model's own view)
    view = epsilon_server_view(**arguments, n_silos=4, weight_norm=0.5)
    assert view.adversary is Adversary.SERVER_SEES_SAMPLE
    assert view.epsilon == epsilon_known_sample_rdp(**arguments).epsilon
    hidden = epsilon_server_view(**arguments, n_silos=4, weight_norm=0.5, adversary="model readers")
    assert hidden.epsilon == readers.epsilon
    # without sampling there is no adversary to name; ULDP-NAIVE never samples users
    assert epsilon_for_method("ULDP-AVG-w", **{**arguments, "q": 1.0}).adversary is None
    assert epsilon_for_method("ULDP-NAIVE", **arguments).adversary is None
    with pytest.raises(ValueError, match="unknown adversary 'the server'; known: model readers"):
        epsilon_for_method("ULDP-AVG", **arguments, adversary="the server")


def test_sigma_calibrated_against_the_server_meets_its_target_there():
    sigma = sigma_for_epsilon(
        "ULDP-AVG",
        epsilon=3.0,
        rounds=100,
        delta=1e-5,
        q=0.1,
        adversary=Adversary.SERVER_SEES_SAMPLE,
    )
    at: dict[str, Any] = dict(q=0.1, rounds=100, delta=1e-5)
    assert (
        epsilon_known_sample(sigma=sigma, **at).epsilon
        <= epsilon_known_sample_rdp(sigma=sigma, **at).epsilon
        <= 3.0
    )
    assert epsilon_known_sample_rdp(sigma=0.99 * sigma, **at).epsilon > 3.0


def test_bad_input_is_refused_by_name():
    with pytest.raises(ValueError, match="q"):
        epsilon_known_sample(sigma=1.0, q=0.0, rounds=3, delta=1e-5)
    with pytest.raises(ValueError, match="k"):
        epsilon_of_participation(sigma=1.0, k=-1, delta=1e-5)
    assert epsilon_known_sample_pld(sigma=1.0, q=0.5, rounds=0, delta=1e-5).epsilon == 0.0


def test_uldp_epsilon_names_the_adversary_and_defaults_to_the_libraries(capsys):
    import inspect
    import json

    from uldp.cli import main

    command = ["epsilon", "--method", "ULDP-AVG-w", "--sigma", "5", "--rounds", "100", "--q", "0.1"]
    assert main([*command, "--delta", "1e-5", "--json"]) == 0
    readers = json.loads(capsys.readouterr().out)
    default = inspect.signature(epsilon_for_method).parameters["adversary"].default
    assert readers["against"] == default.value == "model readers"
    server = [*command, "--delta", "1e-5", "--adversary", "server that sees the sample", "--json"]
    assert main(server) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["against"] == "server that sees the sample"
    assert (
        document["epsilon"]
        == epsilon_known_sample_rdp(sigma=5.0, q=0.1, rounds=100, delta=1e-5).epsilon
    )
