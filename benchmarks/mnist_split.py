"""MNIST's split, measured: the same non-private training on the standard 60K/10K split and on the authors' split
(the union of both sets re-shuffled into a stratified 60K/10K split with the run's seed), paired by seed.

Both arms train ``DEFAULT`` (FedAvg without noise, the paper's CNN and MNIST hyperparameters) for a few rounds of
one local epoch, so that the comparison fits the reference machine; the split changes only which images train and
which test, so the non-private model shows its effect without the noise of the private methods.

Usage: ``python benchmarks/mnist_split.py [--seeds 3] [--rounds 3] [--local-epochs 1] [--json]``
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from sklearn.model_selection import train_test_split

from uldp import data as uldp_data
from uldp.simulation import RunConfig, run

if TYPE_CHECKING:
    from uldp.data.base import FederatedDataset


def authors_split(standard: FederatedDataset, *, seed: int) -> FederatedDataset:
    """The authors' MNIST split: train and test pooled, then a stratified split of the standard test size."""
    features = torch.cat([standard.x_train, standard.x_test])
    labels = torch.cat([standard.y_train, standard.y_test])
    train, test = train_test_split(
        np.arange(len(labels)),
        test_size=len(standard.y_test),
        random_state=seed,
        stratify=labels.numpy(),
    )
    return replace(
        standard,
        x_train=features[train],
        y_train=labels[train],
        x_test=features[test],
        y_test=labels[test],
        variant=f"{standard.variant}, authors' re-shuffled split (seed {seed})",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--seeds", type=int, default=3, help="seeds 0..n-1, each both the split's and the run's"
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--local-epochs", type=int, default=1)
    parser.add_argument("--users", type=int, default=100)
    parser.add_argument(
        "--json", action="store_true", help="write one JSON document of the results to stdout"
    )
    args = parser.parse_args()
    standard = uldp_data.load("mnist")
    rows: list[dict[str, Any]] = []
    for seed in range(args.seeds):
        config = RunConfig(
            dataset="mnist",
            method="DEFAULT",
            n_users=args.users,
            rounds=args.rounds,
            local_epochs=args.local_epochs,
            seed=seed,
        )
        for split, dataset in (
            ("standard", standard),
            ("authors", authors_split(standard, seed=seed)),
        ):
            result = run(config, dataset=dataset)
            rows.append(
                {
                    "seed": seed,
                    "split": split,
                    "accuracy": result.accuracy[-1],
                    "seconds": sum(result.seconds),
                }
            )
            print(f"seed {seed} {split}: accuracy {result.accuracy[-1]:.4f}", file=sys.stderr)
    by_seed = {(row["seed"], row["split"]): row["accuracy"] for row in rows}
    differences = [
        by_seed[(seed, "authors")] - by_seed[(seed, "standard")] for seed in range(args.seeds)
    ]
    settings = {
        "method": "DEFAULT",
        "users": args.users,
        "rounds": args.rounds,
        "local_epochs": args.local_epochs,
    }
    document = {"settings": settings, "rows": rows, "authors_minus_standard": differences}
    if args.json:
        print(json.dumps(document))
        return
    for row in rows:
        print(row)
    print("authors' split minus standard, per seed:", [round(value, 4) for value in differences])


if __name__ == "__main__":
    main()
