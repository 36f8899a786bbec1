"""benchmarks/backend_rounds.py --merge: re-measuring one backend replaces its rows only, keeps every other backend's
rows in the file's order and their provenance, records the new run's own, and refuses another federation."""

from __future__ import annotations

import json

import pytest
from script_loader import load_script


def _script():
    # the script imports its sibling flower_protocol
    return load_script("benchmarks/backend_rounds.py", siblings=True)


FEDERATION = {"silos": 3, "users": 40, "records": 300, "key_bits": 3072}


def _row(backend: str, parameters: int, seconds: float) -> dict:
    return {
        "backend": backend,
        "parameters": parameters,
        "round_seconds": seconds,
        "setup_seconds": 1.0,
    }


def test_merging_one_backend_keeps_the_others_and_their_provenance(tmp_path):
    path = tmp_path / "backend_rounds.json"
    old = [
        _row("none", 2000, 1.0),
        _row("lattice", 2000, 6.0),
        _row("lattice", 20000, 7.0),
        _row("paillier", 2000, 22.0),
    ]
    path.write_text(
        json.dumps({"provenance": {"command": "old"}, "results": {**FEDERATION, "rows": old}})
    )
    new = [_row("lattice", 2000, 3.0), _row("lattice", 20000, 4.0), _row("lattice", 200000, 9.0)]
    run = {"command": "python benchmarks/backend_rounds.py --backends lattice", "date": "today"}
    stored = _script().merged(path, {**FEDERATION, "rows": new}, ["lattice"], run)
    assert json.loads(path.read_text()) == stored
    assert stored["provenance"] == {"command": "old"}
    assert stored["results"]["rows"] == [old[0], *new, old[3]]
    assert stored["results"]["merged"] == {"lattice": run}


def test_merging_another_federation_is_refused(tmp_path):
    path = tmp_path / "backend_rounds.json"
    path.write_text(json.dumps({"provenance": {}, "results": {**FEDERATION, "rows": []}}))
    with pytest.raises(ValueError, match="measured users = 40, this run 41"):
        _script().merged(path, {**FEDERATION, "users": 41, "rows": []}, ["lattice"], {})
    assert json.loads(path.read_text())["results"]["rows"] == []
