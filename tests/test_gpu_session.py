"""tools/gpu_session.py on the CPU: the kit's pins, the device call, the deadline that stops a stage (SIGTERM, then
SIGKILL), a whole session of tests and a grid writing its files to --out, and collect placing what came back."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest
from script_loader import ROOT, load_script

DATA = Path(os.environ.get("ULDP_DATA_DIR", "data"))


def _tool():
    return load_script("tools/gpu_session.py")


def test_every_package_the_kit_carries_has_a_pin_and_the_pins_are_read_exactly(tmp_path):
    tool = _tool()
    pins = tool.constraint_pins()
    assert all(name in pins for name in tool.DEVICE_PACKAGES)
    constraints = tmp_path / "constraints.txt"
    constraints.write_text("Opt_Einsum==3.4.0  # a comment\ntorch>=2\n# phe==9\ncffi == 2.1.1\n")
    assert tool.constraint_pins(constraints) == {"opt-einsum": "3.4.0", "cffi": "2.1.1"}


def test_the_device_call_carries_the_kit_and_the_checkpoints_of_runs_begun_earlier(
    tmp_path, monkeypatch
):
    tool = _tool()
    monkeypatch.setattr(tool, "ROOT", tmp_path)
    results = tmp_path / "results"
    (results / "user_sampling").mkdir(parents=True)
    (results / "user_sampling" / "abc.ckpt").write_bytes(b"")
    (results / "user_sampling" / "abc.json.tmp").write_bytes(b"")
    call = tool.device_call(tmp_path / ".device", results, stages="grid", minutes=6)
    assert call["carry"] == [".device", "results/user_sampling/abc.ckpt"]
    assert (
        call["command"].startswith("python3 -m pip install")
        and " .device/wheels/*.whl " in call["command"]
    )
    assert call["command"].endswith("session --out $OUT --stages grid --minutes 6")
    assert call["timeout_s"] == 6 * 60 + 90 and len(call["command"]) <= 2000
    measured = tool.device_call(tmp_path / ".device", results, stages="benchmark", minutes=2,
                                benchmark_args="--sections engine,zipf_silo")  # fmt: skip
    assert measured["command"].endswith(
        "--minutes 2 --benchmark-args '--sections engine,zipf_silo'"
    )
    with pytest.raises(
        ValueError, match=r"at most 600 s, so a session of at most 8.5 minutes; got 9"
    ):
        tool.device_call(tmp_path / ".device", results, minutes=9)
    assert all(
        tool.device_call(tmp_path / ".device", results, minutes=m)["timeout_s"] <= 600
        for _, m, _ in tool.CALLS
    )
    for index in range(7):
        (results / "user_sampling" / f"{index}.ckpt").write_bytes(b"")
    with pytest.raises(ValueError, match=r"8 checkpoints .* at most 7"):
        tool.device_call(tmp_path / ".device", results)


def test_a_stage_past_its_deadline_gets_sigterm_and_one_that_ignores_it_is_killed(
    tmp_path, monkeypatch
):
    tool = _tool()
    saved = tmp_path / "saved"
    polite = (
        "import signal, sys, time\n"
        "def stop(*_):\n"
        f"    open({str(saved)!r}, 'w').write('saved'); sys.exit(130)\n"
        "signal.signal(signal.SIGTERM, stop)\n"
        "print('started', flush=True); time.sleep(60)\n"
    )
    log = tmp_path / "log"
    outcome = tool.run_until([sys.executable, "-c", polite], time.monotonic() + 2, {}, log, log)
    assert outcome["status"] == 130 and outcome["stopped_by_time"] and saved.read_text() == "saved"
    assert outcome["seconds"] < 30 and "started" in log.read_text()
    monkeypatch.setattr(tool, "GRACE_SECONDS", 1.0)
    stubborn = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"
    outcome = tool.run_until([sys.executable, "-c", stubborn], time.monotonic() + 1, {}, log, log)
    assert outcome["status"] == -9 and outcome["stopped_by_time"] and outcome["seconds"] < 30
    quick = tool.run_until([sys.executable, "-c", "pass"], time.monotonic() + 30, {}, log, log)
    assert quick["status"] == 0 and not quick["stopped_by_time"]


@pytest.mark.skipif(not (DATA / "tcga_brca").is_dir(), reason="TcgaBrca files not available")
def test_a_session_runs_its_stages_and_writes_their_files_to_out(tmp_path, capsys, monkeypatch):
    tool = _tool()
    stand_in = (
        tmp_path / "lattice_workers.py"
    )  # the real one spends about 25 s on BFV keys; its own tests cover it
    stand_in.write_text("import json, sys\nprint(json.dumps(sys.argv[1:]))\n")
    monkeypatch.setattr(tool, "LATTICE_BENCHMARK", stand_in)
    out, root = tmp_path / "out", tmp_path / "results"
    arguments = [
        "session",
        "--out",
        str(out),
        "--device",
        "cpu",
        "--stages",
        "tests,lattice,grid",
        "--minutes",
        "5",
        "--lattice-args",
        "--parameters 64 --workers 1",
    ]
    arguments += ["--tests", str(Path(__file__).parent / "test_interrupts.py"), "--root", str(root)]
    arguments += ["--profile", "smoke", "--grid", "tcga_brca --seeds 0 --methods ULDP-AVG-w"]
    assert tool.main(arguments) == 0
    report = json.loads(capsys.readouterr().out)
    assert report == json.loads((out / "session.json").read_text())
    assert report["stages"]["tests"]["status"] == 0 and report["stages"]["tests"][
        "summary"
    ].startswith("2 passed")
    assert report["stages"]["lattice"]["status"] == 0
    # the stand-in benchmark prints its arguments: the stage passed the options and --json, and kept stdout
    assert json.loads((out / "lattice_workers.json").read_text()) == [
        "--parameters", "64", "--workers", "1", "--json"
    ]  # fmt: skip
    grid = report["stages"]["grid"]
    assert [run["status"] for run in grid["runs"]] == [0]
    stored = sorted(path.name for path in (root / "tcga_brca").glob("*.json"))
    assert len(stored) == 2 and grid["copied"] == [f"tcga_brca/{name}" for name in stored]
    assert sorted(path.name for path in (out / "tcga_brca").iterdir()) == stored
    # a second session finds the runs stored: nothing to copy (its grid stage alone: the others ran above)
    again = [*arguments]
    again[again.index("tests,lattice,grid")] = "grid"
    assert tool.main(again) == 0
    assert json.loads(capsys.readouterr().out)["stages"]["grid"]["copied"] == []
    # a result trained on the CPU names no GPU: collect refuses to file it as one
    assert tool.main(["collect", str(out), "--root", str(tmp_path / "placed")]) == 2
    assert "names no device_name" in capsys.readouterr().err


def test_collect_files_results_and_checkpoints_and_a_result_ends_its_checkpoint(tmp_path, capsys):
    tool = _tool()
    # a committed paper-scale run, as a GPU session would bring it back (its provenance naming the device)
    committed = sorted((ROOT / "results" / "user_sampling").glob("*.json"))[0]
    stored = json.loads(committed.read_text())
    stored["provenance"]["device_name"] = "NVIDIA H200"
    back, root = tmp_path / "back", tmp_path / "results"
    (back / "user_sampling").mkdir(parents=True)
    (back / "session.json").write_text("{}")
    (back / "user_sampling" / committed.name).write_text(json.dumps(stored))
    (back / "user_sampling" / "going.ckpt").write_bytes(b"rounds")
    (root / "user_sampling").mkdir(parents=True)
    (root / "user_sampling" / committed.with_suffix(".ckpt").name).write_bytes(b"old")
    assert tool.main(["collect", str(back), "--root", str(root)]) == 0
    document = json.loads(capsys.readouterr().out)
    placed = sorted(path.name for path in (root / "user_sampling").iterdir())
    assert placed == sorted([committed.name, "going.ckpt"]) and len(document["placed"]) == 2
    assert document["next_call"]["carry"][1:] == [str(root / "user_sampling" / "going.ckpt")]
    assert tool.main(["collect", str(tmp_path)]) == 2
    assert "holds no session.json" in capsys.readouterr().err


@pytest.mark.parametrize(
    "change, refusal",
    [
        (lambda run: run["provenance"].pop("device_name"), "names no device_name"),
        (lambda run: run["params"].update(q=0.5), "is not a stored run"),  # no longer its key's run
        (lambda run: run["result"]["round"].reverse(), "is not a stored run"),
        (lambda run: run.update(grid="mnist"), "is a run of grid 'mnist', not of its folder's"),
    ],
)
def test_collect_refuses_a_bad_result_and_places_nothing(change, refusal, tmp_path, capsys):
    tool = _tool()
    committed = sorted((ROOT / "results" / "user_sampling").glob("*.json"))[0]
    stored = json.loads(committed.read_text())
    stored["provenance"]["device_name"] = "NVIDIA H200"
    change(stored)
    back, root = tmp_path / "back", tmp_path / "results"
    (back / "user_sampling").mkdir(parents=True)
    (back / "session.json").write_text("{}")
    (back / "user_sampling" / "going.ckpt").write_bytes(
        b"rounds"
    )  # placed only if every result is good
    (back / "user_sampling" / committed.name).write_text(json.dumps(stored))
    assert tool.main(["collect", str(back), "--root", str(root)]) == 2
    assert refusal in capsys.readouterr().err and not root.exists()


@pytest.mark.parametrize(
    "arguments, message",
    [
        (["--stages", "tests,gird"], "--stages takes tests, benchmark, lattice, grid, got gird"),
        (["--minutes", "0"], "minutes must be a number > 0, got 0.0"),
        (["--device", "meta"], "'meta'"),
        (["--precision", "fp8"], "precision must be one of float32, tf32, bf16, got 'fp8'"),
        (["--profile", "huge"], "'huge'"),
    ],
)
def test_a_bad_session_is_refused_by_name_before_anything_runs(
    arguments, message, tmp_path, capsys
):
    tool = _tool()
    assert (
        tool.main(["session", "--out", str(tmp_path / "out"), "--device", "cpu", *arguments]) == 2
    )
    assert message in capsys.readouterr().err and not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "arguments, message",
    [
        (
            ["--python-version", "3.12.3"],
            "--python-version takes a version like 3.12, got '3.12.3'",
        ),
        (["--datasets", "mnist", "imagenet"], "no dataset ['imagenet'] under"),
    ],
)
def test_prepare_refuses_bad_options_before_it_downloads_or_changes_anything(
    arguments, message, tmp_path, monkeypatch, capsys
):
    tool = _tool()
    monkeypatch.setattr(tool, "KIT", tmp_path / ".device")
    monkeypatch.setattr(tool.subprocess, "run", lambda *a, **k: pytest.fail("downloaded"))
    (tmp_path / "data" / "mnist").mkdir(parents=True)
    assert tool.main(["prepare", "--data-dir", str(tmp_path / "data"), *arguments]) == 2
    assert message in capsys.readouterr().err and not (tmp_path / ".device").exists()


def test_a_failed_download_keeps_the_earlier_kit(tmp_path, monkeypatch, capsys):
    tool = _tool()
    kit = tmp_path / ".device"
    monkeypatch.setattr(tool, "KIT", kit)
    (kit / "wheels").mkdir(parents=True)
    (kit / "wheels" / "opacus-1.6.0-py3-none-any.whl").write_bytes(b"the earlier kit")
    (tmp_path / "data" / "mnist").mkdir(parents=True)

    def offline(command, **kwargs):
        raise tool.subprocess.CalledProcessError(1, command)

    monkeypatch.setattr(tool.subprocess, "run", offline)
    assert tool.main(["prepare", "--data-dir", str(tmp_path / "data")]) == 2
    assert "pip could not download opacus==" in capsys.readouterr().err
    assert sorted(path.name for path in kit.iterdir()) == ["wheels"]
    assert (kit / "wheels" / "opacus-1.6.0-py3-none-any.whl").read_bytes() == b"the earlier kit"
