"""benchmarks/save.py: a document printed on another machine (``--from``) is stored with the commit and date given,
checked here, and a bad ``--from``/``--commit``/``--date`` is refused by name with nothing written."""

from __future__ import annotations

import json
import subprocess

import pytest
from script_loader import ROOT, load_script


@pytest.fixture
def save(monkeypatch, tmp_path):
    script = load_script("benchmarks/save.py")
    monkeypatch.setattr(script, "RESULTS", tmp_path / "results")
    (tmp_path / "results").mkdir()
    document = tmp_path / "gpu.json"
    document.write_text(json.dumps({"device": {"name": "NVIDIA H200"}, "engine": {"rate": 1}}))

    def call(*options: str) -> None:
        monkeypatch.setattr("sys.argv", ["save.py", *options])
        script.main()

    return call, document, tmp_path / "results"


def test_a_document_from_another_machine_is_stored_with_its_commit_and_date(save):
    call, document, results = save
    head = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    call("gpu", "--as", "gpu_device", "--from", str(document), "--commit", head[:9],
         "--date", "2026-11-28T15:52:31+00:00", "--device", "cuda", "--rounds", "1")  # fmt: skip
    stored = json.loads((results / "gpu_device.json").read_text())
    assert stored["results"] == json.loads(document.read_text())
    assert stored["provenance"]["git_commit"] == head  # resolved to the full hash
    assert stored["provenance"]["date"] == "2026-11-28T15:52:31+00:00"
    assert (
        stored["provenance"]["command"]
        == "python benchmarks/gpu.py --device cuda --rounds 1 --json"
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"--commit": "no-such-commit"}, "--commit 'no-such-commit' names no commit"),
        ({"--date": "2026-11-28"}, "--date takes an ISO date and time with its zone"),
        ({"--date": None}, "--from, --commit and --date go together"),
        ({"--from": "missing.json"}, "not a readable JSON document"),
        ({"--from": "list.json"}, "a benchmark prints one JSON object, this holds a list"),
    ],
)
def test_bad_elsewhere_options_are_refused_by_name_and_write_nothing(save, change, message):
    call, document, results = save
    (document.parent / "list.json").write_text("[1, 2]")
    given = {"--from": str(document), "--commit": "HEAD", "--date": "2026-11-28T15:52:31+00:00"}
    for option, value in change.items():
        if value is None:
            given.pop(option)
        else:
            given[option] = value if option != "--from" else str(document.parent / value)
    with pytest.raises(SystemExit, match=message):
        call("gpu", *[part for pair in given.items() for part in pair])
    assert list(results.iterdir()) == []
