"""uldp.flower: the Message-API strategy and silo ClientApp equal uldp.fit; pseudonyms and sealed histograms."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import pytest
from torch import nn

import uldp
import uldp.flower as uf
from uldp.flower.local import LocalGrid
from uldp.flower.pseudonyms import open_histogram, seal_histogram

if TYPE_CHECKING:
    import pathlib

HOSPITALS = ["Royal", "St Mary", "General"]
FEATURES = ["a", "b", "c"]


def model() -> nn.Module:
    return nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))


def load(context) -> uf.SiloData:
    frame = pd.read_csv(context.node_config["data"])
    return uf.SiloData(frame[FEATURES].to_numpy(np.float32), frame["label"].to_numpy(), frame["patient"])


@pytest.fixture()
def hospital_files(tmp_path: pathlib.Path) -> pathlib.Path:
    rng = np.random.default_rng(0)
    n = 150
    frame = pd.DataFrame(rng.normal(size=(n, 3)), columns=FEATURES)
    frame["label"] = (frame.a > 0).astype(int)
    frame["patient"] = [f"P{u}" for u in rng.integers(0, 20, n)]
    frame["hospital"] = rng.choice(HOSPITALS, n)
    key = uf.write_key_file(tmp_path / "key")
    # a patient whose pseudonym ends in a zero byte (a numpy bytes array would silently drop it)
    trailing_zero = next(f"Z{i}" for i in range(100000) if uf.pseudonymize([f"Z{i}"], key)[0].endswith("00"))
    frame.loc[frame["patient"] == "P0", "patient"] = trailing_zero
    for hospital, part in frame.groupby("hospital"):
        part.drop(columns="hospital").to_csv(tmp_path / f"{hospital}.csv", index=False)
    return tmp_path


def in_process(files: pathlib.Path, net: nn.Module, **arguments) -> tuple[nn.Module, uldp.History]:
    """uldp.fit on the silos' files concatenated in sorted name order, the pseudonyms as user ids."""
    parts = [pd.read_csv(files / f"{h}.csv") for h in sorted(HOSPITALS)]
    frame = pd.concat(parts)
    silos = [h for h, part in zip(sorted(HOSPITALS), parts, strict=True) for _ in range(len(part))]
    users = uf.pseudonymize(frame["patient"], uf.read_key_file(files / "key"))
    return uldp.fit(net, frame[FEATURES].to_numpy(np.float32), frame["label"].to_numpy(), user_ids=users,
                    silo_ids=silos, loss=nn.CrossEntropyLoss(), **arguments)


def flower_run(files: pathlib.Path, net: nn.Module, node_config: dict | None = None,
               **arguments) -> tuple[np.ndarray, uf.UldpStrategy, LocalGrid]:
    from flwr.app import ArrayRecord

    app = uf.silo_client_app(load, model, nn.CrossEntropyLoss())
    grid = LocalGrid(app, [{"silo": h, "uldp-key-file": str(files / "key"), "data": str(files / f"{h}.csv"),
                            **(node_config or {})} for h in HOSPITALS])
    rounds = arguments.pop("rounds")
    strategy = uf.UldpStrategy(**arguments)
    result = strategy.start(grid, ArrayRecord([uldp.flat_parameters(net).numpy()]), num_rounds=rounds)
    return result.arrays.to_numpy_ndarrays()[0], strategy, grid


@pytest.mark.parametrize("method", ["ULDP-AVG-w", "ULDP-AVG"])
def test_the_flower_federation_ends_at_the_in_process_model(hospital_files, method):
    net = model()
    settings = dict(method=method, sigma=1.0, q=0.8, local_epochs=2, batch_size=8, seed=5, rounds=2)
    flower, strategy, _ = flower_run(hospital_files, net, insecure_reproducible_noise=True, **settings)
    trained, history = in_process(hospital_files, net, **settings)
    np.testing.assert_array_equal(flower, uldp.flat_parameters(trained).numpy())
    assert strategy.epsilons == history.column("epsilon")
    noisy, _, _ = flower_run(hospital_files, net, **settings)  # the silos' own CSPRNG: other noise
    assert not np.array_equal(noisy, flower)


TEST_KEYS = {"key_bits": 1024, "n_max": 300, "insecure_test_key": True}
ALLOW_TEST_KEYS = {"uldp-insecure-test-keys": "true"}


def exact_counts(files: pathlib.Path) -> np.ndarray:
    """n[s, u] from the files (silos and users in sorted order of names and pseudonyms), not through uldp.flower."""
    parts = [pd.read_csv(files / f"{h}.csv") for h in sorted(HOSPITALS)]
    key = uf.read_key_file(files / "key")
    per_silo = [pd.Series(uf.pseudonymize(part["patient"], key)).value_counts() for part in parts]
    users = sorted(set().union(*(set(c.index) for c in per_silo)))
    return np.array([[int(c.get(u, 0)) for u in users] for c in per_silo])


def test_protocol_1_in_flower_is_within_p_of_the_plain_weighted_aggregation(hospital_files, monkeypatch):
    """Set-up and every round's weighting through Protocol 1 as Flower messages: each decoded aggregate is within
    P = 1e-10 of sum_s (sum_u n_su / N_u delta_su + z_s) computed in float64 from what the silos put in (Theorem 4),
    and the model is the plain federation's to float32 rounding. Each silo keeps only its own n_su and its secrets
    as SiloState bytes in its context state."""
    from uldp.secure import ProtocolConfig, protocol

    inputs, sampled_rounds, decoded = [], [], []
    masked_update, start_round, finish_round = (protocol.Silo.masked_update, protocol.Server.start_round,
                                                protocol.Server.finish_round)

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
    settings: dict[str, Any] = {"method": "ULDP-AVG-w", "sigma": 1.0, "q": 0.8, "local_epochs": 2, "batch_size": 8,
                                "seed": 5, "rounds": 2}
    secure, strategy, grid = flower_run(hospital_files, net, ALLOW_TEST_KEYS, secure=True, protocol=TEST_KEYS,
                                        insecure_reproducible_noise=True, **settings)
    counts = exact_counts(hospital_files)
    assert strategy.n_users == counts.shape[1] and len(decoded) == len(sampled_rounds) == 2
    for t in range(2):
        weights = np.where(sampled_rounds[t], counts / counts.sum(axis=0), 0.0)
        exact = sum(weights[s] @ deltas + noise for s, deltas, noise in sorted(inputs[3 * t:3 * t + 3],
                                                                               key=lambda item: item[0]))
        assert np.max(np.abs(decoded[t] - exact)) <= 1e-10
    plain, plain_strategy, _ = flower_run(hospital_files, net, insecure_reproducible_noise=True, **settings)
    np.testing.assert_allclose(secure, plain, rtol=1e-5, atol=1e-6)
    assert not np.array_equal(secure, plain)  # the protocol's float64 sum, not the silos' float32 updates
    assert strategy.epsilons == plain_strategy.epsilons
    for context in grid.contexts.values():
        s = context.state.config_records["uldp"]["index"]  # silos are numbered in sorted order of their names
        assert isinstance(s, int)
        held = context.state.array_records["uldp_arrays"].to_numpy_ndarrays()[0]
        np.testing.assert_array_equal(held[s], counts[s])
        assert not np.delete(held, s, axis=0).any()  # no other silo's n_su
        state = context.state.config_records["uldp_protocol_1"]["silo"]
        assert isinstance(state, bytes)
        assert strategy.hp.clip is not None
        config = ProtocolConfig.for_training(3, strategy.n_users, clip=strategy.hp.clip, sigma=1.0,
                                             parameters=strategy.protocol)
        assert state.startswith(b"ULDP") and protocol.Silo.restore(state, config).silo_id == s


def test_protocol_1_test_keys_need_the_silos_consent_and_ulpd_avg_needs_no_protocol(hospital_files):
    net = model()
    with pytest.raises(RuntimeError, match="insecure test key"):
        flower_run(hospital_files, net, secure=True, protocol=TEST_KEYS, sigma=1.0, local_epochs=1, rounds=1)
    with pytest.raises(ValueError, match="ULDP-AVG-w"):
        uf.UldpStrategy(method="ULDP-AVG", sigma=1.0, secure=True)
    with pytest.raises(ValueError, match="at least 2048"):
        uf.UldpStrategy(sigma=1.0, secure=True, protocol={"key_bits": 1024})


def test_silos_refuse_less_noise_than_their_floor(hospital_files):
    from flwr.app import ArrayRecord

    app = uf.silo_client_app(load, model, nn.CrossEntropyLoss())
    grid = LocalGrid(app, [{"silo": h, "uldp-key-file": str(hospital_files / "key"),
                            "data": str(hospital_files / f"{h}.csv"), "uldp-min-sigma": 2.0} for h in HOSPITALS])
    strategy = uf.UldpStrategy(sigma=1.0, local_epochs=1)
    with pytest.raises(RuntimeError, match="below this silo's floor"):
        strategy.start(grid, ArrayRecord([uldp.flat_parameters(model()).numpy()]), num_rounds=1)


def test_pseudonyms_are_hmac_sha256_of_the_id_under_the_silo_key():
    import hashlib
    import hmac

    key = bytes(range(32))
    assert uf.pseudonymize(["P-7", 12], key) == [hmac.new(key, b"P-7", hashlib.sha256).hexdigest(),
                                                 hmac.new(key, b"12", hashlib.sha256).hexdigest()]
    assert uf.pseudonymize(["P-7"], key) != uf.pseudonymize(["P-7"], bytes(32))
    with pytest.raises(ValueError, match="at least 32 random bytes"):
        uf.pseudonymize(["P-7"], b"short")


def test_sealed_histograms_open_only_under_the_key_and_for_the_silo_they_name():
    key = uf.new_silo_key()
    names = np.array(uf.pseudonymize(["a", "b"], key))
    sealed = seal_histogram(names, np.array([3, 1]), key, silo="Royal")
    opened = open_histogram(sealed, key, silo="Royal")
    assert opened[0] == list(names) and opened[1].tolist() == [3, 1]
    for other_key, silo, data in ((uf.new_silo_key(), "Royal", sealed), (key, "General", sealed),
                                  (key, "Royal", sealed[:-1] + bytes([sealed[-1] ^ 1]))):
        with pytest.raises(ValueError, match="does not open"):
            open_histogram(data, other_key, silo=silo)


def test_key_files_are_private_and_never_overwritten(tmp_path):
    key = uf.write_key_file(tmp_path / "key")
    assert uf.read_key_file(tmp_path / "key") == key
    assert os.stat(tmp_path / "key").st_mode & 0o077 == 0
    with pytest.raises(ValueError, match="exists already"):
        uf.write_key_file(tmp_path / "key")


#: The initial model is checked before the grid is used: these calls fail before any message.
NO_GRID: Any = None


def test_start_takes_the_model_or_its_state_dict_and_returns_a_model(hospital_files):
    """Issue 33: start needed a flat vector; a state_dict surfaced at a hospital as a size mismatch."""
    from flwr.app import ArrayRecord

    net = model()
    settings: dict[str, Any] = dict(sigma=1.0, local_epochs=1, batch_size=8, seed=5, insecure_reproducible_noise=True)
    finals = []
    for initial in (net, net.state_dict(), ArrayRecord(net.state_dict())):
        app = uf.silo_client_app(load, model, nn.CrossEntropyLoss())
        grid = LocalGrid(app, [{"silo": h, "uldp-key-file": str(hospital_files / "key"),
                                "data": str(hospital_files / f"{h}.csv")} for h in HOSPITALS])
        strategy = uf.UldpStrategy(model=model(), **settings)
        result = strategy.start(grid, initial, num_rounds=1)
        finals.append(uldp.flat_parameters(strategy.trained_model(result)).numpy())
    flat, _, _ = flower_run(hospital_files, net, rounds=1, **settings)
    for final in finals:
        np.testing.assert_array_equal(final, flat)
    strategy = uf.UldpStrategy(model=model(), **settings)
    with pytest.raises(ValueError, match=r"missing \['2.bias', '2.weight'\]"):
        strategy.start(NO_GRID, {k: v for k, v in net.state_dict().items() if not k.startswith("2.")})
    with pytest.raises(ValueError, match="needs the architecture"):
        uf.UldpStrategy(**settings).start(NO_GRID, net.state_dict())
    with pytest.raises(ValueError, match="flat vector of 26 parameters"):
        strategy.start(NO_GRID, ArrayRecord([np.zeros(30, np.float32)]))


def test_a_silo_error_names_the_hospital_not_the_flower_node(hospital_files):
    def bad_load(context) -> uf.SiloData:
        data = load(context)
        if context.node_config["silo"] == "St Mary":
            return uf.SiloData(data.x, np.array(["x"] * len(data.x)), data.patient_ids)
        return data

    from flwr.app import ArrayRecord

    app = uf.silo_client_app(bad_load, model, nn.CrossEntropyLoss())
    grid = LocalGrid(app, [{"silo": h, "uldp-key-file": str(hospital_files / "key"),
                            "data": str(hospital_files / f"{h}.csv")} for h in HOSPITALS])
    with pytest.raises(RuntimeError, match=r"silo 'St Mary' failed: ValueError: y must be numeric"):
        uf.UldpStrategy(sigma=1.0).start(grid, ArrayRecord([uldp.flat_parameters(model()).numpy()]), num_rounds=1)


def test_without_flower_the_import_says_what_to_install():
    import subprocess
    import sys

    blocked = ("import sys, importlib.abc\n"
               "class Block(importlib.abc.MetaPathFinder):\n"
               "    def find_spec(self, name, path=None, target=None):\n"
               "        if name == 'flwr' or name.startswith('flwr.'):\n"
               "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
               "sys.meta_path.insert(0, Block())\n"
               "import uldp.flower\n")
    done = subprocess.run([sys.executable, "-c", blocked], capture_output=True, text=True)
    assert done.returncode == 1 and "pip install 'uldp[deploy]'" in done.stderr
