"""A deployed Flower round on loopback against the same round in process (issue 33's bound), from the files of
``examples/hospitals`` (its app, its pyproject, its launcher: they are what runs here, so they cannot rot).

In one run, on the same synthetic hospital files (``launch.demo_data``) and the example's strategy
(``hospital_app.make_strategy``: ULDP-AVG-w, plain aggregation so that a round is one message per silo):

- ``in process``: the example's ClientApp and strategy on :class:`uldp.flower.LocalGrid` (no processes);
- ``deployed``: the example's launcher -- a SuperLink, per hospital a SuperNode with ``--isolation process`` and
  its long-lived ClientApp process (``uldp flower-worker``), the app submitted by ``uldp flower-run``;
- ``deployed, subprocess isolation`` (``--baseline-rounds``, 0 to skip): Flower's default, a new ClientApp process
  per message, the naive way.

Each round's seconds are the strategy's own (``round_seconds``: sending the model to the new model); the median
over the rounds is compared. The bound is 3 times the in-process median plus Flower's polling interval, read from
Flower's source: the SuperNode asks its SuperLink for a message every that many seconds while idle, so a deployed
round waits up to that long before any silo sees it. Also counted: how often each worker read its hospital's
records (once per run when the silo's data stay alive between messages) and how many ClientApp tasks it ran.

Usage: PYTHONPATH=. python benchmarks/flower_loopback.py [--rounds 5] [--baseline-rounds 2] [--keep DIR] [--json]
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import uldp.flower as uf

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "hospitals"
SETTINGS = {"sigma": 5.0, "q": 1.0, "secure": False}


def polling_interval() -> float:
    """The seconds a SuperNode sleeps between two requests for a message while it has none (Flower's source)."""
    from flwr.supernode import start_client_internal

    source = inspect.getsource(start_client_internal.start_client_internal)
    found = re.search(
        r"If no message was received, wait for a while\s+time\.sleep\(([\d.]+)\)", source
    )
    if found is None:
        raise RuntimeError(
            "Flower's SuperNode polling interval is no longer where this benchmark reads it "
            "(flwr.supernode.start_client_internal): read it again"
        )
    return float(found.group(1))


def in_process(data: Path, rounds: int) -> list[float]:
    """The example's ClientApp and strategy on LocalGrid: each round's seconds."""
    import hospital_app  # type: ignore[import-not-found]

    configs = [
        {"silo": file.stem, "data": str(file), "uldp-key-file": str(data / "key")}
        for file in sorted(data.glob("*.csv"))
    ]
    strategy = hospital_app.make_strategy(SETTINGS)
    strategy.start(
        uf.LocalGrid(hospital_app.client, configs),
        hospital_app.model().state_dict(),
        num_rounds=rounds,
    )
    return [round(seconds, 3) for seconds in strategy.round_seconds]


def deployed(data: Path, work: Path, rounds: int, isolation: str) -> dict[str, Any]:
    """The example's launcher: each round's seconds, the set-up's, the run's wall time, and what the workers did."""
    import launch  # type: ignore[import-not-found]

    report = launch.run(data, work, rounds=rounds, isolation=isolation, **SETTINGS)
    result: dict[str, Any] = {
        "round_seconds": [round(s, 3) for s in report["round_seconds"]],
        "median_round_seconds": round(statistics.median(report["round_seconds"]), 3),
        "setup_seconds": round(report["setup_seconds"], 3),
        "run_wall_seconds": round(report["wall_seconds"], 1),
    }
    if isolation == "process":
        logs = {
            path.stem.removeprefix("worker-"): path.read_text()
            for path in sorted(work.glob("worker-*.log"))
        }
        result["records_read_per_hospital"] = {
            name: log.count("read its records") for name, log in logs.items()
        }
        result["messages_per_worker"] = {
            name: len(re.findall(r"\) completed in", log)) for name, log in logs.items()
        }
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "--rounds", type=int, default=5, help="rounds in process and deployed (default 5)"
    )
    parser.add_argument(
        "--baseline-rounds",
        type=int,
        default=2,
        help="rounds under subprocess isolation, the naive way (default 2; 0 skips it)",
    )
    parser.add_argument(
        "--keep", type=Path, help="keep the processes' logs in a new folder under this one"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    args = parser.parse_args()
    sys.path.insert(0, str(EXAMPLE))
    import launch

    os.environ["FLWR_TELEMETRY_ENABLED"] = "0"
    root = Path(tempfile.mkdtemp(prefix="uldp-flower-loopback-", dir=args.keep))
    started = time.perf_counter()
    (root / "data").mkdir()
    data = launch.demo_data(root / "data")
    load_before = os.getloadavg()
    inside = in_process(data, args.rounds)
    inside_median = statistics.median(inside)
    poll = polling_interval()
    worker = deployed(data, root / "process", args.rounds, "process")
    naive = (
        deployed(data, root / "subprocess", args.baseline_rounds, "subprocess")
        if args.baseline_rounds
        else None
    )
    bound = 3 * inside_median + poll
    files = sorted(data.glob("*.csv"))
    document = {
        "federation": {
            "hospitals": len(files),
            "records": sum(len(f.read_text().splitlines()) - 1 for f in files),
            "features": len(launch.FEATURES),
            "model": "MLP 30-32-32-1 (examples/hospitals)",
            "method": "ULDP-AVG-w",
            **SETTINGS,
            "rounds": args.rounds,
        },
        "in_process": {"round_seconds": inside, "median_round_seconds": round(inside_median, 3)},
        "deployed_process_isolation": worker,
        "deployed_subprocess_isolation": naive,
        "flower_polling_interval_seconds": poll,
        "bound_seconds": round(bound, 3),
        "ratio_deployed_to_in_process": round(worker["median_round_seconds"] / inside_median, 2),
        "ratio_bound_to_in_process": round(bound / inside_median, 2),
        "meets_bound": worker["median_round_seconds"] <= bound,
        "speedup_over_subprocess_isolation": (
            round(naive["median_round_seconds"] / worker["median_round_seconds"], 1)
            if naive
            else None
        ),
        "machine": {
            "cpu_count": os.cpu_count(),
            "load_average_1_5_15_before": [round(v, 2) for v in load_before],
            "load_average_1_5_15_after": [round(v, 2) for v in os.getloadavg()],
            "note": "2 cores shared with other work while this ran (loaded): the medians over rounds are "
            "compared, and both paths ran in the same run",
        },
        "seconds": round(time.perf_counter() - started, 1),
    }
    if args.json:
        print(json.dumps(document))
    else:
        print(f"in process: median round {inside_median:.2f} s {inside}")
        print(
            f"deployed (--isolation process, uldp flower-worker): median round "
            f"{worker['median_round_seconds']:.2f} s {worker['round_seconds']}; records read per hospital "
            f"{worker['records_read_per_hospital']}"
        )
        if naive:
            print(
                f"deployed (subprocess isolation): median round {naive['median_round_seconds']:.2f} s "
                f"{naive['round_seconds']}"
            )
        print(
            f"ratio {document['ratio_deployed_to_in_process']} x in process; bound 3 x {inside_median:.2f} + "
            f"{poll:g} = {bound:.2f} s ({document['ratio_bound_to_in_process']} x): "
            f"{'met' if document['meets_bound'] else 'NOT met'}"
        )


if __name__ == "__main__":
    main()
