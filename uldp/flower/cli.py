"""``uldp flower-run``: submit a Flower app with ``flwr run`` and exit with the status of its run; ``uldp
flower-worker``: a long-lived ClientApp process for a SuperNode started with ``--isolation process``
(:mod:`uldp.flower.worker`).

``flwr run`` returns as soon as the SuperLink accepted the run, and exits 0 even when the ServerApp then fails
(a silo missing, a round aborted more often than the strategy allows, a checkpoint that cannot be written). This
launcher submits the app (``flwr run APP [SUPERLINK] --format json``), then asks the SuperLink for the run's status
(``flwr ls [SUPERLINK] --run-id ID --format json``) every ``--poll`` seconds, says each change of status on stderr,
and exits 0 only when the run finished as completed; 1 when it failed or was stopped (with Flower's details and
the command that shows the ServerApp's log), when it does not finish within ``--timeout``, or when ``flwr`` itself
fails. It imports nothing of Flower (it runs the ``flwr`` command), so ``uldp --help`` stays light.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from uldp.common.checks import check_number

if TYPE_CHECKING:
    import argparse

#: The status of a run that completed (``flwr ls``).
COMPLETED = "finished:completed"


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
        "--poll", type=float, default=5.0, help="seconds between two status queries (default 5)"
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
        default=0.05,
        help="seconds between two requests for a task when none is waiting (default 0.05)",
    )
    worker.set_defaults(handler=_flower_worker)


class FlowerCommandFailed(RuntimeError):
    """A ``flwr`` command exited with an error or printed no JSON; the message has its output's end."""


def json_output(text: str) -> dict | None:
    """The JSON document a ``flwr ... --format json`` command printed (over several lines), or None."""
    start = next(
        (i for i, line in enumerate(text.splitlines(keepends=True)) if line.startswith("{")), None
    )
    if start is None:
        return None
    try:
        document = json.JSONDecoder().raw_decode("".join(text.splitlines(keepends=True)[start:]))[0]
    except json.JSONDecodeError:
        return None
    return document if isinstance(document, dict) else None


def _flwr_json(command: list[str]) -> dict:
    """Run one ``flwr`` command and parse its JSON output.

    Raises:
        FlowerCommandFailed: a non-zero exit, or no JSON document on stdout.
    """
    done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=600)
    document = json_output(done.stdout)
    if done.returncode != 0 or document is None:
        output = (done.stderr.strip() or done.stdout.strip())[-1000:]
        raise FlowerCommandFailed(
            f"`{' '.join(command)}` exited with status {done.returncode}: {output}"
        )
    return document


def submit(app: Path, superlink: str | None, *, run_config: list[str], flwr: str = "flwr") -> int:
    """Submit the app with ``flwr run`` and return the run id.

    Raises:
        FlowerCommandFailed: ``flwr run`` failed or returned no run id.
    """
    command = [flwr, "run", str(app), *([superlink] if superlink else []), "--format", "json"]
    for override in run_config:
        command += ["--run-config", override]
    answer = _flwr_json(command)
    if not answer.get("success") or answer.get("run-id") is None:
        raise FlowerCommandFailed(
            f"`{' '.join(command)}` started no run: {json.dumps(answer)[:500]}"
        )
    return int(answer["run-id"])


def wait_for_run(
    run_id: int,
    superlink: str | None,
    *,
    flwr: str = "flwr",
    poll: float = 5.0,
    timeout: float = 7 * 24 * 3600.0,
) -> tuple[str, str]:
    """Ask for the run's status until it is finished; say each change on stderr.

    Returns:
        ``(status, details)`` as ``flwr ls`` gives them (``finished:completed``, ``finished:failed``, ...), or
        ``("timeout", ...)`` when ``timeout`` passed first.

    Raises:
        FlowerCommandFailed: ``flwr ls`` failed or does not know the run.
    """
    check_number("--poll", poll, above=0)
    check_number("--timeout", timeout, above=0)
    command = [
        flwr,
        "ls",
        *([superlink] if superlink else []),
        "--run-id",
        str(run_id),
        "--format",
        "json",
    ]
    start, last = time.monotonic(), ""
    while True:
        runs = [
            run
            for run in _flwr_json(command).get("runs", [])
            if str(run.get("run-id")) == str(run_id)
        ]
        if not runs:
            raise FlowerCommandFailed(
                f"`{' '.join(command)}` does not list run {run_id}: the SuperLink no longer "
                f"knows it (restarted?); submit the app again (a UldpStrategy with "
                f"checkpoint= resumes at its next round)"
            )
        status, details = str(runs[0].get("status", "")), str(runs[0].get("status-details") or "")
        waited = time.monotonic() - start
        if status != last:
            print(
                f"uldp flower-run: run {run_id} is {status} after {waited:.0f} s",
                file=sys.stderr,
                flush=True,
            )
            last = status
        if status.startswith("finished"):
            return status, details
        if waited >= timeout:
            return "timeout", f"still {status} after --timeout {timeout:g} s"
        time.sleep(min(poll, timeout - waited))


def _flower_run(args: argparse.Namespace) -> int:
    follower = None
    try:
        run_id = submit(args.app, args.superlink, run_config=args.run_config, flwr=args.flwr)
        if args.stream:  # the ServerApp's lines, as they come, on our stderr
            follower = subprocess.Popen(
                [args.flwr, "log", str(run_id), *([args.superlink] if args.superlink else [])],
                stdout=sys.stderr if _has_fileno(sys.stderr) else None,
                stderr=subprocess.DEVNULL,
            )
        status, details = wait_for_run(
            run_id, args.superlink, flwr=args.flwr, poll=args.poll, timeout=args.timeout
        )
    except FileNotFoundError as error:
        print(
            f"uldp flower-run: the command {error.filename!r} was not found: it comes with Flower, "
            f"pip install 'uldp[deploy]' (or pass --flwr PATH)",
            file=sys.stderr,
        )
        return 1
    except (FlowerCommandFailed, subprocess.TimeoutExpired, OSError) as error:
        print(f"uldp flower-run: {error}", file=sys.stderr)
        if UNAVAILABLE in str(error).lower() and (problem := connection_problem(args.superlink)):
            print(
                f"uldp flower-run: {problem}", file=sys.stderr
            )  # issue 42: what flwr does not say
        return 1
    finally:
        if follower is not None:
            time.sleep(
                min(args.poll, 3.0)
            )  # the log's last lines (the summary) reach the SuperLink late
            follower.terminate()
            follower.wait()
    if status == COMPLETED:
        return 0
    where = f" {args.superlink}" if args.superlink else ""
    print(
        f"uldp flower-run: run {run_id} {status}{': ' + details if details else ''}; its log: "
        f"{args.flwr} log {run_id}{where}",
        file=sys.stderr,
    )
    return 1


#: What ``flwr`` (1.41) says, in a box that may wrap it, for any failed connection to the SuperLink ("Connection to
#: the SuperLink is unavailable"), a TLS failure included.
UNAVAILABLE = "unavailable"


def connection_problem(superlink: str | None, *, timeout: float = 5.0) -> str | None:
    """What lies behind ``flwr``'s "the SuperLink is unavailable", from the named (or default) SuperLink connection
    of flwr's ``config.toml`` (in ``$FLWR_HOME``, else ``~/.flwr``): nothing listening at its address, or a TLS
    handshake that fails (no ``root-certificates``, or not the CA of the server's certificate), said as such.

    Returns:
        One line for the operator, or None where neither (the connection is not configured, is ``insecure``, or its
        TLS handshake succeeds).
    """
    import os
    import socket
    import ssl
    import tomllib

    home = Path(os.environ.get("FLWR_HOME") or Path.home() / ".flwr")
    try:
        links = tomllib.loads((home / "config.toml").read_text()).get("superlink", {})
    except (OSError, tomllib.TOMLDecodeError):
        return None
    name = superlink or links.get("default")
    connection = links.get(name) if isinstance(name, str) else None
    if not isinstance(connection, dict):
        return None
    address = connection.get("address")
    if not isinstance(address, str) or ":" not in address:
        return None
    host, _, port = address.rpartition(":")
    host = host.strip("[]")
    certificate = connection.get("root-certificates")
    where = f"the connection {name!r} of {home / 'config.toml'}"
    try:
        context = ssl.create_default_context(cafile=certificate)
    except (OSError, ssl.SSLError) as error:
        return f"TLS cannot start: {where} names root-certificates {certificate!r}, which cannot be read ({error})"
    try:
        with socket.create_connection((host, int(port)), timeout=timeout) as raw:
            if connection.get("insecure") is True:
                return None
            with context.wrap_socket(raw, server_hostname=host):
                return None
    except ssl.SSLError as error:
        fix = (
            f"its root-certificates ({certificate}) must be the CA that signed the server's certificate, and "
            f"that certificate must name {host}"
            if certificate
            else "it has no root-certificates: set them to the server's CA certificate (ca.crt)"
        )
        return f"TLS failed at {address}: {error.reason or error}; in {where}, {fix}"
    except (OSError, ValueError) as error:
        return f"no server at {address} ({getattr(error, 'strerror', None) or error})"


def _has_fileno(stream: Any) -> bool:
    """Whether ``stream`` is a real file a child process can write to (not pytest's capture)."""
    try:
        stream.fileno()
    except (AttributeError, OSError, ValueError):
        return False
    return True


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
    )
    return 0
