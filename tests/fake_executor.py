"""A fast stand-in for the simulation, for the tests of uldp.paper.experiments, uldp.paper.plots and
uldp.paper.scorecard.

Its functions live at module level so that spawned worker processes can unpickle them. Each execution appends a
line to ``$ULDP_FAKE_LOG`` (when set), so a test can count runs across processes.
"""

from __future__ import annotations

import math
import os
import time
from typing import TYPE_CHECKING, Any

from uldp.common.atomic import write_bytes_atomic
from uldp.paper.experiments import Executor

if TYPE_CHECKING:
    from collections.abc import Mapping

#: Calls of ``execute`` in this process after which ``interrupting`` raises KeyboardInterrupt (tests set it).
INTERRUPT_AFTER: list[int] = []


def _log(text: str) -> None:
    """Append "<pid> <text>" to ``$ULDP_FAKE_LOG`` when it is set."""
    if log := os.environ.get("ULDP_FAKE_LOG"):
        with open(log, "a", encoding="utf-8") as stream:
            stream.write(f"{os.getpid()} {text}\n")


def resolve(params: Mapping[str, Any]) -> dict:
    """The fake "full configuration": the arguments plus one default."""
    return {**params, "device": "cpu"}


def execute(params: Mapping[str, Any], checkpoint: str | None = None) -> dict:
    """Deterministic curves that depend on every argument: loss falls, epsilon grows like sqrt(round) (no
    checkpoint: a fake run takes no time)."""
    _log(str(sorted(params.items())))
    if params.get("method") == "FAIL":
        raise RuntimeError("this run fails on purpose")
    rate = 1.0 + 0.1 * params.get("seed", 0) + (params.get("global_lr") or 1.0) / 10
    rounds = range(1, params["rounds"] + 1)
    return {
        "round": list(rounds),
        "test_loss": [1.0 / (1.0 + rate * t) for t in rounds],
        "accuracy": [1.0 - 0.5 / (1.0 + rate * t) for t in rounds],
        "epsilon": [None if params.get("method") == "DEFAULT" else math.sqrt(t) for t in rounds],
        "wall_seconds": [0.001 * t for t in rounds],
        "info": {"dataset_variant": f"fake {params['dataset']}"},
    }


def interrupting(params: Mapping[str, Any], checkpoint: str | None = None) -> dict:
    """Like :func:`execute`, but raises KeyboardInterrupt once INTERRUPT_AFTER[0] runs have finished."""
    if INTERRUPT_AFTER and INTERRUPT_AFTER[0] <= 0:
        raise KeyboardInterrupt
    if INTERRUPT_AFTER:
        INTERRUPT_AFTER[0] -= 1
    return execute(params)


def resumed(params: Mapping[str, Any], checkpoint: str | None = None) -> dict:
    """Like :func:`execute`, as a run resumed from ``checkpoint`` after 100 s of earlier rounds: the file must
    exist (a test puts it there) and the result names it."""
    assert checkpoint is not None, "a resumed run needs its checkpoint"
    with open(checkpoint, encoding="utf-8"):
        pass
    return {
        **execute(params),
        "info": {
            "resumed_seconds": 100.0,
            "checkpoint": checkpoint,
            "dataset_variant": f"fake {params['dataset']}",
        },
    }


def slow(params: Mapping[str, Any], checkpoint: str | None = None) -> dict:
    """Like :func:`execute`, after two minutes of saving ``checkpoint`` over and over (atomically, as the simulation
    does), so that a signal finds the run in the middle of a write."""
    assert checkpoint is not None, "a slow run saves a checkpoint"
    _log("started")
    deadline = time.monotonic() + 120.0
    while time.monotonic() < deadline:
        write_bytes_atomic(checkpoint, bytes(1 << 16))
    return execute(params)


FAKE = Executor(resolve=resolve, execute=execute)
INTERRUPTING = Executor(resolve=resolve, execute=interrupting)
RESUMED = Executor(resolve=resolve, execute=resumed)
SLOW = Executor(resolve=resolve, execute=slow)


def paper_like(params: Mapping[str, Any], *, swap: tuple[str, str] | None = None) -> dict:
    """Curves of a world where every claim of the paper's Section 5.2 holds (``swap`` exchanges two methods'
    utility curves, to break claims on purpose)."""
    method, dataset = params["method"], params["dataset"]
    if swap and method in swap:
        method = swap[1 - swap.index(method)]
    final = {
        "DEFAULT": 0.95,
        "ULDP-AVG-w": 0.9,
        "ULDP-AVG": 0.85,
        "ULDP-SGD": 0.8,
        "ULDP-NAIVE": 0.5,
    }.get(method, 0.84)
    speed = {"ULDP-AVG-w": 0.5, "ULDP-AVG": 0.3, "ULDP-SGD": 0.1}.get(method, 0.3)
    if method.startswith("ULDP-GROUP"):  # reasonably high, more so with more users (smaller n)
        final = 0.78 + 0.017 * math.log10(params["n_users"])
        if params["n_users"] >= 1000 and params["distribution"] == "uniform":
            final = 0.86
    if dataset == "mnist" and method == "ULDP-AVG" and params["distribution"] == "zipf-noniid":
        final -= 0.04 if params["n_users"] < 1000 else 0.01
    if method in ("ULDP-AVG", "ULDP-AVG-w"):  # weighting: AVG-w's gain grows with silos and skew
        skew = 2 if params["distribution"] == "zipf" else 1
        final -= 0.0 if method == "ULDP-AVG-w" else 0.001 * params["n_silos"] * skew
    q = params.get("q", 1.0)
    final -= (1 - q) * (0.02 if dataset == "creditcard" else 0.005)
    final += 0.001 * params["seed"]
    rounds = range(1, params["rounds"] + 1)
    utility = [final * (1 - math.exp(-speed * t)) for t in rounds]
    scale = 0.5 * q
    if method.startswith("ULDP-GROUP"):
        scale = (
            0.1
            if (dataset == "mnist" and params["n_users"] >= 1000 and method == "ULDP-GROUP-2")
            else 100.0
        )
    metric = "c_index" if dataset == "tcga_brca" else "accuracy"
    return {
        "round": list(rounds),
        metric: utility,
        # Creditcard's claims read the balanced accuracy (its "normal" class is nine tenths of the test set)
        **({"balanced_accuracy": utility} if dataset == "creditcard" else {}),
        "test_loss": [1.0 - u for u in utility],
        "epsilon": [None if method == "DEFAULT" else scale * math.sqrt(t) for t in rounds],
        **(_protocol_timings(params) if params.get("secure") else {}),
    }


def _protocol_timings(params: Mapping[str, Any]) -> dict:
    """Per-round seconds of a secure run where local training dominates and every part grows linearly with the users
    and the parameters (14 for HeartDisease, 40 for TcgaBrca)."""
    parameters = 40 if params["dataset"] == "tcga_brca" else 14
    silos, load = params["n_silos"], params["n_users"] * parameters
    setup = {
        "paillier_keygen": 0.3,
        "key_exchange": 0.01,
        "blinded_histogram": 0.001 * params["n_users"],
    }
    parts = {
        "encrypt_weights": 0.0005 * load,
        "aggregation": 0.0005 * load,
        "silo_weighting": 0.0005 * load * silos,
    }
    round_seconds = silos * 0.01 * load + sum(parts.values())
    rounds = range(1, params["rounds"] + 1)
    return {
        "seconds": [round_seconds + (sum(setup.values()) if t == 1 else 0.0) for t in rounds],
        "info": {
            "n_silos": silos,
            "parameters": parameters,
            "secure_timings": {"setup": setup, "rounds": [parts] * params["rounds"]},
        },
    }
