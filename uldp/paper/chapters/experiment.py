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

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from IPython.display import Markdown, display

from uldp.models import build_model
from uldp.paper import experiments, plots, scorecard
from uldp.paper.chapters.captions import show_captioned
from uldp.paper.chapters.reference import show_grid_settings
from uldp.paper.chapters.views import SCORECARD_VIEWS, view_scorecard
from uldp.paper.experiments import ChapterResults, ResultSet, duration
from uldp.paper.settings import paper_seeds
from uldp.paper.verdicts import (
    HOLDS,
    MISSING,
    NotMeasured,
    per_setting,
    profile_label,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    import pandas as pd
    from matplotlib.figure import Figure


#: A final utility within this distance of a trivial predictor's (:func:`chance_level`) is "trivial".
TRIVIAL_MARGIN = 0.02
#: Runs whose every line ends within this share of the way from chance to a perfect score learned nothing
#: (:func:`untrained`): no figure is drawn of them.
UNTRAINED_SHARE = 0.1
#: A spread (standard deviation over seeds) of the final utility at least this large is worth explaining.
LARGE_SPREAD = 0.05
#: Per-round metrics whose chance level does not depend on the classes' shares: balanced accuracy, the C-index.
CHANCE_METRICS = ("balanced_accuracy", "c_index")


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
        """The results to show, the paper's scale first: the paper-profile panels when only some are stored whole,
        then the paper-profile runs of panels stored in part, then the chapter's own results."""
        paper = (self.shown.paper_panels, self.shown.paper_partial)
        return [results for results in paper if results is not None] + [self.results]

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
            if results is self.shown.paper_partial:
                display(Markdown(partial_runs_note(results)))
            elif index and results.profile != "paper":
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


def partial_runs_note(results: ResultSet) -> str:
    """What paper-profile runs of panels stored only in part are: the paper's scale, not yet its whole figure."""
    stored = len({run["key"] for run in results.runs})
    return (
        f"**Stored at the paper's scale, in part: {'; '.join(results.partial_panels())}.** {stored} of "
        f"{stored + len(results.missing)} runs of these settings are stored, so only their lines are drawn; the "
        "comparisons between lines that the paper's figure makes wait for the rest. "
        + results.describe()
    )


def untrained(results: ResultSet) -> bool:
    """Whether every line of ``results`` ends, on average over its seeds, within :data:`UNTRAINED_SHARE` of the way
    from a predictor that ignores its input (:func:`chance_level`) to a perfect one: runs too small to learn, whose
    figure would show nothing of the method (``False`` when no chance-free metric is stored)."""
    metric = chance_metric(results)
    if metric is None:
        return False
    finals = per_seed(results, metric)
    datasets = {run["params"]["dataset"] for run in results.runs}
    if metric == "balanced_accuracy" and len(datasets) > 1:
        return all(untrained(_of_dataset(results, dataset)) for dataset in datasets)
    chance = chance_level(results, metric)
    means = finals.groupby(["panel", "series"])["value"].mean()
    return bool((means <= chance + UNTRAINED_SHARE * (1 - chance)).all())


def show_figure(
    results: ResultSet,
    draw: Callable[[ResultSet], Figure],
    figure: str,
    look: str = "",
    *,
    per_panel: bool = True,
) -> None:
    """Display ``draw`` of ``results`` as numbered figures, one per setting (panel) unless ``per_panel`` is false,
    each captioned with the paper's figure it reproduces, the setting, the scale (the paper's figure only for
    paper-profile results, "a stand-in" otherwise) and ``look``, what to look at. Runs of another profile than the
    paper's that learned nothing (:func:`untrained`) are not drawn: a sentence says so instead.

    Args:
        results: Stored results.
        draw: A figure function of :mod:`uldp.paper.plots` (or :func:`balanced_accuracy_figure`).
        figure: The paper's figure, e.g. ``"Figure 4"``.
        look: What the reader should look at (MyST markdown), the same for every setting.
        per_panel: One figure per setting (the figures of :func:`uldp.paper.plots.metric_grid`, a row each);
            false for a figure whose panels are drawn side by side.
    """
    if not results.runs:
        display(
            Markdown(f"No stored {results.profile}-profile runs to draw for the paper's {figure}.")
        )
        return
    label = profile_label(results)
    what = (
        f"The paper's {figure}, reproduced at the scale **{label}**"
        if results.profile == "paper"
        else f"A **{label}**-profile stand-in for the paper's {figure}: far smaller runs than the paper's, "
        "not its figure"
    )
    panels = list(dict.fromkeys(run["panel"] for run in results.runs))
    skipped = []
    for group in ([panel] for panel in panels) if per_panel and len(panels) > 1 else [panels]:
        shown = results.only_panels(group)
        if results.profile != "paper" and untrained(shown):
            skipped += group
            continue
        where = f", {group[0]}" if len(group) == 1 and len(panels) > 1 else ""
        drawn = {run["series"] for run in shown.runs}
        absent = list(dict.fromkeys(s.series for s in shown.missing if s.series not in drawn))
        if absent:
            where += f" (only the lines stored; not yet: {', '.join(absent)})"
        show_captioned(draw(shown), f"{what}{where}. {look}".strip())
    if skipped:
        untaught = results.only_panels(skipped)
        metric = chance_metric(untaught) or "accuracy"
        finals = per_seed(untaught, metric)["value"]
        display(
            Markdown(
                f"No figure of this build's **{label}**-profile runs for the paper's {figure}"
                + ("" if len(skipped) == len(panels) else f" at {'; '.join(skipped)}")
                + f": every line there ends at the level of a predictor that ignores its input (final "
                f"{_metric_label(metric)} {finals.min():.2f} to {finals.max():.2f}), so they show nothing of "
                "the methods. These runs check that the chapter runs end to end; the paper-scale results, where "
                "stored, are shown above."
            )
        )


def show_final_table(results: ResultSet, metric: str | None = None) -> None:
    """Display the final values (mean ± std over seeds, and epsilon) of ``results``, one row per line and one
    column per setting (:func:`uldp.paper.scorecard.final_table`, transposed so that it fits the page), the line's
    name a column of its own (no index), "—" where a line has no run at a setting, with a note saying so."""
    if not results.runs:
        return
    table = scorecard.final_table(results, metric).T.replace(scorecard.NOT_RUN, "—")
    absent = bool((table == "—").any().any())
    display(
        Markdown(
            f"Final {_metric_label(metric or scorecard_metric(results))} (mean ± std over seeds) "
            f"and user-level ε, scale {profile_label(results)}:"
        ),
        table.rename_axis("method").reset_index().style.hide(axis="index"),
        *(
            [Markdown("— : the grid runs no such line at that setting (as in the paper's figure).")]
            if absent
            else []
        ),
    )
