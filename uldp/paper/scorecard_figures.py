"""The Scorecard's claims about the enhanced weighting and user-level sub-sampling (Section 5.2, Figures 8 and 9),
each a function of the stored results that returns a :class:`~uldp.paper.verdicts.Finding`.

The weighting claims read the final test loss (ULDP-AVG minus ULDP-AVG-w: positive when the weighting helps); the
sub-sampling claims read each dataset's judged utility (:func:`uldp.paper.scorecard_utility.judged_metric`: balanced
accuracy on Creditcard, where predicting "normal" always scores 0.909 accuracy).
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from uldp.paper.experiments.keys import UNIFORM_SCHEMES
from uldp.paper.scorecard_utility import (
    MARGIN,
    METRIC_NAMES,
    NOTICEABLE,
    judged,
    judged_metric,
)
from uldp.paper.verdicts import (
    CONTRADICTED,
    Finding,
    NotMeasured,
    counted,
    difference,
    margin_verdict,
    per_setting,
    settings_verdict,
    stored_grid,
)

if TYPE_CHECKING:
    from collections.abc import Mapping

    from uldp.paper.experiments import ResultSet


def weighting_gaps(data: Mapping[str, ResultSet]) -> pd.DataFrame:
    """Final test loss of ULDP-AVG minus that of ULDP-AVG-w (positive: the weighting helps) per dataset, silo count
    and distribution, from the ``weighting`` grid's results.

    Returns:
        Columns ``dataset, n_silos, distribution, gap`` (the mean over seeds), ``se`` and ``difference`` (the
        :class:`~uldp.paper.verdicts.Difference`, paired by seed).

    Raises:
        NotMeasured: The results are missing.
    """
    results = stored_grid(data, "weighting", "no enhanced-weighting results")
    table = per_setting(results, "test_loss")
    if not {"ULDP-AVG", "ULDP-AVG-w"} <= set(table["method"]):
        raise NotMeasured("ULDP-AVG or ULDP-AVG-w missing in the weighting results")
    rows = []
    for (dataset, n_silos, distribution), group in table.groupby(
        ["dataset", "n_silos", "distribution"], sort=True
    ):
        by = group.set_index("method")["values"]
        if {"ULDP-AVG", "ULDP-AVG-w"} <= set(by.index):
            gap = difference(by["ULDP-AVG"], by["ULDP-AVG-w"])
            rows.append(
                {
                    "dataset": dataset,
                    "n_silos": n_silos,
                    "distribution": distribution,
                    "gap": gap.mean,
                    "se": gap.se,
                    "difference": gap,
                }
            )
    return pd.DataFrame(rows)


def weighting_helps(data: Mapping[str, ResultSet]) -> Finding:
    gaps = weighting_gaps(data)
    return judged(
        [
            (
                f"{r.dataset} |S|={r.n_silos} {r.distribution} ({r.difference.seeds} seeds)",
                r.difference,
            )
            for r in gaps.itertuples()
        ],
        0.0,
        "final test loss of ULDP-AVG minus ULDP-AVG-w",
        "ULDP-AVG-w's final test loss below ULDP-AVG's",
    )


def weighting_zipf(data: Mapping[str, ResultSet]) -> Finding:
    gaps = weighting_gaps(data)
    # the authors' uniform draws (uniform-with-replacement, on TcgaBrca) are the figure's uniform panel
    by = {
        (
            r.dataset,
            r.n_silos,
            "uniform" if r.distribution in UNIFORM_SCHEMES else r.distribution,
        ): r.difference
        for r in gaps.itertuples()
    }
    pairs = [(d, s) for d, s, dist in by if dist == "zipf" and (d, s, "uniform") in by]
    if not pairs:
        raise NotMeasured("weighting results lack uniform or zipf")
    return judged(
        [(f"{d} |S|={s}", by[(d, s, "zipf")].minus(by[(d, s, "uniform")])) for d, s in pairs],
        0.0,
        "loss gap (ULDP-AVG minus ULDP-AVG-w) under zipf minus under uniform",
        "the weighting's gain larger under zipf than under uniform",
    )


def weighting_silos(data: Mapping[str, ResultSet]) -> Finding:
    gaps = weighting_gaps(data)
    zipf = gaps[(gaps["dataset"] == "creditcard") & (gaps["distribution"] == "zipf")].sort_values(
        "n_silos"
    )
    if len(zipf) < 2:
        raise NotMeasured(
            "Creditcard zipf weighting results with at least two silo counts are missing"
        )
    steps = list(zipf["difference"])
    silos = list(zipf["n_silos"])
    return judged(
        [
            (f"|S|={low} to {high}", later.minus(earlier))
            for (low, earlier), (high, later) in itertools.pairwise(zip(silos, steps, strict=True))
        ],
        0.0,
        "Creditcard zipf: loss gap (ULDP-AVG minus ULDP-AVG-w) at more silos minus at fewer",
        "the weighting's gain larger with each step up in silos",
    )


def _sampling_tables(data: Mapping[str, ResultSet]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per dataset and q, the judged utility (:func:`judged_metric` of each dataset) and the epsilon."""
    results = stored_grid(data, "user_sampling", "no user-sampling results")
    utility = pd.concat(
        [
            per_setting(
                results.restricted(
                    run for run in results.runs if run["params"]["dataset"] == dataset
                ),
                judged_metric(dataset),
            ).assign(metric=judged_metric(dataset))
            for dataset in dict.fromkeys(run["params"]["dataset"] for run in results.runs)
        ],
        ignore_index=True,
    )
    return utility, per_setting(results, "epsilon")


def sampling_tradeoff(data: Mapping[str, ResultSet]) -> Finding:
    utility, epsilon = _sampling_tables(data)
    parts, verdicts, gaps = [], [], []
    for dataset in dict.fromkeys(utility["dataset"]):
        u = utility[utility["dataset"] == dataset].sort_values("q")
        e = epsilon[epsilon["dataset"] == dataset].sort_values("q")
        cost = difference(u["values"].iloc[-1], u["values"].iloc[0])
        # epsilon comes from accounting alone: no spread over seeds, it grows with q or it does not
        grows = bool(np.all(np.diff(e["mean"].to_numpy()) > 0))
        verdicts.append(CONTRADICTED if not grows else margin_verdict(cost, 0.0))
        gaps.append((f"{dataset} ({cost.seeds} seeds)", cost))
        name = METRIC_NAMES[u["metric"].iloc[0]]
        parts.append(
            f"{dataset}: q={u['q'].iloc[0]:g} -> {name} {u['mean'].iloc[0]:.3f}, epsilon "
            f"{e['mean'].iloc[0]:.2f}; q={u['q'].iloc[-1]:g} -> {u['mean'].iloc[-1]:.3f}, "
            f"{e['mean'].iloc[-1]:.2f} ({name} difference {cost.interval()})"
        )
    return Finding(
        "; ".join(parts)
        + f" (epsilon grows with q and utility at the largest q is above that at the smallest, "
        f"{MARGIN}: {counted(verdicts)})",
        settings_verdict(verdicts),
        gaps=tuple(gaps),
        measure="utility at the largest q minus at the smallest",
    )


def sampling_q07(data: Mapping[str, ResultSet]) -> Finding:
    utility, _ = _sampling_tables(data)
    rows = utility[utility["dataset"] == "creditcard"].set_index("q")["values"]
    if not {0.7, 1.0} <= set(rows.index):
        raise NotMeasured("Creditcard with q = 0.7 and q = 1.0 is missing")
    # "acceptable loss": q = 0.7 above q = 1.0 minus NOTICEABLE
    kept = difference(rows[0.7], rows[1.0])
    name = METRIC_NAMES[judged_metric("creditcard")]
    return Finding(
        f"Creditcard {name} q=0.7 minus q=1.0: {kept.interval()} (held: above -{NOTICEABLE} {MARGIN})",
        margin_verdict(kept, -NOTICEABLE),
        gaps=((f"Creditcard ({kept.seeds} seeds)", kept),),
        threshold=-NOTICEABLE,
        measure=f"{name} at q = 0.7 minus at q = 1",
    )


def sampling_mnist(data: Mapping[str, ResultSet]) -> Finding:
    utility, _ = _sampling_tables(data)
    drops = {}
    for dataset in ("creditcard", "mnist"):
        u = utility[utility["dataset"] == dataset].sort_values("q")
        if len(u) >= 2:  # relative to the utility at the largest q
            drops[dataset] = difference(u["values"].iloc[-1], u["values"].iloc[0]).times(
                1 / u["mean"].iloc[-1]
            )
    if len(drops) < 2:
        raise NotMeasured(
            "user-sampling results for both Creditcard and MNIST are needed; what would measure it: "
            "`uldp grid user_sampling --profile paper --datasets mnist` (ULDP-AVG-w, 10000 users, "
            "T = 200, q = 0.1, 0.3, 0.5, 1.0, 5 seeds) on a GPU machine, committed to "
            "results/user_sampling"
        )
    cheaper = drops["creditcard"].minus(drops["mnist"])
    return Finding(
        f"relative utility loss from the largest to the smallest q: MNIST {drops['mnist'].mean:.1%}, "
        f"Creditcard {drops['creditcard'].mean:.1%} (Creditcard minus MNIST {cheaper.interval()}; held: "
        f"above zero {MARGIN})",
        margin_verdict(cheaper, 0.0),
        gaps=(("Creditcard minus MNIST", cheaper),),
        measure="relative utility loss, Creditcard minus MNIST",
    )
