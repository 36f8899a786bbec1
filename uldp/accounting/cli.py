"""``uldp epsilon`` and ``uldp group-epsilon``: privacy accounting from the command line."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from uldp.accounting.accountants import ACCOUNTANTS
from uldp.accounting.adversary import Adversary
from uldp.cli import DeprecatedAlias, print_json
from uldp.common.checks import check_integer, check_number
from uldp.method_names import parse_method

if TYPE_CHECKING:
    import argparse

#: Noise multipliers the commands accept: beyond them the accountants' floating point overflows (1e308) or divides by
#: zero (1e-300), and epsilon is already astronomically large (5.5e6 at 1e-3) or zero to print precision (1e6).
SIGMA_RANGE = (1e-3, 1e6)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``epsilon`` and ``group-epsilon`` sub-commands."""
    epsilon = subparsers.add_parser(
        "epsilon",
        help="user-level (epsilon, delta) of a method after T rounds, or the sigma for a target epsilon",
    )
    epsilon.add_argument(
        "--method", required=True, help="e.g. ULDP-AVG-w, ULDP-NAIVE, ULDP-GROUP-8"
    )
    noise = epsilon.add_mutually_exclusive_group(required=True)
    noise.add_argument("--sigma", type=float, help="noise multiplier")
    noise.add_argument(
        "--epsilon", type=float, help="target epsilon: print the smallest sigma reaching it"
    )
    noise.add_argument(
        "--target-epsilon",
        dest="epsilon",
        type=float,
        action=DeprecatedAlias,
        help="deprecated: use --epsilon",
    )
    epsilon.add_argument("--rounds", type=int, required=True, help="number of rounds T")
    epsilon.add_argument("--delta", type=float, required=True)
    epsilon.add_argument(
        "--q",
        type=float,
        default=1.0,
        help="ULDP-SGD/AVG: user-level sampling rate; ULDP-GROUP: record-level DP-SGD rate",
    )
    epsilon.add_argument(
        "--steps-per-round", type=int, default=None, help="ULDP-GROUP: DP-SGD steps per round"
    )
    epsilon.add_argument(
        "--accountant",
        choices=tuple(ACCOUNTANTS),
        default="rdp",
        help="rdp (the paper's) or pld (privacy-loss distribution; ULDP-GROUP as a mixture)",
    )
    epsilon.add_argument(
        "--adversary",
        choices=[adversary.value for adversary in Adversary],
        default=Adversary.MODEL_READERS.value,
        help="ULDP-SGD/AVG with --q below 1: whom epsilon holds against (the paper's amplified epsilon holds "
        "only against readers of the model, who do not know the sample)",
    )
    epsilon.add_argument(
        "--json", action="store_true", help="print one JSON document repeating the inputs"
    )
    epsilon.set_defaults(handler=run_epsilon)

    group = subparsers.add_parser(
        "group-epsilon", help="group privacy of a sub-sampled Gaussian (Figure 2)"
    )
    group.add_argument("--sigma", type=float, required=True)
    group.add_argument("--q", type=float, required=True, help="record-level sampling rate")
    group.add_argument("--steps", type=int, required=True, help="number of iterations")
    group.add_argument("--delta", type=float, required=True)
    group.add_argument("--k", type=int, nargs="+", required=True, help="group sizes")
    group.add_argument("--json", action="store_true", help="print one JSON line")
    group.set_defaults(handler=run_group_epsilon)


def _check_sigma(sigma: float) -> None:
    check_number("--sigma", sigma, at_least=SIGMA_RANGE[0], at_most=SIGMA_RANGE[1])


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def run_epsilon(args: argparse.Namespace) -> int:
    """Print the epsilon of one method at ``--sigma`` (or the sigma for ``--epsilon`` and its epsilon);
    with ``--json`` one document with the inputs, ``sigma``, ``epsilon``, the RDP ``order`` (null for PLD) and
    ``against``, the adversary it holds against with user sampling (null without)."""
    from uldp.accounting import epsilon_for_method, sigma_for_epsilon

    spec = parse_method(args.method)
    check_integer("--rounds", args.rounds)
    if args.sigma is not None:
        _check_sigma(args.sigma)
    arguments = {
        "rounds": args.rounds,
        "delta": args.delta,
        "q": args.q if spec.per_user else 1.0,
        "accountant": args.accountant,
        "adversary": args.adversary,
    }
    if spec.capabilities.group_privacy:
        if args.steps_per_round is None:
            raise ValueError(
                f"{args.method} needs --steps-per-round (DP-SGD steps per silo per round)"
            )
        arguments.update(sample_rates=args.q, steps_per_round=args.steps_per_round)
    sigma = args.sigma
    if args.epsilon is not None:
        sigma = sigma_for_epsilon(args.method, epsilon=args.epsilon, **arguments)
    spent = epsilon_for_method(args.method, sigma=sigma, **arguments)
    if args.json:
        print_json(
            {
                "sigma": sigma,
                "epsilon": _finite(spent.epsilon),
                "order": _finite(spent.order),
                "against": None if spent.adversary is None else spent.adversary.value,
            },
            args,
        )
        return 0
    order = f" (RDP order {spent.order:g})" if math.isfinite(spent.order) else ""
    chosen = "" if args.epsilon is None else f"sigma = {sigma:.6g} for the target; "
    against = "" if spent.adversary is None else f", against {spent.adversary.value}"
    print(
        f"{args.method}: {chosen}epsilon = {spent.epsilon:.6g} at delta = {args.delta:g} by {args.accountant}{order}"
        f"{against}"
    )
    return 0


def run_group_epsilon(args: argparse.Namespace) -> int:
    """Print, per group size, the valid RDP-route and the (epsilon, delta)-route group epsilons."""
    from uldp.accounting.group import group_privacy_table

    _check_sigma(args.sigma)
    check_integer("--steps", args.steps)
    table = group_privacy_table(
        sigma=args.sigma, q=args.q, steps=args.steps, delta=args.delta, ks=args.k
    )
    rows = [
        {
            "k": row["k"],
            "epsilon_rdp": _finite(row["epsilon_rdp"]),
            "epsilon_dp": _finite(row["epsilon_dp"]),
        }
        for row in table
    ]
    if args.json:
        print_json({"rows": rows}, args)
    else:
        for row in rows:
            print(
                f"k={row['k']:>4}  epsilon (RDP group, valid orders) = {row['epsilon_rdp']:.6g}   "
                f"epsilon ((eps, delta) group) = {row['epsilon_dp']:.6g}"
            )
    return 0
