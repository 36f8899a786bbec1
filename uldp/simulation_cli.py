"""``uldp run``: one federated training run of :mod:`uldp.simulation` from the command line (defaults: the paper's
settings).

Example::

    uldp run --dataset heart_disease --method ULDP-AVG-w --users 50 --rounds 5 --seed 0 --json
"""

from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING

from uldp.accounting import ACCOUNTANTS
from uldp.cli import (
    DeprecatedAlias,
    add_device_option,
    add_precision_option,
    add_progress_option,
    print_json,
    show_progress,
)
from uldp.common.interrupts import sigterm_interrupts
from uldp.data import load
from uldp.data.allocation import PAPER_N_LABELS
from uldp.secure.cost import AUTO, BACKENDS

if TYPE_CHECKING:
    import argparse


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``run`` sub-command."""
    parser = subparsers.add_parser(
        "run",
        help="run one federated training (DEFAULT, ULDP-NAIVE, ULDP-GROUP-k, ULDP-SGD/AVG[-w])",
        description="Run one federated training in process; unset hyperparameters take the paper's values "
        "for the dataset and method. Prints a per-round table, or with --json one JSON document.",
    )
    parser.add_argument(
        "--dataset", required=True, help="creditcard, mnist, heart_disease, tcga_brca or synthetic"
    )
    parser.add_argument(
        "--method",
        required=True,
        help="DEFAULT, ULDP-NAIVE, ULDP-GROUP-<k|max|median>, ULDP-SGD[-w], ULDP-AVG[-w]",
    )
    parser.add_argument("--users", type=int, required=True, help="number of users |U|")
    parser.add_argument(
        "--silos", type=int, default=None, help="number of silos (fixed for medical datasets)"
    )
    parser.add_argument(
        "--dist",
        default="uniform",
        help="allocation: uniform, zipf, zipf-noniid, uniform-with-replacement (the authors' uniform)",
    )
    parser.add_argument(
        "--n-labels",
        type=int,
        default=PAPER_N_LABELS,
        help=f"labels per user under zipf-noniid (default: the paper's {PAPER_N_LABELS})",
    )
    parser.add_argument("--rounds", type=int, required=True, help="number of rounds T")
    parser.add_argument("--local-epochs", type=int, default=None, help="local epochs Q")
    parser.add_argument("--global-lr", type=float, default=None, help="server learning rate")
    parser.add_argument("--local-lr", type=float, default=None, help="local learning rate")
    parser.add_argument("--clip", type=float, default=None, help="clipping bound C")
    parser.add_argument("--sigma", type=float, default=None, help="noise multiplier (default 5.0)")
    parser.add_argument(
        "--q", type=float, default=1.0, help="user-level sampling rate (ULDP-SGD/AVG)"
    )
    parser.add_argument(
        "--accountant",
        choices=tuple(ACCOUNTANTS),
        default="rdp",
        help="privacy accountant of the reported epsilon and of the budget (default rdp, the paper's)",
    )
    parser.add_argument(
        "--epsilon",
        type=float,
        default=None,
        help="target epsilon, the privacy budget: without --sigma, sigma is calibrated to it; with "
        "--sigma, the run refuses to start or stops before a round that would exceed it",
    )
    parser.add_argument(
        "--target-epsilon",
        dest="epsilon",
        type=float,
        action=DeprecatedAlias,
        help="deprecated: use --epsilon",
    )
    parser.add_argument(
        "--k", default=None, help="ULDP-GROUP group size: an integer, max or median"
    )
    parser.add_argument(
        "--secure",
        action="store_true",
        help="secure aggregation in process, the method's own as on Flower: Protocol 1, the private weighting "
        "protocol, for ULDP-AVG-w / ULDP-SGD-w (slow); the masked sum for every other method",
    )
    parser.add_argument(
        "--backend",
        default=AUTO,
        choices=(AUTO, *BACKENDS),
        help="with --secure and a -w method, Protocol 1's backend (default auto: the fastest that the silos can check, "
        "chosen and logged with its estimate; see uldp.secure.cost)",
    )
    parser.add_argument("--seed", type=int, required=True, help="the one seed of every random draw")
    parser.add_argument(
        "--test-scoring",
        default="pooled",
        choices=("pooled", "per-centre"),
        help="medical datasets: score on FLamby's pooled test set as the authors did (default), or "
        "standardise each centre's test records with its own training statistics",
    )
    parser.add_argument("--data-dir", default=None, help="data directory (default: $ULDP_DATA_DIR)")
    parser.add_argument(
        "--checkpoint",
        default=None,
        help="file to resume from and to save progress to (at most every minute, after the last round, and "
        "when Ctrl-C or SIGTERM stops the run); a resumed run ends exactly as an uninterrupted one; not with "
        "--secure",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="write one JSON document (inputs, configuration, per-round results) to stdout, nothing "
        "else",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="torch threads while training (default: $ULDP_THREADS, else 1; see uldp.common.threads)",
    )
    add_device_option(parser)
    add_precision_option(parser)
    add_progress_option(parser)
    parser.set_defaults(handler=handle)


def method_name(method: str, k: str | None) -> str:
    """Fold ``--k`` into the method name (``ULDP-GROUP`` + ``--k 8`` -> ``ULDP-GROUP-8``).

    Raises:
        ValueError: ``--k`` with a method other than ULDP-GROUP, or contradicting the name's own ``k``.

    Example:
        >>> method_name("ULDP-GROUP", "8"), method_name("ULDP-GROUP-max", "max"), method_name("ULDP-AVG", None)
        ('ULDP-GROUP-8', 'ULDP-GROUP-max', 'ULDP-AVG')
    """
    if k is None:
        return method
    if method == "ULDP-GROUP":
        return f"ULDP-GROUP-{k}"
    if method.startswith("ULDP-GROUP-") and method.removeprefix("ULDP-GROUP-") == str(k):
        return method
    raise ValueError(
        f"--k {k} applies to ULDP-GROUP only (as ULDP-GROUP --k K or ULDP-GROUP-K), got {method!r}"
    )


def handle(args: argparse.Namespace) -> int:
    """Run the configured training, print a per-round table (and the JSON result with ``--json``)."""
    from uldp.secure.config import ProtocolParameters
    from uldp.simulation import (
        RunConfig,
        run,
    )  # torch: imported on use, so `uldp --help` stays light

    if args.secure:  # the backend "auto" chose, with its estimate, on stderr (stdout stays the table or the JSON)
        chooser = logging.getLogger("uldp.secure.cost")
        chooser.setLevel(logging.INFO)
        if not chooser.handlers:  # once per process, so each line is said once
            chooser.addHandler(logging.StreamHandler(sys.stderr))
    config = RunConfig(
        dataset=args.dataset,
        method=method_name(args.method, args.k),
        n_users=args.users,
        rounds=args.rounds,
        seed=args.seed,
        n_silos=args.silos,
        distribution=args.dist,
        local_epochs=args.local_epochs,
        global_lr=args.global_lr,
        local_lr=args.local_lr,
        clip=args.clip,
        sigma=args.sigma,
        q=args.q,
        secure=args.secure,
        protocol=ProtocolParameters.for_user({"backend": args.backend}),
        n_labels=args.n_labels,
        test_scoring=args.test_scoring,
        accountant=args.accountant,
        epsilon=args.epsilon,
        device=args.device,
        precision=args.precision,
    )
    dataset = load(config.dataset, args.data_dir, test_scoring=config.test_scoring)
    try:
        with sigterm_interrupts():
            result = run(
                config,
                progress=show_progress(args),
                dataset=dataset,
                checkpoint=args.checkpoint,
                threads=args.threads,
            )
    except KeyboardInterrupt as stop:
        saved = (
            f"; its completed rounds are saved in {args.checkpoint} and the same command resumes the run"
            if args.checkpoint
            else ""
        )
        print(f"uldp run: {stop or 'stopped'}{saved}", file=sys.stderr)
        return 130
    if args.json:
        print_json(result.to_json(), args)
        return 0
    for row in result.rounds_table():
        metric = "c_index" if "c_index" in row else "accuracy"
        epsilon = "-" if row["epsilon"] is None else f"{row['epsilon']:.3f}"
        print(
            f"round {row['round']:>4}  loss {row['loss']:.4f}  {metric} {row[metric]:.4f}  "
            f"epsilon {epsilon}  {row['seconds']:.2f} s"
        )
    if "calibrated_sigma" in result.info:
        print(
            f"sigma {result.config.sigma:.6g} calibrated to epsilon {args.epsilon:g} ({args.accountant})"
        )
    if "stopped_by_budget" in result.info:
        print(
            f"stopped after round {result.info['stopped_by_budget']['rounds_done']}: the next would exceed epsilon "
            f"{args.epsilon:g}"
        )
    return 0
