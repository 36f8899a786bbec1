"""uldp.flower.client: the silo's ClientApp against a hostile server (issue 30). Each silo answers only what its
own node config and policy allow (DEFAULT without noise, insecure test keys, sigma below its floor, a huge
local_epochs or total_records, a one-user sample, a server's view past its epsilon), ignores a seed the server
sends, refuses a replayed round (after a restart too, by its ledger file), a replayed Protocol 1 stage, a repeated
union step and group flags relayed out of order, shares no counts the method does not need, and a silo that fails
stops the run with its hospital's name."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import pytest
from flower_hospitals import (  # noqa: F401  (hospital_files: a fixture)
    ALLOW_TEST_KEYS,
    GROUP_LAX,
    HOSPITALS,
    INSECURE_SEED_5,
    LAX,
    TEST_KEYS,
    exact_counts,
    flower_run,
    hospital_files,
    load,
    model,
    node_configs,
    plain_update,
    union_numbers,
)
from torch import nn

import uldp
import uldp.flower as uf
from uldp.flower.local import LocalGrid
from uldp.methods import user_level
from uldp.methods.base import needed
from uldp.secure.driver import ProtocolAbort
from uldp.secure.psu import TEST_GROUP


def test_a_silo_answers_default_only_with_its_own_consent(hospital_files):  # noqa: F811
    """DEFAULT releases without noise: every silo refuses it by name unless its own node config allows it."""
    with pytest.raises(RuntimeError, match="DEFAULT adds no noise"):
        flower_run(hospital_files, model(), method="DEFAULT", secure=False, rounds=1)


def test_protocol_1_test_keys_need_the_silos_consent(hospital_files):  # noqa: F811
    net = model()
    with pytest.raises(RuntimeError, match="insecure test key"):
        flower_run(  # secure: default; the union's group needs no consent
            hospital_files,
            net,
            protocol=TEST_KEYS,
            sigma=1.0,
            local_epochs=1,
            rounds=1,
            psu_group="modp2048",
        )
    with pytest.raises(ValueError, match="secure must be True, False or None"):
        uf.UldpStrategy(method="ULDP-AVG", sigma=1.0, secure="yes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="at least 2048"):
        uf.UldpStrategy(sigma=1.0, secure=True, protocol={"key_bits": 1024})


def test_the_unions_group_is_the_servers_choice_within_each_silos_policy_and_consent(
    hospital_files,  # noqa: F811
):
    """The server names the private set union's group in its hello: a silo refuses the insecure test group unless
    its node config consents to test keys, and a group below its policy's ``min_union_bits``; each silo's union
    runs in the group named (3072 bits, or the test group): the same users either way (their numbers differ)."""
    with pytest.raises(
        RuntimeError,
        match=r"insecure test group 'insecure-test-256'.*'uldp-insecure-test-keys=true'",
    ):
        flower_run(
            hospital_files,
            model(),
            {"uldp-insecure-test-keys": "false"},
            method="ULDP-AVG",
            sigma=1.0,
            secure=False,
            rounds=1,
        )
    with pytest.raises(
        ValueError, match=r"union group must be one of \['insecure-test-256', 'modp2048'"
    ):
        uf.UldpStrategy(sigma=1.0, psu_group="modp1024")
    plain: dict[str, Any] = {"method": "ULDP-AVG", "sigma": 1.0, "secure": False, "rounds": 1}
    strict = {
        "uldp-policy-min-union-bits": 3072
    }  # the silos' own floor: the server's default is below it
    with pytest.raises(
        RuntimeError,
        match=r"names a 2048-bit group for the private set union, below this silo's min_union_bits 3072",
    ):
        flower_run(hospital_files, model(), strict, psu_group="modp2048", **plain)
    partitions = []
    for group in (
        "modp3072",
        TEST_GROUP.name,
    ):  # the test group: by the silos' consent, whatever their floor
        _, _, grid = flower_run(hospital_files, model(), strict, psu_group=group, **plain)
        states = [
            bytes(context.state["uldp_psu"]["state"])  # type: ignore[arg-type]  # a ConfigRecord value: bytes here
            for context in grid.contexts.values()
        ]
        assert all(f'"group": "{group}"'.encode() in state for state in states), group
        numbers = np.concatenate(union_numbers(hospital_files, grid))
        partitions.append(numbers[:, None] == numbers[None, :])  # which records are one user's
    np.testing.assert_array_equal(*partitions)  # the same users, whatever their numbers


def test_silos_refuse_less_noise_than_their_floor(hospital_files):  # noqa: F811
    with pytest.raises(RuntimeError, match=r"sigma=1\.0 is below this silo's min_sigma 2\.0"):
        flower_run(
            hospital_files,
            model(),
            {"uldp-policy-min-sigma": 2.0},
            secure=False,
            sigma=1.0,
            local_epochs=1,
            rounds=1,
        )


# --- issue 30: a hostile server against the silos' own policy ---------------------------------------------------
class Hostile(uf.UldpStrategy):
    """A server that rewrites its train settings (``self.rewrite``) and keeps every silo's plain update."""

    rewrite: ClassVar[dict] = {}
    updates: list

    def configure_train(self, server_round, arrays, config, grid):
        messages = list(super().configure_train(server_round, arrays, config, grid))
        for message in messages:
            for name, value in self.rewrite.items():
                message.content["uldp"][name] = value
        return messages

    def aggregate_train(self, server_round, replies):
        replies = list(replies)
        self.updates = [plain_update(r) for r in replies if not r.has_error()]
        return super().aggregate_train(server_round, replies)


def _rebuilt_noise(strategy: uf.UldpStrategy, size: int, server_round: int) -> list[np.ndarray]:
    """Attack 1: every silo's noise as the server would rebuild it from the seed it sent."""
    from uldp.flower.messages import server_round_seed as _round_seed

    stream = _round_seed(strategy.seed, server_round)
    method = user_level(strategy.method)
    return [method.silo_noise(size, 3, stream, s).numpy() for s in range(3)]


@pytest.mark.parametrize("own_option", [False, True])
def test_a_server_sent_seed_is_ignored_and_only_the_silos_own_option_reproduces(
    hospital_files,  # noqa: F811
    own_option,
):
    """Attack 1: the strategy used to send ``insecure_seed`` (with its own flag, or a subclass's), and every silo drew
    its noise from it: the update minus the rebuilt noise was the clean update (residual 0 on the noise's scale).
    Now a silo ignores it: the residual is two independent noises, std sqrt(2) sigma C / sqrt(|S|). Only the silo's
    own node config reproduces the noise (then the residual is the clean update, well below the noise), and the
    strategy records that a silo used it."""
    settings: dict[str, Any] = dict(
        method="ULDP-AVG",
        sigma=20.0,
        q=1.0,
        local_epochs=1,
        batch_size=8,
        seed=5,
        rounds=1,
        secure=False,
    )  # the server sees each silo's update (explicit)
    Hostile.rewrite = {"insecure_seed": 5, "insecure_reproducible_noise": True}
    params, strategy, _ = flower_run(
        hospital_files,
        model(),
        INSECURE_SEED_5 if own_option else {},
        strategy_class=Hostile,
        **settings,
    )
    assert isinstance(strategy, Hostile) and len(strategy.updates) == 3
    residual = np.concatenate(
        [
            u - z
            for u, z in zip(strategy.updates, _rebuilt_noise(strategy, params.size, 1), strict=True)
        ]
    )
    noise_std = settings["sigma"] * needed(strategy.hp.clip, "clip") / np.sqrt(3)
    if own_option:
        assert residual.std() < 0.2 * noise_std and strategy.insecure_reproducible_noise
    else:
        assert 0.5 * np.sqrt(2) * noise_std < residual.std() < 2 * np.sqrt(2) * noise_std
        assert not strategy.insecure_reproducible_noise


class Replay(uf.UldpStrategy):
    """A strategy that keeps the train messages it sent, for a hostile server to send them again (Attack 2)."""

    def configure_train(self, server_round, arrays, config, grid):
        self.sent = list(super().configure_train(server_round, arrays, config, grid))
        return self.sent


def _replayed(grid: LocalGrid, strategy: Replay) -> list[Any]:
    """The silos' replies to copies of every train message ``strategy`` sent."""
    from flwr.app import Message as FlowerMessage

    copies = [
        FlowerMessage(
            m.content, dst_node_id=m.metadata.dst_node_id, message_type="train", group_id="1"
        )
        for m in strategy.sent
    ]
    return list(grid.send_and_receive(copies))


def test_a_replayed_round_is_refused_even_after_a_restart(hospital_files, tmp_path):  # noqa: F811
    """Attack 2: round 1 sent again (100 times at 09fdb4c, averaging the noise's std from 0.289 to 0.030) is refused
    by every silo, naming the round (its masked sum's state, then after a restart of the silo, a fresh context with a
    fresh masked-sum session, its ledger file)."""
    app = uf.silo_client_app(load, model, nn.CrossEntropyLoss())
    configs = [
        {**c, "uldp-ledger": str(tmp_path / f"ledger-{c['silo']}.json")}
        for c in node_configs(hospital_files, LAX)
    ]
    grid = LocalGrid(app, configs)
    strategy = Replay(method="ULDP-AVG", sigma=5.0, local_epochs=1, batch_size=8, seed=1)
    from flwr.app import ArrayRecord

    strategy.start(grid, ArrayRecord([uldp.flat_parameters(model()).numpy()]), num_rounds=1)
    for _ in range(3):
        replies = _replayed(grid, strategy)
        assert all(
            r.has_error() and "refuses round 1: it answered round 1" in str(r.error.reason)
            for r in replies
        )
    restarted = LocalGrid(app, configs)  # new contexts: only the ledger files remember
    strategy.setup(restarted)
    assert all(
        "round 1 is not after round 1" in str(r.error.reason)
        for r in _replayed(restarted, strategy)
    )
    assert {p.name for p in tmp_path.glob("ledger-*.json")} == {
        f"ledger-{h}.json" for h in HOSPITALS
    }


@pytest.mark.parametrize(
    "rewrite, refusal",
    [
        ({"sigma": 1e-12}, "sigma=1e-12 is below this silo's min_sigma 0.5"),
        ({"local_epochs": 10**7}, "local_epochs=10000000 is outside this silo's 1..100"),
        (
            {"sampled": np.packbits(np.eye(1, 40, 0, dtype=bool)[0]).tobytes()},
            r"samples 1 user\(s\) is below this silo.s min_sampled_users 2",
        ),
    ],
)
def test_a_hostile_request_is_refused_by_name(hospital_files, rewrite, refusal):  # noqa: F811
    """Attack 5: a tiny sigma, a huge local_epochs (6 GB at 09fdb4c), a one-user sample: refused by the silo's
    default policy before anything is trained, the reason returned to the server."""
    Hostile.rewrite = rewrite
    with pytest.raises(RuntimeError, match=refusal):
        flower_run(
            hospital_files,
            model(),
            strategy_class=Hostile,
            method="ULDP-AVG",
            sigma=5.0,
            local_epochs=1,
            rounds=1,
        )


def test_huge_total_records_are_refused_at_the_federation_stage(hospital_files):  # noqa: F811
    """Attack 5: total_records = 10**12 (4 TB at 09fdb4c) is past the default max_records."""

    class Inflate(uf.UldpStrategy):
        def _ask(self, grid, contents, timeout, **options):
            for content in contents.values():
                if content.get("stage") == "federation":
                    content["total_records"] = 10**12
            return super()._ask(grid, contents, timeout, **options)

    with pytest.raises(
        RuntimeError, match=r"total_records=1000000000000 is outside this silo's 1\.\.100000000"
    ):
        flower_run(
            hospital_files, model(), strategy_class=Inflate, method="ULDP-AVG", sigma=5.0, rounds=1
        )


def test_without_secure_aggregation_the_silos_account_for_the_servers_view(hospital_files):  # noqa: F811
    """Attack 4: ULDP-AVG-w is secure by default; secure=False is explicit, the run reports the server's view
    (sigma / sqrt(|S|): epsilon 1.45 where the model's is 0.79 after one round at sigma 5), and a silo whose policy
    allows 1.0 refuses it, while ULDP-AVG (secure by default too; uniform weights: even a plain view costs what the
    model costs) is answered."""
    assert (
        uf.UldpStrategy(sigma=5.0).secure and uf.UldpStrategy(method="ULDP-AVG", sigma=5.0).secure
    )
    tight = {"uldp-policy-epsilon": 1.0}
    with pytest.raises(RuntimeError, match=r"from 0 to 1\.45 .* past its policy's epsilon 1 "):
        flower_run(
            hospital_files, model(), tight, secure=False, sigma=5.0, local_epochs=1, rounds=1
        )
    _, strategy, _ = flower_run(
        hospital_files, model(), tight, method="ULDP-AVG", sigma=5.0, local_epochs=1, rounds=1
    )
    assert (
        strategy.server_view_epsilons == strategy.epsilons
        and round(strategy.epsilons[0], 2) == 0.79
    )


def test_without_counts_in_the_method_no_silo_learns_anothers_counts(hospital_files):  # noqa: F811
    """Attack 7: with secure=False every silo received every other silo's exact n_su, even for ULDP-AVG, which needs
    none. Now the union's shares carry no counts (each count 1) unless plain ULDP-AVG-w needs them."""
    for method, shared in (("ULDP-AVG", False), ("ULDP-AVG-w", True)):
        _, _, grid = flower_run(
            hospital_files,
            model(),
            method=method,
            secure=False,
            sigma=5.0,
            local_epochs=1,
            rounds=1,
        )
        counts = exact_counts(hospital_files, grid)
        for context in grid.contexts.values():
            s = context.state.config_records["uldp"]["index"]
            assert isinstance(s, int)
            held = context.state.array_records["uldp_arrays"].to_numpy_ndarrays()[0]
            np.testing.assert_array_equal(held[s], counts[s])
            assert (
                np.array_equal(np.delete(held, s, axis=0), np.delete(counts, s, axis=0)) == shared
            )
            assert shared or not np.delete(held, s, axis=0).any()


def test_protocol_1_never_answers_a_round_twice(hospital_files):  # noqa: F811
    """Attack 2 on Protocol 1: a silo answering round 1 twice used the same pairwise masks, so the key holder's
    Dec(A / B) was the silo's clean weighted update (to 1e-19). Now every silo's driver refuses the replayed update
    stage (the train message with the round's weights and shares): no second masked update exists to divide by; and
    the server's driver never starts round 1 again."""
    from flwr.app import ArrayRecord

    grid = LocalGrid(
        uf.silo_client_app(load, model, nn.CrossEntropyLoss()),
        node_configs(hospital_files, ALLOW_TEST_KEYS),
    )
    strategy = Replay(sigma=5.0, local_epochs=1, protocol=TEST_KEYS)
    strategy.start(grid, ArrayRecord([uldp.flat_parameters(model()).numpy()]), num_rounds=1)
    replies = _replayed(grid, strategy)
    assert all(
        r.has_error() and "refuses p1-update of round 1" in str(r.error.reason) for r in replies
    )
    with pytest.raises(ProtocolAbort, match="each round index is used once"):
        strategy._checked_aggregation().begin_round(1, np.ones(strategy.n_users, bool))


def test_a_repeated_union_step_is_refused_by_name(hospital_files):  # noqa: F811
    """Issue 30, item 7: the server sends a silo the same relayed list twice; the silo answers each step once."""

    class Repeating(uf.UldpStrategy):
        def _ask(self, grid, contents, timeout, **options):
            replies = super()._ask(grid, contents, timeout, **options)
            if any(content.get("stage") == "psu-relay" for content in contents.values()):
                return super()._ask(grid, contents, timeout, **options)
            return replies

    with pytest.raises(RuntimeError, match=r"refuses a relay message of step 0: step 2 is due"):
        flower_run(
            hospital_files,
            model(),
            strategy_class=Repeating,
            method="ULDP-AVG",
            sigma=5.0,
            rounds=1,
        )


def test_group_flags_relayed_out_of_order_are_refused_by_name(hospital_files):  # noqa: F811
    """ULDP-GROUP-k's user lists are sealed for their sender's place: a server that relays silo 1's list as silo 0's
    (to learn whose flags change) stops the set-up, every silo naming the list that does not open."""

    class Swapping(uf.UldpStrategy):
        def _ask(self, grid, contents, timeout, **options):
            for content in contents.values():
                if content.get("stage") == "group-flags":
                    users = list(content["users"])
                    content["users"] = [users[1], users[0], *users[2:]]
            return super()._ask(grid, contents, timeout, **options)

    with pytest.raises(RuntimeError, match=r"silo 0's user list does not open"):
        flower_run(
            hospital_files,
            model(),
            GROUP_LAX,
            strategy_class=Swapping,
            method="ULDP-GROUP-2",
            sigma=1.0,
            rounds=1,
        )


@pytest.mark.parametrize("silos", [HOSPITALS, None])
def test_a_silo_error_names_the_hospital_not_the_flower_node(hospital_files, silos):  # noqa: F811
    """A silo that joins and fails stops the run with its own name and cause, whether the silos are named or taken
    as they come (it was left out, and the run trained on the others)."""

    def bad_load(context) -> uf.SiloData:
        data = load(context)
        if context.node_config["silo"] == "St Mary":
            return uf.SiloData(data.x, np.array(["x"] * len(data.x)), data.patient_ids)
        return data

    from flwr.app import ArrayRecord

    app = uf.silo_client_app(bad_load, model, nn.CrossEntropyLoss())
    grid = LocalGrid(app, node_configs(hospital_files, LAX))
    strategy = uf.UldpStrategy(method="ULDP-AVG", sigma=1.0, silos=silos, join_timeout=1)
    with pytest.raises(
        RuntimeError, match=r"^silo 'St Mary' failed: ValueError: y must be numeric"
    ):
        strategy.start(grid, ArrayRecord([uldp.flat_parameters(model()).numpy()]), num_rounds=1)
    assert strategy.epsilons == []  # stopped before any round
