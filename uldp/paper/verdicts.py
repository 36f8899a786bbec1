"""Verdicts of the Scorecard (:mod:`uldp.paper.scorecard`): what a claim check returns, the shared rules, and the
per-setting summary of stored results the checks read.

A claim made over several settings holds when it holds in every one, partly when in at least half, and does not
hold otherwise; ``not measured`` when the results it needs are missing.

Every comparison accounts for the spread over seeds (:class:`Difference`): a difference holds in a setting only
when its mean minus :data:`SE_MULTIPLE` standard errors clears the threshold (paired by seed where both sides ran
the same seeds, as the runs of one seed share their allocation and initial model; Welch's standard error
otherwise). A single comparison whose mean clears the threshold but not by that margin is ``partly`` (within the
spread over seeds; :func:`margin_verdict`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from collections.abc import Mapping

    import pandas as pd

    from uldp.paper.experiments import ResultSet

HOLDS, PARTLY, FAILS, MISSING = "holds", "partly", "does not hold", "not measured"
#: A difference counts only when its mean clears the threshold by this many standard errors over seeds (a one-sided
#: bound of about 97.7 % for normal errors).
SE_MULTIPLE = 2.0
#: The start of the dataset variant of a Creditcard run on the shipped 5,412-row subset (provenance
#: ``dataset_variant``); results stored before that field existed all ran on it.
CREDITCARD_SUBSET = "creditcard-subset"


class NotMeasured(Exception):
    """The results a claim needs are not stored (the message says which)."""


@dataclass(frozen=True)
class Finding:
    """What a claim function found: a sentence with our numbers, the verdict, and where the numbers come from when
    that is not the claim's grids (``None``: the grids' results)."""

    measured: str
    verdict: str
    source: str | None = None


@dataclass(frozen=True)
class Difference:
    """A difference between two measured quantities over seeds (``a - b``), with its standard error.

    Attributes:
        mean: The mean difference.
        se: Its standard error (NaN with fewer than two seeds on a side: no spread is known).
        seeds: Seeds behind it (pairs when ``paired``, else the smaller side).
        paired: Paired by seed (the standard deviation of the per-seed differences over the square root of their
            count) or Welch's ``sqrt(s_a^2 / n_a + s_b^2 / n_b)``.
    """

    mean: float
    se: float
    seeds: int
    paired: bool

    @property
    def lower(self) -> float:
        """``mean - SE_MULTIPLE * se`` (the mean itself where no spread is known)."""
        return self.mean - SE_MULTIPLE * self.se if math.isfinite(self.se) else self.mean

    def clears(self, threshold: float) -> bool:
        """The difference exceeds ``threshold`` by more than :data:`SE_MULTIPLE` standard errors.

        >>> Difference(0.05, 0.01, 5, True).clears(0.02), Difference(0.03, 0.01, 5, True).clears(0.02)
        (True, False)
        """
        return self.lower > threshold

    def minus(self, other: Difference, scale: float = 1.0) -> Difference:
        """``self - scale * other`` for differences measured on separate settings (independent errors)."""
        return Difference(
            self.mean - scale * other.mean,
            math.hypot(self.se, scale * other.se),
            min(self.seeds, other.seeds),
            False,
        )

    def times(self, factor: float) -> Difference:
        """``factor`` times the difference (mean and standard error)."""
        return Difference(factor * self.mean, abs(factor) * self.se, self.seeds, self.paired)

    def text(self, digits: int = 3) -> str:
        """``"+0.012 ± 0.004 SE"`` (``"+0.012, one seed"`` without spread).

        >>> Difference(0.0123, 0.0042, 5, True).text()
        '+0.012 ± 0.004 SE'
        """
        if not math.isfinite(self.se):
            return f"{self.mean:+.{digits}f}, one seed"
        return f"{self.mean:+.{digits}f} ± {self.se:.{digits}f} SE"


def difference(a: Mapping[int, float], b: Mapping[int, float]) -> Difference:
    """``a - b`` from per-seed values (``{seed: value}``): paired when both ran the same seeds, else Welch.

    Raises:
        ValueError: A side has no value.

    >>> d = difference({0: 0.80, 1: 0.82, 2: 0.84}, {0: 0.70, 1: 0.73, 2: 0.73})
    >>> round(d.mean, 3), round(d.se, 4), d.paired
    (0.1, 0.0058, True)
    """
    if not a or not b:
        raise ValueError(f"a difference needs values on both sides, got {len(a)} and {len(b)}")
    if set(a) == set(b):
        gaps = np.array([a[seed] - b[seed] for seed in a])
        se = float(gaps.std(ddof=1) / math.sqrt(len(gaps))) if len(gaps) > 1 else math.nan
        return Difference(float(gaps.mean()), se, len(gaps), True)
    va, vb = np.array(list(a.values())), np.array(list(b.values()))
    se = (
        math.sqrt(va.var(ddof=1) / len(va) + vb.var(ddof=1) / len(vb))
        if min(len(va), len(vb)) > 1
        else math.nan
    )
    return Difference(float(va.mean() - vb.mean()), se, min(len(va), len(vb)), False)


def estimate(per_seed: Mapping[int, float]) -> Difference:
    """One quantity measured per seed, as a :class:`Difference` from zero (its mean and standard error).

    >>> estimate({0: 2.0, 1: 4.0}).text(1)
    '+3.0 ± 1.0 SE'
    """
    return difference(per_seed, dict.fromkeys(per_seed, 0.0))


def margin_verdict(diff: Difference, threshold: float) -> str:
    """One comparison's verdict: holds when it clears ``threshold`` by :data:`SE_MULTIPLE` standard errors, partly
    when only its mean does (within the spread over seeds), does not hold otherwise.

    >>> [margin_verdict(Difference(m, 0.01, 5, True), 0.0) for m in (0.05, 0.01, -0.01)]
    ['holds', 'partly', 'does not hold']
    """
    return HOLDS if diff.clears(threshold) else PARTLY if diff.mean > threshold else FAILS


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
        Columns ``panel, series, mean, std, seeds``, ``values`` (``{seed: value}``, for :func:`difference`) and
        the run arguments (``dataset, method, n_users, ...``).

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
    frame = frame.dropna(subset=[metric]).sort_values(
        "round", kind="stable"
    )  # panels and series keep grid order
    keys = ["panel", "series"]
    per_run = (
        frame.groupby([*keys, "seed"], sort=False)
        .agg(
            value=(metric, "last" if how == "final" else "mean"),
            **{
                name: (name, "first")
                for name in frame.columns
                if name not in [*keys, "seed", "round", metric]
                and name in results.runs[0]["params"]
            },
        )
        .reset_index()
    )
    params = [name for name in per_run.columns if name not in [*keys, "seed", "value"]]
    table = (
        per_run.groupby(keys, sort=False)
        .agg(
            mean=("value", "mean"),
            std=("value", "std"),
            seeds=("value", "count"),
            **{name: (name, "first") for name in params},
        )
        .reset_index()
    )
    table["std"] = table["std"].fillna(0.0)
    by_seed = {
        key: dict(zip(rows["seed"], rows["value"], strict=True))
        for key, rows in per_run.groupby(keys, sort=False)
    }
    table["values"] = [by_seed[(row.panel, row.series)] for row in table.itertuples()]
    return table


def value(table: pd.DataFrame, panel: str, series: str) -> float | None:
    """The mean of ``series`` in ``panel`` of a :func:`per_setting` table (``None`` when absent)."""
    row = table[(table["panel"] == panel) & (table["series"] == series)]
    return None if row.empty else float(row["mean"].iloc[0])


def values(table: pd.DataFrame, panel: str, series: str) -> dict[int, float] | None:
    """The per-seed values of ``series`` in ``panel`` of a :func:`per_setting` table (``None`` when absent)."""
    row = table[(table["panel"] == panel) & (table["series"] == series)]
    return None if row.empty else dict(row["values"].iloc[0])


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
    if not any(
        run.get("provenance", {})
        .get("dataset_variant", CREDITCARD_SUBSET)
        .startswith(CREDITCARD_SUBSET)
        for run in creditcard
    ):
        return results.profile
    label = f"{results.profile} settings on the Creditcard subset"
    return (
        label
        if len(creditcard) == len(results.runs)
        else f"{results.profile} (Creditcard panels: {label})"
    )


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
