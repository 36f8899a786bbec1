"""The Scorecard's claims about the private weighting protocol's overhead (Section 5.2, Figures 10 and 11).

Figure 10's claims are judged on the ``protocol_runtime`` grid's stored runs (HeartDisease and TcgaBrca, 10 and
100 users, 3072-bit keys); Figure 11's (growth with the parameters and the users) on the committed artificial scan
at the paper's settings, ``benchmarks/results/protocol_scan.json`` (:mod:`uldp.secure.scan`: parameters 16-107,
users 10-40, silos 3-9, 3072-bit keys, several repeats), by least-squares fits of each part's seconds on the axis:
a slope that clears zero by :data:`~uldp.paper.verdicts.SE_MULTIPLE` standard errors "grows", and growth is "linear"
when, besides, the quadratic term of a quadratic fit is within that many standard errors of zero.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from uldp.common.provenance import REPO_ROOT
from uldp.paper.plots import runtime_table
from uldp.paper.verdicts import (
    CONTRADICTED,
    HOLDS,
    SE_MULTIPLE,
    Difference,
    Finding,
    NotMeasured,
    counted,
    difference,
    estimate,
    margin_verdict,
    settings_verdict,
    stored_grid,
)

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

    from uldp.paper.experiments import ResultSet

#: "practical" time: one protocol round (a silo's local training and encrypted weighting plus the server's work)
#: within this many seconds at 3072-bit keys.
PRACTICAL_SECONDS = 60.0
#: The committed artificial scan (Figure 11), written by ``python benchmarks/save.py protocol_scan``.
SCAN_FILE = REPO_ROOT / "benchmarks" / "results" / "protocol_scan.json"
#: The per-round parts of the scan (the key set-up and the blinded histogram run once per session).
ROUND_PARTS = ("encrypted weights", "weighting per silo", "aggregation")


def runtime_parts(data: Mapping[str, ResultSet]) -> pd.DataFrame:
    """Seconds per part of the private weighting protocol per dataset and user count, from the ``protocol_runtime``
    grid (:func:`uldp.paper.plots.runtime_table`), with ``round`` = a silo's training and weighting plus the server's
    per-round work (the silos run in parallel when deployed).

    Raises:
        NotMeasured: The results are missing.
    """
    results = stored_grid(data, "protocol_runtime", "no protocol-runtime results")
    table = runtime_table(results).reset_index()
    table["round"] = table["training per silo"] + table["aggregation"]
    return table


def _per_seed(
    data: Mapping[str, ResultSet], dataset: str, users: int, part: str
) -> dict[int, float]:
    """``{seed: seconds}`` of one part in one setting of the ``protocol_runtime`` grid."""
    runs = runtime_table(
        stored_grid(data, "protocol_runtime", "no protocol-runtime results"), by_run=True
    )
    rows = runs[(runs["dataset"] == dataset) & (runs["users"] == users)]
    return dict(zip(rows["seed"], rows[part], strict=True))


def _runtime_row(row: Any) -> str:
    return (
        f"{row.dataset} |U|={row.users}: training {row['local training per silo']:.2f} s + encrypted weighting "
        f"{row['encrypted weighting per silo']:.2f} s per silo, server {row.aggregation:.2f} s"
    )


def runtime_dominant(data: Mapping[str, ResultSet]) -> Finding:
    table = runtime_parts(data)
    verdicts = []
    for row in table.itertuples():

        def part(name: str, row: Any = row) -> dict[int, float]:
            return _per_seed(data, row.dataset, row.users, name)

        training = part("local training per silo")
        verdicts.append(
            settings_verdict(
                [
                    margin_verdict(difference(training, part(other)), 0.0)
                    for other in ("encrypted weighting per silo", "aggregation")
                ]
            )
        )
    shown = "; ".join(_runtime_row(row) for _, row in table.iterrows())
    return Finding(
        f"{shown}. Local training the largest part, by more than {SE_MULTIPLE:g} standard errors over seeds: "
        f"{counted(verdicts)}",
        settings_verdict(verdicts),
    )


def scan_table(path: str | Path | None = None) -> pd.DataFrame:
    """The artificial scan's rows (``axis, value, repeat`` and seconds per part) with ``round`` = the sum of
    :data:`ROUND_PARTS` (a silo's part per silo: the silos run in parallel when deployed).

    Args:
        path: The scan's JSON (default :data:`SCAN_FILE`).

    Raises:
        NotMeasured: No committed scan.
    """
    source = SCAN_FILE if path is None else path
    try:
        with open(source, encoding="utf-8") as handle:
            document = json.load(handle)
    except FileNotFoundError as missing:
        raise NotMeasured(
            f"no artificial protocol scan at {source}; run `python benchmarks/save.py protocol_scan`"
        ) from missing
    table = pd.DataFrame(document["results"]["rows"])
    table["round"] = table[list(ROUND_PARTS)].sum(axis=1)
    table.attrs["about"] = (
        f"protocol_scan (benchmarks/results): the paper's artificial settings, "
        f"{document['results']['key_bits']}-bit keys, {document['results']['repeats']} repeats, "
        f"commit {document['provenance']['git_commit'][:7]}"
    )
    return table


@dataclass(frozen=True)
class Growth:
    """A least-squares fit of one part's seconds on one axis of the scan.

    Attributes:
        axis: ``"parameters"``, ``"users"`` or ``"silos"``.
        part: The part (a column of :func:`scan_table`).
        slope: Seconds per unit of the axis (straight-line fit), with its standard error.
        curvature: The quadratic coefficient of a quadratic fit, with its standard error.
        low: The mean seconds at the axis' smallest value.
        high: The mean seconds at its largest.
    """

    axis: str
    part: str
    slope: Difference
    curvature: Difference
    low: float
    high: float

    @property
    def grows(self) -> bool:
        """The slope clears zero by ``SE_MULTIPLE`` standard errors."""
        return self.slope.clears(0.0)

    @property
    def linear(self) -> bool:
        """It grows, and the quadratic term is within ``SE_MULTIPLE`` standard errors of zero."""
        return self.grows and abs(self.curvature.mean) <= SE_MULTIPLE * self.curvature.se

    def linear_verdict(self) -> str:
        """Linear growth: holds when :attr:`linear`, contradicted when the slope is below zero or the quadratic term
        away from zero by the margin, not shown otherwise."""
        if self.linear:
            return HOLDS
        curved = abs(self.curvature.mean) > SE_MULTIPLE * self.curvature.se
        return CONTRADICTED if curved else margin_verdict(self.slope, 0.0)

    def text(self) -> str:
        return (
            f"{self.part} vs {self.axis}: {self.low:.3f} s to {self.high:.3f} s, slope {self.slope.text(5)} "
            f"s per unit, quadratic term {self.curvature.text(6)}"
        )


def _least_squares(x: np.ndarray, y: np.ndarray, degree: int) -> tuple[float, float]:
    """The highest-degree coefficient of a polynomial fit and its standard error."""
    design = np.vander(x, degree + 1, increasing=True)
    coefficients, *_ = np.linalg.lstsq(design, y, rcond=None)
    residuals = y - design @ coefficients
    variance = float(residuals @ residuals) / (len(y) - degree - 1)
    covariance = variance * np.linalg.inv(design.T @ design)
    return float(coefficients[-1]), float(np.sqrt(covariance[-1, -1]))


def fit_growth(table: pd.DataFrame, axis: str, part: str) -> Growth:
    """Fit ``part``'s seconds on ``axis`` over every repeat of the scan (:class:`Growth`).

    Raises:
        NotMeasured: Fewer than three values of the axis, or too few points for a quadratic fit.
    """
    rows = table[table["axis"] == axis]
    if rows["value"].nunique() < 3 or len(rows) < 4:
        raise NotMeasured(
            f"the scan has {rows['value'].nunique()} value(s) of {axis}; a growth fit needs three"
        )
    x, y = rows["value"].to_numpy(dtype=float), rows[part].to_numpy(dtype=float)
    slope, curvature = _least_squares(x, y, 1), _least_squares(x, y, 2)
    means = rows.groupby("value")[part].mean()
    return Growth(
        axis,
        part,
        Difference(*slope, len(rows), False),
        Difference(*curvature, len(rows), False),
        float(means.iloc[0]),
        float(means.iloc[-1]),
    )


def dominant_part(table: pd.DataFrame, axis: str) -> str:
    """The per-round part with the largest mean time along ``axis``."""
    rows = table[table["axis"] == axis]
    return max(ROUND_PARTS, key=lambda part: float(rows[part].mean()))


def runtime_users(data: Mapping[str, ResultSet]) -> Finding:
    """The round time and its dominant part grow with the users (the scan; ``data`` is not read)."""
    return _grows(scan_table(), "users")


def runtime_parameters(data: Mapping[str, ResultSet]) -> Finding:
    """The round time and the server's aggregation grow with the parameters (the scan; ``data`` is not read)."""
    return _grows(scan_table(), "parameters", ("round", "aggregation"))


def _grows(table: pd.DataFrame, axis: str, parts: tuple[str, ...] | None = None) -> Finding:
    fits = [
        fit_growth(table, axis, part) for part in (parts or ("round", dominant_part(table, axis)))
    ]
    verdicts = [margin_verdict(fit.slope, 0.0) for fit in fits]
    return Finding(
        "; ".join(fit.text() for fit in fits) + f": slope above zero by more than {SE_MULTIPLE:g} "
        f"standard errors: {counted(verdicts).replace('setting', 'fit')}",
        settings_verdict(verdicts),
        table.attrs["about"],
    )


def runtime_linear(data: Mapping[str, ResultSet]) -> Finding:
    """The dominant per-round part grows linearly with the parameters and with the users (Figure 11's caption: "with
    parameter size (Top) and/or the number of users (Bottom)"; the scan; ``data`` is not read)."""
    table = scan_table()
    fits = [fit_growth(table, axis, dominant_part(table, axis)) for axis in ("parameters", "users")]
    verdicts = [fit.linear_verdict() for fit in fits]
    return Finding(
        "; ".join(fit.text() for fit in fits)
        + f": linear (slope above zero and quadratic term within {SE_MULTIPLE:g} standard errors of zero): "
        f"{counted(verdicts).replace('setting', 'fit')}",
        settings_verdict(verdicts),
        table.attrs["about"],
    )


def runtime_practical(data: Mapping[str, ResultSet]) -> Finding:
    table = runtime_parts(data)
    verdicts = []
    for row in table.itertuples():
        silo = _per_seed(data, row.dataset, row.users, "training per silo")
        server = _per_seed(data, row.dataset, row.users, "aggregation")
        seconds = estimate({seed: silo[seed] + server[seed] for seed in silo})
        # below PRACTICAL_SECONDS by the margin: -seconds above -PRACTICAL_SECONDS
        verdicts.append(margin_verdict(seconds.times(-1.0), -PRACTICAL_SECONDS))
    shown = ", ".join(
        f"{row.dataset} |U|={row.users} {row['round']:.2f} s" for _, row in table.iterrows()
    )
    return Finding(
        f"one round (a silo's training and weighting plus the server's work; set-up "
        f"{table['key set-up'].max():.2f} s at most, once): {shown}; under {PRACTICAL_SECONDS:g} s by more "
        f"than {SE_MULTIPLE:g} standard errors over seeds: {counted(verdicts)}",
        settings_verdict(verdicts),
    )
