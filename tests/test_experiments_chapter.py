"""What the chapters show (uldp.paper.experiments.chapter), with a fast fake executor.

``chapter_results`` shows paper-profile results only where they cover every line, and ``stored_runs_table`` counts
the stored files of each grid and profile.
"""

from __future__ import annotations

import shutil
from typing import TYPE_CHECKING

import fake_executor
import pytest
from experiments_helpers import _stored_payload

from uldp.paper import experiments
from uldp.paper.experiments import GRIDS, expand, load_results, run_grid

if TYPE_CHECKING:
    from pathlib import Path


def test_chapter_results_show_paper_results_only_when_they_cover_every_line(tmp_path, monkeypatch):
    paper_root, build_root = tmp_path / "results", tmp_path / "build"
    first = experiments.chapter_results(
        "user_sampling",
        "default",
        executor=fake_executor.FAKE,
        paper_root=paper_root,
        root=build_root,
    )
    assert first.results.profile == "default" and first.results.complete
    assert "No paper-profile results are committed" in first.note and "**default**" in first.note
    monkeypatch.setattr(fake_executor, "INTERRUPT_AFTER", [2])
    with pytest.raises(KeyboardInterrupt):
        run_grid(
            "user_sampling",
            "paper",
            root=paper_root,
            executor=fake_executor.INTERRUPTING,
            progress=False,
        )
    partial = experiments.chapter_results(
        "user_sampling",
        "default",
        executor=fake_executor.FAKE,
        paper_root=paper_root,
        root=build_root,
    )
    assert (
        partial.results.profile == "default" and "stored only in part (2 of 45 runs" in partial.note
    )
    assert partial.paper_panels is None  # 2 runs cover no panel whole
    assert partial.paper_partial is not None and len(partial.paper_partial.runs) == 2
    assert "shown apart, as far as they go" in partial.note
    creditcard = [
        s
        for s in expand("user_sampling", "paper", seeds=[0])
        if s.kwargs["dataset"] == "creditcard"
    ]
    for spec in creditcard:
        experiments.write_json_atomic(
            experiments.result_path(paper_root, spec),
            _stored_payload(spec),
        )
    one_panel = experiments.chapter_results(
        "user_sampling",
        "default",
        executor=fake_executor.FAKE,
        paper_root=paper_root,
        root=build_root,
    )
    assert one_panel.paper_panels is not None
    assert one_panel.paper_panels.covered_panels() == (creditcard[0].panel,)
    assert {run["panel"] for run in one_panel.paper_panels.runs} == {creditcard[0].panel}
    assert "cover every line of 1 panel(s)" in one_panel.note
    assert one_panel.paper_partial is None  # the other panel has no paper-profile run
    run_grid(
        "user_sampling",
        "paper",
        seeds=[0],
        root=paper_root,
        executor=fake_executor.FAKE,
        progress=False,
        command="uldp grid user_sampling --profile paper",
    )
    shown = experiments.chapter_results(
        "user_sampling",
        "smoke",
        executor=fake_executor.FAKE,
        paper_root=paper_root,
        root=build_root,
    )
    assert shown.results.profile == "paper" and "committed paper-profile" in shown.note
    assert "uldp grid user_sampling --profile paper" in shown.note and not shown.results.complete
    assert load_results(
        "user_sampling", "smoke", root=build_root
    ).complete  # smoke still exercised the runs
    full = experiments.chapter_results(
        "user_sampling",
        "paper",
        executor=fake_executor.FAKE,
        paper_root=paper_root,
        root=build_root,
    )
    assert full.results.complete and "ran the paper-profile grid" in full.note
    assert len(list((paper_root / "user_sampling").glob("*.json"))) == 45


def test_stored_runs_table_counts_the_files_of_each_grid_and_profile(tmp_path, monkeypatch):
    """Counted independently: the places (panel, line, seed) of a grid whose key has a file in any grid's folder. The
    smoke and default results are a snapshot of ``_build/results``: in ``make test`` the chapters write there while
    this runs (a count taken between the table and the check once differed by the files of a chapter)."""
    from uldp.paper.experiments import results

    snapshot = tmp_path / "results"
    for stored in experiments.results_root("smoke").glob(
        "*/*.json"
    ):  # what the count reads: */<key>.json
        (snapshot / stored.parent.name).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(stored, snapshot / stored.parent.name / stored.name)
    committed = results.results_root

    def results_root(profile: str) -> Path:
        return snapshot if profile in ("smoke", "default") else committed(profile)

    monkeypatch.setattr(results, "results_root", results_root)
    table = experiments.stored_runs_table(jobs=3)
    assert list(table.index) == list(GRIDS)
    for name, grid in GRIDS.items():
        assert (table.loc[name, "figure"], table.loc[name, "re-run (paper scale)"]) == (
            grid.figure,
            f"uldp grid {name} --profile paper --jobs 3",
        )
        for profile in ("paper", "short", "default", "smoke"):
            if profile != "paper" and profile not in grid.reductions:
                assert table.loc[name, f"stored at {profile}"] == "-"
                continue
            root = results_root(profile)
            places = {
                (spec.panel, spec.series, spec.seed): spec.key for spec in expand(name, profile)
            }
            found = sum(1 for key in places.values() if any(root.glob(f"*/{key}.json")))
            assert table.loc[name, f"stored at {profile}"] == f"{found} of {len(places)}", (
                name,
                profile,
            )
