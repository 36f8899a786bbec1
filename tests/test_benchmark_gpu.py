"""benchmarks/gpu.py on the CPU at toy sizes: its engine section measures what it says (every rate positive, the
ratios the rates' quotients), its runs are the paper's MNIST settings reduced under --quick, and the committed CPU
quick run is one document of the script's sections naming its device."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from pathlib import Path

import pytest
import torch
from script_loader import load_script

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def _script():
    return load_script("benchmarks/gpu.py")


def test_the_engine_section_reports_rates_and_their_ratios():
    gpu = _script()
    args = argparse.Namespace(users=2, records=2, epochs=1, cpu_users=2, repeats=1)
    section = gpu.engine(args, torch.device("cpu"))
    rates = section["record_steps_per_second"]
    assert set(rates) == {
        "library_float32",
        "library_bf16",
        "vmap_reference_float32",
        "vmap_reference_bf16",
        "library_cpu_float32",
    }
    assert all(rate > 0 for rate in rates.values())
    assert (
        rates["library_cpu_float32"] == rates["library_float32"]
    )  # on the CPU the two are one measurement
    assert section["ratios"]["bf16_over_float32"] == pytest.approx(
        rates["library_bf16"] / rates["library_float32"], rel=0.01, abs=0.001
    )


def test_the_profile_section_ranks_each_ways_ops_and_the_engines_extra_time():
    gpu = _script()
    args = argparse.Namespace(users=3, records=2, epochs=1)
    section = gpu.profile(args, torch.device("cpu"))
    assert section["problem"] == {"users": 3, "records_per_user": 2, "epochs": 1}
    runs = {}
    for precision in ("float32", "bf16"):
        result = section[precision]
        assert set(result) == {"library", "vmap_reference", "gap"}
        for way in ("library", "vmap_reference"):
            run = result[way]
            assert set(run) == {"wall_seconds", "cpu_ops"}  # no kernels table without CUDA
            top = run["cpu_ops"]["top"]
            assert 0 < len(top) <= gpu.PROFILE_ROWS and run["wall_seconds"] > 0
            assert [row[2] for row in top] == sorted((row[2] for row in top), reverse=True)
            assert run["cpu_ops"]["total_ms"] >= sum(row[2] for row in top) - 1e-6
            assert any("conv" in row[0] for row in top), top  # the CNN's convolutions cost most
            runs[precision, way] = {name: (calls, ms) for name, calls, ms in top}
        gap = result["gap"]["cpu_ops"]
        assert [row[1] for row in gap] == sorted((row[1] for row in gap), reverse=True)
        engine, reference = runs[precision, "library"], runs[precision, "vmap_reference"]
        for name, extra_ms, extra_calls in gap:  # the engine's time less the reference's, by name
            if name in engine and name in reference:
                assert extra_ms == pytest.approx(engine[name][1] - reference[name][1], abs=2e-3)
                assert extra_calls == engine[name][0] - reference[name][0]


def test_the_runs_are_the_papers_mnist_settings_reduced_under_quick():
    gpu = _script()
    cpu = torch.device("cpu")
    paper = gpu.round_config("ULDP-AVG-w", argparse.Namespace(quick=False), cpu)
    assert (paper.n_users, paper.local_epochs, paper.batch_size, paper.max_train_records) == (
        10_000,
        50,
        64,
        None,
    )
    quick = gpu.round_config("ULDP-SGD", argparse.Namespace(quick=True), cpu, rounds=2)
    assert (quick.n_users, quick.max_train_records, quick.rounds, quick.local_epochs) == (
        100,
        600,
        2,
        None,
    )


def test_the_committed_cpu_quick_run_is_one_document_of_every_section():
    path = BENCHMARKS / "results" / "gpu_cpu_quick.json"
    if not path.exists():
        pytest.skip("not committed yet")
    document = json.loads(path.read_text())
    results = document["results"]
    assert results["quick"] is True and results["device"]["torch_device"] == "cpu"
    assert set(results["paper_round"]) == set(_script().FAMILY_METHODS)
    assert set(results["paper_scale_run"]) == {"float32", "bf16"}
    assert "python benchmarks/gpu.py --device cpu --quick" in document["provenance"]["command"]


def test_a_benchmark_stopped_by_sigterm_prints_the_sections_it_completed(monkeypatch, capsys):
    gpu = _script()
    monkeypatch.setattr(gpu, "load", lambda name: None)
    monkeypatch.setattr(gpu, "engine", lambda args, device: {"record_steps_per_second": 1})

    def terminated(args, device, data):
        os.kill(os.getpid(), signal.SIGTERM)  # as a time limit's SIGTERM during the second section

    monkeypatch.setattr(gpu, "paper_round", terminated)
    monkeypatch.setattr(sys, "argv", ["gpu.py", "--device", "cpu", "--quick"])
    before = signal.getsignal(signal.SIGTERM)
    gpu.main()
    document = json.loads(capsys.readouterr().out)
    assert document["engine"] == {"record_steps_per_second": 1}
    assert "paper_round" not in document and "paper_scale_run" not in document
    assert document["stopped"].startswith("stopped by SIGTERM in section paper_round")
    assert signal.getsignal(signal.SIGTERM) is before


def test_a_failed_section_is_reported_and_the_next_sections_still_run(monkeypatch, capsys):
    """One lease is one call: a section that raises (a profiler the device lacks) must not lose the others."""
    gpu = _script()
    monkeypatch.setattr(gpu, "load", lambda name: None)

    def broken(*args):
        raise RuntimeError("CUPTI unavailable")

    monkeypatch.setattr(gpu, "profile", broken)
    monkeypatch.setattr(gpu, "zipf_silo", lambda *args: {"ran": "zipf_silo"})
    monkeypatch.setattr(
        sys, "argv", ["gpu.py", "--device", "cpu", "--sections", "profile,zipf_silo"]
    )
    gpu.main()
    captured = capsys.readouterr()
    document = json.loads(captured.out)
    assert document["profile"] == {"error": "RuntimeError: CUPTI unavailable"}
    assert document["zipf_silo"] == {"ran": "zipf_silo"} and "stopped" not in document
    assert "CUPTI unavailable" in captured.err  # the traceback, for whoever reads the lease's log


def test_sections_runs_only_the_sections_named_and_refuses_an_unknown_one(monkeypatch, capsys):
    gpu = _script()
    monkeypatch.setattr(gpu, "load", lambda name: None)
    ran = []

    def section(name: str):
        def run(*args):
            ran.append(name)
            return {"ran": name}

        return run

    for name in gpu.SECTIONS:
        monkeypatch.setattr(gpu, name, section(name))
    monkeypatch.setattr(sys, "argv", ["gpu.py", "--device", "cpu", "--sections", "paper_scale_run"])
    gpu.main()
    document = json.loads(capsys.readouterr().out)
    assert ran == ["paper_scale_run"] and document["paper_scale_run"] == {"ran": "paper_scale_run"}
    assert "engine" not in document and "paper_round" not in document
    monkeypatch.setattr(sys, "argv", ["gpu.py", "--device", "cpu", "--sections", "engine,speed"])
    with pytest.raises(SystemExit) as refused:
        gpu.main()
    assert refused.value.code == 2 and "--sections takes engine, paper_round, paper_scale_run" in (
        capsys.readouterr().err
    )


def test_the_zipf_silo_section_times_every_fill_rule_and_restores_the_librarys(monkeypatch):
    if not (Path(os.environ.get("ULDP_DATA_DIR", "data")) / "mnist").is_dir():
        pytest.skip("needs MNIST (ULDP_DATA_DIR)")
    from uldp.data import load
    from uldp.training import chunks, per_user

    gpu = _script()
    monkeypatch.setattr(gpu, "QUICK_SILO_USERS", 12)
    monkeypatch.setattr(gpu, "FILLS", gpu.FILLS[::2])  # strict to loose, in half the time
    padded, library = per_user.padded_indices, chunks.MIN_FILL
    args = argparse.Namespace(quick=True, epochs=1, repeats=1)
    section = gpu.zipf_silo(args, torch.device("cpu"), load("mnist"))
    assert section["silo"]["users"] == 12 and section["silo"]["largest"] == 208
    rows = section["rows"]
    assert [(row["precision"], row["min_fill"]) for row in rows] == [
        (precision, fill) for precision in ("float32", "bf16") for fill in gpu.FILLS
    ]
    assert all(row["record_steps_per_second"] > 0 for row in rows)
    made = [row["chunks"] for row in rows[: len(gpu.FILLS)]]
    assert made == sorted(made, reverse=True) and made[0] > made[-1]  # a looser rule, fewer chunks
    for row in (
        rows
    ):  # a chunk's steps are its largest user's batches; its slots hold at least its records
        assert row["chunks"] <= row["steps_per_epoch"] <= row["chunks"] * -(-208 // gpu.BATCH)
        assert 0 < row["fill"] <= 1
    assert rows[-1]["fill"] < rows[0]["fill"]  # the loosest rule pads more of its slots
    assert per_user.padded_indices is padded and library == chunks.MIN_FILL
