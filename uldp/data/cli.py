"""``uldp allocate``: allocate a dataset's training records to users and silos and print the counts n[s, u]."""

from __future__ import annotations

from typing import TYPE_CHECKING

from uldp.cli import print_json
from uldp.data import DATASETS, SCHEMES, allocate, load
from uldp.data.allocation import labels_per_user, summary

if TYPE_CHECKING:
    import argparse


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``allocate`` sub-command."""
    parser = subparsers.add_parser(
        "allocate",
        help="allocate a dataset's records to users and silos",
        description="Allocate the training records of a dataset to users and silos and print n[s, u].",
    )
    parser.add_argument("--dataset", required=True, choices=sorted(DATASETS), help="dataset name")
    parser.add_argument("--users", required=True, type=int, help="number of users |U|")
    parser.add_argument(
        "--silos", type=int, default=None, help="number of silos |S| (default: the paper's)"
    )
    parser.add_argument("--dist", required=True, choices=SCHEMES, help="allocation scheme")
    parser.add_argument(
        "--n-labels",
        type=int,
        default=None,
        help="labels per user (zipf-noniid; default: the paper's 2)",
    )
    parser.add_argument("--seed", required=True, type=int, help="seed of the allocation")
    parser.add_argument("--data-dir", default=None, help="data directory (default: $ULDP_DATA_DIR)")
    parser.add_argument("--json", action="store_true", help="print one line of JSON")
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    """Run ``uldp allocate``; return the exit status."""
    dataset = load(args.dataset, args.data_dir)
    n_silos = (
        args.silos
        if args.silos is not None or dataset.n_fixed_silos
        else DATASETS[args.dataset].default_silos
    )
    allocation = allocate(
        dataset,
        n_users=args.users,
        n_silos=n_silos,
        scheme=args.dist,
        seed=args.seed,
        n_labels=args.n_labels,
    )
    stats = {"dataset": dataset.name, "variant": dataset.variant, **summary(allocation)}
    payload: dict = {"counts": allocation.counts.tolist()}
    if dataset.labels is not None:
        payload["labels_per_user"] = labels_per_user(allocation, dataset.labels).tolist()
    payload["summary"] = stats
    if args.json:
        print_json(payload, args)
    else:
        for key, value in stats.items():
            print(f"{key}: {value}")
    return 0
