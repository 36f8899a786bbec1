"""The Scorecard's claims about the private weighting protocol's overhead (Section 5.2, Figures 10 and 11), judged
from the ``protocol_runtime`` grid's stored runs (HeartDisease and TcgaBrca, 10 and 100 users, 3072-bit keys).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from uldp.paper.plots import runtime_table
from uldp.paper.verdicts import Finding, NotMeasured, fraction_verdict, stored_grid

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    import pandas as pd

    from uldp.paper.experiments import ResultSet

#: "practical" time: one protocol round (a silo's local training and encrypted weighting plus the server's work)
#: within this many seconds at 3072-bit keys.
PRACTICAL_SECONDS = 60.0
#: "grows linearly" read off two user counts: the time at 10x the users at most this many times the time at 1x
#: (linear growth with an intercept stays under 10x; two points cannot show more than "no faster than linear").
LINEAR_AT_10X = 11.0


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


def _runtime_row(row: Any) -> str:
    return (f"{row.dataset} |U|={row.users}: training {row['local training per silo']:.2f} s + encrypted weighting "
            f"{row['encrypted weighting per silo']:.2f} s per silo, server {row.aggregation:.2f} s")


def runtime_dominant(data: Mapping[str, ResultSet]) -> Finding:
    table = runtime_parts(data)
    training = table["local training per silo"]
    alone = int(((training > table["encrypted weighting per silo"]) & (training > table["aggregation"])).sum())
    with_weighting = int((table["training per silo"] > table["aggregation"]).sum())
    shown = "; ".join(_runtime_row(row) for _, row in table.iterrows())
    return Finding(f"{shown}. Local training is the largest part in {alone} of {len(table)} settings; with the "
                   f"encrypted weighting (the paper's left panel) it exceeds the server's work in {with_weighting} "
                   f"of {len(table)}", fraction_verdict(alone, len(table)))


def _growth(data: Mapping[str, ResultSet], by: str) -> tuple[list[str], list[float]]:
    """``(descriptions, ratios)`` of the silo-side and server times between the smallest and largest ``by``
    (``"users"`` within a dataset, or ``"parameters"`` at each user count)."""
    table = runtime_parts(data)
    within = "dataset" if by == "users" else "users"
    shown, ratios = [], []
    for key, rows in table.groupby(within, sort=False):
        rows = rows.sort_values(by)
        if rows[by].nunique() < 2:
            continue
        low, high = rows.iloc[0], rows.iloc[-1]
        for part in ("training per silo", "aggregation"):
            ratios.append(float(high[part] / low[part]))
            shown.append(f"{key} {part} x{ratios[-1]:.1f} from {low[by]:g} to {high[by]:g} {by}")
    if not ratios:
        raise NotMeasured(f"the protocol-runtime results have one value of {by} only")
    return shown, ratios


def runtime_grows(by: str) -> Callable[[Mapping[str, ResultSet]], Finding]:
    def check(data: Mapping[str, ResultSet]) -> Finding:
        shown, ratios = _growth(data, by)
        hits = sum(ratio > 1 for ratio in ratios)
        note = (" (the datasets differ in silos and records too, not only in parameters)" if by == "parameters"
                else "")
        return Finding("; ".join(shown) + f": larger in {hits} of {len(ratios)}{note}",
                       fraction_verdict(hits, len(ratios)))
    return check


def runtime_linear(data: Mapping[str, ResultSet]) -> Finding:
    shown, ratios = _growth(data, "users")
    hits = sum(1 < ratio <= LINEAR_AT_10X for ratio in ratios)
    return Finding("; ".join(shown) + f": grows, and by at most {LINEAR_AT_10X:g}x for 10x the users (no faster than "
                   f"linear; two user counts cannot show more), in {hits} of {len(ratios)}",
                   fraction_verdict(hits, len(ratios)))


def runtime_practical(data: Mapping[str, ResultSet]) -> Finding:
    table = runtime_parts(data)
    hits = int((table["round"] <= PRACTICAL_SECONDS).sum())
    shown = ", ".join(f"{row.dataset} |U|={row.users} {row['round']:.2f} s" for _, row in table.iterrows())
    return Finding(f"one round (a silo's training and weighting plus the server's work; set-up "
                   f"{table['key set-up'].max():.2f} s at most, once): {shown}; at most {PRACTICAL_SECONDS:g} s in "
                   f"{hits} of {len(table)}", fraction_verdict(hits, len(table)))
