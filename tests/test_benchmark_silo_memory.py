"""``benchmarks/silo_memory.py``: one JSON document, both ways run in their own process and give the same update."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "silo_memory.py"


def test_both_ways_report_their_peak_and_agree_to_float_rounding():
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--users", "60", "--parameters", "4096", "--json"],
        check=True,
        capture_output=True,
        text=True,
    )
    document = json.loads(done.stdout)
    assert [row["way"] for row in document["rows"]] == ["whole", "streamed"]
    assert all(row["peak_mib_over_setup"] >= 0 and row["seconds"] > 0 for row in document["rows"])
    assert document["users"] == 60 and abs(document["parameters"] - 4096) < 80
    assert 0 <= document["max_abs_difference"] <= 1e-5 * document["max_abs_update"]
    assert "silo_memory: whole" in done.stderr


def test_a_bad_size_is_refused_in_one_line_naming_it():
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--users", "0", "--json"], capture_output=True, text=True
    )
    assert done.returncode == 2 and done.stdout == ""
    assert "--users must be an integer >= 1, got 0" in done.stderr
    assert "Traceback" not in done.stderr
