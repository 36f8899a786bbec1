"""One lent GPU session, prepared here and run there in one call: the GPU checks and runs that issue 43 asks for.

A GPU machine is lent to some sessions only, for 15 minutes of device time in all, and it starts bare: its own
Python (3.12) and torch (with CUDA), no network, and none of this project's other packages or data. So the work is
split in three:

- ``prepare`` (here, where pip reaches the package registry): downloads the wheels the device's image lacks
  (:data:`DEVICE_PACKAGES`, at ``constraints.txt``'s pins) for its Python, copies the datasets the runs read into
  ``.device/`` (git-ignored), and prints the device call: its command and the paths to carry (``.device`` and the
  checkpoints of runs begun in an earlier call).
- ``session`` (there, or here on the CPU to check it): the stages ``tests`` (``tests/test_gpu.py`` and the device
  tests), ``benchmark`` (``benchmarks/gpu.py``), ``lattice`` (``benchmarks/lattice_workers.py`` on the machine's
  cores) and ``grid`` (paper-scale runs, :data:`DEFAULT_GRIDS`, by ``uldp grid``), in the order given, inside
  ``--minutes``. The grid stage sends SIGTERM when its time is up: each run in progress saves its completed rounds,
  and the next call resumes it. Everything goes to ``--out`` (the device's ``$OUT``, at most 8 files):
  ``session.json`` (each stage's status and seconds), ``tests.log``, ``gpu.json``, ``lattice_workers.json``, and
  ``<grid>/`` with each result and checkpoint the grid stage made.
- ``collect FOLDER`` (here, on the files that came back): puts the results and checkpoints under ``results/``, where
  the chapters read them and the next ``prepare`` finds the checkpoints to carry.

Usage:
    python tools/gpu_session.py prepare [--datasets mnist]
    python tools/gpu_session.py session --out DIR [--device cuda] [--minutes 8]
        [--stages tests,benchmark,lattice,grid] [--precision float32] [--lattice-args "--workers 1,16"]
        [--grid "user_sampling --datasets mnist --seeds 0 --where q=1"] ...
    python tools/gpu_session.py collect FOLDER

Each prints one JSON document on stdout; progress and the stages' logs go to stderr and ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
#: What ``prepare`` fills and the device call carries (``.gitignore`` lists it).
KIT = ROOT / ".device"
#: Packages the device's image lacks (KINDS.md of the device tool lists what it has: torch, numpy, scipy, pandas,
#: scikit-learn, tqdm, pytest, hypothesis, grpcio, protobuf, typer, rich, httpx, ...), found by running the session's
#: tests in an environment of that list alone: opacus (the accountant), Protocol 1's modules that the methods import
#: (phe, gmpy2, cryptography with cffi and pycparser), Flower for the silos' path (flwr, pycryptodome, iterators),
#: and tenseal for the lattice backend (``benchmarks/lattice_workers.py`` on the device's 16 cores; the second H200
#: call found it missing).
DEVICE_PACKAGES = (
    "opacus",
    "tenseal",
    "phe",
    "gmpy2",
    "cryptography",
    "cffi",
    "pycparser",
    "flwr",
    "pycryptodome",
    "iterators",
)
#: The device image's Python.
DEVICE_PYTHON = "3.12"
#: Platform tags of the device's wheels (pip matches each exactly).
PLATFORMS = (
    *(f"manylinux_2_{minor}_x86_64" for minor in (17, 24, 27, 28, 31, 34, 35)),
    "manylinux2014_x86_64",
    "manylinux1_x86_64",
)
#: The tests the ``tests`` stage runs: the GPU's own (``fit`` and the engine, then Flower's silos), then the device
#: plumbing and the per-user engine's.
DEVICE_TESTS = (
    "tests/test_gpu.py",
    "tests/test_gpu_flower.py",
    "tests/test_device.py",
    "tests/test_cnn.py",
    "tests/test_per_user.py",
    "tests/test_benchmark_gpu.py",
)
#: The grid stage's runs, most wanted first (issue 43): Figure 9's q = 1 endpoint, which is also Figure 5's
#: ULDP-AVG-w at |U| = 10,000 zipf, then Figure 5's DEFAULT there.
DEFAULT_GRIDS = (
    "user_sampling --datasets mnist --seeds 0 --where q=1",
    "mnist --seeds 0 --where n_users=10000 distribution=zipf --methods DEFAULT",
)
#: Seconds the session keeps for itself after the grid stage (copying its files to ``--out``).
MARGIN_SECONDS = 20.0
#: Seconds a grid is given to save and stop after SIGTERM before it is killed.
GRACE_SECONDS = 30.0
STAGES = ("tests", "benchmark", "lattice", "grid")
#: The ``lattice`` stage's options of ``benchmarks/lattice_workers.py``: the silo round on the machine's 16 cores, one
#: worker against 16 (about a minute on the first H200 session's machine, 2026-11-28).
LATTICE_ARGS = "--parameters 262144 --workers 1,16 --repeat 1"
LATTICE_BENCHMARK = ROOT / "benchmarks" / "lattice_workers.py"
#: A lent machine's 15 minutes as two calls, ``(stages, minutes, benchmark options)``: the checks, then the runs on the
#: still warm machine; ``prepare`` prints both. Sized from the first H200 session (2026-11-28): a fresh machine
#: started in about 30 s, the tests stage took 27-32 s, the engine section about 40 s; the paper rounds and the short
#: paper-scale run are committed (``benchmarks/results/gpu_h200*.json``), so the benchmark stage measures the engine,
#: the zipf silo's fill rules and the profile of the engine against the reference (the bfloat16 gap; four profiled
#: calls of about half a second each there), the lattice stage the shared expansion on 16 cores, and the grid gets
#: the rest.
CALLS = (("tests,benchmark,lattice", 5.0, "--sections engine,zipf_silo,profile"), ("grid", 7.5, ""))
#: The ``run`` tool's longest command, in seconds.
CALL_LIMIT_SECONDS = 600


def constraint_pins(path: Path = ROOT / "constraints.txt") -> dict[str, str]:
    """``{normalised name: version}`` of the ``name==version`` lines of a constraints file."""
    pins = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        name, separator, version = line.split("#")[0].strip().partition("==")
        if separator:
            pins[re.sub(r"[-_.]+", "-", name.strip()).lower()] = version.strip()
    return pins


def _carried(path: Path) -> str:
    """``path`` as the device call names it: relative to the checkout's root where it lies inside it."""
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def device_call(
    kit: Path = KIT,
    results: Path = ROOT / "results",
    *,
    stages: str = ",".join(STAGES),
    minutes: float = 8.0,
    benchmark_args: str = "",
) -> dict[str, Any]:
    """The ``run`` tool's arguments for one session of ``stages`` in ``minutes``: the command (wheels installed into
    ``/tmp/site``, then the session), ``carry`` (the kit and the checkpoints of runs an earlier call began,
    ``results/*/*.ckpt``) and a ``timeout_s`` that leaves the session 90 s beyond its minutes.

    Raises:
        ValueError: More checkpoints than the tool carries (8 paths in all), or more minutes than one call runs
            (:data:`CALL_LIMIT_SECONDS` less the 90 s the install and the copies take).
    """
    if minutes * 60 + 90 > CALL_LIMIT_SECONDS:
        raise ValueError(
            f"a device call runs at most {CALL_LIMIT_SECONDS} s, so a session of at most "
            f"{(CALL_LIMIT_SECONDS - 90) / 60:g} minutes; got {minutes:g}"
        )
    checkpoints = sorted(_carried(path) for path in results.glob("*/*.ckpt"))
    if len(checkpoints) > 7:
        raise ValueError(
            f"{len(checkpoints)} checkpoints under {results}; the device call carries at most 7"
        )
    command = (
        f"python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site "
        f"{_carried(kit)}/wheels/*.whl && PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 python3 "
        f"tools/gpu_session.py session --out $OUT --stages {stages} --minutes {minutes:g}"
    )
    if benchmark_args:
        command += f" --benchmark-args {shlex.quote(benchmark_args)}"
    return {
        "command": command,
        "carry": [_carried(kit), *checkpoints],
        "timeout_s": int(minutes * 60 + 90),
    }


def prepare(args: argparse.Namespace) -> dict[str, Any]:
    """Fill ``.device/``: the wheels at their pins and the datasets; return what it holds and the device call."""
    pins = constraint_pins()
    missing = [name for name in DEVICE_PACKAGES if name not in pins]
    if missing:
        raise ValueError(
            f"constraints.txt pins none of {missing}; the kit installs pinned versions only"
        )
    if not re.fullmatch(r"3\.\d+", args.python_version):
        raise ValueError(f"--python-version takes a version like 3.12, got {args.python_version!r}")
    source = Path(args.data_dir or os.environ.get("ULDP_DATA_DIR", ROOT / "data"))
    absent = [dataset for dataset in args.datasets if not (source / dataset).is_dir()]
    if absent:  # before anything is downloaded or changed
        raise ValueError(
            f"no dataset {absent} under {source}; pass --data-dir or set ULDP_DATA_DIR"
        )
    wanted = [f"{name}=={pins[name]}" for name in DEVICE_PACKAGES]
    platforms = [option for platform in PLATFORMS for option in ("--platform", platform)]
    pip = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:"]
    target = ["--python-version", args.python_version, "--implementation", "cp", *platforms]
    # into a fresh folder, which replaces the kit's wheels only once every one is there: an earlier kit's wheels
    # (another version, another Python) would clash with these, and a failed download keeps the earlier kit
    wheels, fresh = KIT / "wheels", KIT / "wheels.new"
    shutil.rmtree(fresh, ignore_errors=True)
    fresh.mkdir(parents=True)
    try:
        subprocess.run(
            [*pip, *target, "--dest", str(fresh), *wanted], check=True, stdout=sys.stderr
        )
    except subprocess.CalledProcessError as error:
        shutil.rmtree(fresh, ignore_errors=True)
        raise ValueError(
            f"pip could not download {', '.join(wanted)} for Python {args.python_version} (exit "
            f"{error.returncode}, its message above); the kit is left as it was"
        ) from None
    shutil.rmtree(wheels, ignore_errors=True)
    fresh.rename(wheels)
    for dataset in args.datasets:
        shutil.copytree(source / dataset, KIT / "data" / dataset, dirs_exist_ok=True)
    return {
        "kit": str(KIT),
        "wheels": sorted(wheel.name for wheel in wheels.glob("*.whl")),
        "datasets": sorted(path.name for path in (KIT / "data").iterdir()),
        "megabytes": round(sum(f.stat().st_size for f in KIT.rglob("*") if f.is_file()) / 2**20, 1),
        "calls": [
            device_call(stages=stages, minutes=minutes, benchmark_args=options)
            for stages, minutes, options in CALLS
        ],
    }


def run_until(
    command: list[str], deadline: float, env: dict[str, str], stdout: Path, stderr: Path
) -> dict[str, Any]:
    """Run ``command`` (its output appended to ``stdout`` and ``stderr``, which may be one file) until it ends or
    ``time.monotonic()`` reaches ``deadline``; then SIGTERM, and SIGKILL after :data:`GRACE_SECONDS`.

    Returns:
        ``{"status": exit status, "seconds": its wall time, "stopped_by_time": whether the deadline stopped it}``.
    """
    started = time.monotonic()
    with stdout.open("a", encoding="utf-8") as out, stderr.open("a", encoding="utf-8") as err:
        err.write(f"$ {shlex.join(command)}\n")
        err.flush()
        process = subprocess.Popen(command, stdout=out, stderr=err, env=env, cwd=ROOT)
        stopped = False
        try:
            status = process.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGTERM)
            stopped = True
            try:
                status = process.wait(timeout=GRACE_SECONDS)
            except subprocess.TimeoutExpired:
                process.kill()
                status = process.wait()
    return {
        "status": status,
        "seconds": round(time.monotonic() - started, 1),
        "stopped_by_time": stopped,
    }


def _uldp(*arguments: str) -> list[str]:
    """The ``uldp`` command line of this checkout (the device has no installed console script)."""
    return [
        sys.executable,
        "-c",
        "import sys; from uldp.cli import main; sys.exit(main())",
        *arguments,
    ]


def check_session(args: argparse.Namespace) -> None:
    """Refuse a session's bad options before any stage runs, with the library's own checks where it has them.

    Raises:
        ValueError: An unknown stage, a ``--minutes`` not above 0, a device this machine cannot use, or an unknown
            precision or profile (the message names the value and what is allowed).
    """
    from uldp.common.checks import check_number
    from uldp.paper.experiments import check_profile
    from uldp.training.device import check_precision, resolve_device

    unknown = sorted(set(args.stages.split(",")) - set(STAGES) - {""})
    if unknown:
        raise ValueError(f"--stages takes {', '.join(STAGES)}, got {', '.join(unknown)}")
    check_number("minutes", args.minutes, above=0)
    resolve_device(args.device)
    check_precision(args.precision)
    check_profile(args.profile)


def session(args: argparse.Namespace) -> dict[str, Any]:
    """Run the stages inside ``--minutes``; write ``session.json`` and the stages' files to ``--out``."""
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    end = time.monotonic() + args.minutes * 60
    env = {**os.environ, "FLWR_TELEMETRY_ENABLED": "0", "PYTHONUNBUFFERED": "1"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [env.get("PYTHONPATH"), str(ROOT)]))
    if (KIT / "data").is_dir():  # the device has no other copy
        env.setdefault("ULDP_DATA_DIR", str(KIT / "data"))
    report: dict[str, Any] = {"device": args.device, "minutes": args.minutes, "stages": {}}
    log = out / "session.log"
    stages = [stage.strip() for stage in args.stages.split(",") if stage.strip()]
    for stage in stages:
        if time.monotonic() > end - MARGIN_SECONDS:
            report["stages"][stage] = {"status": "skipped: no time left"}
            continue
        if stage == "tests":
            tests_log = out / "tests.log"
            command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args.tests]
            outcome = run_until(command, end - MARGIN_SECONDS, env, tests_log, tests_log)
            lines = tests_log.read_text(encoding="utf-8").strip().splitlines()
            report["stages"][stage] = {**outcome, "summary": lines[-1] if lines else ""}
        elif stage == "benchmark":
            command = [sys.executable, str(ROOT / "benchmarks" / "gpu.py"), "--device", args.device]
            command += shlex.split(args.benchmark_args)
            (out / "gpu.json").unlink(missing_ok=True)
            report["stages"][stage] = run_until(
                command, end - MARGIN_SECONDS, env, out / "gpu.json", log
            )
        elif stage == "lattice":
            command = [sys.executable, str(LATTICE_BENCHMARK)]
            command += [*shlex.split(args.lattice_args), "--json"]
            (out / "lattice_workers.json").unlink(missing_ok=True)
            report["stages"][stage] = run_until(
                command, end - MARGIN_SECONDS, env, out / "lattice_workers.json", log
            )
        else:
            report["stages"][stage] = grid_stage(args, end - MARGIN_SECONDS, out, log, env)
    (out / "session.json").write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    return report


def grid_stage(
    args: argparse.Namespace, deadline: float, out: Path, log: Path, env: dict
) -> dict[str, Any]:
    """Run ``--grid``'s grids one after another until ``deadline``; copy what each made (new results and
    checkpoints under ``--root``) to ``out/<grid>/``."""
    root = Path(args.root)
    before = {
        path: path.stat().st_mtime for path in root.glob("*/*") if path.suffix in (".json", ".ckpt")
    }
    runs = []
    for grid in args.grid:
        if time.monotonic() >= deadline:
            runs.append({"grid": grid, "status": "skipped: no time left"})
            continue
        name, *rest = shlex.split(grid)
        command = _uldp(
            "grid", name, "--profile", args.profile, "--root", str(root), "--device", args.device
        )
        command += [*rest, "--precision", args.precision]
        runs.append({"grid": grid, **run_until(command, deadline, env, log, log)})
    copied = []
    for path in sorted(root.glob("*/*")):
        if path.suffix in (".json", ".ckpt") and before.get(path) != path.stat().st_mtime:
            target = out / path.parent.name / path.name
            target.parent.mkdir(exist_ok=True)
            shutil.copy2(path, target)
            copied.append(str(target.relative_to(out)))
    return {"runs": runs, "copied": copied}


def collect(args: argparse.Namespace) -> dict[str, Any]:
    """Put a session's ``<grid>/`` results and checkpoints under ``results/``; a result ends its checkpoint. Every
    result is read as a stored run (:class:`uldp.paper.experiments.StoredRun`: its fields, key and file name) before
    any file is placed, so a bad one places nothing.

    Raises:
        ValueError: A folder with no ``session.json`` (not a session's output), a result that is not a stored run of
            the grid its folder names, or one that does not say which device trained it.
    """
    from uldp.paper.experiments import StoredRun

    folder = Path(args.folder)
    if not (folder / "session.json").is_file():
        raise ValueError(
            f"{folder} holds no session.json: give the folder a device session's files came back to"
        )
    results, checkpoints = sorted(folder.glob("*/*.json")), sorted(folder.glob("*/*.ckpt"))
    for path in results:
        try:
            run = StoredRun.from_json(json.loads(path.read_text(encoding="utf-8")), stem=path.stem)
        except ValueError as error:
            raise ValueError(f"{path} is not a stored run: {error}") from None
        if run.grid != path.parent.name:
            raise ValueError(f"{path} is a run of grid {run.grid!r}, not of its folder's")
        if "device_name" not in run.provenance:
            raise ValueError(
                f"{path} names no device_name in its provenance: not a result of a GPU session"
            )
    placed = []
    for path in results + checkpoints:
        target = Path(args.root) / path.parent.name / path.name
        if path.suffix == ".json":
            target.with_suffix(".ckpt").unlink(missing_ok=True)
        elif target.with_suffix(".json").exists():
            continue  # the run finished: its checkpoint is done with
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
        placed.append(str(target))
    return {
        "placed": placed,
        "next_call": device_call(results=Path(args.root), stages="grid", minutes=CALLS[-1][1]),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    kit = commands.add_parser("prepare", help="fill .device/ here and print the device call")
    kit.add_argument(
        "--datasets", nargs="+", default=["mnist"], help="datasets to carry (default mnist)"
    )
    kit.add_argument(
        "--data-dir", default=None, help="where the datasets are (default $ULDP_DATA_DIR)"
    )
    kit.add_argument(
        "--python-version", default=DEVICE_PYTHON, help=f"the device's Python ({DEVICE_PYTHON})"
    )
    there = commands.add_parser("session", help="run the stages (on the device)")
    there.add_argument("--out", required=True, help="where the files go (the device's $OUT)")
    there.add_argument("--device", default="cuda", help="torch device (default cuda)")
    there.add_argument(
        "--minutes", type=float, default=8.0, help="the session's whole time (default 8)"
    )
    there.add_argument(
        "--stages", default=",".join(STAGES), help="comma-separated, of " + ", ".join(STAGES)
    )
    there.add_argument(
        "--tests", nargs="+", default=list(DEVICE_TESTS), help="the tests stage's test files"
    )
    there.add_argument(
        "--benchmark-args",
        default="",
        help="options of benchmarks/gpu.py, e.g. '--repeats 1' or '--quick'",
    )
    there.add_argument(
        "--lattice-args",
        default=LATTICE_ARGS,
        help=f"options of benchmarks/lattice_workers.py (default {LATTICE_ARGS!r})",
    )
    there.add_argument(
        "--grid", action="append", default=None, help="'NAME uldp-grid-options' (repeatable)"
    )
    there.add_argument("--profile", default="paper", help="the grids' profile (default paper)")
    there.add_argument(
        "--precision", default="float32", help="the grids' precision (float32, tf32, bf16)"
    )
    there.add_argument("--root", default=str(ROOT / "results"), help="the grids' results root")
    back = commands.add_parser("collect", help="put a session's files under results/")
    back.add_argument("folder", help="the folder the session's files came back to")
    back.add_argument(
        "--root", default=str(ROOT / "results"), help="results root (default results/)"
    )
    args = parser.parse_args(argv)
    try:
        if args.command == "prepare":
            document = prepare(args)
        elif args.command == "session":
            check_session(args)
            args.grid = args.grid or list(DEFAULT_GRIDS)
            document = session(args)
        else:
            document = collect(args)
    except ValueError as error:
        print(f"gpu_session {args.command}: error: {error}", file=sys.stderr)
        return 2
    print(json.dumps(document, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
