"""A silo's peak memory for one clear ULDP-AVG-w update: every user's delta held at once against one chunk at a time.

A silo's update is ``sum_u w_su clip(Delta_su) + z_s`` (Algorithm 3 line 18). The naive way builds the silo's
``[|U|, d]`` per-user deltas (``UserLevelMethod.silo_user_deltas``, what Protocol 1 still consumes) and then takes the
weighted sum; the library's clear update (``UserLevelMethod.silo_update``) adds each chunk of users' clipped deltas to
the sum as the engine hands them over, so it holds ``[d]`` and one chunk. Each way runs in its own process (peak
resident memory is per process) on the same silo: ``--users`` users of ``--records`` records each, an MLP of about
``--parameters`` parameters, one local epoch. A row gives the peak resident memory above the process's memory after
set-up, the seconds of the update, and the ``[|U|, d]`` float32 bytes; ``max_abs_difference`` compares the two
updates (the sums' order differs, so they agree to float rounding, not bit for bit).

Usage: ``python benchmarks/silo_memory.py [--users 2000] [--records 4] [--parameters 262144] [--json]`` (one JSON
document on stdout with ``--json``; each way's process is this script with ``--way``).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from uldp.common.checks import check_integer
from uldp.data.base import Allocation
from uldp.methods import Federation, Hyperparameters, UserLevelMethod, make_method
from uldp.methods.uldp_avg import silo_weighted_sum
from uldp.models import cross_entropy_loss
from uldp.training.per_user import flat_parameters

FEATURES, CLASSES = 64, 10
WAYS = ("whole", "streamed")


def federation(users: int, records: int, parameters: int) -> Federation:
    """Silo 0 holds ``records`` records of every user, silo 1 one more record of every tenth user; the model is
    ``FEATURES -> hidden -> CLASSES`` with ``hidden`` chosen to give about ``parameters`` parameters."""
    hidden = max(1, round((parameters - CLASSES) / (FEATURES + 1 + CLASSES)))
    generator = torch.Generator().manual_seed(0)
    user = np.concatenate([np.repeat(np.arange(users), records), np.arange(0, users, 10)])
    silo = np.concatenate(
        [np.zeros(users * records, dtype=int), np.ones(-(-users // 10), dtype=int)]
    )
    x = torch.randn(user.size, FEATURES, generator=generator)
    y = torch.randint(0, CLASSES, (user.size,), generator=generator)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(FEATURES, hidden), nn.ReLU(), nn.Linear(hidden, CLASSES))
    allocation = Allocation(user, silo, users, 2, "silo_memory", 0)
    return Federation(model, cross_entropy_loss, x, y, allocation)


def one_way(way: str, users: int, records: int, parameters: int) -> dict[str, Any]:
    """Silo 0's update the way ``way`` computes it, in this process: its peak memory, time and the update."""
    fed = federation(users, records, parameters)
    method = make_method(
        "ULDP-AVG-w",
        Hyperparameters(
            global_lr=1.0, local_lr=0.01, local_epochs=1, batch_size=64, clip=1.0, sigma=5.0
        ),
    )
    assert isinstance(method, UserLevelMethod)
    params = flat_parameters(fed.model)
    seed = np.random.SeedSequence(0)
    sampled = np.ones(users, dtype=bool)
    baseline = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.perf_counter()
    if way == "whole":
        deltas = method.silo_user_deltas(params, fed, seed, sampled, 0)
        noise = method.silo_noise(params.numel(), 2, seed, 0)
        update = silo_weighted_sum(deltas, method.weights(fed.counts, sampled)[0], noise)
    else:
        update = method.silo_update(params, fed, seed, 0, sampled=sampled, counts=fed.counts)
    seconds = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    return {
        "way": way,
        "peak_mib_over_setup": round((peak - baseline) / 1024, 1),
        "seconds": round(seconds, 2),
        "update": update.tolist(),
        "parameters": params.numel(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=2000)
    parser.add_argument("--records", type=int, default=4)
    parameters_help = "the MLP's size, about (default 262144)"
    parser.add_argument("--parameters", type=int, default=262144, help=parameters_help)
    parser.add_argument("--way", choices=WAYS, help="run one way in this process (internal)")
    parser.add_argument("--json", action="store_true", help="one JSON document on stdout")
    args = parser.parse_args()
    try:
        for name in ("users", "records", "parameters"):
            check_integer(f"--{name}", getattr(args, name))
    except ValueError as error:
        parser.error(str(error))
    if args.way:
        print(json.dumps(one_way(args.way, args.users, args.records, args.parameters)))
        return
    rows = []
    for way in WAYS:
        print(f"silo_memory: {way} ...", file=sys.stderr)
        command = [sys.executable, str(Path(__file__).resolve()), "--way", way]
        for name in ("users", "records", "parameters"):
            command += [f"--{name}", str(getattr(args, name))]
        rows.append(
            json.loads(subprocess.run(command, check=True, capture_output=True, text=True).stdout)
        )
    updates = [np.asarray(row.pop("update")) for row in rows]
    d = rows[0]["parameters"]
    document = {
        "users": args.users,
        "records_per_user": args.records,
        "parameters": d,
        "whole_deltas_mib": round(args.users * d * 4 / 2**20, 1),
        "rows": rows,
        "peak_ratio_whole_over_streamed": round(
            rows[0]["peak_mib_over_setup"] / max(rows[1]["peak_mib_over_setup"], 1.0), 1
        ),
        "max_abs_difference": float(np.abs(updates[0] - updates[1]).max()),
        "max_abs_update": float(np.abs(updates[0]).max()),
    }
    if args.json:
        print(json.dumps(document, indent=2))
        return
    print(
        f"silo of {args.users} users x {args.records} records, d = {d} ([U, d] float32 = "
        f"{document['whole_deltas_mib']} MiB)"
    )
    for row in rows:
        print(f"  {row['way']:>8}: peak +{row['peak_mib_over_setup']} MiB, {row['seconds']} s")
    print(
        f"  ratio {document['peak_ratio_whole_over_streamed']}, max |difference| {document['max_abs_difference']:.2e}"
    )


if __name__ == "__main__":
    main()
