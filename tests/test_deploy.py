"""``uldp deploy``'s inputs, hostile or broken: the settings file (:class:`uldp.deploy.config.DeployConfig`), the
checkpoint and array files the strategy resumes from and the silos exchange (:mod:`uldp.common.persist`), and the
command lines (every number bounded, every failure one line). The runs themselves: tests/test_deploy_app.py (in
process) and tests/test_deploy_flower.py (real processes); hostile parties on Flower: tests/test_flower_hostile.py."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from uldp.common import persist
from uldp.deploy.config import DeployConfig


# --- the settings file ---------------------------------------------------------------------------------------------
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
    # the union's group: the default is left out (earlier fingerprints stay), another is a run of its own
    assert DeployConfig.from_json({**config.to_json(), "psu_group": "modp2048"}) == config
    stronger = DeployConfig.from_json({**config.to_json(), "psu_group": "modp3072"})
    assert stronger.psu_group == "modp3072" and stronger.to_json()["psu_group"] == "modp3072"
    assert DeployConfig.from_json(stronger.to_json()) == stronger
    assert stronger.fingerprint != config.fingerprint
    assert DeployConfig.from_json({**config.to_json(), "min_colluders": 0}) == config
    wary = DeployConfig.from_json({**config.to_json(), "min_colluders": 1})
    assert wary.min_colluders == 1 and wary.fingerprint != config.fingerprint
    with pytest.raises(ValueError, match=r"unknown run configuration field\(s\) \['rehearsal'\]"):
        DeployConfig.from_json({"rehearsal": {}})
    with pytest.raises(ValueError, match="'protocol' must be an object with fields among"):
        DeployConfig.from_json({**config.to_json(), "protocol": {"bits": 512}})
    with pytest.raises(ValueError, match="n_users"):
        DeployConfig.from_json({"dataset": "synthetic", "method": "DEFAULT", "rounds": 1})


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
        (
            {"psu_group": "modp1024"},
            r"union group must be one of \['insecure-test-256', 'modp2048'",
        ),
        ({"min_colluders": -1}, "min_colluders must be an integer"),
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


def test_a_huge_n_max_is_refused_at_once() -> None:
    """Protocol 1's N_max is checked when the settings are read: a huge one would take hours to check."""
    with pytest.raises(ValueError, match="n_max"):
        DeployConfig.from_json(
            {
                "dataset": "synthetic",
                "method": "ULDP-AVG",
                "n_users": 8,
                "rounds": 1,
                "protocol": {"n_max": 10**6},
            }
        )


def test_cli_reports_a_bad_config_in_one_line(tmp_path, capsys) -> None:
    from uldp.deploy.cli import main

    path = tmp_path / "run.json"
    path.write_text(
        json.dumps({"dataset": "synthetic", "method": "FEDPROX", "n_users": 3, "rounds": 1})
    )
    assert main(["server", "--config", str(path)]) == 2
    error = capsys.readouterr().err
    assert "unknown method 'FEDPROX'" in error and error.count("\n") == 1, error


def test_registering_the_deploy_command_imports_nothing_heavy() -> None:
    """``uldp deploy --help`` must not pay for torch, Flower or the methods (they load inside the handlers)."""
    code = (
        "import argparse, sys; import uldp.deploy.cli as cli; cli.register(argparse.ArgumentParser()"
        ".add_subparsers()); print(sorted(m for m in ('torch', 'flwr', 'numpy', 'uldp.simulation', "
        "'uldp.secure') if m in sys.modules))"
    )
    output = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert output.strip() == "[]"


# --- hostile files: the strategy's checkpoint (uldp.common.persist.ReleaseLedger) and arrays ----------------------
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
        (["deploy", "server", "--config", "{config}", "--join-timeout", "inf"], "--join-timeout"),
        (["deploy", "server", "--config", "{config}", "--checkpoint", "{tmp}"], "is a directory"),
        (
            ["deploy", "server", "--config", "{config}", "--master-key-file", "{short_key}"],
            "belonged to the earlier runtime",
        ),
        (
            [
                *("deploy", "silo", "--config", "{config}", "--silo-id", "0"),
                *("--relay-key", "{keys}/relay.key", "--max-wait", "inf"),
            ],
            "--max-wait",
        ),
        (["deploy", "keys", "--silos", "2", "--out", "{keys}"], "--force"),
    ],
)
def test_bad_command_line_numbers_and_paths_are_one_line_errors(
    argv, detail, tmp_path, capsys
) -> None:
    """Refused before any work (no training, no allocation of terabytes, no SuperLink), as one line and exit status
    2."""
    from uldp.cli import main as uldp_main
    from uldp.deploy.cli import main as deploy_main
    from uldp.deploy.credentials import write_keys

    def main(arguments: list[str]) -> int:
        return deploy_main(arguments[1:]) if arguments[0] == "deploy" else uldp_main(arguments)

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
