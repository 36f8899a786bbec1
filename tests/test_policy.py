"""uldp.policy: a silo's own privacy policy and its ledger of answered rounds and released noise (issue 30)."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings, strategies as st

from uldp.accounting import epsilon_server_view, epsilon_uldp
from uldp.policy import PolicyRefusal, SiloLedger, SiloPolicy, release_multiplier


def test_the_policy_comes_from_the_silos_own_node_config_or_file() -> None:
    policy = SiloPolicy.from_node_config(
        {
            "silo": "Royal",
            "uldp-policy-epsilon": "4",
            "uldp-policy-min-sigma": 1,
            "uldp-policy-max-rounds": "50",
            "uldp-policy-accountant": "pld",
        }
    )
    assert policy == SiloPolicy(epsilon=4.0, min_sigma=1.0, max_rounds=50, accountant="pld")
    assert SiloPolicy.from_json(policy.to_json()) == policy
    with pytest.raises(ValueError, match="unknown node config key 'uldp-policy-epsilonn'"):
        SiloPolicy.from_node_config({"uldp-policy-epsilonn": 1})
    with pytest.raises(ValueError, match=r"uldp-policy-max-rounds must be an integer, got '2\.5'"):
        SiloPolicy.from_node_config({"uldp-policy-max-rounds": "2.5"})
    with pytest.raises(ValueError, match=r"unknown silo policy field\(s\) \['sigma'\]"):
        SiloPolicy.from_json({"sigma": 1.0})
    with pytest.raises(ValueError, match="accountant 'gdp' is not one of"):
        SiloPolicy(accountant="gdp")
    with pytest.raises(ValueError, match="policy max_rounds"):
        SiloPolicy(max_rounds=0)


@pytest.mark.parametrize(
    "request_, refusal",
    [
        ({"sigma": 1e-12}, "sigma=1e-12 is below this silo's min_sigma 0.5"),
        ({"sigma": True}, "sigma=True is below"),
        ({"sigma": float("nan")}, "sigma=nan is below"),
        ({"local_epochs": 10**7}, "local_epochs=10000000 is outside this silo's 1..100"),
        ({"local_epochs": 0}, "local_epochs=0 is outside"),
        ({"records": 10**12}, "total_records=1000000000000 is outside this silo's 1..100000000"),
        ({"sampled_users": 1}, r"samples 1 user\(s\) is below this silo's min_sampled_users 2"),
        (
            {"sampled_users": 100, "n_users": 100, "q": 0.1},
            r"samples 100 of 100 users is no Poisson sample at q=0\.1",
        ),
    ],
)
def test_requests_past_the_default_policy_are_refused_by_name(request_, refusal) -> None:
    with pytest.raises(PolicyRefusal, match=refusal):
        SiloPolicy().check(**request_)
    SiloPolicy().check(sigma=0.5, local_epochs=100, records=10**8, sampled_users=2)
    SiloPolicy().check(
        sampled_users=20, n_users=100, q=0.1
    )  # within 2^-40 of a Poisson sample at q = 0.1


def test_the_ledger_refuses_a_repeated_or_older_round_and_survives_a_restart(tmp_path) -> None:
    path = tmp_path / "ledger.json"
    ledger = SiloLedger(SiloPolicy(), path)
    ledger.admit("run-a", 1, multiplier=5.0, q=1.0)
    ledger.admit("run-a", 3, multiplier=5.0, q=1.0)
    restarted = SiloLedger(SiloPolicy(), path)
    for round_index in (1, 2, 3):
        with pytest.raises(PolicyRefusal, match=f"round {round_index} is not after round 3"):
            restarted.admit("run-a", round_index, multiplier=5.0, q=1.0)
    restarted.admit(
        "run-b", 1, multiplier=5.0, q=1.0
    )  # another run numbers its rounds anew, on the same budget
    assert restarted.spent().epsilon == pytest.approx(
        epsilon_uldp(sigma=5.0, rounds=3, delta=1e-5).epsilon
    )
    assert json.loads(path.read_text())["runs"] == {"run-a": 3, "run-b": 1}
    assert not list(tmp_path.glob("*.tmp*"))  # written atomically


def test_the_budget_counts_what_the_server_sees() -> None:
    """Without secure aggregation under enhanced weights a round costs the server's view (sigma / sqrt(|S|)); the
    round that would pass the policy's epsilon is refused, naming both epsilons, and nothing is recorded."""
    plain = release_multiplier(5.0, n_silos=3, secure=False, uniform_weights=False)
    assert plain == pytest.approx(5.0 / math.sqrt(3))
    assert release_multiplier(5.0, n_silos=3, secure=True, uniform_weights=False) == 5.0
    assert release_multiplier(5.0, n_silos=3, secure=False, uniform_weights=True) == 5.0
    ledger = SiloLedger(SiloPolicy(epsilon=3.0))
    spent = [ledger.admit("run", t, multiplier=plain, q=1.0) for t in (1, 2, 3)]
    assert spent[-1] == pytest.approx(
        epsilon_server_view(sigma=5.0, rounds=3, delta=1e-5, n_silos=3).epsilon
    )
    with pytest.raises(
        PolicyRefusal,
        match=r"round 4 would bring this silo's user-level epsilon from 2\.65 to "
        r"3\.12 .* past its policy's epsilon 3 ",
    ):
        ledger.admit("run", 4, multiplier=plain, q=1.0)
    assert ledger.last_round("run") == 3 and len(ledger.releases) == 3
    with pytest.raises(PolicyRefusal, match="past this silo's max_rounds 2"):
        SiloLedger(SiloPolicy(max_rounds=2)).admit("run", 3, multiplier=5.0, q=1.0)


@pytest.mark.parametrize(
    "content, detail",
    [
        ("{", "unreadable"),
        ('{"version": 2, "runs": {}, "releases": []}', "version 1"),
        ('{"version": 1, "runs": {"a": 0}, "releases": []}', "answered rounds >= 1"),
        ('{"version": 1, "runs": {}, "releases": [[0, 1]]}', "sigma > 0"),
        ('{"version": 1, "runs": {}, "releases": [[1, 2]]}', "0 < q <= 1"),
    ],
)
def test_a_ledger_file_is_checked_field_by_field(tmp_path, content, detail) -> None:
    path = tmp_path / "ledger.json"
    path.write_text(content)
    with pytest.raises(ValueError, match=detail):
        SiloLedger(SiloPolicy(), path)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(-2, 12), max_size=20))
def test_a_silo_answers_only_increasing_rounds(requests) -> None:
    """Whatever order the server asks in, the admitted rounds are strictly increasing, each at most once."""
    ledger, admitted = SiloLedger(SiloPolicy(epsilon=1e6)), []
    for round_index in requests:
        try:
            ledger.admit("run", round_index, multiplier=5.0, q=1.0)
            admitted.append(round_index)
        except PolicyRefusal:
            pass
    assert admitted == sorted(set(admitted)) and all(r >= 1 for r in admitted)
    assert len(ledger.releases) == len(admitted)


def test_uldp_group_rounds_are_counted_at_their_group_privacy_epsilon_and_refused_past_the_cap():
    """Item 2: ULDP-GROUP-k's rounds were recorded but not counted. Each is now its DP-SGD release at this silo: T of
    them spend the method's accountant's epsilon for this silo's schedule (T times its steps), the cap refuses the
    round past it, and the ledger keeps them across a reload."""
    from uldp.accounting import epsilon_group
    from uldp.policy import GroupRelease

    release = GroupRelease(sigma=1.0, sample_rate=0.05, steps=20, k=2)
    expected = [
        epsilon_group(sigma=1.0, sample_rates=[0.05], steps=[20 * t], k=2, delta=1e-5).epsilon
        for t in (1, 2, 3)
    ]
    ledger = SiloLedger(SiloPolicy(epsilon=(expected[1] + expected[2]) / 2))
    spent = [ledger.admit("group", t, multiplier=release, q=1.0) for t in (1, 2)]
    assert spent == pytest.approx(expected[:2], rel=1e-9)
    with pytest.raises(
        PolicyRefusal,
        match=r"ULDP-GROUP-2's DP-SGD, sigma 1, 20 steps .* past its policy's epsilon",
    ):
        ledger.admit("group", 3, multiplier=release, q=1.0)
    reloaded = SiloLedger(ledger.policy)
    reloaded.load(ledger.state())
    assert reloaded.group_releases == [release] * 2 and reloaded.spent().epsilon == pytest.approx(
        expected[1]
    )
