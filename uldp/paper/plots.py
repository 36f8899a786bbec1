"""The paper's experiment figures, drawn from stored results (:class:`uldp.paper.experiments.ResultSet`).

Every curve is the mean over seeds with a band of one standard deviation, against the round, as in the paper; on a
log axis (the epsilon) both are taken of the logarithm, so the curve is the geometric mean and the band a factor
either side of it, not a mean +- std that a log axis stretches over decades. One legend per figure, below its panels
(outside every axes), at :data:`LEGEND_PT`; a utility axis is zoomed to where its means lie (:data:`ZOOM_MARGIN`).

- :func:`privacy_utility_figure` (Figures 4-7): one row per setting (users, distribution); utility on the left
  (test loss, then accuracy, for MNIST), the user-level epsilon on the right (log scale). A utility with a tail over
  seeds (TcgaBrca's C-index, :data:`~uldp.paper.experiments.TAILED_METRICS`) is drawn instead as small multiples
  (:func:`small_multiples_figure`): a panel per method, its median with an interquartile band, beside the
  non-private baseline's median, and the epsilon of every method below.
- :func:`weighting_figure` (Figure 8): test loss of ULDP-AVG and ULDP-AVG-w, one panel per dataset and silo count,
  solid lines for uniform and dashed for zipf.
- :func:`user_sampling_figure` (Figure 9): utility and epsilon of ULDP-AVG-w for each user sampling rate q.
- :func:`runtime_figure` (Figure 10): time per part of the private weighting protocol on the medical datasets.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.ticker import MaxNLocator

from uldp.paper.experiments import (
    TAILED_METRICS,
    UTILITY_METRIC,
    ResultSet,
    summarise,
)
from uldp.paper.verdicts import profile_label

if TYPE_CHECKING:
    from collections.abc import Sequence

    from matplotlib.figure import Figure

#: Axis labels of the per-round columns.
LABELS: dict[str, str] = {
    "test_loss": "test loss",
    "accuracy": "test accuracy",
    "c_index": "C-index",
    "balanced_accuracy": "balanced accuracy",
    "epsilon": r"$\epsilon$ (user-level)",
}
#: Resolution of the figures: sharp when the page scales them to its width.
FIGURE_DPI = 150
#: Width of a figure, in inches: shown in the book's ~900 px article at about its own size (96 px an inch), so that
#: its fonts read at their point sizes.
FIGURE_WIDTH = 9.0
#: Font size of the legends, in points: at least 9 pt as shown, at the scale a page shows a figure of
#: :data:`FIGURE_WIDTH`.
LEGEND_PT = 10.0
#: A utility axis shows its means' range and this share of it either side; bands may leave it (a seed far off).
ZOOM_MARGIN = 0.15
#: Small multiples (:func:`small_multiples_figure`): panels per row, and the height of a method's panel and of the
#: epsilon panel below them, in inches.
SMALL_MULTIPLE_COLUMNS = 3
SMALL_PANEL_HEIGHT = 1.6
EPSILON_PANEL_HEIGHT = 2.4
#: The utility of a score that ignores its input, drawn as a reference where a metric has one (a C-index of one half).
CHANCE_LEVEL: dict[str, float] = {"c_index": 0.5}
#: The series every small multiple draws as a reference: the non-private baseline.
REFERENCE_SERIES = "DEFAULT"
#: Paul Tol's colour-blind-safe "muted" palette, then black.
PALETTE: tuple[str, ...] = (
    "#332288",
    "#88CCEE",
    "#44AA99",
    "#117733",
    "#999933",
    "#DDCC77",
    "#CC6677",
    "#882255",
    "#AA4499",
    "#000000",
)
#: A fixed style per method, so that every figure of the book draws a method the same way and methods stay apart
#: without colour (greyscale, colour-blind readers): a marker of its own, and the line style of its family
#: (solid: ULDP-SGD/AVG, dashed: ULDP-GROUP-k, dash-dot: ULDP-NAIVE, dotted: DEFAULT).
METHOD_STYLES: dict[str, dict[str, str]] = {
    "DEFAULT": {"color": "#000000", "marker": "o", "linestyle": ":"},
    "ULDP-NAIVE": {"color": "#DDCC77", "marker": "X", "linestyle": "-."},
    "ULDP-GROUP-max": {"color": "#CC6677", "marker": "v", "linestyle": "--"},
    "ULDP-GROUP-median": {"color": "#882255", "marker": "^", "linestyle": "--"},
    "ULDP-GROUP-2": {"color": "#999933", "marker": "<", "linestyle": "--"},
    "ULDP-GROUP-8": {"color": "#AA4499", "marker": ">", "linestyle": "--"},
    "ULDP-SGD": {"color": "#117733", "marker": "s", "linestyle": "-"},
    "ULDP-SGD-w": {"color": "#44AA99", "marker": "D", "linestyle": "-"},
    "ULDP-AVG": {"color": "#88CCEE", "marker": "P", "linestyle": "-"},
    "ULDP-AVG-w": {"color": "#332288", "marker": "*", "linestyle": "-"},
}
METHOD_COLORS: dict[str, str] = {method: style["color"] for method, style in METHOD_STYLES.items()}
_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">")
_DASHES = {"uniform": "-", "uniform-with-replacement": "-", "zipf": "--", "zipf-noniid": ":"}


def _style(series: str, index: int) -> dict[str, Any]:
    """The style of a series label: the method's (first part of the label) or, for a sampling rate ``q=...``, a
    viridis shade (light: small q) with a marker of its own; the line style follows the distribution when the
    label names one. ``index`` (the series' place in its figure, the same in every panel) picks the style of a
    label that has none of its own."""
    parts = [part.strip() for part in series.split(",")]
    style: dict[str, Any]
    if parts[0] in METHOD_STYLES:
        style = dict(METHOD_STYLES[parts[0]])
    elif parts[0].startswith("q="):
        style = {
            "color": plt.cm.viridis(0.9 * (1 - float(parts[0][2:]))),
            "marker": _MARKERS[index % len(_MARKERS)],
            "linestyle": "-",
        }
    else:
        style = {
            "color": PALETTE[index % len(PALETTE)],
            "marker": _MARKERS[index % len(_MARKERS)],
            "linestyle": "-",
        }
    style["linestyle"] = next(
        (_DASHES[part] for part in parts[1:] if part in _DASHES), style["linestyle"]
    )
    return style


def draw_curves(
    ax: Any, summary: Any, panel: str, *, log: bool = False, series_order: Sequence[str] = ()
) -> None:
    """Draw mean curves with a one-std band for every series of one panel of a :func:`summarise` table.

    Args:
        ax: Matplotlib axes.
        summary: Output of :func:`uldp.paper.experiments.summarise`; with ``log``, a summary of the values' base-10
            logarithms (:func:`log_summary`), drawn as ``10 ** mean`` with the band ``10 ** (mean +- std)``.
        panel: Which panel to draw.
        log: Logarithmic y axis, the summary taken in log space.
        series_order: Series in legend order (others follow in order of appearance); a series keeps its place,
            hence its style, in every panel drawn with the same order.
    """
    rows = summary[summary["panel"] == panel]
    present = list(dict.fromkeys(rows["series"]))
    place = {series: index for index, series in enumerate(dict.fromkeys([*series_order, *present]))}
    ordered = [s for s in series_order if s in present] + [
        s for s in present if s not in series_order
    ]
    for series in ordered:
        curve = rows[rows["series"] == series].sort_values("round")
        mean, std = curve["mean"].to_numpy(float), curve["std"].to_numpy(float)
        lower, upper = mean - std, mean + std
        if log:
            mean, lower, upper = 10**mean, 10**lower, 10**upper
        style = _style(series, place[series])
        ax.plot(
            curve["round"],
            mean,
            label=series,
            lw=1.4,
            markersize=4,
            markevery=max(1, len(mean) // 8),
            **style,
        )
        ax.fill_between(curve["round"], lower, upper, color=style["color"], alpha=0.15, lw=0)
    if log:
        ax.set_yscale("log")
    elif len(rows):
        low, high = float(rows["mean"].min()), float(rows["mean"].max())
        margin = ZOOM_MARGIN * (high - low) or 0.05 * max(abs(high), 1e-9)
        ax.set_ylim(low - margin, high + margin)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(True, alpha=0.3)


def log_summary(frame: Any, metric: str) -> Any:
    """:func:`uldp.paper.experiments.summarise` of the base-10 logarithm of ``metric`` (positive values; an infinite
    epsilon, no guarantee, is left out like a missing one): the mean and std of a value spread over decades."""
    logged = frame.assign(**{metric: np.log10(frame[metric].astype(float))})
    logged[metric] = logged[metric].replace([np.inf, -np.inf], np.nan)
    return summarise(logged, metric)


def quantile_summary(frame: Any, metric: str) -> Any:
    """Median and quartiles of one per-round column over seeds, per panel, series and round.

    Args:
        frame: A :meth:`uldp.paper.experiments.ResultSet.frame`.
        metric: The column.

    Returns:
        A DataFrame with columns ``panel, series, round, median, q1, q3, n`` (rounds where the value is missing are
        dropped).

    Raises:
        ValueError: ``metric`` is not a column of ``frame``.
    """
    if metric not in frame:
        raise ValueError(
            f"no column {metric!r} in the results; columns: {', '.join(map(str, frame.columns))}"
        )
    grouped = frame.dropna(subset=[metric]).groupby(["panel", "series", "round"], sort=False)[
        metric
    ]
    return grouped.agg(
        median="median",
        q1=lambda values: values.quantile(0.25),
        q3=lambda values: values.quantile(0.75),
        n="count",
    ).reset_index()


def small_multiples_figure(results: ResultSet, metric: str, *, title: str) -> Figure:
    """A utility with a tail over seeds as small multiples: per setting, one panel per method
    (:data:`SMALL_MULTIPLE_COLUMNS` to a row, the method and its seeds in the title) with the method's median over
    seeds and its interquartile band, :data:`REFERENCE_SERIES`'s median dotted in grey and the level of a score that
    ignores its input (:data:`CHANCE_LEVEL`) dashed, all on one y axis zoomed to where the runs end (the medians of
    the second half of the rounds, and the chance level; a band may leave it); after them, in the next cell, the
    user-level epsilon of every method (log scale, :func:`draw_curves`), titled with the setting. Every panel is one
    cell of the grid, so that a page can show each as an image of its own (:mod:`uldp.paper.chapters.panels`).

    A mean +- std band of a metric with a low tail reaches far below where most seeds are, and nine such bands on one
    axes hide each other: medians and quartiles, a panel each, show where the runs end and how they spread.

    Args:
        results: Stored results of one grid.
        metric: The utility column (e.g. ``"c_index"``).
        title: Figure title.

    Returns:
        The figure (one legend for all panels, below them).

    Raises:
        ValueError: No runs, or a metric missing from the results.
    """
    if not results.runs:
        raise ValueError(f"no stored results for grid {results.grid!r}: nothing to plot")
    frame = results.frame()
    quartiles = quantile_summary(frame, metric)
    epsilon = log_summary(frame, "epsilon")
    panels = list(dict.fromkeys(run["panel"] for run in results.runs))
    order = _series_order(results)
    # a setting's method panels, then its epsilon panel, in the cells of one grid: every panel one cell wide
    grid_rows = -(-(len(order) + 1) // SMALL_MULTIPLE_COLUMNS)
    heights = ([SMALL_PANEL_HEIGHT] * (grid_rows - 1) + [EPSILON_PANEL_HEIGHT]) * len(panels)
    fig = plt.figure(figsize=(FIGURE_WIDTH, sum(heights) + 1.6), dpi=FIGURE_DPI)
    grid = fig.add_gridspec(len(heights), SMALL_MULTIPLE_COLUMNS, height_ratios=heights)
    chance = CHANCE_LEVEL.get(metric)
    # zoomed to where the runs end: the medians of the second half of training, and the chance level
    late = quartiles[quartiles["round"] > quartiles["round"].max() / 2]["median"]
    low = min(float(late.min()), chance if chance is not None else np.inf)
    high = max(float(late.max()), chance if chance is not None else -np.inf)
    margin = ZOOM_MARGIN * (high - low) or 0.05 * max(abs(high), 1e-9)
    for block, panel in enumerate(panels):
        top = block * grid_rows
        rows = quartiles[quartiles["panel"] == panel]
        reference = rows[rows["series"] == REFERENCE_SERIES].sort_values("round")
        for index, series in enumerate(order):
            ax = fig.add_subplot(
                grid[top + index // SMALL_MULTIPLE_COLUMNS, index % SMALL_MULTIPLE_COLUMNS]
            )
            curve = rows[rows["series"] == series].sort_values("round")
            if len(reference) and series != REFERENCE_SERIES:
                ax.plot(
                    reference["round"],
                    reference["median"],
                    color="0.45",
                    linestyle=":",
                    lw=1.2,
                    label=f"{REFERENCE_SERIES}'s median",
                )
            if chance is not None:
                ax.axhline(
                    chance,
                    color="0.6",
                    linestyle="--",
                    lw=0.9,
                    label=f"chance ({chance:g})",
                )
            style = _style(series, index)
            ax.plot(
                curve["round"],
                curve["median"],
                label=series,
                lw=1.6,
                markersize=4,
                markevery=max(1, len(curve) // 6),
                **style,
            )
            ax.fill_between(
                curve["round"], curve["q1"], curve["q3"], color=style["color"], alpha=0.25, lw=0
            )
            seeds = int(curve["n"].max()) if len(curve) else 0
            ax.set_title(f"{series} ({seeds} seed{'s' if seeds != 1 else ''})", fontsize=9)
            ax.set_ylim(low - margin, high + margin)
            ax.xaxis.set_major_locator(MaxNLocator(integer=True, nbins=4))
            ax.grid(True, alpha=0.3)
            ax.set_ylabel(LABELS.get(metric, metric), fontsize=9)
        cell = len(order)
        ax = fig.add_subplot(
            grid[top + cell // SMALL_MULTIPLE_COLUMNS, cell % SMALL_MULTIPLE_COLUMNS]
        )
        draw_curves(ax, epsilon, panel, log=True, series_order=order)
        ax.set_title(f"{panel}\nevery method's ε", fontsize=9)
        ax.set_ylabel(LABELS["epsilon"])
        ax.set_xlabel("round")
    figure_legend(fig, fig.axes)
    fig.suptitle(title)
    return fig


def _series_order(results: ResultSet) -> list[str]:
    return list(dict.fromkeys(run["series"] for run in results.runs))


def metric_grid(
    results: ResultSet,
    metrics: Sequence[str],
    *,
    title: str,
    log_metrics: Sequence[str] = ("epsilon",),
    panel_width: float | None = None,
    panel_height: float = 2.9,
) -> Figure:
    """One row per panel (setting), one column per metric, mean and std band over seeds against the round.

    Args:
        results: Stored results of one grid.
        metrics: Per-round columns to draw, left to right.
        title: Figure title.
        log_metrics: Columns drawn on a log axis.
        panel_width: Inches per column (default: :data:`FIGURE_WIDTH` shared by the columns; at most 4.5).
        panel_height: Inches per row.

    Returns:
        The figure (one legend for all panels, below them).

    Raises:
        ValueError: No runs, or a metric missing from the results.
    """
    if not results.runs:
        raise ValueError(f"no stored results for grid {results.grid!r}: nothing to plot")
    frame = results.frame()
    summaries = {
        metric: (log_summary if metric in log_metrics else summarise)(frame, metric)
        for metric in metrics
    }
    panels = list(dict.fromkeys(run["panel"] for run in results.runs))
    order = _series_order(results)
    panel_width = min(4.5, FIGURE_WIDTH / len(metrics)) if panel_width is None else panel_width
    fig, axes = plt.subplots(
        len(panels),
        len(metrics),
        figsize=(panel_width * len(metrics), panel_height * len(panels) + 0.8),
        squeeze=False,
        dpi=FIGURE_DPI,
    )
    for row, panel in enumerate(panels):
        for column, metric in enumerate(metrics):
            ax = axes[row, column]
            draw_curves(ax, summaries[metric], panel, log=metric in log_metrics, series_order=order)
            ax.set_title(panel, fontsize=9)
            ax.set_ylabel(LABELS.get(metric, metric))
            if row == len(panels) - 1:
                ax.set_xlabel("round")
    figure_legend(fig, axes)
    fig.suptitle(title)
    return fig


def figure_legend(fig: Figure, axes: Any, *, title: bool = True) -> None:
    """One legend for every line of ``axes`` (each label once), below the panels at :data:`LEGEND_PT`, in as many
    columns as fit :data:`FIGURE_WIDTH`; the panels are laid out above it (and below a suptitle when ``title``)."""
    handles: dict[str, Any] = {}
    for ax in np.asarray(axes).flat:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            handles.setdefault(label, handle)
    longest = max((len(label) for label in handles), default=1)
    # a legend entry is its marker (about 4 characters) and its label, at about 0.6 em a character
    per_column = (longest + 4) * 0.6 * LEGEND_PT / 72
    columns = max(1, min(len(handles), int(fig.get_figwidth() // per_column)))
    fig.legend(
        handles.values(),
        handles.keys(),
        loc="lower center",
        ncol=columns,
        fontsize=LEGEND_PT,
        frameon=False,
    )
    legend_inches = 0.25 * -(-len(handles) // columns) + 0.15  # rows of the legend, plus a margin
    top = 1 - 0.35 / fig.get_figheight() if title else 1
    fig.tight_layout(rect=(0, legend_inches / fig.get_figheight(), 1, top))


def _scale(results: ResultSet) -> str:
    """``"paper profile"``, or the profile with the data it ran on (``"paper settings on the Creditcard subset"``)."""
    label = profile_label(results)
    return f"{label} profile" if label == results.profile else label


def _dataset(results: ResultSet) -> str:
    datasets = {run["params"]["dataset"] for run in results.runs}
    return datasets.pop() if len(datasets) == 1 else ""


def privacy_utility_figure(results: ResultSet) -> Figure:
    """Figures 4-7: utility (left; test loss and accuracy for MNIST) and user-level epsilon (right) per setting; a
    utility of :data:`~uldp.paper.experiments.TAILED_METRICS` as :func:`small_multiples_figure`."""
    dataset = _dataset(results)
    utility = UTILITY_METRIC.get(dataset, "accuracy")
    title = f"Privacy-utility trade-offs: {dataset} ({_scale(results)})"
    if utility in TAILED_METRICS:
        return small_multiples_figure(results, utility, title=title)
    metrics = (["test_loss"] if dataset == "mnist" else []) + [utility, "epsilon"]
    return metric_grid(results, metrics, title=title)


def weighting_figure(results: ResultSet) -> Figure:
    """Figure 8: test loss of ULDP-AVG vs ULDP-AVG-w, one panel per dataset and silo count (solid: uniform,
    dashed: zipf)."""
    if not results.runs:
        raise ValueError(f"no stored results for grid {results.grid!r}: nothing to plot")
    summary = summarise(results.frame(), "test_loss")
    panels = list(dict.fromkeys(run["panel"] for run in results.runs))
    columns = min(3, len(panels))
    rows = -(-len(panels) // columns)
    fig, axes = plt.subplots(
        rows,
        columns,
        figsize=(FIGURE_WIDTH, 2.8 * rows + 1.0),
        squeeze=False,
        dpi=FIGURE_DPI,
    )
    for ax in axes.flat[len(panels) :]:
        ax.remove()
    for ax, panel in zip(axes.flat, panels, strict=False):
        draw_curves(ax, summary, panel, series_order=_series_order(results))
        ax.set_title(panel, fontsize=9)
        ax.set_xlabel("round")
    for ax in axes[:, 0]:
        ax.set_ylabel(LABELS["test_loss"])
    axes = np.array([ax for ax in axes.flat if ax.figure is fig])
    figure_legend(fig, axes)
    fig.suptitle(f"Enhanced weighting: test loss ({_scale(results)})")
    return fig


def user_sampling_figure(results: ResultSet) -> Figure:
    """Figure 9: utility (left) and epsilon (right) of ULDP-AVG-w for each user-level sampling rate q."""
    if not results.runs:
        raise ValueError(f"no stored results for grid {results.grid!r}: nothing to plot")
    datasets = [run["params"]["dataset"] for run in results.runs]
    # One utility column: accuracy for the classification datasets of this figure (Creditcard, MNIST).
    metric = UTILITY_METRIC.get(datasets[0], "accuracy") if len(set(datasets)) == 1 else "accuracy"
    return metric_grid(
        results,
        [metric, "epsilon"],
        title=f"User-level sub-sampling, ULDP-AVG-w ({_scale(results)})",
    )


def runtime_table(results: ResultSet, *, by_run: bool = False) -> Any:
    """Seconds per part of the private weighting protocol for each run of the ``protocol_runtime`` grid (mean over
    seeds and rounds), from the timings the secure aggregation records in each run's ``info``.

    A round's seconds are the silos' local training (one after the other in one process), the silos' encrypted
    weighting, the server's work and, in the first round, the set-up; the local training is what is left when the
    others are taken away.

    Returns:
        A DataFrame indexed by (dataset, users) with columns ``training per silo`` (local training and the encrypted
        weighting, per silo: the paper's left panel), its two parts ``local training per silo`` and ``encrypted
        weighting per silo``, ``key set-up``, ``blinded histogram`` and ``aggregation`` (the server's per-round
        work: encrypting the weights, then decrypting the sum), plus ``parameters``. With ``by_run``, one row per
        run instead (mean over its rounds), with its ``seed``, not indexed.

    Raises:
        ValueError: No run carries secure-aggregation timings.
    """
    rows = []
    for run in results.runs:
        timings = run["result"].get("info", {}).get("secure_timings")
        if not timings:
            continue
        rounds, setup = timings["rounds"], timings["setup"]
        server = [r["encrypt_weights"] + r["aggregation"] for r in rounds]
        silos = run["result"]["info"]["n_silos"]
        # the first round also ran the set-up (the aggregation hook sets up on its first call)
        silo_side = [
            (total - part - (sum(setup.values()) if t == 0 else 0.0)) / silos
            for t, (total, part) in enumerate(zip(run["result"]["seconds"], server, strict=True))
        ]
        weighting = [r["silo_weighting"] / silos for r in rounds]
        rows.append(
            {
                "dataset": run["params"]["dataset"],
                "users": run["params"]["n_users"],
                "seed": run["seed"],
                "parameters": run["result"]["info"].get("parameters", np.nan),
                "training per silo": float(np.mean(silo_side)),
                "local training per silo": float(np.mean(silo_side) - np.mean(weighting)),
                "encrypted weighting per silo": float(np.mean(weighting)),
                "key set-up": setup["paillier_keygen"] + setup["key_exchange"],
                "blinded histogram": setup["blinded_histogram"],
                "aggregation": float(np.mean(server)),
            }
        )
    if not rows:
        raise ValueError(f"no run of grid {results.grid!r} has secure-aggregation timings")
    table = pd.DataFrame(rows)
    return table if by_run else table.drop(columns="seed").groupby(["dataset", "users"]).mean()


def runtime_figure(results: ResultSet) -> Figure:
    """Figure 10 (protocol runtime): per silo, local training with the encrypted weighting (left); key set-up, blinded
    histogram and the server's per-round work (right), for HeartDisease and TcgaBrca with 10 and 100 users (zipf,
    ULDP-AVG-w)."""
    table = runtime_table(results)
    labels = [f"{dataset}\n|U|={users}" for dataset, users in table.index]
    fig, (left, right) = plt.subplots(1, 2, figsize=(FIGURE_WIDTH, 4.0), dpi=FIGURE_DPI)
    left.bar(labels, table["training per silo"], color=PALETTE[0])
    left.set_ylabel("seconds per round")
    left.set_title("local training + encrypted weighting, per silo", fontsize=9)
    parts = ["key set-up", "blinded histogram", "aggregation"]
    width = 0.8 / len(parts)
    for index, part in enumerate(parts):
        right.bar(
            np.arange(len(labels)) + (index - 1) * width,
            table[part],
            width,
            label=part,
            color=PALETTE[2 * index + 1],
            hatch=("", "//", "..")[index],
            edgecolor="white",
        )
    right.set_xticks(np.arange(len(labels)), labels)
    right.set_ylabel("seconds")
    right.set_title("set-up (once) and server aggregation (per round)", fontsize=9)
    for ax in (left, right):
        ax.grid(True, axis="y", alpha=0.3)
    fig.suptitle(f"Private weighting protocol runtime ({results.profile} profile)")
    figure_legend(fig, [right])
    return fig


def group_privacy_figure(
    table: Any, lines: Sequence[tuple[str, str, str]], *, title: str
) -> Figure:
    """Epsilon against the group size ``k`` (log-log), one line per route of group privacy (Figure 2's axes).

    Args:
        table: Indexed by ``k``, one column of epsilons per route (e.g. from
            :func:`uldp.accounting.group.group_privacy_table`).
        lines: ``(column, matplotlib format, label)`` per line, in legend order.
        title: The figure's title.

    Returns:
        The figure.
    """
    fig, ax = plt.subplots(figsize=(6.5, 4.4), dpi=FIGURE_DPI)
    for column, fmt, label in lines:
        ax.plot(table.index, table[column], fmt, label=label)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("group size $k$")
    ax.set_ylabel("$\\epsilon$ at $\\delta = 10^{-5}$")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    figure_legend(fig, [ax], title=False)
    return fig
