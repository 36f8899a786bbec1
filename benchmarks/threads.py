"""Torch threads on a shared CPU: per-round time of a small run, idle and beside a busy process, by thread count.

A HeartDisease ULDP-AVG-w run (50 users, the paper's hyperparameters; small tensor ops, the closed-form engine of
the linear model) runs in a fresh process with torch's default intra-op threads (one per core) and with the
library's default (:data:`uldp.common.threads.DEFAULT_THREADS`), first with no competitor of ours and then beside a
competing process that keeps every core busy (a torch matmul loop with its default threads, as another training
would). Each case reports the median seconds per round over its rounds (best median of ``--repeats`` runs) and the
ratios: busy / idle for each setting (how much a busy machine slows it), and default threads / one thread.

The machine's own load average is printed with the results: on a shared machine "idle" means no competitor of
ours, not an idle machine.

Usage: ``python benchmarks/threads.py [--rounds 8] [--repeats 2] [--json]``
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

COMPETITOR = "import torch\na = torch.randn(768, 768)\nwhile True:\n    a @ a\n"


def one_run(threads: int | None, rounds: int) -> float:
    """Median seconds per round of one run in this process (``threads`` None: torch's default)."""
    import torch

    from uldp.simulation import RunConfig, run

    config = RunConfig(
        dataset="heart_disease", method="ULDP-AVG-w", n_users=50, rounds=rounds, seed=0
    )
    result = run(config, threads=threads if threads is not None else torch.get_num_threads())
    return statistics.median(
        result.seconds[1:] or result.seconds
    )  # the first round warms caches up


def measure(threads: int | None, rounds: int, repeats: int) -> float:
    """Best, over ``repeats`` fresh processes, of the median seconds per round."""
    code = f"import runpy; print(runpy.run_path({os.path.abspath(__file__)!r})['one_run']({threads!r}, {rounds}))"
    times = []
    for _ in range(repeats):
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        )
        times.append(float(done.stdout.strip().splitlines()[-1]))
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument(
        "--json", action="store_true", help="write one JSON document of the results to stdout"
    )
    args = parser.parse_args()

    from uldp.common.threads import DEFAULT_THREADS

    settings = {"torch default": None, f"{DEFAULT_THREADS} (uldp default)": DEFAULT_THREADS}
    results: dict[str, dict[str, float]] = {name: {} for name in settings}
    load = {"before": os.getloadavg()[0]}
    for name, threads in settings.items():
        results[name]["idle"] = measure(threads, args.rounds, args.repeats)
    competitor = subprocess.Popen([sys.executable, "-c", COMPETITOR])
    try:
        time.sleep(2.0)  # let it take the cores
        load["busy"] = os.getloadavg()[0]
        for name, threads in settings.items():
            results[name]["busy"] = measure(threads, args.rounds, args.repeats)
    finally:
        competitor.kill()
        competitor.wait()
    ratios = {
        f"{name}: busy / idle": values["busy"] / values["idle"] for name, values in results.items()
    }
    default_name, ours = list(settings)
    for state in ("idle", "busy"):
        ratios[f"{state}: torch default / {ours}"] = (
            results[default_name][state] / results[ours][state]
        )
    report = {
        "cores": os.cpu_count(),
        "load_average": load,
        "seconds_per_round": results,
        "ratios": ratios,
    }
    if args.json:
        print(json.dumps(report))
        return
    print(
        f"{os.cpu_count()} cores; 1-min load average {load['before']:.1f} before, {load['busy']:.1f} with the "
        f"competitor; median seconds per round, best of {args.repeats} runs of {args.rounds} rounds"
    )
    for name, values in results.items():
        print(f"  threads {name:20s} idle {values['idle']:.4f} s   busy {values['busy']:.4f} s")
    for name, ratio in ratios.items():
        print(f"  {name:40s} {ratio:6.2f}x")


if __name__ == "__main__":
    main()
