"""Running a grid: every run not stored yet, in this process or in worker processes, each stored as it finishes;
resumable, and stopped cleanly (workers included) by Ctrl-C or SIGTERM."""

from __future__ import annotations

import math
import multiprocessing
import os
import queue
import signal
import sys
import time
import warnings
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from tqdm import tqdm

from uldp.common.atomic import write_json_atomic
from uldp.common.checks import check_integer, renamed_keyword
from uldp.common.interrupts import raise_interrupt, sigterm_interrupts
from uldp.common.provenance import canonical, now, provenance
from uldp.method_names import parse_method
from uldp.paper.experiments.executor import SIMULATION
from uldp.paper.experiments.keys import expand
from uldp.paper.experiments.results import duration
from uldp.paper.experiments.store import (
    StoredRun,
    expected_seconds,
    pending_runs,
    result_path,
    results_root,
    stored_result,
)
from uldp.training.device import check_precision, check_precision_for, device_name, resolve_device

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from uldp.paper.experiments.executor import Executor
    from uldp.paper.experiments.keys import RunSpec


@dataclass(frozen=True)
class GridReport:
    """What :func:`run_grid` did.

    Attributes:
        grid: Grid name.
        profile: Profile.
        root: Results root.
        total: Runs in the grid.
        skipped: Runs already stored.
        executed: Runs executed now.
        failed: ``(key, error)`` of runs that raised.
        wall_seconds: Time spent.
    """

    grid: str
    profile: str
    root: str
    total: int
    skipped: int
    executed: int
    failed: tuple[tuple[str, str], ...]
    wall_seconds: float


def _execute_one(
    executor: Executor,
    spec: RunSpec,
    path: str,
    base_provenance: dict,
    device: str = "cpu",
    precision: str = "float32",
) -> float:
    """Run one spec and store its file; return its wall time (runs in a worker process with ``--jobs``).

    The run saves its progress to ``<key>.ckpt`` beside its result (at most every minute, and when Ctrl-C or SIGTERM
    stops it), so a grid interrupted in the middle of a long run resumes that run after its last completed round; the
    file goes once the result is stored.
    The stored wall time includes the rounds run before an interruption (``info["resumed_seconds"]``). A ``device``
    other than the CPU is passed to the run (``RunConfig.device``) but stays out of its arguments and key: the
    resolved configuration and the provenance (``device_name``) name it. So does a ``precision`` other than float32
    (``RunConfig.precision``; the provenance's ``precision``).
    """
    params = spec.kwargs
    placement = {
        name: value
        for name, value, default in (("device", device, "cpu"), ("precision", precision, "float32"))
        if value != default
    }
    arguments = {**params, **placement}
    config = executor.resolve(arguments)
    checkpoint = Path(path).with_suffix(".ckpt")
    started = time.perf_counter()
    result = executor.execute(arguments, str(checkpoint))
    info = result.get("info") or {}
    wall = time.perf_counter() - started + info.get("resumed_seconds", 0.0)
    # what the data was (for example the Creditcard subset rather than the full file) belongs to provenance
    variant = {"dataset_variant": info.pop("dataset_variant")} if "dataset_variant" in info else {}
    if device != "cpu":
        variant["device_name"] = device_name(torch.device(config.get("device", device)))
    if precision != "float32":
        variant["precision"] = precision
    stored = StoredRun(
        spec.key,
        spec.grid,
        spec.panel,
        spec.series,
        spec.seed,
        canonical(params),
        config,
        result,
        {**base_provenance, **variant, "date": now(), "wall_seconds": round(wall, 3)},
    )
    write_json_atomic(Path(path), stored.to_json())
    checkpoint.unlink(missing_ok=True)
    return wall


def _start_worker(threads: int, worker_pids: multiprocessing.Queue) -> None:
    """Worker initializer: share the CPU cores between the worker processes (torch reads the variables when the
    executor first imports it), let SIGTERM stop the worker cleanly (see :func:`_stop_workers`), and report this
    process's id on ``worker_pids`` (the grid stops its workers by it)."""
    os.environ["OMP_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = str(threads)
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(threads)
    signal.signal(signal.SIGTERM, raise_interrupt)
    worker_pids.put(os.getpid())


def _execute_in_worker(
    executor: Executor,
    spec: RunSpec,
    path: str,
    base_provenance: dict,
    device: str = "cpu",
    precision: str = "float32",
) -> float:
    """:func:`_execute_one` in a worker process; an interrupt ends the process once the run's cleanup has run (the
    pool would otherwise hand the worker its next run; the parent is stopping the grid)."""
    try:
        return _execute_one(executor, spec, path, base_provenance, device, precision)
    except KeyboardInterrupt:
        os._exit(128 + signal.SIGINT)


def _stop_workers(
    pool: ProcessPoolExecutor, worker_pids: multiprocessing.Queue, *, grace_seconds: float = 10.0
) -> None:
    """Stop a grid's pool now: cancel the runs not started, send each worker SIGTERM (its run stops where it is,
    its completed rounds saved, no temporary file left), and SIGKILL one still alive after ``grace_seconds``.

    The workers are this process's children whose ids they reported on ``worker_pids`` (:func:`_start_worker`), found
    by :func:`multiprocessing.active_children`; a worker that has not reported yet has no run to stop, and the
    pool's shutdown ends it.
    """
    pids = set()
    while True:
        try:
            pids.add(worker_pids.get_nowait())
        except queue.Empty:
            break
    workers = [child for child in multiprocessing.active_children() if child.pid in pids]
    pool.shutdown(wait=False, cancel_futures=True)
    for worker in workers:
        if worker.is_alive():
            worker.terminate()
    deadline = time.monotonic() + grace_seconds
    for worker in workers:
        worker.join(max(0.0, deadline - time.monotonic()))
        if worker.is_alive():
            worker.kill()
            worker.join()


@renamed_keyword("target_epsilon", "epsilon")
def run_grid(
    grid_name: str,
    profile: str,
    *,
    seeds: Sequence[int] | None = None,
    methods: Sequence[str] | None = None,
    datasets: Sequence[str] | None = None,
    where: Mapping[str, Sequence[str]] | None = None,
    jobs: int = 1,
    root: Path | str | None = None,
    executor: Executor = SIMULATION,
    backend: Executor | None = None,
    progress: bool = True,
    command: str | None = None,
    accountant: str = "rdp",
    epsilon: float | None = None,
    uniform_allocation: str | None = None,
    device: str = "cpu",
    precision: str = "float32",
) -> GridReport:
    """Run every run of a grid that is not stored yet, storing each as it finishes.

    Already stored runs are skipped, so calling this again after an interruption resumes the grid, and several
    processes may work on one grid (each skips what another stored while it ran; nothing claims a run while it runs,
    so processes started together do the same runs twice, harmlessly: use ``jobs`` to split one grid). A run that
    raises an ``Exception`` is reported in :attr:`GridReport.failed` and the others go on. Ctrl-C
    (``KeyboardInterrupt``) or SIGTERM stops the grid and, with ``jobs > 1``, its worker processes (each run in
    progress saves its completed rounds to its checkpoint; the finished runs stay stored; no temporary file is
    left). Only SIGKILL of this process leaves workers behind: each ends with its current run.

    Args:
        grid_name: A key of :data:`GRIDS`.
        profile: One of :data:`PROFILES`.
        seeds: Seeds instead of the profile's.
        methods: Only the runs of these methods.
        datasets: Only the runs on these datasets.
        where: Only the runs whose parameters take these values (:func:`expand`).
        jobs: Runs at once (``> 1``: worker processes started with ``spawn``, CPU threads shared between them).
        root: Results root (default :func:`results_root` of the profile).
        executor: What executes a run (default the simulation).
        backend: Deprecated (one release): ``executor``.
        progress: Show a tqdm bar with the remaining-time estimate (on stderr).
        command: Recorded in the provenance (default: this call).
        accountant, epsilon, uniform_allocation: As in :func:`expand` (the paper's runs when left at their
            defaults; epsilon's old name ``target_epsilon`` is accepted for one release, with a ``DeprecationWarning``).
        device: Where each run trains (``RunConfig.device``): not part of a run's key, so a run stored from a GPU
            is the same run as from the CPU (equal within float tolerance, dropout draws apart).
        precision: Each run's ``RunConfig.precision`` (``"float32"``, ``"tf32"`` or ``"bf16"``,
            :func:`uldp.training.device.check_precision`): like ``device``, not part of a run's key; the resolved
            configuration and the provenance name it.

    Returns:
        A :class:`GridReport`.

    Raises:
        ValueError: Unknown grid or profile, bad seeds, ``jobs < 1``, or a device or precision it cannot use
            (before any run).
        KeyboardInterrupt: Ctrl-C or SIGTERM (the message names the signal).
    """
    check_integer("jobs", jobs)
    device, precision = str(resolve_device(device)), check_precision(precision)
    if backend is not None:
        warnings.warn(
            "run_grid(backend=...) is deprecated and will be removed in the next release; use executor=",
            DeprecationWarning,
            stacklevel=2,
        )
        executor = backend
    specs = expand(
        grid_name,
        profile,
        seeds=seeds,
        methods=methods,
        datasets=datasets,
        where=where,
        accountant=accountant,
        epsilon=epsilon,
        uniform_allocation=uniform_allocation,
    )
    if precision != "float32":  # a precision some family cannot take stops the grid before any run
        for method in sorted({spec.kwargs["method"] for spec in specs}):
            check_precision_for(parse_method(method).family, precision)
    root = Path(root) if root is not None else results_root(profile)
    started = time.perf_counter()
    # Seed-major order: an interrupted paper grid has whole figures with fewer seeds rather than half a figure.
    # Within a seed, longest first (by the same run's time at other seeds; unknown counts as longest): the last runs
    # are then the short ones, so with several jobs no worker waits long on another at the end.
    todo = pending_runs(specs, root)
    expected = expected_seconds(todo, root)
    todo.sort(key=lambda spec: (spec.seed, -expected.get(spec.key, math.inf)))
    n_distinct = len({spec.key for spec in specs})
    base = provenance(
        command
        or f"uldp.paper.experiments.run_grid({grid_name!r}, {profile!r}, seeds={seeds!r}, jobs={jobs})"
    )
    failed: list[tuple[str, str]] = []
    raced = 0
    bar = tqdm(
        total=len(todo),
        desc=f"{grid_name} [{profile}]",
        unit="run",
        disable=not progress or not todo,
        file=sys.stderr,
        dynamic_ncols=True,
    )
    unfinished = {spec.key for spec in todo}

    def show_time_left() -> None:
        """With stored times of other seeds, show the time left by them (runs differ in length by 100x, so the
        bar's own estimate, per run, is far off; a run without one counts as the mean of those known)."""
        if expected:
            typical = sum(expected.values()) / len(expected)
            seconds = sum(expected.get(key, typical) for key in unfinished) / max(
                1, min(jobs, len(unfinished))
            )
            bar.set_postfix_str(
                f"about {duration(seconds)} left by other seeds' times" if unfinished else "",
                refresh=False,
            )

    def advance(spec: RunSpec) -> None:
        unfinished.discard(spec.key)
        show_time_left()
        bar.update(1)

    show_time_left()
    bar.refresh()
    with bar, sigterm_interrupts():
        if jobs == 1 or len(todo) <= 1:
            for spec in todo:
                if (
                    stored_result(root, spec) is not None
                ):  # stored meanwhile by another process on this folder
                    raced += 1
                    advance(spec)
                    continue
                try:
                    _execute_one(
                        executor, spec, str(result_path(root, spec)), base, device, precision
                    )
                except Exception as error:
                    failed.append(
                        (spec.key, f"{spec.panel} / {spec.series} / seed {spec.seed}: {error!r}")
                    )
                advance(spec)
        else:
            threads = max(1, (os.cpu_count() or 1) // jobs)
            context = multiprocessing.get_context("spawn")
            worker_pids = context.Queue()
            pool = ProcessPoolExecutor(
                max_workers=jobs,
                mp_context=context,
                initializer=_start_worker,
                initargs=(threads, worker_pids),
            )
            try:
                waiting: dict[Future, RunSpec] = {}
                queue = list(todo)
                while queue or waiting:
                    while queue and len(waiting) < jobs:
                        spec = queue.pop(0)
                        if (
                            stored_result(root, spec) is not None
                        ):  # stored meanwhile by another process
                            raced += 1
                            advance(spec)
                            continue
                        waiting[
                            pool.submit(
                                _execute_in_worker,
                                executor,
                                spec,
                                str(result_path(root, spec)),
                                base,
                                device,
                                precision,
                            )
                        ] = spec
                    done, _ = wait(waiting, return_when=FIRST_COMPLETED)
                    for future in done:
                        spec = waiting.pop(future)
                        if future.exception() is not None:
                            failed.append(
                                (
                                    spec.key,
                                    (
                                        f"{spec.panel} / {spec.series} / seed {spec.seed}: "
                                        f"{future.exception()!r}"
                                    ),
                                )
                            )
                        advance(spec)
            except BaseException:  # Ctrl-C or SIGTERM: the workers stop too, not only this process
                _stop_workers(pool, worker_pids)
                raise
            pool.shutdown()
    return GridReport(
        grid_name,
        profile,
        str(root),
        n_distinct,
        n_distinct - len(todo) + raced,
        len(todo) - len(failed) - raced,
        tuple(failed),
        time.perf_counter() - started,
    )
