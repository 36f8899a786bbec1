"""Utility and epsilon of medical runs under the authors' allocation (``uniform-with-replacement``), to set beside
the committed paper-profile runs under ``uniform`` (same seeds, same settings otherwise: ``uldp.simulation.run``
with the paper's hyperparameters).

Usage: ``python benchmarks/allocation_utility.py heart_disease:200:ULDP-GROUP-max [...] [--seeds 3] [--json]``
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from uldp.defaults import DATASET_DEFAULTS
from uldp.paper.experiments import UTILITY_METRIC
from uldp.paper.settings import PAPER_SEEDS
from uldp.simulation import RunConfig, run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", help="dataset:users:method")
    parser.add_argument("--seeds", type=int, default=len(PAPER_SEEDS), help="the first n of the paper's seeds")
    parser.add_argument("--json", action="store_true", help="write one JSON document of the results to stdout")
    args = parser.parse_args()
    rows: list[dict[str, Any]] = []
    for text in args.runs:
        dataset, users, method = text.split(":")
        metric = UTILITY_METRIC[dataset]
        for seed in PAPER_SEEDS[:args.seeds]:
            rounds = DATASET_DEFAULTS[dataset].rounds
            result = run(RunConfig(dataset=dataset, method=method, n_users=int(users), rounds=rounds,
                                   seed=seed, distribution="uniform-with-replacement"))
            rows.append({"dataset": dataset, "users": int(users), "method": method, "seed": seed,
                         "metric": metric, "final": getattr(result, metric)[-1], "epsilon": result.epsilon[-1],
                         "group_size": result.info.get("group_size")})
    if args.json:
        print(json.dumps({"allocation": "uniform-with-replacement", "rows": rows}))
        return
    for row in rows:
        print(row)


if __name__ == "__main__":
    main()
