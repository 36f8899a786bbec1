"""The earlier ``uldp deploy`` (``python -m uldp.deploy.legacy_cli``): a federation as separate processes on Flower's
deprecated start_server/start_client (``server``, one ``silo`` per silo) and its keys. ``uldp deploy`` now runs on
Flower's SuperLink (:mod:`uldp.deploy.cli`); this runtime stays until the book's deployment chapter, the fault tests
and their benchmark move to it, then goes.

Every party gets the same run configuration file (JSON: the fields of :class:`uldp.simulation.RunConfig`, plus
optionally ``"protocol"``, see :class:`uldp.deploy.method_roles.DeployConfig`); the server refuses a silo whose
configuration differs. A run on the ``synthetic`` dataset makes a quick dress rehearsal of machines, certificates
and keys. See the README section "Running on several machines".
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from uldp.cli import print_json
from uldp.deploy.keys import check_master_key, write_keys

# The roles, the server and the silo (torch, the secure protocol) are imported by the handlers: `uldp --help` stays
# light.
if TYPE_CHECKING:
    from uldp.data.base import FederatedDataset
    from uldp.deploy.method_roles import DeployConfig
    from uldp.policy import SiloPolicy
    from uldp.secure.roster import Credentials


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``deploy`` with its ``server``, ``silo`` and ``keys`` sub-commands."""
    deploy = subparsers.add_parser(
        "deploy", help="run a federation across processes and machines (Flower)"
    )
    commands = deploy.add_subparsers(dest="deploy_command", required=True, metavar="ROLE")

    server = commands.add_parser("server", help="start the server and run the federation")
    _common(server)
    server.add_argument(
        "--address", default="0.0.0.0:8080", help="host:port to listen on (default 0.0.0.0:8080)"
    )
    server.add_argument(
        "--checkpoint",
        type=Path,
        default=None,
        help="file of the last good model; resumed from when it exists",
    )
    server.add_argument(
        "--join-timeout", type=float, default=120.0, help="seconds to wait for all silos"
    )
    server.add_argument(
        "--round-timeout",
        type=float,
        default=3600.0,
        help="seconds one silo may take for one stage",
    )
    server.add_argument(
        "--stall-log-seconds",
        type=float,
        default=30.0,
        help="while waiting for silos, say every this many seconds which and for how long",
    )
    server.add_argument(
        "--master-key-file",
        type=Path,
        default=None,
        help="server key from `uldp deploy keys`; silos must then prove their own keys",
    )
    server.add_argument(
        "--ssl-ca-certfile", type=Path, default=None, help="TLS: CA certificate (PEM)"
    )
    server.add_argument(
        "--ssl-certfile", type=Path, default=None, help="TLS: server certificate (PEM)"
    )
    server.add_argument(
        "--ssl-keyfile", type=Path, default=None, help="TLS: server private key (PEM)"
    )
    server.set_defaults(handler=_server)

    silo = commands.add_parser("silo", help="start one silo and take part in the federation")
    _common(silo)
    silo.add_argument("--silo-id", type=int, required=True, help="this silo's id, 0 .. n_silos - 1")
    silo.add_argument(
        "--server", default="127.0.0.1:8080", help="server host:port (default 127.0.0.1:8080)"
    )
    silo.add_argument(
        "--key-file", type=Path, default=None, help="this silo's key from `uldp deploy keys`"
    )
    silo.add_argument(
        "--root-certificates",
        type=Path,
        default=None,
        help="TLS: CA certificate that signed the server's certificate (PEM); without it, insecure",
    )
    silo.add_argument(
        "--max-wait",
        type=float,
        default=120.0,
        help="seconds to keep trying to reach the server, at the start and after losing it",
    )
    silo.add_argument(
        "--policy",
        type=Path,
        default=None,
        help="this silo's own privacy policy (JSON: fields of uldp.policy.SiloPolicy; default: its "
        "defaults)",
    )
    silo.add_argument(
        "--ledger",
        type=Path,
        default=None,
        help="this silo's ledger of answered rounds and released noise, kept across restarts "
        "(default: <config>.silo-<id>.ledger.json beside the configuration)",
    )
    silo.add_argument(
        "--identity",
        type=Path,
        default=None,
        help="this silo's identity (`uldp roster identity`); with --roster its secure sessions refuse a DH key "
        "the roster does not vouch for",
    )
    silo.add_argument(
        "--roster",
        type=Path,
        default=None,
        help="this silo's copy of the federation's roster (`uldp roster add`), silos in silo-id order",
    )
    silo.add_argument(
        "--exit-at-round", type=int, default=None, help=argparse.SUPPRESS
    )  # tests: crash mid-round
    silo.set_defaults(handler=_silo)

    keys = commands.add_parser(
        "keys", help="make a server master key and one authentication key per silo"
    )
    keys.add_argument("--silos", type=int, required=True, help="number of silos")
    keys.add_argument(
        "--out", type=Path, required=True, help="directory for master.key and silo-<id>.key"
    )
    keys.add_argument(
        "--force", action="store_true", help="replace existing key files (invalidates the old keys)"
    )
    keys.set_defaults(handler=_keys)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config", type=Path, required=True, help="run configuration (JSON), the same for all"
    )
    parser.add_argument("--data-dir", default=None, help="data directory (default $ULDP_DATA_DIR)")
    parser.add_argument(
        "--json", action="store_true", help="print the result as JSON on the last line"
    )
    parser.add_argument("--quiet", action="store_true", help="log warnings and errors only")


def _setup_logging(args: argparse.Namespace) -> None:
    level = logging.WARNING if args.quiet else logging.INFO
    logging.basicConfig(level=level, format="%(asctime)s %(name)s %(message)s")
    for noisy in (
        "alembic",
        "uvicorn",
        "httpx",
    ):  # issue 42: Flower's database migrations and HTTP chatter
        logging.getLogger(noisy).setLevel(logging.WARNING)


def _read_key(path: Path | None) -> bytes | None:
    """The key in ``path`` (one hex string of at least 16 bytes), or None without a path."""
    if path is None:
        return None
    try:
        key = bytes.fromhex(path.read_text(encoding="ascii").strip())
    except (OSError, ValueError) as error:
        raise ValueError(
            f"key file {path} must hold one hex string (from `uldp deploy keys`): {error}"
        ) from error
    return check_master_key(key, f"the key in {path}")


def _config_and_dataset(args: argparse.Namespace) -> tuple[DeployConfig, FederatedDataset]:
    """The configuration file ``args.config`` and its dataset, read from ``args.data_dir``."""
    from uldp.data import load
    from uldp.deploy.method_roles import DeployConfig

    try:
        data = json.loads(args.config.read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise ValueError(f"cannot read the run configuration {args.config}: {error}") from error
    try:
        config = DeployConfig.from_json(data)
    except ValueError as error:
        raise ValueError(f"{args.config}: {error}") from error
    try:
        dataset = load(config.run.dataset, args.data_dir)
    except (OSError, RuntimeError) as error:  # no data directory, missing files
        raise ValueError(f"cannot load dataset {config.run.dataset!r}: {error}") from error
    return config, dataset


def _server(args: argparse.Namespace) -> int:
    from uldp.deploy.method_roles import MethodServer
    from uldp.deploy.server import ServerSettings, serve

    _setup_logging(args)
    tls = (args.ssl_ca_certfile, args.ssl_certfile, args.ssl_keyfile)
    if any(tls) and not all(tls):
        raise ValueError(
            "TLS needs all three of --ssl-ca-certfile, --ssl-certfile and --ssl-keyfile"
        )
    settings = ServerSettings(
        address=args.address,
        checkpoint=args.checkpoint,
        join_timeout=args.join_timeout,
        round_timeout=args.round_timeout,
        stall_log_seconds=args.stall_log_seconds,
        master_key=_read_key(args.master_key_file),
        certificates=tuple(_read_file(p) for p in tls) if all(tls) else None,  # type: ignore[arg-type]
    )
    result = serve(MethodServer(*_config_and_dataset(args)), settings)
    if args.json:
        print_json(
            {
                "rounds_done": result.rounds_done,
                "last_round": result.last_round,
                "resumed_from": result.resumed_from,
                "error": result.error,
                "refused": result.refused,
                "setup_seconds": result.setup_seconds,
                "history": result.history,
                "insecure_reproducible_noise": result.insecure_reproducible_noise,
            },
            args,
        )
    if result.error:
        print(f"uldp deploy server: {result.error}", file=sys.stderr)
        return 1
    return 0


def _silo(args: argparse.Namespace) -> int:
    from uldp.deploy.method_roles import MethodSilo
    from uldp.deploy.silo import FederationIncomplete, SiloRefused, SiloSettings, run_silo

    _setup_logging(args)
    settings = SiloSettings(
        server_address=args.server,
        key=_read_key(args.key_file),
        root_certificates=_read_file(args.root_certificates) if args.root_certificates else None,
        max_wait=args.max_wait,
        policy=_policy(args.policy),
        ledger=args.ledger
        or args.config.with_name(f"{args.config.stem}.silo-{args.silo_id}.ledger.json"),
        credentials=_read_credentials(args),
    )
    config, dataset = _config_and_dataset(args)
    role = MethodSilo(config, args.silo_id, dataset)
    try:
        params = run_silo(role, settings)
    except SiloRefused as error:
        raise ValueError(str(error)) from error
    except FederationIncomplete as error:
        print(f"uldp deploy silo: {error}", file=sys.stderr)
        return 1
    if args.json:
        print_json(
            {
                "silo_id": args.silo_id,
                "n_records": role.n_records,
                "final_model_size": int(params.size),
            },
            args,
        )
    return 0


def _policy(path: Path | None) -> SiloPolicy:
    """The silo's policy file (JSON), or the defaults without one."""
    from uldp.policy import SiloPolicy

    if path is None:
        return SiloPolicy()
    try:
        return SiloPolicy.from_json(json.loads(path.read_text()))
    except (OSError, json.JSONDecodeError, TypeError, ValueError) as error:
        raise ValueError(f"cannot read the silo policy {path}: {error}") from error


def _read_credentials(args: argparse.Namespace) -> Credentials | None:
    """The silo's --identity and --roster (both or neither), or None."""
    from uldp.secure.roster import read_credentials

    try:
        return read_credentials(args.identity, args.roster)
    except ValueError as error:
        raise ValueError(f"--identity and --roster: {error}") from error


def _keys(args: argparse.Namespace) -> int:
    paths = write_keys(args.out, n_silos=args.silos, force=args.force)
    for path in paths:
        print(path)
    return 0


def _read_file(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as error:
        raise ValueError(f"cannot read {path}: {error}") from error


def main(argv: list[str] | None = None) -> int:
    """``python -m uldp.deploy.legacy_cli server|silo|keys ...``: the earlier ``uldp deploy``, alone.

    Each process of a federation starts faster this way (``uldp.cli.main`` imports every registered module).
    Errors behave as in :func:`uldp.cli.main`: a ValueError becomes one line on stderr and exit status 2.
    """
    from uldp.deploy.cli import run_alone

    return run_alone(register, argv)


if __name__ == "__main__":
    sys.exit(main())
