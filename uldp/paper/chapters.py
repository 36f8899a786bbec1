"""What the experiment chapters (``book/exp_*.py``) show, one call per figure, table and paragraph.

Every experiment chapter of the book reproduces one figure of the paper's Section 5 (Figures 4-10): where its results
come from, what ran, the figure, the final values, the paper's claims judged on the Scorecard's results, and what to
conclude. :class:`ExperimentChapter` computes each of these from stored results, so that a chapter only narrates and
every profile-dependent sentence, timing and verdict is computed, never typed.

The verdicts come from :func:`uldp.paper.scorecard.stored_results` and :func:`uldp.paper.scorecard.scorecard`, the
very calls of
the Scorecard chapter: a chapter shows the Scorecard's rows for its grid, not verdicts of its own.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import re
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from IPython.display import Markdown, display

from uldp import simulation
from uldp.data import DATASETS
from uldp.models import build_model
from uldp.paper import experiments, plots, scorecard
from uldp.paper.experiments import ChapterResults, ResultSet, duration
from uldp.paper.experiments.keys import UNIFORM_SCHEMES
from uldp.paper.settings import paper_seeds
from uldp.paper.verdicts import (
    HOLDS,
    MISSING,
    VERDICT_WORDS,
    NotMeasured,
    badge,
    per_setting,
    profile_label,
    readable_number,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from matplotlib.figure import Figure

    from uldp.data import FederatedDataset
    from uldp.simulation import RunConfig

#: A final utility within this distance of a trivial predictor's (:func:`chance_level`) is "trivial".
TRIVIAL_MARGIN = 0.02
#: A spread (standard deviation over seeds) of the final utility at least this large is worth explaining.
LARGE_SPREAD = 0.05
#: Per-round metrics whose chance level does not depend on the classes' shares: balanced accuracy, the C-index.
CHANCE_METRICS = ("balanced_accuracy", "c_index")


def _markdown_value(value: Any) -> str:
    return "-" if value is None else f"{value:g}" if isinstance(value, float) else str(value)


def chance_metric(results: ResultSet) -> str | None:
    """The stored metric of ``results`` whose trivial level does not depend on the classes' shares (balanced
    accuracy, else the C-index), or ``None``.

    A classifier that always answers the majority class has an accuracy equal to that class's share (0.909 on the
    Creditcard subset) but a balanced accuracy of 1/K for K classes; a constant or random survival score has a
    C-index of 0.5.
    """
    for metric in CHANCE_METRICS:
        if any(run["result"].get(metric) for run in results.runs):
            return metric
    return None


def chance_level(results: ResultSet, metric: str) -> float:
    """The value of ``metric`` for a predictor that ignores its input: 0.5 for the C-index, 1/K for the balanced
    accuracy of K classes (K from the output size of the dataset's model, :func:`uldp.models.build_model`; a single
    output is a binary classifier).

    Raises:
        ValueError: ``metric`` is not one of :data:`CHANCE_METRICS`, or the results mix datasets.
    """
    if metric not in CHANCE_METRICS:
        raise ValueError(
            f"metric {metric!r} has no input-free chance level; allowed: {', '.join(CHANCE_METRICS)}"
        )
    if metric == "c_index":
        return 0.5
    datasets = {run["params"]["dataset"] for run in results.runs}
    if len(datasets) != 1:
        raise ValueError(
            f"results of grid {results.grid!r} mix datasets {sorted(datasets)}; give one dataset"
        )
    outputs = list(build_model(datasets.pop()).parameters())[-1].numel()
    return 1.0 / max(2, outputs)


def per_seed(results: ResultSet, metric: str) -> pd.DataFrame:
    """The final value of ``metric`` of every stored run: columns ``panel, series, seed, value``.

    Raises:
        NotMeasured: No stored runs, or the metric is absent.
    """
    if not results.runs:
        raise NotMeasured(f"no stored results for grid {results.grid!r}")
    frame = results.frame()
    if metric not in frame:
        raise NotMeasured(f"grid {results.grid!r} has no {metric!r} values")
    frame = frame.dropna(subset=[metric]).sort_values("round", kind="stable")
    final = frame.groupby(["panel", "series", "seed"], sort=False)[metric].last()
    return final.rename("value").reset_index()


def _metric_label(metric: str) -> str:
    return plots.LABELS.get(metric, metric.replace("_", " "))


def trivial_runs(results: ResultSet) -> list[str]:
    """Sentences naming each line whose final balanced accuracy or C-index, at some seed, is at most its
    :func:`chance_level` + :data:`TRIVIAL_MARGIN` (the level of a predictor that ignores its input), once for a
    line whose runs every panel shares; then the seeds at which several lines of one panel fail together (what
    the seed shares between methods, rather than one method's noise)."""
    metric = chance_metric(results)
    if metric is None:
        return []
    finals = per_seed(results, metric)
    datasets = {run["params"]["dataset"] for run in results.runs}
    if (
        metric == "balanced_accuracy" and len(datasets) > 1
    ):  # one chance level per dataset: conclude per dataset
        return [
            sentence
            for dataset in sorted(datasets)
            for sentence in trivial_runs(_of_dataset(results, dataset))
        ]
    chance = chance_level(results, metric)
    below = "the model ranks the wrong way round" if metric == "c_index" else "worse than guessing"
    low = finals[finals["value"] <= chance + TRIVIAL_MARGIN]
    shared = shared_runs(results)
    sentences, told = [], set()
    for (series, panel), rows in low.groupby(["series", "panel"], sort=False):
        if series in told and series in shared:
            continue
        told.add(series)
        seeds = finals[(finals["series"] == series) & (finals["panel"] == panel)]
        lowest = rows["value"].min()
        level = (
            f"at the level of a predictor that ignores its input ({chance:.3g})"
            if lowest >= chance - TRIVIAL_MARGIN
            else f"below the {chance:.3g} of a predictor that ignores its input: {below}"
        )
        where = "every setting (the same runs)" if series in shared else panel
        when = (
            f"at every one of its {len(seeds)} seed(s)"
            if len(rows) == len(seeds)
            else f"at {len(rows)} of {len(seeds)} seeds (seed {', '.join(map(str, rows['seed']))})"
        )
        best = (
            "" if len(rows) == len(seeds) else f"; its best seed reaches {seeds['value'].max():.3f}"
        )
        sentences.append(
            f"**{series}** ({where}): final {_metric_label(metric)} down to {lowest:.3f} {when}, "
            f"{level}{best}."
        )
    for panel, rows in low[low["series"] == "DEFAULT"].groupby("panel", sort=False):
        if len(rows) == len(finals[(finals["series"] == "DEFAULT") & (finals["panel"] == panel)]):
            sentences.append(
                f"In {panel}, DEFAULT, which adds no noise, ends at the trivial level at every seed: "
                "these runs train too little for any method to learn, so no method's noise explains "
                "its own trivial result here."
            )
    for (panel, seed), rows in low.groupby(["panel", "seed"], sort=False):
        if rows["series"].nunique() >= 3:
            blind = [series for series in rows["series"] if series in shared]
            cause = (
                f"since {', '.join(blind)} does not read the users, not the allocation but what else the seed "
                "fixes (the initial model and the random streams)"
                if blind
                else "its allocation of users, its initial model and its random streams"
            )
            sentences.append(
                f"In {panel} at seed {seed}, {rows['series'].nunique()} methods end at or below the "
                f"trivial level together ({', '.join(rows['series'])}): what this seed shares between "
                f"methods is the likelier cause than any one method's noise; {cause}."
            )
    return sentences


def _of_dataset(results: ResultSet, dataset: str) -> ResultSet:
    """The runs of ``results`` on one dataset (the user-sampling and weighting grids mix two)."""
    return results.restricted(run for run in results.runs if run["params"]["dataset"] == dataset)


def spread_runs(results: ResultSet, metric: str) -> list[str]:
    """Sentences naming each line whose final ``metric`` has a standard deviation over seeds of at least
    :data:`LARGE_SPREAD`, with its range, and the same line's spread in the other panels for comparison."""
    try:
        table = per_setting(results, metric)
    except NotMeasured:
        return []
    finals = per_seed(results, metric)
    shared = shared_runs(results)
    sentences = []
    told: set[str] = set()
    for row in table[table["std"] >= LARGE_SPREAD].itertuples():
        if row.series in told and row.series in shared:
            continue
        told.add(row.series)
        values = finals[(finals["series"] == row.series) & (finals["panel"] == row.panel)]["value"]
        others = table[(table["series"] == row.series) & (table["panel"] != row.panel)]
        elsewhere = "; ".join(f"{other.panel}: {other.std:.3f}" for other in others.itertuples())
        sentences.append(
            f"**{row.series}** ({row.panel}): std {row.std:.3f} over {row.seeds} seeds, from "
            f"{values.min():.3f} to {values.max():.3f}"
            + (
                " (the same runs in every setting)"
                if row.series in shared
                else f" (std elsewhere: {elsewhere})"
                if elsewhere
                else ""
            )
            + "."
        )
    return sentences


def shared_runs(results: ResultSet) -> list[str]:
    """The lines whose runs are the same in every panel (one stored run shown several times): methods whose result
    cannot depend on the users, on a dataset whose silos are fixed
    (:func:`uldp.paper.experiments.effective_arguments`)."""
    panels_of: dict[tuple[str, str], set[str]] = {}
    for run in results.runs:
        panels_of.setdefault((run["series"], run["key"]), set()).add(run["panel"])
    n_panels = len({run["panel"] for run in results.runs})
    shared = dict.fromkeys(
        series
        for (series, _), panels in panels_of.items()
        if n_panels > 1 and len(panels) == n_panels
    )
    return list(shared)


def run_time(results: ResultSet) -> tuple[float, float, int]:
    """Total and mean wall-clock seconds of the distinct stored runs, and their number (a shared run counts once)."""
    distinct = {run["key"]: run for run in results.runs}.values()
    seconds = [run["provenance"]["wall_seconds"] for run in distinct]
    return float(sum(seconds)), float(sum(seconds) / max(len(seconds), 1)), len(seconds)


def scale_sentence(results: ResultSet) -> str:
    """How far ``results`` are from the paper's scale, computed from the grid's profiles: rounds, seeds, users."""
    paper = experiments.expand(results.grid, "paper")
    ran = [run["params"] for run in results.runs]
    seeds = sorted({run["seed"] for run in results.runs})
    label = profile_label(results)
    if results.profile == "paper":
        readable = (
            "so the numbers can be read against its figure"
            if label == "paper"
            else "on data other than the paper's (the Creditcard subset, richer in frauds): compare the methods "
            "with one another, not the numbers with the paper's figure"
        )
        return (
            f"These results ran at the paper's settings (scale: **{label}**), {len(seeds)} seed(s) of the "
            f"{len(paper_seeds(results.grid))} of its paper profile, {readable}."
        )
    if results.profile == "short":
        return (
            "These are **short**-profile results: the paper's federations whole (users, silos, allocations, "
            "hyperparameters, test set) with fewer rounds and local epochs. They show the start of the paper's "
            "curves: compare federations with each other, not the accuracies with the paper's."
        )
    rounds = sorted({params["rounds"] for params in ran})
    paper_rounds = sorted({spec.kwargs["rounds"] for spec in paper})
    users = sorted({params["n_users"] for params in ran})
    paper_users = sorted({spec.kwargs["n_users"] for spec in paper})
    return (
        f"These are **{label}**-profile results: {'/'.join(map(str, rounds))} round(s) instead of the paper's "
        f"{'/'.join(map(str, paper_rounds))}, users {'/'.join(map(str, users))} instead of "
        f"{'/'.join(map(str, paper_users))}, {len(seeds)} seed(s) instead of {len(experiments.PAPER_SEEDS)}. "
        "They show that the chapter runs, not what the paper's figure shows: read shapes, not numbers, and do "
        "not read the verdicts as the paper's."
    )


@dataclass(frozen=True)
class ExperimentChapter:
    """The results of one experiment chapter and everything it shows from them.

    Attributes:
        grid: The grid of the chapter's figure (a key of :data:`uldp.paper.experiments.GRIDS`).
        profile: The chapter's profile (its papermill parameter).
        shown: What :func:`uldp.paper.experiments.chapter_results` gave: the results shown and where they come from.
        verdict_data: The Scorecard's results, :func:`uldp.paper.scorecard.stored_results` at ``profile``.
    """

    grid: str
    profile: str
    shown: ChapterResults
    verdict_data: Mapping[str, ResultSet]

    @classmethod
    def load(cls, grid: str, profile: str, **roots: Any) -> ExperimentChapter:
        """Produce (or read) the chapter's results, then read the Scorecard's.

        Args:
            grid: A key of :data:`uldp.paper.experiments.GRIDS`.
            profile: ``smoke``, ``default`` or ``paper``.
            **roots: ``paper_root`` and ``root`` for :func:`uldp.paper.experiments.chapter_results`, and ``short_root``
                for :func:`uldp.paper.scorecard.stored_results` (tests point them at temporary folders).

        Raises:
            ValueError: Unknown grid or profile.
        """
        paper_root, root = roots.get("paper_root"), roots.get("root")
        shown = experiments.chapter_results(grid, profile, paper_root=paper_root, root=root)
        data = scorecard.stored_results(
            profile, paper_root=paper_root, root=root, short_root=roots.get("short_root")
        )
        return cls(grid, profile, shown, data)

    @property
    def results(self) -> ResultSet:
        """The results the chapter's main figure shows."""
        return self.shown.results

    def result_sets(self) -> list[ResultSet]:
        """The results to show, the paper's scale first: the paper-profile panels when only some are stored, then the
        chapter's own results."""
        return ([self.shown.paper_panels] if self.shown.paper_panels is not None else []) + [
            self.results
        ]

    def introduction(self, *, what_ran: bool = True) -> None:
        """Display where the results come from, their scale and the profile the chapter was built at, then, unless
        ``what_ran`` is false, what ran (:meth:`what_ran`)."""
        display(
            Markdown(
                f"{self.shown.note}\n\nThis page was built at the **{self.profile}** profile; the results "
                f"it shows are at the scale **{profile_label(self.results)}**."
            )
        )
        if what_ran:
            display(
                Markdown(
                    "**What ran**: what every run shares, the settings (one row or panel of the figure "
                    "each) and the seeds, then the run arguments that differ between lines (a cell "
                    '"a / b" lists the values of different settings).'
                )
            )
            self.what_ran()

    def what_ran(self) -> None:
        """Display the settings of the runs shown (:func:`show_grid_settings` at their profile)."""
        show_grid_settings(self.grid, self.results.profile)

    def show_figures(
        self,
        draw: Callable[[ResultSet], Figure],
        figure: str,
        metric: str | None = None,
        look: str = "",
        *,
        per_panel: bool = True,
    ) -> None:
        """Display ``draw`` of each result set (:meth:`result_sets`) as captioned figures (:func:`show_figure`, with
        ``look`` and ``per_panel``), each followed by its final values (:func:`show_final_table` of ``metric``,
        default the dataset's utility metric)."""
        for index, results in enumerate(self.result_sets()):
            if index and results.profile != "paper":
                display(Markdown(own_runs_note(results)))
            show_figure(results, draw, figure, look, per_panel=per_panel)
            show_final_table(results, metric)

    def final_tables(self, metric: str | None = None) -> None:
        """Display the final values of each result set (:func:`show_final_table`)."""
        for results in self.result_sets():
            show_final_table(results, metric)

    def claims(self, grid: str | None = None) -> Any:
        """The Scorecard's rows for the claims that read ``grid`` (default: this chapter's), as the Scorecard's tab
        of this dataset judges them (:func:`view_scorecard`: a claim about several figures on this one alone),
        beside the verdict over all results; a table that shows each text whole."""
        grid = grid or self.grid
        view = next(view for view in SCORECARD_VIEWS if grid in view.grids)
        overall = scorecard.scorecard(self.verdict_data, grid=grid).set_index("key")["verdict"]
        rows = view_scorecard(self.verdict_data, view)
        rows = rows[rows["key"].isin(overall.index)].assign(
            overall=lambda frame: frame["key"].map(overall)
        )
        shown = rows[["where", "claim", "measured", "verdict", "overall", "source"]].rename(
            columns={"verdict": f"verdict on {view.title}", "overall": "verdict over all results"}
        )
        return shown.style.hide(axis="index")

    def conclusions(self, also: Sequence[ResultSet] = ()) -> Markdown:
        """ "What to conclude": the scale of the results, every trivial-level run, large seed spread and shared run,
        the run time and the verdicts, each computed from the results shown and the Scorecard's rows.

        Args:
            also: Other results the chapter shows (MNIST's short profile), concluded on in the same way.
        """
        parts = []
        shown = [*self.result_sets(), *also]
        for results in sorted(
            shown, key=lambda results: -experiments.PROFILES.index(results.profile)
        ):
            if not results.runs:
                continue
            parts.append(
                f"**{results.grid}, {profile_label(results)}.** " + scale_sentence(results)
            )
            parts += _conclude_utility(results)
            total, mean, count = run_time(results)
            parts.append(
                f"Run time: {count} distinct run(s), {duration(total)} in all, {duration(mean)} each on "
                "average (the machines are in each run's provenance, above)."
            )
        verdicts = scorecard.scorecard(self.verdict_data, grid=self.grid)["verdict"]
        counted = ", ".join(
            f"{count} {verdict}" for verdict, count in verdicts.value_counts().items()
        )
        if len(verdicts):
            held = int((verdicts == HOLDS).sum())
            parts.append(
                f"Claims: of the {len(verdicts)} claim(s) of the paper that read this figure, {counted} "
                f"(the Scorecard's verdicts, {held} holding)."
                + (
                    " A claim reads *not measured* where the results it needs are not stored."
                    if (verdicts == MISSING).any()
                    else ""
                )
            )
        return Markdown("\n\n".join(parts))


def _conclude_utility(results: ResultSet) -> list[str]:
    """The surprising numbers of ``results``: runs at a trivial level, large seed spreads, shared runs."""
    parts = []
    trivial = trivial_runs(results)
    if trivial:
        parts.append(
            "Runs at the level of a trivial predictor (where only some seeds end there, the mean over seeds "
            "hides it: those seeds pull the mean down and the std up):\n\n"
            + "\n".join(f"- {s}" for s in trivial)
        )
    metric = scorecard_metric(results)
    told = {
        sentence.split(":")[0] for sentence in trivial
    }  # "**series** (panel)": said once, in the list above
    spread = [
        sentence for sentence in spread_runs(results, metric) if sentence.split(":")[0] not in told
    ]
    if spread:
        parts.append(
            f"Large spread over seeds (std of the final {_metric_label(metric)} at least "
            f"{LARGE_SPREAD}):\n\n" + "\n".join(f"- {s}" for s in spread)
        )
    shared = shared_runs(results)
    if shared:
        parts.append(
            f"The same numbers in every setting for {', '.join(shared)}: their result cannot depend on the "
            "users (training is per silo on silos fixed by the dataset), so one stored run per seed serves "
            "every panel (`uldp.paper.experiments.effective_arguments`)."
        )
    return parts


def scorecard_metric(results: ResultSet) -> str:
    """The utility metric the Scorecard reads for ``results`` (accuracy, or the C-index for survival data)."""
    datasets = {run["params"]["dataset"] for run in results.runs}
    metrics = {experiments.UTILITY_METRIC.get(dataset, "accuracy") for dataset in datasets}
    return metrics.pop() if len(metrics) == 1 else "accuracy"


def own_runs_note(results: ResultSet) -> str:
    """What a chapter's own small runs, shown after the paper-scale ones, are for."""
    return (
        f"**This build's own runs, at the {results.profile} profile.** They check that the chapter runs end to "
        "end on every setting of the figure, including those not stored at the paper's scale; they are far "
        "smaller than the paper's runs, so read their shapes, not their numbers or verdicts."
    )


def captioned(fig: Figure, caption: str) -> Markdown:
    """``fig`` as a numbered figure of the page with ``caption`` below it (MyST: maths and links render), closed.

    The image is embedded as a PNG data address, so the page needs no file beside it. The figure's label is
    ``fig-`` and a hash of image and caption: the same in every build of the same figure, and distinct between
    figures, as Sphinx needs of labels.

    Example:
        >>> import matplotlib.pyplot as plt
        >>> captioned(plt.figure(figsize=(1, 1)), "Look at $\\epsilon$.").data.startswith("````{figure} data:image/png")
        True
    """
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", bbox_inches="tight")
    plt.close(fig)
    image = base64.b64encode(buffer.getvalue()).decode("ascii")
    name = "fig-" + hashlib.sha256(f"{image}{caption}".encode()).hexdigest()[:12]
    return Markdown(
        f"````{{figure}} data:image/png;base64,{image}\n:name: {name}\n\n{caption}\n````"
    )


def show_captioned(fig: Figure, caption: str) -> None:
    """Display ``fig`` as a numbered figure with ``caption`` (:func:`captioned`)."""
    display(captioned(fig, caption))


def show_figure(
    results: ResultSet,
    draw: Callable[[ResultSet], Figure],
    figure: str,
    look: str = "",
    *,
    per_panel: bool = True,
) -> None:
    """Display ``draw`` of ``results`` as numbered figures, one per setting (panel) unless ``per_panel`` is false,
    each captioned with the setting, the scale (the paper's figure only for paper-profile results, "a stand-in"
    otherwise) and ``look``, what to look at.

    Args:
        results: Stored results.
        draw: A figure function of :mod:`uldp.paper.plots` (or :func:`balanced_accuracy_figure`).
        figure: The paper's figure, e.g. ``"Figure 4"``.
        look: What the reader should look at (MyST markdown), the same for every setting.
        per_panel: One figure per setting (the figures of :func:`uldp.paper.plots.metric_grid`, a row each);
            false for a figure whose panels are drawn side by side.
    """
    if not results.runs:
        display(Markdown(f"No stored {results.profile}-profile runs to draw for {figure}."))
        return
    label = profile_label(results)
    what = (
        f"{figure}, reproduced at the scale **{label}**"
        if results.profile == "paper"
        else f"A **{label}**-profile stand-in for {figure}: far smaller runs than the paper's, not its figure"
    )
    panels = list(dict.fromkeys(run["panel"] for run in results.runs))
    for group in ([panel] for panel in panels) if per_panel and len(panels) > 1 else [panels]:
        where = f", {group[0]}" if len(group) == 1 and len(panels) > 1 else ""
        show_captioned(draw(results.only_panels(group)), f"{what}{where}. {look}".strip())


def show_final_table(results: ResultSet, metric: str | None = None) -> None:
    """Display the final values (mean ± std over seeds, and epsilon) of ``results``, one row per line and one
    column per setting (:func:`uldp.paper.scorecard.final_table`, transposed so that it fits the page)."""
    if results.runs:
        display(
            Markdown(
                f"Final {_metric_label(metric or scorecard_metric(results))} (mean ± std over seeds) "
                f"and user-level ε, scale {profile_label(results)}:"
            ),
            scorecard.final_table(results, metric).T,
        )


def balanced_accuracy_figure(results: ResultSet) -> Figure:
    """The balanced accuracy of each line per setting (the authors' ROC-AUC of hard labels), titled with the
    dataset and the scale of the results."""
    datasets = sorted({run["params"]["dataset"] for run in results.runs})
    return plots.metric_grid(
        results,
        ["balanced_accuracy"],
        title=f"Balanced accuracy: {', '.join(datasets)} ({profile_label(results)})",
    )


def final_epsilon_table(results: ResultSet) -> Any:
    """The mean final epsilon of each line (columns) per setting (rows), e.g. of
    :func:`uldp.paper.experiments.accounted_results`."""
    final = per_setting(results, "epsilon")
    order = list(dict.fromkeys(final["series"]))
    return final.pivot(index="panel", columns="series", values="mean")[order].style.format(
        readable_number
    )


def short_profile_note(results: ResultSet) -> Markdown:
    """What a ``short``-profile result set is, computed from its grid's reduction and its runs: rounds and local
    epochs against the paper's, the work per run as a share of the paper's, and the time per run and per round."""
    if not results.runs:
        return Markdown(f"No short-profile results of grid {results.grid!r} are stored.")
    paper = experiments.expand(results.grid, "paper")
    short_params = [run["params"] for run in results.runs]

    def work(params: Mapping[str, Any]) -> float:
        return params["rounds"] * (params.get("local_epochs") or 1)

    paper_work = {(s.panel, s.series): work(s.kwargs) for s in paper}
    ratio = sum(
        paper_work[(run["panel"], run["series"])] / work(run["params"]) for run in results.runs
    ) / len(results.runs)
    rounds = sorted({p["rounds"] for p in short_params})
    epochs = sorted({p.get("local_epochs") for p in short_params if p.get("local_epochs")})
    per_run = [run["provenance"]["wall_seconds"] for run in results.runs]
    per_round = [
        sum(run["result"]["seconds"]) / len(run["result"]["seconds"]) for run in results.runs
    ]
    return Markdown(
        f"The short profile trains {'/'.join(map(str, rounds))} rounds of {'/'.join(map(str, epochs))} local "
        f"epoch(s): about 1/{ratio:.0f} of the paper's work per run. Its {len(per_run)} runs took "
        f"{duration(min(per_run))} to {duration(max(per_run))} each ({duration(min(per_round))} to "
        f"{duration(max(per_round))} a round); at that pace one paper-profile run would take about "
        f"{duration(ratio * sum(per_run) / len(per_run))}."
    )


def weighting_gap_table(data: Mapping[str, ResultSet]) -> pd.DataFrame:
    """Final test loss of ULDP-AVG minus that of ULDP-AVG-w (:func:`uldp.paper.scorecard.weighting_gaps`), one row per
    dataset and silo count, one column per allocation of the figure (the authors' uniform draws of the medical
    datasets, ``uniform-with-replacement``, in the uniform column, as the figure has them).

    Raises:
        NotMeasured: The weighting results are missing.
    """
    gaps = scorecard.weighting_gaps(data)
    gaps["distribution"] = gaps["distribution"].where(
        ~gaps["distribution"].isin(UNIFORM_SCHEMES), "uniform"
    )
    return gaps.pivot_table(index=["dataset", "n_silos"], columns="distribution", values="gap")


def show_runtime(chapter: ExperimentChapter) -> None:
    """Display, for each of the chapter's result sets, Figure 10 (:func:`uldp.paper.plots.runtime_figure`) under a
    caption
    naming its profile, then the seconds per part of the private weighting protocol
    (:func:`uldp.paper.plots.runtime_table`)
    computed from the runs' own timings."""
    for results in chapter.result_sets():
        show_figure(
            results,
            plots.runtime_figure,
            "Figure 10",
            "The left panel is a silo's round; the right, what the protocol adds once and per round.",
            per_panel=False,
        )
        if results.runs:
            display(
                Markdown(f"Seconds per part of the protocol, scale {profile_label(results)}:"),
                plots.runtime_table(results).round(3),
            )


def show_stored_runtime() -> None:
    """Display the committed paper-profile protocol-runtime runs (Figure 10's grid): the seconds per part of the
    protocol (:func:`uldp.paper.plots.runtime_table`), then per dataset and user count the encrypted weighting against
    the
    local training, and the server's round against a silo's; or say that none are committed."""
    stored = experiments.load_results("protocol_runtime", "paper")
    if not stored.runs:
        print("no committed protocol_runtime results in this checkout")
        return
    table = plots.runtime_table(stored)
    display(
        table[
            [
                "parameters",
                "local training per silo",
                "encrypted weighting per silo",
                "aggregation",
                "key set-up",
                "blinded histogram",
            ]
        ].round(3)
    )
    lines = [
        f"- {dataset}, {users} users: local training {row['local training per silo']:.2f} s and encrypted "
        f"weighting {row['encrypted weighting per silo']:.2f} s per silo (the weighting "
        f"{row['encrypted weighting per silo'] / row['local training per silo']:.1f}x the training); the server "
        f"{row['aggregation']:.2f} s per round "
        f"({'more' if row['aggregation'] > row['training per silo'] else 'less'} than a silo's "
        f"{row['training per silo']:.2f} s)"
        for (dataset, users), row in table.iterrows()
    ]
    display(Markdown("\n".join(lines)))


def show_grid_settings(grid_name: str, profile: str) -> None:
    """Display the run arguments every run of a grid shares at ``profile``, its settings (panels) and seeds, as a
    Markdown list, then each line's run arguments that differ between lines
    (:func:`uldp.paper.experiments.grid_table`; a
    cell "a / b" lists the values of different settings).

    Raises:
        ValueError: Unknown grid or profile.
    """
    table = experiments.grid_table(grid_name, profile)
    shared = ", ".join(
        f"`{name}` = {_markdown_value(value)}" for name, value in table.attrs["constant"].items()
    )
    display(
        Markdown(
            f"- every run: {shared}\n- settings (panels): {'; '.join(table.attrs['panels'])}\n"
            f"- seeds: {', '.join(map(str, table.attrs['seeds']))}"
        ),
        table,
    )


def benchmark_result(name: str) -> dict[str, Any]:
    """The committed result of ``benchmarks/<name>.py`` (``benchmarks/results/<name>.json``, written with its
    provenance by ``benchmarks/save.py``): ``{"provenance": ..., "results": ...}``.

    Raises:
        FileNotFoundError: No committed result of that name (the message says how to make it).
    """
    path = experiments.REPO_ROOT / "benchmarks" / "results" / f"{name}.json"
    if not path.is_file():
        raise FileNotFoundError(
            f"no committed benchmark result {path}; run `python benchmarks/save.py {name}`"
        )
    with open(path, encoding="utf-8") as handle:
        return dict(json.load(handle))


def datasets_table() -> pd.DataFrame:
    """The datasets of the paper's experiments as :mod:`uldp.data` registers them and :mod:`uldp.models` builds
    their models: silos, whether the silos are fixed by the data, the model's parameter count and the utility
    metric of the figures."""
    rows = []
    for name, spec in DATASETS.items():
        model = build_model(name)
        rows.append(
            {
                "dataset": name,
                "description": spec.description,
                "silos": spec.default_silos,
                "silos fixed by the data": spec.fixed_silos,
                "model": type(model).__name__,
                "parameters": sum(p.numel() for p in model.parameters()),
                "metric": experiments.UTILITY_METRIC.get(name, "accuracy"),
            }
        )
    return pd.DataFrame(rows).set_index("dataset")


def figures_table() -> pd.DataFrame:
    """Every grid: the paper's figure it reproduces, what it shows, and how many runs its paper profile has."""
    return pd.DataFrame(
        [
            {
                "grid": name,
                "figure": grid.figure,
                "shows": grid.title,
                "paper-profile runs": len(experiments.expand(name, "paper")),
            }
            for name, grid in experiments.GRIDS.items()
        ]
    ).set_index("grid")


#: What a missing value of :func:`compare_runs`'s table means, per column.
COMPARE_MISSING = {"epsilon": "no guarantee", "k": "no group", "records used": "all"}


def compare_runs(configs: Mapping[str, RunConfig], *, title: str) -> pd.DataFrame:
    """Run each configuration (:func:`uldp.simulation.run`), display their test loss, accuracy and user-level
    epsilon per round side by side, then their final values (missing ones in words), and return those: one short
    comparison for the method chapters.

    Args:
        configs: ``{label: RunConfig}``, in legend order.
        title: The figure's title (say the profile and scale).

    Returns:
        One row per label: final ``test loss``, ``accuracy``, ``epsilon`` (``None`` for DEFAULT), the group size
        ``k`` and ``records used`` where the method has them, and the run's ``seconds``.
    """
    results = {label: simulation.run(config) for label, config in configs.items()}
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    for index, (label, result) in enumerate(results.items()):
        # one colour and marker per run in every panel (DEFAULT has no epsilon line: no shift of the colour cycle)
        style = {
            "label": label,
            "color": f"C{index % 10}",
            "marker": "os^vDPX*"[index % 8],
            "markevery": max(1, len(result.round) // 8),
        }
        axes[0].plot(result.round, result.test_loss, **style)
        axes[1].plot(result.round, result.accuracy, **style)
        if result.epsilon and result.epsilon[0] is not None:
            axes[2].semilogy(result.round, result.epsilon, **style)
    for ax, label in zip(axes, ("test loss", "test accuracy", "user-level epsilon"), strict=True):
        ax.set_xlabel("round")
        ax.set_ylabel(label)
    axes[0].legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    show_captioned(
        fig,
        f"{title}. Test loss, accuracy and user-level $\\epsilon$ (log scale) per round of each run; "
        "the final values follow.",
    )
    table = pd.DataFrame(
        [
            {
                "run": label,
                "test loss": result.test_loss[-1],
                "accuracy": result.accuracy[-1],
                "epsilon": result.epsilon[-1],
                "k": result.info.get("group_size"),
                "records used": result.info.get("train_records"),
                "seconds": sum(result.seconds),
            }
            for label, result in results.items()
        ]
    ).set_index("run")
    display(
        table.style.format(
            {
                column: partial(readable_number, missing=COMPARE_MISSING.get(column, "-"))
                for column in table.columns
            }
        )
    )
    return table


#: Where ``benchmarks/save.py secure_protocol`` writes Protocol 1's measurements per backend, round and side.
PROTOCOL_BENCHMARK = experiments.REPO_ROOT / "benchmarks" / "results" / "secure_protocol.json"
#: Bytes of one float32 parameter: what a plain (unprotected) update sends per parameter.
FLOAT32_BYTES = 4


def protocol_scale_table(document: Mapping[str, Any]) -> pd.DataFrame:
    """Per setting (the paper's artificial default, the MNIST CNN, 10^6 parameters) and way of computing it, the
    seconds of a round per side, wall and CPU, and the bytes each silo uploads (from the benchmark's document)."""
    rows = []
    default = document["results"]["default"]
    rows.append(
        {
            "setting": f"artificial default ({default['parameters']} parameters)",
            "backend": "phe",
            "silo s": default["phe"]["silo_s"],
            "server s": default["phe"]["server_s"],
        }
    )
    settings = [
        ("default", f"artificial default ({default['parameters']} parameters)"),
        ("mnist", "MNIST CNN (21840 parameters, projected silo)"),
        ("million", "10^6 parameters (projected)"),
    ]
    for key, label in settings:
        for backend in ("paillier", "packed-paillier"):
            part = document["results"][key][backend]
            rows.append(
                {
                    "setting": label,
                    "backend": backend,
                    "silo s": part["silo_s"],
                    "silo CPU s": part.get("silo_cpu_s"),
                    "server s": part["server_s"],
                    "server CPU s": part.get("server_cpu_s"),
                    "update bytes per parameter": part["update_bytes"]
                    / (
                        document["results"][key]["parameters"]
                        if key != "default"
                        else default["parameters"]
                    ),
                }
            )
    return pd.DataFrame(rows)


def protocol_scale_figure(document: Mapping[str, Any]) -> Figure:
    """The paper's artificial grid per backend: the slowest silo's and the server's seconds of one round."""
    grid = pd.DataFrame(document["results"]["grid"])
    fig, axes = plt.subplots(1, 3, figsize=(14, 3.6), sharey=True)
    for ax, axis in zip(axes, ("parameters", "users", "silos"), strict=True):
        for (backend, side), style in zip(
            [(b, s) for b in ("paillier", "packed-paillier") for s in ("silo_s", "server_s")],
            ("o-", "o--", "s-", "s--"),
            strict=True,
        ):
            rows = grid[(grid.axis == axis) & (grid.backend == backend)]
            ax.plot(rows.value, rows[side], style, label=f"{backend}, {side.split('_')[0]}")
        ax.set_xlabel(f"number of {axis}")
        ax.set_yscale("log")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("seconds per round")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    return fig


def protocol_scale_sentences(document: Mapping[str, Any]) -> str:
    """What the measurements say about the paper's open problem, every number computed from the document."""
    results, source = document["results"], document["provenance"]
    mnist, million = results["mnist"], results["million"]
    packed, plain = mnist["packed-paillier"], mnist["paillier"]
    check = million["packed-paillier"]["check"]
    lines = [
        (
            f"Measured by `{source['command']}` at commit `{source['git_commit'][:10]}` on {source['date'][:10]}, on a "
            f"machine with {source['cpu_count']} CPUs shared with other work (load average "
            f"{results['load_at_start']:.1f} at the start), with {results['processes']} worker processes per side. The "
            f"wall seconds move with the load; the CPU seconds (this process and its workers) are the work itself, and "
            f"on an otherwise idle machine a side's wall time is at most its CPU time plus starting the workers."
        ),
        (
            f"- **The paper's artificial default** ({results['default']['parameters']} parameters, "
            f"{results['default']['users']} users, {results['default']['silos']} silos): the straightforward phe "
            f"sequence's slowest silo took {results['default']['phe']['silo_s']:.1f} s; the paillier backend's "
            f"{results['default']['paillier']['silo_s']:.2f} s "
            f"({results['default']['paillier']['speedup_per_silo_vs_phe']:.0f}x less) and the packed backend's "
            f"{results['default']['packed-paillier']['silo_s']:.2f} s "
            f"({results['default']['packed-paillier']['speedup_per_silo_vs_phe']:.0f}x less). "
            f"On models this small the packed server "
            f"({results['default']['packed-paillier']['server_s']:.2f} s) is slower than the per-parameter "
            f"one ({results['default']['paillier']['server_s']:.2f} s): its rescale costs a decryption and an "
            f"encryption per user, more than the few decryptions it saves."
        ),
        (
            f"- **MNIST CNN round.** The packed backend's server does {packed['server_cpu_s']:.1f} s of CPU work "
            f"({packed['server_s']:.1f} s wall here) against {plain['server_cpu_s']:.1f} s CPU "
            f"({plain['server_s']:.1f} s wall) for one ciphertext per parameter, "
            f"{plain['server_cpu_s'] / packed['server_cpu_s']:.1f}x less; each silo uploads "
            f"{packed['ciphertext_bytes_per_parameter']:.1f} bytes per parameter ({packed['ratio_to_float32']:.1f}x a "
            f"float32) instead of {plain['ciphertext_bytes_per_parameter']:.0f}. A silo's round is "
            f"{packed['silo_cpu_s']:.1f} s CPU against {plain['silo_cpu_s']:.1f} s: packing costs the silo b squarings "
            f"per parameter."
        ),
        (
            f"- **10^6 parameters, projected.** With packing a silo does "
            f"{million['packed-paillier']['silo_cpu_s'] / 60:.1f} min and the server "
            f"{million['packed-paillier']['server_cpu_s'] / 60:.1f} min of CPU work per round; "
            f"without, {million['paillier']['silo_cpu_s'] / 60:.1f} min and "
            f"{million['paillier']['server_cpu_s'] / 60:.1f} min. The projection's check: a silo round of "
            f"{check['users']} users and {check['parameters']} parameters took "
            f"{check['measured_silo_cpu_s']:.1f} s CPU, "
            f"{check['measured_over_projected']:.2f}x the projected {check['projected_silo_cpu_s']:.1f} s."
        ),
        (
            f"- **Exact within P everywhere:** {'yes' if results['exact_within_p'] else 'NO'} (every measured round of "
            f"both backends decodes within P = {results['precision']:g} of the plain weighted sum; the straightforward "
            f"phe sequence and the paillier backend decode to equal floats: "
            f"{results['default']['phe_equals_paillier']})."
        ),
    ]
    return "\n\n".join(lines)


def show_protocol_scale() -> None:
    """Display the committed measurements of ``benchmarks/secure_protocol.py`` (per backend, round and side): the
    table, the artificial grid and the sentences; or say that none are committed."""
    if not PROTOCOL_BENCHMARK.is_file():
        print(f"no committed {PROTOCOL_BENCHMARK.name} in this checkout")
        return
    document = json.loads(PROTOCOL_BENCHMARK.read_text())
    table = protocol_scale_table(document)
    numbers = [column for column in table.columns if column not in ("setting", "backend")]
    # the phe backend's rows carry no CPU seconds: the benchmark did not measure them there
    display(
        table.style.hide(axis="index").format(
            partial(readable_number, missing="not measured"), subset=numbers
        )
    )
    show_captioned(
        protocol_scale_figure(document),
        "Protocol 1's seconds per round on the paper's artificial grid (parameters, users, silos), per "
        "backend and side (log scale): compare the two backends' server lines along each axis.",
    )
    display(Markdown(protocol_scale_sentences(document)))


# ------------------------------------------------------------------------------------- the Scorecard, per dataset


@dataclass(frozen=True)
class ScorecardView:
    """One view of the Scorecard: the claims that read some grids, judged on those grids' results alone.

    Attributes:
        title: The dataset or figure, as a tab of the Scorecard and a name in the opening page's findings.
        chapter: The chapter that shows those results (a document of ``_toc.yml``, relative to ``book/``).
        grids: The grids (keys of :func:`uldp.paper.scorecard.stored_results`) of this view.
    """

    title: str
    chapter: str
    grids: tuple[str, ...]


#: The Scorecard's views: the four privacy-utility datasets, then the other figures of Section 5.
SCORECARD_VIEWS: tuple[ScorecardView, ...] = (
    ScorecardView("Creditcard", "exp_creditcard", ("creditcard",)),
    ScorecardView(
        "MNIST", "exp_mnist", ("mnist", scorecard.MNIST_SHORT, scorecard.MNIST_ACCOUNTING)
    ),
    ScorecardView("HeartDisease", "exp_heart_disease", ("heart_disease",)),
    ScorecardView("TcgaBrca", "exp_tcga_brca", ("tcga_brca",)),
    ScorecardView("Enhanced weighting", "exp_weighting", ("weighting",)),
    ScorecardView("User sub-sampling", "exp_user_sampling", ("user_sampling",)),
    ScorecardView("Protocol runtime", "exp_weighting", ("protocol_runtime",)),
)
#: The claims that carry the paper, in the order the opening page states them.
MAIN_CLAIMS = ("tradeoff", "avg-w-faster", "avg-vs-sgd")


def view_scorecard(data: Mapping[str, ResultSet], view: ScorecardView) -> pd.DataFrame:
    """The Scorecard's rows (:func:`uldp.paper.scorecard.scorecard`) for the claims that read any grid of ``view``,
    each judged on ``view``'s grids alone: a claim about Figures 4-7 is judged on this dataset's settings only."""
    subset = {name: results for name, results in data.items() if name in view.grids}
    keys = [claim.key for claim in scorecard.CLAIMS if set(claim.grids) & set(view.grids)]
    rows = scorecard.scorecard(subset)
    return rows[rows["key"].isin(keys)].reset_index(drop=True)


def _cell(text: str) -> str:
    """``text`` for a cell of a Markdown table (a ``|`` would end the cell)."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def scorecard_markdown(rows: pd.DataFrame, chapters: Mapping[str, str]) -> str:
    """A Markdown table of Scorecard rows: the claim (its figures linked to the chapters that show them), what was
    measured, the verdict as a coloured badge and the results it rests on.

    Args:
        rows: Rows of :func:`uldp.paper.scorecard.scorecard` or :func:`view_scorecard`.
        chapters: Per claim key, the chapters to link (``{key: "[Creditcard](exp_creditcard), ..."}`` is built by
            :func:`claim_chapters`).
    """
    lines = ["| claim | measured | verdict | results |", "|---|---|---|---|"]
    lines += [
        f"| {_cell(row.where)}: {_cell(row.claim)} ({chapters.get(row.key, '')}) | {_cell(row.measured)} | "
        f"{badge(row.verdict)} | {_cell(row.source)} |"
        for row in rows.itertuples()
    ]
    return "\n".join(lines)


def claim_chapters(views: Sequence[ScorecardView] = SCORECARD_VIEWS) -> dict[str, str]:
    """Per claim key, links to the chapters of the views whose grids it reads (``{doc}`` links named by view)."""
    found: dict[str, dict[str, str]] = {}
    for claim in scorecard.CLAIMS:
        for view in views:
            if set(claim.grids) & set(view.grids):
                found.setdefault(claim.key, {})[view.chapter] = view.title
    return {
        key: ", ".join(f"{{doc}}`{title} <{chapter}>`" for chapter, title in links.items())
        for key, links in found.items()
    }


@dataclass(frozen=True)
class Verdicts:
    """The Scorecard judged once for a page: over all results, and per view.

    Attributes:
        overall: :func:`uldp.paper.scorecard.scorecard` of all the results.
        views: Per view of :data:`SCORECARD_VIEWS`, its :func:`view_scorecard`.
    """

    overall: pd.DataFrame
    views: dict[ScorecardView, pd.DataFrame]

    @classmethod
    def judge(cls, data: Mapping[str, ResultSet]) -> Verdicts:
        """Judge every claim on ``data`` (:func:`uldp.paper.scorecard.stored_results`), then per view."""
        return cls(
            scorecard.scorecard(data),
            {view: view_scorecard(data, view) for view in SCORECARD_VIEWS},
        )


def scorecard_tabs(verdicts: Verdicts) -> Markdown:
    """The Scorecard as tabs: every claim over all results first, then one tab per :data:`SCORECARD_VIEWS` view,
    each a table of :func:`scorecard_markdown`, the claims linked to their chapters."""
    links = claim_chapters()
    tabs = [("All results", verdicts.overall)] + [
        (view.title, rows) for view, rows in verdicts.views.items()
    ]
    body = "\n".join(
        f":::{{tab-item}} {title}\n{scorecard_markdown(rows, links)}\n:::" for title, rows in tabs
    )
    return Markdown(f"::::{{tab-set}}\n{body}\n::::")


def _joined(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def claim_findings(verdicts: Verdicts, key: str) -> str:
    """One claim in words: its verdict over all results, then where it holds and where not, dataset by dataset
    (:func:`view_scorecard`), each with what was measured and the scale of the results it rests on.

    Raises:
        ValueError: ``key`` is not a claim of :data:`uldp.paper.scorecard.CLAIMS`.
    """
    claims = {claim.key: claim for claim in scorecard.CLAIMS}
    if key not in claims:
        raise ValueError(f"unknown claim {key!r}; claims: {', '.join(claims)}")
    overall = verdicts.overall.set_index("key").loc[key]
    judged = []
    for view, rows in verdicts.views.items():
        if set(claims[key].grids) & set(view.grids):
            row = rows.set_index("key").loc[key]
            if row["verdict"] != MISSING:
                judged.append((view, row))
    found = dict.fromkeys(row["verdict"] for _, row in judged)
    where = "; ".join(
        f"**{verdict}** on "
        + _joined(
            [
                f"{{doc}}`{view.title} <{view.chapter}>`"
                for view, row in judged
                if row["verdict"] == verdict
            ]
        )
        for verdict in found
    )
    details = "\n".join(
        f"  - {view.title} ({row['source']}): {row['measured']}" for view, row in judged
    )
    return (
        f"- *{overall['claim']}* Over all results: **{overall['verdict']}**; dataset by dataset: {where}.\n"
        f"{details}"
    )


# ------------------------------------------------------------------------------------------- the opening page


def verdict_counts(verdicts: Sequence[str]) -> str:
    """The Scorecard's verdicts counted in a sentence.

    >>> verdict_counts(["holds", "holds", "contradicted", "not measured"])
    "Of the paper's 4 claims, 2 hold, 1 is contradicted and 1 is not measured."
    """
    counts = pd.Series(list(verdicts), dtype=object).value_counts()
    parts = [f"{count} {VERDICT_WORDS[verdict][count > 1]}" for verdict, count in counts.items()]
    return f"Of the paper's {len(verdicts)} claims, {_joined(parts)}."


def main_findings(verdicts: Verdicts) -> Markdown:
    """The claims that carry the paper (:data:`MAIN_CLAIMS`) in words, each where it holds and where not
    (:func:`claim_findings`), ULDP-NAIVE's corrected noise said once."""
    text = "\n".join(claim_findings(verdicts, key) for key in MAIN_CLAIMS)
    naive = f"; {scorecard.NAIVE_NOISE}"
    if naive in text:
        text = text.replace(naive, "") + f"\n\nIn these comparisons {scorecard.NAIVE_NOISE}."
    return Markdown(text)


def limits(data: Mapping[str, ResultSet], creditcard: FederatedDataset) -> Markdown:
    """What the results cannot show, computed: the scale of MNIST's largest stored results
    (:func:`scale_sentence`, :func:`short_profile_note`), and the Creditcard records this book ran on with their
    fraud share (``creditcard``, the dataset as :func:`uldp.data.load` gives it).
    """
    parts = []
    mnist = max(
        (
            results
            for name, results in data.items()
            if name in ("mnist", scorecard.MNIST_SHORT) and results.runs
        ),
        key=lambda results: experiments.PROFILES.index(results.profile),
        default=None,
    )
    if mnist is None:
        parts.append(
            "- **MNIST** has no stored training results: only its $\\epsilon$, from accounting alone."
        )
    else:
        parts.append(
            f"- **MNIST** is the one privacy-utility figure not trained at the paper's scale. "
            f"{scale_sentence(mnist)}"
            + (f" {short_profile_note(mnist).data}" if mnist.profile == "short" else "")
        )
    labels = class_labels(creditcard)
    parts.append(
        f"- **Creditcard** ran on the data this book has offline ({creditcard.variant}): "
        f"{len(labels):,} records, {labels.mean():.0%} of them frauds, far more than in the full file, "
        "so its accuracies and balanced accuracies are not the paper's numbers: compare the methods with "
        "one another, not with the paper's figure."
    )
    return Markdown("\n".join(parts))


def class_labels(dataset: FederatedDataset) -> np.ndarray:
    """The class labels of a classification dataset, training and test records together, as a NumPy array."""
    return np.concatenate([dataset.y_train.numpy().reshape(-1), dataset.y_test.numpy().reshape(-1)])


# ------------------------------------------------------------------------------------------ the settings file

#: Where the paper's settings file is looked for: ``paper/settings.md`` in the ``shared`` folder beside the checkout,
#: then beside the data folder (``$ULDP_DATA_DIR/../paper``).
SETTINGS_FILE = Path("paper") / "settings.md"


def settings_file(data_dir: str | Path | None = None, checkout: Path | None = None) -> Path | None:
    """The paper's settings file (:data:`SETTINGS_FILE`) beside the checkout or the data folder, or ``None``.

    Args:
        data_dir: The data folder (default: ``$ULDP_DATA_DIR``, if set).
        checkout: The repository's root (default: this one's).
    """
    checkout = checkout or Path(__file__).resolve().parents[2]
    data_dir = data_dir if data_dir is not None else os.environ.get("ULDP_DATA_DIR")
    candidates = [checkout.parent / "shared" / SETTINGS_FILE]
    candidates += [Path(data_dir).parent / SETTINGS_FILE] if data_dir else []
    return next((path for path in candidates if path.is_file()), None)


def settings_source(path: Path | None) -> Markdown:
    """The settings file verbatim, folded (a dropdown the reader opens), or a message saying where it was looked
    for when ``path`` is ``None`` (no local path is printed)."""
    if path is None:
        return Markdown(
            f"The paper's settings file (`{SETTINGS_FILE.name}`) is not in this checkout: it is looked for "
            f"as `shared/{SETTINGS_FILE.as_posix()}` beside the checkout and beside the data folder "
            "(`ULDP_DATA_DIR`). The tables above come from the library and do not need it."
        )
    text = path.read_text(encoding="utf-8")
    fence = "`" * max(4, 1 + max((len(run) for run in re.findall(r"`+", text)), default=0))
    return Markdown(
        f":::{{dropdown}} The settings file `{SETTINGS_FILE.name}`, verbatim\n"
        f"{fence}text\n{text.rstrip()}\n{fence}\n:::"
    )
