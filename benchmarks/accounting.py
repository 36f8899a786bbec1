"""Accounting time, PLD beside RDP, side by side in one run: one paper run, and the whole group-privacy curve.

Goals (issue 22): accounting one paper run takes under 1 s, and the whole group curve (Figure 2's run: sigma 5,
q 0.01, 1e5 steps, k = 1, 2, 4, ..., 64) under 10 s. Every measurement starts from empty caches (both accountants
cache per-silo curves: a run asks for them every round) and is repeated; the minimum and the median are printed,
with the ratio PLD / RDP.

1. One paper run, the final epsilon: ULDP-AVG-w on Creditcard (T = 100, no sampling), ULDP-AVG-w with user
   sampling on MNIST (T = 200, q = 0.1), and ULDP-GROUP-8 on a HeartDisease paper run (its four silos' DP-SGD
   schedules from the prepared federation; needs ULDP_DATA_DIR, skipped without it).
2. The same runs accounted after every round, as ``uldp run`` reports them.
3. The group curve: the mixture accountant vs the two group-privacy routes (RDP and (epsilon, delta)).

Usage: python benchmarks/accounting.py [--repeats N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import warnings
from functools import partial
from typing import TYPE_CHECKING, Any

from uldp.accounting import (
    epsilon_for_method,
    group_privacy_table,
    mixture_group_curve,
    pld as pld_module,
    rdp as rdp_module,
)

if TYPE_CHECKING:
    from collections.abc import Callable


def clear_caches() -> None:
    pld_module._epsilon_at.cache_clear()
    rdp_module._rdp_one_step.cache_clear()


def timed(function: Callable[[], object], repeats: int, warm: bool = True) -> list[float]:
    """Seconds of each of ``repeats`` calls, each from empty caches (after one call that imports what it needs,
    when ``warm``)."""
    if warm:
        function()
    times = []
    for _ in range(repeats):
        clear_caches()
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return times


def report(title: str, by: dict[str, list[float]], goal: float | None = None) -> None:
    print(title)
    for name, values in by.items():
        verdict = (
            ""
            if goal is None
            else f" ({'meets' if min(values) < goal else 'MISSES'} the {goal:g} s goal)"
        )
        print(
            f"  {name:4s}: min {min(values):7.3f} s, median {statistics.median(values):7.3f} s{verdict}"
        )
    rdp, pld = by["rdp"], by["pld"]
    print(
        f"  pld / rdp: {min(pld) / min(rdp):.2f}x (min), {statistics.median(pld) / statistics.median(rdp):.2f}x "
        "(median)"
    )


def heart_disease_group_arguments() -> dict | None:
    """ULDP-GROUP-8's accounting arguments on the HeartDisease paper run (|U| = 50, zipf, seed 0)."""
    if not os.environ.get("ULDP_DATA_DIR"):
        return None
    import numpy as np

    from uldp.fitting import prepare_method
    from uldp.simulation import RunConfig, build_federation

    config = RunConfig(
        dataset="heart_disease", method="ULDP-GROUP-8", n_users=50, rounds=50, distribution="zipf"
    )
    federation, _ = build_federation(config)
    _, method, prepared = prepare_method(
        config.method, config.hyperparameters(), federation, np.random.SeedSequence(config.seed)
    )
    return method.accounting_arguments(prepared)


def paper_run(
    method: str, rounds: int, arguments: dict, accountant: str, every_round: bool = False
) -> None:
    """Account one paper run: its final epsilon, or (every_round) its epsilon after each of its rounds."""
    for t in range(1 if every_round else rounds, rounds + 1):
        epsilon_for_method(
            method, sigma=5.0, rounds=t, delta=1e-5, accountant=accountant, **arguments
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--repeats", type=int, default=3, help="repetitions of each measurement (default 3)"
    )
    args = parser.parse_args()
    warnings.simplefilter("ignore", RuntimeWarning)
    runs = {
        "ULDP-AVG-w, Creditcard (T=100, q=1)": ("ULDP-AVG-w", 100, {"q": 1.0}),
        "ULDP-AVG-w, MNIST user sampling (T=200, q=0.1)": ("ULDP-AVG-w", 200, {"q": 0.1}),
    }
    group = heart_disease_group_arguments()
    if group is None:
        print("(ULDP-GROUP-8 on HeartDisease skipped: set ULDP_DATA_DIR)")
    else:
        runs["ULDP-GROUP-8, HeartDisease (T=50, |U|=50, zipf)"] = ("ULDP-GROUP-8", 50, group)

    for name, run in runs.items():
        report(
            f"one paper run, final epsilon: {name}",
            {acc: timed(partial(paper_run, *run, acc), args.repeats) for acc in ("rdp", "pld")},
            goal=1.0,
        )

    for name, run in runs.items():
        report(
            f"one paper run, epsilon after every round ({run[1]} rounds): {name}",
            {
                acc: timed(partial(paper_run, *run, acc, every_round=True), 1, warm=False)
                for acc in ("rdp", "pld")
            },
        )

    ks = [1, 2, 4, 8, 16, 32, 64]
    figure2: dict[str, Any] = {"sigma": 5.0, "q": 0.01, "steps": 100_000, "delta": 1e-5, "ks": ks}
    report(
        "the group curve (k = 1 ... 64): RDP and (epsilon, delta) routes as 'rdp', the mixture as 'pld'",
        {
            "rdp": timed(lambda: group_privacy_table(**figure2), args.repeats),
            "pld": timed(lambda: mixture_group_curve(**figure2), args.repeats),
        },
        goal=10.0,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
