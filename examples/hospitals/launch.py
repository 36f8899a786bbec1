"""Run the hospital federation on this machine: a SuperLink and one SuperNode per hospital as separate processes on
loopback (no TLS: Flower's insecure local mode, for a demonstration only), then ``flwr run`` submits the app.

Usage: python launch.py [--data DIR] [--rounds 2] [--sigma 1.0] [--work DIR]

``--data`` is a folder with one ``<hospital>.csv`` per hospital and the hospitals' shared relay key ``key``
(``uldp.flower.write_key_file``); without it the launcher writes a small synthetic one. On real machines each
hospital starts only its own SuperNode (``flower-supernode --superlink <server>:9092 --root-certificates ca.crt
--node-config 'silo="..." data="..." uldp-key-file="..."'``) and the server its SuperLink with TLS.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

import uldp.flower as uf

HERE = Path(__file__).resolve().parent
FEATURES = [f"f{i}" for i in range(30)]


def demo_data(folder: Path, hospitals: int = 4, patients: int = 300, records: int = 2000) -> Path:
    """Synthetic hospital files (patients with records in several hospitals) and the hospitals' key."""
    rng = np.random.default_rng()
    owner = rng.integers(0, patients, records)
    x = rng.normal(size=(patients, len(FEATURES)))[owner] + rng.normal(size=(records, len(FEATURES)))
    frame = pd.DataFrame(x.astype(np.float32), columns=FEATURES)
    frame["outcome"] = (x[:, 0] + x[:, 1] > 0).astype(int)
    frame["patient_id"] = [f"MRN-{p:05d}" for p in owner]
    frame["hospital"] = rng.choice([f"Hospital {chr(65 + h)}" for h in range(hospitals)], records)
    for hospital, part in frame.groupby("hospital"):
        part.drop(columns="hospital").to_csv(folder / f"{hospital}.csv", index=False)
    uf.write_key_file(folder / "key")
    return folder


def free_port() -> int:
    """A TCP port free on loopback now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, help="folder of <hospital>.csv files and the key (default: synthetic)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--sigma", type=float, default=1.0)
    parser.add_argument("--work", type=Path, help="folder for logs and the model (default: a temporary one)")
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="hospitals-"))
    home = work / "flwr-home"
    home.mkdir(parents=True, exist_ok=True)
    data = args.data or demo_data(Path(tempfile.mkdtemp(prefix="hospital-data-")))
    link = free_port()
    (home / "config.toml").write_text(f'[superlink]\ndefault = "local"\n[superlink.local]\n'
                                      f'address = "127.0.0.1:{link}"\ninsecure = true\n')
    bin_dir = Path(sys.executable).parent  # flower-superlink, flower-supernode, flwr-clientapp ... of this venv
    env = {**os.environ, "FLWR_TELEMETRY_ENABLED": "0", "FLWR_HOME": str(home),
           "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    processes: list[subprocess.Popen] = []

    def start(*command: str, log: str) -> None:
        with open(work / log, "w") as output:
            processes.append(subprocess.Popen(command, env=env, cwd=work, start_new_session=True, stdout=output,
                                              stderr=subprocess.STDOUT))

    out = work / "model.pt"
    try:
        start("flower-superlink", "--insecure", "--disable-runtime-dependency-installation", "--host", "127.0.0.1",
              "--port", str(link), log="superlink.log")
        for number, file in enumerate(sorted(data.glob("*.csv"))):
            config = f'silo="{file.stem}" data="{file}" uldp-key-file="{data / "key"}"'
            start("flower-supernode", "--insecure", "--superlink", f"127.0.0.1:{link}", "--host", "127.0.0.1",
                  "--port", str(free_port()), "--node-config", config, log=f"supernode{number}.log")
        overrides = work / "run-config.toml"
        overrides.write_text(f"rounds = {args.rounds}\nsigma = {args.sigma}\nout = '{out}'\n")
        deadline = time.monotonic() + 60
        while True:  # the SuperLink takes a few seconds to listen
            run = subprocess.run(["flwr", "run", str(HERE), "local", "--run-config", str(overrides), "--stream"],
                                 env=env, cwd=work, capture_output=True, text=True)
            if "unavailable" not in run.stdout + run.stderr or time.monotonic() > deadline:
                break
            time.sleep(2)
        if not out.exists():
            raise SystemExit(f"the ServerApp wrote no model (logs in {work}); flwr run said:\n"
                             f"{run.stdout[-3000:]}{run.stderr[-3000:]}")
    finally:
        for process in processes:
            os.killpg(process.pid, signal.SIGTERM)  # its session: the SuperExec and app processes it started
            process.wait()
    report = json.loads(Path(f"{out}.json").read_text())
    print(f"model: {out}; epsilon per round {report['epsilon']}; seconds per round {report['round_seconds']}")


if __name__ == "__main__":
    main()
