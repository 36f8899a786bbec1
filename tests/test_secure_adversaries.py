"""uldp.secure.adversaries: the protocol chapter's table of what each adversary learns and which epsilon holds
(issue 41 item 6), checked against the closed form of the Gaussian mechanism and against each other."""

from __future__ import annotations

import math

import pytest
from scipy import optimize, stats

from uldp.secure.adversaries import adversary_rows


def gaussian_epsilon(multiplier: float, rounds: int, delta: float) -> float:
    """The exact epsilon of ``rounds`` Gaussian mechanisms of noise multiplier ``multiplier`` (Balle and Wang 2018:
    one Gaussian of mu = sqrt(rounds) / multiplier)."""
    mu = math.sqrt(rounds) / multiplier

    def excess(eps: float) -> float:
        return (
            stats.norm.cdf(-eps / mu + mu / 2)
            - math.exp(eps) * stats.norm.cdf(-eps / mu - mu / 2)
            - delta
        )

    return optimize.brentq(excess, 0.0, 500.0)


def test_at_q_1_every_rows_epsilon_is_its_noise_multipliers_gaussian_epsilon_up_to_rdps_slack():
    sigma, rounds, delta, n_silos, t = 4.0, 20, 1e-5, 4, 2
    rows = adversary_rows(
        sigma=sigma, rounds=rounds, delta=delta, q=1.0, n_silos=n_silos, colluders=t
    )
    for row in rows:
        if row.adversary == "malicious server" and row.roster is False:
            multiplier = sigma / math.sqrt(
                n_silos
            )  # each silo's unmasked share, against a weight up to 1
        elif "colluding" in row.adversary and row.colluders == 0:
            colluding = int(row.adversary.split(" and ")[1].split()[0])
            multiplier = sigma * math.sqrt(
                (n_silos - colluding) / n_silos
            )  # the honest shares alone
        else:
            multiplier = sigma
        exact = gaussian_epsilon(multiplier, rounds, delta)
        assert exact <= row.epsilon <= 1.25 * exact, row


def test_the_table_orders_the_adversaries_as_the_defences_say():
    rows = adversary_rows(sigma=5.0, rounds=100, delta=1e-5, q=0.1, n_silos=4, colluders=2)
    by = {(r.adversary, r.sample, r.roster, r.colluders): r.epsilon for r in rows}
    semi_known = by[("semi-honest server", "server", None, 0)]
    hidden = by[("semi-honest server", "silos (hidden)", None, 0)]
    chooses = by[("malicious server", "server", True, 0)]
    unrostered = by[("malicious server", "server", False, 0)]
    assert (
        hidden < semi_known < chooses < unrostered
    )  # amplified < known sample < chosen < unmasked
    assert by[("malicious server", "silos (hidden)", True, 0)] == pytest.approx(hidden)
    assert by[("malicious server", "silos (hidden)", False, 0)] == pytest.approx(unrostered)
    for sample in (
        "server",
        "silos (hidden)",
    ):  # a colluding silo knows the sample: hiding it does not help
        for t in (1, 2):
            who = f"semi-honest server and {t} colluding silo{'' if t == 1 else 's'}"
            assert by[(who, sample, None, t)] == pytest.approx(
                semi_known
            )  # the threshold restores sigma
            assert by[(who, sample, None, 0)] > semi_known
    assert (
        by[("semi-honest server and 2 colluding silos", "server", None, 0)]
        > by[("semi-honest server and 1 colluding silo", "server", None, 0)]
    )


def test_bad_settings_are_refused_by_name():
    with pytest.raises(ValueError, match="colluders"):
        adversary_rows(sigma=5.0, rounds=10, delta=1e-5, q=0.1, n_silos=3, colluders=3)
    with pytest.raises(ValueError, match="n_silos"):
        adversary_rows(sigma=5.0, rounds=10, delta=1e-5, q=0.1, n_silos=1, colluders=1)
