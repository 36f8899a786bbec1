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


def test_paper_scale_runs_stored_in_part_are_reported_with_their_device_and_the_lines_not_run():
    """MNIST's Figure 9 endpoint stored before the other rates: the user-sampling and MNIST boxes give its final
    accuracy and epsilon (read here from the run itself), its device, and the rates not yet run; no verdict reads
    it, and without it the MNIST box says no paper-scale MNIST training ran."""
    from uldp.paper.scorecard import in_part

    data = _world("user_sampling", seeds=(0,))
    runs = data["user_sampling"].runs
    mnist = [spec for spec in expand("user_sampling", "paper", seeds=[0]) if spec.panel == "mnist"]
    endpoint = next(run for run in runs if run["panel"] == "mnist")
    stored = dict(
        endpoint,
        key="k",
        config={"device": "cpu", "precision": "float32"},
        provenance={"wall_seconds": 7200.0},
    )
    data = {
        "user_sampling": data["user_sampling"].restricted(
            run for run in runs if run["panel"] != "mnist"
        ),
        in_part("user_sampling"): ResultSet(
            "user_sampling", "paper", (stored,), tuple(mnist[1:]), "memory"
        ),
        **_world("mnist", seeds=(0,)),
    }
    accuracy, epsilon = endpoint["result"]["accuracy"][-1], endpoint["result"]["epsilon"][-1]
    sentence = (
        f"At the paper's scale, Figure 9 is stored on mnist in part, ULDP-AVG-w at {endpoint['series']} "
        f"(1 seed, {endpoint['params']['rounds']} rounds, trained on cpu in float32, 2.0 h): a final accuracy of "
        f"{accuracy:.3f} at a user-level $\\epsilon$ of {epsilon:.2f}; not yet run: "
        + ", ".join(spec.series for spec in mnist[1:])
        + "."
    )
    assert sentence in findings.findings_box("user_sampling", data)
    without = findings.findings_box("user_sampling", {"user_sampling": data["user_sampling"]})
    assert findings.findings_box("user_sampling", data).replace(sentence + " ", "") == without
    data["mnist-accounting"] = data.pop("mnist")
    assert "Figure 5's paper-scale MNIST training has not run here" in findings.findings_box(
        "mnist", data
    )
    assert sentence in findings.findings_box("mnist", data)
    del data[in_part("user_sampling")]
    assert "No paper-scale MNIST training has run here" in findings.findings_box("mnist", data)
