"""Defaults that train, on a federation that is not the paper's: a synthetic EHR table (issue 33).

The federation: 12,801 records of 2,000 patients with 30 numeric features in 4 hospitals, up to 300 records per
patient, 281 patients with records in several hospitals, and a 30-32-32-1 MLP with a binary outcome
(:func:`ehr_federation`). For each method, :func:`uldp.fit` runs once with its defaults (only the method, epsilon
and rounds given) and once per point of a grid around them (each of the global learning rate, the clipping bound
and the local learning rate in turn, :data:`FACTORS`); the script prints each run's final test accuracy and the gap
between the defaults and the best point of the grid. The tuned accuracies here are measured on the test set
without accounting for the tuning (a research measurement of the defaults' quality, not a release: see the
"Your own silos" chapter for tuning that is charged to the budget).

Usage: python benchmarks/ehr.py [--methods DEFAULT ULDP-AVG-w] [--rounds 10] [--epsilon 8] [--jobs 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from functools import partial
from typing import Any

import numpy as np
import torch
from torch import nn

import uldp
from uldp.methods import method_defaults

#: The federation of issue 33: records, patients, features, hospitals, records per patient at most, patients in
#: several hospitals.
RECORDS, PATIENTS, FEATURES, HOSPITALS, MOST_RECORDS, SHARED = 12_801, 2_000, 30, 4, 300, 281


def _record_counts(rng: np.random.Generator, patients: int, records: int, most: int) -> np.ndarray:
    """Heavy-tailed records per patient (1 to ``most``, one patient at ``most``) summing to ``records``."""
    counts = np.clip(np.round(np.exp(rng.normal(1.2, 1.0, patients))), 1, most).astype(int)
    counts[0] = most
    while (gap := records - int(counts.sum())) != 0:
        step = 1 if gap > 0 else -1
        movable = np.flatnonzero((counts[1:] + step >= 1) & (counts[1:] + step < most)) + 1
        chosen = rng.choice(movable, size=min(abs(gap), movable.size), replace=False)
        counts[chosen] += step
    return counts


def ehr_federation(
    seed: int = 0,
    *,
    patients: int = PATIENTS,
    records: int = RECORDS,
    shared: int = SHARED,
    test_patients: int = 400,
) -> dict[str, Any]:
    """The synthetic EHR federation: ``x``, ``y``, ``patient_ids`` (``MRN-00123``), ``hospitals``, a test set.

    Each patient has a latent health state; their records scatter around it, and the outcome of a record is drawn
    from a fixed random two-layer teacher of its features. A patient's records sit in one home hospital, except for
    ``shared`` patients (with at least two records) whose records spread over two to four hospitals.
    """
    rng = np.random.default_rng(seed)
    teacher_in = rng.normal(size=(FEATURES, 16)) / np.sqrt(FEATURES)
    teacher_out = rng.normal(size=16)

    def draw(
        n_patients: int, n_records: int, first: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        counts = _record_counts(rng, n_patients, n_records, MOST_RECORDS)
        owner = np.repeat(np.arange(n_patients), counts)
        state = rng.normal(size=(n_patients, FEATURES))
        x = (state[owner] + 0.7 * rng.normal(size=(owner.size, FEATURES))).astype(np.float32)
        score = np.tanh(x @ teacher_in) @ teacher_out
        y = (score + 0.5 * rng.normal(size=owner.size) > 0).astype(np.float32)
        home = rng.choice(HOSPITALS, size=n_patients, p=[0.4, 0.3, 0.2, 0.1])
        hospital = home[owner].copy()
        several = rng.choice(
            np.flatnonzero(counts >= 2), size=min(shared, int((counts >= 2).sum())), replace=False
        )
        for patient in several:
            rows = np.flatnonzero(owner == patient)
            others = rng.choice(
                [h for h in range(HOSPITALS) if h != home[patient]],
                size=rng.integers(1, HOSPITALS),
                replace=False,
            )
            hospital[rows[1:]] = np.where(
                rng.random(rows.size - 1) < 0.5,
                home[patient],
                rng.choice(others, size=rows.size - 1),
            )
            hospital[rows[1]] = others[0]  # at least two hospitals
        ids = np.array([f"MRN-{first + p:05d}" for p in owner])
        names = np.array([f"Hospital {chr(ord('A') + h)}" for h in hospital])
        return x, y, ids, names

    x, y, ids, names = draw(patients, records, 0)
    x_test, y_test, _, _ = draw(test_patients, test_patients * records // patients, patients)
    return {"x": x, "y": y, "patient_ids": ids, "hospitals": names, "test": (x_test, y_test)}


def mlp() -> nn.Module:
    """The 30-32-32-1 MLP, with initial weights fixed by seed 0."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return nn.Sequential(
            nn.Linear(FEATURES, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 1)
        )


def accuracy(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The share of test records whose outcome the logit's sign predicts."""
    return ((out.squeeze(-1) > 0).float() == y).float().mean()


def train(data: dict, method: str, *, rounds: int, epsilon: float, **hyper: Any) -> dict:
    """One :func:`uldp.fit` run: its final test accuracy and loss, seconds, and the hyperparameters it used."""
    start = time.perf_counter()
    privacy: dict[str, Any] = {} if method == "DEFAULT" else {"epsilon": epsilon}
    with warnings.catch_warnings():
        warnings.simplefilter(
            "ignore"
        )  # the seed warning and the clip advice: this is a measurement
        _, history = uldp.fit(
            mlp(),
            data["x"],
            data["y"],
            user_ids=data["patient_ids"],
            silo_ids=data["hospitals"],
            loss=nn.BCEWithLogitsLoss(),
            method=method,
            rounds=rounds,
            seed=0,
            test=data["test"],
            metrics={"accuracy": accuracy},
            **privacy,
            **hyper,
        )
    used = history.info["hyperparameters"]
    return {
        "hyper": hyper,
        "used": {
            name: getattr(used, name)
            for name in ("global_lr", "local_lr", "clip", "local_epochs", "batch_size")
        },
        "accuracy": history.column("accuracy")[-1],
        "loss": history.column("loss")[-1],
        "seconds": round(time.perf_counter() - start, 1),
    }


#: The tuning grid of each method: each hyperparameter in turn multiplied by these factors, the others at the
#: method's defaults (a cross around the defaults, what a 2-core machine can run).
FACTORS: dict[str, dict[str, tuple[float, ...]]] = {
    "DEFAULT": {"global_lr": (0.5, 2.0)},
    "ULDP-AVG-w": {"global_lr": (1 / 3, 3.0), "clip": (0.3, 3.0), "local_lr": (0.3, 3.0)},
    "ULDP-AVG": {"global_lr": (1 / 3, 3.0), "clip": (0.3, 3.0), "local_lr": (0.3, 3.0)},
}


def grid_points(method: str, defaults: dict[str, Any]) -> list[dict[str, float]]:
    """The grid of ``method`` around its ``defaults`` (:data:`FACTORS`)."""
    return [
        {name: round(defaults[name] * factor, 6)}
        for name, factors in FACTORS[method].items()
        for factor in factors
    ]


def _train_point(rounds: int, epsilon: float, task: tuple[str, dict]) -> dict:
    """One run ``(method, hyperparameters)`` in a worker process (the federation is rebuilt there from its seed)."""
    method, hyper = task
    run = train(ehr_federation(), method, rounds=rounds, epsilon=epsilon, **hyper)
    print(f"{method} {run}", file=sys.stderr, flush=True)
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--methods", nargs="+", default=["DEFAULT", "ULDP-AVG-w"], choices=sorted(FACTORS)
    )
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--epsilon", type=float, default=8.0)
    parser.add_argument(
        "--jobs", type=int, default=3, help="grid points trained at once (processes)"
    )
    parser.add_argument(
        "--json", action="store_true", help="one JSON document on stdout instead of text"
    )
    args = parser.parse_args()
    data = ehr_federation()
    tasks = [
        (method, hyper)
        for method in args.methods
        for hyper in [{}, *grid_points(method, method_defaults(method).values(HOSPITALS))]
    ]
    with ProcessPoolExecutor(
        args.jobs
    ) as pool:  # every run of every method at once: the longest go first
        runs = list(pool.map(partial(_train_point, args.rounds, args.epsilon), tasks))
    results: dict[str, Any] = {}
    for method in args.methods:
        defaults, *grid = [
            run for (name, _), run in zip(tasks, runs, strict=True) if name == method
        ]
        best = max([defaults, *grid], key=lambda run: run["accuracy"])
        results[method] = {
            "defaults": defaults,
            "grid": grid,
            "best": best,
            "gap": best["accuracy"] - defaults["accuracy"],
        }
    pairs = np.unique(np.stack([data["patient_ids"], data["hospitals"]], axis=1), axis=0)
    several = int((np.unique(pairs[:, 0], return_counts=True)[1] > 1).sum())
    document = {
        "records": int(data["x"].shape[0]),
        "patients": int(np.unique(data["patient_ids"]).size),
        "hospitals": int(np.unique(data["hospitals"]).size),
        "patients_in_several_hospitals": several,
        "rounds": args.rounds,
        "epsilon": args.epsilon,
        "results": results,
    }
    if args.json:
        print(json.dumps(document))
        return
    for method, result in results.items():
        print(
            f"{method}: defaults {result['defaults']['accuracy']:.4f}, best tuned {result['best']['accuracy']:.4f} "
            f"at {result['best']['hyper']}, gap {result['gap']:+.4f}"
        )


if __name__ == "__main__":
    main()
