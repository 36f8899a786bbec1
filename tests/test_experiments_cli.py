"""The ``uldp grid`` command (uldp.paper.experiments_cli).

Its dry runs and their JSON summary, with ``--seeds``, ``--datasets``, ``--where``, ``--accountant`` and
``--epsilon``, and its errors for bad names and for a ``--where`` pair without a value.
"""

from __future__ import annotations

import json

from uldp import cli
from uldp.paper.experiments import expand


def test_cli_where_selects_one_panel_and_refuses_a_pair_without_a_value(tmp_path, capsys):
    common = ["grid", "mnist", "--profile", "short", "--root", str(tmp_path), "--dry-run", "--json"]
    assert cli.main([*common, "--where", "n_users=100", "distribution=zipf"]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["total"] == 3
    assert cli.main([*common, "--where", "n_users"]) == 2
    assert "--where takes PARAMETER=VALUE pairs" in capsys.readouterr().err


def test_cli_reports_bad_names_and_dry_runs(tmp_path, capsys):
    assert cli.main(["grid", "nope", "--profile", "paper"]) == 2
    assert "unknown grid 'nope'" in capsys.readouterr().err
    assert cli.main(["grid", "heart_disease", "--profile", "medium"]) == 2
    assert "unknown profile 'medium'" in capsys.readouterr().err
    assert (
        cli.main(
            [
                "grid",
                "heart_disease",
                "--profile",
                "paper",
                "--root",
                str(tmp_path),
                "--seeds",
                "0",
                "1",
                "--dry-run",
                "--json",
            ]
        )
        == 0
    )
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    specs = expand("heart_disease", "paper", seeds=[0, 1])
    # DEFAULT and ULDP-NAIVE ignore users and HeartDisease's silos are fixed: one run per seed serves all 4 panels
    assert (
        summary["total"]
        == summary["pending"]
        == len({s.key for s in specs})
        == len(specs) - 2 * 3 * 2
    )
    assert (
        cli.main(
            [
                "grid",
                "user_sampling",
                "--profile",
                "paper",
                "--root",
                str(tmp_path),
                "--seeds",
                "1",
                "--datasets",
                "creditcard",
                "--dry-run",
                "--json",
            ]
        )
        == 0
    )
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["total"] == 5


def test_cli_grid_dry_run_passes_accountant_and_budget(tmp_path, capsys):
    assert (
        cli.main(
            [
                "grid",
                "heart_disease",
                "--profile",
                "smoke",
                "--root",
                str(tmp_path),
                "--dry-run",
                "--accountant",
                "pld",
                "--epsilon",
                "2",
                "--json",
            ]
        )
        == 0
    )
    payload = json.loads(capsys.readouterr().out)
    specs = expand("heart_disease", "smoke", accountant="pld", epsilon=2.0)
    assert payload["pending"] == len({spec.key for spec in specs})
    assert {run["key"] for run in payload["pending_runs"]} == {spec.key for spec in specs}
    assert payload["inputs"]["accountant"] == "pld" and payload["inputs"]["epsilon"] == 2.0
