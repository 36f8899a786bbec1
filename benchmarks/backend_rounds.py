"""A whole Flower round of ULDP-AVG-w per secure-aggregation backend, at about 2,000, 20,000 and 200,000 parameters,
set-up apart: what :mod:`uldp.secure.cost` reads to estimate a run before its first round.

The federation of ``benchmarks/flower_protocol.py`` (3 hospitals, ``--records`` records, ``--patients`` patients,
an MLP whose hidden width sets the size) runs one round on :class:`uldp.flower.LocalGrid` (the Flower messages and
ClientApps in this process) with no secure aggregation and with each backend of Protocol 1
(:data:`uldp.secure.backends.BACKENDS`) at 3072-bit keys. A backend's set-up (keys, proofs, the weights) does not
depend on the model, so it is measured once, at the smallest size. Sizes are run smallest first; a backend whose
last round took more than ``--budget`` seconds is not run at the next size (the cost of a round grows with the
parameters: its line says ``skipped``, and :mod:`uldp.secure.cost` projects it from the sizes measured).

Usage: python benchmarks/backend_rounds.py [--sizes 2000 20000 200000] [--budget 240] [--backends ...] [--json]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from flower_protocol import FEATURES, HOSPITALS, load, write_hospitals
from torch import nn

import uldp
import uldp.flower as uf
from uldp.secure.backends import BACKENDS

#: The plain round (no protocol) beside the backends.
NONE = "none"


def hidden_units(parameters: int) -> int:
    """The hidden width of the MLP ``features -> h -> 2`` with about ``parameters`` parameters (7h + 2 here)."""
    return max(1, round((parameters - 2) / (len(FEATURES) + 3)))


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
    args = parser.parse_args()
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
    if args.json:
        print(json.dumps(document))


if __name__ == "__main__":
    main()
