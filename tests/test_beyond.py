"""uldp.paper.beyond: the utility that PLD's smaller sigma buys at equal epsilon, read from stored runs."""

from __future__ import annotations

import json
import os

import fake_executor
import pytest

from uldp.accounting import epsilon_naive, epsilon_uldp
from uldp.defaults import DELTA, SIGMA
from uldp.paper.beyond import group_epsilons, pld_claim, pld_equal_epsilon, user_level_epsilons
from uldp.paper.experiments import REPO_ROOT, accounted_results, expand, result_path, run_grid
from uldp.paper.settings import PRIVACY_UTILITY, PROTOCOL_RUNTIME, USER_SAMPLING
from uldp.paper.verdicts import HOLDS, MISSING, NOT_SHOWN, NotMeasured

TARGET = 7.0


def _store(root, **privacy):
    run_grid(
        "heart_disease",
        "paper",
        seeds=[0, 1],
        methods=["ULDP-AVG-w"],
        root=root,
        executor=fake_executor.FAKE,
        progress=False,
        **privacy,
    )


def test_without_pld_runs_the_claim_is_not_measured_and_says_how_to_run_them(tmp_path):
    _store(tmp_path)
    with pytest.raises(NotMeasured, match=r"--accountant pld --epsilon 7\.0"):
        pld_equal_epsilon("heart_disease", epsilon=TARGET, root=str(tmp_path))
    assert pld_claim((("heart_disease", TARGET),), root=str(tmp_path))["verdict"] == MISSING


def test_gain_is_the_pld_runs_final_utility_minus_the_paper_runs(tmp_path):
    _store(tmp_path)
    _store(tmp_path, accountant="pld", epsilon=TARGET)
    table = pld_equal_epsilon("heart_disease", epsilon=TARGET, root=str(tmp_path))
    assert len(table) == 4 and (table["gain"] == 0).all()  # the fake curves do not depend on sigma
    assert pld_claim((("heart_disease", TARGET),), root=str(tmp_path))["verdict"] == NOT_SHOWN
    # raise every PLD run's final accuracy by 0.01: a gain of exactly that in every setting
    for spec in expand("heart_disease", "paper", seeds=[0, 1], accountant="pld", epsilon=TARGET):
        path = result_path(tmp_path, spec)
        if spec.kwargs["method"] == "ULDP-AVG-w" and path.exists():
            stored = json.loads(path.read_text())
            stored["result"]["accuracy"][-1] += 0.01
            path.write_text(json.dumps(stored))
    raised = pld_equal_epsilon("heart_disease", epsilon=TARGET, root=str(tmp_path))
    assert raised["gain"].to_numpy() == pytest.approx([0.01] * 4)
    claim = pld_claim((("heart_disease", TARGET),), root=str(tmp_path))
    assert claim["verdict"] == HOLDS and "holds in 4 of 4 settings" in claim["measured"]


@pytest.mark.skipif(
    not (REPO_ROOT / "results" / "heart_disease").is_dir(), reason="no committed results"
)
def test_committed_pld_runs_used_the_sigma_pld_needs_for_the_papers_epsilon():
    """The stored PLD runs' calibrated sigma is the accountant's answer, and both accountants give the target."""
    from uldp.accounting import epsilon_for_method, sigma_for_epsilon

    try:
        table = pld_equal_epsilon("heart_disease", epsilon=7.0773)
    except NotMeasured:
        pytest.skip("no committed PLD runs")
    expected = sigma_for_epsilon(
        "ULDP-AVG-w", epsilon=7.0773, rounds=50, delta=1e-5, accountant="pld"
    )
    assert table["sigma_pld"].to_numpy() == pytest.approx([expected] * len(table), rel=1e-4)
    assert (table["sigma_rdp"] == 5.0).all()
    rdp = epsilon_for_method("ULDP-AVG-w", sigma=5.0, rounds=50, delta=1e-5).epsilon
    assert table["epsilon_rdp"].to_numpy() == pytest.approx([rdp] * len(table))
    assert (table["epsilon_pld"] <= 7.0773 + 1e-9).all() and (table["epsilon_pld"] > 7.0).all()


def test_the_paper_runs_are_compared_on_the_seeds_the_pld_runs_have(tmp_path):
    _store(tmp_path)  # seeds 0 and 1
    run_grid(
        "heart_disease",
        "paper",
        seeds=[0],
        methods=["ULDP-AVG-w"],
        root=tmp_path,
        executor=fake_executor.FAKE,
        progress=False,
        accountant="pld",
        epsilon=TARGET,
    )
    for spec in expand(
        "heart_disease", "paper", seeds=[1]
    ):  # a paper run the PLD grid has not reached
        path = result_path(tmp_path, spec)
        if spec.kwargs["method"] == "ULDP-AVG-w" and path.exists():
            stored = json.loads(path.read_text())
            stored["result"]["accuracy"][-1] = 0.0
            path.write_text(json.dumps(stored))
    table = pld_equal_epsilon("heart_disease", epsilon=TARGET, root=str(tmp_path))
    assert (table["gain"] == 0).all() and (table["seeds_rdp"] == 1).all()


def test_user_level_epsilons_cover_every_user_level_setting_of_the_paper_by_both_accountants():
    """The settings are those of the paper's figures (ULDP-NAIVE at each dataset's T; ULDP-SGD/AVG at each T, each
    user-sampling q and the protocol runtime's T = 3), and each RDP epsilon is the theorem's (epsilon_naive,
    epsilon_uldp), PLD's smaller."""
    table = user_level_epsilons()
    rounds = {settings.rounds for settings in PRIVACY_UTILITY.values()}
    expected = {("ULDP-NAIVE", t, 1.0) for t in rounds} | {("ULDP-SGD/AVG", t, 1.0) for t in rounds}
    expected |= {
        ("ULDP-SGD/AVG", row.rounds, q) for row in USER_SAMPLING + PROTOCOL_RUNTIME for q in row.q
    }
    assert set(zip(table["methods"], table["T"], table["q"], strict=True)) == expected
    assert len(table) == len(expected) and set(table["sigma"]) == {SIGMA}
    for row in table.itertuples():
        theorem = (
            epsilon_naive(sigma=SIGMA, rounds=row.T, delta=DELTA)
            if row.methods == "ULDP-NAIVE"
            else epsilon_uldp(sigma=SIGMA, rounds=row.T, delta=DELTA, q=row.q)
        )
        assert row._6 == pytest.approx(theorem.epsilon)  # the column "epsilon RDP"
    assert (table["epsilon PLD"] < table["epsilon RDP"]).all()
    assert table["PLD / RDP"].tolist() == pytest.approx(
        (table["epsilon PLD"] / table["epsilon RDP"]).tolist()
    )


@pytest.mark.skipif(
    not (REPO_ROOT.parent / "shared" / "data" / "heart_disease").exists()
    and not os.environ.get("ULDP_DATA_DIR"),
    reason="no dataset files (set ULDP_DATA_DIR)",
)
def test_group_epsilons_are_the_accounted_runs_by_rdp_and_the_smaller_mixture_by_pld():
    table = group_epsilons({"heart_disease": ("ULDP-GROUP-8",)})
    rdp = accounted_results("heart_disease", methods=("ULDP-GROUP-8",))
    assert list(zip(table["setting"], table["epsilon RDP"], strict=True)) == [
        (run["panel"], run["result"]["epsilon"][0]) for run in rdp.runs
    ]
    assert set(table["method"]) == {"ULDP-GROUP-8"} and set(table["dataset"]) == {"heart_disease"}
    assert (table["epsilon PLD (mixture)"] < table["epsilon RDP"]).all()
