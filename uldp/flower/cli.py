"""``uldp flower-run``: submit a Flower app with ``flwr run`` and exit with the status of its run; ``uldp
flower-worker``: a long-lived ClientApp process for a SuperNode started with ``--isolation process``
(:mod:`uldp.flower.worker`).

``flwr run`` returns as soon as the SuperLink accepted the run, and exits 0 even when the ServerApp then fails
(a silo missing, a round aborted more often than the strategy allows, a checkpoint that cannot be written). This
launcher submits the app (``flwr run APP [SUPERLINK] --format json``), then asks the SuperLink for the run's status
(``flwr ls [SUPERLINK] --run-id ID --format json``) when the run's log (``flwr log``) ends, or every ``--poll``
seconds once there is no log to follow (:func:`uldp.flower.launch.run_app`), says each change of status on stderr,
and exits 0 only when the run finished as completed; 1 when it failed or was stopped (with Flower's details and
the command that shows the ServerApp's log), when it does not finish within ``--timeout``, or when ``flwr`` itself
fails. It imports nothing of Flower (it runs the ``flwr`` command), so ``uldp --help`` stays light.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from uldp.common.checks import check_integer
from uldp.flower.launch import DEFAULT_MAX_POLL, DEFAULT_POLL, FOLLOWED_POLL, run_app

if TYPE_CHECKING:
    import argparse


#: The run config keys of ``--hidden-sample``, ``--colluders`` and ``--psu-group`` (an app passes them to its
#: UldpStrategy as ``hidden_sample``, ``min_colluders`` and ``psu_group``).
HIDDEN_SAMPLE_KEY, COLLUDERS_KEY, PSU_GROUP_KEY = "hidden-sample", "colluders", "psu-group"


def trust_run_config(
    *, hidden_sample: bool, colluders: int, psu_group: str | None = None
) -> list[str]:
    """The ``flwr run --run-config`` entries of ``--hidden-sample``, ``--colluders`` and ``--psu-group`` (none when
    unset). The group's name is checked by the app's strategy (:data:`uldp.secure.psu.NAMED_GROUPS`; this command
    imports no secure module), here only its form, so that it stays one TOML string.

    Raises:
        ValueError: a negative ``colluders``, or a group name of other characters than letters, digits and ``-``.

    >>> trust_run_config(hidden_sample=True, colluders=1, psu_group="modp3072")
    ['hidden-sample=true', 'colluders=1', 'psu-group="modp3072"']
    """
    colluders = check_integer("--colluders", colluders, minimum=0)
    if psu_group is not None and not re.fullmatch(r"[A-Za-z0-9-]{1,40}", psu_group):
        raise ValueError(
            f"--psu-group takes a group's name (letters, digits and -, e.g. modp3072), got {psu_group!r}"
        )
    return (
        [f"{HIDDEN_SAMPLE_KEY}=true"] * hidden_sample
        + [f"{COLLUDERS_KEY}={colluders}"] * (colluders > 0)
        + [f'{PSU_GROUP_KEY}="{psu_group}"'] * (psu_group is not None)
    )


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``flower-run``."""
    parser = subparsers.add_parser(
        "flower-run", help="submit a Flower app (flwr run) and exit with its run's status"
    )
    parser.add_argument("app", type=Path, help="the Flower app's folder (its pyproject.toml)")
    parser.add_argument(
        "superlink", nargs="?", default=None, help="the SuperLink connection's name (flwr's config)"
    )
    parser.add_argument(
        "--run-config", action="append", default=[], help="passed to flwr run (repeatable)"
    )
    parser.add_argument(
        "--hidden-sample",
        action="store_true",
        help=f"run config {HIDDEN_SAMPLE_KEY}=true: the silos draw each round's user sample among themselves, "
        f"hidden from the server (UldpStrategy(hidden_sample=True); every silo's node config needs "
        f"uldp-policy-sampler=silos and its uldp-policy-q), so the server's epsilon is amplified by sampling; the "
        f"app passes it on as examples/hospitals does",
    )
    parser.add_argument(
        "--colluders",
        type=int,
        default=0,
        metavar="T",
        help=f"run config {COLLUDERS_KEY}=T: the run needs every epsilon to hold against T silos colluding with "
        f"the server (UldpStrategy(min_colluders=T)); the set-up stops, naming them, at silos whose policies "
        f"(uldp-policy-colluders, which scales their noise shares) say fewer (default 0)",
    )
    parser.add_argument(
        "--psu-group",
        default=None,
        metavar="NAME",
        help=f"run config {PSU_GROUP_KEY}=NAME: the group of the silos' private set union "
        f"(UldpStrategy(psu_group=NAME)): modp2048 (the strategy's default, about 112-bit) or modp3072 (about "
        f"128-bit, as a 3072-bit Paillier key); each silo refuses a group below its uldp-policy-min-union-bits",
    )
    parser.add_argument(
        "--poll",
        type=float,
        default=5.0,
        help=f"seconds between two status queries once the run's log stopped streaming (while it streams, the "
        f"status is asked when it ends, at least every {FOLLOWED_POLL:g} s; default 5)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=7 * 24 * 3600.0,
        help="seconds to wait for the run to finish (default a week)",
    )
    parser.add_argument("--flwr", default="flwr", help="the flwr command (default: flwr on PATH)")
    parser.add_argument(
        "--stream",
        action="store_true",
        help="show the ServerApp's log on stderr while the run lasts (flwr log --stream): its set-up "
        "stages, one line per round and the summary",
    )
    parser.set_defaults(handler=_flower_run)
    worker = subparsers.add_parser(
        "flower-worker",
        help="run a SuperNode's ClientApp tasks in one long-lived process "
        "(flower-supernode --isolation process)",
    )
    worker.add_argument(
        "--runtime-api-address",
        required=True,
        help="the SuperNode's Runtime API, HOST:PORT (flower-supernode --host/--port)",
    )
    tls = worker.add_mutually_exclusive_group(required=True)
    tls.add_argument(
        "--insecure", action="store_true", help="no TLS (the SuperNode on this machine, loopback)"
    )
    tls.add_argument(
        "--root-certificates",
        type=Path,
        help="CA certificate of the SuperNode's --ssl-certfile (PEM)",
    )
    worker.add_argument(
        "--poll",
        type=float,
        default=DEFAULT_POLL,
        help=f"seconds before asking again for a task after one ran (default {DEFAULT_POLL:g}); each request that "
        f"finds none doubles the wait, up to --max-poll",
    )
    worker.add_argument(
        "--max-poll",
        type=float,
        default=DEFAULT_MAX_POLL,
        help=f"the longest wait between two requests for a task (default {DEFAULT_MAX_POLL:g})",
    )
    worker.set_defaults(handler=_flower_worker)


def _flower_run(args: argparse.Namespace) -> int:
    trust = trust_run_config(
        hidden_sample=args.hidden_sample, colluders=args.colluders, psu_group=args.psu_group
    )
    return run_app(
        args.app,
        args.superlink,
        run_config=[*args.run_config, *trust],
        flwr=args.flwr,
        poll=args.poll,
        timeout=args.timeout,
        stream=args.stream,
    )


def _flower_worker(args: argparse.Namespace) -> int:
    import logging

    from uldp.flower.worker import serve  # imports Flower and the app's dependencies only here

    logging.getLogger("uldp.flower").addHandler(logging.StreamHandler(sys.stderr))
    logging.getLogger("uldp.flower").setLevel(logging.INFO)
    certificates = args.root_certificates.read_bytes() if args.root_certificates else None
    serve(
        args.runtime_api_address,
        insecure=args.insecure,
        root_certificates=certificates,
        poll=args.poll,
        max_poll=args.max_poll,
    )
    return 0
