"""Verdicts of the Scorecard (:mod:`uldp.paper.scorecard`): what a claim check returns, the shared rules, and the
per-setting summary of stored results the checks read.

A verdict says which way the results point. In one setting (:func:`margin_verdict`), a claim **holds** when the
difference it is about clears the claim's threshold by :data:`SE_MULTIPLE` standard errors over seeds, is
**contradicted** when the difference lies on the other side of the threshold by that margin, and is **not shown**
when the threshold lies inside the margin (the seeds' spread can carry the difference either way); **not measured**
when the results it needs are missing. A claim made over several settings (:func:`settings_verdict`) holds when it
holds in every one, is contradicted when it is contradicted in any (the paper says it of every setting), and is not
shown otherwise.

The differences are paired by seed (:func:`difference`): the runs of one seed share their allocation, their initial
model and their noise (each silo's noise depends only on the seed, the round and the silo), so a bad noise draw drags
every method of that seed down together. The per-seed differences cancel it; Welch's standard error, which treats
the methods as independent samples, would count it twice.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    import pandas as pd

    from uldp.paper.experiments import ResultSet

HOLDS, NOT_SHOWN, CONTRADICTED, MISSING = "holds", "not shown", "contradicted", "not measured"
#: Every verdict, the paper's way first.
VERDICTS: tuple[str, ...] = (HOLDS, NOT_SHOWN, CONTRADICTED, MISSING)
#: How a sentence says a number of claims with each verdict: (one claim, several claims).
VERDICT_WORDS: dict[str, tuple[str, str]] = {
    HOLDS: ("holds", "hold"),
    NOT_SHOWN: ("is not shown", "are not shown"),
    CONTRADICTED: ("is contradicted", "are contradicted"),
    MISSING: ("is not measured", "are not measured"),
}
#: The colour of each verdict: a sphinx-design badge (``{bdg-success}`holds```) and a colour-blind-safe colour of the
#: Okabe-Ito palette for the forest plots.
VERDICT_BADGES: dict[str, str] = {
    HOLDS: "success",
    NOT_SHOWN: "warning",
    CONTRADICTED: "danger",
    MISSING: "secondary",
}
VERDICT_COLOURS: dict[str, str] = {
    HOLDS: "#009E73",
    NOT_SHOWN: "#E69F00",
    CONTRADICTED: "#D55E00",
    MISSING: "#999999",
}
#: A difference counts only when its mean clears the threshold by this many standard errors over seeds (a one-sided
#: bound of about 97.7 % for normal errors; the tests measure the coverage on simulated paired runs).
SE_MULTIPLE = 2.0
#: The start of the dataset variant of a Creditcard run on the shipped 5,412-row subset (provenance
#: ``dataset_variant``); results stored before that field existed all ran on it.
CREDITCARD_SUBSET = "creditcard-subset"


def badge(verdict: str) -> str:
    """``verdict`` as a coloured MyST badge (sphinx-design).

    >>> badge("holds")
    '{bdg-success}`holds`'
    """
    if verdict not in VERDICT_BADGES:
        raise ValueError(f"unknown verdict {verdict!r}; verdicts: {', '.join(VERDICTS)}")
    return f"{{bdg-{VERDICT_BADGES[verdict]}}}`{verdict}`"


class NotMeasured(Exception):
    """The results a claim needs are not stored (the message says which)."""


@dataclass(frozen=True)
class Finding:
    """What a claim function found: a sentence with our numbers, the verdict, and where the numbers come from when
    that is not the claim's grids (``None``: the grids' results).

    Attributes:
        measured: The sentence.
        verdict: One of :data:`VERDICTS`.
        source: Where the numbers come from, when not the claim's grids.
        gaps: Per setting, its label and the difference judged (what a forest plot draws; empty where the claim is
            not a difference per setting).
        threshold: The threshold the differences of ``gaps`` must clear.
        measure: What the differences are, in words (the forest plot's axis).
    """

    measured: str
    verdict: str
    source: str | None = None
    gaps: tuple[tuple[str, Difference], ...] = ()
    threshold: float = 0.0
    measure: str = ""


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

    @property
    def upper(self) -> float:
        """``mean + SE_MULTIPLE * se`` (the mean itself where no spread is known)."""
        return self.mean + SE_MULTIPLE * self.se if math.isfinite(self.se) else self.mean

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

    def interval(self, digits: int = 3) -> str:
        """The margin a verdict reads, ``"+0.012 (+0.004 to +0.020), 5 paired seeds"``.

        >>> Difference(0.0123, 0.0042, 5, True).interval()
        '+0.012 (+0.004 to +0.021), 5 paired seeds'
        """
        if not math.isfinite(self.se):
            return f"{self.mean:+.{digits}f}, one seed"
        pairs = "paired seeds" if self.paired else "seeds (unpaired)"
        return (
            f"{self.mean:+.{digits}f} ({self.lower:+.{digits}f} to {self.upper:+.{digits}f}), "
            f"{self.seeds} {pairs}"
        )


def difference(a: Mapping[int, float], b: Mapping[int, float]) -> Difference:
    """``a - b`` from per-seed values (``{seed: value}``): paired over the seeds both sides ran when there are at
    least two (a seed's runs share their noise: the module docstring), else Welch's over all values.

    A side with more seeds (the user-level methods of the medical grids run 20, some baselines fewer while the runs
    are being made) contributes its common seeds only: the pairing is worth more than the extra seeds.

    Raises:
        ValueError: A side has no value.

    >>> d = difference({0: 0.80, 1: 0.82, 2: 0.84}, {0: 0.70, 1: 0.73, 2: 0.73})
    >>> round(d.mean, 3), round(d.se, 4), d.paired
    (0.1, 0.0058, True)
    >>> difference({0: 0.80, 1: 0.82, 2: 0.84, 3: 0.9}, {0: 0.70, 1: 0.73, 2: 0.73}).seeds
    3
    """
    if not a or not b:
        raise ValueError(f"a difference needs values on both sides, got {len(a)} and {len(b)}")
    common = [seed for seed in a if seed in b]
    if len(common) >= 2 or set(a) == set(b):
        gaps = np.array([a[seed] - b[seed] for seed in common])
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
    """One comparison's verdict: holds when it clears ``threshold`` by :data:`SE_MULTIPLE` standard errors,
    contradicted when it lies below ``threshold`` by that margin, not shown when ``threshold`` is inside the margin.

    >>> [margin_verdict(Difference(m, 0.01, 5, True), 0.0) for m in (0.05, 0.01, -0.01, -0.05)]
    ['holds', 'not shown', 'not shown', 'contradicted']
    """
    return (
        HOLDS if diff.clears(threshold) else CONTRADICTED if diff.upper < threshold else NOT_SHOWN
    )


def settings_verdict(verdicts: Sequence[str]) -> str:
    """The verdict of a claim made of every setting, from its verdict in each: holds when it holds in all,
    contradicted when it is contradicted in any, not shown otherwise (:class:`NotMeasured` when there is none).

    >>> settings_verdict(["holds", "holds"]), settings_verdict(["holds", "not shown"])
    ('holds', 'not shown')
    >>> settings_verdict(["holds", "contradicted", "not shown"])
    'contradicted'
    """
    if not verdicts:
        raise NotMeasured("no setting has the methods this claim compares")
    unknown = set(verdicts) - {HOLDS, NOT_SHOWN, CONTRADICTED}
    if unknown:
        raise ValueError(
            f"unknown setting verdicts {sorted(unknown)!r}; allowed: holds, not shown, contradicted"
        )
    if all(verdict == HOLDS for verdict in verdicts):
        return HOLDS
    return CONTRADICTED if CONTRADICTED in verdicts else NOT_SHOWN


def counted(verdicts: Sequence[str]) -> str:
    """How many settings gave each verdict, ``"holds in 2, not shown in 1 of 3 settings"``.

    >>> counted(["holds", "not shown", "holds"])
    'holds in 2, not shown in 1 of 3 settings'
    """
    parts = [
        f"{verdict} in {verdicts.count(verdict)}" for verdict in VERDICTS if verdict in verdicts
    ]
    return f"{', '.join(parts)} of {len(verdicts)} setting{'s' if len(verdicts) != 1 else ''}"


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
        Columns ``panel, series, mean, std, median, q1, q3`` (the quartiles), ``seeds``, ``values``
        (``{seed: value}``, for :func:`difference`) and the run arguments (``dataset, method, n_users, ...``).

    Raises:
        NotMeasured: No stored runs, or the metric is absent.
        ValueError: Unknown ``how``.
    """
    if how not in ("final", "auc"):
        raise ValueError(f"how must be 'final' or 'auc', got {how!r}")
    if not results.runs:
        raise NotMeasured(f"no stored results for grid {results.grid!r}")
    return _per_setting(_Same(results), results.content_key(), metric, how).copy()


@dataclass(frozen=True, eq=False)
class _Same:
    """A result set compared and hashed by identity: with its content key, the key of :func:`_per_setting`'s cache."""

    results: ResultSet


@functools.lru_cache(maxsize=64)
def _per_setting(same: _Same, content: tuple, metric: str, how: str) -> pd.DataFrame:
    """:func:`per_setting` of ``same.results`` while its content is ``content``, computed once: a chapter's claims,
    verdicts and figures ask for the same table about ten times each (95 calls, 11 distinct, in
    ``exp_tcga_brca``)."""
    results = same.results
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
            median=("value", "median"),
            q1=("value", lambda column: _quartile(column, 0.25)),
            q3=("value", lambda column: _quartile(column, 0.75)),
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


def _quartile(column: pd.Series, q: float) -> float:
    """The ``q`` quantile of ``column``; an infinite epsilon (a guarantee that does not exist) gives an infinite or
    undefined quartile without numpy's warning about ``inf - inf``."""
    with np.errstate(invalid="ignore"):
        return float(column.quantile(q))


def value(table: pd.DataFrame, panel: str, series: str) -> float | None:
    """The mean of ``series`` in ``panel`` of a :func:`per_setting` table (``None`` when absent)."""
    row = table[(table["panel"] == panel) & (table["series"] == series)]
    return None if row.empty else float(row["mean"].iloc[0])


def values(table: pd.DataFrame, panel: str, series: str) -> dict[int, float] | None:
    """The per-seed values of ``series`` in ``panel`` of a :func:`per_setting` table (``None`` when absent)."""
    row = table[(table["panel"] == panel) & (table["series"] == series)]
    return None if row.empty else dict(row["values"].iloc[0])


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
