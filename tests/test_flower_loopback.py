"""The Flower deployment engine on loopback: a SuperLink and three SuperNodes as separate processes (no Ray,
telemetry off, insecure local mode without TLS), each SuperNode a silo reading its own CSV file, with
``--isolation process`` and its long-lived ClientApp process (``uldp flower-worker``); ``uldp flower-run`` submits
the app (``flwr run``) and exits 0 with the completed run. With the silos' own test-only reproducible noise
(their node config), the model equals uldp.fit's on the same records, the patients numbered as the silos' private
set union numbered them, and each worker read its silo's records once for the whole run."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
from flower_hospitals import FEATURES, HOSPITALS, hospital_files, in_process, model  # noqa: F401  (fixture)

import uldp
from uldp.flower.launch import app_pyproject, worker_command

APP = """
import json
import numpy as np, pandas as pd
from torch import nn
import uldp, uldp.flower as uf
from flwr.app import ArrayRecord
from flwr.serverapp import ServerApp

def model():
    return nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))

def load(context):
    frame = pd.read_csv(context.node_config["data"])
    return uf.SiloData(frame[["a", "b", "c"]].to_numpy(np.float32), frame["label"].to_numpy(), frame["patient"])

client = uf.silo_client_app(load, model, nn.CrossEntropyLoss())
server = ServerApp()

@server.main()
def main(grid, context):
    settings = json.loads(context.run_config["settings"])
    initial = np.load(context.run_config["initial"])
    strategy = uf.UldpStrategy(secure=False, **settings)
    result = strategy.start(grid, ArrayRecord([initial]), num_rounds=context.run_config["rounds"])
    np.save(context.run_config["out"], result.arrays.to_numpy_ndarrays()[0])
    with open(context.run_config["out"] + ".json", "w") as file:
        json.dump({"epsilon": strategy.epsilons, "round_seconds": strategy.round_seconds}, file)
"""

PYPROJECT = app_pyproject(
    "hospitalapp",
    "hospital_app",
    "uldp loopback test",
    'rounds = 1\nsettings = ""\ninitial = ""\nout = ""',
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def shim(folder: Path, name: str, module: str, function: str) -> None:
    """An executable ``name`` that runs flwr's entry point with this interpreter (SuperLink and SuperNodes start
    ``flower-superexec``, ``flwr-serverapp`` and ``flwr-clientapp`` from PATH)."""
    path = folder / name
    path.write_text(
        f'#!/bin/sh\nexec {sys.executable} -c "import sys; from {module} import {function}; '
        f'sys.argv[0] = \'{name}\'; {function}()" "$@"\n'
    )
    path.chmod(0o755)


def install_flower_and_app(bin_dir: Path, app_dir: Path) -> None:
    """Flower's commands as shims in ``bin_dir`` (this interpreter's flwr), and the hospital app in ``app_dir``."""
    for name, module, function in (
        ("flwr", "flwr.cli.app", "app"),
        ("flower-superlink", "flwr.superlink.cli", "flower_superlink"),
        ("flower-supernode", "flwr.supernode.cli", "flower_supernode"),
        ("flower-superexec", "flwr.supercore.cli", "flower_superexec"),
        ("flwr-serverapp", "flwr.superlink.cli", "flwr_serverapp"),
        ("flwr-clientapp", "flwr.supernode.cli", "flwr_clientapp"),
    ):
        shim(bin_dir, name, module, function)
    (app_dir / "hospital_app.py").write_text(APP)
    (app_dir / "pyproject.toml").write_text(PYPROJECT)


def test_superlink_and_supernodes_on_loopback_end_at_the_in_process_model(hospital_files, tmp_path):  # noqa: F811
    bin_dir, app_dir, home = tmp_path / "bin", tmp_path / "app", tmp_path / "flwr-home"
    for folder in (bin_dir, app_dir, home):
        folder.mkdir()
    install_flower_and_app(bin_dir, app_dir)
    link = free_port()
    (home / "config.toml").write_text(
        f'[superlink]\ndefault = "local"\n[superlink.local]\n'
        f'address = "127.0.0.1:{link}"\ninsecure = true\n'
    )
    env = {
        **os.environ,
        "FLWR_TELEMETRY_ENABLED": "0",
        "FLWR_HOME": str(home),
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
    }
    net = model()
    np.save(tmp_path / "initial.npy", uldp.flat_parameters(net).numpy())
    # q = 1: every user trains, so the union's numbering (fresh each run, and read by no test hook here: the worker
    # loads a silo's records once, before the union) changes the model only by float32 summation order
    settings = dict(method="ULDP-AVG-w", sigma=1.0, q=1.0, local_epochs=2, batch_size=8, seed=5)
    processes = []

    def start(*command: str, log: str, flwr_home: Path = home) -> None:
        with open(tmp_path / log, "w") as output:  # the child keeps its own copy of the descriptor
            processes.append(
                subprocess.Popen(
                    command,
                    env={**env, "FLWR_HOME": str(flwr_home)},
                    cwd=tmp_path,
                    start_new_session=True,
                    stdout=output,
                    stderr=subprocess.STDOUT,
                )
            )

    try:
        start(
            str(bin_dir / "flower-superlink"),
            "--insecure",
            "--disable-runtime-dependency-installation",
            "--host",
            "127.0.0.1",
            "--port",
            str(link),
            log="superlink.log",
        )
        for number, hospital in enumerate(HOSPITALS):
            config = (
                f'silo="{hospital}" data="{hospital_files / (hospital + ".csv")}" '
                f'uldp-key-file="{hospital_files / "key"}" uldp-policy-epsilon=100 '
                f"uldp-insecure-reproducible-noise={settings['seed']}"
            )
            port = free_port()
            start(
                str(bin_dir / "flower-supernode"),
                "--insecure",
                "--superlink",
                f"127.0.0.1:{link}",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--isolation",
                "process",
                "--node-config",
                config,
                log=f"supernode{number}.log",
                flwr_home=tmp_path
                / f"home-{hospital}",  # its own, as uldp deploy silo keeps one (a shared one raced)
            )
            start(
                *worker_command(port),
                log=f"worker{number}.log",
                flwr_home=tmp_path / f"home-{hospital}",
            )
        out = tmp_path / "out.npy"
        overrides = tmp_path / "run-config.toml"
        overrides.write_text(
            f"rounds = 1\nsettings = '{json.dumps(settings)}'\n"
            f"initial = '{tmp_path / 'initial.npy'}'\nout = '{out}'\n"
        )
        deadline = time.monotonic() + 120
        while (
            socket.socket().connect_ex(("127.0.0.1", link)) != 0
        ):  # the SuperLink takes a few seconds to listen
            assert time.monotonic() < deadline, (tmp_path / "superlink.log").read_text()
            time.sleep(0.2)
        run = subprocess.run(
            [
                sys.executable,
                "-m",
                "uldp.cli",
                "flower-run",
                str(app_dir),
                "local",
                "--run-config",
                str(overrides),
                "--poll",
                "1",
                "--flwr",
                str(bin_dir / "flwr"),
            ],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=540,
        )
        logs = run.stdout[-3000:] + run.stderr[-3000:]
        assert run.returncode == 0 and "is finished:completed after" in run.stderr, logs
        assert out.exists(), f"the ServerApp wrote no model; uldp flower-run said:\n{logs}"
    finally:
        for process in processes:
            os.killpg(
                process.pid, signal.SIGKILL
            )  # the session each Popen started: its SuperExec children too
            process.wait()
    patients = [
        pd.read_csv(hospital_files / f"{h}.csv")["patient"].astype(str) for h in sorted(HOSPITALS)
    ]
    numbering = {patient: number for number, patient in enumerate(sorted(set(pd.concat(patients))))}
    numbers = [part.map(numbering).to_numpy() for part in patients]
    trained, history = in_process(hospital_files, net, numbers, rounds=1, **settings)
    np.testing.assert_allclose(
        np.load(out), uldp.flat_parameters(trained).numpy(), rtol=1e-5, atol=1e-6
    )
    report = json.loads(Path(str(out) + ".json").read_text())
    assert report["epsilon"] == history.column("epsilon")
    # every set-up exchange (hello, the private set union's steps, federation) and the round: one process, which
    # read the silo's records once
    for number in range(len(HOSPITALS)):
        log = (tmp_path / f"worker{number}.log").read_text()
        setups = log.count("query.uldp (setup) completed in")
        assert setups >= 3 and log.count("train (1) completed in") == 1, log
        assert log.count("read its records") == 1 and log.count(") completed in") == setups + 1, log
    print(
        f"loopback Flower round: {report['round_seconds'][0]:.2f} s; in process: {history.rows[0]['seconds']:.2f} s"
    )
