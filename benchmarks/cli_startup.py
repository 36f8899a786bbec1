"""Start-up time of ``uldp --help`` and ``uldp epsilon`` (goal: under 0.5 s), against a bare interpreter and an
interpreter that imports torch, side by side in one run.

Each command runs ``--repeats`` times as a fresh process, the commands taking turns so that a shared, noisy
machine slows them alike; the script prints the minimum and median wall seconds of each, their ratio to the bare
interpreter, and which heavy modules (torch, scipy, flwr) the command imported (read from ``-X importtime``).

Usage: python benchmarks/cli_startup.py [--repeats N]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

COMMANDS = {
    "python -c pass (bare interpreter)": ["-c", "pass"],
    "uldp --help": ["-m", "uldp.cli", "--help"],
    "uldp epsilon": ["-m", "uldp.cli", "epsilon", "--method", "ULDP-AVG-w", "--sigma", "5", "--rounds", "100",
                     "--delta", "1e-5"],
    "python -c 'import torch' (what --help used to pay)": ["-c", "import torch"],
}
HEAVY = ("torch", "scipy", "flwr", "pandas")


def imported_heavy(arguments: list[str]) -> list[str]:
    """The heavy top-level modules a command imports (from ``python -X importtime``)."""
    trace = subprocess.run([sys.executable, "-X", "importtime", *arguments], capture_output=True, text=True).stderr
    names = {line.rsplit("|", 1)[-1].strip() for line in trace.splitlines() if line.startswith("import time:")}
    return [name for name in HEAVY if name in names]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for _ in range(args.repeats):
        for name, arguments in COMMANDS.items():
            start = time.perf_counter()
            subprocess.run([sys.executable, *arguments], check=True, capture_output=True)
            times[name].append(time.perf_counter() - start)
    bare = statistics.median(times["python -c pass (bare interpreter)"])
    print(f"{'command':52s} {'min s':>7s} {'median s':>9s} {'x bare':>7s}  imports")
    for name, arguments in COMMANDS.items():
        median = statistics.median(times[name])
        heavy = ", ".join(imported_heavy(arguments)) or "none of " + "/".join(HEAVY)
        print(f"{name:52s} {min(times[name]):7.3f} {median:9.3f} {median / bare:7.1f}  {heavy}")


if __name__ == "__main__":
    main()
