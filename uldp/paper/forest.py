"""Forest plots of the Scorecard's verdicts: per setting, the difference a claim is judged on with its margin (mean
+- :data:`~uldp.paper.verdicts.SE_MULTIPLE` standard errors, paired by seed) against the claim's threshold, coloured
by the setting's verdict (:func:`~uldp.paper.verdicts.margin_verdict`)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import matplotlib.pyplot as plt
from matplotlib.lines import Line2D

from uldp.paper.verdicts import (
    CONTRADICTED,
    HOLDS,
    NOT_SHOWN,
    SE_MULTIPLE,
    VERDICT_COLOURS,
    margin_verdict,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from uldp.paper.verdicts import Finding

#: The legend's font size in points (at the figure's own size: the book shows it at full column width or less).
LEGEND_POINTS = 10


def forest_plot(finding: Finding, title: str) -> Figure:
    """One claim's forest plot: a row per setting of ``finding.gaps``, its mean (dot) and margin (bar), the
    threshold as a dashed line; a ratio whose margins are all positive and span more than a factor 100 is drawn
    on a log axis.

    Raises:
        ValueError: ``finding`` has no differences to draw.
    """
    if not finding.gaps:
        raise ValueError(f"the finding of {title!r} has no differences per setting to draw")
    labels = [label for label, _ in finding.gaps]
    gaps = [gap for _, gap in finding.gaps]
    fig, ax = plt.subplots(figsize=(9.0, 1.6 + 0.32 * len(gaps)))
    for row, gap in enumerate(gaps):
        colour = VERDICT_COLOURS[margin_verdict(gap, finding.threshold)]
        if math.isfinite(gap.se):
            ax.plot([gap.lower, gap.upper], [row, row], color=colour, linewidth=2.5)
        ax.plot([gap.mean], [row], "o", color=colour, markersize=6)
    ax.axvline(finding.threshold, color="black", linestyle="--", linewidth=1)
    lows = [gap.lower for gap in gaps] + [finding.threshold]
    highs = [gap.upper for gap in gaps] + [finding.threshold]
    if min(lows) > 0 and max(highs) / min(lows) > 100:
        ax.set_xscale("log")
    ax.set_yticks(range(len(gaps)), labels, fontsize=9)
    ax.invert_yaxis()
    ax.set_xlabel(f"{finding.measure or 'difference'} (mean ± {SE_MULTIPLE:g} SE)", fontsize=10)
    fig.suptitle(title, fontsize=11, x=0.01, ha="left")
    handles = [
        Line2D([], [], color=VERDICT_COLOURS[verdict], marker="o", linewidth=2.5, label=verdict)
        for verdict in (HOLDS, NOT_SHOWN, CONTRADICTED)
    ] + [Line2D([], [], color="black", linestyle="--", label="threshold")]
    ax.legend(
        handles=handles,
        loc="lower center",
        bbox_to_anchor=(0.5, 1.02),
        ncol=len(handles),
        fontsize=LEGEND_POINTS,
        frameon=False,
    )
    fig.tight_layout()
    return fig
