"""The README's steps for several machines (Flower), on loopback as the hospitals' IT teams run them: a throwaway CA
and a server certificate (step 2, here with ``cryptography``), an EC key pair per hospital (OpenSSH) registered with the
SuperLink (step 3, ``flwr supernode register``), a SuperLink with TLS and SuperNode authentication on one port
(step 4), a SuperNode and worker per hospital with the CA and its own key (step 5), and the run through
``uldp flower-run`` (step 6). A SuperNode whose key was never registered is refused, and a ``flwr`` connection
without the CA certificate is reported as a TLS problem, not as a missing server."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest
from test_flower import HOSPITALS, hospital_files  # noqa: F401  (fixture)
from test_flower_loopback import free_port, install_flower_and_app, model
from tls_certificates import write_certificates, write_supernode_keys

import uldp

pytest.importorskip("cryptography")


@pytest.mark.slow  # a real SuperLink, SuperNodes and workers: over a minute, longer on a loaded machine
def test_the_documented_tls_and_supernode_authentication_steps_run_on_loopback(
    hospital_files,  # noqa: F811
    tmp_path,
):
    import numpy as np

    bin_dir, app_dir, home, keys = (tmp_path / d for d in ("bin", "app", "flwr-home", "keys"))
    for folder in (bin_dir, app_dir, home, keys):
        folder.mkdir()
    install_flower_and_app(bin_dir, app_dir)
    ca, server_certificate, server_key = write_certificates(tmp_path)
    link = free_port()
    # the server's `flwr` connection names the CA (step 2); "nocert" is the same SuperLink without it
    (home / "config.toml").write_text(
        f'[superlink]\ndefault = "server"\n'
        f'[superlink.server]\naddress = "127.0.0.1:{link}"\nroot-certificates = "{ca}"\n'
        f'[superlink.nocert]\naddress = "127.0.0.1:{link}"\n'
    )
    env = {
        **os.environ,
        "FLWR_TELEMETRY_ENABLED": "0",
        "FLWR_HOME": str(home),
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
    }
    np.save(tmp_path / "initial.npy", uldp.flat_parameters(model()).numpy())
    settings = dict(method="ULDP-AVG-w", sigma=1.0, q=1.0, local_epochs=1, batch_size=8, seed=5)
    processes: list[subprocess.Popen] = []

    def start(*command: str, log: str) -> None:
        with open(tmp_path / log, "w") as output:
            processes.append(
                subprocess.Popen(
                    command,
                    env=env,
                    cwd=tmp_path,
                    start_new_session=True,
                    stdout=output,
                    stderr=subprocess.STDOUT,
                )
            )

    def uldp_flower_run(superlink: str) -> subprocess.CompletedProcess:
        overrides = tmp_path / "run-config.toml"
        overrides.write_text(
            f"rounds = 1\nsettings = '{json.dumps(settings)}'\n"
            f"initial = '{tmp_path / 'initial.npy'}'\nout = '{tmp_path / 'out.npy'}'\n"
        )
        return subprocess.run(
            [
                *(sys.executable, "-m", "uldp.cli", "flower-run", str(app_dir), superlink),
                *("--run-config", str(overrides), "--poll", "1", "--flwr", str(bin_dir / "flwr")),
            ],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=400,
        )

    try:
        start(  # step 4
            str(bin_dir / "flower-superlink"),
            "--host",
            "127.0.0.1",
            "--port",
            str(link),
            "--ssl-ca-certfile",
            str(ca),
            "--ssl-certfile",
            str(server_certificate),
            "--ssl-keyfile",
            str(server_key),
            "--enable-supernode-auth",
            "--database",
            str(tmp_path / "superlink.db"),
            "--disable-runtime-dependency-installation",
            log="superlink.log",
        )
        deadline = time.monotonic() + 120
        while socket.socket().connect_ex(("127.0.0.1", link)) != 0:
            assert time.monotonic() < deadline, (tmp_path / "superlink.log").read_text()
            time.sleep(0.2)
        # without the CA the server's own `flwr` fails, and `uldp flower-run` says it is TLS
        refused = uldp_flower_run("nocert")
        assert refused.returncode == 1, refused.stdout + refused.stderr
        assert "TLS" in refused.stderr and "no server at" not in refused.stderr, refused.stderr
        for number, hospital in enumerate(HOSPITALS):  # steps 3 and 5
            private, public = write_supernode_keys(keys, f"supernode-{number}")
            registered = subprocess.run(
                [str(bin_dir / "flwr"), "supernode", "register", str(public), "server"],
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert registered.returncode == 0, registered.stdout + registered.stderr
            port = free_port()
            start(
                str(bin_dir / "flower-supernode"),
                "--superlink",
                f"127.0.0.1:{link}",
                "--root-certificates",
                str(ca),
                "--auth-supernode-private-key",
                str(private),
                "--isolation",
                "process",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--node-config",
                f'silo="{hospital}" data="{hospital_files / (hospital + ".csv")}" '
                f'uldp-key-file="{hospital_files / "key"}" uldp-policy-epsilon=100',
                log=f"supernode{number}.log",
            )
            start(
                sys.executable,
                "-m",
                "uldp.cli",
                "flower-worker",
                "--runtime-api-address",
                f"127.0.0.1:{port}",
                "--insecure",
                log=f"worker{number}.log",
            )
        intruder, _ = write_supernode_keys(keys, "intruder")  # never registered
        start(
            str(bin_dir / "flower-supernode"),
            "--superlink",
            f"127.0.0.1:{link}",
            "--root-certificates",
            str(ca),
            "--auth-supernode-private-key",
            str(intruder),
            "--isolation",
            "process",
            "--host",
            "127.0.0.1",
            "--port",
            str(free_port()),
            "--max-retries",
            "2",
            log="intruder.log",
        )
        run = uldp_flower_run("server")  # step 6
        logs = run.stdout[-3000:] + run.stderr[-3000:]
        assert run.returncode == 0 and "is finished:completed after" in run.stderr, logs
        assert (tmp_path / "out.npy").exists(), logs
        listed = subprocess.run(
            [str(bin_dir / "flwr"), "supernode", "list", "server", "--format", "json"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert listed.returncode == 0, listed.stdout + listed.stderr
    finally:
        for process in processes:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    intruder_log = (tmp_path / "intruder.log").read_text()
    # the SuperLink admits only the registered keys: the three hospitals' nodes, none for the intruder's key, which
    # never took part (the run's silos are the three named)
    nodes = json.loads(listed.stdout[listed.stdout.index("{") :])["nodes"]
    assert len(nodes) == len(HOSPITALS), listed.stdout
    assert "Failed to activate SuperNode" in intruder_log, intruder_log[
        -2000:
    ]  # flwr's exit code 305
