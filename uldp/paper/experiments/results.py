"""Stored results of a grid, as a :class:`ResultSet`: read from the results root (:func:`load_results`) or computed by
accounting alone (:func:`accounted_results`), and their summaries."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args

import pandas as pd

from uldp.common.checks import renamed_keyword
from uldp.common.provenance import now, provenance
from uldp.paper.experiments.executor import loaded_dataset, split_arguments
from uldp.paper.experiments.keys import expand
from uldp.paper.experiments.store import results_root, stored_result
from uldp.simulation import RunConfig, accounted_epsilon

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

    from uldp.paper.experiments.keys import RunSpec

#: Where a :class:`ResultSet`'s runs come from: ``"stored"`` (trained runs read from a results root) or
#: ``"accounting"`` (epsilons from accounting alone, nothing trained: :func:`accounted_results`).
ResultSource = Literal["stored", "accounting"]
RESULT_SOURCES: tuple[str, ...] = get_args(ResultSource)


@dataclass(frozen=True)
class ResultSet:
    """The stored results of a grid at a profile.

    Attributes:
        grid: Grid name.
        profile: The profile the runs belong to.
        runs: Stored runs in grid order: each the JSON object of its :class:`~uldp.paper.experiments.store.StoredRun`,
        with
            ``panel``, ``series`` and ``params`` as this grid labels it (a run shared by panels appears in each).
        missing: Specs with no stored result.
        root: Where they were read from (``None`` for results computed by accounting).
        source: Whether the runs were stored (trained) or computed by accounting alone (:data:`ResultSource`).
    """

    grid: str
    profile: str
    runs: tuple[dict, ...]
    missing: tuple[RunSpec, ...]
    root: str | None
    source: ResultSource = "stored"

    def __post_init__(self) -> None:
        if self.source not in RESULT_SOURCES:
            raise ValueError(
                f"source must be one of {', '.join(RESULT_SOURCES)}, got {self.source!r}"
            )

    def restricted(self, runs: Iterable[dict]) -> ResultSet:
        """The same result set with only ``runs`` (none missing): a subset of its runs, for one method or dataset."""
        return replace(self, runs=tuple(runs), missing=())

    @property
    def complete(self) -> bool:
        """Whether every run of the grid is stored."""
        return not self.missing

    @property
    def covers_every_line(self) -> bool:
        """Whether every line of every panel has at least one stored run (a whole figure, maybe with fewer seeds)."""
        stored = {(run["panel"], run["series"]) for run in self.runs}
        return bool(self.runs) and all((spec.panel, spec.series) in stored for spec in self.missing)

    def covered_panels(self) -> tuple[str, ...]:
        """The panels every line of which has at least one stored run, in grid order."""
        stored = {(run["panel"], run["series"]) for run in self.runs}
        uncovered = {spec.panel for spec in self.missing if (spec.panel, spec.series) not in stored}
        return tuple(
            dict.fromkeys(run["panel"] for run in self.runs if run["panel"] not in uncovered)
        )

    def partial_panels(self) -> tuple[str, ...]:
        """The panels with some stored runs but a line with none (a figure's endpoints stored before its middle), in
        grid order."""
        covered = set(self.covered_panels())
        return tuple(
            dict.fromkeys(run["panel"] for run in self.runs if run["panel"] not in covered)
        )

    def only_panels(self, panels: Iterable[str]) -> ResultSet:
        """The same results restricted to ``panels``.

        Raises:
            ValueError: A panel this grid does not have (the message lists the grid's panels).
        """
        keep = set(panels)
        known = dict.fromkeys(
            [run["panel"] for run in self.runs] + [spec.panel for spec in self.missing]
        )
        if keep - set(known):
            raise ValueError(
                f"panels {sorted(keep - set(known))!r} are not panels of grid {self.grid!r}; "
                f"its panels: {'; '.join(known)}"
            )
        return replace(
            self,
            runs=tuple(run for run in self.runs if run["panel"] in keep),
            missing=tuple(spec for spec in self.missing if spec.panel in keep),
        )

    def frame(self) -> Any:
        """A long pandas DataFrame, one row per run and round: ``panel, series, seed, round`` and every per-round
        series of the results (``test_loss``, ``epsilon``, ...), plus the run arguments as columns.

        Built once per result set and content (:meth:`content_key`) and copied out: a chapter's claims, verdicts and
        figures ask the same set for it about a hundred times, and building it was a fifth of a chapter's run
        (cProfile of ``exp_tcga_brca``); a run changed in place is seen, and the frame built again."""
        key = self.content_key()
        cached = self.__dict__.get("_frame")
        if cached is None or cached[0] != key:
            cached = (key, self._build_frame())
            object.__setattr__(self, "_frame", cached)  # a cache, not a field: the set stays frozen
        return cached[1].copy()

    def content_key(self) -> tuple:
        """Everything :meth:`frame` reads from the runs, as one hashable value: equal keys, equal frames (the key
        of caches of what is computed from the frame, e.g. :func:`uldp.paper.verdicts.per_setting`)."""
        return tuple(
            (
                run["panel"],
                run["series"],
                run["seed"],
                repr(run["params"]),
                tuple(
                    (name, tuple(values))
                    for name, values in run["result"].items()
                    if _per_round(values)
                ),
            )
            for run in self.runs
        )

    def _build_frame(self) -> Any:
        pieces = []
        for run in self.runs:
            per_round = {
                name: values for name, values in run["result"].items() if _per_round(values)
            }
            length = max((len(values) for values in per_round.values()), default=0)
            piece = {name: values for name, values in per_round.items() if len(values) == length}
            piece.setdefault("round", list(range(1, length + 1)))
            labels = {
                "panel": run["panel"],
                "series": run["series"],
                "seed": run["seed"],
                **run["params"],
            }
            piece.update({name: [value] * length for name, value in labels.items()})
            pieces.append((length, piece))
        names = list(dict.fromkeys(name for _, piece in pieces for name in piece))
        # One DataFrame from whole columns (a missing column is None for that run): no per-run concatenation.
        return pd.DataFrame(
            {
                name: [
                    value for length, piece in pieces for value in piece.get(name, [None] * length)
                ]
                for name in names
            }
        )

    def describe(self) -> str:
        """One paragraph saying what these results are: profile, coverage, when, how and by which commit."""
        n_total = len(self.runs) + len(self.missing)
        if not self.runs:
            return f"No stored {self.profile}-profile results for grid {self.grid!r} under {self.root}."
        dates = sorted(run["provenance"]["date"][:16].replace("T", " ") for run in self.runs)
        when = (
            f"on {dates[0]} UTC"
            if dates[0] == dates[-1]
            else f"between {dates[0]} and {dates[-1]} UTC"
        )
        commits = sorted(
            {
                (run["provenance"].get("git_commit") or "unknown")[:10]
                + ("+local changes" if run["provenance"].get("git_dirty") else "")
                for run in self.runs
            }
        )
        commands = sorted({run["provenance"]["command"] for run in self.runs})
        distinct = {run["key"]: run for run in self.runs}.values()  # a shared run counts once
        seconds = sum(run["provenance"]["wall_seconds"] for run in distinct)
        seeds = sorted({run["seed"] for run in self.runs})
        machines = sorted(
            {
                f"{run['provenance'].get('platform', '?')}, {run['provenance'].get('cpu_count', '?')} CPUs"
                + trained_on(run.get("config", {}))
                for run in self.runs
            }
        )
        shared = (
            f" ({len(distinct)} distinct: a run shown in more than one panel counts once)"
            if len(distinct) < len(self.runs)
            else ""
        )
        what = (
            "epsilons from accounting alone, nothing trained, for "
            if self.source == "accounting"
            else ""
        )
        return (
            f"{what}{len(self.runs)} of {n_total} runs{shared} of grid {self.grid!r} at the {self.profile} profile "
            f"(seeds {', '.join(map(str, seeds))}), made {when} by `{'`, `'.join(commands)}` at commit "
            f"{', '.join(commits)} on {'; '.join(machines)}; {duration(seconds)} of run time in all."
        )


def _per_round(values: object) -> bool:
    """Whether a result's entry is a per-round series of scalars (a column of :meth:`ResultSet.frame`)."""
    return isinstance(values, list) and bool(values) and not isinstance(values[0], (list, dict))


def trained_on(config: Mapping[str, Any]) -> str:
    """ ", trained on DEVICE in PRECISION" for a run whose resolved configuration names them (runs stored since
    training had a device), else nothing.

    >>> trained_on({"device": "cuda:0", "precision": "bf16"}), trained_on({})
    (', trained on cuda:0 in bf16', '')
    """
    if "device" not in config:
        return ""
    return f", trained on {config['device']} in {config.get('precision', 'float32')}"


def duration(seconds: float) -> str:
    """A run time as the book writes it: seconds below 2 minutes, minutes below 2 hours, else hours.

    >>> duration(90), duration(600), duration(9000)
    ('90 s', '10 min', '2.5 h')
    """
    return (
        f"{seconds:.0f} s"
        if seconds < 120
        else f"{seconds / 60:.0f} min"
        if seconds < 7200
        else f"{seconds / 3600:.1f} h"
    )


@renamed_keyword("target_epsilon", "epsilon")
def load_results(
    grid_name: str,
    profile: str,
    *,
    seeds: Sequence[int] | None = None,
    root: Path | str | None = None,
    accountant: str = "rdp",
    epsilon: float | None = None,
    uniform_allocation: str | None = None,
) -> ResultSet:
    """Read the stored results of a grid at a profile (nothing runs).

    Args:
        grid_name: A key of :data:`GRIDS`.
        profile: One of :data:`PROFILES`.
        seeds: Seeds instead of the profile's.
        root: Results root (default :func:`results_root` of the profile).
        accountant, epsilon, uniform_allocation: The runs made with these (see :func:`expand`; default: the
            paper's runs; epsilon's old name ``target_epsilon`` is accepted for one release, with a
            ``DeprecationWarning``).

    Returns:
        The stored runs and the missing ones.

    Raises:
        ValueError: Unknown grid or profile, or bad seeds.
    """
    root = Path(root) if root is not None else results_root(profile)
    runs, missing, seen = [], [], set()
    for spec in expand(
        grid_name,
        profile,
        seeds=seeds,
        accountant=accountant,
        epsilon=epsilon,
        uniform_allocation=uniform_allocation,
    ):
        place = (spec.panel, spec.series, spec.seed)
        if place in seen:
            continue
        seen.add(place)
        stored = stored_result(root, spec)
        if stored is None:
            missing.append(spec)
        else:  # a run shared by several panels (see effective_arguments) is shown in each, labelled as there
            runs.append(
                {
                    **stored.to_json(),
                    "panel": spec.panel,
                    "series": spec.series,
                    "params": spec.kwargs,
                }
            )
    return ResultSet(grid_name, profile, tuple(runs), tuple(missing), str(root))


def accounted_results(
    grid_name: str,
    *,
    seeds: Sequence[int] = (0,),
    methods: Sequence[str] | None = None,
    accountant: str = "rdp",
) -> ResultSet:
    """The privacy half of a grid's paper profile, without training: per run, the user-level epsilon after the last
    round from :func:`uldp.simulation.accounted_epsilon` (exactly what the trained run would report).

    With ``accountant="pld"`` it re-accounts the paper's runs (their keys, their sigma) by the tighter accountant:
    the accountant never changes the training, so the stored utilities stand beside the smaller epsilons.

    Args:
        grid_name: A key of :data:`GRIDS`.
        seeds: The allocation seeds (GROUP-k's filtering and silo sizes depend on them).
        methods: Only the runs of these methods (default: all).
        accountant: ``"rdp"`` (what the runs report) or ``"pld"``.

    Returns:
        A paper-profile :class:`ResultSet` (source ``"accounting"``, no root) whose results hold only ``epsilon``: one
        value, the last round's (``None`` for DEFAULT); runs of other methods are left out, not counted missing.

    Raises:
        ValueError: Unknown grid, bad seeds, or a method name the grid does not run.
    """
    specs = expand(grid_name, "paper", seeds=seeds)
    if methods is not None:
        known = {spec.kwargs["method"] for spec in specs}
        if set(methods) - known:
            raise ValueError(
                f"methods {sorted(set(methods) - known)!r} are not run by grid {grid_name!r}; "
                f"its methods: {', '.join(sorted(known))}"
            )
        specs = [spec for spec in specs if spec.kwargs["method"] in methods]
    base = provenance(
        f"uldp.paper.experiments.accounted_results({grid_name!r}, accountant={accountant!r})"
    )
    accounted: dict[
        str, tuple[float | None, dict]
    ] = {}  # a run shared by several panels is accounted once
    runs = []
    for spec in specs:
        config, extra = split_arguments(spec.kwargs)
        if spec.key not in accounted:
            start = time.perf_counter()
            resolved = RunConfig(**config)
            epsilon = accounted_epsilon(
                resolved,
                accountant=accountant,
                dataset=loaded_dataset(
                    resolved.dataset, extra.get("max_test_records"), resolved.test_scoring
                ),
            )
            wall = round(time.perf_counter() - start, 3)
            accounted[spec.key] = epsilon, {**base, "date": now(), "wall_seconds": wall}
        epsilon, made = accounted[spec.key]
        runs.append(
            {
                "key": spec.key,
                "panel": spec.panel,
                "series": spec.series,
                "seed": spec.seed,
                "params": spec.kwargs,
                "result": {"epsilon": [epsilon]},
                "provenance": made,
            }
        )
    return ResultSet(grid_name, "paper", tuple(runs), (), None, "accounting")


def summarise(frame: Any, value: str) -> Any:
    """Mean, standard deviation and number of seeds of one per-round column, per panel, series and round.

    Args:
        frame: A :meth:`ResultSet.frame`.
        value: The column, e.g. ``"test_loss"`` or ``"epsilon"``.

    Returns:
        A DataFrame with columns ``panel, series, round, mean, std, n`` (``std`` is 0 for a single seed; rounds
        where the value is missing, such as DEFAULT's epsilon, are dropped).

    Raises:
        ValueError: ``value`` is not a column of ``frame``.
    """
    if value not in frame:
        raise ValueError(
            f"no column {value!r} in the results; columns: {', '.join(map(str, frame.columns))}"
        )
    present = frame.dropna(subset=[value])
    grouped = present.groupby(["panel", "series", "round"], sort=False)[value]
    summary = grouped.agg(mean="mean", std="std", n="count").reset_index()
    summary["std"] = summary["std"].fillna(0.0)
    return summary
