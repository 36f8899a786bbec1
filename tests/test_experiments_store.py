"""Stored results (uldp.paper.experiments.store), with a fast fake executor.

Files are written atomically; a stored result that is tampered with or misses a field is refused by name; a run
stored by one grid is not run again by another; and every committed result is a run of its grid under its key.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

import fake_executor
import pytest
from experiments_helpers import _stored_payload

from uldp.paper import experiments
from uldp.paper.experiments import RunSpec, config_hash, expand, load_results, result_path, run_grid


def test_atomic_write_leaves_old_file_or_none(tmp_path, monkeypatch):
    target = tmp_path / "g" / "run.json"
    experiments.write_json_atomic(target, {"v": 1})
    assert json.loads(target.read_text()) == {"v": 1}

    def broken_replace(source, destination):
        raise OSError("disk gone")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk gone"):
        experiments.write_json_atomic(target, {"v": 2})
    assert json.loads(target.read_text()) == {"v": 1}
    assert [p.name for p in target.parent.iterdir()] == [
        "run.json"
    ]  # no temporary file left behind
    monkeypatch.undo()
    with pytest.raises(ValueError, match="cannot store"):
        experiments.write_json_atomic(tmp_path / "g" / "other.json", {"v": object()})
    assert not (tmp_path / "g" / "other.json").exists()
    assert experiments.read_result(target) is None  # not a result file (no schema/result)
    (tmp_path / "g" / "half.json").write_text('{"schema": 1, "res')
    assert experiments.read_result(tmp_path / "g" / "half.json") is None


@pytest.mark.parametrize(
    "change, detail",
    [
        ({"result": "garbage"}, "result must be a non-empty object"),
        ({"result": {}}, "result must be a non-empty object"),
        ({"provenance": None}, "provenance must be an object"),
        ({"provenance": {"wall_seconds": "1"}}, "wall_seconds"),
        ({"seed": "abc"}, "seed must be an integer"),
        ({"seed": True}, "seed must be an integer"),
        ({"seed": 7}, "differs from the run arguments"),
        ({"config": "x"}, "params and config must be objects"),
        ({"params": {"method": "ULDP-AVG-w", "seed": 0, "n_users": 11}}, "disagree"),
        ({"key": "0" * 16}, "disagree"),
        ({"grid": 5}, "grid must be a non-empty string, got 5"),
        ({"series": None}, "series must be a non-empty string"),
        ({"extra": 1}, "must hold exactly schema, key, grid"),
        ({"result": {"test_loss": ["low"]}}, "result.test_loss must be a list of numbers or nulls"),
        ({"result": {"test_loss": [True]}}, "result.test_loss must be a list of numbers or nulls"),
        ({"result": {"test_loss": 1.0}}, "result.test_loss must be a list"),
        ({"result": {"test_loss": [1.0], "epsilon": [1.0, 2.0]}}, "one length"),
        ({"result": {"round": [2], "test_loss": [1.0]}}, "result.round must count"),
        ({"result": {"test_loss": [1.0], "info": []}}, "result.info must be an object"),
    ],
)
def test_a_tampered_stored_result_is_a_value_error_naming_the_file(change, detail, tmp_path):
    """Issue 25: a stored result whose fields are malformed or whose run arguments do not match its key is refused
    by name, for read_result and load_results alike (before: AttributeError, KeyError, TypeError, or counted)."""
    spec = expand("user_sampling", "paper", seeds=[0])[0]
    path = result_path(tmp_path, spec)
    experiments.write_json_atomic(path, _stored_payload(spec))
    stored = experiments.read_result(path)
    assert stored is not None and stored.to_json() == _stored_payload(spec)
    experiments.write_json_atomic(path, {**_stored_payload(spec), **change})
    with pytest.raises(
        ValueError, match=f"stored result {re.escape(str(path))} is malformed: .*{detail}"
    ):
        experiments.read_result(path)
    with pytest.raises(ValueError, match=detail):
        load_results("user_sampling", "paper", seeds=[0], root=tmp_path)


@pytest.mark.parametrize(
    "missing", ["key", "grid", "panel", "series", "seed", "params", "config", "provenance"]
)
def test_a_stored_result_missing_a_field_is_a_value_error_naming_it(missing, tmp_path):
    spec = expand("user_sampling", "paper", seeds=[0])[0]
    path = result_path(tmp_path, spec)
    experiments.write_json_atomic(
        path, {name: value for name, value in _stored_payload(spec).items() if name != missing}
    )
    expected = f"malformed: the file must hold exactly schema, key, grid.*got (?!.*{missing})"
    with pytest.raises(ValueError, match=expected):
        experiments.read_result(path)


def test_a_run_stored_by_one_grid_is_not_run_again_by_another(tmp_path, monkeypatch):
    """The weighting figure's TcgaBrca runs are TcgaBrca privacy-utility runs."""
    log = tmp_path / "calls.log"
    monkeypatch.setenv("ULDP_FAKE_LOG", str(log))
    tcga = {
        s.key for s in expand("tcga_brca", "paper", seeds=[0], methods=["ULDP-AVG", "ULDP-AVG-w"])
    }
    weighting = [
        s for s in expand("weighting", "paper", seeds=[0]) if s.kwargs["dataset"] == "tcga_brca"
    ]
    assert weighting and {s.key for s in weighting} <= tcga
    run_grid(
        "tcga_brca",
        "paper",
        seeds=[0],
        methods=["ULDP-AVG-w"],
        root=tmp_path,
        executor=fake_executor.FAKE,
        progress=False,
    )
    shared = [s for s in weighting if s.kwargs["method"] == "ULDP-AVG-w"]
    assert experiments.pending_runs(weighting, tmp_path) == [
        s for s in weighting if s not in shared
    ]
    stored = experiments.stored_result(tmp_path, shared[0])
    assert stored is not None and stored.grid == "tcga_brca"


@pytest.mark.parametrize("profile", ["paper", "short"])
def test_every_committed_result_is_a_run_of_its_grid_stored_under_its_key(profile):
    """The committed results/ (paper) and results/short/ files: each is a complete result named by the hash of its
    arguments, labelled with its grid's panel and series, with provenance of a clean commit: a run of the paper's
    settings, or of the same settings trained to the paper's epsilon by PLD (uldp.paper.beyond.PLD_RERUNS). (Checkpoints
    of runs in progress are ignored by git.)"""
    from uldp.paper.beyond import PLD_RERUNS
    from uldp.paper.settings import paper_seeds

    root = experiments.results_root(profile)
    files = sorted(root.glob("*/*.json"))
    if not files:
        pytest.skip(f"no committed {profile} results")
    specs: dict[str, dict[str, RunSpec]] = {}
    places: dict[str, set[tuple[str, str]]] = {}
    variants: dict[str, list[dict[str, Any]]] = {
        grid: [{}, {"accountant": "pld", "epsilon": epsilon}] for grid, epsilon in PLD_RERUNS
    }
    for name in {path.parent.name for path in files}:
        # the medical uniform panels' balanced runs: the paper profile's until issue 32, kept to compare allocations
        grid_specs = [
            spec
            for privacy in variants.get(name, [{}])
            for uniform in ("uniform", None)
            for spec in expand(
                name,
                profile,
                seeds=list(range(max(10, len(paper_seeds(name))))),
                uniform_allocation=uniform,
                **privacy,
            )
        ]  # any seed up to 9, or up to the grid's paper-profile seeds where it has more
        specs[name] = {spec.key: spec for spec in grid_specs}
        for grid_spec in grid_specs:  # a shared run has a place in more than one panel
            places.setdefault(grid_spec.key, set()).add((grid_spec.panel, grid_spec.series))
    for path in files:
        stored = experiments.read_result(path)
        assert stored is not None, f"{path} is not a complete result"
        spec = specs[path.parent.name].get(path.stem)
        assert spec is not None, (
            f"{path} is no run of grid {path.parent.name!r} at the {profile} profile"
        )
        assert (stored.key, stored.grid, stored.seed) == (spec.key, spec.grid, spec.seed), path
        assert config_hash(experiments.effective_arguments(stored.params)) == path.stem, path
        assert (stored.panel, stored.series) in places[spec.key], path
        assert json.dumps(stored.to_json(), indent=1) == path.read_text(), (
            path
        )  # written back byte for byte
        provenance = stored.provenance
        assert provenance["command"] and provenance["date"] and provenance["wall_seconds"] > 0, path
        assert len(provenance["git_commit"]) == 40 and not provenance["git_dirty"], path
