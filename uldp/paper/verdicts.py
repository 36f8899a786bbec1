"""Verdicts of the Scorecard (:mod:`uldp.paper.scorecard`): what a claim check returns, the shared rules, and the
per-setting summary of stored results the checks read.

A claim made over several settings holds when it holds in every one, partly when in at least half, and does not
hold otherwise; ``not measured`` when the results it needs are missing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping

    import pandas as pd

    from uldp.paper.experiments import ResultSet

HOLDS, PARTLY, FAILS, MISSING = "holds", "partly", "does not hold", "not measured"
#: The start of the dataset variant of a Creditcard run on the shipped 5,412-row subset (provenance
#: ``dataset_variant``); results stored before that field existed all ran on it.
CREDITCARD_SUBSET = "creditcard-subset"


class NotMeasured(Exception):
    """The results a claim needs are not stored (the message says which)."""


@dataclass(frozen=True)
class Finding:
    """What a claim function found: a sentence with our numbers, and the verdict."""

    measured: str
    verdict: str


def stored_grid(data: Mapping[str, ResultSet], grid: str, missing: str) -> ResultSet:
    """The stored results of ``grid``, or :class:`NotMeasured` saying ``missing`` when there are none."""
    results = data.get(grid)
    if results is None or not results.runs:
        raise NotMeasured(missing)
    return results


def per_setting(results: ResultSet, metric: str, how: str = "final") -> pd.DataFrame:
    """One row per panel and series: the mean and std over seeds of a per-round metric.

    Args:
        results: Stored results of one grid.
        metric: A per-round column (``"accuracy"``, ``"epsilon"``, ...).
        how: ``"final"`` (value at the last round) or ``"auc"`` (mean over rounds).

    Returns:
        Columns ``panel, series, mean, std, seeds`` and the run arguments (``dataset, method, n_users, ...``).

    Raises:
        NotMeasured: No stored runs, or the metric is absent.
        ValueError: Unknown ``how``.
    """
    if how not in ("final", "auc"):
        raise ValueError(f"how must be 'final' or 'auc', got {how!r}")
    if not results.runs:
        raise NotMeasured(f"no stored results for grid {results.grid!r}")
    frame = results.frame()
    if metric not in frame:
        raise NotMeasured(f"grid {results.grid!r} has no {metric!r} values")
    frame = frame.dropna(subset=[metric]).sort_values("round", kind="stable")  # panels and series keep grid order
    keys = ["panel", "series"]
    per_run = frame.groupby([*keys, "seed"], sort=False).agg(
        value=(metric, "last" if how == "final" else "mean"),
        **{name: (name, "first") for name in frame.columns if name not in [*keys, "seed", "round", metric]
           and name in results.runs[0]["params"]},
    ).reset_index()
    params = [name for name in per_run.columns if name not in [*keys, "seed", "value"]]
    table = per_run.groupby(keys, sort=False).agg(mean=("value", "mean"), std=("value", "std"),
                                                  seeds=("value", "count"),
                                                  **{name: (name, "first") for name in params}).reset_index()
    table["std"] = table["std"].fillna(0.0)
    return table


def value(table: pd.DataFrame, panel: str, series: str) -> float | None:
    """The mean of ``series`` in ``panel`` of a :func:`per_setting` table (``None`` when absent)."""
    row = table[(table["panel"] == panel) & (table["series"] == series)]
    return None if row.empty else float(row["mean"].iloc[0])


def fraction_verdict(hits: int, total: int) -> str:
    """The verdict of a claim that held in ``hits`` of ``total`` settings (:class:`NotMeasured` when none).

    >>> fraction_verdict(3, 3), fraction_verdict(2, 4), fraction_verdict(1, 3)
    ('holds', 'partly', 'does not hold')
    """
    if total == 0:
        raise NotMeasured("no setting has the methods this claim compares")
    return HOLDS if hits == total else PARTLY if 2 * hits >= total else FAILS


def profile_label(results: ResultSet) -> str:
    """The scale of ``results`` in words: the profile, or "paper settings on the Creditcard subset" where Creditcard
    runs among them ran on the 5,412-row subset instead of the paper's file (said of the Creditcard panels only when
    the grid has others).

    >>> from uldp.paper.experiments import ResultSet
    >>> runs = ({"params": {"dataset": "creditcard"}, "provenance": {}},)
    >>> profile_label(ResultSet("creditcard", "paper", runs, (), "memory"))
    'paper settings on the Creditcard subset'
    >>> profile_label(ResultSet("tcga_brca", "paper", ({"params": {"dataset": "tcga_brca"}},), (), "memory"))
    'paper'
    """
    creditcard = [run for run in results.runs if run["params"].get("dataset") == "creditcard"]
    if not any(run.get("provenance", {}).get("dataset_variant", CREDITCARD_SUBSET).startswith(CREDITCARD_SUBSET)
               for run in creditcard):
        return results.profile
    label = f"{results.profile} settings on the Creditcard subset"
    return label if len(creditcard) == len(results.runs) else f"{results.profile} (Creditcard panels: {label})"


_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")
#: The multiplication sign of a power of ten in :func:`readable_number`.
TIMES = "\u00d7"


def readable_number(value: float | None, *, missing: str = "-") -> str:
    """``value`` as a table shows it to a reader: three significant digits, a power of ten written out (no
    ``e+11``), "unbounded" for infinity and ``missing`` for None or NaN.

    >>> [readable_number(v).replace(TIMES, " x ")
    ...  for v in (3.2109, 1.62e10, 1.15e-9, float("inf"), float("nan"), None, 2950.4)]
    ['3.21', '1.62 x 10¹⁰', '1.15 x 10⁻⁹', 'unbounded', '-', '-', '2,950']
    """
    if value is None or value != value:
        return missing
    if abs(value) == float("inf"):
        return "unbounded" if value > 0 else "-unbounded"
    if value != 0 and (abs(value) >= 1e5 or abs(value) < 1e-3):
        mantissa, exponent = f"{value:.2e}".split("e")
        return f"{mantissa}{TIMES}10{str(int(exponent)).translate(_SUPERSCRIPT)}"
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}"
