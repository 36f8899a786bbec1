"""uldp.cli: every sub-command with ``--json`` writes exactly one JSON document (inputs and outputs) to stdout.

Each command runs on tiny inputs and its whole stdout is parsed with ``json.loads`` (not its last line): a progress
line, a table or a log line on stdout fails the test. ``deploy server`` runs as its own process, with its SuperLink
(tests/test_deploy_flower.py).
"""

import argparse
import json
import os
from pathlib import Path

import pytest

from uldp.cli import build_parser, main

DATA = os.environ.get("ULDP_DATA_DIR", str(Path(__file__).resolve().parents[2] / "shared" / "data"))
needs_data = pytest.mark.skipif(
    not (Path(DATA) / "heart_disease").exists(), reason="HeartDisease data not found"
)

#: Every in-process ``--json`` command on tiny inputs (``deploy server`` is run by tests/test_deploy_flower.py).
COMMANDS = {
    "epsilon": [
        "epsilon",
        "--method",
        "ULDP-AVG-w",
        "--sigma",
        "5",
        "--rounds",
        "10",
        "--q",
        "0.5",
        "--delta",
        "1e-5",
    ],
    "group-epsilon": [
        "group-epsilon",
        "--sigma",
        "5",
        "--q",
        "0.01",
        "--steps",
        "100",
        "--delta",
        "1e-5",
        "--k",
        "1",
        "2",
    ],
    "allocate": [
        "allocate",
        "--dataset",
        "synthetic",
        "--users",
        "5",
        "--dist",
        "zipf-noniid",
        "--seed",
        "0",
    ],
    "run": [
        "run",
        "--dataset",
        "synthetic",
        "--method",
        "ULDP-AVG-w",
        "--users",
        "6",
        "--rounds",
        "2",
        "--local-epochs",
        "1",
        "--seed",
        "0",
    ],
    "grid": ["grid", "list"],
}
#: Run as a real process (a SuperLink) by tests/test_deploy_flower.py, its whole stdout one document; ``deploy
#: silo`` runs until stopped and prints none.
DEPLOY_ROLES = ("deploy server",)
#: Run on files of their own by tests/test_secure_cli.py.
ROSTER_COMMANDS = ("roster identity", "roster add", "roster show")


def json_commands(parser: argparse.ArgumentParser, prefix: str = "") -> set[str]:
    """The names of every (nested) sub-command of ``parser`` that takes ``--json``."""
    found = set()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found |= json_commands(sub, f"{prefix}{name} ")
        elif "--json" in action.option_strings:
            found.add(prefix.strip())
    return found


def run_json(argv: list[str], capsys) -> tuple[dict, str]:
    """Run ``uldp ARGV --json`` in process; return the parsed stdout (whole) and stderr."""
    assert main([*argv, "--json"]) == 0
    captured = capsys.readouterr()
    return json.loads(captured.out), captured.err


def test_every_json_command_is_tested():
    assert json_commands(build_parser()) == set(COMMANDS) | set(DEPLOY_ROLES) | set(ROSTER_COMMANDS)


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_json_is_one_document_with_the_inputs(name, capsys):
    argv = COMMANDS[name]
    document, stderr = run_json(argv, capsys)
    assert document["command"] == name
    inputs = document["inputs"]
    options = {arg.removeprefix("--").replace("-", "_") for arg in argv if arg.startswith("--")}
    assert options <= set(inputs), f"inputs lack {options - set(inputs)}"
    assert (
        "%|" not in stderr
    )  # no progress bar when stderr is not a terminal and --progress is not given


def test_json_values_are_the_computed_outputs(capsys):
    from uldp.accounting import epsilon_uldp

    document, _ = run_json(COMMANDS["epsilon"], capsys)
    assert (
        document["inputs"] | {"sigma": 5.0, "rounds": 10, "q": 0.5, "delta": 1e-5}
        == document["inputs"]
    )
    assert document["epsilon"] == pytest.approx(
        epsilon_uldp(sigma=5, rounds=10, q=0.5, delta=1e-5).epsilon
    )
    document, _ = run_json(COMMANDS["run"], capsys)
    assert document["config"]["n_users"] == 6 and len(document["rounds"]) == 2
    document, _ = run_json(COMMANDS["group-epsilon"], capsys)
    assert [row["k"] for row in document["rows"]] == [1, 2]


def test_grid_dry_run_and_run_write_one_document(tmp_path, capsys):
    common = [
        "grid",
        "heart_disease",
        "--profile",
        "smoke",
        "--root",
        str(tmp_path),
        "--methods",
        "ULDP-SGD",
        "--seeds",
        "0",
    ]
    planned, _ = run_json([*common, "--dry-run"], capsys)
    assert (
        planned["inputs"]["dry_run"] is True
        and planned["pending"] == len(planned["pending_runs"]) >= 1
    )
    if not (Path(DATA) / "heart_disease").exists():
        pytest.skip("HeartDisease data not found")
    os.environ.setdefault("ULDP_DATA_DIR", DATA)
    report, _ = run_json(common, capsys)
    assert report["executed"] == planned["pending"] and not report["failed"]


def test_progress_goes_to_stderr_when_asked(capsys):
    document, stderr = run_json([*COMMANDS["run"], "--progress"], capsys)
    assert document["inputs"]["rounds"] == 2 and "round" in stderr


def test_the_human_table_goes_to_stdout_without_json(capsys):
    assert main(COMMANDS["run"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[:2] for line in lines] == [["round", "1"], ["round", "2"]]


# --------------------------------------------------------------------------------- one set of defaults


def subparser(name: str) -> argparse.ArgumentParser:
    """The parser of sub-command ``name``."""
    for action in build_parser()._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action.choices[name]
    raise AssertionError("uldp has no sub-commands")


def optional_defaults(parser: argparse.ArgumentParser) -> dict[str, object]:
    """``dest -> default`` of the optional, non-required options of ``parser`` (help excluded)."""
    return {
        action.dest: action.default
        for action in parser._actions
        if action.option_strings and not action.required and action.dest != "help"
    }


#: `uldp run` options and the RunConfig field each one sets; the other options are not part of the configuration.
RUN_OPTION_FIELDS = {
    "silos": "n_silos",
    "dist": "distribution",
    "n_labels": "n_labels",
    "local_epochs": "local_epochs",
    "global_lr": "global_lr",
    "local_lr": "local_lr",
    "clip": "clip",
    "sigma": "sigma",
    "q": "q",
    "secure": "secure",
    "test_scoring": "test_scoring",
    "accountant": "accountant",
    "epsilon": "epsilon",
    "device": "device",
    "precision": "precision",
}
RUN_OTHER_OPTIONS = {"k", "data_dir", "checkpoint", "json", "progress", "threads", "backend"}


def test_run_defaults_are_runconfigs():
    from dataclasses import fields

    from uldp.simulation import RunConfig

    config_defaults = {field.name: field.default for field in fields(RunConfig)}
    defaults = optional_defaults(subparser("run"))
    assert set(defaults) == set(RUN_OPTION_FIELDS) | RUN_OTHER_OPTIONS, (
        "a new `uldp run` option: map it above"
    )
    for option, name in RUN_OPTION_FIELDS.items():
        assert defaults[option] == config_defaults[name], (
            f"--{option} defaults to {defaults[option]!r}, "
            f"RunConfig.{name} to {config_defaults[name]!r}"
        )
    assert defaults["backend"] == RunConfig("synthetic", "ULDP-AVG-w", 10, 1).protocol.backend


def test_allocate_defaults_are_the_library_and_run_defaults(capsys):
    import inspect

    import numpy as np

    from uldp.data import allocate, load
    from uldp.simulation import RunConfig

    signature = inspect.signature(allocate).parameters
    defaults = optional_defaults(subparser("allocate"))
    assert (defaults["silos"], defaults["n_labels"]) == (
        signature["n_silos"].default,
        signature["n_labels"].default,
    )
    # without --n-labels, zipf-noniid holds the paper's labels per user: the same allocation as RunConfig's default
    document, _ = run_json(COMMANDS["allocate"], capsys)
    expected = allocate(
        load("synthetic"),
        n_users=5,
        n_silos=3,
        scheme="zipf-noniid",
        seed=0,
        n_labels=RunConfig(dataset="synthetic", method="DEFAULT", n_users=5, rounds=1).n_labels,
    )
    np.testing.assert_array_equal(document["counts"], expected.counts)
    assert max(document["labels_per_user"]) <= 2


def test_epsilon_defaults_are_the_accountants():
    import inspect

    from uldp.accounting import epsilon_uldp

    assert (
        optional_defaults(subparser("epsilon"))["q"]
        == inspect.signature(epsilon_uldp).parameters["q"].default
    )


@pytest.mark.parametrize(
    "command",
    [
        ["epsilon", "--method", "ULDP-AVG-w", "--sigma", "5", "--rounds", "0", "--delta", "1e-5"],
        [
            "group-epsilon",
            "--sigma",
            "5",
            "--q",
            "0.1",
            "--steps",
            "0",
            "--delta",
            "1e-5",
            "--k",
            "1",
        ],
    ],
)
def test_zero_rounds_or_steps_are_refused_in_one_line(command, capsys):
    from uldp.cli import main

    assert main(command) == 2  # it printed epsilon 0 and exited 0
    assert "must be an integer >= 1, got 0" in capsys.readouterr().err
