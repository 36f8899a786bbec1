"""uldp.flower: the Message-API strategy and silo ClientApp equal uldp.fit under the private set union's numbers.

Every method's federation on LocalGrid ends at the in-process model; the masked sum (secure aggregation of the
methods without per-user weights, and ULDP-AVG by default) and Protocol 1's private weighting (each backend) are
within their precision of the plain aggregation; and without Flower, the import says what to install."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
from flower_hospitals import (  # noqa: F401  (hospital_files: a fixture)
    ALLOW_TEST_KEYS,
    GROUP_LAX,
    INSECURE_SEED_5,
    LAX,
    NO_DP,
    TEST_KEYS,
    exact_counts,
    flower_run,
    hospital_files,
    in_process,
    load,
    model,
    net_params,
    node_configs,
    plain_update,
    union_numbers,
)
from torch import nn

import uldp
import uldp.flower as uf
from uldp.flower.local import LocalGrid
from uldp.method_names import parse_method

if TYPE_CHECKING:
    import pathlib


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
def test_the_flower_federation_ends_at_the_in_process_model(hospital_files, method):  # noqa: F811
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
def test_the_masked_sum_runs_the_methods_without_per_user_weights(hospital_files, method):  # noqa: F811
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


@pytest.mark.parametrize("backend", ["paillier", "packed-paillier", "lattice"])
def test_protocol_1_in_flower_is_within_p_of_the_plain_weighted_aggregation(
    hospital_files,  # noqa: F811
    monkeypatch,
    backend,
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
    hospital_files,  # noqa: F811
    monkeypatch,
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


def test_a_default_ulpd_avg_run_is_securely_aggregated(hospital_files):  # noqa: F811
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
