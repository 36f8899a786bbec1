"""The medical "uniform" allocation: uldp's balanced users against the authors' draws with replacement.

For HeartDisease and TcgaBrca at the paper's user counts and seeds, under ``uniform`` (every user gets the same
number of records, to within one unit) and ``uniform-with-replacement`` (each record's user drawn independently,
as the authors' code does): the largest user's record count and each ULDP-GROUP-k's epsilon after the paper's
rounds (accounting alone, :func:`uldp.simulation.accounted_epsilon`: nothing is trained). With ``--train``, the
final utility of the named runs too (``dataset:users:method``, every seed; those take minutes each).

Usage: ``python benchmarks/allocation_effect.py [--seeds 5] [--train tcga_brca:50:ULDP-GROUP-max ...] [--json]``
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import numpy as np

from uldp.data import load
from uldp.experiments import UTILITY_METRIC
from uldp.paper_settings import PAPER, PAPER_SEEDS
from uldp.simulation import RunConfig, accounted_epsilon, build_federation, run

ALLOCATIONS = ("uniform", "uniform-with-replacement")
GROUPS = ("ULDP-GROUP-max", "ULDP-GROUP-median", "ULDP-GROUP-2", "ULDP-GROUP-8")


def largest_user(config: RunConfig) -> int:
    """The largest user's record count in the run's allocation."""
    federation, _ = build_federation(config)
    return int(federation.allocation.counts.sum(axis=0).max())


def accounting(seeds: list[int]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for dataset in ("heart_disease", "tcga_brca"):
        data = load(dataset)
        rounds = PAPER[dataset].rounds
        for n_users in PAPER[dataset].users:
            for allocation in ALLOCATIONS:
                for seed in seeds:
                    config = RunConfig(dataset=dataset, method="ULDP-AVG", n_users=n_users, rounds=rounds,
                                       seed=seed, distribution=allocation)
                    row: dict[str, Any] = {"dataset": dataset, "users": n_users, "allocation": allocation, "seed": seed,
                           "largest_user": largest_user(config)}
                    for method in GROUPS:
                        grouped = RunConfig(dataset=dataset, method=method, n_users=n_users, rounds=rounds,
                                            seed=seed, distribution=allocation)
                        row[method] = accounted_epsilon(grouped, dataset=data)
                    rows.append(row)
    return rows


def trained(runs: list[str], seeds: list[int]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for text in runs:
        dataset, users, method = text.split(":")
        metric = UTILITY_METRIC[dataset]
        for allocation in ALLOCATIONS:
            for seed in seeds:
                result = run(RunConfig(dataset=dataset, method=method, n_users=int(users),
                                       rounds=PAPER[dataset].rounds, seed=seed, distribution=allocation))
                rows.append({"dataset": dataset, "users": int(users), "method": method, "allocation": allocation,
                             "seed": seed, metric: getattr(result, metric)[-1], "epsilon": result.epsilon[-1]})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=len(PAPER_SEEDS), help="the first n of the paper's seeds")
    parser.add_argument("--train", nargs="*", default=[], help="runs to train, dataset:users:method")
    parser.add_argument("--json", action="store_true", help="write one JSON document of the results to stdout")
    args = parser.parse_args()
    seeds = list(PAPER_SEEDS[:args.seeds])
    report: dict[str, Any] = {"seeds": seeds, "accounting": accounting(seeds), "trained": trained(args.train, seeds)}
    if args.json:
        print(json.dumps(report))
        return
    for row in report["accounting"]:
        print({key: (round(value, 1) if isinstance(value, float) else value) for key, value in row.items()})
    for row in report["trained"]:
        print(row)
    print("mean largest user:", np.mean([row["largest_user"] for row in report["accounting"]]))


if __name__ == "__main__":
    main()
