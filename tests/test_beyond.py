"""uldp.beyond: the utility that PLD's smaller sigma buys at equal epsilon, read from stored runs."""

from __future__ import annotations

import json

import fake_backend
import pytest

from uldp.beyond import pld_claim, pld_equal_epsilon
from uldp.experiments import REPO_ROOT, expand, result_path, run_grid
from uldp.verdicts import FAILS, HOLDS, MISSING, NotMeasured

TARGET = 7.0


def _store(root, **privacy):
    run_grid("heart_disease", "paper", seeds=[0, 1], methods=["ULDP-AVG-w"], root=root, backend=fake_backend.FAKE,
             progress=False, **privacy)


def test_without_pld_runs_the_claim_is_not_measured_and_says_how_to_run_them(tmp_path):
    _store(tmp_path)
    with pytest.raises(NotMeasured, match=r"--accountant pld --target-epsilon 7\.0"):
        pld_equal_epsilon("heart_disease", target_epsilon=TARGET, root=str(tmp_path))
    assert pld_claim((("heart_disease", TARGET),), root=str(tmp_path))["verdict"] == MISSING


def test_gain_is_the_pld_runs_final_utility_minus_the_paper_runs(tmp_path):
    _store(tmp_path)
    _store(tmp_path, accountant="pld", target_epsilon=TARGET)
    table = pld_equal_epsilon("heart_disease", target_epsilon=TARGET, root=str(tmp_path))
    assert len(table) == 4 and (table["gain"] == 0).all()  # the fake curves do not depend on sigma
    assert pld_claim((("heart_disease", TARGET),), root=str(tmp_path))["verdict"] == FAILS
    # raise every PLD run's final accuracy by 0.01: a gain of exactly that in every setting
    for spec in expand("heart_disease", "paper", seeds=[0, 1], accountant="pld", target_epsilon=TARGET):
        path = result_path(tmp_path, spec)
        if spec.kwargs["method"] == "ULDP-AVG-w" and path.exists():
            stored = json.loads(path.read_text())
            stored["result"]["accuracy"][-1] += 0.01
            path.write_text(json.dumps(stored))
    raised = pld_equal_epsilon("heart_disease", target_epsilon=TARGET, root=str(tmp_path))
    assert raised["gain"].to_numpy() == pytest.approx([0.01] * 4)
    claim = pld_claim((("heart_disease", TARGET),), root=str(tmp_path))
    assert claim["verdict"] == HOLDS and "gain > 0 in 4 of 4 settings" in claim["measured"]


@pytest.mark.skipif(not (REPO_ROOT / "results" / "heart_disease").is_dir(), reason="no committed results")
def test_committed_pld_runs_used_the_sigma_pld_needs_for_the_papers_epsilon():
    """The stored PLD runs' calibrated sigma is the accountant's answer, and both accountants give the target."""
    from uldp.accounting import epsilon_for_method, sigma_for_epsilon

    try:
        table = pld_equal_epsilon("heart_disease", target_epsilon=7.0773)
    except NotMeasured:
        pytest.skip("no committed PLD runs")
    expected = sigma_for_epsilon("ULDP-AVG-w", epsilon=7.0773, rounds=50, delta=1e-5, accountant="pld")
    assert table["sigma_pld"].to_numpy() == pytest.approx([expected] * len(table), rel=1e-4)
    assert (table["sigma_rdp"] == 5.0).all()
    rdp = epsilon_for_method("ULDP-AVG-w", sigma=5.0, rounds=50, delta=1e-5).epsilon
    assert table["epsilon_rdp"].to_numpy() == pytest.approx([rdp] * len(table))
    assert (table["epsilon_pld"] <= 7.0773 + 1e-9).all() and (table["epsilon_pld"] > 7.0).all()


def test_the_paper_runs_are_compared_on_the_seeds_the_pld_runs_have(tmp_path):
    _store(tmp_path)  # seeds 0 and 1
    run_grid("heart_disease", "paper", seeds=[0], methods=["ULDP-AVG-w"], root=tmp_path, backend=fake_backend.FAKE,
             progress=False, accountant="pld", target_epsilon=TARGET)
    for spec in expand("heart_disease", "paper", seeds=[1]):  # a paper run the PLD grid has not reached
        path = result_path(tmp_path, spec)
        if spec.kwargs["method"] == "ULDP-AVG-w" and path.exists():
            stored = json.loads(path.read_text())
            stored["result"]["accuracy"][-1] = 0.0
            path.write_text(json.dumps(stored))
    table = pld_equal_epsilon("heart_disease", target_epsilon=TARGET, root=str(tmp_path))
    assert (table["gain"] == 0).all() and (table["seeds_rdp"] == 1).all()
