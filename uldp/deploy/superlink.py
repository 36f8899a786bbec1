"""The processes of ``uldp deploy``: a SuperLink with the uldp ServerApp, and a silo's SuperNode with its ClientApp.

Server (:func:`run_server`): write the app bundle (a ``pyproject.toml`` naming :mod:`uldp.deploy.app`'s ServerApp
and ClientApp, its run config holding the settings file's text), start ``flower-superlink`` on one port (the Fleet,
Control and ServerApp APIs of flwr 1.41 share it; TLS on all of them, or ``--insecure``), register the silos'
SuperNode public keys when it authenticates them, submit the app and wait for its run as ``uldp flower-run`` does
(:func:`uldp.flower.cli.run_app`), read the ServerApp's result, and stop the SuperLink.

Silo (:func:`run_silo`): start ``flower-supernode --isolation process`` with the node config
:func:`silo_node_config` builds from the silo's settings, and its long-lived ClientApp process (``uldp
flower-worker``, :mod:`uldp.flower.worker`: the silo's records are read once per run) until the SuperNode stops.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from uldp.common.atomic import check_writable
from uldp.common.checks import check_number
from uldp.flower.launch import (
    COLOUR_FORCING,
    app_pyproject,
    flower_environment,
    worker_command,
)

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    from uldp.deploy.app import AppSettings

#: The app bundle's module: it only names :mod:`uldp.deploy.app`'s apps (installed next to uldp everywhere).
APP_MODULE = "uldp_deploy_app"
#: flwr's name of the SuperLink connection in the bundle's flwr home.
CONNECTION = "deploy"


@dataclass(frozen=True)
class Certificates:
    """The SuperLink's TLS files (PEM): the CA's certificate, the server's certificate and its private key."""

    ca: Path
    cert: Path
    key: Path


def _split(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"an address is host:port, got {address!r}")
    return host, int(port)


def _toml(value: Any) -> str:
    """A TOML value: strings as basic strings (JSON's escapes are TOML's), numbers as they are."""
    return json.dumps(value)


def write_bundle(folder: Path, run_config: dict[str, Any]) -> Path:
    """The app bundle ``flwr run`` submits: ``pyproject.toml`` and :data:`APP_MODULE`, its run config ``run_config``."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{APP_MODULE}.py").write_text(
        '"""The uldp Flower app of `uldp deploy` (uldp.deploy.app)."""\n\n'
        "from uldp.deploy.app import client, server\n\n__all__ = ['client', 'server']\n"
    )
    config = "\n".join(f"{key} = {_toml(value)}" for key, value in run_config.items())
    (folder / "pyproject.toml").write_text(
        app_pyproject(
            "uldpdeploy", APP_MODULE, "uldp deploy: the uldp ServerApp and ClientApp", config
        )
    )
    return folder


def wait_listening(
    host: str, port: int, *, seconds: float, process: subprocess.Popen, log: Path
) -> None:
    """Wait until ``host:port`` accepts connections (the SuperLink's port, or a SuperNode's Runtime API).

    Raises:
        RuntimeError: the process exited first, or ``seconds`` passed (the end of its log in the message).
    """
    deadline = time.monotonic() + seconds
    while True:
        with socket.socket() as sock:
            if sock.connect_ex((host, port)) == 0:
                return
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(
                f"nothing listens on {host}:{port} (exit status {process.poll()}); the log {log}:\n"
                f"{log.read_text()[-2000:]}"
            )
        time.sleep(0.2)


def _exit_on_sigterm() -> None:
    """Make SIGTERM exit through ``finally`` (``SystemExit``), so that :func:`_process` stops the SuperLink,
    SuperNode and worker sessions it started: Python's default would end this process alone and leave them running.
    Only in the main thread (where a signal handler may be set); a caller in another thread keeps its own."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))


@contextlib.contextmanager
def _process(
    command: Sequence[str], *, log: Path, env: dict[str, str], append: bool = False
) -> Iterator[subprocess.Popen]:
    """A process in its own session (its children go with it), its output in ``log``; killed on the way out."""
    with open(log, "a" if append else "w") as output:
        process = subprocess.Popen(
            list(command), env=env, start_new_session=True, stdout=output, stderr=subprocess.STDOUT
        )
    try:
        yield process
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def run_server(
    settings: str,
    *,
    address: str,
    work: Path | None = None,
    checkpoint: Path | None = None,
    silos: str = "",
    join_timeout: float = 120.0,
    timeout: float = 7 * 24 * 3600.0,
    certificates: Certificates | None = None,
    supernode_keys: Sequence[Path] = (),
    quiet: bool = False,
) -> tuple[int, dict]:
    """Start a SuperLink on ``address``, run the uldp ServerApp on it with ``settings`` (the settings file's text),
    stop the SuperLink.

    Returns:
        The exit status (0: the run completed) and the result: the ServerApp's report (rounds done, epsilons,
        seconds, each round's row, the silos), or ``error`` when the run did not complete.

    Raises:
        ValueError: a bad address or timeout, a SuperNode key that is not a file, or a checkpoint path that
            cannot be written.
    """
    from uldp.deploy.app import CHECKPOINT_KEY, JOIN_TIMEOUT_KEY, OUT_KEY, SETTINGS_KEY, SILOS_KEY
    from uldp.flower.launch import run_app

    host, port = _split(address)
    check_number("--join-timeout", join_timeout, above=0, finite=True)
    _exit_on_sigterm()
    if supernode_keys and certificates is None:
        raise ValueError(
            "--supernode-key needs TLS (--ssl-*): Flower authenticates SuperNodes over TLS only"
        )
    for key in supernode_keys:
        if not key.is_file():
            raise ValueError(f"--supernode-key {key} is not a file")
    if checkpoint is not None:  # before any process starts, not in the ServerApp
        check_writable(checkpoint, "--checkpoint")
    work = Path(tempfile.mkdtemp(prefix="uldp-deploy-")) if work is None else work.resolve()
    out = work / "result.json"
    out.unlink(missing_ok=True)
    run_config = {
        SETTINGS_KEY: settings,
        OUT_KEY: str(out),
        CHECKPOINT_KEY: str(checkpoint.resolve()) if checkpoint else "",
        SILOS_KEY: silos,
        JOIN_TIMEOUT_KEY: float(join_timeout),
    }
    bundle = write_bundle(work / "app", run_config)
    home = work / "flwr-home"
    home.mkdir(parents=True, exist_ok=True)
    local = "127.0.0.1" if host in ("0.0.0.0", "::") else host  # where this machine connects
    tls = (
        ["--insecure"]
        if certificates is None
        else [
            "--ssl-ca-certfile",
            str(certificates.ca),
            "--ssl-certfile",
            str(certificates.cert),
            "--ssl-keyfile",
            str(certificates.key),
        ]
    )
    connection = (
        "insecure = true"
        if certificates is None
        else f"root-certificates = {_toml(str(certificates.ca.resolve()))}"
    )
    (home / "config.toml").write_text(
        f'[superlink]\ndefault = "{CONNECTION}"\n[superlink.{CONNECTION}]\n'
        f'address = "{local}:{port}"\n{connection}\n'
    )
    env = flower_environment(home)
    command = [
        "flower-superlink",
        *tls,
        "--disable-runtime-dependency-installation",
        "--host",
        host,
        "--port",
        str(port),
        *(["--enable-supernode-auth"] if supernode_keys else []),
    ]
    log = work / "superlink.log"
    changed = (
        "FLWR_HOME",
        "PATH",
        "NO_COLOR",
        *COLOUR_FORCING,
    )  # run_app's flwr commands inherit them
    saved = [os.environ.get(name) for name in changed]
    try:
        with _process(command, log=log, env=env) as superlink:
            wait_listening(local, port, seconds=120, process=superlink, log=log)
            for name in COLOUR_FORCING:
                os.environ.pop(name, None)
            os.environ.update({name: env[name] for name in ("FLWR_HOME", "PATH", "NO_COLOR")})
            for key in supernode_keys:
                _register(key, env)
            code = run_app(
                bundle,
                CONNECTION,
                run_config=[],
                poll=1.0,
                timeout=timeout,
                stream=not quiet,
                who="uldp deploy server",
            )
    finally:
        for name, value in zip(changed, saved, strict=True):
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    if code == 0 and out.exists():
        return 0, json.loads(out.read_text())
    return 1, {"error": f"the run did not complete; the SuperLink's log: {log}", "work": str(work)}


def _register(key: Path, env: dict[str, str]) -> None:
    """``flwr supernode register KEY``: the SuperLink admits the SuperNode of that public key."""
    done = subprocess.run(
        ["flwr", "supernode", "register", str(key), CONNECTION],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    if done.returncode != 0:
        raise RuntimeError(
            f"flwr supernode register {key} failed: {(done.stderr or done.stdout).strip()[-1000:]}"
        )


def _node_value(value: Any) -> str:
    """A node config value (``--node-config 'key=value ...'`` is parsed as TOML): text quoted, numbers bare."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    return json.dumps(str(value))


def silo_node_config(
    settings: AppSettings,
    *,
    config: Path,
    silo_id: int | None,
    name: str | None,
    data: Path | None,
    relay_key: Path,
    policy: Path | None = None,
    ledger: Path | None = None,
    identity: Path | None = None,
    roster: Path | None = None,
    allow_no_dp: bool = False,
) -> dict[str, Any]:
    """The silo's node config (:mod:`uldp.flower.client`'s keys) from its settings and options.

    Raises:
        ValueError: a table run without ``--data`` or a built-in dataset's without ``--silo-id`` (or the other
            way round), a relay key that does not read, a bad policy file, or one of identity and roster alone.
    """
    from uldp.deploy.app import DATASET_SILO_KEY
    from uldp.flower.messages import (
        ALLOW_NO_DP_KEY,
        INSECURE_NOISE_KEY,
        KEY_FILE_KEY,
        LEDGER_KEY,
        SILO_KEY,
    )
    from uldp.flower.pseudonyms import read_key_file
    from uldp.flower.secure import IDENTITY_KEY, ROSTER_KEY, TEST_KEYS_KEY
    from uldp.policy import NODE_CONFIG_PREFIX, SiloPolicy
    from uldp.secure.psu_messages import TEST_GROUP

    node: dict[str, Any] = {}
    if settings.table is not None:
        if data is None or silo_id is not None:
            raise ValueError("a table run: give this hospital's --data FILE (and no --silo-id)")
        node["data"] = str(data.resolve())
        name = name or data.stem
    else:
        if silo_id is None or data is not None:
            raise ValueError("a built-in dataset's run: give --silo-id (and no --data)")
        node[DATASET_SILO_KEY] = silo_id
        name = name or f"silo-{silo_id}"
    try:
        read_key_file(relay_key)  # its checks now, not at the first message
    except OSError as error:
        raise ValueError(f"cannot read the relay key --relay-key {relay_key}: {error}") from error
    node[SILO_KEY] = name
    node[KEY_FILE_KEY] = str(relay_key.resolve())
    node[LEDGER_KEY] = str(
        (ledger or config.with_name(f"{config.stem}.{name}.ledger.json")).resolve()
    )
    if policy is not None:
        try:
            written = json.loads(policy.read_text())
            own = SiloPolicy.from_json(written)
        except (OSError, json.JSONDecodeError, TypeError, ValueError) as error:
            raise ValueError(f"cannot read the silo policy {policy}: {error}") from error
        for (
            field,
            value,
        ) in own.to_json().items():  # the fields it names: the others keep the node's defaults
            if (
                field in written
            ):  # (a roster makes malicious_server the default: a file silent on it keeps that)
                node[NODE_CONFIG_PREFIX + field.replace("_", "-")] = value
    if (identity is None) != (roster is None):
        raise ValueError("--identity and --roster go together (or neither)")
    if identity is not None and roster is not None:
        node[IDENTITY_KEY], node[ROSTER_KEY] = str(identity.resolve()), str(roster.resolve())
    if allow_no_dp:
        node[ALLOW_NO_DP_KEY] = True
    if (
        settings.insecure_reproducible_noise
    ):  # the silo's own copy of the settings says so (tests only)
        node[INSECURE_NOISE_KEY] = int(settings.strategy["seed"])
    protocol = settings.strategy.get("protocol")
    test_group = settings.strategy.get("psu_group") == TEST_GROUP.name
    # the silo's own copy of the settings asks for test keys or the union's test group (tests only)
    if (protocol is not None and protocol.insecure_test_key) or test_group:
        node[TEST_KEYS_KEY] = True
    return node


def run_silo(
    node_config: dict[str, Any],
    *,
    server: str,
    root_certificates: Path | None = None,
    auth_key: Path | None = None,
    max_wait: float = 120.0,
) -> int:
    """Start the silo's SuperNode (``--isolation process``) and its ClientApp process (``uldp flower-worker``: the
    silo's records read once a run) until the SuperNode stops. A SuperNode that stops with an error within
    ``max_wait`` seconds (no SuperLink yet, or its key not registered yet) is started again every 5 s.

    Returns:
        The SuperNode's exit status (its log's end on stderr when not 0: a TLS error says so there).

    Raises:
        ValueError: a bad address or ``max_wait``, or an authentication key without TLS.
    """
    _split(server)
    check_number("--max-wait", max_wait, above=0, finite=True)
    _exit_on_sigterm()
    if auth_key is not None and root_certificates is None:
        raise ValueError(
            "--auth-key needs TLS (--root-certificates): Flower authenticates SuperNodes over TLS only"
        )
    tls = (
        ["--insecure"]
        if root_certificates is None
        else ["--root-certificates", str(root_certificates)]
    )
    auth = [] if auth_key is None else ["--auth-supernode-private-key", str(auth_key)]
    config = " ".join(f"{key}={_node_value(value)}" for key, value in node_config.items())
    folder = Path(tempfile.mkdtemp(prefix="uldp-silo-"))
    deadline, attempt = time.monotonic() + max_wait, 0
    while True:
        attempt += 1
        with socket.socket() as sock:  # the SuperNode's Runtime API, for its worker only
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        command = [
            "flower-supernode",
            *tls,
            *auth,
            "--superlink",
            server,
            "--isolation",
            "process",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--max-wait-time",
            str(max_wait),
            "--node-config",
            config,
        ]
        log = folder / f"supernode-{attempt}.log"
        print(
            f"uldp deploy silo {node_config.get('silo')!r}: SuperNode log {log}, its ClientApp's "
            f"{folder / 'worker.log'}",
            file=sys.stderr,
            flush=True,
        )
        code = _supernode(command, port, log, folder)
        if code == 0 or time.monotonic() >= deadline:
            break
        print(
            f"uldp deploy silo: the SuperNode stopped (exit status {code}); starting it again in 5 s "
            f"(until --max-wait {max_wait:g} s)",
            file=sys.stderr,
            flush=True,
        )
        time.sleep(5.0)
    if (
        code
    ):  # e.g. a TLS certificate that does not match the SuperLink's, or a key never registered
        tail = "".join(log.read_text().splitlines(keepends=True)[-15:])
        print(
            f"uldp deploy silo: the SuperNode stopped (exit status {code}); its log {log} ends:\n{tail}",
            file=sys.stderr,
        )
    return code


def _supernode(command: list[str], port: int, log: Path, folder: Path) -> int:
    """One SuperNode and its worker process, until the SuperNode stops; its exit status. Both keep flwr's home (where
    the app bundle is unpacked) in the silo's own ``folder``: silos of one machine sharing the default home unpacked
    the bundle there together, and one imported it half written (a CI run: "Unable to load attribute client from
    module uldp_deploy_app", the silo left out)."""
    env = flower_environment(folder / "flwr-home")
    with _process(command, log=log, env=env) as supernode:
        try:
            wait_listening("127.0.0.1", port, seconds=120, process=supernode, log=log)
        except RuntimeError:
            return int(supernode.poll() or 1)
        with _process(worker_command(port), log=folder / "worker.log", env=env, append=True):
            while supernode.poll() is None:
                time.sleep(0.5)
        return int(supernode.returncode)
