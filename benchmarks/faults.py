"""Faults injected into real processes of Flower's runtime, which ``uldp deploy`` runs (the long version of
``tests/test_faults.py``, issue 36), from the checkout given by ``--root`` (so the same script measures an older
commit too):

- ``flower-supernode-killed``: Flower's own runtime (a SuperLink, 3 SuperNodes, ``flwr run``; the app of
  ``tests/test_flower_loopback.py`` with :class:`uldp.flower.UldpStrategy`, 3 rounds, a 90 s timeout). The
  SuperNode of "General" is killed once round 2 is in flight and started again (a new node id). Measured: how the
  run ended (``flwr ls``'s status, ``flwr run``'s exit status), the releases in the strategy's epsilon history and
  the rounds it completed. Where the checkout has :mod:`uldp.flower.recovery`, the strategy declares its silos and a
  checkpoint.
- ``flower-superlink-restarted``: the same runtime, each SuperNode with ``--isolation process`` and its
  ``uldp flower-worker``, the SuperLink with ``--database``; the app is submitted with ``uldp flower-run``. The
  SuperLink (and the ServerApp it runs) is killed once round 2 is in flight and started again ``--delay`` seconds
  later with its database; the app is then submitted again with the same checkpoint. Measured: what the first
  ``uldp flower-run`` said and its exit status, the resubmitted run's, the round indices in the checkpoint's
  history (aborted ones named) and whether the epsilon history has one release per index asked.

It prints one line per scenario (``--json``: one JSON document). Every process is killed at the end, whatever
happens; each wait is bounded.

Usage: PYTHONPATH=. python benchmarks/faults.py [--root CHECKOUT] [--only NAME ...] [--delay S] [--keep FOLDER] [--json]
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
from typing import TYPE_CHECKING, Any

from uldp.flower.launch import (  # run with PYTHONPATH set to this checkout
    app_pyproject,
    json_output,
    worker_command,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

WAIT = 600.0  # the longest any process may take (seconds)


class Federation:
    """The processes of one scenario, from the checkout ``root``, with their logs in ``folder``, and a free port."""

    def __init__(self, root: Path, folder: Path) -> None:
        self.root, self.folder = root, folder
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        self.processes: list[subprocess.Popen] = []

    def close(self) -> None:
        for process in self.processes:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()


@contextlib.contextmanager
def federation(root: Path, keep: Path | None = None) -> Iterator[Federation]:
    """The processes of one scenario, in a temporary folder (or a new folder under ``keep``, left for reading)."""
    with contextlib.ExitStack() as stack:
        folder = (
            Path(tempfile.mkdtemp(prefix="uldp-faults-", dir=keep))
            if keep
            else Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="uldp-faults-")))
        )
        processes = Federation(root, folder)
        try:
            yield processes
        finally:
            processes.close()


FLOWER_APP = """
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
    strategy = uf.UldpStrategy(**settings)
    initial = ArrayRecord([uldp.flat_parameters(model()).numpy()])
    result = strategy.start(grid, initial, num_rounds=3, timeout=90)
    with open(context.run_config["out"], "w") as file:
        json.dump({"epsilons": strategy.epsilons, "completed": sorted(result.train_metrics_clientapp)}, file)
"""
FLOWER_PROJECT = app_pyproject(
    "hospitalapp", "hospital_app", "uldp fault benchmark", 'settings = ""\nout = ""'
)
HOSPITALS = ("General", "Royal", "St Mary")
FLOWER_COMMANDS = (
    ("flwr", "flwr.cli.app", "app"),
    ("flower-superlink", "flwr.superlink.cli", "flower_superlink"),
    ("flower-supernode", "flwr.supernode.cli", "flower_supernode"),
    ("flower-superexec", "flwr.supercore.cli", "flower_superexec"),
    ("flwr-serverapp", "flwr.superlink.cli", "flwr_serverapp"),
    ("flwr-clientapp", "flwr.supernode.cli", "flwr_clientapp"),
)


def _checkpoint_header(path: Path) -> dict:
    """The header of a strategy checkpoint (``rounds_done``: the round index in flight or last done; ``history``:
    every release's record), {} while there is none."""
    data = path.read_bytes() if path.exists() else b""
    if len(data) < 12:
        return {}
    length = int.from_bytes(data[8:12], "little")
    return dict(json.loads(data[12 : 12 + length]))


def _checkpoint_rounds(path: Path) -> int:
    return int(_checkpoint_header(path).get("rounds_done", 0))


class FlowerRuntime:
    """Flower's own runtime for one scenario: a SuperLink, a SuperNode per hospital, the app of
    ``tests/test_flower_loopback.py`` (:data:`FLOWER_APP`) and its files, in the scenario's folder."""

    def __init__(self, processes: Federation) -> None:
        import numpy as np
        import pandas as pd

        self.processes, self.folder = processes, processes.folder
        self.bin_dir, self.app_dir, home = (
            self.folder / "bin",
            self.folder / "app",
            self.folder / "flwr-home",
        )
        for path in (self.bin_dir, self.app_dir, home):
            path.mkdir()
        for (
            name,
            module,
            function,
        ) in FLOWER_COMMANDS:  # the SuperLink and SuperNodes start these from PATH
            (self.bin_dir / name).write_text(
                f'#!/bin/sh\nexec {sys.executable} -c "import sys; from {module} '
                f'import {function}; sys.argv[0] = \'{name}\'; {function}()" "$@"\n'
            )
            (self.bin_dir / name).chmod(0o755)
        (self.app_dir / "hospital_app.py").write_text(FLOWER_APP)
        (self.app_dir / "pyproject.toml").write_text(FLOWER_PROJECT)
        rng = np.random.default_rng(0)
        frame = pd.DataFrame(rng.normal(size=(150, 3)), columns=["a", "b", "c"])
        frame["label"] = (frame.a > 0).astype(int)
        frame["patient"] = [f"P{u}" for u in rng.integers(0, 20, 150)]
        frame["hospital"] = rng.choice(HOSPITALS, 150)
        self.key = self.folder / "key"
        self.key.write_text(os.urandom(32).hex())
        for hospital, part in frame.groupby("hospital"):
            part.drop(columns="hospital").to_csv(self.folder / f"{hospital}.csv", index=False)
        self.link = processes.port
        (home / "config.toml").write_text(
            f'[superlink]\ndefault = "local"\n[superlink.local]\n'
            f'address = "127.0.0.1:{self.link}"\ninsecure = true\n'
        )
        self.env = {
            **os.environ,
            "FLWR_TELEMETRY_ENABLED": "0",
            "FLWR_HOME": str(home),
            "PYTHONPATH": str(processes.root),
            "PATH": f"{self.bin_dir}{os.pathsep}{os.environ['PATH']}",
        }
        self.checkpoint, self.out = self.folder / "strategy.ckpt", self.folder / "out.json"
        self.count = 0

    def start(self, log: str, *command: str) -> subprocess.Popen:
        with (self.folder / log).open("a") as output:
            process = subprocess.Popen(
                command,
                env=self.env,
                cwd=self.folder,
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.processes.processes.append(process)
        return process

    def superlink(self, *extra: str) -> subprocess.Popen:
        return self.start(
            "superlink.log",
            str(self.bin_dir / "flower-superlink"),
            "--insecure",
            "--disable-runtime-dependency-installation",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.link),
            *extra,
        )

    def supernode(self, hospital: str, *, worker: bool = False) -> subprocess.Popen:
        """The hospital's SuperNode; with ``worker``, ``--isolation process`` and its ``uldp flower-worker``."""
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        config = f'silo="{hospital}" data="{self.folder / (hospital + ".csv")}" uldp-key-file="{self.key}"'
        node = self.start(
            f"supernode-{hospital}.log",
            str(self.bin_dir / "flower-supernode"),
            "--insecure",
            "--superlink",
            f"127.0.0.1:{self.link}",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--node-config",
            config,
            *(["--isolation", "process"] if worker else []),
        )
        if worker:
            self.start(f"worker-{hospital}.log", *worker_command(port))
        return node

    def run_config(self) -> Path:
        recovery = (self.processes.root / "uldp" / "flower" / "recovery.py").exists()
        settings = {
            "method": "ULDP-AVG-w",
            "sigma": 1.0,
            "q": 0.8,
            "local_epochs": 1,
            "batch_size": 8,
            **(
                {"silos": list(HOSPITALS), "checkpoint": str(self.checkpoint), "join_timeout": 60}
                if recovery
                else {}
            ),
        }
        overrides = self.folder / "run-config.toml"
        overrides.write_text(f"settings = '{json.dumps(settings)}'\nout = '{self.out}'\n")
        return overrides

    def flwr(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(self.bin_dir / "flwr"), *args],
            env=self.env,
            cwd=self.folder,
            capture_output=True,
            text=True,
            timeout=300,
        )

    def submit(self) -> tuple[int | None, subprocess.CompletedProcess]:
        """``flwr run`` (retried while the SuperLink is not listening yet): the run id, and flwr's answer."""
        deadline = time.monotonic() + 60
        while True:
            submitted = self.flwr(
                "run",
                str(self.app_dir),
                "local",
                "--run-config",
                str(self.run_config()),
                "--format",
                "json",
            )
            run_id = (json_output(submitted.stdout) or {}).get("run-id")
            if (
                run_id is not None or time.monotonic() > deadline
            ):  # flwr run exits 0 even when it reached nothing
                return run_id, submitted
            time.sleep(2)

    def listening(self) -> bool:
        """Wait (up to a minute) until the SuperLink listens."""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", self.link)) == 0:
                    return True
            time.sleep(0.2)
        return False

    def flower_run(self) -> subprocess.Popen:
        """``uldp flower-run`` of the app once the SuperLink listens, in the background (its exit status is the
        run's)."""
        self.listening()
        self.count += 1
        with (self.folder / f"flower-run-{self.count}.err").open("w") as err:
            process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "uldp.cli",
                    "flower-run",
                    str(self.app_dir),
                    "local",
                    "--run-config",
                    str(self.run_config()),
                    "--poll",
                    "1",
                    "--flwr",
                    str(self.bin_dir / "flwr"),
                ],
                env=self.env,
                cwd=self.folder,
                stdout=subprocess.DEVNULL,
                stderr=err,
                start_new_session=True,
            )
        self.processes.processes.append(process)
        return process

    def report(self) -> dict:
        return json.loads(self.out.read_text()) if self.out.exists() else {}


def flower_supernode_killed(processes: Federation, delay: float) -> dict:
    flower = FlowerRuntime(processes)
    flower.superlink()
    nodes = {hospital: flower.supernode(hospital) for hospital in HOSPITALS}
    recovery = (processes.root / "uldp" / "flower" / "recovery.py").exists()
    run_id, submitted = flower.submit()
    if run_id is None:
        return {
            "error": f"flwr run started no run: {submitted.stdout[-500:]} {submitted.stderr[-500:]}"
        }
    start_time, killed_at = time.monotonic(), None
    status = ""
    while time.monotonic() - start_time < WAIT:
        if killed_at is None and (
            _checkpoint_rounds(flower.checkpoint) >= 2
            if recovery
            else time.monotonic() - start_time > 60
        ):
            os.killpg(nodes["General"].pid, signal.SIGKILL)
            killed_at = round(time.monotonic() - start_time)
            nodes["General"] = flower.supernode("General")
        listed = flower.flwr("ls", "local", "--run-id", str(run_id), "--format", "json")
        runs = (json_output(listed.stdout) or {}).get("runs") or [{"status": status}]
        status = runs[0]["status"]
        if status.startswith("finished"):
            break
        time.sleep(2)
    report = flower.report()
    return {
        "run_status": status,
        "flwr_run_exit": submitted.returncode,
        "general_killed_after_s": killed_at,
        "releases_accounted": len(report.get("epsilons", [])),
        "completed_rounds": report.get("completed"),
        "epsilons": [round(e, 4) for e in report.get("epsilons", [])],
    }


def _last_line(path: Path) -> str:
    lines = [line for line in path.read_text().splitlines() if line.strip()]
    return lines[-1][-300:] if lines else ""


def flower_superlink_restarted(processes: Federation, delay: float) -> dict:
    """The SuperLink (and the ServerApp it runs) killed while round 2 is in flight, started again ``delay`` s later
    with its ``--database``; the SuperNodes and their workers stay. The first ``uldp flower-run`` says how its run
    ended; the app is submitted again with the same checkpoint, and the releases are counted."""
    flower = FlowerRuntime(processes)
    database = str(processes.folder / "superlink.db")
    superlink = flower.superlink("--database", database)
    for hospital in HOSPITALS:
        flower.supernode(hospital, worker=True)
    first = flower.flower_run()
    start = time.monotonic()
    while (
        _checkpoint_rounds(flower.checkpoint) < 2
        and first.poll() is None
        and time.monotonic() - start < WAIT
    ):
        time.sleep(0.2)
    os.killpg(
        superlink.pid, signal.SIGKILL
    )  # the SuperLink's session: its SuperExec and the ServerApp too
    superlink.wait()
    killed_at = round(time.monotonic() - start)
    in_checkpoint = _checkpoint_header(flower.checkpoint).get("history", [])
    time.sleep(delay)
    flower.superlink("--database", database)
    try:
        first_exit = first.wait(timeout=WAIT)
    except subprocess.TimeoutExpired:
        first_exit = None
    second = flower.flower_run()
    try:
        second_exit = second.wait(timeout=WAIT)
    except subprocess.TimeoutExpired:
        second_exit = None
    history = _checkpoint_header(flower.checkpoint).get("history", [])
    report = flower.report()
    asked = [record["round"] for record in history]
    return {
        "superlink_killed_after_s": killed_at,
        "restarted_after_s": delay,
        "releases_in_checkpoint_when_killed": [record["round"] for record in in_checkpoint],
        "first_flower_run_exit": first_exit,
        "first_flower_run_said": _last_line(processes.folder / "flower-run-1.err"),
        "resubmitted_flower_run_exit": second_exit,
        "resubmitted_flower_run_said": _last_line(processes.folder / "flower-run-2.err"),
        "rounds_asked": asked,
        "aborted": [record["round"] for record in history if "aborted" in record],
        "releases_accounted": len(report.get("epsilons", [])),
        "completed_rounds": report.get("completed"),
        "epsilons": [round(e, 4) for e in report.get("epsilons", [])],
        "every_release_accounted": len(report.get("epsilons", [])) == len(asked) == len(set(asked)),
    }


SCENARIOS: dict[str, Callable[[Federation, float], dict]] = {
    "flower-supernode-killed": flower_supernode_killed,
    "flower-superlink-restarted": flower_superlink_restarted,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--root",
        type=Path,
        default=Path(__file__).resolve().parents[1],
        help="the checkout whose uldp runs (default: this one)",
    )
    parser.add_argument("--only", nargs="+", choices=sorted(SCENARIOS), default=sorted(SCENARIOS))
    parser.add_argument(
        "--delay",
        type=float,
        default=12.0,
        help="seconds the SuperLink stays down before its restart",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument(
        "--keep", type=Path, default=None, help="keep each scenario's logs in a folder under this"
    )
    args = parser.parse_args()
    results: dict[str, Any] = {}
    for name in args.only:
        start = time.perf_counter()
        with federation(args.root.resolve(), args.keep) as processes:
            results[name] = {
                **SCENARIOS[name](processes, args.delay),
                "seconds": round(time.perf_counter() - start),
            }
        if not args.json:
            print(f"{name}: {json.dumps(results[name])}", flush=True)
    if args.json:
        print(json.dumps({"root": str(args.root), "scenarios": results}))


if __name__ == "__main__":
    main()
