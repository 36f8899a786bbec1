"""Experiment grids, result storage and resumption (uldp.paper.experiments), with a fast fake executor.

The paper-profile grids are checked against the tables of settings.md, parsed here independently of the module.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from typing import Any

import fake_executor
import numpy as np
import pytest
from hypothesis import given, strategies as st

from uldp import cli
from uldp.paper import experiments
from uldp.paper.experiments import (
    GRIDS,
    Entry,
    Grid,
    Reduction,
    RunSpec,
    config_hash,
    effective_arguments,
    expand,
    load_results,
    result_path,
    run_grid,
    runner,
)

SETTINGS_MD = experiments.REPO_ROOT.parent / "shared" / "paper" / "settings.md"
DATASET_NAMES = {
    "Creditcard": "creditcard",
    "MNIST": "mnist",
    "HeartDisease": "heart_disease",
    "TcgaBrca": "tcga_brca",
}


# ----------------------------------------------------------------------------------------- settings.md, parsed here


def _table(text: str, heading: str) -> list[list[str]]:
    """Rows (cells stripped) of the first markdown table after the heading that starts with ``heading``."""
    section = text[text.index(heading) :]
    block = []
    for line in section.splitlines()[1:]:
        if line.startswith("|"):
            block.append(line)
        elif block:
            break
    assert block
    return [[cell.strip() for cell in row.strip("|").split("|")] for row in block[2:]]


def _methods(cell: str) -> list[str]:
    expanded = re.sub(
        r"(\S+)-\{([^}]*)\}",
        lambda m: ", ".join(f"{m[1]}-{x.strip()}" for x in m[2].split(",")),
        cell,
    )
    return [name.strip() for name in expanded.split(",")]


def _number(cell: str) -> float | None:
    return None if cell == "-" else float(cell)


def _paper_params(grid: str) -> list[dict]:
    return [dict(entry.params) for entry in GRIDS[grid].entries()]


DATA = experiments.REPO_ROOT.parent / "shared" / "data"
needs_data = pytest.mark.skipif(
    not (DATA / "tcga_brca").is_dir() and not os.environ.get("ULDP_DATA_DIR"),
    reason="no dataset files (set ULDP_DATA_DIR)",
)
needs_settings = pytest.mark.skipif(
    not SETTINGS_MD.exists(), reason="settings.md of the paper is not beside the repo"
)


@needs_settings
def test_privacy_utility_grids_are_the_settings_md_table():
    text = SETTINGS_MD.read_text()
    expected: dict[tuple[str, str, int], dict] = {}
    dataset = users = rounds = None
    for row in _table(text, "## Privacy-utility figures"):
        if row[0]:
            dataset, users, rounds = (
                DATASET_NAMES[row[0]],
                [int(u) for u in row[1].split(",")],
                int(row[2]),
            )
        assert dataset is not None and users is not None, "the table's first row names its dataset"
        lr_by_users = dict(re.findall(r"([\d.]+) \((\d+) users\)", row[4]))
        for method in _methods(row[3]):
            for n_users in users:
                lr = float(
                    {int(u): v for v, u in lr_by_users.items()}.get(n_users, row[4].split()[0])
                )
                expected[(dataset, method, n_users)] = {
                    "rounds": rounds,
                    "global_lr": lr,
                    "clip": _number(row[5]),
                    "local_lr": _number(row[6]),
                    "local_epochs": None if row[7] == "-" else int(row[7]),
                }
    # The sentence under the table: NAIVE on MNIST at the Creditcard shape with C = 1.0.
    assert "global lr 1.0, C 1.0, local lr 0.01, Q 50" in text
    for n_users in (100, 10000):
        expected[("mnist", "ULDP-NAIVE", n_users)] = {
            "rounds": 200,
            "global_lr": 1.0,
            "clip": 1.0,
            "local_lr": 0.01,
            "local_epochs": 50,
        }
    batch = {"creditcard": 64, "mnist": 64, "heart_disease": 4, "tcga_brca": 8}
    silos = {"creditcard": 5, "mnist": 5, "heart_disease": 4, "tcga_brca": 6}
    assert "Local batch size 64 (Creditcard, MNIST), 4 (HeartDisease), 8 (TcgaBrca)" in text
    assert "Creditcard and MNIST 5 silos; HeartDisease 4, TcgaBrca 6" in text
    for name in ("creditcard", "mnist", "heart_disease", "tcga_brca"):
        # the medical datasets' uniform is the authors' independent draws (issue 32); the others' stays balanced
        uniform = (
            "uniform-with-replacement" if name in ("heart_disease", "tcga_brca") else "uniform"
        )
        schemes = {uniform, "zipf", "zipf-noniid"} if name == "mnist" else {uniform, "zipf"}
        runs = _paper_params(name)
        got = {(p["dataset"], p["method"], p["n_users"]) for p in runs}
        assert got == {key for key in expected if key[0] == name}
        assert len(runs) == len(got) * len(schemes)
        for params in runs:
            want = expected[(params["dataset"], params["method"], params["n_users"])]
            assert {key: params[key] for key in want} == want, params
            assert (params["batch_size"], params["n_silos"]) == (batch[name], silos[name])
            sigma = None if params["method"] == "DEFAULT" else 5.0  # DEFAULT adds no noise
            assert (params["sigma"], params["delta"], params["q"]) == (sigma, 1e-5, 1.0)
            assert params["distribution"] in schemes
        assert {p["distribution"] for p in runs} == schemes


@needs_settings
def test_weighting_and_user_sampling_grids_are_the_settings_md_tables():
    text = SETTINGS_MD.read_text()
    expected: set[tuple[Any, ...]] = set()
    for row in _table(text, "## Enhanced weighting figure"):
        for n_silos in row[2].split(","):
            for dist in row[3].split(","):
                dataset = DATASET_NAMES[row[0]]
                # the medical datasets' uniform is the authors' independent draws (issue 32)
                scheme = (
                    "uniform-with-replacement"
                    if dist.strip() == "uniform" and dataset in ("heart_disease", "tcga_brca")
                    else dist.strip()
                )
                for method in ("ULDP-AVG", "ULDP-AVG-w"):
                    expected.add(
                        (
                            dataset,
                            int(row[1]),
                            int(n_silos),
                            scheme,
                            int(row[4]),
                            float(row[5]),
                            float(row[6]),
                            float(row[7]),
                            int(row[8]),
                            method,
                        )
                    )
    fields = (
        "dataset",
        "n_users",
        "n_silos",
        "distribution",
        "rounds",
        "global_lr",
        "clip",
        "local_lr",
        "local_epochs",
        "method",
    )
    assert {tuple(p[f] for f in fields) for p in _paper_params("weighting")} == expected
    expected = set()
    for row in _table(text, "## User-level sub-sampling figure"):
        assert row[2] == "zipf/zipf"
        for q in row[3].split(","):
            expected.add(
                (
                    DATASET_NAMES[row[0]],
                    int(row[1]),
                    "zipf",
                    float(q),
                    int(row[4]),
                    float(row[5]),
                    float(row[6]),
                    float(row[7]),
                    int(row[8]),
                    "ULDP-AVG-w",
                )
            )
    fields = (
        "dataset",
        "n_users",
        "distribution",
        "q",
        "rounds",
        "global_lr",
        "clip",
        "local_lr",
        "local_epochs",
        "method",
    )
    assert {tuple(p[f] for f in fields) for p in _paper_params("user_sampling")} == expected


def test_paper_spot_checks_transcribed_from_settings_md():
    runs = {
        (p["dataset"], p["method"], p["n_users"], p["distribution"]): p
        for p in _paper_params("mnist")
    }
    assert runs[("mnist", "ULDP-AVG", 10000, "zipf-noniid")]["global_lr"] == 100.0
    assert runs[("mnist", "ULDP-AVG-w", 100, "uniform")]["global_lr"] == 10.0
    tcga = {(p["method"], p["n_users"], p["distribution"]): p for p in _paper_params("tcga_brca")}
    assert (
        tcga[("ULDP-GROUP-8", 50, "zipf")]["global_lr"],
        tcga[("ULDP-GROUP-8", 50, "zipf")]["clip"],
    ) == (0.1, 100.0)
    assert tcga[("ULDP-SGD", 200, "uniform-with-replacement")]["local_epochs"] is None
    runtime = _paper_params("protocol_runtime")
    assert {(p["dataset"], p["n_users"]) for p in runtime} == {
        (d, u) for d in ("heart_disease", "tcga_brca") for u in (10, 100)
    }
    assert all(p["rounds"] == 3 and p["method"] == "ULDP-AVG-w" and p["secure"] for p in runtime)
    assert {s.seed for s in expand("creditcard", "paper")} == {0, 1, 2, 3, 4}


@pytest.mark.parametrize("profile", ["smoke", "default"])
@pytest.mark.parametrize("name", sorted(GRIDS))
def test_smaller_profiles_only_shrink_the_paper_grid(name, profile):
    paper = _paper_params(name)
    small = expand(name, profile)
    assert small
    places = [(s.panel, s.series, s.seed) for s in small]
    assert len(places) == len(set(places))
    for spec in small:  # only user-blind runs on fixed silos share a stored run across panels
        twins = [other for other in small if other.key == spec.key and other is not spec]
        assert not twins or (
            spec.kwargs["method"] in ("DEFAULT", "ULDP-NAIVE")
            and spec.kwargs["dataset"] in ("heart_disease", "tcga_brca")
        )
    fixed = (
        "dataset",
        "method",
        "distribution",
        "global_lr",
        "clip",
        "local_lr",
        "batch_size",
        "sigma",
        "delta",
        "q",
    )
    for spec in small:
        params = spec.kwargs
        paper_twins = [p for p in paper if all(p[f] == params[f] for f in fixed)]
        assert paper_twins, params
        assert params["rounds"] <= paper_twins[0]["rounds"]
        assert params["n_users"] <= max(p["n_users"] for p in paper_twins)
    if profile == "smoke":
        assert max(spec.kwargs["rounds"] for spec in small) <= 3 and {s.seed for s in small} == {0}
    methods = {spec.kwargs["method"] for spec in small}
    if (
        GRIDS[name].kind == "privacy_utility"
    ):  # the method families the figure compares keep a representative
        assert {"DEFAULT", "ULDP-AVG", "ULDP-AVG-w"} | (
            {"ULDP-SGD"} if profile == "smoke" else set()
        ) <= methods
        assert any(m.startswith("ULDP-GROUP") for m in methods)


def test_uniform_allocation_swaps_only_the_authors_draws_and_rejects_other_schemes():
    drawn = experiments.expand("heart_disease", "paper")
    balanced = experiments.expand("heart_disease", "paper", uniform_allocation="uniform")
    assert len(drawn) == len(balanced)
    for one, other in zip(drawn, balanced, strict=True):
        params, swapped = one.kwargs, other.kwargs
        if params["distribution"] == "uniform-with-replacement":
            assert swapped == {**params, "distribution": "uniform"}
            assert "uniform" in other.panel and "with-replacement" not in other.panel
        else:
            assert swapped == params and one.key == other.key
    # user-blind runs (DEFAULT, ULDP-NAIVE) ignore the allocation on fixed silos: one stored run serves both
    blind = [
        (a.key, b.key)
        for a, b in zip(drawn, balanced, strict=True)
        if a.kwargs["method"] == "DEFAULT"
    ]
    assert blind and all(a == b for a, b in blind)
    assert experiments.expand(
        "creditcard", "paper", uniform_allocation="uniform"
    ) == experiments.expand("creditcard", "paper")
    with pytest.raises(
        ValueError,
        match="uniform_allocation must be one of uniform, uniform-with-replacement, got 'zipf'",
    ):
        experiments.expand("heart_disease", "paper", uniform_allocation="zipf")


def test_method_filter_keeps_exactly_those_runs():
    everything = expand("heart_disease", "paper")
    chosen = expand("heart_disease", "paper", methods=["ULDP-AVG-w", "ULDP-SGD"])
    assert {spec.kwargs["method"] for spec in chosen} == {"ULDP-AVG-w", "ULDP-SGD"}
    assert {spec.key for spec in chosen} == {
        spec.key for spec in everything if spec.kwargs["method"] in ("ULDP-AVG-w", "ULDP-SGD")
    }
    with pytest.raises(
        ValueError, match=r"methods \['ULDP-FOO'\] not all in grid 'heart_disease'.*ULDP-AVG-w"
    ):
        expand("heart_disease", "paper", methods=["ULDP-FOO"])


def test_dataset_filter_keeps_exactly_those_runs():
    everything = expand("user_sampling", "paper")
    assert {spec.kwargs["dataset"] for spec in everything} == {"creditcard", "mnist"}
    chosen = expand("user_sampling", "paper", datasets=["creditcard"], seeds=[1])
    assert {spec.key for spec in chosen} == {
        spec.key for spec in everything if spec.kwargs["dataset"] == "creditcard" and spec.seed == 1
    }
    assert len(chosen) == 5  # q in 0.1, 0.3, 0.5, 0.7, 1.0
    both = expand("weighting", "paper", datasets=["tcga_brca"], methods=["ULDP-AVG-w"])
    assert {(s.kwargs["dataset"], s.kwargs["method"]) for s in both} == {
        ("tcga_brca", "ULDP-AVG-w")
    }
    with pytest.raises(
        ValueError, match=r"datasets \['heart'\] not all in grid 'weighting'.*creditcard, tcga_brca"
    ):
        expand("weighting", "paper", datasets=["heart"])
    with pytest.raises(ValueError, match=r"datasets \[\] not all in grid"):
        expand("weighting", "paper", datasets=[])


def test_where_keeps_exactly_the_runs_whose_parameters_take_those_values():
    everything = expand("mnist", "short")
    one_panel = expand("mnist", "short", where={"n_users": ["100"], "distribution": ["zipf"]})
    assert {spec.key for spec in one_panel} == {
        spec.key
        for spec in everything
        if spec.kwargs["n_users"] == 100 and spec.kwargs["distribution"] == "zipf"
    }
    assert len(one_panel) == 3 and {spec.panel for spec in one_panel} == {"|U|=100, zipf"}
    either = expand("user_sampling", "paper", datasets=["creditcard"], where={"q": ["0.1", "1.0"]})
    assert sorted({spec.kwargs["q"] for spec in either}) == [0.1, 1.0]
    with pytest.raises(ValueError, match=r"no parameter 'n_user' to select by; .*n_users"):
        expand("mnist", "short", where={"n_user": ["100"]})
    with pytest.raises(
        ValueError, match=r"values of n_users \['101'\] not all in grid 'mnist'.*100, 10000"
    ):
        expand("mnist", "short", where={"n_users": ["101"]})


def test_cli_where_selects_one_panel_and_refuses_a_pair_without_a_value(tmp_path, capsys):
    common = ["grid", "mnist", "--profile", "short", "--root", str(tmp_path), "--dry-run", "--json"]
    assert cli.main([*common, "--where", "n_users=100", "distribution=zipf"]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["total"] == 3
    assert cli.main([*common, "--where", "n_users"]) == 2
    assert "--where takes PARAMETER=VALUE pairs" in capsys.readouterr().err


def test_unknown_names_give_clear_errors():
    with pytest.raises(ValueError, match=r"unknown grid 'nope'.*creditcard.*weighting"):
        expand("nope", "paper")
    with pytest.raises(ValueError, match=r"unknown profile 'huge'.*smoke, default, short, paper"):
        expand("mnist", "huge")
    with pytest.raises(
        ValueError, match=r"grid 'creditcard' has no short profile; grids with one: mnist"
    ):
        expand("creditcard", "short")
    with pytest.raises(
        ValueError, match=re.escape("seeds must be distinct and at least one, got [1, 1]")
    ):
        expand("mnist", "smoke", seeds=[1, 1])
    with pytest.raises(
        ValueError, match=re.escape("seeds must be distinct and at least one, got []")
    ):
        expand("mnist", "smoke", seeds=[])
    bad: Any  # not a seed, on purpose
    for bad in (True, -1, 1.0):  # True used to be taken as seed 1
        with pytest.raises(ValueError, match=f"seed must be an integer >= 0, got {bad!r}"):
            expand("mnist", "smoke", seeds=[0, bad])
    numpy_seeds: list[Any] = [np.int64(3)]
    numpy_seed = [spec.key for spec in expand("heart_disease", "smoke", seeds=numpy_seeds)]
    assert numpy_seed == [spec.key for spec in expand("heart_disease", "smoke", seeds=[3])]
    with pytest.raises(ValueError, match="jobs must be an integer >= 1, got 0"):
        run_grid("mnist", "smoke", jobs=0, executor=fake_executor.FAKE)


def test_cli_reports_bad_names_and_dry_runs(tmp_path, capsys):
    assert cli.main(["grid", "nope", "--profile", "paper"]) == 2
    assert "unknown grid 'nope'" in capsys.readouterr().err
    assert cli.main(["grid", "heart_disease", "--profile", "medium"]) == 2
    assert "unknown profile 'medium'" in capsys.readouterr().err
    assert (
        cli.main(
            [
                "grid",
                "heart_disease",
                "--profile",
                "paper",
                "--root",
                str(tmp_path),
                "--seeds",
                "0",
                "1",
                "--dry-run",
                "--json",
            ]
        )
        == 0
    )
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    specs = expand("heart_disease", "paper", seeds=[0, 1])
    # DEFAULT and ULDP-NAIVE ignore users and HeartDisease's silos are fixed: one run per seed serves all 4 panels
    assert (
        summary["total"]
        == summary["pending"]
        == len({s.key for s in specs})
        == len(specs) - 2 * 3 * 2
    )
    assert (
        cli.main(
            [
                "grid",
                "user_sampling",
                "--profile",
                "paper",
                "--root",
                str(tmp_path),
                "--seeds",
                "1",
                "--datasets",
                "creditcard",
                "--dry-run",
                "--json",
            ]
        )
        == 0
    )
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["total"] == 5


# -------------------------------------------------------------------------------------------------------- hashing


@given(
    st.dictionaries(
        st.text(max_size=5),
        st.one_of(
            st.integers(),
            st.floats(allow_nan=False, allow_infinity=False),
            st.text(max_size=5),
            st.none(),
            st.booleans(),
        ),
        max_size=6,
    )
)
def test_config_hash_is_sha256_of_sorted_compact_json(config):
    text = json.dumps(config, sort_keys=True, separators=(",", ":"))
    assert config_hash(config) == hashlib.sha256(text.encode()).hexdigest()[:16]
    assert config_hash(dict(reversed(list(config.items())))) == config_hash(config)


@pytest.mark.slow
def test_config_hash_is_stable_across_processes_and_distinguishes_values():
    spec = expand("weighting", "paper")[7]
    code = "from uldp.paper.experiments import expand; print(expand('weighting', 'paper')[7].key)"
    for seed in ("1", "12345"):
        out = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
        )
        assert out.stdout.strip() == spec.key
    assert config_hash({"a": 1}) != config_hash({"a": 1.0}) != config_hash({"a": "1"})
    distinct = {
        json.dumps(experiments.effective_arguments(s.kwargs), sort_keys=True)
        for s in expand("mnist", "paper")
    }
    assert len({s.key for s in expand("mnist", "paper")}) == len(distinct) > 100
    with pytest.raises(ValueError, match="finite"):
        config_hash({"a": float("nan")})
    with pytest.raises(ValueError, match="JSON scalars"):
        config_hash({"a": object()})


# -------------------------------------------------------------------------------------------------------- storage


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


def test_medical_runs_are_scored_as_the_authors_and_only_heart_disease_keys_depend_on_the_scoring():
    """Results scored per centre never mix with pooled ones: the scoring is in HeartDisease's keys. TcgaBrca's two
    scorings give one test set (tests/test_data.py checks it), so its keys, stored before, stay."""
    for grid in ("heart_disease", "tcga_brca", "protocol_runtime"):
        assert all(
            spec.kwargs["test_scoring"] == "pooled" for spec in expand(grid, "paper", seeds=[0])
        )
    heart = expand("heart_disease", "paper", seeds=[0])[0]
    assert (
        config_hash(effective_arguments({**heart.kwargs, "test_scoring": "per-centre"}))
        != heart.key
    )
    tcga = expand("tcga_brca", "paper", seeds=[0])[0]
    without = {name: value for name, value in tcga.kwargs.items() if name != "test_scoring"}
    assert (
        config_hash(effective_arguments({**tcga.kwargs, "test_scoring": "per-centre"})) == tcga.key
    )
    assert config_hash(effective_arguments(without)) == tcga.key
    assert "test_scoring" not in expand("creditcard", "paper", seeds=[0])[0].kwargs


def _stored_payload(spec) -> dict:
    return {
        "schema": experiments.SCHEMA_VERSION,
        "key": spec.key,
        "grid": spec.grid,
        "panel": spec.panel,
        "series": spec.series,
        "seed": spec.seed,
        "params": spec.kwargs,
        "config": {},
        "result": {"test_loss": [1.0]},
        "provenance": {"date": "2026-01-01T00:00", "wall_seconds": 1.5},
    }


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


def test_a_result_set_says_where_its_runs_come_from_and_keeps_it_when_restricted():
    accounted = experiments.ResultSet(
        "g", "paper", ({"panel": "A", "series": "x"},), (), None, "accounting"
    )
    assert (
        accounted.restricted([]).source == "accounting"
        and accounted.only_panels(["A"]).source == "accounting"
    )
    assert experiments.ResultSet("g", "paper", (), (), "results").source == "stored"
    with pytest.raises(ValueError, match="source must be one of stored, accounting, got 'trained'"):
        bad_source: Any = "trained"  # not a source, on purpose
        experiments.ResultSet("g", "paper", (), (), None, bad_source)


def test_loaded_results_frame_and_description(tmp_path):
    run_grid(
        "user_sampling",
        "smoke",
        root=tmp_path,
        executor=fake_executor.FAKE,
        progress=False,
        command="pytest",
    )
    results = load_results("user_sampling", "smoke", root=tmp_path)
    frame = results.frame()
    specs = expand("user_sampling", "smoke")
    assert results.complete and len(frame) == sum(s.kwargs["rounds"] for s in specs)
    assert set(frame["series"]) == {"q=0.1", "q=1"} and {
        "test_loss",
        "epsilon",
        "round",
        "q",
    } <= set(frame)
    text = results.describe()
    assert (
        f"{len(specs)} of {len(specs)} runs" in text
        and "smoke profile" in text
        and "`pytest`" in text
    )


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
            {
                "schema": experiments.SCHEMA_VERSION,
                "key": spec.key,
                "grid": spec.grid,
                "panel": spec.panel,
                "series": spec.series,
                "seed": spec.seed,
                "params": spec.kwargs,
                "config": {},
                "result": {"test_loss": [1.0]},
                "provenance": {"date": "2026-01-01T00:00", "command": "c", "wall_seconds": 1},
            },
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


@needs_data
def test_user_blind_runs_on_fixed_silos_do_not_depend_on_the_allocation(monkeypatch):
    """The fact behind effective_arguments: DEFAULT and ULDP-NAIVE give the same bits under any users."""
    from uldp.simulation import RunConfig, run

    if not os.environ.get("ULDP_DATA_DIR"):
        monkeypatch.setenv("ULDP_DATA_DIR", str(DATA))
    base: dict[str, Any] = dict(
        dataset="tcga_brca",
        rounds=2,
        seed=3,
        local_lr=0.01,
        global_lr=1.0,
        local_epochs=2,
        batch_size=8,
        clip=0.1,
        sigma=1.0,
    )
    for method in ("DEFAULT", "ULDP-NAIVE"):
        runs = [
            run(RunConfig(method=method, n_users=n_users, distribution=distribution, **base))
            for n_users, distribution in ((50, "uniform"), (200, "zipf"))
        ]
        assert runs[0].test_loss == runs[1].test_loss and runs[0].c_index == runs[1].c_index
    group = [
        experiments.effective_arguments({**base, "method": "ULDP-GROUP-2", "n_users": n})
        for n in (50, 200)
    ]
    assert group[0] != group[1]  # a method that reads users keeps them


def test_user_blind_runs_under_the_uniform_allocation_do_not_depend_on_the_number_of_users(
    monkeypatch,
):
    """Without fixed silos: DEFAULT and ULDP-NAIVE under ``uniform`` give the same bits for any |U|, not under zipf."""
    from uldp.simulation import RunConfig, run

    if not os.environ.get("ULDP_DATA_DIR"):
        monkeypatch.setenv("ULDP_DATA_DIR", str(DATA))
    base: dict[str, Any] = dict(
        dataset="creditcard", rounds=2, seed=3, local_epochs=1, max_train_records=600
    )
    for method, distribution in (
        ("DEFAULT", "uniform"),
        ("ULDP-NAIVE", "uniform"),
        ("DEFAULT", "uniform-with-replacement"),
    ):
        runs = [
            run(RunConfig(method=method, n_users=n_users, distribution=distribution, **base))
            for n_users in (7, 90)
        ]
        assert runs[0].test_loss == runs[1].test_loss and runs[0].accuracy == runs[1].accuracy
        keys = {
            config_hash(
                experiments.effective_arguments(
                    {**base, "method": method, "n_users": n_users, "distribution": distribution}
                )
            )
            for n_users in (7, 90)
        }
        assert len(keys) == 1
    zipf = [
        run(RunConfig(method="DEFAULT", n_users=n_users, distribution="zipf", **base))
        for n_users in (7, 90)
    ]
    assert (
        zipf[0].test_loss != zipf[1].test_loss
    )  # under zipf a user's records choose their silos: no sharing
    assert (
        experiments.effective_arguments(
            {**base, "method": "DEFAULT", "n_users": 9, "distribution": "zipf"}
        )["n_users"]
        == 9
    )


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


@needs_data
def test_accounted_results_equal_the_trained_paper_runs_epsilon(monkeypatch):
    """Accounting alone gives the final epsilon of the committed, trained HeartDisease paper runs (to 12 digits: they
    were accounted by earlier commits, whose root finding may differ in the last bit)."""
    monkeypatch.setenv("ULDP_DATA_DIR", os.environ.get("ULDP_DATA_DIR") or str(DATA))
    trained = load_results("heart_disease", "paper", seeds=[0])
    if not trained.runs:
        pytest.skip("no committed HeartDisease paper results")
    methods = ("DEFAULT", "ULDP-GROUP-median", "ULDP-GROUP-2", "ULDP-AVG-w")
    accounted = experiments.accounted_results("heart_disease", methods=methods)
    assert accounted.profile == "paper" and accounted.describe().startswith(
        "epsilons from accounting alone"
    )
    assert (accounted.source, accounted.root, trained.source) == ("accounting", None, "stored")
    final = {(run["panel"], run["series"]): run["result"]["epsilon"][-1] for run in trained.runs}
    assert {run["series"] for run in accounted.runs} == set(methods)
    for run in accounted.runs:
        expected = final[run["panel"], run["series"]]
        assert run["result"]["epsilon"] == [
            None if expected is None else pytest.approx(expected, rel=1e-12)
        ]
    assert {
        run["result"]["epsilon"][0] for run in accounted.runs if run["series"] == "DEFAULT"
    } == {None}
    with pytest.raises(ValueError, match=r"\['ULDP-GROUP-3'\] are not run by grid 'heart_disease'"):
        experiments.accounted_results("heart_disease", methods=("ULDP-AVG", "ULDP-GROUP-3"))


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


def test_accountant_and_budget_change_only_the_private_runs_and_leave_the_paper_keys_alone():
    paper = expand("heart_disease", "paper", seeds=[0])
    assert expand("heart_disease", "paper", seeds=[0], accountant="rdp", epsilon=None) == paper
    assert all(
        "accountant" not in spec.kwargs and "target_epsilon" not in spec.kwargs for spec in paper
    )
    for changes in (
        {"accountant": "pld"},
        {"epsilon": 2.0},
        {"accountant": "pld", "epsilon": 2.0},
    ):
        other = expand("heart_disease", "paper", seeds=[0], **changes)
        assert [(s.panel, s.series, s.seed) for s in other] == [
            (s.panel, s.series, s.seed) for s in paper
        ]
        for before, after in zip(paper, other, strict=True):
            if before.kwargs["method"] == "DEFAULT":
                assert after == before
                continue
            assert after.key != before.key
            # the budget under the name stored runs give it, target_epsilon (their keys hash it)
            stored = {"epsilon": "target_epsilon"}
            expected = {**before.kwargs, **{stored.get(k, k): v for k, v in changes.items()}}
            if "epsilon" in changes:
                expected["sigma"] = None
            assert after.kwargs == expected
    with pytest.raises(ValueError, match="unknown accountant 'prv'"):
        expand("heart_disease", "paper", accountant="prv")
    with pytest.raises(ValueError, match="epsilon must be"):
        expand("heart_disease", "paper", epsilon=-1.0)


def test_load_results_reads_the_runs_of_an_accountant_and_budget(tmp_path):
    loaded = load_results("heart_disease", "smoke", root=tmp_path, accountant="pld", epsilon=2.0)
    assert not loaded.runs
    assert [spec.key for spec in loaded.missing] == [
        spec.key for spec in expand("heart_disease", "smoke", accountant="pld", epsilon=2.0)
    ]


def test_cli_grid_dry_run_passes_accountant_and_budget(tmp_path, capsys):
    assert (
        cli.main(
            [
                "grid",
                "heart_disease",
                "--profile",
                "smoke",
                "--root",
                str(tmp_path),
                "--dry-run",
                "--accountant",
                "pld",
                "--epsilon",
                "2",
                "--json",
            ]
        )
        == 0
    )
    payload = json.loads(capsys.readouterr().out)
    specs = expand("heart_disease", "smoke", accountant="pld", epsilon=2.0)
    assert payload["pending"] == len({spec.key for spec in specs})
    assert {run["key"] for run in payload["pending_runs"]} == {spec.key for spec in specs}
    assert payload["inputs"]["accountant"] == "pld" and payload["inputs"]["epsilon"] == 2.0


@needs_data
def test_accounted_results_by_pld_re_account_the_paper_runs(monkeypatch):
    from uldp.accounting import epsilon_for_method

    monkeypatch.setenv("ULDP_DATA_DIR", os.environ.get("ULDP_DATA_DIR") or str(DATA))
    methods = ("ULDP-GROUP-2", "ULDP-AVG-w")
    rdp = experiments.accounted_results("heart_disease", methods=methods)
    pld = experiments.accounted_results("heart_disease", methods=methods, accountant="pld")
    assert [run["key"] for run in pld.runs] == [
        run["key"] for run in rdp.runs
    ]  # the paper's runs, no retraining
    for by_rdp, by_pld in zip(rdp.runs, pld.runs, strict=True):
        assert by_pld["result"]["epsilon"][0] < by_rdp["result"]["epsilon"][0]
        if by_pld["series"] == "ULDP-AVG-w":
            assert (
                by_pld["result"]["epsilon"][0]
                == epsilon_for_method(
                    "ULDP-AVG-w", sigma=5.0, rounds=50, delta=1e-5, accountant="pld"
                ).epsilon
            )


def test_stored_runs_table_counts_the_files_of_each_grid_and_profile():
    """Counted independently: the places (panel, line, seed) of a grid whose key has a file in any grid's folder."""
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
            root = experiments.results_root(profile)
            places = {
                (spec.panel, spec.series, spec.seed): spec.key for spec in expand(name, profile)
            }
            found = sum(1 for key in places.values() if any(root.glob(f"*/{key}.json")))
            assert table.loc[name, f"stored at {profile}"] == f"{found} of {len(places)}", (
                name,
                profile,
            )


def test_a_grid_with_more_seeds_for_some_methods_loads_what_each_setting_has(tmp_path):
    """The medical grids' paper profile lists 20 seeds; the runs stored so far (some methods at 3 seeds, others at
    1) are read per setting, the rest counted missing, and every line stays covered."""
    from uldp.paper.verdicts import per_setting

    specs = [
        spec
        for spec in expand("heart_disease", "paper")
        if spec.seed < (3 if spec.kwargs["method"] == "ULDP-AVG" else 1)
    ]
    for spec in specs:
        payload = {**_stored_payload(spec), "result": fake_executor.paper_like(spec.kwargs)}
        experiments.write_json_atomic(result_path(tmp_path, spec), payload)
    results = load_results("heart_disease", "paper", root=tmp_path)
    assert len(results.runs) == len({(s.panel, s.series, s.seed) for s in specs})
    assert results.covers_every_line and not results.complete
    table = per_setting(results, "accuracy")
    assert set(table.loc[table["series"] == "ULDP-AVG", "seeds"]) == {3}
    assert set(table.loc[table["series"] == "DEFAULT", "seeds"]) == {1}
