"""Results read back (uldp.paper.experiments.results), with a fast fake executor.

A ``ResultSet``'s source, ``load_results``' frame and description, the runs of an accountant and budget and of a grid
with more seeds for some methods, and ``accounted_results``: epsilons from accounting alone, against the trained
paper runs and re-accounted by PLD.
"""

from __future__ import annotations

import os
from typing import Any

import fake_executor
import pytest
from experiments_helpers import DATA, _stored_payload, needs_data

from uldp.paper import experiments
from uldp.paper.experiments import expand, load_results, result_path, run_grid


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


def _two_runs() -> experiments.ResultSet:
    runs = tuple(
        {
            "panel": "P",
            "series": series,
            "seed": 0,
            "params": {"method": series},
            "result": {"accuracy": [0.5, value], "info": {"kept": [1]}},
        }
        for series, value in (("A", 0.7), ("B", 0.8))
    )
    return experiments.ResultSet("g", "paper", runs, (), None)


def test_the_frame_is_built_once_and_again_when_a_run_changes_in_place():
    """The frame is cached by content (``content_key``): a copy comes out each time, and a run changed in place
    (as the scorecard's tests change a world) gives the new values, the table of ``per_setting`` too."""
    from uldp.paper.verdicts import per_setting

    results = _two_runs()
    first = results.frame()
    first.loc[:, "accuracy"] = 0.0  # the caller's copy
    assert results.frame()["accuracy"].tolist() == [0.5, 0.7, 0.5, 0.8]
    assert per_setting(results, "accuracy")["mean"].tolist() == [0.7, 0.8]
    results.runs[1]["result"]["accuracy"][1] = 0.9  # in place, the list kept
    assert results.frame()["accuracy"].tolist() == [0.5, 0.7, 0.5, 0.9]
    assert per_setting(results, "accuracy")["mean"].tolist() == [0.7, 0.9]
    results.runs[0]["params"]["method"] = "C"
    assert results.frame()["method"].tolist() == ["C", "C", "B", "B"]


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


def test_load_results_reads_the_runs_of_an_accountant_and_budget(tmp_path):
    loaded = load_results("heart_disease", "smoke", root=tmp_path, accountant="pld", epsilon=2.0)
    assert not loaded.runs
    assert [spec.key for spec in loaded.missing] == [
        spec.key for spec in expand("heart_disease", "smoke", accountant="pld", epsilon=2.0)
    ]


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
