"""uldp.secure.cli: ``uldp roster identity|add|show`` make a silo's identity and the roster the silos hold; each
``--json`` writes one document (as tests/test_cli.py checks for the other commands)."""

from __future__ import annotations

import json
import os
import stat

from uldp.cli import main
from uldp.secure.roster import Credentials, read_identity, read_roster


def run_json(argv: list[str], capsys) -> dict:
    assert main([*argv, "--json"]) == 0
    captured = capsys.readouterr()
    return json.loads(captured.out)


def test_identities_and_a_roster_from_the_command_line_authenticate_a_silo(tmp_path, capsys):
    roster = tmp_path / "roster.json"
    made = {}
    for name in ("north", "south"):
        key = tmp_path / f"{name}.key"
        document = run_json(["roster", "identity", "--name", name, "--out", str(key)], capsys)
        assert document["command"] == "roster identity" and document["inputs"]["name"] == name
        assert document["fingerprint"] == read_identity(key).fingerprint
        assert stat.S_IMODE(os.stat(key).st_mode) == 0o600
        made[name] = document["fingerprint"]
        added = run_json(
            ["roster", "add", "--roster", str(roster), "--name", name, "--fingerprint", made[name]],
            capsys,
        )
    assert [row["fingerprint"] for row in added["silos"]] == [made["north"], made["south"]]
    shown = run_json(["roster", "show", "--roster", str(roster)], capsys)
    assert shown["command"] == "roster show" and shown["digest"] == read_roster(roster).digest.hex()
    Credentials(read_identity(tmp_path / "south.key"), read_roster(roster)).check_silo(1, 2)

    assert (
        main(["roster", "identity", "--name", "north", "--out", str(tmp_path / "north.key")]) == 2
    )
    assert "exists already" in capsys.readouterr().err
    rotated = run_json(
        ["roster", "identity", "--name", "north", "--out", str(tmp_path / "north.key"), "--force"],
        capsys,
    )["fingerprint"]
    assert rotated != made["north"]
    argv = ["roster", "add", "--roster", str(roster), "--name", "north", "--fingerprint", rotated]
    assert main(argv) == 2  # listed already: a one-line error, exit 2
    assert "pass --replace" in capsys.readouterr().err
    replaced = run_json([*argv, "--replace"], capsys)
    assert replaced["silos"][0]["fingerprint"] == rotated and replaced["digest"] != shown["digest"]
    assert (
        main(["roster", "add", "--roster", str(roster), "--name", "west", "--fingerprint", "00"])
        == 2
    )
