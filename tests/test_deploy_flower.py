"""``uldp deploy`` on Flower as real processes (a SuperLink and SuperNodes started by ``uldp deploy server`` /
``silo``, TLS and SuperNode authentication) and its command lines; the run equals uldp.fit under the private set
union's user numbers. The same app in process: ``tests/test_deploy_app.py``."""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest
from deploy_runs import TABLE, fitted
from flower_hospitals import HOSPITALS, hospital_files  # noqa: F401  (fixture)
from tls_certificates import write_certificates
from torch import nn

import uldp.flower as uf
from uldp.deploy.app import AppSettings


def test_an_option_of_the_retired_runtime_names_its_replacement(tmp_path):
    from uldp.deploy.cli import main

    config = tmp_path / "run.json"
    config.write_text(json.dumps({"table": TABLE, "method": "ULDP-AVG", "rounds": 1}))
    assert main(["server", "--config", str(config), "--master-key-file", "k"]) == 2


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.slow  # a real SuperLink, four SuperNodes and their workers: about a minute, longer on a loaded machine
def test_deploy_server_and_silos_run_real_processes_with_tls_and_supernode_authentication(
    hospital_files,  # noqa: F811
    tmp_path,
):
    """The README's steps for ``uldp deploy`` on loopback, as the hospitals' IT teams run them: ``uldp deploy keys``
    (the relay key and a SuperNode key pair per hospital); a throwaway CA and the server's certificate; ``uldp deploy
    server`` starts a SuperLink with TLS that registers the hospitals' public keys (``flwr supernode register``) and
    admits only those, and runs the ServerApp; three ``uldp deploy silo`` start their SuperNodes (TLS, their own
    keys), each reading its own table.

    - A ``flwr`` connection to that SuperLink without the CA certificate is reported by ``uldp flower-run`` as a TLS
      failure, not as a missing server.
    - A fourth silo whose key was never registered is refused by the SuperLink ("Failed to activate SuperNode",
      flwr's exit code 305); ``uldp deploy silo`` gives up after its ``--max-wait``, printing that log's end.
    - DEFAULT (each silo's ``--allow-no-dp``; user-blind, so the union's numbering, fresh each run, cannot change it)
      ends at fit's model bit for bit; the server exits 0 with one JSON document.
    """
    keys, home = tmp_path / "keys", tmp_path / "flwr-home"
    env = {**os.environ, "FLWR_TELEMETRY_ENABLED": "0"}
    made = subprocess.run(
        [sys.executable, "-m", "uldp.deploy.cli", "keys", "--silos", "4", "--out", str(keys)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    assert (
        len(made.stdout.split()) == 9
    )  # the relay key and 4 key pairs (the fourth never registered)
    data = {
        "table": TABLE,
        "method": "DEFAULT",
        "rounds": 1,
        "seed": 5,
        "local_epochs": 1,
        "batch_size": 8,
        "secure": False,
        "insecure_reproducible_noise": True,
    }
    config = tmp_path / "run.json"
    config.write_text(json.dumps(data))
    port = _free_port()
    work = tmp_path / "work"
    ca, cert, key = write_certificates(tmp_path)
    deploy = [sys.executable, "-m", "uldp.deploy.cli"]
    processes: list[subprocess.Popen] = []

    def silo(number: int, data: pathlib.Path, *options: str) -> None:
        with open(tmp_path / f"silo-{number}.log", "w") as log:
            processes.append(
                subprocess.Popen(
                    [
                        *(*deploy, "silo", "--config", str(config)),
                        *("--server", f"127.0.0.1:{port}", "--data", str(data)),
                        *("--relay-key", str(keys / "relay.key")),
                        *("--auth-key", str(keys / f"supernode-{number}")),
                        *("--root-certificates", str(ca), *options),
                    ],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=env,
                    start_new_session=True,
                )
            )

    server = subprocess.Popen(
        [
            *(*deploy, "server", "--config", str(config), "--address", f"127.0.0.1:{port}"),
            *("--work", str(work), "--silos", ",".join(HOSPITALS), "--json"),
            *("--ssl-ca-certfile", str(ca), "--ssl-certfile", str(cert), "--ssl-keyfile", str(key)),
            *(
                arg
                for s in range(3)
                for arg in ("--supernode-key", str(keys / f"supernode-{s}.pub"))
            ),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        while socket.socket().connect_ex(("127.0.0.1", port)) != 0:
            assert time.monotonic() < deadline and server.poll() is None, server.stderr
            time.sleep(0.2)
        # the server's `flwr` needs the CA (step 2): without it `uldp flower-run` says the TLS handshake failed
        home.mkdir()
        (home / "config.toml").write_text(
            f'[superlink]\ndefault = "nocert"\n[superlink.nocert]\naddress = "127.0.0.1:{port}"\n'
        )
        refused = subprocess.run(
            [sys.executable, "-m", "uldp.cli", "flower-run", str(work / "app"), "nocert"],
            capture_output=True,
            text=True,
            timeout=300,
            env={
                **env,
                "FLWR_HOME": str(home),
                "PATH": f"{pathlib.Path(sys.executable).parent}{os.pathsep}{env['PATH']}",
            },
        )
        assert refused.returncode == 1, refused.stdout + refused.stderr
        assert "TLS" in refused.stderr and "no server at" not in refused.stderr, refused.stderr
        for s, hospital in enumerate(sorted(HOSPITALS)):
            silo(s, hospital_files / f"{hospital}.csv", "--allow-no-dp")
        silo(3, hospital_files / "Royal.csv", "--name", "Intruder", "--max-wait", "1")
        stdout, stderr = server.communicate(timeout=540)
        intruder = processes[3].wait(timeout=120)
    finally:  # SIGTERM first: each command then stops the SuperLink or SuperNode it started, in its own session
        for process in [server, *processes]:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
        for process in [server, *processes]:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
    logs = stderr[-3000:] + "".join(
        (tmp_path / f"silo-{s}.log").read_text()[-1500:] for s in range(4)
    )
    intruder_log = (tmp_path / "silo-3.log").read_text()
    assert intruder != 0 and "Failed to activate SuperNode" in intruder_log, intruder_log[-2000:]
    assert "Exit Code: 305" in intruder_log, intruder_log[-2000:]
    assert server.returncode == 0, logs
    document = json.loads(stdout)  # whole: every log line went to stderr
    assert document["command"] == "deploy server" and document["rounds_done"] == 1, logs
    assert document["silos"] == sorted(HOSPITALS) and document["epsilon"] == [None]
    settings = AppSettings.from_json(data)
    assert settings.table is not None
    parts = [settings.table.table().read(hospital_files / f"{h}.csv") for h in sorted(HOSPITALS)]
    ids = sorted({str(i) for part in parts for i in part.patient_ids})  # DEFAULT reads no user
    numbers = [np.array([ids.index(str(i)) for i in part.patient_ids]) for part in parts]
    expected, _ = fitted(settings, parts, numbers, nn.BCEWithLogitsLoss())
    np.testing.assert_array_equal(np.load(document["model"]), expected)


def test_deploy_keys_writes_what_flower_loads_and_never_overwrites(tmp_path):
    """The relay key (mode 0600) and per silo an OpenSSH ECDSA pair on a NIST curve, the format flwr 1.41's SuperNode
    (load_ssh_private_key) and ``flwr supernode register`` (load_ssh_public_key) read; a second call without
    ``force`` refuses, naming --force."""
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.serialization import (
        load_ssh_private_key,
        load_ssh_public_key,
    )

    from uldp.deploy.credentials import write_keys

    paths = write_keys(tmp_path, n_silos=2)
    assert [p.name for p in paths] == [
        "relay.key",
        "supernode-0",
        "supernode-0.pub",
        "supernode-1",
        "supernode-1.pub",
    ]
    assert uf.read_key_file(paths[0]) and paths[0].stat().st_mode & 0o077 == 0
    private = load_ssh_private_key(paths[1].read_bytes(), None)
    public = load_ssh_public_key(paths[2].read_bytes())
    assert isinstance(private, ec.EllipticCurvePrivateKey) and private.curve.name == "secp384r1"
    assert private.public_key() == public and paths[1].stat().st_mode & 0o077 == 0
    relay = paths[0].read_bytes()
    with pytest.raises(ValueError, match="--force"):
        write_keys(tmp_path, n_silos=2)
    assert paths[0].read_bytes() == relay
    assert write_keys(tmp_path, n_silos=2, force=True) and paths[0].read_bytes() != relay


TLS_FILES = ("--ssl-ca-certfile", "a", "--ssl-certfile", "b", "--ssl-keyfile", "c")


@pytest.mark.parametrize(
    ("argv", "detail"),
    [
        (["server", "--address", "no-port"], "host:port"),
        (["server", "--join-timeout", "-1"], "join-timeout"),
        (["server", "--supernode-key", "a.pub"], "needs TLS"),
        (["server", "--supernode-key", "a.pub", *TLS_FILES], "is not a file"),
        (["server", "--checkpoint", "."], "is a directory"),
        (["server", "--ssl-certfile", "server.crt"], "all three"),
        (["silo", "--relay-key", "key", "--silo-id", "0"], "--data FILE"),
        (["silo", "--relay-key", "absent", "--data", "a.csv"], "absent"),
        (["keys", "--silos", "0", "--out", "keys"], "--silos"),
    ],
)
def test_bad_command_lines_are_one_line_errors_before_any_process(argv, detail, tmp_path, capsys):
    """Refused before a SuperLink or SuperNode starts: one line on stderr, exit status 2."""
    from uldp.deploy.cli import main

    config = tmp_path / "run.json"
    config.write_text(json.dumps({"table": TABLE, "method": "ULDP-AVG", "rounds": 1}))
    uf.write_key_file(tmp_path / "key")
    with contextlib.chdir(tmp_path):
        command = argv if argv[0] == "keys" else [*argv, "--config", str(config)]
        assert main(command) == 2
    error = capsys.readouterr().err
    assert detail in error and error.count("\n") == 1, error


def _stand_in_supernode(monkeypatch, codes: list[int]) -> list[float]:
    """``uldp deploy silo``'s SuperNode replaced by one that exits with ``codes`` in turn (the last one from then on),
    on a clock that only its 5 s waits advance; the times of the attempts."""
    from types import SimpleNamespace

    from uldp.deploy import superlink

    clock, attempts = [0.0], []

    def supernode(command, port, log, folder):
        attempts.append(clock[0])
        log.write_text("Failed to initialize the connection to the SuperLink.\n")
        return codes[min(len(attempts), len(codes)) - 1]

    def sleep(seconds):
        clock[0] += seconds

    monkeypatch.setattr(superlink, "_supernode", supernode)
    monkeypatch.setattr(superlink, "_exit_on_sigterm", lambda: None)
    monkeypatch.setattr(superlink, "time", SimpleNamespace(monotonic=lambda: clock[0], sleep=sleep))
    return attempts


def test_a_silo_waits_for_a_superlink_that_is_not_up_yet(monkeypatch, capsys):
    """A SuperLink not up yet (the SuperNode stops with an error twice): ``uldp deploy silo`` starts its SuperNode
    again every 5 s, saying so, and runs once it connects."""
    from uldp.deploy.superlink import run_silo

    attempts = _stand_in_supernode(monkeypatch, [1, 1, 0])
    assert run_silo({"silo": "a"}, server="127.0.0.1:9092", max_wait=30.0) == 0
    assert attempts == [0.0, 5.0, 10.0]
    assert capsys.readouterr().err.count("starting it again in 5 s (until --max-wait 30 s)") == 2


def test_a_silo_gives_up_after_max_wait_printing_its_supernodes_log(monkeypatch, capsys):
    """A SuperLink that never comes: the silo stops once ``--max-wait`` has passed (a last attempt at the
    deadline), not at the first refusal, with the SuperNode's exit status and the end of its log."""
    from uldp.deploy.superlink import run_silo

    attempts = _stand_in_supernode(monkeypatch, [1])
    assert run_silo({"silo": "a"}, server="127.0.0.1:9092", max_wait=20.0) == 1
    assert attempts == [0.0, 5.0, 10.0, 15.0, 20.0]
    said = capsys.readouterr().err
    assert "the SuperNode stopped (exit status 1); its log" in said, said
    assert said.rstrip().endswith("Failed to initialize the connection to the SuperLink."), said


def test_silos_of_one_machine_keep_flwrs_home_apart(monkeypatch, tmp_path):
    """Each silo's SuperNode and its worker run with flwr's home in the silo's own folder, where flwr unpacks the
    app bundle: three silos sharing one home unpacked it together, and one imported it half written (a CI run)."""
    import contextlib
    from types import SimpleNamespace

    from uldp.deploy import superlink

    homes: list[tuple[str, str]] = []

    @contextlib.contextmanager
    def process(command, *, log, env, append=False):
        homes.append((command[0], env["FLWR_HOME"]))
        yield SimpleNamespace(poll=lambda: 0, returncode=0)

    monkeypatch.setattr(superlink, "_process", process)
    monkeypatch.setattr(superlink, "wait_listening", lambda *args, **kwargs: None)
    for silo in ("a", "b"):
        folder = tmp_path / silo
        folder.mkdir()
        assert superlink._supernode(["flower-supernode"], 1, folder / "supernode.log", folder) == 0
    assert [home for _, home in homes] == [str(tmp_path / silo / "flwr-home") for silo in "aabb"]
    assert [command for command, _ in homes][::2] == ["flower-supernode"] * 2


def test_flower_commands_run_without_forced_colours(monkeypatch):
    """A Jupyter kernel sets FORCE_COLOR: flwr then colours its ``--format json`` output, which no longer parses (the
    deploying chapter's server failed so). The Flower commands of ``uldp deploy`` run without it."""
    from uldp.flower.launch import flower_environment

    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.setenv("CLICOLOR_FORCE", "1")
    env = flower_environment()
    assert "FORCE_COLOR" not in env and "CLICOLOR_FORCE" not in env and env["NO_COLOR"] == "1"
