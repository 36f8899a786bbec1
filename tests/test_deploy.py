"""Tests of uldp.deploy: byte formats, checkpoints, keys, and real federations of separate processes on localhost."""

from __future__ import annotations

import os
import stat
from dataclasses import asdict

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from uldp.deploy import checkpoint, keys, wire
from uldp.deploy.rehearsal import RehearsalConfig, rehearsal_oracle

os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")


# --- byte formats ----------------------------------------------------------------------------------------------
@settings(max_examples=25)
@given(
    hnp.arrays(
        dtype=st.sampled_from([np.float32, np.float64, np.int64, np.bool_]),
        shape=hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=5),
    )
)
def test_array_bytes_round_trip_keeps_dtype_shape_and_bits(values: np.ndarray) -> None:
    restored = wire.array_from_bytes(wire.array_to_bytes(values))
    assert restored.dtype == values.dtype and restored.shape == values.shape
    assert restored.tobytes() == values.tobytes()  # bit-exact, NaNs included


def test_array_bytes_reject_corruption_truncation_and_other_dtypes() -> None:
    data = bytearray(wire.array_to_bytes(np.arange(4.0)))
    data[20] ^= 1
    with pytest.raises(ValueError, match="digest"):
        wire.array_from_bytes(bytes(data))
    with pytest.raises(ValueError, match="malformed"):
        wire.array_from_bytes(wire.array_to_bytes(np.arange(4.0))[:-40])
    with pytest.raises(ValueError, match="dtype"):
        wire.array_to_bytes(np.arange(3, dtype=np.int16))


def test_big_endian_arrays_are_written_little_endian() -> None:
    values = np.arange(5, dtype=">f8")
    assert np.array_equal(wire.array_from_bytes(wire.array_to_bytes(values)), values)


def test_instruction_survives_flowers_own_protobuf_serialisation() -> None:
    """What the server builds, after Flower's wire encoding and decoding, is what the silo parses (bytes exact)."""
    from flwr.common import serde
    from flwr.proto.transport_pb2 import ServerMessage

    payloads = (bytes(range(256)), b"", wire.array_to_bytes(np.linspace(0, 1, 7)))
    sent = wire.Instruction(wire.STAGE_TRAIN, 3, {"nonce": b"\x00\xff", "reason": "x"}, payloads)
    proto = ServerMessage(fit_ins=serde.fit_ins_to_proto(sent.to_flower()))
    received = ServerMessage.FromString(proto.SerializeToString())
    parsed = wire.Instruction.from_flower(serde.fit_ins_from_proto(received.fit_ins))
    assert parsed == sent


def test_reply_carries_errors() -> None:
    reply = wire.Reply.from_flower(wire.Reply(error="boom").to_flower())
    assert reply.error == "boom" and reply.payloads == ()


def test_fingerprint_changes_with_any_field() -> None:
    base = {"dataset": "heart_disease", "rounds": 2, "sigma": 1.0}
    assert wire.fingerprint(base) == wire.fingerprint(dict(reversed(list(base.items()))))
    for key, value in (("rounds", 3), ("sigma", 1.0000001), ("dataset", "tcga_brca")):
        assert wire.fingerprint({**base, key: value}) != wire.fingerprint(base)


# --- checkpoints -----------------------------------------------------------------------------------------------
def _checkpoint(rounds: int = 2) -> checkpoint.Checkpoint:
    return checkpoint.Checkpoint(rounds, np.arange(6, dtype=np.float32) / 7, "f" * 64, ({"round": 1},))


def test_checkpoint_round_trip(tmp_path) -> None:
    path = tmp_path / "run" / "model.ckpt"
    assert checkpoint.load_checkpoint(path, config_fingerprint="f" * 64) is None
    checkpoint.save_checkpoint(path, _checkpoint())
    loaded = checkpoint.load_checkpoint(path, config_fingerprint="f" * 64)
    assert loaded.rounds_done == 2 and loaded.history == ({"round": 1},)
    assert loaded.params.dtype == np.float32 and np.array_equal(loaded.params, _checkpoint().params)


def test_checkpoint_refuses_corruption_and_other_configurations(tmp_path) -> None:
    path = tmp_path / "model.ckpt"
    checkpoint.save_checkpoint(path, _checkpoint())
    with pytest.raises(ValueError, match="another configuration"):
        checkpoint.load_checkpoint(path, config_fingerprint="0" * 64)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="corrupted"):
        checkpoint.load_checkpoint(path, config_fingerprint="f" * 64)


def test_a_crash_while_writing_keeps_the_previous_checkpoint(tmp_path, monkeypatch) -> None:
    path = tmp_path / "model.ckpt"
    checkpoint.save_checkpoint(path, _checkpoint(1))

    def crash(*_args: object) -> None:
        raise OSError("power cut")

    monkeypatch.setattr(checkpoint.os, "replace", crash)
    with pytest.raises(OSError, match="power cut"):
        checkpoint.save_checkpoint(path, _checkpoint(2))
    monkeypatch.undo()
    assert checkpoint.load_checkpoint(path, config_fingerprint="f" * 64).rounds_done == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.ckpt"]  # no temporary file left behind


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


# --- real processes on localhost ---------------------------------------------------------------------------------
# The rehearsal method (uldp.deploy.rehearsal) drives the real CLI, Flower transport, Protocol 1 with 512-bit test
# keys, the faults and the resume. Its result has a slow exact oracle: per round, the plain weighted sum
# sum_s sum_u (n_su / N_u) delta_su over sampled users, accumulated user by user below.
REHEARSAL = RehearsalConfig(n_silos=3, n_users=4, dimension=5, rounds=3, seed=3, q=0.7, key_bits=512,
                            insecure_test_key=True)


def slow_oracle(config: RehearsalConfig) -> np.ndarray:
    params, counts = np.zeros(config.dimension), config.counts
    for round_index in range(1, config.rounds + 1):
        step = np.zeros(config.dimension)
        for silo in range(config.n_silos):
            deltas = config.deltas(silo, params, round_index)
            for user in np.flatnonzero(config.sampled(round_index)):
                step += counts[silo, user] / counts[:, user].sum() * deltas[user]
        params = params + step
    return params


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _uldp(*args: str):
    import subprocess
    import sys

    env = {**os.environ, "FLWR_TELEMETRY_ENABLED": "0"}
    return subprocess.Popen([sys.executable, "-m", "uldp.deploy.cli", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)


def _server(port: int, config, *extra: str):
    return _uldp("server", "--config", str(config), "--address", f"127.0.0.1:{port}", "--join-timeout", "60",
                 "--round-timeout", "30", "--json", "--quiet", *extra)


def _silo(port: int, config, silo_id: int, *extra: str):
    return _uldp("silo", "--config", str(config), "--server", f"127.0.0.1:{port}", "--silo-id", str(silo_id),
                 "--max-wait", "30", "--json", "--quiet", *extra)


def _finish(process, timeout: float = 90.0) -> tuple[int, dict, str]:
    import json

    stdout, stderr = process.communicate(timeout=timeout)
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    return process.returncode, json.loads(lines[-1]) if lines else {}, stderr


def _config_file(tmp_path, config: RehearsalConfig, name: str = "run.json"):
    import json

    path = tmp_path / name
    path.write_text(json.dumps({"rehearsal": asdict(config)}))
    return path


def test_rehearsal_oracles_agree() -> None:
    np.testing.assert_allclose(rehearsal_oracle(REHEARSAL), slow_oracle(REHEARSAL), rtol=1e-12, atol=1e-12)
    assert 0 < REHEARSAL.sampled(1).sum() < REHEARSAL.n_users or 0 < REHEARSAL.sampled(2).sum() < REHEARSAL.n_users


def test_federation_with_protocol_1_dies_mid_round_and_resumes(tmp_path) -> None:
    """A server and 3 silo processes: a crash in round 2 aborts it and keeps round 1's checkpoint; a restarted
    federation resumes from it and ends at the oracle (to within P = 1e-10 per round)."""
    port, config, ckpt = _free_port(), _config_file(tmp_path, REHEARSAL), tmp_path / "model.ckpt"
    server = _server(port, config, "--checkpoint", str(ckpt))
    silos = [_silo(port, config, s, *(["--exit-at-round", "2"] if s == 2 else [])) for s in range(3)]
    code, aborted, stderr = _finish(server)
    assert code == 1 and aborted["rounds_done"] == 1, stderr[-2000:]
    assert "round 2 aborted" in aborted["error"] and "silo 2 dropped out" in aborted["error"]
    assert "round 2 aborted" in stderr
    assert _finish(silos[2])[0] == 17  # the simulated crash
    for silo in silos[:2]:
        code, _, stderr = _finish(silo)
        assert code == 1 and "ended the federation early" in stderr
    fingerprint = wire.fingerprint({"rehearsal": asdict(REHEARSAL)})
    assert checkpoint.load_checkpoint(ckpt, config_fingerprint=fingerprint).rounds_done == 1

    server = _server(port, config, "--checkpoint", str(ckpt))
    silos = [_silo(port, config, s) for s in range(3)]
    code, resumed, stderr = _finish(server)
    assert code == 0 and resumed["resumed_from"] == 1 and resumed["rounds_done"] == REHEARSAL.rounds, stderr[-2000:]
    final = checkpoint.load_checkpoint(ckpt, config_fingerprint=fingerprint)
    np.testing.assert_allclose(final.params, slow_oracle(REHEARSAL), rtol=0, atol=REHEARSAL.rounds * 1e-10 * 10)
    assert all(_finish(silo)[0] == 0 for silo in silos)


def test_server_refuses_a_wrong_key_and_a_wrong_config_then_admits_the_right_silos(tmp_path) -> None:
    from dataclasses import replace

    port, config = _free_port(), _config_file(tmp_path, replace(REHEARSAL, rounds=1))
    other = _config_file(tmp_path, replace(REHEARSAL, rounds=1, seed=4), "other.json")
    paths = keys.write_keys(tmp_path / "keys", n_silos=3)
    server = _server(port, config, "--master-key-file", str(paths[0]))
    good = _silo(port, config, 0, "--key-file", str(paths[1]))
    wrong_key = _silo(port, config, 1, "--key-file", str(paths[3]))  # silo 2's key, claimed by silo 1
    wrong_config = _silo(port, other, 2, "--key-file", str(paths[3]))
    code, _, stderr = _finish(wrong_key)
    assert code == 2 and "refused" in stderr and "failed authentication" in stderr
    code, _, stderr = _finish(wrong_config)
    assert code == 2 and "runs another configuration" in stderr
    late = [_silo(port, config, s, "--key-file", str(paths[s + 1])) for s in (1, 2)]
    code, finished, stderr = _finish(server)
    assert code == 0 and finished["rounds_done"] == 1 and len(finished["refused"]) == 2, stderr[-2000:]
    assert all(_finish(silo)[0] == 0 for silo in [good, *late])
