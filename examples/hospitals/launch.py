"""Run the hospital federation on this machine: a SuperLink, and per hospital a SuperNode and its long-lived
ClientApp process (``uldp flower-worker``), all separate processes on loopback (no TLS: Flower's insecure local
mode, for a demonstration only); ``uldp flower-run`` submits the app and exits with the run's status.

Usage: python launch.py [--data DIR] [--rounds 2] [--sigma 5.0] [--q 1.0] [--no-secure] [--work DIR]

``--data`` is a folder with one ``<hospital>.csv`` per hospital and the hospitals' shared relay key ``key``
(``uldp.flower.write_key_file``); without it the launcher writes a small synthetic one. On real machines each
hospital starts only its own SuperNode and worker::

    flower-supernode --superlink <server>:9092 --root-certificates ca.crt --isolation process --port 9094 \\
        --node-config 'silo="..." data="..." uldp-key-file="..."'
    uldp flower-worker --runtime-api-address 127.0.0.1:9094 --insecure

(``--isolation process``: the SuperNode starts no ClientApp process of its own; the worker takes its messages and
keeps the hospital's records and imports between them), and the server its SuperLink with TLS.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

import uldp.flower as uf
from uldp.flower.launch import worker_command

if TYPE_CHECKING:
    from collections.abc import Iterator

HERE = Path(__file__).resolve().parent
FEATURES = [f"f{i}" for i in range(30)]


def patients_table(
    rng: np.random.Generator, patients: int, records: int, first: int = 0
) -> pd.DataFrame:
    """Synthetic records of ``patients`` patients (MRNs from ``first``), several records each."""
    owner = rng.integers(0, patients, records)
    x = rng.normal(size=(patients, len(FEATURES)))[owner] + rng.normal(
        size=(records, len(FEATURES))
    )
    frame = pd.DataFrame(x.astype(np.float32), columns=FEATURES)
    frame["outcome"] = (x[:, 0] + x[:, 1] > 0).astype(int)
    frame["patient_id"] = [f"MRN-{first + p:05d}" for p in owner]
    return frame


def demo_data(folder: Path, hospitals: int = 4, patients: int = 300, records: int = 2000) -> Path:
    """Synthetic hospital files (patients with records in several hospitals), the hospitals' key, and a held-out
    set of other patients in ``held-out/test.csv`` (for the server's evaluation)."""
    rng = np.random.default_rng()
    frame = patients_table(rng, patients, records)
    frame["hospital"] = rng.choice([f"Hospital {chr(65 + h)}" for h in range(hospitals)], records)
    for hospital, part in frame.groupby("hospital"):
        part.drop(columns="hospital").to_csv(folder / f"{hospital}.csv", index=False)
    (folder / "held-out").mkdir()
    patients_table(rng, patients // 4, records // 4, first=patients).to_csv(
        folder / "held-out" / "test.csv", index=False
    )
    uf.write_key_file(folder / "key")
    return folder


def free_port() -> int:
    """A TCP port free on loopback now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_listening(port: int, seconds: float = 120) -> None:
    """Wait until something listens on the loopback port (the SuperLink takes a few seconds)."""
    deadline = time.monotonic() + seconds
    while True:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        if time.monotonic() > deadline:
            raise SystemExit(f"nothing listens on 127.0.0.1:{port} after {seconds:g} s")
        time.sleep(0.2)


class Processes:
    """The SuperLink, SuperNodes and workers of one federation; their logs go to ``work``."""

    def __init__(self, work: Path) -> None:
        self.work = work
        self.home = work / "flwr-home"
        self.home.mkdir(parents=True, exist_ok=True)
        self.link = free_port()
        (self.home / "config.toml").write_text(
            f'[superlink]\ndefault = "local"\n[superlink.local]\n'
            f'address = "127.0.0.1:{self.link}"\ninsecure = true\n'
        )
        bin_dir = Path(
            sys.executable
        ).parent  # flower-superlink, flower-supernode, flwr ... of this venv
        self.env = {
            **os.environ,
            "FLWR_TELEMETRY_ENABLED": "0",
            "FLWR_HOME": str(self.home),
            "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        }
        self.running: list[subprocess.Popen] = []

    def start(self, *command: str, log: str) -> subprocess.Popen:
        """Start a process in its own session (so that its children go with it), its output in ``log``."""
        with open(self.work / log, "w") as output:
            process = subprocess.Popen(
                command,
                env=self.env,
                cwd=self.work,
                start_new_session=True,
                stdout=output,
                stderr=subprocess.STDOUT,
            )
        self.running.append(process)
        return process

    def superlink(self, *extra: str) -> subprocess.Popen:
        """The SuperLink on ``self.link`` (``extra``: ``--database FILE`` to keep its state across restarts)."""
        return self.start(
            "flower-superlink",
            "--insecure",
            "--disable-runtime-dependency-installation",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.link),
            *extra,
            log="superlink.log",
        )

    def hospital(
        self, file: Path, key: Path, node_config: str = "", *, isolation: str = "process"
    ) -> None:
        """The hospital's SuperNode and, with ``isolation="process"``, the worker that runs its ClientApp
        (``"subprocess"``: Flower's default, a new ClientApp process per message)."""
        port = free_port()
        config = f'silo="{file.stem}" data="{file}" uldp-key-file="{key}" {node_config}'.strip()
        self.start(
            "flower-supernode",
            "--insecure",
            "--superlink",
            f"127.0.0.1:{self.link}",
            "--isolation",
            isolation,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--node-config",
            config,
            log=f"supernode-{file.stem}.log",
        )
        if isolation == "process":
            self.start(
                *worker_command(port),
                log=f"worker-{file.stem}.log",
            )

    def submit(self, run_config: Path, *, poll: float = 2.0) -> subprocess.CompletedProcess:
        """``uldp flower-run --stream``: submit the app and wait for its run (its exit status is the run's),
        printing the ServerApp's log (set-up stages, one line per round, the summary) as it comes."""
        command = [
            sys.executable,
            "-m",
            "uldp.cli",
            "flower-run",
            str(HERE),
            "local",
            "--run-config",
            str(run_config),
            "--poll",
            str(poll),
            "--stream",
        ]
        said = []
        with subprocess.Popen(
            command,
            env=self.env,
            cwd=self.work,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        ) as process:
            assert process.stdout is not None
            for line in process.stdout:
                print(line, end="", flush=True)
                said.append(line)
        return subprocess.CompletedProcess(command, process.returncode, "", "".join(said))

    def stop(self, process: subprocess.Popen) -> None:
        """Kill a process and everything it started (its session)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


@contextlib.contextmanager
def federation(
    work: Path, data: Path, node_config: str = "", *, isolation: str = "process"
) -> Iterator[Processes]:
    """A SuperLink and every hospital's SuperNode and worker, killed on the way out."""
    processes = Processes(work)
    try:
        processes.superlink()
        for file in sorted(data.glob("*.csv")):
            processes.hospital(file, data / "key", node_config, isolation=isolation)
        wait_listening(processes.link)
        yield processes
    finally:
        for process in processes.running:
            processes.stop(process)


def run(
    data: Path,
    work: Path,
    *,
    rounds: int,
    sigma: float,
    q: float,
    secure: bool,
    test: Path | None = None,
    node_config: str = "",
    isolation: str = "process",
    backends: str | None = None,
    initial: Path | None = None,
) -> dict:
    """Run the app on a fresh federation, every ``<hospital>.csv`` of ``data`` a hospital that must take part;
    the ServerApp's report (epsilons, seconds, each round's row) and the run's wall seconds. ``backends``: the
    secure-aggregation backends the run allows (comma-separated; None: the app's ``pyproject.toml``); ``initial``: a
    saved ``state_dict`` to start from (None: a fresh model).

    Raises:
        SystemExit: the run failed; the message has ``uldp flower-run``'s words (the failing hospital and why).
    """
    work.mkdir(parents=True, exist_ok=True)
    out = work / "model.pt"
    overrides = work / "run-config.toml"
    silos = ", ".join(file.stem for file in sorted(data.glob("*.csv")))
    overrides.write_text(
        f"rounds = {rounds}\nsigma = {sigma}\nq = {q}\nsecure = {str(secure).lower()}\n"
        f"silos = '{silos}'\ntest = '{test or ''}'\nout = '{out}'\ninitial = '{initial or ''}'\n"
        + (f"backends = '{backends}'\n" if backends is not None else "")
    )
    start = time.perf_counter()
    with federation(work, data, node_config, isolation=isolation) as processes:
        submitted = processes.submit(overrides)
    if submitted.returncode != 0 or not out.exists():
        raise SystemExit(
            f"the run failed (logs in {work}); uldp flower-run said:\n{submitted.stderr[-3000:]}"
        )
    return {
        **json.loads(Path(f"{out}.json").read_text()),
        "model": str(out),
        "wall_seconds": time.perf_counter() - start,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--data", type=Path, help="folder of <hospital>.csv files and the key (default: synthetic)"
    )
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--sigma", type=float, default=5.0)
    parser.add_argument("--q", type=float, default=1.0)
    parser.add_argument(
        "--secure",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="Protocol 1 for the enhanced weights (default); --no-secure: plain ULDP-AVG-w",
    )
    parser.add_argument(
        "--test",
        type=Path,
        help="held-out CSV for the server's loss and AUC (default: the synthetic one)",
    )
    parser.add_argument(
        "--work", type=Path, help="folder for logs and the model (default: a temporary one)"
    )
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="hospitals-"))
    data = args.data or demo_data(Path(tempfile.mkdtemp(prefix="hospital-data-")))
    test = args.test or (data / "held-out" / "test.csv" if args.data is None else None)
    report = run(
        data, work, rounds=args.rounds, sigma=args.sigma, q=args.q, secure=args.secure, test=test
    )
    print(
        f"model: {report['model']}; set-up {report['setup_seconds']:.0f} s, "
        f"{report['wall_seconds']:.0f} s in all (logs in {work})"
    )


if __name__ == "__main__":
    main()
