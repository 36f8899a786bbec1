"""uldp.flower.cli with the real Flower on loopback: ``uldp flower-run`` exits 1 when the ServerApp of the run that
``flwr run`` submitted to a real SuperLink fails (``flwr run`` itself exits 0 once the run is accepted). The
SuperLink runs the ServerApp of a two-line app; no SuperNode is needed. (tests/test_faults.py tests the launcher
with a fake ``flwr``; tests/test_flower_loopback.py submits with it a run that completes, with ``uldp
flower-worker`` behind real SuperNodes.) Where flwr finds "the SuperLink unavailable", ``uldp flower-run`` says
why: nothing listening, or TLS (against a loopback TLS server in a thread, with a throwaway CA)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from uldp.flower.launch import app_pyproject

APP = """
from flwr.serverapp import ServerApp
from flwr.clientapp import ClientApp

server = ServerApp()
client = ClientApp()


@server.main()
def main(grid, context):
    if context.run_config["fail"]:
        raise RuntimeError("this ServerApp fails on purpose")
"""

PYPROJECT = app_pyproject("exitapp", "exit_app", "uldp flower-run test", "fail = false")


def test_flower_run_exits_1_when_a_real_superlinks_run_fails(tmp_path, monkeypatch, capsys):
    from uldp.cli import main

    app, home = tmp_path / "app", tmp_path / "flwr-home"
    app.mkdir()
    home.mkdir()
    (app / "exit_app.py").write_text(APP)
    (app / "pyproject.toml").write_text(PYPROJECT)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    (home / "config.toml").write_text(
        f'[superlink]\ndefault = "local"\n[superlink.local]\n'
        f'address = "127.0.0.1:{port}"\ninsecure = true\n'
    )
    bin_dir = Path(sys.executable).parent  # flower-superlink starts flwr-serverapp from PATH
    monkeypatch.setenv("FLWR_TELEMETRY_ENABLED", "0")
    monkeypatch.setenv("FLWR_HOME", str(home))
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    with open(tmp_path / "superlink.log", "w") as log:
        superlink = subprocess.Popen(
            [
                str(bin_dir / "flower-superlink"),
                "--insecure",
                "--disable-runtime-dependency-installation",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 120
        while socket.socket().connect_ex(("127.0.0.1", port)) != 0:
            assert time.monotonic() < deadline, (tmp_path / "superlink.log").read_text()
            time.sleep(0.2)
        flwr = str(bin_dir / "flwr")
        assert (
            main(
                [
                    "flower-run",
                    str(app),
                    "local",
                    "--poll",
                    "0.5",
                    "--flwr",
                    flwr,
                    "--run-config",
                    "fail=true",
                ]
            )
            == 1
        )
        said = capsys.readouterr().err
        assert "finished:failed" in said and f"{flwr} log " in said, said
    finally:
        os.killpg(
            superlink.pid, signal.SIGKILL
        )  # its session: the ServerApp processes it started too
        superlink.wait()


def test_without_flwr_flower_run_says_in_one_line_which_extra_installs_it(tmp_path, capsys):
    from uldp.cli import main

    assert main(["flower-run", str(tmp_path), "--flwr", str(tmp_path / "flwr")]) == 1
    said = capsys.readouterr().err.strip().splitlines()
    assert len(said) == 1 and "pip install 'uldp[deploy]'" in said[0], said


@pytest.mark.parametrize(
    "configured", ["no certificate", "wrong CA", "right CA", "nothing listening"]
)
def test_flwr_s_unavailable_superlink_is_diagnosed(configured, tmp_path, monkeypatch):
    """``uldp flower-run``'s diagnosis of flwr's "Connection to the SuperLink is unavailable", against a TLS server
    with the throwaway certificate on loopback (a thread; the port is the OS's choice)."""
    import ssl
    import threading

    pytest.importorskip("cryptography")
    from tls_certificates import write_certificates

    from uldp.flower.launch import connection_problem

    ca, certificate, key = write_certificates(tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    other_ca = write_certificates(other)[0]
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(certificate, key)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    if configured == "nothing listening":
        listener.close()
    else:
        listener.listen()

        def serve() -> None:
            connection, _ = listener.accept()
            with connection, contextlib.suppress(OSError):
                context.wrap_socket(connection, server_side=True).close()

        threading.Thread(target=serve, daemon=True).start()
    root = {"no certificate": "", "wrong CA": f'root-certificates = "{other_ca}"\n'}.get(
        configured, f'root-certificates = "{ca}"\n'
    )
    (tmp_path / "config.toml").write_text(
        f'[superlink]\ndefault = "server"\n[superlink.server]\naddress = "127.0.0.1:{port}"\n{root}'
    )
    monkeypatch.setenv("FLWR_HOME", str(tmp_path))
    problem = connection_problem(None, timeout=10)
    try:
        if configured == "right CA":
            assert problem is None
        elif configured == "nothing listening":
            assert problem is not None and problem.startswith(f"no server at 127.0.0.1:{port}")
        else:
            assert problem is not None and problem.startswith(f"TLS failed at 127.0.0.1:{port}")
            assert ("no root-certificates" in problem) == (configured == "no certificate"), problem
    finally:
        listener.close()


def test_hidden_sample_and_colluders_reach_flwr_run_as_the_apps_run_config(tmp_path):
    """``--hidden-sample`` and ``--colluders T`` are run config entries of ``flwr run`` (the example app passes them
    to UldpStrategy as hidden_sample and min_colluders), after the user's own; a fake flwr records its arguments."""
    import json

    from uldp.cli import main

    calls = tmp_path / "calls.jsonl"
    fake = tmp_path / "flwr"
    fake.write_text(
        f"#!{sys.executable}\n"
        "import json, sys\n"
        f"open({str(calls)!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n"
        "print(json.dumps({'success': True, 'run-id': 7} if sys.argv[1] == 'run' else "
        "{'runs': [{'run-id': 7, 'status': 'finished:completed'}]}))\n"
    )
    fake.chmod(0o755)
    argv = ["flower-run", str(tmp_path), "--flwr", str(fake), "--poll", "0.01"]
    assert main([*argv, "--run-config", "rounds=1", "--hidden-sample", "--colluders", "2"]) == 0
    assert main(argv) == 0
    assert main([*argv, "--psu-group", "modp3072"]) == 0
    runs = [c for c in map(json.loads, calls.read_text().splitlines()) if c[0] == "run"]
    overrides = [[c[i + 1] for i, a in enumerate(c) if a == "--run-config"] for c in runs]
    assert overrides == [
        ["rounds=1", "hidden-sample=true", "colluders=2"],
        [],
        ['psu-group="modp3072"'],
    ]
    with pytest.raises(SystemExit):
        main([*argv, "--colluders", "two"])
    assert (
        main([*argv, "--psu-group", 'x" bad']) == 2
    )  # one TOML string, or refused before flwr runs
    assert len([c for c in map(json.loads, calls.read_text().splitlines()) if c[0] == "run"]) == 3


def test_flower_run_parses_flwr_s_json_where_the_environment_forces_colours(tmp_path, monkeypatch):
    """A Jupyter kernel sets ``FORCE_COLOR``; a flwr that then colours its ``--format json`` output (as flwr does)
    must still be understood: ``uldp flower-run`` runs its Flower commands without forced colours."""
    from uldp.cli import main

    fake = tmp_path / "flwr"
    fake.write_text(
        f"#!{sys.executable}\n"
        "import json, os, sys\n"
        "answer = json.dumps({'success': True, 'run-id': 7} if sys.argv[1] == 'run' else "
        "{'runs': [{'run-id': 7, 'status': 'finished:completed'}]})\n"
        "print('\\x1b[1m' + answer + '\\x1b[0m' if os.environ.get('FORCE_COLOR') else answer)\n"
    )
    fake.chmod(0o755)
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert main(["flower-run", str(tmp_path), "--flwr", str(fake), "--poll", "0.01"]) == 0
