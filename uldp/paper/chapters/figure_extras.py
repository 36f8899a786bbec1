"""What single experiment chapters show beside their main figure: Creditcard's balanced accuracy, MNIST's
short profile and accounting, the enhanced weighting's gaps and Figure 10's runtime (``book/exp_creditcard.py``,
``book/exp_mnist.py``, ``book/exp_weighting.py``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from IPython.display import Markdown, display

from uldp.paper import experiments, plots, scorecard
from uldp.paper.chapters.experiment import ExperimentChapter, show_figure
from uldp.paper.experiments import ResultSet, duration
from uldp.paper.experiments.keys import UNIFORM_SCHEMES
from uldp.paper.verdicts import (
    per_setting,
    profile_label,
    readable_number,
)

if TYPE_CHECKING:
    from collections.abc import Mapping

    import pandas as pd
    from matplotlib.figure import Figure


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
    """The mean final user-level epsilon of each line (columns) per setting (rows, the setting a column of its own,
    no index), e.g. of :func:`uldp.paper.experiments.accounted_results`."""
    final = per_setting(results, "epsilon")
    order = list(dict.fromkeys(final["series"]))
    table = final.pivot(index="panel", columns="series", values="mean")[order]
    return (
        table.rename_axis(index="setting", columns=None)
        .reset_index()
        .style.hide(axis="index")
        .format(readable_number, subset=order)
    )


def show_weighting_gaps(data: Mapping[str, ResultSet]) -> Any:
    """:func:`weighting_gap_table` as the page shows it: dataset and silo count as columns (no index), the gaps to
    three decimals, "—" with a note where an allocation was not run for a dataset."""
    table = weighting_gap_table(data)
    absent = bool(table.isna().any().any())
    shown = (
        table.rename_axis(columns=None)
        .reset_index()
        .rename(columns={"n_silos": "silos"})
        .style.hide(axis="index")
        .format(precision=3, na_rep="—", subset=list(table.columns))
    )
    if absent:
        display(shown, Markdown("— : this dataset has no run of that allocation in the figure."))
        return None
    return shown


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


def gpu_round_note(
    benchmark: Mapping[str, Any] | None, paper_scale: Mapping[str, Any] | None
) -> Markdown:
    """What a GPU measured of MNIST at the paper's scale, from the committed documents of ``benchmarks/gpu.py``
    (:func:`uldp.paper.chapters.benchmark_result`): ``benchmark`` with its ``engine`` and ``paper_round`` sections,
    ``paper_scale`` with its ``paper_scale_run`` (several rounds of ULDP-AVG-w on the zipf federation, per
    precision); either may be ``None`` (not committed)."""
    if benchmark is None:
        return Markdown("No GPU measurement of MNIST's training is committed in this checkout.")
    results, source = benchmark["results"], benchmark["provenance"]
    rates = results["engine"]["record_steps_per_second"]
    rounds = results["paper_round"]
    text = (
        f"On a lent {results['device']['name']} (`benchmarks/gpu.py` at commit "
        f"`{source['git_commit'][:10]}`, {source['date'][:10]}), the per-user engine trained "
        f"{rates['library_float32']:,.0f} record-steps per second in float32 and {rates['library_bf16']:,.0f} in "
        f"bfloat16, against {rates['library_cpu_float32']:,.0f} on that machine's "
        f"{results['engine']['problem']['cpu_threads']} CPU threads; one round at the paper's settings (10000 users, "
        f"uniform, $Q = 50$) took {duration(rounds['ULDP-AVG-w']['seconds'])} for ULDP-AVG-w and "
        f"{duration(rounds['DEFAULT']['seconds'])} for DEFAULT"
    )
    if paper_scale is not None:
        runs = paper_scale["results"]["paper_scale_run"]
        float32 = runs["float32"]
        text += (
            f"; on the zipf federation of Figure 9's user sub-sampling runs, {float32['rounds']} rounds of "
            f"ULDP-AVG-w at q = 1 averaged "
            f"{duration(float32['seconds_per_round'])} a round in float32 and "
            f"{duration(runs['bf16']['seconds_per_round'])} in bfloat16, so $T = 200$ rounds take about "
            f"{duration(200 * float32['seconds_per_round'])} there (the average holds the first round's start-up: "
            f"cuDNN's autotuning of every new shape)"
        )
    return Markdown(text + ".")


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
            "The first panel is a silo's round; the second, what the protocol adds once and per round.",
            per_panel=False,
        )
        if results.runs:
            display(
                Markdown(f"Seconds per part of the protocol, scale {profile_label(results)}:"),
                plots.runtime_table(results)
                .reset_index()
                .style.hide(axis="index")
                .format(precision=3)
                .format("{:,.0f}", subset=["parameters"]),
            )
