"""Training on a device (issue 43): the per-user engine against a plain vmap reference and the CPU, an MNIST paper
round per method family, and one short paper-scale run, as one JSON document on stdout.

1. ``engine``: per-user local training of the MNIST CNN (train mode, dropout on), ``--users`` users of
   ``--records`` records each (the paper's 10,000 users hold about 6 MNIST records each), ``--epochs`` local epochs
   of one mini-batch each, in record-steps per second (records times epochs per wall second): the library's
   ``train_users`` in float32 (the closed-form grouped convolutions) and in bfloat16 autocast (``vmap(grad(...))``),
   a plain ``vmap(grad(functional_call(...)))`` over every user at once written here (the reference of issue 43),
   in float32 and bfloat16, and the library on the CPU (``--cpu-users`` users, all its threads). Each is timed
   after one warm-up call (CUDA's start-up and cuDNN's autotuning; any device's lazy set-up), best of ``--repeats``.
2. ``paper_round``: one round of each method family on MNIST at the paper's settings (``uldp.simulation.run``, |U|
   = 10,000 uniform, Q = 50, the paper's learning rates), with ``--quick`` at |U| = 100 on 600 records and Q = 2.
   ULDP-GROUP's DP-SGD (opacus for the CNN) is timed at one local epoch and scaled to Q (its steps per epoch are
   fixed), marked ``projected``. A round's seconds include its evaluation on the 10,000 test images (most of a
   ``--quick`` round on a CPU, little of a paper round).
3. ``paper_scale_run``: ULDP-AVG-w at the paper's MNIST scale for ``--rounds`` rounds (float32 and bfloat16), its
   accuracy and the seconds per round, projected to the paper's T = 200.
4. ``zipf_silo``: the zipf federation's largest silo under each chunk fill rule (:func:`zipf_silo`).
5. ``profile``: one profiled call of the engine and of the reference in each precision, their CPU ops' and CUDA
   kernels' self times side by side and where the engine spends more (:func:`profile`).

Sized for one call of at most 8 minutes on an H100 (``--device cuda``); ``--device cpu --quick`` runs here in about two
minutes. Stopped by SIGTERM (a time limit), it still prints the sections it completed, and ``stopped`` says where; a
section that fails (say, a profiler the device's image lacks) is reported as ``{"error": ...}`` with its traceback on
stderr, and the next sections run. Times are wall seconds of a possibly shared machine: compare ratios within one
document.

Usage: ``python benchmarks/gpu.py [--device cuda] [--quick] [--sections engine,paper_round] [--json]`` (the
document is always JSON; ``--json`` is accepted for ``benchmarks/save.py``). The committed CPU run:
``python benchmarks/save.py gpu --device cpu --quick``, stored as ``benchmarks/results/gpu_cpu_quick.json``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
import traceback
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch.func import functional_call, grad, vmap

from uldp.common.interrupts import sigterm_interrupts
from uldp.data import load
from uldp.method_names import parse_method
from uldp.models import build_model, cross_entropy_loss
from uldp.simulation import RunConfig, run
from uldp.training.device import autocast, device_name, device_settings, resolve_device
from uldp.training.per_user import flat_parameters, record_keys, train_users

if TYPE_CHECKING:
    from collections.abc import Callable

LR = 0.01
#: Issue 43's goals for the MNIST CNN on one H100, record-steps per second.
GOALS = {"float32": 400_000, "bf16": 1_400_000}
#: One method of each family, as the paper's MNIST figures run them.
FAMILY_METHODS = {
    "DEFAULT": "DEFAULT",
    "ULDP-NAIVE": "ULDP-NAIVE",
    "ULDP-GROUP": "ULDP-GROUP-median",
    "ULDP-SGD": "ULDP-SGD",
    "ULDP-AVG": "ULDP-AVG",
    "ULDP-AVG-w": "ULDP-AVG-w",
}
PAPER_ROUNDS = 200
SECTIONS = ("engine", "paper_round", "paper_scale_run", "zipf_silo", "profile")
#: The ``profile`` section's rows per table, and the characters kept of a name (CUDA kernels' run long).
PROFILE_ROWS, PROFILE_NAME_CHARS = 15, 120
#: The chunks' fill rules the ``zipf_silo`` section compares, strictest first (:data:`uldp.training.chunks.MIN_FILL`,
#: the library's, among them): padding costs compute, and each chunk's sequential steps cost their kernel launches;
#: the rows' steps and slots against their times give the device's price of each.
FILLS = (0.9, 0.75, 0.5, 0.25, 0.1, 0.0)
#: The local batch size of the paper's MNIST runs.
BATCH = 64
#: The ``zipf_silo`` section's users under ``--quick`` (the silo's largest).
QUICK_SILO_USERS = 300


def synchronize(device: torch.device) -> None:
    """Wait for the device's queued work (a CUDA kernel returns before it has run)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def best_seconds(fn: Callable[[], object], device: torch.device, repeats: int) -> float:
    """Best wall time of ``repeats`` calls, after one warm-up call (on CUDA its start-up and cuDNN's autotuning; on
    any device the first call's lazy set-up, which a ``--quick`` CPU run with one repeat used to time)."""
    fn()
    synchronize(device)
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        synchronize(device)
        best = min(best, time.perf_counter() - start)
    return best


def problem(users: int, records: int, epochs: int, device: torch.device) -> dict[str, Any]:
    """Random MNIST-shaped records of ``users`` users, ``records`` each, on ``device`` (speed does not depend on
    the pixels)."""
    generator = torch.Generator().manual_seed(0)
    n = users * records
    x = torch.rand((n, 1, 28, 28), generator=generator)
    y = torch.randint(0, 10, (n,), generator=generator)
    groups = list(np.arange(n).reshape(users, records))
    keys = record_keys(n, epochs, generator)
    return {"x": x.to(device), "y": y.to(device), "groups": groups, "keys": keys.to(device)}


def library_step(
    users: int, records: int, epochs: int, device: torch.device, precision: str
) -> Callable[[], object]:
    """One call of ``train_users`` (the library's engine) on ``users`` users of ``records`` records."""
    model = build_model("mnist", seed=0).to(device).train()
    params = flat_parameters(model)
    data = problem(users, records, epochs, device)

    def step() -> object:
        return train_users(
            model,
            params,
            data["x"],
            data["y"],
            data["groups"],
            loss_fn=cross_entropy_loss,
            local_lr=LR,
            epochs=epochs,
            batch_size=BATCH,
            keys=data["keys"],
            precision=precision,
        )

    return step


def reference_step(
    users: int, records: int, epochs: int, device: torch.device, precision: str
) -> Callable[[], object]:
    """One call of a plain ``vmap(grad(...))`` over every user at once: each user's records are one mini-batch,
    ``epochs`` SGD steps (issue 43's reference)."""
    model = build_model("mnist", seed=0).to(device).train()
    data = problem(users, records, epochs, device)
    x = data["x"].reshape(users, records, 1, 28, 28)
    y = data["y"].reshape(users, records)
    weight = torch.ones((users, records), device=device)

    def loss(params: dict, xs: torch.Tensor, ys: torch.Tensor, ws: torch.Tensor) -> torch.Tensor:
        return cross_entropy_loss(functional_call(model, params, (xs,)), ys, ws)

    user_grad = vmap(grad(loss), randomness="different")

    def step() -> object:
        params = {
            name: p.detach().expand(users, *p.shape).clone() for name, p in model.named_parameters()
        }
        with autocast(device, precision):
            for _ in range(epochs):
                for name, g in user_grad(params, x, y, weight).items():
                    params[name].sub_(LR * g)
        return params

    return step


#: The two ways of training every user that the engine and profile sections compare.
STEPS = {"library": library_step, "vmap_reference": reference_step}


def record_step_rate(
    way: str,
    users: int,
    records: int,
    epochs: int,
    device: torch.device,
    precision: str,
    repeats: int,
) -> float:
    """Record-steps per second of :data:`STEPS`' ``way`` on ``device`` in ``precision``."""
    step = STEPS[way](users, records, epochs, device, precision)
    with device_settings(device, precision):
        seconds = best_seconds(step, device, repeats)
    return users * records * epochs / seconds


def engine(args: argparse.Namespace, device: torch.device) -> dict[str, Any]:
    """Section 1: the engine's record-steps per second beside the reference and the CPU."""
    sizes = (args.users, args.records, args.epochs)
    rates = {
        f"{way}_{precision}": record_step_rate(way, *sizes, device, precision, args.repeats)
        for way in STEPS
        for precision in ("float32", "bf16")
    }
    cpu = torch.device("cpu")
    rates["library_cpu_float32"] = (
        rates["library_float32"]
        if device == cpu
        else record_step_rate(
            "library", args.cpu_users, args.records, args.epochs, cpu, "float32", args.repeats
        )
    )
    rounded = {name: float(f"{rate:.4g}") for name, rate in rates.items()}
    return {
        "problem": {
            "users": args.users,
            "records_per_user": args.records,
            "epochs": args.epochs,
            "cpu_users": args.cpu_users if device != cpu else args.users,
            "cpu_threads": torch.get_num_threads(),
        },
        "record_steps_per_second": rounded,
        "ratios": {
            "library_over_reference_float32": round(
                rates["library_float32"] / rates["vmap_reference_float32"], 3
            ),
            "library_over_reference_bf16": round(
                rates["library_bf16"] / rates["vmap_reference_bf16"], 3
            ),
            "library_over_cpu_float32": round(
                rates["library_float32"] / rates["library_cpu_float32"], 3
            ),
            "bf16_over_float32": round(rates["library_bf16"] / rates["library_float32"], 3),
        },
        "goals_h100": GOALS,
    }


def round_config(
    method: str, args: argparse.Namespace, device: torch.device, **options: Any
) -> RunConfig:
    """The MNIST run of ``method`` at the paper's settings (reduced with ``--quick``) on ``device``."""
    reduced: dict[str, Any] = (
        {"n_users": 100, "max_train_records": 600, "local_epochs": 2}
        if args.quick
        else {"n_users": 10_000}
    )
    if parse_method(method).family == "ULDP-SGD":
        reduced.pop("local_epochs", None)
    return RunConfig(
        dataset="mnist",
        method=method,
        rounds=options.pop("rounds", 1),
        seed=0,
        device=str(device),
        **{**reduced, **options},
    )


def paper_round(args: argparse.Namespace, device: torch.device, data: Any) -> dict[str, Any]:
    """Section 2: one round per method family; ULDP-GROUP timed at one epoch and scaled to Q."""
    rounds = {}
    for family, method in FAMILY_METHODS.items():
        config = round_config(method, args, device)
        epochs = config.local_epochs
        projected = family == "ULDP-GROUP" and epochs is not None and epochs > 1
        if projected:
            config = round_config(method, args, device, local_epochs=1)
        result = run(config, dataset=data)
        seconds = result.seconds[0] * (epochs if projected and epochs is not None else 1)
        rounds[family] = {
            "method": method,
            "users": config.n_users,
            "records": result.info["train_records"],
            "local_epochs": epochs,
            "seconds": round(seconds, 3),
            "projected_from_one_epoch": projected,
        }
    return rounds


def paper_scale_run(args: argparse.Namespace, device: torch.device, data: Any) -> dict[str, Any]:
    """Section 3: ULDP-AVG-w for ``--rounds`` rounds in float32 and bfloat16."""
    runs = {}
    for precision in ("float32", "bf16"):
        config = round_config(
            "ULDP-AVG-w", args, device, rounds=args.rounds, distribution="zipf", precision=precision
        )
        result = run(config, dataset=data)
        per_round = float(np.mean(result.seconds))
        runs[precision] = {
            "users": config.n_users,
            "rounds": config.rounds,
            "local_epochs": config.local_epochs,
            "seconds_per_round": round(per_round, 3),
            "accuracy": [round(value, 4) for value in result.accuracy],
            "projected_hours_for_200_rounds": round(per_round * PAPER_ROUNDS / 3600, 3),
        }
    return runs


def zipf_silo(args: argparse.Namespace, device: torch.device, data: Any) -> dict[str, Any]:
    """Section 4: one silo of the paper's zipf MNIST federation (|U| = 10,000, 5 silos, seed 0; the silo with the
    largest user, 1 to 208 records a user) trained by ``train_users`` for ``--epochs`` local epochs (batch 64) under
    each fill rule of :data:`FILLS`, in float32 and bfloat16: record-steps per second, the chunks it made, their
    sequential steps per epoch (each chunk's largest user's batches) and the slots those steps compute. With
    ``--quick``, the silo's :data:`QUICK_SILO_USERS` largest users. A paper round's zipf silos cost more than their
    records say: each chunk runs as many sequential steps as its largest user needs."""
    from uldp.data.allocation import allocate
    from uldp.methods.base import Federation
    from uldp.training import chunks, per_user

    allocation = allocate(data, n_users=10_000, n_silos=5, scheme="zipf", seed=0)
    model = build_model("mnist", seed=0).to(device).train()
    federation = Federation(model, cross_entropy_loss, data.x_train, data.y_train, allocation)
    _, groups = federation.user_groups(int(np.argmax(allocation.counts.max(axis=1))))
    if args.quick:
        groups = sorted(groups, key=len)[-QUICK_SILO_USERS:]
    records = np.concatenate(
        groups
    )  # the silo's records, user by user: group u is a run of positions
    x, y = data.x_train[records].to(device), data.y_train[records].to(device)
    groups = np.split(np.arange(records.size), np.cumsum([group.size for group in groups])[:-1])
    keys = record_keys(records.size, args.epochs, torch.Generator().manual_seed(0)).to(device)
    params = flat_parameters(model)
    padded, made = per_user.padded_indices, []

    def counted(
        groups: list[np.ndarray], members: np.ndarray, device: torch.device
    ) -> tuple[
        torch.Tensor, torch.Tensor
    ]:  # each chunk pads its users' indices once: the chunks a rule makes, their steps and slots
        index, counts = padded(groups, members, device)
        users, largest = index.shape
        width = min(BATCH, largest)
        steps = -(-largest // width)
        made.append((steps, users * steps * width))
        return index, counts

    def timed(precision: str) -> float:
        def step() -> object:
            return train_users(
                model,
                params,
                x,
                y,
                groups,
                loss_fn=cross_entropy_loss,
                local_lr=LR,
                epochs=args.epochs,
                batch_size=BATCH,
                keys=keys,
                precision=precision,
            )

        with device_settings(device, precision):
            return best_seconds(step, device, args.repeats)

    library, rows = chunks.MIN_FILL, []
    per_user.padded_indices = counted
    try:
        for precision in ("float32", "bf16"):
            for fill in FILLS:
                chunks.MIN_FILL = fill
                made.clear()
                rate = records.size * args.epochs / timed(precision)
                call = made[: len(made) // (args.repeats + 1)]  # every call chunks alike
                rows.append(
                    {
                        "precision": precision,
                        "min_fill": fill,
                        "chunks": len(call),
                        "steps_per_epoch": sum(steps for steps, _ in call),
                        "fill": round(records.size / sum(slots for _, slots in call), 3),
                        "record_steps_per_second": float(f"{rate:.4g}"),
                    }
                )
    finally:
        chunks.MIN_FILL, per_user.padded_indices = library, padded
    return {
        "silo": {
            "users": len(groups),
            "records": int(records.size),
            "largest": max(map(len, groups)),
        },
        "epochs": args.epochs,
        "library_min_fill": library,
        "rows": rows,
    }


def profiled(step: Callable[[], object], device: torch.device, precision: str) -> dict[str, Any]:
    """One call of ``step``, after a warm-up, under torch's profiler: its wall seconds (with the profiler's overhead
    per op) and, by name, the calls and self milliseconds of every op on the CPU (where a workload of small kernels
    spends its launches) and, on CUDA, of every kernel on the device."""
    from torch.profiler import ProfilerActivity, profile as torch_profile

    activities = [ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    with device_settings(device, precision):
        step()
        synchronize(device)
        with torch_profile(activities=activities) as trace:
            start = time.perf_counter()  # the profiler's own start and stop left out
            step()
            synchronize(device)
            wall = time.perf_counter() - start
    events = trace.key_averages()

    def by_name(attribute: str) -> dict[str, tuple[int, float]]:
        return {
            event.key[:PROFILE_NAME_CHARS]: (event.count, getattr(event, attribute) / 1e3)
            for event in events
            if getattr(event, attribute) > 0
        }

    tables = {"cpu_ops": by_name("self_cpu_time_total")}
    if device.type == "cuda":
        tables["kernels"] = by_name("self_device_time_total")
    return {"wall_seconds": wall, **tables}


def _most(rows: dict[str, tuple[int, float]]) -> dict[str, Any]:
    """A profile table's totals and its :data:`PROFILE_ROWS` largest rows, ``[name, calls, self ms]``."""
    ranked = sorted(rows.items(), key=lambda row: -row[1][1])[:PROFILE_ROWS]
    return {
        "total_ms": round(sum(ms for _, ms in rows.values()), 3),
        "calls": sum(calls for calls, _ in rows.values()),
        "top": [[name, calls, round(ms, 3)] for name, (calls, ms) in ranked],
    }


def profile(args: argparse.Namespace, device: torch.device) -> dict[str, Any]:
    """Section 5: where the engine's time goes beside the reference's, in each precision (issue 43: the engine's
    bfloat16 rate was 53% of its goal where float32's was 93%, and counting aten ops on the CPU did not explain the
    gap). One profiled call of each at the engine section's sizes: the self time of the CPU's ops and, on CUDA, of
    the device's kernels, each table's largest rows, and the rows by which the engine spends most over the
    reference (``gap``: ``[name, extra ms, extra calls]``; a name only one of them runs counts in full)."""
    sizes = (args.users, args.records, args.epochs)
    section: dict[str, Any] = {
        "problem": {"users": args.users, "records_per_user": args.records, "epochs": args.epochs}
    }
    for precision in ("float32", "bf16"):
        runs = {
            way: profiled(make(*sizes, device, precision), device, precision)
            for way, make in STEPS.items()
        }
        result: dict[str, Any] = {
            way: {
                "wall_seconds": round(run["wall_seconds"], 4),
                **{table: _most(run[table]) for table in run if table != "wall_seconds"},
            }
            for way, run in runs.items()
        }
        gap = {}
        for table in (name for name in runs["library"] if name != "wall_seconds"):
            engine_rows, reference_rows = runs["library"][table], runs["vmap_reference"][table]
            extra = {
                name: (
                    engine_rows.get(name, (0, 0.0))[1] - reference_rows.get(name, (0, 0.0))[1],
                    engine_rows.get(name, (0, 0.0))[0] - reference_rows.get(name, (0, 0.0))[0],
                )
                for name in set(engine_rows) | set(reference_rows)
            }
            ranked = sorted(extra.items(), key=lambda row: -row[1][0])[:PROFILE_ROWS]
            gap[table] = [[name, round(ms, 3), calls] for name, (ms, calls) in ranked]
        section[precision] = {**result, "gap": gap}
    return section


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--quick", action="store_true", help="reduced sizes (the CPU's check)")
    parser.add_argument("--users", type=int, default=None, help="engine: users (10,000; quick 200)")
    parser.add_argument("--records", type=int, default=6, help="engine: records per user")
    parser.add_argument(
        "--epochs", type=int, default=None, help="engine: local epochs (5; quick 2)"
    )
    parser.add_argument("--cpu-users", type=int, default=500, help="engine: users of the CPU's run")
    parser.add_argument(
        "--rounds", type=int, default=None, help="paper-scale run: rounds (3; quick 2)"
    )
    parser.add_argument(
        "--repeats", type=int, default=None, help="timed calls, best taken (3; quick 1)"
    )
    parser.add_argument(
        "--sections",
        default=",".join(SECTIONS),
        help=f"comma-separated, of {', '.join(SECTIONS)} (default all)",
    )
    parser.add_argument("--json", action="store_true", help="accepted: the output is always JSON")
    args = parser.parse_args()
    chosen = [name.strip() for name in args.sections.split(",") if name.strip()]
    unknown = sorted(set(chosen) - set(SECTIONS))
    if unknown or not chosen:
        parser.error(f"--sections takes {', '.join(SECTIONS)}, got {args.sections!r}")
    defaults = {"users": 200, "epochs": 2, "rounds": 2, "repeats": 1} if args.quick else {}
    defaults = {"users": 10_000, "epochs": 5, "rounds": 3, "repeats": 3, **defaults}
    for name, value in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    device = resolve_device(args.device)
    started = time.perf_counter()
    data = load("mnist")
    document: dict[str, Any] = {
        "device": {
            "name": device_name(device),
            "torch_device": str(device),
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "cpu_count": os.cpu_count(),
        },
        "quick": args.quick,
    }
    sections: dict[str, Callable[[], dict[str, Any]]] = {
        "engine": lambda: engine(args, device),
        "paper_round": lambda: paper_round(args, device, data),
        "paper_scale_run": lambda: paper_scale_run(args, device, data),
        "zipf_silo": lambda: zipf_silo(args, device, data),
        "profile": lambda: profile(args, device),
    }
    sections = {name: section for name, section in sections.items() if name in chosen}
    # a time limit's SIGTERM (tools/gpu_session.py, timeout) still gets the completed sections printed
    try:
        with sigterm_interrupts():
            for name, section in sections.items():
                try:
                    document[name] = section()
                except Exception as error:  # one lease: a failed section keeps the others
                    traceback.print_exc()
                    document[name] = {"error": f"{type(error).__name__}: {error}"}
    except KeyboardInterrupt as stop:
        document["stopped"] = (
            f"{stop or 'stopped'} in section {name}; the sections before it are complete"
        )
    document["wall_seconds"] = round(time.perf_counter() - started, 1)
    print(json.dumps(document, indent=1))


if __name__ == "__main__":
    main()
