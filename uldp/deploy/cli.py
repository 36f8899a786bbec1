"""``uldp deploy``: a federation on Flower's SuperLink and SuperNodes, from a settings file.

- ``uldp deploy server --config run.json``: starts a SuperLink (:mod:`uldp.deploy.superlink`) on one port and runs
  the uldp ServerApp on it (:mod:`uldp.deploy.app`, submitted as ``uldp flower-run`` does), waits for the run and
  exits with its status; ``--json`` prints the result.
- ``uldp deploy silo --config run.json --server HOST:PORT ...``: starts this silo's SuperNode with the node config
  built from its settings (its data, relay key, policy, ledger, identity and roster) and runs its ClientApp in this
  process (:mod:`uldp.flower.worker`) until stopped.
- ``uldp deploy keys --silos N --out DIR``: the silos' relay key and one SuperNode authentication key pair per silo.

The settings file is the same JSON as before (the fields of :class:`uldp.simulation.RunConfig`, or a hospital's
table: :class:`uldp.deploy.app.AppSettings`); every party reads it. See the README section "Running on several
machines".
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from uldp.cli import print_json

if TYPE_CHECKING:
    from uldp.deploy.app import AppSettings

#: The options of the earlier runtime (Flower's deprecated start_server/start_client) and what replaced them.
RETIRED = {
    "--master-key-file": "SuperNode authentication: --supernode-key (each silo's public key from `uldp deploy "
    "keys`) at the server, --auth-key at each silo",
    "--key-file": "--auth-key (this silo's SuperNode private key from `uldp deploy keys`) and --relay-key",
    "--round-timeout": "the strategy's round timeout (Flower's)",
    "--stall-log-seconds": "the ServerApp's round lines",
}


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``deploy`` with its ``server``, ``silo`` and ``keys`` sub-commands."""
    deploy = subparsers.add_parser(
        "deploy", help="run a federation on Flower's SuperLink and SuperNodes from a settings file"
    )
    commands = deploy.add_subparsers(dest="deploy_command", required=True, metavar="ROLE")

    server = commands.add_parser(
        "server", help="start a SuperLink, run the uldp ServerApp on it, exit with its status"
    )
    _common(server)
    server.add_argument(
        "--json", action="store_true", help="print the result (one JSON document) on stdout"
    )
    server.add_argument(
        "--address",
        default="0.0.0.0:9092",
        help="the SuperLink's one port, host:port (default 0.0.0.0:9092): silos, the ServerApp and the "
        "flwr command all connect there",
    )
    server.add_argument(
        "--work",
        type=Path,
        default=None,
        help="folder of the app bundle, the SuperLink's log and the result (default: a temporary one)",
    )
    server.add_argument(
        "--checkpoint",
        type=Path,
        default=None,
        help="the strategy's checkpoint; resumed when it exists",
    )
    server.add_argument(
        "--silos",
        default="",
        help="the silos that must take part, comma-separated names (their --name); default: those connected",
    )
    server.add_argument(
        "--join-timeout", type=float, default=120.0, help="seconds to wait for the silos"
    )
    server.add_argument(
        "--timeout", type=float, default=7 * 24 * 3600.0, help="seconds the run may take"
    )
    server.add_argument("--ssl-ca-certfile", type=Path, default=None, help="TLS: CA certificate")
    server.add_argument("--ssl-certfile", type=Path, default=None, help="TLS: server certificate")
    server.add_argument("--ssl-keyfile", type=Path, default=None, help="TLS: server private key")
    server.add_argument(
        "--supernode-key",
        type=Path,
        action="append",
        default=[],
        help="SuperNode authentication: a silo's public key (repeat per silo); only those join",
    )
    server.set_defaults(handler=_server)

    silo = commands.add_parser(
        "silo", help="start this silo's SuperNode and its ClientApp process, until stopped"
    )
    _common(silo)
    silo.add_argument(
        "--server",
        default="127.0.0.1:9092",
        help="the SuperLink, host:port (default 127.0.0.1:9092)",
    )
    silo.add_argument(
        "--silo-id",
        type=int,
        default=None,
        help="built-in dataset: this silo's part of the seed's allocation, 0 .. n_silos - 1",
    )
    silo.add_argument("--name", default=None, help="this silo's name (default silo-<id>)")
    silo.add_argument(
        "--data", type=Path, default=None, help="a table run: this hospital's own CSV file"
    )
    silo.add_argument(
        "--relay-key",
        type=Path,
        required=True,
        help="the silos' relay key (`uldp deploy keys`; the same file at every silo, never at the server)",
    )
    silo.add_argument(
        "--root-certificates",
        type=Path,
        default=None,
        help="TLS: the CA certificate that signed the SuperLink's certificate; without it, insecure",
    )
    silo.add_argument(
        "--auth-key",
        type=Path,
        default=None,
        help="SuperNode authentication: this silo's private key (`uldp deploy keys`)",
    )
    silo.add_argument(
        "--policy", type=Path, default=None, help="this silo's own privacy policy (JSON)"
    )
    silo.add_argument(
        "--ledger",
        type=Path,
        default=None,
        help="this silo's ledger (default: <config>.<name>.ledger.json beside the configuration)",
    )
    silo.add_argument("--identity", type=Path, default=None, help="`uldp roster identity`")
    silo.add_argument("--roster", type=Path, default=None, help="`uldp roster add`")
    silo.add_argument(
        "--allow-no-dp",
        action="store_true",
        help="answer a method without noise (DEFAULT): this silo releases its updates without DP",
    )
    silo.add_argument(
        "--max-wait",
        type=float,
        default=120.0,
        help="seconds to keep trying to reach the SuperLink",
    )
    silo.set_defaults(handler=_silo)

    keys = commands.add_parser(
        "keys", help="make the silos' relay key and one SuperNode key pair per silo"
    )
    keys.add_argument("--silos", type=int, required=True, help="number of silos")
    keys.add_argument("--out", type=Path, required=True, help="directory for the keys")
    keys.add_argument("--force", action="store_true", help="replace existing key files")
    keys.set_defaults(handler=_keys)
    for parser in (server, silo):
        for option in RETIRED:
            parser.add_argument(option, dest=_retired(option), default=None, help=argparse.SUPPRESS)


def _retired(option: str) -> str:
    return "retired_" + option.strip("-").replace("-", "_")


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config", type=Path, required=True, help="the run's settings (JSON), the same for all"
    )
    parser.add_argument("--quiet", action="store_true", help="say only warnings and errors")


def _settings(args: argparse.Namespace) -> tuple[str, AppSettings]:
    """The settings file's text and its parsed settings; refuses an option of the retired runtime."""
    for option, replacement in RETIRED.items():
        if getattr(args, _retired(option), None) is not None:
            raise ValueError(
                f"{option} belonged to the earlier runtime; uldp deploy now runs on Flower: {replacement}"
            )
    from uldp.deploy.app import AppSettings

    try:
        text = args.config.read_text()
        settings = AppSettings.from_json(json.loads(text))
    except (OSError, json.JSONDecodeError) as error:
        raise ValueError(f"cannot read the settings {args.config}: {error}") from error
    except ValueError as error:
        raise ValueError(f"{args.config}: {error}") from error
    return text, settings


def _server(args: argparse.Namespace) -> int:
    from uldp.deploy.superlink import Certificates, run_server

    text, _ = _settings(args)
    tls = (args.ssl_ca_certfile, args.ssl_certfile, args.ssl_keyfile)
    if any(tls) and not all(tls):
        raise ValueError(
            "TLS needs all three of --ssl-ca-certfile, --ssl-certfile and --ssl-keyfile"
        )
    code, result = run_server(
        text,
        address=args.address,
        work=args.work,
        checkpoint=args.checkpoint,
        silos=args.silos,
        join_timeout=args.join_timeout,
        timeout=args.timeout,
        certificates=Certificates(*tls) if all(tls) else None,
        supernode_keys=args.supernode_key,
        quiet=args.quiet,
    )
    if args.json:
        print_json(result, args)
    return code


def _silo(args: argparse.Namespace) -> int:
    from uldp.deploy.superlink import run_silo, silo_node_config

    _, settings = _settings(args)
    node_config = silo_node_config(
        settings,
        config=args.config,
        silo_id=args.silo_id,
        name=args.name,
        data=args.data,
        relay_key=args.relay_key,
        policy=args.policy,
        ledger=args.ledger,
        identity=args.identity,
        roster=args.roster,
        allow_no_dp=args.allow_no_dp,
    )
    return run_silo(
        node_config,
        server=args.server,
        root_certificates=args.root_certificates,
        auth_key=args.auth_key,
        max_wait=args.max_wait,
    )


def _keys(args: argparse.Namespace) -> int:
    from uldp.deploy.credentials import write_keys

    for path in write_keys(args.out, n_silos=args.silos, force=args.force):
        print(path)
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m uldp.deploy.cli server|silo|keys ...``: ``uldp deploy`` without the other sub-commands.

    Parsed and run without the other sub-commands (each process of a federation starts faster this way). Errors
    behave as in :func:`uldp.cli.main`: a ValueError becomes one line on stderr and exit status 2.
    """
    parser = argparse.ArgumentParser(prog="uldp")
    register(parser.add_subparsers(dest="command", required=True, metavar="COMMAND"))
    args = parser.parse_args(["deploy", *(sys.argv[1:] if argv is None else argv)])
    try:
        return int(args.handler(args) or 0)
    except ValueError as error:
        print(f"uldp {args.command}: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
