"""A hostile or broken party against the deployed server (uldp.deploy.server.Coordinator), in one process.

Each silo is the real silo client (:func:`uldp.deploy.silo._make_client`) behind a stand-in for Flower's client
proxy, which can rewrite what the silo answers. The server must refuse a bad handshake without hanging, let idle
connections block no one, and abort the round (naming the silo and what it sent) on any malformed message, with
nothing applied or saved. Issue 25, items 2-7.
"""

from __future__ import annotations

import dataclasses
import os
import threading
from pathlib import Path

import numpy as np
import pytest
from deploy_harness import MASTER, Manager, Proxy, federation, make_config, silo_clients

from uldp.common import persist
from uldp.deploy import keys, wire
from uldp.deploy.method_roles import DeployConfig, MethodServer, MethodSilo
from uldp.deploy.server import Coordinator, FederationResult, ServerSettings
from uldp.deploy.silo import SiloSettings, _make_client

os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")


@pytest.fixture(scope="module")
def synthetic():
    from uldp.data import load

    return load("synthetic")


class IdleProxy:
    """A connection that never answers the handshake (it waits at most ``limit`` s, then times out)."""

    def __init__(self, admitted: threading.Event, limit: float = 10.0) -> None:
        self.admitted, self.limit = admitted, limit
        self.saw_admission: bool | None = None

    def get_properties(self, ins, timeout, group_id):
        self.saw_admission = self.admitted.wait(min(timeout, self.limit))
        raise TimeoutError("no answer")

    def fit(self, ins, timeout, group_id):
        raise TimeoutError("no answer")

    reconnect = fit


@pytest.mark.parametrize("silo_id", [True, False, 2**70, "0", None, -1, 1.0])
def test_a_bad_silo_id_is_refused_and_the_real_silos_still_run(silo_id, synthetic) -> None:
    """A stranger answering the handshake with a bool (True is an int to Python), huge, negative or non-integer id
    is refused; the three real silos are admitted and the federation completes."""
    client = _make_client(
        MethodSilo(make_config(False), 0, synthetic), SiloSettings(key=keys.silo_key(MASTER, 0))
    )
    stranger = Proxy(client, hello={"silo_id": silo_id})
    result = federation(synthetic, extra=[stranger]).run()
    assert result.error == "" and result.rounds_done == 2
    assert len(result.refused) == 1 and "silo id must be an integer" in result.refused[0]


def test_idle_connections_block_no_one(synthetic) -> None:
    """Four connections that never answer come first: the real silos are admitted while they are still pending
    (handshakes run concurrently, each bounded), and the federation completes."""
    admitted = threading.Event()
    idle = [IdleProxy(admitted) for _ in range(4)]
    coordinator = federation(synthetic, extra=idle)
    coordinator.admit()
    admitted.set()
    assert sorted(coordinator.silos) == [0, 1, 2]
    for proxy in idle:
        while proxy.saw_admission is None:
            threading.Event().wait(0.05)
    assert all(
        proxy.saw_admission for proxy in idle
    )  # every idle handshake was still waiting when all were admitted


@pytest.mark.parametrize(
    "settings, message",
    [
        (dict(master_key=b"1234"), "at least 16 bytes"),
        (dict(master_key="00" * 32), "at least 16 bytes"),
        (dict(join_timeout=float("nan")), "--join-timeout"),
        (dict(round_timeout=float("inf")), "--round-timeout"),
        (dict(join_timeout=-1.0), "--join-timeout"),
        (dict(handshake_timeout=0.0), "--handshake-timeout"),
    ],
)
def test_server_settings_are_checked_at_start(settings, message) -> None:
    with pytest.raises(ValueError, match=message):
        ServerSettings(**settings)


def test_an_unwritable_checkpoint_is_refused_at_start(tmp_path) -> None:
    with pytest.raises(ValueError, match="is a directory"):
        ServerSettings(checkpoint=tmp_path)
    if os.path.isdir("/proc"):  # a pseudo file system: no permission bit says so, even to root
        with pytest.raises(ValueError, match="cannot be written"):
            ServerSettings(checkpoint=Path("/proc/uldp/model.ckpt"))


def _contribution(values):
    def tamper(instruction, reply):
        if instruction.stage == wire.STAGE_TRAIN:
            return dataclasses.replace(reply, payloads=values(reply))
        return None

    return tamper


def _first(reply):
    return persist.array_from_bytes(reply.payloads[0])


PLAIN = {
    "NaN": (
        _contribution(lambda r: (persist.array_to_bytes(_first(r) * np.nan),)),
        "NaN or infinite",
    ),
    "inf": (
        _contribution(lambda r: (persist.array_to_bytes(_first(r) + np.inf),)),
        "NaN or infinite",
    ),
    "shape (1,)": (
        _contribution(lambda r: (persist.array_to_bytes(_first(r)[:1]),)),
        "the model is float32",
    ),
    "shape ()": (
        _contribution(lambda r: (persist.array_to_bytes(np.array(1.0, np.float32)),)),
        "the model is float32",
    ),
    "2-d": (
        _contribution(lambda r: (persist.array_to_bytes(_first(r)[None, :]),)),
        "the model is float32",
    ),
    "float64": (
        _contribution(lambda r: (persist.array_to_bytes(_first(r).astype(np.float64)),)),
        "float64",
    ),
    "no payload": (_contribution(lambda r: ()), "0 payloads"),
    "two payloads": (_contribution(lambda r: r.payloads * 2), "2 payloads"),
    "garbage": (_contribution(lambda r: (b"\x00" * 40,)), "malformed array"),
    "too many dimensions": (_contribution(lambda r: (_forged_dimensions(),)), "dimensions"),
    "seconds": (
        lambda i, r: dataclasses.replace(r, values={**r.values, "seconds": "soon"}),
        "seconds='soon'",
    ),
    "seconds nan": (
        lambda i, r: dataclasses.replace(r, values={**r.values, "seconds": float("nan")}),
        "seconds=nan",
    ),
}


def _forged_dimensions() -> bytes:
    import hashlib

    body = persist.ARRAY_MAGIC + bytes([1, 200]) + b"\x00" * 16
    return body + hashlib.sha256(body).digest()


@pytest.mark.parametrize("case", sorted(PLAIN))
def test_a_malformed_contribution_aborts_the_round_naming_the_silo(
    case, synthetic, tmp_path
) -> None:
    """Nothing is applied: the server stops with an error naming silo 1 and what it sent, and the checkpoint keeps
    the initial model with round 1 accounted as an aborted release (the honest silos' answers were released)."""
    tamper, detail = PLAIN[case]
    checkpoint = tmp_path / "model.ckpt"
    settings = ServerSettings(
        master_key=MASTER, join_timeout=60, round_timeout=60, checkpoint=checkpoint
    )
    coordinator = federation(synthetic, tamper=tamper, settings=settings)
    result = coordinator.run()
    assert result.rounds_done == 0 and result.last_round == 1
    assert (
        result.error.startswith("round 1 aborted: round 1: silo 1 sent") and detail in result.error
    ), result.error
    saved = persist.load_checkpoint(checkpoint, config_fingerprint=coordinator.role.fingerprint)
    assert (
        saved is not None and saved.rounds_done == 1 and saved.history[0]["aborted"] in result.error
    )
    np.testing.assert_array_equal(saved.params, coordinator.role.initial_params())


def _rewrite(stage, kind_name, change):
    """A tamper that rewrites every Protocol 1 message of kind ``kind_name`` in a stage's reply with
    ``change(message, n)`` (and leaves the others, such as the ring-Pedersen parameters beside the DH key)."""
    from uldp.secure import messages

    seen = {}

    def tamper(instruction, reply):
        if instruction.stage == wire.STAGE_SECURE_KEYS:
            seen["n"] = messages.PublicKeyMessage.from_bytes(instruction.payloads[0]).modulus
        if instruction.stage != stage:
            return None
        kind = getattr(messages, kind_name)
        parsed = [messages.parse_message(p) for p in reply.payloads]
        changed = [
            change(m, seen["n"]).to_bytes() if isinstance(m, kind) else m.to_bytes() for m in parsed
        ]
        return dataclasses.replace(reply, payloads=tuple(changed))

    return tamper


SECURE = {
    "DH key claiming silo 0": (
        1,
        _rewrite(
            wire.STAGE_SECURE_KEYS,
            "DhPublicKeyMessage",
            lambda m, n: dataclasses.replace(m, silo=0),
        ),
        "claims to come from silo 0",
    ),
    "seed sealed to silo 7": (
        0,
        _rewrite(
            wire.STAGE_SECURE_DIRECTORY,
            "SealedMessage",
            lambda m, n: dataclasses.replace(m, recipient=7),
        ),
        "addressed to silo 7",
    ),
    "histogram value n": (
        1,
        _rewrite(
            wire.STAGE_SECURE_SEED,
            "BlindedHistogramMessage",
            lambda m, n: dataclasses.replace(m, values=(n, *m.values[1:])),
        ),
        "out of range",
    ),
    "histogram too short": (
        1,
        _rewrite(
            wire.STAGE_SECURE_SEED,
            "BlindedHistogramMessage",
            lambda m, n: dataclasses.replace(m, values=m.values[1:]),
        ),
        "expected 8",
    ),
    "histogram of silo 2": (
        1,
        _rewrite(
            wire.STAGE_SECURE_SEED,
            "BlindedHistogramMessage",
            lambda m, n: dataclasses.replace(m, silo=2),
        ),
        "claims to come from silo 2",
    ),
    "share from silo 0": (
        1,
        _rewrite(wire.STAGE_TRAIN, "SealedMessage", lambda m, n: dataclasses.replace(m, sender=0)),
        "claims to come from silo 0",
    ),
    "ciphertext 0": (
        1,
        _rewrite(
            wire.STAGE_SECURE_UPDATE,
            "MaskedUpdateMessage",
            lambda m, n: dataclasses.replace(m, ciphertexts=(0, *m.ciphertexts[1:])),
        ),
        "not in Z*_(n^2)",
    ),
    "ciphertext n": (
        1,
        _rewrite(
            wire.STAGE_SECURE_UPDATE,
            "MaskedUpdateMessage",
            lambda m, n: dataclasses.replace(m, ciphertexts=(n, *m.ciphertexts[1:])),
        ),
        "not in Z*_(n^2)",
    ),
    "ciphertext n^2": (
        1,
        _rewrite(
            wire.STAGE_SECURE_UPDATE,
            "MaskedUpdateMessage",
            lambda m, n: dataclasses.replace(m, ciphertexts=(n * n, *m.ciphertexts[1:])),
        ),
        "out of range",
    ),
    "update too short": (
        1,
        _rewrite(
            wire.STAGE_SECURE_UPDATE,
            "MaskedUpdateMessage",
            lambda m, n: dataclasses.replace(m, ciphertexts=m.ciphertexts[1:]),
        ),
        "expected 16",
    ),
    "update of silo 0": (
        1,
        _rewrite(
            wire.STAGE_SECURE_UPDATE,
            "MaskedUpdateMessage",
            lambda m, n: dataclasses.replace(m, silo=0),
        ),
        "claims to come from silo 0",
    ),
}


@pytest.mark.parametrize("case", sorted(SECURE))
def test_a_malformed_protocol_message_aborts_naming_the_silo_that_sent_it(case, synthetic) -> None:
    """Protocol 1 (512-bit test keys): a message claiming another silo, addressed to no silo, or with values out of
    range (a ciphertext outside Z*_{n^2}) stops the server with the sender named, before anything is decrypted."""
    victim, tamper, detail = SECURE[case]
    result = federation(synthetic, secure=True, tamper=tamper, victim=victim).run()
    assert result.rounds_done == 0
    assert f"silo {victim} sent a bad" in result.error and detail in result.error, result.error


# --- hostile files: checkpoints, wire arrays, keys, configurations -----------------------------------------------
def _forged_checkpoint(path, header: bytes, params: np.ndarray | None = None) -> None:
    """A checkpoint file with a valid digest around any header (what an attacker with write access could make);
    ``params`` defaults to three float32 zeros."""
    import hashlib
    import struct

    if params is None:
        params = np.zeros(3, np.float32)

    body = persist.MAGIC + struct.pack("<I", len(header)) + header + persist.array_to_bytes(params)
    path.write_bytes(body + hashlib.sha256(body).digest())


@pytest.mark.parametrize(
    "header, detail",
    [
        (b'{"rounds_done": -5, "config_fingerprint": "f", "history": []}', "rounds_done"),
        (b'{"rounds_done": true, "config_fingerprint": "f", "history": []}', "rounds_done"),
        (b'{"rounds_done": 1, "config_fingerprint": "f", "history": "abc"}', "history"),
        (b'{"rounds_done": 2, "config_fingerprint": "f", "history": [{}]}', "history"),
        (b'{"rounds_done": 0, "config_fingerprint": 7, "history": []}', "config_fingerprint"),
        (b'{"rounds_done": 0, "history": []}', "must hold"),
        (b"[1, 2]", "must hold"),
        (b'{"rounds_done": 0', "malformed"),
        (b"\xff\xfe", "malformed"),
        (b"[" * 100_000, "malformed"),
    ],
)
def test_a_malformed_checkpoint_header_is_a_value_error(header, detail, tmp_path) -> None:
    path = tmp_path / "model.ckpt"
    _forged_checkpoint(path, header)
    with pytest.raises(ValueError, match=detail):
        persist.load_checkpoint(path, config_fingerprint="f")


def test_a_checkpoint_of_another_model_or_not_finite_is_refused(tmp_path) -> None:
    path, header = (
        tmp_path / "model.ckpt",
        b'{"rounds_done": 0, "config_fingerprint": "f", "history": []}',
    )
    like = np.zeros(3, np.float32)
    cases: list[tuple[np.ndarray, str]] = [
        (np.zeros(3, np.float64), "float64"),
        (np.zeros(4, np.float32), r"\(4,\)"),
        (np.array([0, np.nan, 0], np.float32), "NaN"),
    ]
    for params, detail in cases:
        _forged_checkpoint(path, header, params)
        with pytest.raises(ValueError, match=detail):
            persist.load_checkpoint(path, config_fingerprint="f", like=like)
    _forged_checkpoint(path, header, like)
    checkpoint = persist.load_checkpoint(path, config_fingerprint="f", like=like)
    assert checkpoint is not None and checkpoint.rounds_done == 0


def test_leftover_temporary_files_are_cleaned_on_the_next_start(tmp_path) -> None:
    """A writer killed between creating and renaming its temporary file leaves it; the next load deletes those of
    this checkpoint only."""
    path = tmp_path / "model.ckpt"
    leftovers = [tmp_path / f".model.ckpt.{i:016x}.tmp" for i in range(3)]
    for leftover in leftovers:
        leftover.write_bytes(b"x" * 100)
    other = tmp_path / ".other.ckpt.0000000000000000.tmp"
    other.write_bytes(b"x")
    assert persist.load_checkpoint(path, config_fingerprint="f") is None
    assert not any(leftover.exists() for leftover in leftovers) and other.exists()


@pytest.mark.parametrize("ndim", [1, 2, 33, 200, 255])
def test_an_array_claiming_more_dimensions_than_it_has_bytes_is_a_value_error(ndim) -> None:
    import hashlib

    body = persist.ARRAY_MAGIC + bytes([1, ndim]) + b"\x01" * 8
    with pytest.raises(ValueError, match="malformed array"):
        persist.array_from_bytes(body + hashlib.sha256(body).digest())


def test_deploy_keys_refuses_to_overwrite_without_force(tmp_path) -> None:
    first = keys.write_keys(tmp_path, n_silos=2)
    master = first[0].read_bytes()
    with pytest.raises(ValueError, match="--force"):
        keys.write_keys(tmp_path, n_silos=2)
    assert first[0].read_bytes() == master
    assert (
        keys.write_keys(tmp_path, n_silos=2, force=True) == first
        and first[0].read_bytes() != master
    )
    with pytest.raises(ValueError, match="--silos"):
        keys.write_keys(tmp_path / "many", n_silos=10**6)


@pytest.mark.parametrize(
    "change, detail",
    [
        (
            {"protocol": {"insecure_test_key": "no", "key_bits": 512}},
            "insecure_test_key must be true or false",
        ),
        ({"protocol": {"key_bits": 512}}, "insecure"),
        ({"protocol": {"key_bits": 4096, "precision": 0.0}}, "precision"),
        ({"protocol": {"n_max": True}}, "n_max"),
        ({"protocol": {"n_max": 0}}, "n_max"),
        ({"protocol": []}, "'protocol' must be an object"),
        (
            {"insecure_reproducible_noise": "yes"},
            "insecure_reproducible_noise must be true or false",
        ),
        ({"user_weights": "abc"}, "user_weights must be a list of lists"),
        ({"user_weights": [[1, 2], 3]}, "user_weights must be a list of lists"),
        ({"n_users": "8"}, "n_users"),
        ({"rounds": None}, "rounds"),
    ],
)
def test_a_deployment_configuration_is_checked_completely(change, detail) -> None:
    base = {"dataset": "synthetic", "method": "ULDP-AVG-w", "n_users": 8, "rounds": 1}
    with pytest.raises(ValueError, match=detail):
        DeployConfig.from_json({**base, **change})


def test_user_weights_and_protocol_are_checked_before_admission(synthetic) -> None:
    """Weights for 2 silos in a federation of 3 are refused when the role is built, not after every silo has joined;
    so are Protocol 1's parameters (here N_max below a user's records: Theorem 4's no-wrap-around condition)."""
    base = {
        "dataset": "synthetic",
        "method": "ULDP-AVG",
        "n_users": 8,
        "rounds": 1,
        "max_train_records": 120,
    }
    config = DeployConfig.from_json({**base, "user_weights": [[0.5] * 8, [0.5] * 8]})
    with pytest.raises(ValueError, match=r"shape \(3, 8\)"):
        MethodServer(config, synthetic)
    config = DeployConfig.from_json(
        {
            **base,
            "method": "ULDP-AVG-w",
            "secure": True,
            "protocol": {"key_bits": 256, "insecure_test_key": True, "n_max": 200},
        }
    )  # lcm(1..200) has 288 bits
    with pytest.raises(ValueError, match="key"):
        MethodServer(config, synthetic)
    with pytest.raises(
        ValueError, match="n_max"
    ):  # refused at once: a huge N_max would take hours to check
        DeployConfig.from_json({**base, "protocol": {"n_max": 10**6}})


# --- command lines: every number bounded, every failure one line ----------------------------------------------------
@pytest.mark.parametrize(
    "argv, detail",
    [
        (
            [
                "epsilon",
                "--method",
                "ULDP-AVG-w",
                "--sigma",
                "1e308",
                "--rounds",
                "10",
                "--delta",
                "1e-5",
            ],
            "--sigma",
        ),
        (
            [
                "epsilon",
                "--method",
                "ULDP-AVG-w",
                "--sigma",
                "1e-300",
                "--rounds",
                "10",
                "--delta",
                "1e-5",
                "--q",
                "0.1",
            ],
            "--sigma",
        ),
        (
            [
                "group-epsilon",
                "--sigma",
                "1e308",
                "--q",
                "0.1",
                "--steps",
                "10",
                "--delta",
                "1e-5",
                "--k",
                "2",
            ],
            "--sigma",
        ),
        (
            [
                "run",
                "--dataset",
                "synthetic",
                "--method",
                "ULDP-AVG-w",
                "--users",
                "1000000000000",
                "--rounds",
                "1",
                "--seed",
                "0",
            ],
            "n_users must be an integer in 1..1000000",
        ),
        (
            [
                "run",
                "--dataset",
                "synthetic",
                "--method",
                "ULDP-AVG-w",
                "--users",
                "5",
                "--silos",
                "1000000",
                "--rounds",
                "1",
                "--seed",
                "0",
            ],
            "n_silos must be an integer in 1..1000",
        ),
        (
            [
                "allocate",
                "--dataset",
                "synthetic",
                "--users",
                "10000000000",
                "--dist",
                "uniform",
                "--seed",
                "0",
            ],
            "n_users must be an integer in 1..1000000",
        ),
        (
            [
                "run",
                "--dataset",
                "synthetic",
                "--method",
                "ULDP-AVG-w",
                "--users",
                "5",
                "--rounds",
                "1",
                "--seed",
                "0",
                "--checkpoint",
                "{tmp}",
            ],
            "is a directory",
        ),
        (["deploy", "server", "--config", "{config}", "--join-timeout", "nan"], "--join-timeout"),
        (["deploy", "server", "--config", "{config}", "--checkpoint", "{tmp}"], "is a directory"),
        (
            ["deploy", "server", "--config", "{config}", "--master-key-file", "{short_key}"],
            "at least 16 bytes",
        ),
        (
            ["deploy", "silo", "--config", "{config}", "--silo-id", "0", "--max-wait", "inf"],
            "--max-wait",
        ),
        (["deploy", "keys", "--silos", "2", "--out", "{keys}"], "--force"),
    ],
)
def test_bad_command_line_numbers_and_paths_are_one_line_errors(
    argv, detail, tmp_path, capsys
) -> None:
    """Refused before any work (no training, no allocation of terabytes), as one line and exit status 2 (``deploy``:
    the earlier runtime's command line, ``python -m uldp.deploy.legacy_cli``)."""
    from uldp.cli import main as uldp_main
    from uldp.deploy.keys import write_keys
    from uldp.deploy.legacy_cli import main as legacy_main

    def main(arguments: list[str]) -> int:
        return legacy_main(arguments[1:]) if arguments[0] == "deploy" else uldp_main(arguments)

    config, short_key = tmp_path / "run.json", tmp_path / "short.key"
    config.write_text('{"dataset": "synthetic", "method": "ULDP-AVG-w", "n_users": 8, "rounds": 1}')
    short_key.write_text("00112233\n")
    write_keys(tmp_path / "keys", n_silos=2)
    places = {
        "tmp": str(tmp_path),
        "config": str(config),
        "short_key": str(short_key),
        "keys": str(tmp_path / "keys"),
    }
    assert main([arg.format(**places) for arg in argv]) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and ": error: " in error[0] and detail in error[0], error


def test_a_silo_without_a_server_or_data_reports_one_line(tmp_path, capsys, monkeypatch) -> None:
    from uldp.deploy.legacy_cli import main

    config = tmp_path / "run.json"
    config.write_text(
        '{"dataset": "synthetic", "method": "ULDP-AVG-w", "n_users": 8, "rounds": 1, '
        '"max_train_records": 120}'
    )
    assert (
        main(
            [
                "silo",
                "--config",
                str(config),
                "--silo-id",
                "0",
                "--server",
                "127.0.0.1:1",
                "--max-wait",
                "1",
                "--quiet",
            ]
        )
        == 1
    )
    error = capsys.readouterr().err
    assert (
        "no server at 127.0.0.1:1 for 1 s (--max-wait 1 s; UNAVAILABLE; no round seen yet)" in error
    )
    monkeypatch.delenv("ULDP_DATA_DIR", raising=False)
    config.write_text(
        '{"dataset": "creditcard", "method": "ULDP-AVG-w", "n_users": 8, "rounds": 1}'
    )
    assert main(["silo", "--config", str(config), "--silo-id", "0"]) == 2
    assert "cannot load dataset 'creditcard': no data directory" in capsys.readouterr().err


# --- issue 30: the silos enforce their own policy; the server bounds what it applies -----------------------------
def _train_instruction(server: MethodServer, round_index: int) -> wire.Instruction:
    params, sampled = server.initial_params(), server.sampled_users(round_index)
    return wire.Instruction(
        wire.STAGE_TRAIN,
        round_index,
        payloads=(persist.array_to_bytes(params), persist.array_to_bytes(sampled)),
    )


def test_a_replayed_round_is_refused_even_by_a_restarted_silo(synthetic, tmp_path) -> None:
    """Attack 2, plain path: a deploy silo asked for round 1 twice answered twice (the second answer minus the first
    was its clean update's difference, max 0 with reproducible noise). Now the second request is refused, naming the
    round, and a silo restarted on the same ledger file refuses it too; nothing is computed for it."""
    config = make_config(False)
    server = MethodServer(config, synthetic)
    ledger = tmp_path / "silo-0.ledger.json"
    client = _make_client(MethodSilo(config, 0, synthetic), SiloSettings(ledger=ledger))
    first = wire.Reply.from_flower(client.fit(_train_instruction(server, 1).to_flower()))
    assert not first.error and len(first.payloads) == 1
    restarted = _make_client(MethodSilo(config, 0, synthetic), SiloSettings(ledger=ledger))
    for silo in (client, restarted):
        again = wire.Reply.from_flower(silo.fit(_train_instruction(server, 1).to_flower()))
        assert "PolicyRefusal: round 1 is not after round 1" in again.error and not again.payloads
    assert not wire.Reply.from_flower(
        restarted.fit(_train_instruction(server, 2).to_flower())
    ).error


def test_a_one_user_sample_and_too_little_noise_are_refused_by_the_silos(
    synthetic, monkeypatch
) -> None:
    """Attack 5 in deploy: a round that samples one user was answered; a silo whose policy asks for more noise
    than the run's sigma (5) took part anyway. Both are refused by name; a DEFAULT run (no noise) too."""
    from uldp.policy import PolicyRefusal, SiloPolicy

    coordinator = federation(synthetic)
    one = np.zeros(coordinator.role.n_users, dtype=bool)
    one[0] = True
    monkeypatch.setattr(coordinator.role, "sampled_users", lambda round_index: one)
    result = coordinator.run()
    assert result.rounds_done == 0
    assert (
        "failed: PolicyRefusal: a round that samples 1 user(s) is below this silo's min_sampled_users 2"
        in result.error
    )
    with pytest.raises(PolicyRefusal, match=r"sigma=5\.0 is below this silo's min_sigma 10"):
        federation(synthetic, silo=lambda s: {"policy": SiloPolicy(min_sigma=10.0)})
    from uldp.simulation import RunConfig

    plain = DeployConfig(
        RunConfig(
            dataset="synthetic",
            method="DEFAULT",
            n_users=8,
            rounds=1,
            seed=3,
            max_train_records=120,
            local_epochs=1,
        )
    )
    with pytest.raises(PolicyRefusal, match="method DEFAULT adds no noise"):
        _make_client(MethodSilo(plain, 0, synthetic), SiloSettings())


def test_a_huge_contribution_aborts_the_round_naming_the_silo(synthetic) -> None:
    """Attack 6, plain path: a finite 1e30-scaled contribution moved the parameters by 5.6e29. Now it is past the
    bound clip * sum_u w_su + noise tail, and the round aborts naming silo 1, with nothing applied."""
    tamper = _contribution(lambda r: (persist.array_to_bytes(_first(r) * np.float32(1e30)),))
    result = federation(synthetic, tamper=tamper).run()
    assert result.rounds_done == 0
    assert (
        "silo 1 sent a contribution of norm" in result.error and "past the bound" in result.error
    ), result.error


def test_a_homomorphically_inflated_masked_update_aborts_the_round(synthetic) -> None:
    """Attack 6, Protocol 1: a silo multiplying its masked update by Enc(1.4e4) (the protocol's bound is ~12) had it
    applied. Now the decoded aggregate is checked against the silos' bound and the round aborts (the masks hide
    which silo; nothing is applied)."""
    from uldp.secure import encoding, messages

    protocol = MethodServer(make_config(True), synthetic).protocol_config()
    seen = {}

    def inflate(instruction, reply):
        if instruction.stage == wire.STAGE_SECURE_KEYS:
            seen["n"] = messages.PublicKeyMessage.from_bytes(instruction.payloads[0]).modulus
        if instruction.stage != wire.STAGE_SECURE_UPDATE:
            return None
        n = seen["n"]
        update = messages.MaskedUpdateMessage.from_bytes(reply.payloads[0])
        extra = (
            int(encoding.encode(np.array([1.4e4]), resolution_bits=protocol.resolution_bits)[0])
            * protocol.c_lcm
        )
        first = update.ciphertexts[0] * (1 + n * (extra % n)) % (n * n)
        changed = dataclasses.replace(update, ciphertexts=(first, *update.ciphertexts[1:]))
        return dataclasses.replace(reply, payloads=(changed.to_bytes(),))

    result = federation(synthetic, secure=True, tamper=inflate).run()
    assert result.rounds_done == 0 and "the securely aggregated sum has norm" in result.error, (
        result.error
    )


def test_the_history_reports_the_servers_view_beside_the_model(synthetic) -> None:
    """Attack 4 in deploy: a plain ULDP-AVG-w run reports the epsilon of what the server saw (each silo's update,
    weight up to 1) beside the model's; with Protocol 1 they are equal. A JSON configuration of ULDP-AVG-w is secure
    unless it says "secure": false."""
    from uldp.accounting import epsilon_server_view

    plain = federation(synthetic).run()
    assert plain.error == "" and all(r["server_view_epsilon"] > r["epsilon"] for r in plain.history)
    expected = epsilon_server_view(sigma=5.0, rounds=2, delta=1e-5, n_silos=3, q=1.0)
    assert plain.history[-1]["server_view_epsilon"] <= expected.epsilon * (1 + 1e-9)
    secure = federation(synthetic, secure=True).run()
    assert secure.error == "" and all(
        r["server_view_epsilon"] == r["epsilon"] for r in secure.history
    )
    minimal = {"dataset": "synthetic", "method": "ULDP-AVG-w", "n_users": 4, "rounds": 1}
    assert DeployConfig.from_json(minimal).run.secure
    assert not DeployConfig.from_json({**minimal, "secure": False}).run.secure


def _uldp_avg(synthetic, **fields) -> tuple[FederationResult, dict]:
    """A ULDP-AVG deployment (3 real silo clients, shared-seed test noise) whose server keeps every train answer."""
    config = DeployConfig.from_json(
        {
            "dataset": "synthetic",
            "method": "ULDP-AVG",
            "n_users": 8,
            "rounds": 2,
            "seed": 3,
            "max_train_records": 120,
            "local_epochs": 1,
            "insecure_reproducible_noise": True,
            **fields,
        }
    )
    received: dict = {}

    def keep(instruction, reply):
        if instruction.stage == wire.STAGE_TRAIN:
            received.setdefault(instruction.round_index, []).append(reply.payloads)

    proxies = [Proxy(client, keep) for client in silo_clients(synthetic, config)]
    settings = ServerSettings(master_key=MASTER, join_timeout=60, round_timeout=60)
    return Coordinator(MethodServer(config, synthetic), settings, Manager(proxies)).run(), received


def test_a_default_uldp_avg_deployment_sends_only_masked_contributions(synthetic):
    """Item 5 in deploy: ULDP-AVG is secure by default (the masked sum); every train answer the server gets is one
    MaskedSumMessage, and the model is the explicit secure=false run's to float32 rounding, with the same epsilon
    for the model and the server's view."""
    from uldp.secure.messages import MaskedSumMessage

    masked, received = _uldp_avg(synthetic)
    plain, plain_received = _uldp_avg(synthetic, secure=False)
    assert not masked.error and not plain.error, (masked.error, plain.error)
    for payloads in (p for answers in received.values() for p in answers):
        assert (
            len(payloads) == 1
            and MaskedSumMessage.from_bytes(payloads[0]).parameters == masked.params.size
        )
    assert all(
        len(p) == 1 and not p[0].startswith(b"ULDP") for a in plain_received.values() for p in a
    )
    np.testing.assert_allclose(masked.params, plain.params, rtol=1e-5, atol=1e-6)
    for row in masked.history + plain.history:
        assert row["server_view_epsilon"] == row["epsilon"]
