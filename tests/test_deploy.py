"""Tests of uldp.deploy: byte formats, checkpoints, keys, the methods' roles, and real federations of separate
processes on localhost checked against the in-process simulation."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from uldp.common import persist
from uldp.deploy import keys, wire
from uldp.deploy.method_roles import DeployConfig, MethodServer, MethodSilo

os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")
DATA = os.environ.get("ULDP_DATA_DIR") or str(
    Path(__file__).resolve().parents[2] / "shared" / "data"
)
needs_creditcard = pytest.mark.skipif(
    not os.path.isdir(os.path.join(DATA, "creditcard")), reason="Creditcard files not available"
)


# --- byte formats ---------------------------------------------------------------------------------------------
def test_instruction_survives_flowers_own_protobuf_serialisation() -> None:
    """What the server builds, after Flower's wire encoding and decoding, is what the silo parses (bytes exact)."""
    from flwr.common import serde
    from flwr.proto.transport_pb2 import ServerMessage

    payloads = (bytes(range(256)), b"", persist.array_to_bytes(np.linspace(0, 1, 7)))
    sent = wire.Instruction(wire.STAGE_TRAIN, 3, {"nonce": b"\x00\xff", "reason": "x"}, payloads)
    proto = ServerMessage(fit_ins=serde.fit_ins_to_proto(sent.to_flower()))
    received = ServerMessage.FromString(proto.SerializeToString())
    parsed = wire.Instruction.from_flower(serde.fit_ins_from_proto(received.fit_ins))
    assert parsed == sent


def test_reply_carries_errors() -> None:
    reply = wire.Reply.from_flower(wire.Reply(error="boom").to_flower())
    assert reply.error == "boom" and reply.payloads == ()


# --- keys ------------------------------------------------------------------------------------------------------
def test_keys_files_are_private_and_match_an_independent_hmac(tmp_path) -> None:
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.hmac import HMAC

    paths = keys.write_keys(tmp_path, n_silos=3)
    assert [p.name for p in paths] == ["master.key", "silo-0.key", "silo-1.key", "silo-2.key"]
    master = bytes.fromhex(paths[0].read_text())
    for silo_id, path in enumerate(paths[1:]):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        mac = HMAC(master, hashes.SHA256())
        mac.update(b"uldp-silo-key" + silo_id.to_bytes(8, "little"))
        assert bytes.fromhex(path.read_text()) == mac.finalize()
    with pytest.raises(ValueError, match="16 bytes"):
        keys.silo_key(b"short", 0)


# --- configuration and CLI ---------------------------------------------------------------------------------------
def test_deploy_config_reads_a_run_config_and_refuses_unknown_fields() -> None:
    config = DeployConfig.from_json(
        {"dataset": "synthetic", "method": "ULDP-GROUP-4", "n_users": 5, "rounds": 2}
    )
    assert config.run.method == "ULDP-GROUP-4" and config.protocol.key_bits == 3072
    assert DeployConfig.from_json(config.to_json()) == config
    # the fingerprint covers the resolved values: an explicit default is the same configuration, another value is not
    explicit = DeployConfig.from_json({**config.to_json(), "clip": config.run.clip})
    assert explicit.fingerprint == config.fingerprint
    assert DeployConfig.from_json({**config.to_json(), "seed": 1}).fingerprint != config.fingerprint
    with pytest.raises(ValueError, match=r"unknown run configuration field\(s\) \['rehearsal'\]"):
        DeployConfig.from_json({"rehearsal": {}})
    with pytest.raises(ValueError, match="'protocol' must be an object with fields among"):
        DeployConfig.from_json({**config.to_json(), "protocol": {"bits": 512}})
    with pytest.raises(ValueError, match="n_users"):
        DeployConfig.from_json({"dataset": "synthetic", "method": "DEFAULT", "rounds": 1})


def test_cli_reports_a_bad_config_in_one_line(tmp_path, capsys) -> None:
    from uldp.deploy.legacy_cli import main

    path = tmp_path / "run.json"
    path.write_text(
        json.dumps({"dataset": "synthetic", "method": "FEDPROX", "n_users": 3, "rounds": 1})
    )
    assert main(["silo", "--config", str(path), "--silo-id", "0"]) == 2
    assert "unknown method 'FEDPROX'" in capsys.readouterr().err


def test_registering_the_deploy_command_imports_nothing_heavy() -> None:
    """``uldp deploy --help`` must not pay for torch, Flower or the methods (they load inside the handlers)."""
    code = (
        "import argparse, sys; import uldp.deploy.legacy_cli as cli; cli.register(argparse.ArgumentParser()"
        ".add_subparsers()); print(sorted(m for m in ('torch', 'flwr', 'numpy', 'uldp.simulation', "
        "'uldp.secure') if m in sys.modules))"
    )
    output = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert output.strip() == "[]"


# --- the methods' roles, in one process ----------------------------------------------------------------------------
def _simulated(config, dataset, monkeypatch, **options):
    """``uldp.simulation.run`` and the final global model it evaluated (spied on: RunResult holds metrics only)."""
    from uldp import simulation
    from uldp.simulation import run

    seen = {}
    load = simulation.load_flat_parameters

    def spy(model, flat):
        seen["params"] = flat.detach().clone().numpy()
        load(model, flat)

    monkeypatch.setattr(simulation, "load_flat_parameters", spy)
    result = run(config, dataset=dataset, **options)
    monkeypatch.setattr(simulation, "load_flat_parameters", load)
    return seen["params"], result


@pytest.fixture(scope="module")
def creditcard():
    from uldp.data import load

    return load("creditcard", DATA)


@needs_creditcard
@pytest.mark.parametrize(
    "method",
    [
        "DEFAULT",
        "ULDP-NAIVE",
        "ULDP-GROUP-2",
        "ULDP-GROUP-median",
        "ULDP-SGD",
        "ULDP-SGD-w",
        "ULDP-AVG",
        "ULDP-AVG-w",
    ],
)
def test_server_and_silo_roles_compute_the_simulation(method, creditcard, monkeypatch) -> None:
    """Server role + one role per silo (each holding only its own records) give run()'s model, metrics, epsilon."""
    from uldp.simulation import RunConfig

    run = RunConfig(
        dataset="creditcard",
        method=method,
        n_users=6,
        n_silos=3,
        rounds=2,
        seed=3,
        local_epochs=1,
        max_train_records=150,
        q=0.6 if method.startswith(("ULDP-SGD", "ULDP-AVG")) else 1.0,
    )
    expected, result = _simulated(run, creditcard, monkeypatch)
    config = DeployConfig(
        run, insecure_reproducible_noise=True
    )  # the simulation's draws (tests only)
    server = MethodServer(config, creditcard)
    silos = [MethodSilo(config, silo_id, creditcard) for silo_id in range(3)]
    for silo in silos:
        assert set(silo.federation.allocation.silo.tolist()) == {silo.silo_id}
        assert silo.federation.x.shape[0] == silo.n_records == silo.counts_row.sum()
    assert (
        sum(silo.n_records for silo in silos) == result.info["train_records"]
    )  # after GROUP's flags
    params, history = server.initial_params(), []
    for round_index in (1, 2):
        sampled = server.sampled_users(round_index)
        contributions = [silo.contribution(params, round_index, sampled) for silo in silos]
        params = server.combine(params, contributions, round_index)
        history.append(server.evaluate(params, round_index))
    np.testing.assert_allclose(params, expected, rtol=0, atol=1e-6)
    assert [h["loss"] for h in history] == pytest.approx(result.test_loss, abs=1e-5)
    assert [h["epsilon"] for h in history] == result.epsilon


# --- real processes on localhost: a server and 3 silos, ULDP-AVG-w with Protocol 1 --------------------------------
# Creditcard (an MLP of 5,012 parameters), 20 users over 3 silos, 200 training records, one local epoch, user sampling
# q = 0.7, Protocol 1 with 512-bit test keys (N_max = 40 bounds every user's records here), and the INSECURE shared-seed
# noise, so that the deployed model can be compared with the in-process one draw for draw.
RUN = {
    "dataset": "creditcard",
    "method": "ULDP-AVG-w",
    "n_users": 20,
    "n_silos": 3,
    "rounds": 2,
    "seed": 5,
    "q": 0.7,
    "local_epochs": 1,
    "max_train_records": 200,
    "secure": True,
    "protocol": {"key_bits": 512, "insecure_test_key": True, "n_max": 40},
    "insecure_reproducible_noise": True,
}


@pytest.fixture(scope="module")
def secure_reference(creditcard):
    """The in-process run of RUN (plain aggregation: Protocol 1 matches it to within P per round)."""
    from uldp.methods import aggregate

    config = DeployConfig.from_json(RUN)
    with pytest.MonkeyPatch.context() as monkeypatch:
        params, result = _simulated(config.run, creditcard, monkeypatch, aggregate_fn=aggregate)
    return config, params, result


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _uldp(
    *args: str, command: tuple[str, ...] = ("-m", "uldp.deploy.legacy_cli")
) -> subprocess.Popen:
    env = {**os.environ, "FLWR_TELEMETRY_ENABLED": "0", "ULDP_DATA_DIR": DATA}
    return subprocess.Popen(
        [sys.executable, *command, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def _server(port: int, config, *extra: str) -> subprocess.Popen:
    return _uldp(
        "server",
        "--config",
        str(config),
        "--address",
        f"127.0.0.1:{port}",
        "--join-timeout",
        "180",
        "--round-timeout",
        "120",
        "--json",
        "--quiet",
        *extra,
    )


def _silo(
    port: int, config, silo_id: int, *extra: str, crash_at: int | None = None
) -> subprocess.Popen:
    """A silo process; with ``crash_at`` one that exits abruptly on that round (tests/crashing_silo.py)."""
    crashing = (str(Path(__file__).with_name("crashing_silo.py")), str(crash_at))
    return _uldp(
        "silo",
        "--config",
        str(config),
        "--server",
        f"127.0.0.1:{port}",
        "--silo-id",
        str(silo_id),
        "--max-wait",
        "120",
        "--json",
        "--quiet",
        *extra,
        command=("-m", "uldp.deploy.legacy_cli") if crash_at is None else crashing,
    )


def _finish(process: subprocess.Popen, timeout: float = 300.0) -> tuple[int, dict, str]:
    stdout, stderr = process.communicate(timeout=timeout)
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    return process.returncode, json.loads(lines[-1]) if lines else {}, stderr


def _config_file(tmp_path, data: dict, name: str = "run.json"):
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


@needs_creditcard
def test_three_silo_processes_with_protocol_1_compute_the_in_process_run(
    tmp_path, secure_reference
) -> None:
    """The required check: a server and 3 silo processes run 2 secure rounds of ULDP-AVG-w over Flower; the final
    model is the in-process simulation's (Protocol 1 is within P = 1e-10 of the plain sum, float32 model)."""
    config, expected, result = secure_reference
    port, path, ckpt = _free_port(), _config_file(tmp_path, RUN), tmp_path / "model.ckpt"
    server = _server(port, path, "--checkpoint", str(ckpt))
    silos = [_silo(port, path, silo_id) for silo_id in range(3)]
    code, finished, stderr = _finish(server)
    assert code == 0 and finished["rounds_done"] == 2 and finished["error"] == "", stderr[-3000:]
    assert finished["insecure_reproducible_noise"] and "INSECURE" in stderr
    for silo_id, silo in enumerate(silos):
        code, answer, stderr = _finish(silo)
        assert code == 0 and answer["silo_id"] == silo_id, stderr[-2000:]
    final = persist.load_checkpoint(ckpt, config_fingerprint=config.fingerprint)
    assert final is not None
    assert final.params.dtype == np.float32 and final.rounds_done == 2
    np.testing.assert_allclose(final.params, expected, rtol=0, atol=1e-6)
    assert not np.array_equal(final.params, MethodServer(config).initial_params())  # it trained
    assert [r["loss"] for r in finished["history"]] == pytest.approx(result.test_loss, abs=1e-5)
    assert [r["epsilon"] for r in finished["history"]] == result.epsilon


@needs_creditcard
def test_a_dying_silo_aborts_the_round_impostors_are_refused_and_a_restart_resumes(
    tmp_path, secure_reference
) -> None:
    """Silo 2 crashes in round 2: the server aborts it, keeps round 1's model and counts round 2 as a release. The
    silos still up wait for a server (--max-wait) and give up; the restarted server (now with keys) refuses a silo
    with another silo's key and one with another configuration, admits the right silos and continues at round 3
    (round 2 is never asked again): its epsilon history counts 3 releases."""
    config, _, result = secure_reference
    port, path, ckpt = _free_port(), _config_file(tmp_path, RUN), tmp_path / "model.ckpt"
    server = _server(port, path, "--checkpoint", str(ckpt))
    silos = [
        _silo(port, path, s, "--max-wait", "5", crash_at=2 if s == 2 else None) for s in range(3)
    ]
    code, aborted, stderr = _finish(server)
    assert code == 1 and aborted["rounds_done"] == 1 and aborted["last_round"] == 2, stderr[-3000:]
    assert "round 2 aborted" in aborted["error"] and "silo 2 dropped out" in aborted["error"]
    assert _finish(silos[2])[0] == 17  # the simulated crash
    for silo in silos[:2]:
        code, _, stderr = _finish(silo)
        assert code == 1 and "(--max-wait 5 s" in stderr and "last round seen: 2" in stderr, stderr[
            -2000:
        ]
    checkpoint = persist.load_checkpoint(ckpt, config_fingerprint=config.fingerprint)
    assert (
        checkpoint is not None
        and checkpoint.rounds_done == 2
        and "aborted" in checkpoint.history[1]
    )
    round_1 = checkpoint.params

    paths = keys.write_keys(tmp_path / "keys", n_silos=3)
    other = _config_file(tmp_path, {**RUN, "seed": 6}, "other.json")
    server = _server(port, path, "--checkpoint", str(ckpt), "--master-key-file", str(paths[0]))
    good = _silo(port, path, 0, "--key-file", str(paths[1]))
    wrong_key = _silo(port, path, 1, "--key-file", str(paths[3]))  # silo 2's key, claimed by silo 1
    wrong_config = _silo(port, other, 2, "--key-file", str(paths[3]))
    code, _, stderr = _finish(wrong_key)
    assert code == 2 and "refused" in stderr and "failed authentication" in stderr
    code, _, stderr = _finish(wrong_config)
    assert code == 2 and "runs another configuration" in stderr
    late = [_silo(port, path, s, "--key-file", str(paths[s + 1])) for s in (1, 2)]
    code, resumed, stderr = _finish(server)
    assert code == 0 and resumed["resumed_from"] == 2 and resumed["rounds_done"] == 2, stderr[
        -3000:
    ]
    assert resumed["last_round"] == 3 and [r["round"] for r in resumed["history"]] == [1, 2, 3]
    epsilons = [r["epsilon"] for r in resumed["history"]]
    assert (
        epsilons[:2] == result.epsilon and epsilons[2] > epsilons[1]
    )  # 3 releases for 2 model updates
    assert len(resumed["refused"]) == 2
    assert all(_finish(silo)[0] == 0 for silo in [good, *late])
    final = persist.load_checkpoint(ckpt, config_fingerprint=config.fingerprint)
    assert final is not None and final.rounds_done == 3
    assert np.isfinite(final.params).all() and not np.array_equal(final.params, round_1)
