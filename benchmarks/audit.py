"""Audit runs per minute on this machine: crafted runs batched in one tensor vs one run at a time, and natural runs.

Crafted canaries (``uldp.audit.crafted``): the same ULDP-AVG audit (3 silos, 10 rounds, calibrated to claimed
epsilon 4) simulated ``--batched`` runs at once (the library's default chunk) and ``--single`` runs one per call,
alternating the two a few times so that a shared machine slows both alike; it prints runs per minute of each and
their ratio. User sampling: ULDP-AVG-w at q = 0.1 scored by the per-round likelihood ratio, batched, runs per
minute. Protocol 1: one run of ULDP-AVG-w with ``--secure`` canaries through ``SecureAggregator`` (512-bit test keys)
against the same run aggregated in the clear, canary draws per minute of each and their ratio. Natural canaries
(``uldp.audit.natural``): real training of ULDP-AVG on the synthetic data (5 rounds, 8 canaries per run), runs per
minute. The calibration of sigma is done once, outside the timings.

Usage: python benchmarks/audit.py [--batched N] [--single N] [--secure M] [--natural N] [--repeats R]
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from uldp.audit.crafted import CraftedSetting, audit_federation, calibrate_sigma, crafted_scores
from uldp.audit.jobs import CRAFTED_HP, protocol_aggregator
from uldp.audit.natural import NaturalSetting, natural_scores
from uldp.methods import aggregate, make_method

if TYPE_CHECKING:
    from uldp.methods import Method


def crafted_runs_per_minute(
    method: Method,
    setting: CraftedSetting,
    runs: int,
    chunk: int,
    *,
    canaries: int = 1,
    score: str = "sum",
    secure: bool = False,
) -> float:
    """Canary draws (runs times canaries) per minute of ``runs`` crafted runs simulated ``chunk`` at a time."""
    included = np.random.default_rng(0).random((runs, canaries)) < 0.5
    aggregate_fn = protocol_aggregator(method) if secure else aggregate
    start = time.perf_counter()
    crafted_scores(
        method, setting, included, seed=1, chunk_runs=chunk, score=score, aggregate_fn=aggregate_fn
    )
    return 60 * runs * canaries / (time.perf_counter() - start)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--batched", type=int, default=100_000, help="runs simulated together (default 100000)"
    )
    parser.add_argument(
        "--single", type=int, default=300, help="runs simulated one at a time (default 300)"
    )
    parser.add_argument(
        "--secure", type=int, default=100, help="canaries of the Protocol 1 run (default 100)"
    )
    parser.add_argument(
        "--natural", type=int, default=5, help="natural-canary training runs (default 5)"
    )
    parser.add_argument(
        "--repeats", type=int, default=3, help="turns of each crafted variant (default 3)"
    )
    args = parser.parse_args()
    print(f"load average at start: {os.getloadavg()} on {os.cpu_count()} CPUs")
    setting = CraftedSetting()
    sigma = calibrate_sigma(
        "ULDP-AVG", CRAFTED_HP, audit_federation(setting, 1, 0), rounds=setting.rounds, epsilon=4.0
    )
    method = make_method("ULDP-AVG", replace(CRAFTED_HP, sigma=sigma))
    batched, single = [], []
    for _ in range(args.repeats):
        batched.append(crafted_runs_per_minute(method, setting, args.batched, chunk=20_000))
        single.append(crafted_runs_per_minute(method, setting, args.single, chunk=1))
    print(
        f"crafted ULDP-AVG audit ({setting.n_silos} silos, {setting.rounds} rounds, "
        f"{setting.background_users} background users):"
    )
    print(
        f"  batched (20000 runs per tensor): best {max(batched):12,.0f} runs/min, median {np.median(batched):12,.0f}"
    )
    print(
        f"  one run at a time              : best {max(single):12,.0f} runs/min, median {np.median(single):12,.0f}"
    )
    print(
        f"  batched / one at a time: {max(batched) / max(single):.0f}x (best), "
        f"{np.median(batched) / np.median(single):.0f}x (median)"
    )
    sampled_hp = replace(CRAFTED_HP, q=0.1)
    sampled_sigma = calibrate_sigma(
        "ULDP-AVG-w",
        sampled_hp,
        audit_federation(setting, 1, 0),
        rounds=setting.rounds,
        epsilon=4.0,
    )
    sampled = make_method("ULDP-AVG-w", replace(sampled_hp, sigma=sampled_sigma))
    rates = [
        crafted_runs_per_minute(sampled, setting, args.batched, chunk=20_000, score="likelihood")
        for _ in range(args.repeats)
    ]
    print(
        f"sampled ULDP-AVG-w audit (q = 0.1, likelihood-ratio score): best {max(rates):12,.0f} runs/min, "
        f"median {np.median(rates):12,.0f}"
    )
    enhanced = make_method("ULDP-AVG-w", replace(CRAFTED_HP, sigma=sigma))
    secure, clear = [], []
    for _ in range(args.repeats):
        secure.append(
            crafted_runs_per_minute(
                enhanced, setting, 1, chunk=1, canaries=args.secure, secure=True
            )
        )
        clear.append(crafted_runs_per_minute(enhanced, setting, 1, chunk=1, canaries=args.secure))
    print(
        f"ULDP-AVG-w, one run of {args.secure} canaries: through Protocol 1 (512-bit test keys) best "
        f"{max(secure):10,.0f} canary draws/min; in the clear best {max(clear):10,.0f}; "
        f"clear / Protocol 1: {max(clear) / max(secure):.0f}x"
    )
    natural = NaturalSetting()
    start = time.perf_counter()
    natural_scores("ULDP-AVG", natural, runs=args.natural, sigma=sigma, seed=0)
    seconds = time.perf_counter() - start
    print(
        f"natural ULDP-AVG audit (real training, {natural.rounds} rounds, {natural.canaries} canaries per run): "
        f"{60 * args.natural / seconds:.1f} runs/min ({60 * args.natural * natural.canaries / seconds:.0f} "
        f"canary slots/min)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
