"""What the experiment chapters show: the results of a grid at the chapter's profile (:func:`chapter_results`) and
the run arguments of its lines (:func:`grid_table`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pandas as pd

from uldp.paper.experiments.executor import SIMULATION
from uldp.paper.experiments.grids import GRIDS, check_profile, get_grid
from uldp.paper.experiments.keys import expand
from uldp.paper.experiments.results import duration, load_results
from uldp.paper.experiments.runner import run_grid

if TYPE_CHECKING:
    from pathlib import Path

    from uldp.paper.experiments.executor import Executor
    from uldp.paper.experiments.results import ResultSet


@dataclass(frozen=True)
class ChapterResults:
    """What a chapter shows: the results, a sentence saying where they come from, the panels of the figure that
    paper-profile results cover when they do not cover all of it (``None`` otherwise), and the paper-profile runs of
    the panels they cover only in part (``None`` when there are none: MNIST's Figure 9 sub-sampling endpoints, stored
    before the rates between them)."""

    results: ResultSet
    note: str
    paper_panels: ResultSet | None = None
    paper_partial: ResultSet | None = None


def chapter_results(
    grid_name: str,
    profile: str,
    *,
    executor: Executor = SIMULATION,
    paper_root: Path | str | None = None,
    root: Path | str | None = None,
) -> ChapterResults:
    """The results an experiment chapter shows: the committed paper-profile ones when they cover every line of the
    figure (at least one seed each), else run the grid at the chapter's profile (resuming from what is stored), and
    the panels that paper-profile results cover whole beside it.

    At the ``smoke`` profile the smoke grid runs even when paper results exist, so that CI exercises the
    simulation path of every chapter; at the ``paper`` profile the paper grid itself runs (resuming).

    Args:
        grid_name: A key of :data:`GRIDS`.
        profile: The chapter's profile (papermill parameter).
        executor: What executes runs.
        paper_root: Where committed paper results live (default ``results/``).
        root: Where smoke/default results go (default ``_build/results/``).

    Returns:
        The results and a note for the reader.
    """
    check_profile(profile)
    paper = load_results(grid_name, "paper", root=paper_root)
    if profile != "paper" and paper.covers_every_line:
        if profile == "smoke":
            check = run_grid(
                grid_name,
                "smoke",
                root=root,
                executor=executor,
                progress=False,
                command=f"book chapter, profile smoke ({grid_name})",
            )
            if check.failed:
                raise RuntimeError(f"smoke runs of {grid_name!r} failed: {check.failed}")
        return ChapterResults(
            paper, "These are the committed paper-profile results. " + paper.describe()
        )
    own_root = paper_root if profile == "paper" else root
    report = run_grid(
        grid_name,
        profile,
        root=own_root,
        executor=executor,
        progress=False,
        command=f"book chapter, profile {profile} ({grid_name})",
    )
    if report.failed:
        raise RuntimeError(f"runs of {grid_name!r} at profile {profile!r} failed: {report.failed}")
    results = load_results(grid_name, profile, root=own_root)
    done = f"({report.executed} runs now, {report.skipped} already stored; {duration(report.wall_seconds)}). "
    if profile == "paper":
        return ChapterResults(
            results, f"This chapter ran the paper-profile grid {done}" + results.describe()
        )
    if paper.runs:
        why = (
            f"Paper-profile results are stored only in part ({len(paper.runs)} of "
            f"{len(paper.runs) + len(paper.missing)} runs, not every line of the figure), so they are not shown; "
        )
    else:
        why = "No paper-profile results are committed for this grid, so "
    note = (
        why
        + f"this chapter ran the grid at the **{profile}** profile {done}These runs are far smaller than "
        "the paper's: read shapes, not numbers. " + results.describe()
    )
    covered, partial = paper.covered_panels(), paper.partial_panels()
    paper_panels = paper.only_panels(covered) if covered else None
    paper_partial = paper.only_panels(partial) if partial else None
    if paper_panels is not None:
        note += (
            f" The committed paper-profile results do cover every line of {len(covered)} panel(s) "
            f"({'; '.join(covered)}); they are shown first, then this build's {profile}-profile runs. "
            + paper_panels.describe()
        )
    if paper_partial is not None:
        note += (
            f" Some lines of {len(partial)} more panel(s) ({'; '.join(partial)}) are stored at the paper's scale "
            "and shown apart, as far as they go: " + paper_partial.describe()
        )
    return ChapterResults(results, note, paper_panels, paper_partial)


def stored_runs_table(*, jobs: int = 2) -> pd.DataFrame:
    """Every grid: its figure, what it shows, how many of its runs are stored at each profile in this checkout
    ("-" where the grid has no such profile: only some define ``short``), and the command that re-runs it at paper
    scale with ``jobs`` worker processes."""
    rows = []
    for name, grid in GRIDS.items():
        row: dict[str, Any] = {"grid": name, "figure": grid.figure, "what it shows": grid.title}
        for profile in ("paper", "short", "default", "smoke"):
            try:
                stored = load_results(name, profile)
            except ValueError:  # a grid without this profile
                row[f"stored at {profile}"] = "-"
                continue
            row[f"stored at {profile}"] = (
                f"{len(stored.runs)} of {len(stored.runs) + len(stored.missing)}"
            )
        row["re-run (paper scale)"] = f"uldp grid {name} --profile paper --jobs {jobs}"
        rows.append(row)
    return pd.DataFrame(rows).set_index("grid")


def grid_table(grid_name: str, profile: str) -> Any:
    """The run arguments of each line (series) of a grid at a profile, for the chapters.

    Arguments that are equal for every run go to ``table.attrs["constant"]``, the panels (settings) to
    ``table.attrs["panels"]`` and the seeds to ``table.attrs["seeds"]``. Where a series' argument differs between
    panels (MNIST's ULDP-AVG learning rate depends on the users), the cell lists the values, panel order, "a / b".

    Raises:
        ValueError: Unknown grid or profile.
    """
    grid = get_grid(grid_name)
    specs = expand(grid_name, profile)
    table = pd.DataFrame([{"series": spec.series, **spec.kwargs} for spec in specs]).drop(
        columns="seed"
    )
    constant = {
        name: table[name].tolist()[0]
        for name in table.columns
        if table[name].astype(str).nunique() == 1
    }
    shown_elsewhere = [f for f in (*grid.panel_fields, *grid.series_fields) if f not in constant]
    table = table.drop(columns=list(constant) + shown_elsewhere)
    result = table.groupby("series", sort=False).agg(
        lambda column: " / ".join(
            dict.fromkeys(
                "-" if pd.isna(v) else f"{v:g}" if isinstance(v, float) else str(v) for v in column
            )
        )
    )
    result.attrs.update(
        constant=constant,
        panels=list(dict.fromkeys(spec.panel for spec in specs)),
        seeds=sorted({spec.seed for spec in specs}),
    )
    return result
