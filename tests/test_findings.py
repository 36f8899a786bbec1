"""uldp.paper.findings: each chapter's findings box says the numbers of the results it is given, and its conclusions
carry each claim's verdict."""

from __future__ import annotations

import fake_executor
import numpy as np
import pytest

from uldp.paper import findings
from uldp.paper.experiments import ResultSet, expand
from uldp.paper.verdicts import badge, per_setting


def _world(grid: str, seeds=(0, 1)) -> dict[str, ResultSet]:
    runs = tuple(
        {
            "panel": spec.panel,
            "series": spec.series,
            "seed": spec.seed,
            "params": spec.kwargs,
            "result": fake_executor.paper_like(spec.kwargs),
            "provenance": {},
        }
        for spec in expand(grid, "paper", seeds=list(seeds))
    )
    return {grid: ResultSet(grid, "paper", runs, (), "memory")}


def test_the_privacy_utility_box_gives_the_final_values_and_the_verdicts():
    data = _world("heart_disease")
    box = findings.findings_box("heart_disease", data)
    assert box.startswith(":::{admonition} Findings") and box.endswith(":::")
    table = per_setting(data["heart_disease"], "accuracy")
    default = table[table["series"] == "DEFAULT"]["mean"]
    avg_w = table[table["series"] == "ULDP-AVG-w"]["mean"]
    naive = np.concatenate(
        [list(v.values()) for v in table[table["series"] == "ULDP-NAIVE"]["values"]]
    )
    assert f"against {default.min():.3f} for DEFAULT" in box  # the same in every setting
    # the fake world's ULDP-AVG-w ends at one value in every setting: said once, not as a range
    assert round(avg_w.min(), 3) == round(avg_w.max(), 3)
    assert f"final accuracy of {avg_w.min():.3f} with" in box
    assert f"mean final accuracy of {naive.mean():.3f}" in box
    assert "2 seeds each for ULDP-AVG-w" in box
    # the fake world satisfies every claim of the figure
    assert (
        "Of the paper's 9 claims that read this figure, judged on its results alone, 9 hold." in box
    )


def test_a_tailed_metric_gets_its_medians_quartiles_and_lowest_run():
    data = _world("tcga_brca", seeds=(0, 1, 2, 3))
    box = findings.findings_box("tcga_brca", data)
    table = per_setting(data["tcga_brca"], "c_index")

    def runs(series: str) -> np.ndarray:
        return np.concatenate(
            [list(v.values()) for v in table[table["series"] == series]["values"]]
        )

    avg, naive = runs("ULDP-AVG"), runs("ULDP-NAIVE")
    q1, median, q3 = np.quantile(avg, [0.25, 0.5, 0.75])
    assert (
        f"its median {median:.3f}, interquartile range {q1:.3f} to {q3:.3f} and its lowest run "
        f"{avg.min():.3f}" in box
    )
    q1, median, q3 = np.quantile(naive, [0.25, 0.5, 0.75])
    assert f"over its {len(naive)} runs (4 seeds per setting;" in box
    assert f"median {median:.3f}, interquartile range {q1:.3f} to {q3:.3f})." in box
    # ULDP-AVG-w and DEFAULT by their medians over seeds, not their means
    medians = table[table["series"] == "ULDP-AVG-w"]["median"]
    assert f"C-index of {medians.min():.3f}" in box and "(medians over seeds)" in box
    # the accuracy of HeartDisease has no tail: no quartiles there
    assert "interquartile" not in findings.findings_box("heart_disease", _world("heart_disease"))


def test_conclusions_give_each_claim_its_badge_and_missing_results_say_so():
    data = _world("heart_disease")
    text = findings.conclusions("heart_disease", data)
    assert text.count(badge("holds")) == 9 and "contradicted" not in text
    swapped = {
        "heart_disease": ResultSet(
            "heart_disease",
            "paper",
            tuple(
                {
                    **run,
                    "result": fake_executor.paper_like(
                        run["params"], swap=("ULDP-AVG", "ULDP-SGD")
                    ),
                }
                for run in data["heart_disease"].runs
            ),
            (),
            "memory",
        )
    }
    assert badge(
        "contradicted"
    ) + " ULDP-AVG converges faster than ULDP-SGD." in findings.conclusions(
        "heart_disease", swapped
    )
    assert "Not measured: no stored results for heart_disease." in findings.findings_box(
        "heart_disease", {}
    )
    with pytest.raises(ValueError, match="no findings for grid 'protocol_runtime'"):
        findings.findings_box("protocol_runtime", data)
