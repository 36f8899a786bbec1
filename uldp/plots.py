"""The paper's experiment figures, drawn from stored results (:class:`uldp.experiments.ResultSet`).

Every curve is the mean over seeds with a band of one standard deviation, against the round, as in the paper.

- :func:`privacy_utility_figure` (Figures 4-7): one row per setting (users, distribution); utility on the left
  (test loss, then accuracy, for MNIST), the user-level epsilon on the right (log scale).
- :func:`weighting_figure` (Figure 8): test loss of ULDP-AVG and ULDP-AVG-w, one panel per dataset and silo count,
  solid lines for uniform and dashed for zipf.
- :func:`user_sampling_figure` (Figure 9): utility and epsilon of ULDP-AVG-w for each user sampling rate q.
- :func:`runtime_figure` (Figure 10): time per part of the private weighting protocol on the medical datasets.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from uldp.experiments import UTILITY_METRIC, ChapterResults, ResultSet, summarise
from uldp.verdicts import profile_label

#: Axis labels of the per-round columns.
LABELS: dict[str, str] = {"test_loss": "test loss", "accuracy": "test accuracy", "c_index": "C-index",
                          "balanced_accuracy": "balanced accuracy", "epsilon": r"$\epsilon$ (user-level)"}
#: A fixed colour per method, so every figure of the book uses the same ones.
METHOD_COLORS: dict[str, str] = {
    "DEFAULT": "black", "ULDP-NAIVE": "tab:gray", "ULDP-GROUP-max": "tab:brown", "ULDP-GROUP-median": "tab:pink",
    "ULDP-GROUP-2": "tab:olive", "ULDP-GROUP-8": "tab:purple", "ULDP-SGD": "tab:green", "ULDP-SGD-w": "tab:cyan",
    "ULDP-AVG": "tab:blue", "ULDP-AVG-w": "tab:red",
}
_DASHES = {"uniform": "-", "zipf": "--", "zipf-noniid": ":"}


def _style(series: str, index: int) -> dict[str, Any]:
    """Colour from the method or sampling rate (first part of the label), line style from the distribution."""
    parts = [part.strip() for part in series.split(",")]
    if parts[0].startswith("q="):  # sampling rates: light (small q) to dark (q = 1)
        color = plt.cm.viridis(0.9 * (1 - float(parts[0][2:])))
    else:
        color = METHOD_COLORS.get(parts[0], plt.rcParams["axes.prop_cycle"].by_key()["color"][index % 10])
    style = next((_DASHES[part] for part in parts[1:] if part in _DASHES), "-")
    return {"color": color, "linestyle": style}


def draw_curves(ax: Any, summary: Any, panel: str, *, log: bool = False, series_order: Sequence[str] = ()) -> None:
    """Draw mean curves with a one-std band for every series of one panel of a :func:`summarise` table.

    Args:
        ax: Matplotlib axes.
        summary: Output of :func:`uldp.experiments.summarise`.
        panel: Which panel to draw.
        log: Logarithmic y axis.
        series_order: Series in legend order (others follow in order of appearance).
    """
    rows = summary[summary["panel"] == panel]
    present = list(dict.fromkeys(rows["series"]))
    ordered = [s for s in series_order if s in present] + [s for s in present if s not in series_order]
    for index, series in enumerate(ordered):
        curve = rows[rows["series"] == series].sort_values("round")
        mean, std = curve["mean"].to_numpy(float), curve["std"].to_numpy(float)
        style = _style(series, index)
        ax.plot(curve["round"], mean, label=series, lw=1.4, **style)
        lower = np.maximum(mean - std, mean * 1e-3) if log else mean - std
        ax.fill_between(curve["round"], lower, mean + std, color=style["color"], alpha=0.15, lw=0)
    if log:
        ax.set_yscale("log")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(True, alpha=0.3)


def _series_order(results: ResultSet) -> list[str]:
    return list(dict.fromkeys(run["series"] for run in results.runs))


def metric_grid(results: ResultSet, metrics: Sequence[str], *, title: str, log_metrics: Sequence[str] = ("epsilon",),
                panel_width: float = 4.2, panel_height: float = 2.9) -> Figure:
    """One row per panel (setting), one column per metric, mean and std band over seeds against the round.

    Args:
        results: Stored results of one grid.
        metrics: Per-round columns to draw, left to right.
        title: Figure title.
        log_metrics: Columns drawn on a log axis.
        panel_width: Inches per column.
        panel_height: Inches per row.

    Returns:
        The figure (one legend for all panels, below them).

    Raises:
        ValueError: No runs, or a metric missing from the results.
    """
    if not results.runs:
        raise ValueError(f"no stored results for grid {results.grid!r}: nothing to plot")
    frame = results.frame()
    summaries = {metric: summarise(frame, metric) for metric in metrics}
    panels = list(dict.fromkeys(run["panel"] for run in results.runs))
    order = _series_order(results)
    fig, axes = plt.subplots(len(panels), len(metrics), figsize=(panel_width * len(metrics),
                                                                 panel_height * len(panels) + 0.8), squeeze=False)
    for row, panel in enumerate(panels):
        for column, metric in enumerate(metrics):
            ax = axes[row, column]
            draw_curves(ax, summaries[metric], panel, log=metric in log_metrics, series_order=order)
            ax.set_title(panel, fontsize=9)
            ax.set_ylabel(LABELS.get(metric, metric))
            if row == len(panels) - 1:
                ax.set_xlabel("round")
    _legend(fig, axes)
    fig.suptitle(title)
    return fig


def _legend(fig: Figure, axes: np.ndarray) -> None:
    handles: dict[str, Any] = {}
    for ax in axes.flat:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, handle)
    columns = min(5, max(1, len(handles)))
    fig.legend(handles.values(), handles.keys(), loc="lower center", ncol=columns, fontsize=8, frameon=False)
    legend_inches = 0.25 * -(-len(handles) // columns) + 0.2  # rows of the legend, plus a margin
    fig.tight_layout(rect=(0, legend_inches / fig.get_figheight(), 1, 1 - 0.35 / fig.get_figheight()))


def _scale(results: ResultSet) -> str:
    """``"paper profile"``, or the profile with the data it ran on (``"paper settings on the Creditcard subset"``)."""
    label = profile_label(results)
    return f"{label} profile" if label == results.profile else label


def _dataset(results: ResultSet) -> str:
    datasets = {run["params"]["dataset"] for run in results.runs}
    return datasets.pop() if len(datasets) == 1 else ""


def privacy_utility_figure(results: ResultSet) -> Figure:
    """Figures 4-7: utility (left; test loss and accuracy for MNIST) and user-level epsilon (right) per setting."""
    dataset = _dataset(results)
    metrics = (["test_loss"] if dataset == "mnist" else []) + [UTILITY_METRIC.get(dataset, "accuracy"), "epsilon"]
    return metric_grid(results, metrics, title=f"Privacy-utility trade-offs: {dataset} ({_scale(results)})")


def weighting_figure(results: ResultSet) -> Figure:
    """Figure 8: test loss of ULDP-AVG vs ULDP-AVG-w, one panel per dataset and silo count (solid: uniform,
    dashed: zipf)."""
    if not results.runs:
        raise ValueError(f"no stored results for grid {results.grid!r}: nothing to plot")
    summary = summarise(results.frame(), "test_loss")
    panels = list(dict.fromkeys(run["panel"] for run in results.runs))
    fig, axes = plt.subplots(1, len(panels), figsize=(3.6 * len(panels), 3.6), squeeze=False)
    for ax, panel in zip(axes.flat, panels):
        draw_curves(ax, summary, panel, series_order=_series_order(results))
        ax.set_title(panel, fontsize=9)
        ax.set_xlabel("round")
    axes[0, 0].set_ylabel(LABELS["test_loss"])
    _legend(fig, axes)
    fig.suptitle(f"Enhanced weighting: test loss ({_scale(results)})")
    return fig


def user_sampling_figure(results: ResultSet) -> Figure:
    """Figure 9: utility (left) and epsilon (right) of ULDP-AVG-w for each user-level sampling rate q."""
    if not results.runs:
        raise ValueError(f"no stored results for grid {results.grid!r}: nothing to plot")
    datasets = [run["params"]["dataset"] for run in results.runs]
    # One utility column: accuracy for the classification datasets of this figure (Creditcard, MNIST).
    metric = UTILITY_METRIC.get(datasets[0], "accuracy") if len(set(datasets)) == 1 else "accuracy"
    return metric_grid(results, [metric, "epsilon"],
                       title=f"User-level sub-sampling, ULDP-AVG-w ({_scale(results)})")


def runtime_table(results: ResultSet) -> Any:
    """Seconds per part of the private weighting protocol for each run of the ``protocol_runtime`` grid (mean over
    seeds and rounds), from the timings the secure aggregation records in each run's ``info``.

    A round's seconds are the silos' local training (one after the other in one process), the silos' encrypted
    weighting, the server's work and, in the first round, the set-up; the local training is what is left when the
    others are taken away.

    Returns:
        A DataFrame indexed by (dataset, users) with columns ``training per silo`` (local training and the encrypted
        weighting, per silo: the paper's left panel), its two parts ``local training per silo`` and ``encrypted
        weighting per silo``, ``key set-up``, ``blinded histogram`` and ``aggregation`` (the server's per-round
        work: encrypting the weights, then decrypting the sum), plus ``parameters``.

    Raises:
        ValueError: No run carries secure-aggregation timings.
    """
    import pandas as pd

    rows = []
    for run in results.runs:
        timings = run["result"].get("info", {}).get("secure_timings")
        if not timings:
            continue
        rounds, setup = timings["rounds"], timings["setup"]
        server = [r["encrypt_weights"] + r["aggregation"] for r in rounds]
        silos = run["result"]["info"]["n_silos"]
        # the first round also ran the set-up (the aggregation hook sets up on its first call)
        silo_side = [(total - part - (sum(setup.values()) if t == 0 else 0.0)) / silos
                     for t, (total, part) in enumerate(zip(run["result"]["seconds"], server))]
        weighting = [r["silo_weighting"] / silos for r in rounds]
        rows.append({
            "dataset": run["params"]["dataset"], "users": run["params"]["n_users"],
            "parameters": run["result"]["info"].get("parameters", np.nan),
            "training per silo": float(np.mean(silo_side)),
            "local training per silo": float(np.mean(silo_side) - np.mean(weighting)),
            "encrypted weighting per silo": float(np.mean(weighting)),
            "key set-up": setup["paillier_keygen"] + setup["key_exchange"],
            "blinded histogram": setup["blinded_histogram"],
            "aggregation": float(np.mean(server)),
        })
    if not rows:
        raise ValueError(f"no run of grid {results.grid!r} has secure-aggregation timings")
    return pd.DataFrame(rows).groupby(["dataset", "users"]).mean()


def runtime_figure(results: ResultSet) -> Figure:
    """Figure 10 (protocol runtime): per silo, local training with the encrypted weighting (left); key set-up, blinded histogram and
    the server's per-round work (right), for HeartDisease and TcgaBrca with 10 and 100 users (zipf, ULDP-AVG-w)."""
    table = runtime_table(results)
    labels = [f"{dataset}\n|U|={users}" for dataset, users in table.index]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.6))
    left.bar(labels, table["training per silo"], color="tab:blue")
    left.set_ylabel("seconds per round")
    left.set_title("local training + encrypted weighting, per silo", fontsize=9)
    parts = ["key set-up", "blinded histogram", "aggregation"]
    width = 0.8 / len(parts)
    for index, part in enumerate(parts):
        right.bar(np.arange(len(labels)) + (index - 1) * width, table[part], width, label=part)
    right.set_xticks(np.arange(len(labels)), labels)
    right.set_ylabel("seconds")
    right.set_title("set-up (once) and server aggregation (per round)", fontsize=9)
    right.legend(fontsize=8)
    for ax in (left, right):
        ax.grid(True, axis="y", alpha=0.3)
    fig.suptitle(f"Private weighting protocol runtime ({results.profile} profile)")
    fig.tight_layout()
    return fig


def chapter_figures(shown: ChapterResults, draw: Callable[[ResultSet], Figure]) -> list[Figure]:
    """The figures an experiment chapter shows: ``draw`` of its results, then, when paper-profile results cover only
    some panels of the figure whole (:func:`uldp.experiments.chapter_results`), ``draw`` of those panels (its title
    says "paper profile")."""
    return [draw(shown.results)] + ([draw(shown.paper_panels)] if shown.paper_panels is not None else [])
