"""uldp.policy: a silo's own privacy policy and its ledger of answered rounds and released noise (issue 30)."""

from __future__ import annotations

import json
import math
import re

import pytest
from hypothesis import given, settings, strategies as st

from uldp.accounting import epsilon_server_view, epsilon_uldp
from uldp.policy import PolicyRefusal, SiloLedger, SiloPolicy, release_multiplier
from uldp.policy.rules import MIN_UNION_BITS
from uldp.secure.psu import GROUPS, MIN_GROUP_BITS


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
    with pytest.raises(ValueError, match=r"min_union_bits must be an integer >= 2048, got 1024"):
        SiloPolicy.from_node_config({"uldp-policy-min-union-bits": "1024"})
    # the policy layer keeps its own copy of the union's smallest group (it imports no secure module)
    assert MIN_UNION_BITS == MIN_GROUP_BITS == min(g.p.bit_length() for g in GROUPS.values())


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
            {"union_bits": 1536},
            "a 1536-bit group for the private set union, below this silo's min_union_bits 2048",
        ),
    ],
)
def test_requests_past_the_default_policy_are_refused_by_name(request_, refusal) -> None:
    with pytest.raises(PolicyRefusal, match=refusal):
        SiloPolicy().check(**request_)
    SiloPolicy().check(sigma=0.5, local_epochs=100, records=10**8, sampled_users=2, union_bits=2048)
    SiloPolicy().check(sampled_users=100, n_users=100)  # the default policy's q = 1


def test_the_ledger_refuses_a_repeated_or_older_round_and_survives_a_restart(tmp_path) -> None:
    path = tmp_path / "ledger.json"
    ledger = SiloLedger(SiloPolicy(), path)
    ledger.admit("run-a", 1, multiplier=5.0)
    ledger.admit("run-a", 3, multiplier=5.0)
    restarted = SiloLedger(SiloPolicy(), path)
    for round_index in (1, 2, 3):
        with pytest.raises(PolicyRefusal, match=f"round {round_index} is not after round 3"):
            restarted.admit("run-a", round_index, multiplier=5.0)
    restarted.admit(
        "run-b", 1, multiplier=5.0
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
    spent = [ledger.admit("run", t, multiplier=plain) for t in (1, 2, 3)]
    assert spent[-1] == pytest.approx(
        epsilon_server_view(sigma=5.0, rounds=3, delta=1e-5, n_silos=3).epsilon
    )
    with pytest.raises(
        PolicyRefusal,
        match=r"round 4 would bring this silo's user-level epsilon from 2\.65 to "
        r"3\.12 .* past its policy's epsilon 3 ",
    ):
        ledger.admit("run", 4, multiplier=plain)
    assert ledger.last_round("run") == 3 and len(ledger.releases) == 3
    with pytest.raises(PolicyRefusal, match="past this silo's max_rounds 2"):
        SiloLedger(SiloPolicy(max_rounds=2)).admit("run", 3, multiplier=5.0)


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
            ledger.admit("run", round_index, multiplier=5.0)
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
    spent = [ledger.admit("group", t, multiplier=release) for t in (1, 2)]
    assert spent == pytest.approx(expected[:2], rel=1e-9)
    with pytest.raises(
        PolicyRefusal,
        match=r"ULDP-GROUP-2's DP-SGD, sigma 1, 20 steps .* past its policy's epsilon",
    ):
        ledger.admit("group", 3, multiplier=release)
    reloaded = SiloLedger(ledger.policy)
    reloaded.load(ledger.state())
    assert reloaded.group_releases == [release] * 2 and reloaded.spent().epsilon == pytest.approx(
        expected[1]
    )


def test_a_sample_size_is_checked_against_the_policys_q_whatever_rate_the_server_claims() -> None:
    """Issue 41 item 2: q comes from the silo's policy: a server-drawn sample past a Poisson sample at the policy's
    q (Hoeffding, 2^-40) is refused, and the request no longer carries a rate the silo would believe."""
    policy = SiloPolicy(q=0.1)
    with pytest.raises(
        PolicyRefusal, match=r"samples 100 of 100 users is no Poisson sample at q=0\.1, this silo's"
    ):
        policy.check(sampled_users=100, n_users=100)
    policy.check(sampled_users=20, n_users=100)  # within 2^-40 of a Poisson sample at q = 0.1
    with pytest.raises(ValueError, match="policy sampler 'coordinator' is not one of"):
        SiloPolicy(sampler="coordinator")
    with pytest.raises(ValueError, match="policy q"):
        SiloPolicy(q=0.0)
    assert SiloPolicy.from_node_config(
        {"uldp-policy-q": "0.25", "uldp-policy-sampler": "silos", "uldp-policy-colluders": "1"}
    ) == SiloPolicy(q=0.25, sampler="silos", colluders=1)


def attack_rounds(ledger: SiloLedger, *, multiplier: float, rounds: int, n_users: int) -> int:
    """A server that puts the same target (and one other user) in every round, claiming q = 1e-6 in its requests
    (the rate a silo no longer reads): the rounds the silo answers before refusing."""
    answered = 0
    for round_index in range(1, rounds + 1):
        try:
            ledger.policy.check(sampled_users=2, n_users=n_users)
            ledger.admit("attack", round_index, multiplier=multiplier)
        except PolicyRefusal:
            break
        answered += 1
    return answered


def test_a_target_in_every_round_under_a_claimed_tiny_q_is_charged_its_own_epsilon_and_stopped() -> (
    None
):
    """Issue 41 item 2, before: a Flower silo charged each round at the claimed q = 1e-6: 30 rounds answered, 0.267
    charged of a cap of 2, the target's own epsilon 39.8. Now a server-drawn sample is charged as server-chosen
    (q = 1): what the ledger charges is never below the target's epsilon ex post (its k = every answered round;
    exact, Balle and Wang), and the cap stops the rounds."""
    from uldp.accounting import Adversary, epsilon_of_participation

    multiplier = release_multiplier(5.0, n_silos=3, secure=False, uniform_weights=False)
    ledger = SiloLedger(SiloPolicy(epsilon=2.0, q=1e-6))
    answered = attack_rounds(ledger, multiplier=multiplier, rounds=30, n_users=10_000)
    target = epsilon_of_participation(sigma=multiplier, k=answered, delta=1e-5).epsilon
    charged = ledger.spent()
    assert charged.adversary is Adversary.SERVER_CHOOSES_SAMPLE
    assert target <= charged.epsilon <= 2.0
    assert answered < 30
    assert (
        epsilon_of_participation(sigma=multiplier, k=answered + 1, delta=1e-5).epsilon > 2.0 * 0.5
    )


def test_the_same_sample_and_model_for_100_rounds_is_charged_as_their_average_and_refused_at_the_cap() -> (
    None
):
    """Issue 41 item 2: averaging n answers of one sample and model cuts the noise's std by sqrt(n); the silo charges
    every round at q = 1, which is exactly one Gaussian with the averaged multiplier, and refuses past its cap."""
    ledger = SiloLedger(SiloPolicy(epsilon=2.0, q=0.01))
    answered = attack_rounds(ledger, multiplier=5.0, rounds=100, n_users=10_000)
    assert 0 < answered < 100
    averaged = epsilon_uldp(sigma=5.0 / math.sqrt(answered), rounds=1, delta=1e-5).epsilon
    assert ledger.spent().epsilon == pytest.approx(averaged, rel=1e-9)


def test_a_sample_the_silos_hide_is_charged_amplified_at_the_policys_rate() -> None:
    from uldp.accounting import Adversary

    ledger = SiloLedger(SiloPolicy(q=0.1, sampler="silos"))
    for t in range(1, 11):
        ledger.admit("hidden", t, multiplier=5.0)
    spent = ledger.spent()
    assert spent.adversary is Adversary.MODEL_READERS
    assert spent.epsilon == pytest.approx(
        epsilon_uldp(sigma=5.0, rounds=10, delta=1e-5, q=0.1).epsilon, rel=1e-12
    )
    assert SiloLedger(SiloPolicy()).spent().adversary is None  # no user sampling: nothing to name


def test_a_silo_that_answered_refuses_to_answer_without_its_ledger(tmp_path) -> None:
    """Issue 41 item 5: the marker beside the ledger outlives a lost ledger file; the silo then refuses to start
    rather than answer round 1 again on a fresh budget."""
    path = tmp_path / "ledger.json"
    assert not SiloLedger(
        SiloPolicy(), path
    ).marker.exists()  # never answered: a fresh ledger is fine
    SiloLedger(SiloPolicy(), path).admit("run", 1, multiplier=5.0)
    assert path.exists() and SiloLedger(SiloPolicy(), path).marker.exists()
    path.unlink()
    with pytest.raises(PolicyRefusal, match=r"ledger.json is missing, yet this silo has answered"):
        SiloLedger(SiloPolicy(), path)


def test_a_restarted_flower_silo_keeps_its_ledger_by_default(tmp_path) -> None:
    """Issue 41 item 5, before: without ``uldp-ledger`` a Flower silo kept its ledger in the SuperNode's memory
    (``context.state``), so after a restart round 1 was answered again. Now its ledger is a file beside its key file
    by default: a restarted node (a fresh context) refuses round 1."""
    from types import SimpleNamespace

    from uldp.flower import client as flower_client
    from uldp.policy import node_ledger_path

    config = {"silo": "Royal", "uldp-key-file": str(tmp_path / "key")}
    policy = SiloPolicy()
    flower_client._ledger(SimpleNamespace(node_config=config, state={}), policy).admit(
        "7", 1, multiplier=5.0
    )
    restarted = flower_client._ledger(SimpleNamespace(node_config=config, state={}), policy)
    assert restarted.path == node_ledger_path(silo="Royal", key_file=tmp_path / "key")
    with pytest.raises(PolicyRefusal, match="round 1 is not after round 1"):
        restarted.admit("7", 1, multiplier=5.0)
    with pytest.raises(ValueError, match=r"silo name '\.\./x' cannot name a ledger file"):
        node_ledger_path(silo="../x", key_file=tmp_path / "key")


def test_the_collusion_threshold_scales_each_share_so_the_honest_silos_alone_keep_sigma() -> None:
    from uldp.policy import collusion_scale

    for n_silos in (2, 3, 10):
        for colluders in range(n_silos):
            honest_variance = (n_silos - colluders) * (
                collusion_scale(n_silos=n_silos, colluders=colluders) / math.sqrt(n_silos)
            ) ** 2
            assert honest_variance == pytest.approx(1.0)  # (sigma C)^2 in units of sigma C
    with pytest.raises(PolicyRefusal, match=re.escape("colluders < |S|")):
        collusion_scale(n_silos=3, colluders=3)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 4), min_size=2, max_size=5))
def test_with_mixed_thresholds_the_smallest_holds_against_any_coalition_of_that_size(
    thresholds,
) -> None:
    """Silos that scale their shares for their own t_s: every coalition of min t_s silos (enumerated) leaves the
    honest shares a variance of at least (sigma C)^2; the bounds' largest is max t_s."""
    import itertools

    from uldp.policy import collusion_scale, collusion_thresholds

    n_silos = len(thresholds)
    names = {f"s{i}": t for i, t in enumerate(thresholds)}
    if max(thresholds) >= n_silos:
        with pytest.raises(
            ValueError, match=r"collusion threshold of \d+ silo\(s\); this federation has"
        ):
            collusion_thresholds(names)
        return
    low, high = collusion_thresholds(names)
    assert (low, high) == (min(thresholds), max(thresholds))
    shares = [collusion_scale(n_silos=n_silos, colluders=t) ** 2 / n_silos for t in thresholds]
    for coalition in itertools.combinations(range(n_silos), low):
        honest = sum(v for s, v in enumerate(shares) if s not in coalition)
        assert honest >= 1 - 1e-12


def test_every_epsilon_of_the_ledger_names_its_colluders_and_adversary() -> None:
    ledger = SiloLedger(SiloPolicy(colluders=2, malicious_server=True))
    ledger.admit("run", 1, multiplier=5.0)
    assert ledger.spent().colluders == 2
    assert SiloPolicy().against == "a semi-honest server with no silo colluding"
    assert "a user sample it may choose (charged at q=1)" in SiloPolicy(q=0.5).against


def test_on_flower_a_silo_with_a_roster_asks_for_a_malicious_servers_guarantee_unless_it_says_not() -> (
    None
):
    assert SiloPolicy.from_node_config({}, has_roster=True).malicious_server
    assert not SiloPolicy.from_node_config({}).malicious_server
    explicit = {"uldp-policy-malicious-server": "false"}
    assert not SiloPolicy.from_node_config(explicit, has_roster=True).malicious_server
    assert (
        SiloPolicy.from_json({}) == SiloPolicy()
    )  # a deployed silo's file and fit keep the semi-honest default
