"""uldp.paper.overview: the opening page's table judges each claim on each dataset alone, and "what to use" says
what is not measured."""

from __future__ import annotations

import fake_executor

from uldp.paper import overview
from uldp.paper.experiments import ResultSet, expand
from uldp.paper.scorecard import CLAIMS
from uldp.paper.verdicts import badge


def _world(grid: str, swap=None) -> dict[str, ResultSet]:
    runs = tuple(
        {
            "panel": spec.panel,
            "series": spec.series,
            "seed": spec.seed,
            "params": spec.kwargs,
            "result": fake_executor.paper_like(spec.kwargs, swap=swap),
            "provenance": {},
        }
        for spec in expand(grid, "paper", seeds=[0, 1])
    )
    return {grid: ResultSet(grid, "paper", runs, (), "memory")}


def _row(table: str, claim_text: str) -> list[str]:
    line = next(line for line in table.splitlines() if line.startswith(f"| {claim_text} |"))
    return [cell.strip() for cell in line.strip("|").split("|")]


def test_each_claim_is_judged_on_each_dataset_alone():
    data = _world("heart_disease") | _world("tcga_brca", swap=("ULDP-AVG", "ULDP-SGD"))
    table = overview.claims_table(data)
    assert len(table.splitlines()) == 2 + len(CLAIMS)
    avg_vs_sgd = next(claim for claim in CLAIMS if claim.key == "avg-vs-sgd")
    cells = dict(
        zip(
            ["claim", "figure", *(name for name, _ in overview.COLUMNS)],
            _row(table, avg_vs_sgd.text),
            strict=True,
        )
    )
    assert cells["HeartDisease"].startswith(badge("holds") + " +")
    assert cells["TcgaBrca"].startswith(badge("contradicted") + " -")
    assert cells["Creditcard"] == badge("not measured")
    assert cells["Figures 8-11"] == overview.NOT_APPLICABLE
    small_n = next(claim for claim in CLAIMS if claim.key == "group-small-n")
    assert _row(table, small_n.text)[3:] == [overview.NOT_APPLICABLE] * 4


def test_practice_says_what_it_cannot_measure():
    text = overview.practice({})
    assert "**Method**: not measured (no privacy-utility results are stored)." in text
    assert "**User sampling**: not measured (no user-sampling results)." in text


def test_the_seeds_note_counts_the_seeds_stored_per_method_and_flags_the_tailed_metric():
    """Counted from the runs themselves: a grid that gains seeds for some methods (the GROUP-k re-runs) shows it,
    and a setting short of a seed shows as a range."""
    heart = _world("heart_disease")["heart_disease"]
    tcga = _world("tcga_brca")["tcga_brca"]
    # drop seed 1 of ULDP-GROUP-2 in one TcgaBrca setting: 1 to 2 seeds for it
    first = tcga.runs[0]["panel"]
    dropped = tcga.restricted(
        run
        for run in tcga.runs
        if not (run["series"] == "ULDP-GROUP-2" and run["panel"] == first and run["seed"] == 1)
    )
    note = overview.seeds_note({"heart_disease": heart, "tcga_brca": dropped})
    assert "HeartDisease: 2 for DEFAULT, ULDP-NAIVE, ULDP-GROUP-max," in note
    assert "TcgaBrca: 2 for DEFAULT" in note and "; 1 to 2 for ULDP-GROUP-2." in note
    assert "The final utility of TcgaBrca has a low tail" in note and "HeartDisease has" not in note
    assert overview.seeds_note({}) == "Seeds: none stored."
    stand_in = ResultSet("tcga_brca", "smoke", tcga.runs, (), "memory")
    assert overview.seeds_note({"tcga_brca": stand_in}) == "Seeds: none stored."
