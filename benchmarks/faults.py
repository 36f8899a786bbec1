"""Faults injected into real ``uldp deploy`` processes (the long version of ``tests/test_faults.py``, issue 36).

A server and 3 silos (ULDP-AVG-w on the synthetic dataset, 3 rounds, plain aggregation) run as separate processes
on loopback, from the checkout given by ``--root`` (so the same script measures an older commit too), and meet:

- ``silo-killed``: silo 2 exits abruptly when round 2 arrives; the server is restarted with every silo. Counted:
  the rounds each server run asked (each one a release: silos answered it, or may have) against the records of the
  final epsilon history, and whether a round index was asked twice.
- ``silo-stalled``: silo 1 is stopped (SIGSTOP) once admitted; the server's ``--round-timeout`` is 12 s (and
  ``--stall-log-seconds`` 4 where the checkout has it). Measured:
  the seconds until the round aborts, whether the server said while it waited which silo it waited for, and
  whether the abort names the timeout; then the silo is resumed and everyone restarted (accounted as above).
- ``late-silo``: silo 0 starts with ``--max-wait 90`` while no server listens; the server and the other silos start
  ``--delay`` seconds later. Measured: whether silo 0 was still waiting, and how the federation ended.

It prints one line per scenario (``--json``: one JSON document). Every process is killed at the end, whatever
happens; each wait is bounded.

Usage: python benchmarks/faults.py [--root CHECKOUT] [--only NAME ...] [--delay S] [--json]
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

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

RUN = {"dataset": "synthetic", "method": "ULDP-AVG-w", "n_users": 8, "rounds": 3, "seed": 3, "max_train_records": 120,
       "local_epochs": 1}
N_SILOS = 3
WAIT = 400.0  # the longest any process may take (seconds)


class Federation:
    """Processes of one scenario, from the checkout ``root``, with their logs in ``folder``."""

    def __init__(self, root: Path, folder: Path) -> None:
        self.root, self.folder = root, folder
        self.config = folder / "run.json"
        self.config.write_text(json.dumps(RUN))
        self.checkpoint = folder / "model.ckpt"
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        self.processes: list[subprocess.Popen] = []
        self.count = 0

    def start(self, *args: str) -> tuple[subprocess.Popen, Path, Path]:
        """``python -m uldp.deploy.cli ARGS`` from the checkout; stdout and stderr go to files."""
        self.count += 1
        out, err = self.folder / f"{self.count}.out", self.folder / f"{self.count}.err"
        env = {**os.environ, "FLWR_TELEMETRY_ENABLED": "0", "PYTHONPATH": str(self.root)}
        with out.open("w") as stdout, err.open("w") as stderr:
            process = subprocess.Popen([sys.executable, "-m", "uldp.deploy.cli", *args], cwd=self.root, env=env,
                                       stdout=stdout, stderr=stderr, start_new_session=True)
        self.processes.append(process)
        return process, out, err

    def server(self, *extra: str) -> tuple[subprocess.Popen, Path, Path]:
        return self.start("server", "--config", str(self.config), "--address", f"127.0.0.1:{self.port}",
                          "--checkpoint", str(self.checkpoint), "--join-timeout", "60", "--round-timeout", "120",
                          "--json", *extra)

    def silo(self, silo_id: int, *extra: str) -> tuple[subprocess.Popen, Path, Path]:
        return self.start("silo", "--config", str(self.config), "--server", f"127.0.0.1:{self.port}", "--silo-id",
                          str(silo_id), "--max-wait", "10", "--quiet", *extra)

    def close(self) -> None:
        for process in self.processes:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()


@contextlib.contextmanager
def federation(root: Path) -> Iterator[Federation]:
    with tempfile.TemporaryDirectory(prefix="uldp-faults-") as folder:
        processes = Federation(root, Path(folder))
        try:
            yield processes
        finally:
            processes.close()


def finish(started: tuple[subprocess.Popen, Path, Path]) -> tuple[int, dict, str]:
    """Exit status, the last JSON line of stdout (or {}), stderr."""
    process, out, err = started
    try:
        process.wait(timeout=WAIT)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    lines = [line for line in out.read_text().splitlines() if line.startswith("{")]
    return process.returncode, json.loads(lines[-1]) if lines else {}, err.read_text()


def wait_for(path: Path, text: str, limit: float = WAIT) -> bool:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if text in path.read_text():
            return True
        time.sleep(0.2)
    return False


def asked(result: dict) -> list[int]:
    """The round indices one server run asked: those it added to the history, and the one it aborted."""
    history = result.get("history", [])
    new = [record["round"] for record in history[result.get("resumed_from", 0):]]
    error = result.get("error", "")
    if "aborted" in error and not any("aborted" in r for r in history[result.get("resumed_from", 0):]):
        new.append(int(error.split("round ")[1].split(" ")[0]))  # an older server: the aborted round is not recorded
    return new


def accounting(runs: list[dict]) -> dict:
    """Releases made (rounds asked over every server run) against the records of the last run's history."""
    made = [t for run in runs for t in asked(run)]
    history = runs[-1].get("history", [])
    return {"rounds_asked": made, "history_rounds": [r["round"] for r in history],
            "epsilons": [round(r["epsilon"], 4) for r in history], "releases_made": len(made),
            "releases_accounted": len(history), "index_asked_twice": len(made) != len(set(made)),
            "completed": runs[-1].get("rounds_done"), "error": runs[-1].get("error", "")}


def restart_everyone(processes: Federation) -> dict:
    server = processes.server()
    silos = [processes.silo(s, "--max-wait", "60") for s in range(N_SILOS)]
    result = finish(server)[1]
    for silo in silos:
        finish(silo)
    return result


def silo_killed(processes: Federation, delay: float) -> dict:
    server = processes.server()
    silos = [processes.silo(s, *(["--exit-at-round", "2"] if s == 2 else [])) for s in range(N_SILOS)]
    first = finish(server)[1]
    for silo in silos:
        finish(silo)
    return {"first_error": first.get("error", ""), **accounting([first, restart_everyone(processes)])}


def silo_stalled(processes: Federation, delay: float) -> dict:
    says_stalls = "--stall-log-seconds" in (processes.root / "uldp" / "deploy" / "cli.py").read_text()
    server = processes.server("--round-timeout", "12", *(["--stall-log-seconds", "4"] if says_stalls else []))
    silos = [processes.silo(s) for s in range(N_SILOS)]
    admitted = wait_for(server[2], "all 3 silos admitted")
    os.killpg(silos[1][0].pid, signal.SIGSTOP)
    start = time.monotonic()
    _, first, log = finish(server)
    stalled_for = time.monotonic() - start
    os.killpg(silos[1][0].pid, signal.SIGCONT)
    for silo in silos:
        finish(silo)
    waits = [line for line in log.splitlines() if "still waiting" in line]
    return {"admitted": admitted, "seconds_to_abort": round(stalled_for, 1), "first_error": first.get("error", ""),
            "said_while_waiting": waits[:2], "names_the_timeout": "--round-timeout 12" in first.get("error", ""),
            **accounting([first, restart_everyone(processes)])}


def late_silo(processes: Federation, delay: float) -> dict:
    early = processes.silo(0, "--max-wait", "90")
    time.sleep(delay)
    early_alive = early[0].poll() is None
    server = processes.server()
    silos = [processes.silo(s) for s in range(1, N_SILOS)]
    code, result, _ = finish(server)
    silo_code, _, silo_log = finish(early)
    for silo in silos:
        finish(silo)
    return {"early_silo_waiting_after_s": delay if early_alive else None, "server_exit": code,
            "early_silo_exit": silo_code, "completed": result.get("rounds_done"), "error": result.get("error", ""),
            "early_silo_said": [line[-160:] for line in silo_log.splitlines() if "no server" in line][:2]}


SCENARIOS: dict[str, Callable[[Federation, float], dict]] = {
    "silo-killed": silo_killed, "silo-stalled": silo_stalled, "late-silo": late_silo,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1],
                        help="the checkout whose uldp runs (default: this one)")
    parser.add_argument("--only", nargs="+", choices=sorted(SCENARIOS), default=sorted(SCENARIOS))
    parser.add_argument("--delay", type=float, default=12.0, help="seconds the late silo waits for its server")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    args = parser.parse_args()
    results: dict[str, Any] = {}
    for name in args.only:
        start = time.perf_counter()
        with federation(args.root.resolve()) as processes:
            results[name] = {**SCENARIOS[name](processes, args.delay), "seconds": round(time.perf_counter() - start)}
        if not args.json:
            print(f"{name}: {json.dumps(results[name])}", flush=True)
    if args.json:
        print(json.dumps({"root": str(args.root), "scenarios": results}))


if __name__ == "__main__":
    main()
