"""Submit a Flower app and wait for its run: what ``uldp flower-run`` (:mod:`uldp.flower.cli`) and ``uldp deploy
server`` (:mod:`uldp.deploy.superlink`) do.

``flwr run`` returns as soon as the SuperLink accepted the run, and exits 0 even when the ServerApp then fails.
:func:`run_app` submits the app (``flwr run APP [SUPERLINK] --format json``), follows the ServerApp's log (``flwr
log ID [SUPERLINK]``, which ends with the run), asks the SuperLink for the run's status (``flwr ls [SUPERLINK]
--run-id ID --format json``) when that log ends, at least every :data:`FOLLOWED_POLL` seconds while it streams and
every ``poll`` seconds once it stopped, says each change of status on stderr, and returns 0 only when the run
finished as completed. It imports nothing of Flower (it runs the ``flwr`` command).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from uldp.common.checks import check_number

#: The status of a run that completed (``flwr ls``).
COMPLETED = "finished:completed"
#: Seconds between two status queries while the run's log still streams: its end says when to ask. Each ``flwr ls``
#: is a new Python process that imports Flower, about 1 s of CPU; asked every second, the query was a third of a core
#: on the server for the whole run (``uldp deploy server``'s loopback test made 15 of them in a 50 s run).
FOLLOWED_POLL = 30.0


def app_pyproject(name: str, module: str, description: str, config: str) -> str:
    """The ``pyproject.toml`` of a Flower app bundle that ``flwr run`` submits: project ``name``, ServerApp
    ``module:server`` and ClientApp ``module:client``, and ``config`` as the body of its ``[tool.flwr.app.config]``
    table (TOML lines). One shape for ``uldp deploy``'s bundle, the tests' and the benchmarks' apps.

    Example:
        >>> import tomllib
        >>> tomllib.loads(app_pyproject("app", "my_app", "demo", 'rounds = 2'))["tool"]["flwr"]["app"]["config"]
        {'rounds': 2}
    """
    return f"""[build-system]
requires = ["hatchling"]
build-backend = "hatchling.build"

[project]
name = "{name}"
version = "1.0.0"
description = "{description}"
license = "MIT"
dependencies = []

[tool.hatch.build.targets.wheel]
packages = ["."]

[tool.flwr.app]
publisher = "uldp"

[tool.flwr.app.components]
serverapp = "{module}:server"
clientapp = "{module}:client"

[tool.flwr.app.config]
{config}
"""


#: ``uldp flower-worker`` (:mod:`uldp.flower.worker`): seconds between two requests for a task right after one ran:
#: the next message of a round follows soon.
DEFAULT_POLL = 0.05
#: The wait doubles with each request that finds no task, up to this (Flower's own executor waits 1 s). A worker that
#: asked 20 times a second spent about 5% of a core while its silo idled (three workers on 2 cores, in the loopback
#: test); the SuperNode itself asks its SuperLink for messages only every 3 s when idle, so the longer wait costs a
#: message little.
DEFAULT_MAX_POLL = 0.5


def worker_command(port: int) -> list[str]:
    """The command of a SuperNode's ClientApp process (``uldp flower-worker``, this interpreter) that connects to
    the SuperNode's ClientAppIo API on loopback port ``port`` (``--insecure``: this machine only)."""
    return [
        sys.executable,
        "-m",
        "uldp.cli",
        "flower-worker",
        "--runtime-api-address",
        f"127.0.0.1:{port}",
        "--insecure",
    ]


class FlowerCommandFailed(RuntimeError):
    """A ``flwr`` command exited with an error or printed no JSON; the message has its output's end."""


#: Variables that make ``flwr`` colour its ``--format json`` output (set in a Jupyter kernel, say), so that it no
#: longer parses: left out of the environment of every Flower command.
COLOUR_FORCING = ("FORCE_COLOR", "CLICOLOR_FORCE")


def flower_environment(home: Path | None = None) -> dict[str, str]:
    """The environment of every Flower command: this interpreter's Flower commands first on PATH, telemetry off, no
    forced colours (a Jupyter kernel sets ``FORCE_COLOR``, and ``flwr``'s coloured JSON no longer parses) and, if
    given, flwr's home (its connections)."""
    env = {
        **{key: value for key, value in os.environ.items() if key not in COLOUR_FORCING},
        "FLWR_TELEMETRY_ENABLED": "0",
        "NO_COLOR": "1",
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    if home is not None:
        env["FLWR_HOME"] = str(home)
    return env


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
    done = subprocess.run(
        command, capture_output=True, text=True, check=False, timeout=600, env=flower_environment()
    )
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
    log: subprocess.Popen | None = None,
) -> tuple[str, str]:
    """Ask for the run's status until it is finished; say each change on stderr.

    Args:
        run_id: The run ``flwr run`` started.
        superlink: flwr's connection name (``None``: its default).
        flwr: The ``flwr`` command.
        poll: Seconds between two queries once ``log`` ended (or without it).
        timeout: Seconds after which to give up.
        log: The ``flwr log`` process that follows the run: while it runs, the next query waits for its end, at most
            :data:`FOLLOWED_POLL` seconds.

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
        if log is not None and log.poll() is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                log.wait(timeout=min(max(poll, FOLLOWED_POLL), timeout - waited))
        else:
            time.sleep(min(poll, timeout - waited))


def run_app(
    app: Path,
    superlink: str | None,
    *,
    run_config: list[str],
    flwr: str = "flwr",
    poll: float = 5.0,
    timeout: float = 7 * 24 * 3600.0,
    stream: bool = False,
    who: str = "uldp flower-run",
) -> int:
    """Submit ``app`` to the SuperLink connection ``superlink`` (flwr's config) and wait for its run; with ``stream``
    the ServerApp's log on stderr as it comes. Returns 0 when the run completed, else 1 (saying why on stderr)."""
    follower = None
    try:
        run_id = submit(app, superlink, run_config=run_config, flwr=flwr)
        # the ServerApp's log, which ends with the run: its lines on our stderr with ``stream``, and its end the
        # moment to ask for the run's status either way
        follower = subprocess.Popen(
            [flwr, "log", str(run_id), *([superlink] if superlink else [])],
            stdout=sys.stderr if stream and _has_fileno(sys.stderr) else subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=flower_environment(),
        )
        status, details = wait_for_run(
            run_id, superlink, flwr=flwr, poll=poll, timeout=timeout, log=follower
        )
    except FileNotFoundError as error:
        print(
            f"{who}: the command {error.filename!r} was not found: it comes with Flower, "
            f"pip install 'uldp[deploy]' (or pass --flwr PATH)",
            file=sys.stderr,
        )
        return 1
    except (FlowerCommandFailed, subprocess.TimeoutExpired, OSError) as error:
        print(f"{who}: {error}", file=sys.stderr)
        if UNAVAILABLE in str(error).lower() and (problem := connection_problem(superlink)):
            print(f"{who}: {problem}", file=sys.stderr)  # issue 42: what flwr does not say
        return 1
    finally:
        if follower is not None and follower.poll() is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                # the log's last lines (the summary) reach the SuperLink late
                follower.wait(timeout=min(poll, 3.0) if stream else 0)
            follower.terminate()
            follower.wait()
    if status == COMPLETED:
        return 0
    where = f" {superlink}" if superlink else ""
    print(
        f"{who}: run {run_id} {status}{': ' + details if details else ''}; its log: "
        f"{flwr} log {run_id}{where}",
        file=sys.stderr,
    )
    return 1


def _has_fileno(stream: Any) -> bool:
    """Whether ``stream`` is a real file a child process can write to (not pytest's capture)."""
    try:
        stream.fileno()
    except (AttributeError, OSError, ValueError):
        return False
    return True


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
