"""A whole Flower round of ULDP-AVG-w per secure-aggregation backend, at about 2,000, 20,000 and 200,000 parameters,
set-up apart: what :mod:`uldp.secure.cost` reads to estimate a run before its first round.

The federation of ``benchmarks/flower_protocol.py`` (3 hospitals, ``--records`` records, ``--patients`` patients,
an MLP whose hidden width sets the size) runs one round on :class:`uldp.flower.LocalGrid` (the Flower messages and
ClientApps in this process) with no secure aggregation and with each backend of Protocol 1
(:data:`uldp.secure.backends.BACKENDS`) at 3072-bit keys. A backend's set-up (keys, proofs, the weights) does not
depend on the model, so it is measured once, at the smallest size. Sizes are run smallest first; a backend whose
last round took more than ``--budget`` seconds is not run at the next size (the cost of a round grows with the
parameters: its line says ``skipped``, and :mod:`uldp.secure.cost` projects it from the sizes measured).

``--merge PATH`` (a results file of ``benchmarks/save.py backend_rounds``) re-measures only ``--backends``: their
rows in that file are replaced by this run's, every other backend's rows are kept, and the run's provenance is
stored per backend under ``"merged"`` (the file's own provenance stays that of its other rows).

Usage: python benchmarks/backend_rounds.py [--sizes 2000 20000 200000] [--budget 240] [--backends ...] [--json]
       [--merge PATH]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from flower_protocol import FEATURES, HOSPITALS, load, write_hospitals
from torch import nn

import uldp
import uldp.flower as uf
from uldp.common.atomic import write_json_atomic
from uldp.common.provenance import now, provenance
from uldp.secure.backends import BACKENDS

#: The plain round (no protocol) beside the backends.
NONE = "none"


def hidden_units(parameters: int) -> int:
    """The hidden width of the MLP ``features -> h -> 2`` with about ``parameters`` parameters (7h + 2 here)."""
    return max(1, round((parameters - 2) / (len(FEATURES) + 3)))


def merged(path: Path, document: dict[str, Any], backends: list[str], run: dict[str, Any]) -> dict:
    """The results file at ``path`` with the rows of ``backends`` replaced by ``document``'s (in the file's order
    of backends, new ones last) and this run's provenance ``run`` (taken as it started, with the load average before
    and after) under ``"merged"``, written atomically.

    Raises:
        ValueError: the file's federation (silos, users, records, key bits) is not this run's.
    """
    stored = json.loads(path.read_text())
    results = stored["results"]
    for key in ("silos", "users", "records", "key_bits"):
        if results[key] != document[key]:
            raise ValueError(
                f"{path} measured {key} = {results[key]}, this run {document[key]}: merge only the same federation"
            )
    order = list(dict.fromkeys([row["backend"] for row in results["rows"]] + backends))
    rows = [row for row in results["rows"] if row["backend"] not in backends] + document["rows"]
    results["rows"] = sorted(rows, key=lambda row: order.index(row["backend"]))
    results.setdefault("merged", {}).update(dict.fromkeys(backends, run))
    write_json_atomic(path, stored)
    return stored


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[2000, 20000, 200000])
    parser.add_argument(
        "--budget", type=float, default=240.0, help="seconds a round may take to go on"
    )
    parser.add_argument(
        "--backends", nargs="+", default=[NONE, *BACKENDS], choices=[NONE, *BACKENDS]
    )
    parser.add_argument("--records", type=int, default=300)
    parser.add_argument("--patients", type=int, default=40)
    parser.add_argument("--key-bits", type=int, default=3072)
    parser.add_argument(
        "--json", action="store_true", help="one JSON document on stdout instead of text"
    )
    parser.add_argument(
        "--merge",
        type=Path,
        help="a results file whose rows of --backends this run replaces (the others kept)",
    )
    args = parser.parse_args()
    # the code that runs is the code at the start (the tree may change while a long run goes on)
    run = {
        **provenance(" ".join(["python benchmarks/backend_rounds.py", *sys.argv[1:]])),
        "date": now(),
    }
    load_before = os.getloadavg()
    logging.getLogger("flwr").setLevel(logging.WARNING)
    from flwr.app import ArrayRecord

    settings: dict[str, Any] = {"method": "ULDP-AVG-w", "sigma": 1.0, "q": 1.0, "local_epochs": 1}
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = write_hospitals(Path(tmp), args.records, args.patients)
        configs = [
            {
                "silo": h,
                "data": str(folder / f"{h}.csv"),
                "uldp-key-file": str(folder / "key"),
                "uldp-policy-epsilon": 1e6,  # a timing run: the plain round's server view is allowed
            }
            for h in HOSPITALS
        ]
        for backend in args.backends:
            if backend == "lattice" and importlib.util.find_spec("tenseal") is None:
                rows.append(
                    {"backend": backend, "skipped": "tenseal (the lattice extra) is not installed"}
                )
                continue
            last = 0.0
            for size in sorted(args.sizes):
                hidden = hidden_units(size)

                def model(hidden: int = hidden) -> nn.Module:
                    return nn.Sequential(
                        nn.Linear(len(FEATURES), hidden), nn.ReLU(), nn.Linear(hidden, 2)
                    )

                parameters = int(uldp.flat_parameters(model()).numel())
                if last > args.budget:
                    rows.append(
                        {
                            "backend": backend,
                            "parameters": parameters,
                            "skipped": f"last round {last:.0f} s",
                        }
                    )
                    continue
                secure = (
                    {"secure": False}
                    if backend == NONE
                    else {
                        "secure": True,
                        "protocol": {"key_bits": args.key_bits, "backend": backend},
                    }
                )
                grid = uf.LocalGrid(uf.silo_client_app(load, model, nn.CrossEntropyLoss()), configs)
                strategy = uf.UldpStrategy(**settings, **secure)
                cpu = time.process_time()
                strategy.start(
                    grid, ArrayRecord([uldp.flat_parameters(model()).numpy()]), num_rounds=1
                )
                last = strategy.round_seconds[0]
                rows.append(
                    {
                        "backend": backend,
                        "parameters": parameters,
                        "round_seconds": last,
                        "setup_seconds": strategy.setup_seconds,
                        "cpu_seconds": time.process_time() - cpu,
                    }
                )
                print(  # progress on stderr: a long run shows what it has measured so far
                    f"{backend:16s} {parameters:7d} parameters: round {last:8.1f} s, "
                    f"set-up {strategy.setup_seconds:6.1f} s",
                    file=sys.stderr if args.json else sys.stdout,
                    flush=True,
                )
    document = {
        "silos": len(HOSPITALS),
        "users": args.patients,
        "records": args.records,
        "key_bits": args.key_bits,
        "budget_seconds": args.budget,
        "rows": rows,
    }
    if args.merge:
        loads = {
            f"load_average_1_5_15_{when}": [round(v, 2) for v in load]
            for when, load in (("before", load_before), ("after", os.getloadavg()))
        }
        document = merged(args.merge, document, args.backends, {**run, **loads})
    if args.json:
        print(json.dumps(document))


if __name__ == "__main__":
    main()
