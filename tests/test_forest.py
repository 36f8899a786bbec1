"""uldp.paper.forest: a forest plot draws each setting's margin in its verdict's colour, against the threshold."""

from __future__ import annotations

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")

from matplotlib.colors import to_hex

from uldp.paper.forest import forest_plot
from uldp.paper.verdicts import (
    CONTRADICTED,
    HOLDS,
    NOT_SHOWN,
    SE_MULTIPLE,
    VERDICT_COLOURS,
    Difference,
    Finding,
)


def test_each_setting_is_a_bar_of_its_margin_in_its_verdicts_colour():
    gaps = (
        ("a", Difference(0.10, 0.01, 5, True)),
        ("b", Difference(0.01, 0.01, 5, True)),
        ("c", Difference(-0.10, 0.01, 5, True)),
    )
    fig = forest_plot(Finding("x", CONTRADICTED, gaps=gaps, threshold=0.0, measure="m"), "t")
    ax = fig.axes[0]
    bars = [
        line for line in ax.lines if np.size(line.get_xdata()) == 2 and line.get_linestyle() == "-"
    ]
    assert [tuple(np.asarray(line.get_xdata())) for line in bars] == [
        pytest.approx((gap.mean - SE_MULTIPLE * gap.se, gap.mean + SE_MULTIPLE * gap.se))
        for _, gap in gaps
    ]
    assert [to_hex(line.get_color()) for line in bars] == [
        to_hex(VERDICT_COLOURS[v]) for v in (HOLDS, NOT_SHOWN, CONTRADICTED)
    ]
    assert [tick.get_text() for tick in ax.get_yticklabels()] == ["a", "b", "c"]
    assert ax.get_xscale() == "linear" and ax.get_xlabel().startswith("m (mean ± ")
    matplotlib.pyplot.close(fig)


def test_ratios_over_orders_of_magnitude_are_drawn_on_a_log_axis_and_no_gaps_are_refused():
    gaps = (("a", Difference(20.0, 1.0, 5, True)), ("b", Difference(5000.0, 10.0, 5, True)))
    fig = forest_plot(Finding("x", HOLDS, gaps=gaps, threshold=10.0), "t")
    assert fig.axes[0].get_xscale() == "log"
    matplotlib.pyplot.close(fig)
    with pytest.raises(ValueError, match="no differences per setting"):
        forest_plot(Finding("x", HOLDS), "t")
