"""How the per-user engine chunks a silo's users on the CPU (:mod:`uldp.training.chunks`), side by side.

``train_users`` trains a silo's users in chunks whose memory estimate stays under ``chunk_floats`` and whose records
fill at least ``MIN_FILL`` of the slots they are padded to; neither changes the result, only speed. Compared: each
bound with the fill rule (the library), and the default bound with the rule off (``MIN_FILL = 0``, the chunking
before it: the memory bound alone). For the two closed-form models of the paper's per-user figures, the MNIST CNN and
the Creditcard MLP, and two silos (``uniform``: 500 users of 6 records, the paper's |U| = 10,000 MNIST users per
silo; ``zipf``: 200 users whose counts follow a Zipf law, 1 to 300 records), one silo-round of 3 local epochs (batch
64, lr 0.01, train mode) at each bound, in record-steps per second, on 1 and 2 threads. Each row is the best of
``--repeats`` rounds, the bounds interleaved within each repeat so that a shared machine's load falls on all of
them alike; ``ratio`` is a row's rate over the library's default's.

Usage: ``python benchmarks/chunk_size.py [--repeats 3] [--json]`` (one JSON document on stdout with ``--json``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

import numpy as np
import torch

from uldp.common.checks import check_integer
from uldp.models import build_model, loss_function
from uldp.training import chunks
from uldp.training.chunks import DEFAULT_CHUNK_FLOATS
from uldp.training.per_user import flat_parameters, record_keys, train_users

EPOCHS, BATCH, LR = 3, 64, 0.01
INPUT_SHAPE = {"mnist": (1, 28, 28), "creditcard": (30,)}
CLASSES = {"mnist": 10, "creditcard": 2}
#: The bounds compared, as powers of two (the default among them).
EXPONENTS = (20, 21, 22, 23, 24)
DEFAULT_EXPONENT = DEFAULT_CHUNK_FLOATS.bit_length() - 1
#: The rows: (bound exponent, fill rule on); the last is the chunking before the rule.
SETTINGS = (*((exponent, True) for exponent in EXPONENTS), (DEFAULT_EXPONENT, False))


def silo(shape: str, model: str, generator: torch.Generator) -> dict[str, Any]:
    """A silo's records and user groups: ``uniform`` (500 users x 6) or ``zipf`` (200 users, 1-300 records)."""
    zipf = np.clip(np.random.default_rng(0).zipf(1.6, 200), 1, 300)
    counts = np.full(500, 6) if shape == "uniform" else zipf
    n = int(counts.sum())
    x = torch.randn(n, *INPUT_SHAPE[model], generator=generator)
    y = torch.randint(0, CLASSES[model], (n,), generator=generator)
    groups = np.split(np.arange(n), np.cumsum(counts)[:-1])
    return {"x": x, "y": y, "groups": groups, "keys": record_keys(n, EPOCHS, generator)}


def one_round(net: Any, loss: Any, params: Any, data: dict, exponent: int, fill: bool) -> float:
    """Seconds of one silo-round at the bound ``2**exponent``, with the fill rule or without it."""
    library = chunks.MIN_FILL
    chunks.MIN_FILL = library if fill else 0.0
    try:
        started = time.perf_counter()
        train_users(
            net,
            params,
            data["x"],
            data["y"],
            data["groups"],
            loss_fn=loss,
            local_lr=LR,
            epochs=EPOCHS,
            batch_size=BATCH,
            keys=data["keys"],
            chunk_floats=2**exponent,
        )
        return time.perf_counter() - started
    finally:
        chunks.MIN_FILL = library


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3, help="rounds per bound, best taken (3)")
    parser.add_argument(
        "--threads", type=int, nargs="+", default=[1, 2], help="torch threads (1 2)"
    )
    parser.add_argument("--json", action="store_true", help="one JSON document on stdout")
    args = parser.parse_args()
    try:
        check_integer("repeats", args.repeats)
        for threads in args.threads:
            check_integer("threads", threads)
    except ValueError as error:
        parser.error(str(error))
    generator = torch.Generator().manual_seed(0)
    rows = []
    for name in ("mnist", "creditcard"):
        net = build_model(name, seed=0).train()
        loss = loss_function(name)
        params = flat_parameters(net)
        for shape in ("uniform", "zipf"):
            data = silo(shape, name, generator)
            records = sum(g.size for g in data["groups"]) * EPOCHS
            for threads in args.threads:
                torch.set_num_threads(threads)
                rates: dict[tuple[int, bool], list[float]] = {setting: [] for setting in SETTINGS}
                for _ in range(args.repeats):
                    for exponent, fill in SETTINGS:
                        rates[exponent, fill].append(
                            records / one_round(net, loss, params, data, exponent, fill)
                        )
                default = max(rates[DEFAULT_EXPONENT, True])
                for (exponent, fill), measured in rates.items():
                    row = {
                        "model": name,
                        "silo": shape,
                        "threads": threads,
                        "chunk_floats": f"2**{exponent}",
                        "fill_rule": fill,
                        "record_steps_per_second": round(max(measured)),
                        "ratio": round(max(measured) / default, 3),
                    }
                    rows.append(row)
                    print(json.dumps(row), file=sys.stderr, flush=True)
    document = {"default": f"2**{DEFAULT_EXPONENT}", "min_fill": chunks.MIN_FILL, "rows": rows}
    if args.json:
        print(json.dumps(document, indent=1))
    else:
        for row in rows:
            print(
                f"{row['model']:10s} {row['silo']:8s} {row['threads']} thread(s) {row['chunk_floats']:6s} "
                f"{'fill rule' if row['fill_rule'] else 'no rule  '} "
                f"{row['record_steps_per_second']:>8d} record-steps/s  x{row['ratio']:.2f}"
            )


if __name__ == "__main__":
    main()
