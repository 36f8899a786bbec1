"""uldp.flower: the Message-API strategy and silo ClientApp equal uldp.fit under the private set union's numbers."""

from __future__ import annotations

import hashlib
import os
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import pandas as pd
import pytest
from torch import nn

import uldp
import uldp.flower as uf
from uldp.common.persist import array_from_bytes, array_to_bytes
from uldp.flower.local import LocalGrid
from uldp.method_names import parse_method
from uldp.methods import user_level
from uldp.methods.base import needed
from uldp.secure.driver import ProtocolAbort

if TYPE_CHECKING:
    import pathlib

HOSPITALS = ["Royal", "St Mary", "General"]
FEATURES = ["a", "b", "c"]


def model() -> nn.Module:
    return nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))


def load(context) -> uf.SiloData:
    frame = pd.read_csv(context.node_config["data"])
    return uf.SiloData(
        frame[FEATURES].to_numpy(np.float32), frame["label"].to_numpy(), frame["patient"]
    )


@pytest.fixture()
def hospital_files(tmp_path: pathlib.Path) -> pathlib.Path:
    rng = np.random.default_rng(0)
    n = 150
    frame = pd.DataFrame(rng.normal(size=(n, 3)), columns=FEATURES)
    frame["label"] = (frame.a > 0).astype(int)
    frame["patient"] = [f"P{u}" for u in rng.integers(0, 20, n)]
    frame["hospital"] = rng.choice(HOSPITALS, n)
    uf.write_key_file(tmp_path / "key")
    # a patient whose key at its silo (SHA-256) ends in a zero byte (a numpy bytes array would silently drop it)
    trailing_zero = next(
        f"Z{i}"
        for i in range(100000)
        if hashlib.sha256(f"Z{i}".encode()).hexdigest().endswith("00")
    )
    frame.loc[frame["patient"] == "P0", "patient"] = trailing_zero
    for hospital, part in frame.groupby("hospital"):
        part.drop(columns="hospital").to_csv(tmp_path / f"{hospital}.csv", index=False)
    return tmp_path


def union_numbers(files: pathlib.Path, grid: LocalGrid) -> list[np.ndarray]:
    """Per hospital (sorted names), the user number the union gave each record's patient, read at each silo."""
    contexts = {context.node_config["silo"]: context for context in grid.contexts.values()}
    return [
        uf.user_numbers(contexts[h], pd.read_csv(files / f"{h}.csv")["patient"])
        for h in sorted(HOSPITALS)
    ]


def in_process(
    files: pathlib.Path, net: nn.Module, numbers: list[np.ndarray], **arguments
) -> tuple[nn.Module, uldp.History]:
    """uldp.fit on the silos' files concatenated in sorted name order, the union's user numbers (per silo, as
    :func:`union_numbers` reads them) as user ids."""
    parts = [pd.read_csv(files / f"{h}.csv") for h in sorted(HOSPITALS)]
    frame = pd.concat(parts)
    silos = [h for h, part in zip(sorted(HOSPITALS), parts, strict=True) for _ in range(len(part))]
    users = np.concatenate(numbers)
    return uldp.fit(
        net,
        frame[FEATURES].to_numpy(np.float32),
        frame["label"].to_numpy(),
        user_ids=users,
        silo_ids=silos,
        loss=nn.CrossEntropyLoss(),
        **arguments,
    )


#: A policy that lets the plain ULDP-AVG-w runs of these tests spend what the server sees (epsilon ~ 13).
LAX = {"uldp-policy-epsilon": 100.0}


def node_configs(files: pathlib.Path, node_config: dict | None = None) -> list[dict]:
    return [
        {
            "silo": h,
            "uldp-key-file": str(files / "key"),
            "data": str(files / f"{h}.csv"),
            **(node_config or {}),
        }
        for h in HOSPITALS
    ]


TEST_KEYS = {"key_bits": 1024, "n_max": 300, "insecure_test_key": True}
ALLOW_TEST_KEYS = {"uldp-insecure-test-keys": "true"}
#: The silos' own INSECURE test option: noise from seed 5, as uldp.fit(seed=5) (the strategy's seed samples users).
INSECURE_SEED_5 = {"uldp-insecure-reproducible-noise": 5}
#: A silo's own consent to answer a method without noise (DEFAULT).
NO_DP = {"uldp-allow-no-dp": "true"}
#: A policy for ULDP-GROUP-median at sigma 1 (k = 7 here: epsilon ~ 2,000 a round).
GROUP_LAX = {"uldp-policy-epsilon": 1e5}


def net_params(net: nn.Module) -> np.ndarray:
    return uldp.flat_parameters(net).numpy()


def plain_update(reply) -> np.ndarray:
    """A plain train reply's update (uldp.federation's plain aggregation: the array's bytes)."""
    return array_from_bytes(bytes(reply.content["uldp"]["update"]))


def flower_run(
    files: pathlib.Path,
    net: nn.Module,
    node_config: dict | None = None,
    *,
    strategy_class: type[uf.UldpStrategy] | None = None,
    **arguments,
) -> tuple[np.ndarray, uf.UldpStrategy, LocalGrid]:
    """A Flower run on LocalGrid; ``node_config`` is every silo's own (policy, test options)."""
    from flwr.app import ArrayRecord

    app = uf.silo_client_app(load, model, nn.CrossEntropyLoss())
    grid = LocalGrid(app, node_configs(files, {**LAX, **(node_config or {})}))
    rounds = arguments.pop("rounds")
    strategy = (strategy_class or uf.UldpStrategy)(**arguments)
    result = strategy.start(
        grid, ArrayRecord([uldp.flat_parameters(net).numpy()]), num_rounds=rounds
    )
    return result.arrays.to_numpy_ndarrays()[0], strategy, grid


@pytest.mark.parametrize(
    "method",
    [
        "ULDP-AVG-w",
        "ULDP-AVG",
        "ULDP-SGD-w",
        "ULDP-NAIVE",
        "ULDP-GROUP-2",
        "ULDP-GROUP-median",
        "DEFAULT",
    ],
)
def test_the_flower_federation_ends_at_the_in_process_model(hospital_files, method):
    net = model()
    spec = parse_method(method)
    sampling = {"q": 0.8} if spec.per_user else {}  # the others sample no users
    noise = {"sigma": 1.0} if spec.private else {}  # DEFAULT adds none
    settings = dict(
        method=method, local_epochs=2, batch_size=8, seed=5, rounds=2, **sampling, **noise
    )
    own = NO_DP if not spec.private else GROUP_LAX if spec.capabilities.group_privacy else {}
    flower, strategy, grid = flower_run(
        hospital_files, net, {**INSECURE_SEED_5, **own}, secure=False, **settings
    )
    trained, history = in_process(
        hospital_files, net, union_numbers(hospital_files, grid), **settings
    )
    fitted = uldp.flat_parameters(trained).numpy()
    if spec.per_user or not spec.private:  # the same sums in the same order: bit for bit
        np.testing.assert_array_equal(flower, fitted)
    else:  # fit sums ULDP-NAIVE's clean updates, then the noise, and runs ULDP-GROUP's silos' DP-SGD batched;
        np.testing.assert_allclose(flower, fitted, rtol=1e-6, atol=1e-6)  # each Flower silo alone
    expected = history.column("epsilon") if spec.private else [float("inf")] * 2
    assert strategy.epsilons == expected and strategy.insecure_reproducible_noise
    noisy, private, _ = flower_run(
        hospital_files, net, own, secure=False, **settings
    )  # the silos' own CSPRNG (noise and record order)
    assert not np.array_equal(noisy, flower) and not private.insecure_reproducible_noise


@pytest.mark.parametrize("method", ["ULDP-GROUP-2", "DEFAULT"])
def test_the_masked_sum_runs_the_methods_without_per_user_weights(hospital_files, method):
    """Secure aggregation of ULDP-GROUP-k and DEFAULT (the masked sum): the plain run's model, the decoded sum within
    |S| 2^-37 of the plain one before the float32 step (one float32 rounding apart here)."""
    net, spec = model(), parse_method(method)
    settings = dict(method=method, local_epochs=1, batch_size=8, seed=5, rounds=1)
    settings.update({"sigma": 1.0} if spec.private else {})
    own = {**INSECURE_SEED_5, **(GROUP_LAX if spec.private else NO_DP)}
    plain, _, _ = flower_run(hospital_files, net, own, secure=False, **settings)
    masked, strategy, _ = flower_run(hospital_files, net, own, secure=True, **settings)
    np.testing.assert_allclose(masked, plain, rtol=0, atol=1e-7)
    assert strategy.secure and not np.array_equal(masked, net_params(net))


def test_a_silo_answers_default_only_with_its_own_consent(hospital_files):
    """DEFAULT releases without noise: every silo refuses it by name unless its own node config allows it."""
    with pytest.raises(RuntimeError, match="DEFAULT adds no noise"):
        flower_run(hospital_files, model(), method="DEFAULT", secure=False, rounds=1)


@pytest.mark.parametrize(
    ("arguments", "refusal"),
    [
        ({"method": "DEFAULT", "sigma": 1.0}, "DEFAULT adds no noise"),
        ({"method": "ULDP-NAIVE", "sigma": 1.0, "q": 0.5}, "ULDP-NAIVE samples no users"),
        (
            {"method": "ULDP-GROUP-2", "sigma": 1.0, "hidden_sample": True},
            "a method that samples users",
        ),
        ({"method": "ULDP-AVG", "sigma": 1.0, "protocol": TEST_KEYS}, "ULDP-AVG has not"),
        ({"method": "ULDP-GROUP-2", "epsilon": 3.0}, "ULDP-GROUP-2: give sigma"),
    ],
)
def test_the_strategy_refuses_settings_the_method_gives_no_meaning(arguments, refusal):
    with pytest.raises(ValueError, match=refusal):
        uf.UldpStrategy(**arguments)


def exact_counts(files: pathlib.Path, grid: LocalGrid) -> np.ndarray:
    """n[s, u] counted from the files (silos in sorted name order, users as the union numbered them)."""
    numbers = union_numbers(files, grid)
    n_users = 1 + max(int(n.max()) for n in numbers)
    return np.stack([np.bincount(n, minlength=n_users) for n in numbers])


@pytest.mark.parametrize("backend", ["paillier", "packed-paillier", "lattice"])
def test_protocol_1_in_flower_is_within_p_of_the_plain_weighted_aggregation(
    hospital_files, monkeypatch, backend
):
    """Set-up and every round's weighting through Protocol 1 as Flower messages: each decoded aggregate is within
    P = 1e-10 of sum_s (sum_u n_su / N_u delta_su + z_s) computed in float64 from what the silos put in (Theorem 4),
    and the model is the plain federation's to float32 rounding. Each silo keeps only its own n_su and its secrets
    as SiloState bytes in its context state (with the lattice backend also the server's BFV public keys)."""
    from uldp.secure import ProtocolConfig, protocol

    inputs, sampled_rounds, decoded = [], [], []
    masked_update, start_round, finish_round = (
        protocol.Silo.masked_update,
        protocol.Server.start_round,
        protocol.Server.finish_round,
    )

    def record_inputs(self, message, shared, deltas, noise):
        inputs.append((self.silo_id, np.array(deltas), np.array(noise)))
        return masked_update(self, message, shared, deltas, noise)

    def record_sampled(self, round_index, sampled):
        sampled_rounds.append(np.array(sampled))
        return start_round(self, round_index, sampled)

    def record_decoded(self, messages):
        decoded.append(finish_round(self, messages))
        return decoded[-1]

    monkeypatch.setattr(protocol.Silo, "masked_update", record_inputs)
    monkeypatch.setattr(protocol.Server, "start_round", record_sampled)
    monkeypatch.setattr(protocol.Server, "finish_round", record_decoded)
    net = model()
    settings: dict[str, Any] = {
        "method": "ULDP-AVG-w",
        "sigma": 1.0,
        "q": 0.8,
        "local_epochs": 2,
        "batch_size": 8,
        "seed": 5,
        "rounds": 2,
    }
    secure, strategy, grid = flower_run(
        hospital_files,
        net,
        {**ALLOW_TEST_KEYS, **INSECURE_SEED_5},
        secure=True,
        protocol={**TEST_KEYS, "backend": backend},
        **settings,
    )
    assert strategy.protocol.backend == backend
    counts = exact_counts(hospital_files, grid)
    assert strategy.n_users == counts.shape[1] and len(decoded) == len(sampled_rounds) == 2
    for t in range(2):
        weights = np.where(sampled_rounds[t], counts / counts.sum(axis=0), 0.0)
        exact = sum(
            weights[s] @ deltas + noise
            for s, deltas, noise in sorted(inputs[3 * t : 3 * t + 3], key=lambda item: item[0])
        )
        assert np.max(np.abs(decoded[t] - exact)) <= 1e-10
    # the plain federation, the same user numbers
    trained, _ = in_process(hospital_files, net, union_numbers(hospital_files, grid), **settings)
    np.testing.assert_allclose(secure, uldp.flat_parameters(trained).numpy(), rtol=1e-5, atol=1e-6)
    _, plain_strategy, _ = flower_run(
        hospital_files, net, INSECURE_SEED_5, secure=False, **settings
    )
    from uldp.accounting import epsilon_for_method

    assert strategy.epsilons == plain_strategy.epsilons
    # q = 0.8: the server drew the sample, so its epsilon is the known-sample one (issue 41), above the model's
    assert strategy.server_view_epsilons == [
        epsilon_for_method(
            "ULDP-AVG-w",
            sigma=1.0,
            rounds=t,
            delta=1e-5,
            q=0.8,
            adversary="server that sees the sample",
        ).epsilon
        for t in (1, 2)
    ]
    assert all(v > e for v, e in zip(strategy.server_view_epsilons, strategy.epsilons, strict=True))
    assert all(
        view > epsilon
        for view, epsilon in zip(
            plain_strategy.server_view_epsilons, plain_strategy.epsilons, strict=True
        )
    )
    for context in grid.contexts.values():
        s = context.state.config_records["uldp"][
            "index"
        ]  # silos are numbered in sorted order of their names
        assert isinstance(s, int)
        held = context.state.array_records["uldp_arrays"].to_numpy_ndarrays()[0]
        np.testing.assert_array_equal(held[s], counts[s])
        assert not np.delete(held, s, axis=0).any()  # no other silo's n_su
        state = context.state.config_records["uldp_protocol_1"]["silo"]
        assert isinstance(state, bytes)
        assert strategy.hp.clip is not None
        config = ProtocolConfig.for_training(
            3, strategy.n_users, clip=strategy.hp.clip, sigma=1.0, parameters=strategy.protocol
        )
        assert state.startswith(b"ULDP") and protocol.Silo.restore(state, config).silo_id == s


def test_a_flower_lattice_silo_keeps_its_weights_and_a_repeated_sample_carries_none(
    hospital_files, monkeypatch
):
    """Each Flower silo is rebuilt from its context state at every message; with the lattice backend that state holds
    the packed BFV weights it received, so in the second round of the same sample (q = 1) the server sends no weights
    to any silo, and the model is still the plain federation's (to float32 rounding)."""
    from uldp.secure.backends.lattice import LatticeBackend
    from uldp.secure.messages import LatticeWeightsMessage

    received: list[tuple[int, int, int]] = []  # (round, silo, weight ciphertexts received)
    masked_update = LatticeBackend.masked_update

    def record(self, silo, message, shared, deltas, noise, active):
        (answer,) = [m for m in shared if isinstance(m, LatticeWeightsMessage)]
        received.append((message.round_index, silo.silo_id, len(answer.ciphertexts)))
        return masked_update(self, silo, message, shared, deltas, noise, active)

    monkeypatch.setattr(LatticeBackend, "masked_update", record)
    net = model()
    settings: dict[str, Any] = {
        "method": "ULDP-AVG-w",
        "sigma": 1.0,
        "q": 1.0,
        "local_epochs": 1,
        "batch_size": 8,
        "seed": 5,
        "rounds": 2,
    }
    secure, _, grid = flower_run(
        hospital_files,
        net,
        {**ALLOW_TEST_KEYS, **INSECURE_SEED_5},
        secure=True,
        protocol={**TEST_KEYS, "backend": "lattice"},
        **settings,
    )
    by_round = {r: sorted((s, n) for t, s, n in received if t == r) for r in (1, 2)}
    assert [n for _, n in by_round[1]] == [2, 2, 2]  # one packed ciphertext per plaintext prime
    assert [n for _, n in by_round[2]] == [0, 0, 0]  # held from round 1, through the saved state
    trained, _ = in_process(hospital_files, net, union_numbers(hospital_files, grid), **settings)
    np.testing.assert_allclose(secure, uldp.flat_parameters(trained).numpy(), rtol=1e-5, atol=1e-6)


def test_protocol_1_test_keys_need_the_silos_consent(hospital_files):
    net = model()
    with pytest.raises(RuntimeError, match="insecure test key"):
        flower_run(
            hospital_files, net, protocol=TEST_KEYS, sigma=1.0, local_epochs=1, rounds=1
        )  # secure: default
    with pytest.raises(ValueError, match="secure must be True, False or None"):
        uf.UldpStrategy(method="ULDP-AVG", sigma=1.0, secure="yes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="at least 2048"):
        uf.UldpStrategy(sigma=1.0, secure=True, protocol={"key_bits": 1024})


def test_silos_refuse_less_noise_than_their_floor(hospital_files):
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


def test_key_files_are_private_and_never_overwritten(tmp_path):
    key = uf.write_key_file(tmp_path / "key")
    assert uf.read_key_file(tmp_path / "key") == key
    assert os.stat(tmp_path / "key").st_mode & 0o077 == 0
    with pytest.raises(ValueError, match="exists already"):
        uf.write_key_file(tmp_path / "key")


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
    hospital_files, own_option
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


def test_a_replayed_round_is_refused_even_after_a_restart(hospital_files, tmp_path):
    """Attack 2: round 1 sent again (100 times at 09fdb4c, averaging the noise's std from 0.289 to 0.030) is refused
    by every silo, naming the round (its masked sum's state, then after a restart of the silo, a fresh context with a
    fresh masked-sum session, its ledger file)."""
    from flwr.app import Message as FlowerMessage

    class Replay(uf.UldpStrategy):
        def configure_train(self, server_round, arrays, config, grid):
            self.sent = list(super().configure_train(server_round, arrays, config, grid))
            return self.sent

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
        copies = [
            FlowerMessage(
                m.content, dst_node_id=m.metadata.dst_node_id, message_type="train", group_id="1"
            )
            for m in strategy.sent
        ]
        replies = list(grid.send_and_receive(copies))
        assert all(
            r.has_error() and "refuses round 1: it answered round 1" in str(r.error.reason)
            for r in replies
        )
    restarted = LocalGrid(app, configs)  # new contexts: only the ledger files remember
    strategy.setup(restarted)
    copies = [
        FlowerMessage(
            m.content, dst_node_id=m.metadata.dst_node_id, message_type="train", group_id="1"
        )
        for m in strategy.sent
    ]
    assert all(
        "round 1 is not after round 1" in str(r.error.reason)
        for r in restarted.send_and_receive(copies)
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
def test_a_hostile_request_is_refused_by_name(hospital_files, rewrite, refusal):
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


def test_huge_total_records_are_refused_at_the_federation_stage(hospital_files):
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


def test_without_secure_aggregation_the_silos_account_for_the_servers_view(hospital_files):
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


def test_without_counts_in_the_method_no_silo_learns_anothers_counts(hospital_files):
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


#: A silo's plain update rewritten by a hostile silo (or a corrupted link), and the refusal naming it: the earlier
#: runtime's cases, on the federation round every transport now drives.
MALFORMED = {
    "inflated": (lambda u: array_to_bytes(u * np.float32(1e30)), r"of norm .* past the bound"),
    "NaN": (lambda u: array_to_bytes(u * np.nan), "NaN or infinite"),
    "inf": (lambda u: array_to_bytes(u + np.inf), "NaN or infinite"),
    "shape (1,)": (lambda u: array_to_bytes(u[:1]), "the model is float32"),
    "2-d": (lambda u: array_to_bytes(u[None, :]), "the model is float32"),
    "float64": (lambda u: array_to_bytes(u.astype(np.float64)), "float64"),
    "garbage": (lambda u: b"\x00" * 40, "malformed array"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_an_update_past_its_methods_bound_or_malformed_aborts_the_round_naming_the_silo(
    hospital_files, case
):
    """Attack 6 on Flower: a silo's finite 3e38 update was applied. Now each update is checked against
    clip * (its weights' sum) + the noise's 2^-40 norm tail, and the round stops naming the silo; so does an update
    that is not finite, of another shape or dtype, or not an array at all."""
    from flwr.app import ArrayRecord

    rewrite, detail = MALFORMED[case]

    class Rewriting(LocalGrid):
        def send_and_receive(self, messages, *, timeout=None):
            replies = list(super().send_and_receive(messages, timeout=timeout))
            for reply in replies:
                if reply.metadata.message_type == "train" and reply.metadata.src_node_id == 102:
                    update = reply.content.config_records["uldp"]
                    update["update"] = rewrite(plain_update(reply))
            return replies

    grid = Rewriting(
        uf.silo_client_app(load, model, nn.CrossEntropyLoss()), node_configs(hospital_files, LAX)
    )
    strategy = uf.UldpStrategy(
        method="ULDP-AVG", sigma=5.0, local_epochs=1, secure=False, max_aborted_rounds=0
    )
    with pytest.raises(RuntimeError, match=rf"round 1: silo 'St Mary' sent a .*{detail}"):
        strategy.start(grid, ArrayRecord([uldp.flat_parameters(model()).numpy()]), num_rounds=1)


class TrainSpy(LocalGrid):
    """LocalGrid that keeps every ``train`` reply the server receives, by round (what the server-side object holds)."""

    received: dict[str, list]

    def send_and_receive(self, messages, *, timeout=None):
        replies = list(super().send_and_receive(messages, timeout=timeout))
        for reply in replies:
            if reply.metadata.message_type == "train":
                self.received.setdefault(reply.metadata.group_id, []).append(reply)
        return replies


def spied_run(
    files: pathlib.Path, net: nn.Module, **arguments
) -> tuple[np.ndarray, uf.UldpStrategy, TrainSpy]:
    from flwr.app import ArrayRecord

    grid = TrainSpy(
        uf.silo_client_app(load, model, nn.CrossEntropyLoss()),
        node_configs(files, {**LAX, **INSECURE_SEED_5}),
    )
    grid.received = {}
    rounds = arguments.pop("rounds")
    strategy = uf.UldpStrategy(**arguments)
    result = strategy.start(
        grid, ArrayRecord([uldp.flat_parameters(net).numpy()]), num_rounds=rounds
    )
    return result.arrays.to_numpy_ndarrays()[0], strategy, grid


def test_a_default_ulpd_avg_run_is_securely_aggregated(hospital_files):
    """Item 5: ULDP-AVG is secure by default (Protocol 1's pairwise masks, uldp.secure.masked_sum). Every train
    reply the server receives is a masked sum message, uniform on the ring: decoded alone it is nowhere near that
    silo's update (the same silos' plain updates, with the same test noise, from the explicit secure=False run); the
    model is the plain run's to float32 rounding, and the server's view spends the model's epsilon."""
    from uldp.secure.masked_sum import RESOLUTION_BITS
    from uldp.secure.messages import MaskedSumMessage

    net = model()
    # q = 1: the two runs' private set unions number the users differently, which would change a q < 1 sample
    settings = dict(
        method="ULDP-AVG", sigma=1.0, q=1.0, local_epochs=2, batch_size=8, seed=5, rounds=2
    )
    secure, strategy, grid = spied_run(hospital_files, net, **settings)
    plain, plain_strategy, plain_grid = spied_run(hospital_files, net, secure=False, **settings)
    assert strategy.secure and not plain_strategy.secure
    np.testing.assert_allclose(secure, plain, rtol=1e-5, atol=1e-6)
    for round_index in ("1", "2"):
        assert all(  # masked sum messages, never a plain update
            MaskedSumMessage.from_bytes(bytes(r.content["uldp"]["update"]))
            for r in grid.received[round_index]
        )
        assert [m.round_index for m in messages_of(grid, round_index)] == [int(round_index)] * 3
    first = sorted(plain_grid.received["1"], key=lambda r: r.metadata.src_node_id)
    for reply, message in zip(first, messages_of(grid, "1"), strict=True):
        update = plain_update(reply)
        alone = np.ldexp(
            np.frombuffer(message.values, "<u8").view(np.int64).astype(np.float64), -RESOLUTION_BITS
        )
        assert np.abs(alone - update).min() > 1e3
    assert strategy.server_view_epsilons == strategy.epsilons == plain_strategy.server_view_epsilons


def messages_of(grid: TrainSpy, round_index: str) -> list:
    """The masked sum messages of a round's train replies, in node order (each reply must carry one)."""
    from uldp.secure.messages import MaskedSumMessage

    replies = sorted(grid.received[round_index], key=lambda r: r.metadata.src_node_id)
    return [MaskedSumMessage.from_bytes(bytes(r.content["uldp"]["update"])) for r in replies]


def test_an_inflated_update_under_the_masked_sum_aborts_the_round(hospital_files, monkeypatch):
    """Item 5 with attack 6: the masks hide which silo sent more, so the decoded sum is checked against the sum of
    the silos' bounds and the round stops (no silo named) before anything is applied."""
    from uldp.methods.uldp_avg import UserLevelMethod

    honest = UserLevelMethod.silo_update
    inflated = {"done": False}

    def inflate(self, *args, **kwargs):
        update = honest(self, *args, **kwargs)
        if inflated["done"]:
            return update
        inflated["done"] = True  # one silo of the round
        return update * 1e4

    monkeypatch.setattr(UserLevelMethod, "silo_update", inflate)
    with pytest.raises(RuntimeError, match=r"securely aggregated sum has norm .* past the bound"):
        flower_run(hospital_files, model(), method="ULDP-AVG", sigma=5.0, local_epochs=1, rounds=1)


def test_protocol_1_never_answers_a_round_twice(hospital_files):
    """Attack 2 on Protocol 1: a silo answering round 1 twice used the same pairwise masks, so the key holder's
    Dec(A / B) was the silo's clean weighted update (to 1e-19). Now every silo's driver refuses the replayed update
    stage (the train message with the round's weights and shares): no second masked update exists to divide by; and
    the server's driver never starts round 1 again."""
    from flwr.app import ArrayRecord, Message as FlowerMessage

    class Replay(uf.UldpStrategy):
        def configure_train(self, server_round, arrays, config, grid):
            self.sent = list(super().configure_train(server_round, arrays, config, grid))
            return self.sent

    grid = LocalGrid(
        uf.silo_client_app(load, model, nn.CrossEntropyLoss()),
        node_configs(hospital_files, ALLOW_TEST_KEYS),
    )
    strategy = Replay(sigma=5.0, local_epochs=1, protocol=TEST_KEYS)
    strategy.start(grid, ArrayRecord([uldp.flat_parameters(model()).numpy()]), num_rounds=1)
    copies = [
        FlowerMessage(
            m.content, dst_node_id=m.metadata.dst_node_id, message_type="train", group_id="1"
        )
        for m in strategy.sent
    ]
    replies = list(grid.send_and_receive(copies))
    assert all(
        r.has_error() and "refuses p1-update of round 1" in str(r.error.reason) for r in replies
    )
    with pytest.raises(ProtocolAbort, match="each round index is used once"):
        strategy._checked_aggregation().begin_round(1, np.ones(strategy.n_users, bool))


#: The initial model is checked before the grid is used: these calls fail before any message.
def test_a_repeated_union_step_is_refused_by_name(hospital_files):
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


def test_group_flags_relayed_out_of_order_are_refused_by_name(hospital_files):
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


NO_GRID: Any = None


def test_start_takes_the_model_or_its_state_dict_and_returns_a_model(hospital_files):
    """Issue 33: start needed a flat vector; a state_dict surfaced at a hospital as a size mismatch."""
    from flwr.app import ArrayRecord

    net = model()
    settings: dict[str, Any] = dict(
        method="ULDP-AVG", sigma=1.0, local_epochs=1, batch_size=8, seed=5
    )
    finals = []
    for initial in (net, net.state_dict(), ArrayRecord(net.state_dict())):
        app = uf.silo_client_app(load, model, nn.CrossEntropyLoss())
        grid = LocalGrid(app, node_configs(hospital_files, {**LAX, **INSECURE_SEED_5}))
        strategy = uf.UldpStrategy(model=model(), **settings)
        result = strategy.start(grid, initial, num_rounds=1)
        finals.append(uldp.flat_parameters(strategy.trained_model(result)).numpy())
    flat, _, _ = flower_run(hospital_files, net, INSECURE_SEED_5, rounds=1, **settings)
    for final in finals:  # each run's union numbers the users afresh: float32 sums in another order
        np.testing.assert_allclose(final, flat, rtol=1e-6, atol=1e-7)
    strategy = uf.UldpStrategy(model=model(), **settings)
    with pytest.raises(ValueError, match=r"missing \['2.bias', '2.weight'\]"):
        strategy.start(
            NO_GRID, {k: v for k, v in net.state_dict().items() if not k.startswith("2.")}
        )
    with pytest.raises(ValueError, match="needs the architecture"):
        uf.UldpStrategy(**settings).start(NO_GRID, net.state_dict())
    with pytest.raises(ValueError, match="flat vector of 26 parameters"):
        strategy.start(NO_GRID, ArrayRecord([np.zeros(30, np.float32)]))


@pytest.mark.parametrize("silos", [HOSPITALS, None])
def test_a_silo_error_names_the_hospital_not_the_flower_node(hospital_files, silos):
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


def test_without_flower_the_import_says_what_to_install():
    import subprocess
    import sys

    blocked = (
        "import sys, importlib.abc\n"
        "class Block(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'flwr' or name.startswith('flwr.'):\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "import uldp.flower\n"
        "uldp.flower.UldpStrategy\n"
    )
    done = subprocess.run([sys.executable, "-c", blocked], capture_output=True, text=True)
    assert done.returncode == 1 and "pip install 'uldp[deploy]'" in done.stderr


def test_a_target_epsilon_calibrates_sigma_for_the_rounds_run(hospital_files):
    """epsilon= as in uldp.fit: sigma is the smallest the accountant finds for num_rounds, so the strategy's own
    epsilon after the last round is the target (to the solver's tolerance) and never above it."""
    from uldp.accounting import epsilon_uldp

    _, strategy, _ = flower_run(
        hospital_files,
        model(),
        method="ULDP-AVG",
        epsilon=3.0,
        q=0.5,
        local_epochs=1,
        secure=False,
        rounds=2,
    )
    sigma = needed(strategy.hp.sigma, "sigma")
    assert strategy.epsilons[-1] <= 3.0 and strategy.epsilons[-1] == pytest.approx(3.0, rel=1e-3)
    assert epsilon_uldp(sigma=sigma, rounds=2, delta=1e-5, q=0.5).epsilon == pytest.approx(
        3.0, rel=1e-3
    )
    cases: list[dict[str, Any]] = [{"sigma": 1.0, "epsilon": 3.0}, {}]
    for both_or_neither in cases:
        with pytest.raises(ValueError, match="give sigma or epsilon"):
            uf.UldpStrategy(method="ULDP-AVG", **both_or_neither)
