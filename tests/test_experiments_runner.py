"""Running a grid (uldp.paper.experiments.runner, ``run_grid``), with a fast fake executor.

One file per run with provenance, skipped once stored; resumption after an interruption and from a checkpoint; the
order of the runs by their times at other seeds; parallel jobs against serial ones; SIGTERM, to a serial grid and to
one with workers; and two processes on one grid.
"""

from __future__ import annotations

import ast
import json
import os
import signal
import subprocess
import sys
import time

import fake_executor
import pytest

from uldp import cli
from uldp.paper import experiments
from uldp.paper.experiments import (
    GRIDS,
    Entry,
    Grid,
    Reduction,
    RunSpec,
    expand,
    load_results,
    result_path,
    run_grid,
    runner,
)


def test_a_grid_run_resumes_from_its_checkpoint_beside_the_result_and_removes_it_once_stored(
    tmp_path,
):
    spec = expand("tcga_brca", "paper", seeds=[0], methods=["ULDP-AVG-w"])[0]
    checkpoint = result_path(tmp_path, spec).with_suffix(".ckpt")
    checkpoint.parent.mkdir(parents=True)
    checkpoint.write_bytes(b"the rounds an interrupted grid ran")
    run_grid(
        "tcga_brca",
        "paper",
        seeds=[0],
        methods=["ULDP-AVG-w"],
        root=tmp_path,
        executor=fake_executor.RESUMED,
        progress=False,
    )
    stored = json.loads(result_path(tmp_path, spec).read_text())
    assert stored["result"]["info"]["checkpoint"] == str(checkpoint) and not checkpoint.exists()
    assert stored["provenance"]["wall_seconds"] >= 100.0  # the earlier rounds' time counts


def test_within_a_seed_the_runs_longest_at_other_seeds_go_first_and_unknown_ones_before_them(
    tmp_path, monkeypatch, capsys
):
    methods = ["ULDP-SGD", "ULDP-AVG", "ULDP-AVG-w"]
    run_grid(
        "tcga_brca",
        "paper",
        seeds=[0],
        methods=methods,
        root=tmp_path,
        executor=fake_executor.FAKE,
        progress=False,
    )
    walls = {"ULDP-SGD": 30.0, "ULDP-AVG": 10.0, "ULDP-AVG-w": 20.0}
    files = list((tmp_path / "tcga_brca").glob("*.json"))
    for path in files:
        stored = json.loads(path.read_text())
        stored["provenance"]["wall_seconds"] = (
            walls[stored["params"]["method"]] + stored["params"]["n_users"] / 1000
        )
        path.write_text(json.dumps(stored))
    unknown = json.loads(files[0].read_text())["params"]
    files[0].unlink()  # its seed-1 sibling has no stored time
    assert (
        cli.main(
            [
                "grid",
                "tcga_brca",
                "--profile",
                "paper",
                "--root",
                str(tmp_path),
                "--seeds",
                "1",
                "--methods",
                *methods,
                "--dry-run",
                "--json",
            ]
        )
        == 0
    )
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (summary["pending"], summary["without_expected_time"]) == (len(files), 1)
    total = 4 * 60 + 3 * 2 * (0.05 + 0.2) - walls[unknown["method"]] - unknown["n_users"] / 1000
    assert summary["expected_seconds"] == pytest.approx(total, abs=0.05)
    log = tmp_path / "calls.log"
    monkeypatch.setenv("ULDP_FAKE_LOG", str(log))
    run_grid(
        "tcga_brca",
        "paper",
        seeds=[1],
        methods=methods,
        root=tmp_path,
        executor=fake_executor.FAKE,
        progress=True,
    )
    # the bar shows the time left by the other seeds' times: 4 panels x (30 + 10 + 20) s, about 4 min at first
    shown = capsys.readouterr().err.split("\r")
    assert (
        "about 4 min left by other seeds' times" in shown[2] and "left" not in shown[-1]
    )  # none left at the end
    ran = [dict(ast.literal_eval(line.split(" ", 1)[1])) for line in log.read_text().splitlines()]
    assert all(run["seed"] == 1 for run in ran) and len(ran) == len(files)
    assert {k: v for k, v in ran[0].items() if k != "seed"} == {
        k: v for k, v in unknown.items() if k != "seed"
    }
    times = [walls[run["method"]] + run["n_users"] / 1000 for run in ran[1:]]
    assert times == sorted(times, reverse=True) and len(set(times)) > 2


def test_run_grid_stores_one_file_per_run_with_provenance_and_skips_them_later(
    tmp_path, monkeypatch
):
    log = tmp_path / "calls.log"
    monkeypatch.setenv("ULDP_FAKE_LOG", str(log))
    specs: dict[str, RunSpec] = {}
    for spec in expand("heart_disease", "smoke"):
        specs.setdefault(
            spec.key, spec
        )  # the first place of a run shared by panels is the one that runs it
    report = run_grid(
        "heart_disease",
        "smoke",
        root=tmp_path,
        executor=fake_executor.FAKE,
        progress=False,
        command="pytest",
    )
    assert (report.total, report.executed, report.skipped, report.failed) == (
        len(specs),
        len(specs),
        0,
        (),
    )
    files = sorted((tmp_path / "heart_disease").glob("*.json"))
    assert sorted(p.stem for p in files) == sorted(specs)
    stored = json.loads(files[0].read_text())
    spec = specs[files[0].stem]
    assert stored["params"] == spec.kwargs and stored["config"] == fake_executor.resolve(
        spec.kwargs
    )
    executed = json.loads(json.dumps(fake_executor.execute(spec.kwargs)))
    assert stored["result"] == {**executed, "info": {}}  # the dataset variant moves to provenance
    prov = stored["provenance"]
    assert prov["dataset_variant"] == "fake heart_disease"
    assert (
        prov["command"] == "pytest" and prov["wall_seconds"] >= 0 and prov["date"].startswith("20")
    )
    assert prov["packages"]["numpy"] and "git_commit" in prov
    n_calls = len(log.read_text().splitlines())
    again = run_grid(
        "heart_disease", "smoke", root=tmp_path, executor=fake_executor.FAKE, progress=False
    )
    assert (again.executed, again.skipped) == (0, len(specs))
    shown = load_results("heart_disease", "smoke", root=tmp_path)
    default = [run for run in shown.runs if run["series"] == "DEFAULT"]
    assert shown.complete and len(default) == len({s.panel for s in specs.values()}) == 2
    assert {run["panel"] for run in default} == {s.panel for s in specs.values()}
    assert {run["params"]["n_users"] for run in default} == {
        s.kwargs["n_users"] for s in specs.values()
    }
    assert (
        len({run["key"] for run in default}) == 1
        and "shown in more than one panel counts once" in shown.describe()
    )
    assert len(log.read_text().splitlines()) == n_calls


def test_interrupted_grid_resumes_with_only_the_missing_runs(tmp_path, monkeypatch):
    log = tmp_path / "calls.log"
    monkeypatch.setenv("ULDP_FAKE_LOG", str(log))
    monkeypatch.setattr(fake_executor, "INTERRUPT_AFTER", [5])
    with pytest.raises(KeyboardInterrupt):
        run_grid(
            "tcga_brca", "smoke", root=tmp_path, executor=fake_executor.INTERRUPTING, progress=False
        )
    assert len(list((tmp_path / "tcga_brca").glob("*.json"))) == 5
    assert not list((tmp_path / "tcga_brca").glob(".*"))
    partial = load_results("tcga_brca", "smoke", root=tmp_path)
    stored = {run["key"] for run in partial.runs}
    missing = {
        spec.key: spec for spec in reversed(partial.missing)
    }  # a shared run is run for its first place
    assert (len(stored), partial.complete) == (5, False) and not stored & set(missing)
    assert len(partial.runs) + len(partial.missing) == len(expand("tcga_brca", "smoke"))
    log.write_text("")
    report = run_grid(
        "tcga_brca", "smoke", root=tmp_path, executor=fake_executor.FAKE, progress=False
    )
    assert (report.skipped, report.executed) == (5, len(missing))
    done = {line.split(" ", 1)[1] for line in log.read_text().splitlines()}
    assert done == {str(sorted(spec.kwargs.items())) for spec in missing.values()}
    assert load_results("tcga_brca", "smoke", root=tmp_path).complete


@pytest.mark.slow
def test_parallel_jobs_match_serial_results_and_failures_are_reported(tmp_path, monkeypatch):
    log = tmp_path / "calls.log"
    monkeypatch.setenv("ULDP_FAKE_LOG", str(log))
    failing = Grid(
        "failing",
        "t",
        "-",
        "privacy_utility",
        lambda: [
            *GRIDS["heart_disease"].entries()[:3],
            Entry.of(**{**GRIDS["heart_disease"].entries()[0].kwargs, "method": "FAIL"}),
        ],
        ("n_users",),
        ("method",),
        {"smoke": Reduction(rounds=2)},
    )
    monkeypatch.setitem(GRIDS, "failing", failing)
    serial = run_grid(
        "failing", "smoke", root=tmp_path / "serial", executor=fake_executor.FAKE, progress=False
    )
    parallel = run_grid(
        "failing",
        "smoke",
        root=tmp_path / "parallel",
        executor=fake_executor.FAKE,
        jobs=2,
        progress=False,
    )
    for report in (serial, parallel):
        assert (report.executed, len(report.failed)) == (3, 1)
        assert "FAIL" in report.failed[0][1] and "fails on purpose" in report.failed[0][1]
    pids = {line.split()[0] for line in log.read_text().splitlines()}
    assert (
        str(os.getpid()) in pids and len(pids) >= 2
    )  # the parallel runs happened in worker processes
    for path in (tmp_path / "serial" / "failing").glob("*.json"):
        twin = json.loads((tmp_path / "parallel" / "failing" / path.name).read_text())
        assert twin["result"] == json.loads(path.read_text())["result"]


def _running(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as stream:
            return stream.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_sigterm_stops_a_serial_grid_like_ctrl_c_and_the_old_handler_comes_back(
    tmp_path, monkeypatch
):
    calls = []

    def terminated(params, checkpoint=None):
        calls.append(params)
        if len(calls) == 2:
            os.kill(os.getpid(), signal.SIGTERM)  # as `kill PID` during the second run
        return fake_executor.execute(params)

    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt, match="stopped by SIGTERM"):
        run_grid(
            "tcga_brca",
            "smoke",
            root=tmp_path,
            executor=experiments.Executor(fake_executor.resolve, terminated),
            progress=False,
        )
    assert len(calls) == 2 and len(list((tmp_path / "tcga_brca").glob("*.json"))) == 1
    assert signal.getsignal(signal.SIGTERM) is before


@pytest.mark.slow
@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads process states from /proc")
def test_sigterm_to_the_grid_alone_stops_its_workers_and_leaves_no_partial_file(tmp_path):
    log = tmp_path / "calls.log"
    tests = os.path.dirname(os.path.abspath(fake_executor.__file__))
    script = (
        "import inspect, sys, fake_executor, uldp.paper.experiments as e; from uldp import cli; "
        "inspect.unwrap(e.run_grid).__kwdefaults__['executor'] = fake_executor.SLOW; "
        f"sys.exit(cli.main(['grid', 'tcga_brca', '--profile', 'smoke', '--root', {str(tmp_path)!r}, "
        "'--jobs', '2']))"
    )
    env = {
        **os.environ,
        "ULDP_FAKE_LOG": str(log),
        "PYTHONPATH": os.pathsep.join(filter(None, [tests, os.environ.get("PYTHONPATH")])),
    }
    grid = subprocess.Popen(
        [sys.executable, "-c", script], env=env, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 120
        while (
            not log.exists() or len(log.read_text().splitlines()) < 2
        ):  # both workers inside a run
            assert grid.poll() is None and time.monotonic() < deadline, (
                grid.stderr and grid.stderr.read()
            )
            time.sleep(0.1)
        workers = {int(line.split()[0]) for line in log.read_text().splitlines()}
        assert len(workers) == 2 and grid.pid not in workers and all(map(_running, workers))
        time.sleep(0.5)
        grid.send_signal(
            signal.SIGTERM
        )  # to the grid's own process only, as `kill` or a scheduler does
        _, stderr = grid.communicate(timeout=60)
    finally:
        grid.kill()
    assert (
        grid.returncode == 130
        and "stopped by SIGTERM" in stderr
        and "same command resumes" in stderr
    )
    assert not any(map(_running, workers))
    folder = tmp_path / "tcga_brca"
    assert not list(folder.glob("*.json")) and not list(
        folder.glob(".*")
    )  # no result, no temporary file
    assert (
        len(list(folder.glob("*.ckpt"))) == 2
    )  # each stopped run keeps its checkpoint to resume from


def test_two_processes_on_one_grid_do_not_redo_each_others_runs(tmp_path, monkeypatch):
    """A run stored by another process after this one listed its work is skipped, not run again."""
    log = tmp_path / "calls.log"
    monkeypatch.setenv("ULDP_FAKE_LOG", str(log))
    specs = {s.key: s for s in expand("tcga_brca", "smoke")}
    later = sorted(specs.values(), key=lambda spec: spec.seed)[-1]
    original = runner.pending_runs

    def pending_then_other_process_stores(listed, root):
        todo = original(listed, root)
        runner._execute_one(
            fake_executor.FAKE, later, str(experiments.result_path(root, later)), {}
        )
        return todo

    monkeypatch.setattr(runner, "pending_runs", pending_then_other_process_stores)
    log.write_text("")
    report = run_grid(
        "tcga_brca", "smoke", root=tmp_path, executor=fake_executor.FAKE, progress=False
    )
    executed = log.read_text().splitlines()
    assert len(executed) == len(specs)  # every run once: the other process's one, and not again
    assert (report.executed, report.skipped) == (len(specs) - 1, 1)
