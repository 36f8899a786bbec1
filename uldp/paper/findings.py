"""The findings box at the top of each experiment chapter and its "What to conclude", computed from the results the
Scorecard judges (:func:`uldp.paper.scorecard.stored_results`): a few sentences with numbers, one function per
chapter (:data:`CHAPTER_FINDINGS`), and the conclusions, one line per claim of the paper that reads the chapter's
figure with its verdict and effect.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from uldp.paper.experiments import GRIDS, TAILED_METRICS, expand, trained_on
from uldp.paper.scorecard import CLAIMS, judge
from uldp.paper.scorecard_figures import weighting_gaps
from uldp.paper.scorecard_utility import (
    METRIC_NAMES,
    MNIST_ACCOUNTING,
    MNIST_SHORT,
    in_part,
    judged_metric,
)
from uldp.paper.verdicts import (
    HOLDS,
    MISSING,
    VERDICT_WORDS,
    VERDICTS,
    NotMeasured,
    badge,
    margin_verdict,
    per_setting,
    stored_grid,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    import pandas as pd

    from uldp.paper.experiments import ResultSet


def _span(values: pd.Series) -> str:
    """``"0.812"`` or ``"0.781 to 0.812"``."""
    low, high = float(values.min()), float(values.max())
    return f"{low:.3f}" if round(low, 3) == round(high, 3) else f"{low:.3f} to {high:.3f}"


def _epsilon_span(values: pd.Series) -> str:
    low, high = float(values.min()), float(values.max())
    shown = [f"{v:,.0f}" if v >= 100 else f"{v:.2g}" if v < 1 else f"{v:.1f}" for v in (low, high)]
    return shown[0] if shown[0] == shown[1] else f"{shown[0]} to {shown[1]}"


def _quartiles(values: np.ndarray) -> str:
    """``"median 0.706, interquartile range 0.690 to 0.720"`` of some runs' values."""
    q1, median, q3 = np.quantile(values, [0.25, 0.5, 0.75])
    return f"median {median:.3f}, interquartile range {q1:.3f} to {q3:.3f}"


def _runs(table: pd.DataFrame) -> np.ndarray:
    """Every run's value in a :func:`~uldp.paper.verdicts.per_setting` table (settings times seeds)."""
    return np.concatenate([list(values.values()) for values in table["values"]])


def _seeds(table: pd.DataFrame) -> str:
    """How many seeds the settings of ``table`` have, ``"20 seeds"`` or ``"5 to 20 seeds"``."""
    low, high = int(table["seeds"].min()), int(table["seeds"].max())
    return f"{low} seed{'s' if low > 1 else ''}" if low == high else f"{low} to {high} seeds"


def _scale(results: ResultSet) -> str:
    if results.profile == "paper":
        return "At the paper's settings"
    return f"At this build's reduced {results.profile} profile (not the paper's scale: read shapes, not numbers)"


def in_part_findings(data: Mapping[str, ResultSet], dataset: str) -> list[str]:
    """One sentence per grid whose paper-profile runs on ``dataset`` are stored only in part (:func:`in_part`): each
    stored line's final utility and epsilon, its seeds, rounds, device and run time, and the lines not yet run."""
    sentences = []
    for grid, figure in ((name, grid.figure) for name, grid in GRIDS.items()):
        stored = data.get(in_part(grid))
        if stored is None:
            continue
        runs = [run for run in stored.runs if run["params"]["dataset"] == dataset]
        if not runs:
            continue
        only = stored.restricted(runs)
        metric = judged_metric(dataset)
        utility, epsilon = per_setting(only, metric), per_setting(only, "epsilon")
        lines = []
        for (_, row), eps in zip(utility.iterrows(), epsilon["mean"], strict=True):
            of_line = [run for run in runs if run["series"] == row["series"]]
            hours = sum(run["provenance"]["wall_seconds"] for run in of_line) / 3600
            seeds = int(row["seeds"])
            lines.append(
                f"{row['series']} ({seeds} seed{'s' if seeds > 1 else ''}, {of_line[0]['params']['rounds']} rounds"
                f"{trained_on(of_line[0].get('config', {}))}, {hours:.1f} h): a final {METRIC_NAMES[metric]} of "
                f"{row['mean']:.3f} at a user-level $\\epsilon$ of {eps:.2f}"
            )
        drawn = {run["series"] for run in runs}
        absent = list(
            dict.fromkeys(
                spec.series
                for spec in stored.missing
                if spec.kwargs["dataset"] == dataset and spec.series not in drawn
            )
        )
        sentences.append(
            f"At the paper's scale, {figure} is stored on {dataset} in part, {runs[0]['params']['method']} at "
            + "; ".join(lines)
            + (f"; not yet run: {', '.join(absent)}." if absent else ".")
        )
    return sentences


def privacy_utility_findings(grid: str, data: Mapping[str, ResultSet]) -> list[str]:
    """The findings of a privacy-utility chapter (Figures 4-7) from ``data[grid]``: ULDP-AVG-w's final utility and
    epsilon against DEFAULT's, the epsilon ULDP-GROUP-k needs, ULDP-NAIVE's mean and spread, the tail of a tailed
    metric, and the verdicts of the claims that read the figure.

    Raises:
        NotMeasured: No stored results of ``grid``.
    """
    results = stored_grid(data, grid, f"no stored results for {grid}")
    metric = judged_metric(results.runs[0]["params"]["dataset"])
    name = METRIC_NAMES[metric]
    utility = per_setting(results, metric)
    epsilon = per_setting(results, "epsilon")
    by = dict(tuple(utility.groupby("series", sort=False)))
    eps = dict(tuple(epsilon.groupby("series", sort=False)))
    tailed = metric in TAILED_METRICS
    # a metric with a tail is summed up by its medians (the means of five or six seeds move with one bad draw)
    centre = "median" if tailed else "mean"
    sentences = []
    if "ULDP-AVG-w" in by and "DEFAULT" in by:
        sentences.append(
            f"{_scale(results)} ({len(by['ULDP-AVG-w'])} settings, {_seeds(by['ULDP-AVG-w'])} each for ULDP-AVG-w, "
            f"{_seeds(by['DEFAULT'])} for DEFAULT), ULDP-AVG-w ends at a final {name} of "
            f"{_span(by['ULDP-AVG-w'][centre])}{' (medians over seeds)' if tailed else ''} with a user-level "
            f"$\\epsilon$ of {_epsilon_span(eps['ULDP-AVG-w']['mean'])}, against "
            f"{_span(by['DEFAULT'][centre])} for DEFAULT without privacy."
        )
    groups = epsilon[epsilon["series"].str.startswith("ULDP-GROUP")]
    if not groups.empty and "ULDP-AVG" in eps:
        smallest = groups.groupby("panel", sort=False)["mean"].min()
        sentences.append(
            f"ULDP-GROUP-$k$ ({_seeds(groups)} per setting) needs an $\\epsilon$ of {_epsilon_span(smallest)} at "
            f"its best $k$ per setting, where ULDP-AVG and ULDP-AVG-w spend "
            f"{_epsilon_span(eps['ULDP-AVG']['mean'])}."
        )
    if "ULDP-NAIVE" in by:
        naive = _runs(by["ULDP-NAIVE"])
        sentences.append(
            f"ULDP-NAIVE, at an $\\epsilon$ of {_epsilon_span(eps['ULDP-NAIVE']['mean'])}, ends at a mean final "
            f"{name} of {naive.mean():.3f} with a standard deviation of {naive.std(ddof=1):.3f} over its "
            f"{len(naive)} runs ({_seeds(by['ULDP-NAIVE'])} per setting; from {naive.min():.3f} to "
            f"{naive.max():.3f}" + (f"; {_quartiles(naive)}" if tailed else "") + ")."
        )
    if tailed and "ULDP-AVG" in by:
        avg = _runs(by["ULDP-AVG"])
        sentences.append(
            f"The {name} has a tail: over ULDP-AVG's {len(avg)} runs (settings times seeds) its mean is "
            f"{avg.mean():.3f}, its {_quartiles(avg)} and its lowest run {avg.min():.3f}; each seed's "
            "noise is shared by every method, so a bad draw pulls them down together and the comparisons are "
            "paired by seed."
        )
    sentences.append(verdict_sentence(grid, data))
    return sentences


def mnist_findings(data: Mapping[str, ResultSet]) -> list[str]:
    """The findings of the MNIST chapter: the paper-scale epsilons from accounting, the paper-scale MNIST runs of
    other figures stored in part (Figure 9's sub-sampling endpoints), the committed short profile's non-iid effect,
    and the verdicts; Figure 5's paper-scale MNIST training has not run here, which it says."""
    sentences = []
    accounted = data.get(MNIST_ACCOUNTING)
    if accounted is not None and accounted.runs:
        table = per_setting(accounted, "epsilon")
        group = table[table["series"] == "ULDP-GROUP-2"].groupby("n_users")["mean"].max()
        avg = table[table["series"] == "ULDP-AVG"]["mean"]
        paper = next(
            spec
            for spec in expand("mnist", "paper", seeds=[0])
            if spec.kwargs["method"] == "ULDP-AVG"
        )
        trained = (
            "Figure 5's paper-scale MNIST training has not run here"
            if in_part_findings(data, "mnist")
            else "No paper-scale MNIST training has run here"
        )
        sentences.append(
            f"{trained} ({paper.kwargs['rounds']} rounds of "
            f"{paper.kwargs['local_epochs']} local epochs); its privacy side needs "
            f"no training: at the paper's settings ULDP-AVG spends an $\\epsilon$ of {_epsilon_span(avg)}, and "
            + ", ".join(
                f"ULDP-GROUP-2 at most {eps:,.1f} with {users} users"
                for users, eps in group.items()
            )
            + "."
        )
    sentences += in_part_findings(data, "mnist")
    short = data.get(MNIST_SHORT)
    if short is not None and short.runs:
        table = per_setting(short, "accuracy")
        avg = table[table["series"] == "ULDP-AVG"]
        parts = []
        for users, rows in avg.groupby("n_users"):
            by = rows.set_index("distribution")["mean"]
            if {"zipf", "zipf-noniid"} <= set(by.index):
                parts.append(
                    f"{by['zipf']:.3f} (iid) against {by['zipf-noniid']:.3f} (non-iid) with {users} users"
                )
        if parts:
            sentences.append(
                f"On the paper's federations trained for {short.runs[0]['params']['rounds']} rounds "
                f"({_seeds(avg)}), ULDP-AVG's final accuracy is " + "; ".join(parts) + "."
            )
    sentences.append(verdict_sentence("mnist", data))
    return sentences


def weighting_findings(data: Mapping[str, ResultSet]) -> list[str]:
    """The findings of the weighting chapter: ULDP-AVG-w's final test-loss gain over ULDP-AVG per setting."""
    gaps = weighting_gaps(data)
    verdicts = [margin_verdict(gap, 0.0) for gap in gaps["difference"]]
    best = gaps.loc[gaps["gap"].idxmax()]
    gain = (
        f"{_scale(data['weighting'])}, ULDP-AVG-w's final test loss is below ULDP-AVG's, beyond two standard "
        f"errors paired by seed, in {verdicts.count(HOLDS)} of {len(gaps)} settings; the gain ranges from "
        f"{gaps['gap'].min():+.4f} to {gaps['gap'].max():+.4f}, largest on {best['dataset']} with "
        f"{best['n_silos']} silos under the {best['distribution']} allocation."
    )
    return [gain, verdict_sentence("weighting", data)]


def user_sampling_findings(data: Mapping[str, ResultSet]) -> list[str]:
    """The findings of the user-sampling chapter: per dataset, utility and epsilon at the smallest and largest q."""
    results = stored_grid(data, "user_sampling", "no user-sampling results")
    sentences = []
    epsilon = per_setting(results, "epsilon")
    for dataset in dict.fromkeys(run["params"]["dataset"] for run in results.runs):
        metric = judged_metric(dataset)
        only = results.restricted(
            run for run in results.runs if run["params"]["dataset"] == dataset
        )
        utility = per_setting(only, metric).sort_values("q")
        accuracy = per_setting(only, "accuracy").sort_values("q")
        eps = epsilon[epsilon["dataset"] == dataset].sort_values("q")
        low, high = utility.iloc[0], utility.iloc[-1]
        text = (
            f"{_scale(results)} on {dataset}, sampling users at $q = {low['q']:g}$ spends an $\\epsilon$ of "
            f"{eps['mean'].iloc[0]:.2f} against {eps['mean'].iloc[-1]:.2f} at $q = {high['q']:g}$, for a "
            f"{METRIC_NAMES[metric]} of {low['mean']:.3f} against {high['mean']:.3f}"
        )
        if metric != "accuracy":
            text += (
                f" (accuracy {accuracy['mean'].iloc[0]:.3f} against {accuracy['mean'].iloc[-1]:.3f}: a balanced "
                "accuracy of one half is what always predicting the majority class scores)"
            )
        sentences.append(text + ".")
    stored = {run["params"]["dataset"] for run in results.runs}
    for dataset in dict.fromkeys(
        run["params"]["dataset"] for run in data.get(in_part("user_sampling"), results).runs
    ):
        if dataset not in stored or results.profile != "paper":
            sentences += in_part_findings(data, dataset)
    sentences.append(verdict_sentence("user_sampling", data))
    return sentences


def _claims_of(grid: str) -> list:
    keys = {"mnist": ("mnist", MNIST_SHORT, MNIST_ACCOUNTING)}.get(grid, (grid,))
    return [claim for claim in CLAIMS if set(claim.grids) & set(keys)]


def _view(grid: str, data: Mapping[str, ResultSet]) -> dict[str, ResultSet]:
    keys = {"mnist": ("mnist", MNIST_SHORT, MNIST_ACCOUNTING)}.get(grid, (grid,))
    return {name: results for name, results in data.items() if name in keys}


def verdict_sentence(grid: str, data: Mapping[str, ResultSet]) -> str:
    """The verdicts of the paper's claims that read ``grid``'s figure, judged on its results alone, counted."""
    view = _view(grid, data)
    verdicts = [judge(claim, view).verdict for claim in _claims_of(grid)]
    counts = [
        f"{verdicts.count(v)} {VERDICT_WORDS[v][verdicts.count(v) > 1]}"
        for v in VERDICTS
        if v in verdicts
    ]
    joined = counts[0] if len(counts) == 1 else f"{', '.join(counts[:-1])} and {counts[-1]}"
    return f"Of the paper's {len(verdicts)} claims that read this figure, judged on its results alone, {joined}."


#: The findings function of each experiment chapter's grid.
CHAPTER_FINDINGS: dict[str, Callable[[Mapping[str, ResultSet]], list[str]]] = {
    "creditcard": lambda data: privacy_utility_findings("creditcard", data),
    "mnist": mnist_findings,
    "heart_disease": lambda data: privacy_utility_findings("heart_disease", data),
    "tcga_brca": lambda data: privacy_utility_findings("tcga_brca", data),
    "weighting": weighting_findings,
    "user_sampling": user_sampling_findings,
}


def findings_box(grid: str, data: Mapping[str, ResultSet]) -> str:
    """The findings of ``grid``'s chapter as a MyST admonition (``"not measured"`` sentences where the results are
    missing).

    Raises:
        ValueError: ``grid`` has no chapter findings (the message lists those that have).
    """
    if grid not in CHAPTER_FINDINGS:
        raise ValueError(
            f"no findings for grid {grid!r}; grids with findings: {', '.join(CHAPTER_FINDINGS)}"
        )
    try:
        sentences = CHAPTER_FINDINGS[grid](data)
    except NotMeasured as missing:
        sentences = [f"Not measured: {missing}."]
    return ":::{admonition} Findings\n:class: tip\n" + " ".join(sentences) + "\n:::"


def conclusions(grid: str, data: Mapping[str, ResultSet]) -> str:
    """What to conclude from ``grid``'s figure: per claim of the paper that reads it, its verdict (a coloured badge),
    the claim and the effect measured (the median difference over settings, or the finding's sentence), judged on
    the figure's results alone. Claims that are not measured are named together at the end."""
    view = _view(grid, data)
    lines, missing = [], []
    for claim in _claims_of(grid):
        finding = judge(claim, view)
        if finding.verdict == MISSING:
            missing.append(claim.text.rstrip("."))
            continue
        if finding.gaps:
            means = [gap.mean for _, gap in finding.gaps]
            effect = (
                f"{finding.measure}: median {np.median(means):+.3f} over {len(means)} setting(s), from "
                f"{min(means):+.3f} to {max(means):+.3f}, threshold {finding.threshold:+g}"
            )
        else:
            effect = finding.measured
        lines.append(f"- {badge(finding.verdict)} {claim.text} ({effect}.)")
    if missing:
        lines.append(
            f"- {badge(MISSING)} " + "; ".join(missing) + " (the results they need are not stored)."
        )
    return "\n".join(lines)
