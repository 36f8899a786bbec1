"""Start-up time of ``uldp --help`` and ``uldp epsilon`` (goal: under 0.5 s), against a bare interpreter and an
interpreter that imports torch, side by side in one run.

Each command runs ``--repeats`` times as a fresh process, the commands taking turns so that a shared, noisy
machine slows them alike; the script prints the minimum and median wall seconds of each, their ratio to the bare
interpreter, and which heavy modules (torch, scipy, flwr) the command imported (read from ``-X importtime``).

Usage: python benchmarks/cli_startup.py [--repeats N] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from typing import Any

COMMANDS = {
    "python -c pass (bare interpreter)": ["-c", "pass"],
    "uldp --help": ["-m", "uldp.cli", "--help"],
    "uldp epsilon": [
        "-m",
        "uldp.cli",
        "epsilon",
        "--method",
        "ULDP-AVG-w",
        "--sigma",
        "5",
        "--rounds",
        "100",
        "--delta",
        "1e-5",
    ],
    "python -c 'import torch' (what --help used to pay)": ["-c", "import torch"],
}
HEAVY = ("torch", "scipy", "flwr", "pandas")


def imported_heavy(arguments: list[str]) -> list[str]:
    """The heavy top-level modules a command imports (from ``python -X importtime``)."""
    trace = subprocess.run(
        [sys.executable, "-X", "importtime", *arguments], capture_output=True, text=True
    ).stderr
    names = {
        line.rsplit("|", 1)[-1].strip()
        for line in trace.splitlines()
        if line.startswith("import time:")
    }
    return [name for name in HEAVY if name in names]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument(
        "--json", action="store_true", help="write one JSON document of the results to stdout"
    )
    args = parser.parse_args()
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for _ in range(args.repeats):
        for name, arguments in COMMANDS.items():
            start = time.perf_counter()
            subprocess.run([sys.executable, *arguments], check=True, capture_output=True)
            times[name].append(time.perf_counter() - start)
    bare = statistics.median(times["python -c pass (bare interpreter)"])
    rows: dict[str, dict[str, Any]] = {}
    for name, arguments in COMMANDS.items():
        median = statistics.median(times[name])
        rows[name] = {
            "min_seconds": min(times[name]),
            "median_seconds": median,
            "median_over_bare": median / bare,
            "heavy_imports": imported_heavy(arguments),
        }
    if args.json:
        print(json.dumps({"repeats": args.repeats, "goal_seconds": 0.5, "commands": rows}))
        return
    print(f"{'command':52s} {'min s':>7s} {'median s':>9s} {'x bare':>7s}  imports")
    for name, row in rows.items():
        heavy = ", ".join(row["heavy_imports"]) or "none of " + "/".join(HEAVY)
        print(
            f"{name:52s} {row['min_seconds']:7.3f} {row['median_seconds']:9.3f} {row['median_over_bare']:7.1f}  "
            f"{heavy}"
        )


if __name__ == "__main__":
    main()
