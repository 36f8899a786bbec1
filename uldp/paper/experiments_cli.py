"""``uldp grid NAME --profile PROFILE [--jobs N] [--seeds ...]``: run a named experiment grid, resumably."""

from __future__ import annotations

import shlex
import sys
from typing import TYPE_CHECKING

from uldp.accounting import ACCOUNTANTS
from uldp.cli import (
    DeprecatedAlias,
    add_device_option,
    add_precision_option,
    add_progress_option,
)

if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``grid`` sub-command."""
    parser = subparsers.add_parser(
        "grid",
        help="run a named experiment grid of the paper (resumes: stored runs are skipped)",
        description="Run every run of a named grid that is not stored yet, one JSON file per run. "
        "Paper-profile results go to results/<grid>/, short-profile ones to results/short/<grid>/, "
        "smoke and default ones to _build/results/<grid>/.",
    )
    parser.add_argument(
        "name", help="grid name, e.g. heart_disease, weighting, user_sampling; `list` lists them"
    )
    parser.add_argument(
        "--profile", default="smoke", help="smoke, default, short or paper (default: smoke)"
    )
    parser.add_argument(
        "--jobs", type=int, default=1, help="runs at once, in separate processes (default 1)"
    )
    parser.add_argument(
        "--seeds", type=int, nargs="+", default=None, help="seeds instead of the profile's"
    )
    parser.add_argument("--methods", nargs="+", default=None, help="only the runs of these methods")
    parser.add_argument(
        "--datasets", nargs="+", default=None, help="only the runs on these datasets"
    )
    parser.add_argument(
        "--where",
        nargs="+",
        default=None,
        metavar="PARAMETER=VALUE",
        help="only the runs whose parameters take these values, e.g. n_users=100 distribution=zipf (one "
        "panel); a parameter named twice takes either value",
    )
    parser.add_argument("--root", default=None, help="results root instead of the profile's")
    parser.add_argument(
        "--accountant",
        choices=tuple(ACCOUNTANTS),
        default="rdp",
        help="accountant of the private runs (default rdp, the paper's; pld runs are stored apart)",
    )
    parser.add_argument(
        "--epsilon",
        type=float,
        default=None,
        help="train every private run to this budget (sigma calibrated by the accountant) instead of "
        "the paper's sigma 5; stored apart from the paper's runs",
    )
    parser.add_argument(
        "--target-epsilon",
        dest="epsilon",
        type=float,
        action=DeprecatedAlias,
        help="deprecated: use --epsilon",
    )
    parser.add_argument(
        "--uniform-allocation",
        choices=("uniform", "uniform-with-replacement"),
        default=None,
        help="scheme of HeartDisease's and TcgaBrca's uniform panels (default the authors', "
        "uniform-with-replacement; uniform: balanced users)",
    )
    add_device_option(parser)
    add_precision_option(parser)
    parser.add_argument("--dry-run", action="store_true", help="list what would run, run nothing")
    parser.add_argument(
        "--json",
        action="store_true",
        help="write one JSON document (inputs and report) to stdout, nothing else",
    )
    add_progress_option(parser)
    parser.set_defaults(handler=handle)


def parse_where(pairs: Sequence[str] | None) -> dict[str, list[str]] | None:
    """``--where``'s ``PARAMETER=VALUE`` pairs as :func:`uldp.paper.experiments.expand`'s ``where`` (``None``: none).

    >>> parse_where(["n_users=100", "distribution=zipf", "n_users=10000"])
    {'n_users': ['100', '10000'], 'distribution': ['zipf']}

    Raises:
        ValueError: a pair without ``=`` or with an empty parameter or value.
    """
    if pairs is None:
        return None
    where: dict[str, list[str]] = {}
    for pair in pairs:
        field, _, value = pair.partition("=")
        if not field or not value:
            raise ValueError(f"--where takes PARAMETER=VALUE pairs, e.g. n_users=100; got {pair!r}")
        where.setdefault(field, []).append(value)
    return where


def handle(args: argparse.Namespace) -> int:
    """Run ``uldp grid``; return 0 when every run is stored, 1 when some failed."""
    from dataclasses import asdict
    from pathlib import Path

    from uldp.cli import print_json, show_progress
    from uldp.paper import experiments

    if args.name == "list":
        grids = [
            {"name": grid.name, "figure": grid.figure, "title": grid.title}
            for grid in experiments.GRIDS.values()
        ]
        if args.json:
            print_json({"grids": grids}, args)
        else:
            for grid in grids:
                print(f"{grid['name']:18s} {grid['figure']:9s} {grid['title']}")
        return 0
    experiments.get_grid(args.name)
    experiments.check_profile(args.profile)
    where = parse_where(args.where)
    if args.dry_run:
        specs = experiments.expand(
            args.name,
            args.profile,
            seeds=args.seeds,
            methods=args.methods,
            datasets=args.datasets,
            where=where,
            accountant=args.accountant,
            epsilon=args.epsilon,
            uniform_allocation=args.uniform_allocation,
        )
        root = Path(args.root) if args.root else experiments.results_root(args.profile)
        todo = experiments.pending_runs(specs, root)
        expected = experiments.expected_seconds(todo, root)
        summary = {
            "grid": args.name,
            "profile": args.profile,
            "total": len({s.key for s in specs}),
            "pending": len(todo),
            "root": str(root),
            "expected_seconds": round(sum(expected.values()), 1),
            "without_expected_time": len(todo) - len(expected),
        }
        if args.json:
            print_json(
                {
                    **summary,
                    "pending_runs": [
                        {
                            "key": spec.key,
                            "panel": spec.panel,
                            "series": spec.series,
                            "seed": spec.seed,
                            "expected_seconds": expected.get(spec.key),
                        }
                        for spec in todo
                    ],
                },
                args,
            )
        else:
            for spec in todo:
                seconds = expected.get(spec.key)
                print(
                    f"{spec.key}  {spec.panel} | {spec.series} | seed {spec.seed}"
                    + ("" if seconds is None else f"  (~{seconds / 60:.1f} min at other seeds)")
                )
            print(
                f"{len(todo)} of {summary['total']} runs to do under {root}; by the same runs' times at other "
                f"seeds, {summary['expected_seconds'] / 3600:.1f} h of run time for {len(expected)} of them"
            )
        return 0
    command = shlex.join(
        ["uldp", "grid", args.name, "--profile", args.profile, "--jobs", str(args.jobs)]
        + (["--seeds", *map(str, args.seeds)] if args.seeds else [])
        + (["--methods", *args.methods] if args.methods else [])
        + (["--datasets", *args.datasets] if args.datasets else [])
        + (["--where", *args.where] if args.where else [])
        + (["--root", args.root] if args.root else [])
        + (["--accountant", args.accountant] if args.accountant != "rdp" else [])
        + (["--epsilon", repr(args.epsilon)] if args.epsilon is not None else [])
        + (["--uniform-allocation", args.uniform_allocation] if args.uniform_allocation else [])
        + (["--device", args.device] if args.device != "cpu" else [])
        + (["--precision", args.precision] if args.precision != "float32" else [])
    )
    try:
        report = experiments.run_grid(
            args.name,
            args.profile,
            seeds=args.seeds,
            methods=args.methods,
            datasets=args.datasets,
            where=where,
            jobs=args.jobs,
            root=args.root,
            command=command,
            progress=show_progress(args),
            accountant=args.accountant,
            epsilon=args.epsilon,
            uniform_allocation=args.uniform_allocation,
            device=args.device,
            precision=args.precision,
        )
    except KeyboardInterrupt as stop:
        print(
            f"uldp grid: {stop or 'stopped'}; the finished runs are stored and the same command resumes the grid",
            file=sys.stderr,
        )
        return 130
    if args.json:
        print_json(asdict(report), args)
    else:
        print(
            f"{report.grid} [{report.profile}]: {report.executed} run now, {report.skipped} already stored, "
            f"{len(report.failed)} failed, {report.wall_seconds:.1f} s; results in {report.root}/{report.grid}"
        )
        for key, error in report.failed:
            print(f"  failed {key}: {error}", file=sys.stderr)
    return 1 if report.failed else 0
