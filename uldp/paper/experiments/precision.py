"""A grid's runs trained at another precision against the same runs in float32, paired by seed (issue 43: bfloat16
autocast must keep MNIST's accuracy at the ``short`` profile within the seeds' spread of float32).

A run's key holds no precision (:func:`uldp.paper.experiments.run_grid`), so the two precisions' runs of one setting
and seed share their key and live under two results roots: the profile's own (float32) and another that
``uldp grid ... --precision bf16 --root ROOT`` filled. Each seed's data split, user allocation, record order and
noise are the same at both precisions (:mod:`uldp.training.device` draws them on the CPU from the run's generators;
dropout masks may differ, as bfloat16 trains through ``vmap`` rather than the float32 closed forms), so a seed's
difference is mostly the precision's effect on that seed's run, and the float32 seeds' range is the yardstick: the
verdict holds when the other precision's mean final value lies within the float32 seeds' range.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from uldp.paper.experiments.keys import expand
from uldp.paper.experiments.store import results_root, stored_result
from uldp.training.device import check_precision

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from uldp.paper.experiments.store import StoredRun


@dataclass(frozen=True)
class PrecisionComparison:
    """One setting's final ``metric`` per seed at float32 (``reference``) and at ``precision`` (``candidate``).

    Attributes:
        panel: The grid's panel label.
        series: The grid's series label (the method).
        metric: The compared curve, e.g. ``"accuracy"``.
        precision: The candidate's precision, e.g. ``"bf16"``.
        seeds: The seeds stored at both precisions, increasing.
        reference: The float32 final values, one per seed.
        candidate: The candidate's final values, one per seed.
    """

    panel: str
    series: str
    metric: str
    precision: str
    seeds: tuple[int, ...]
    reference: tuple[float, ...]
    candidate: tuple[float, ...]

    @property
    def differences(self) -> tuple[float, ...]:
        """Per seed, candidate minus float32."""
        return tuple(c - r for c, r in zip(self.candidate, self.reference, strict=True))

    @property
    def reference_range(self) -> tuple[float, float]:
        """The float32 seeds' lowest and highest final value: the spread the verdict is held to."""
        return min(self.reference), max(self.reference)

    @property
    def within(self) -> bool:
        """Whether the candidate's mean final value lies within the float32 seeds' range."""
        low, high = self.reference_range
        return low <= statistics.fmean(self.candidate) <= high

    @property
    def margin(self) -> float:
        """How far the candidate's mean lies inside the float32 range (negative: outside), in the metric's units."""
        low, high = self.reference_range
        mean = statistics.fmean(self.candidate)
        return min(mean - low, high - mean)

    def describe(self) -> str:
        """One Markdown paragraph: the per-seed values, the means, the range and the verdict with its margin."""
        low, high = self.reference_range
        pairs = ", ".join(
            f"seed {seed}: {r:.3f} → {c:.3f}"
            for seed, r, c in zip(self.seeds, self.reference, self.candidate, strict=True)
        )
        spread = (
            f" (standard deviation {statistics.stdev(self.reference):.3f})"
            if len(self.seeds) > 1
            else ""
        )
        return (
            f"{self.series}, {self.panel}, final {self.metric} float32 → {self.precision} ({pairs}). Means "
            f"{statistics.fmean(self.reference):.3f} and {statistics.fmean(self.candidate):.3f}; the float32 "
            f"seeds range from {low:.3f} to {high:.3f}{spread}. The {self.precision} "
            f"mean is {'within' if self.within else 'outside'} that range, {abs(self.margin):.3f} "
            f"{'inside' if self.within else 'beyond'} its nearer end; the largest change of one seed is "
            f"{max(self.differences, key=abs):+.3f}."
        )


def compare_precisions(
    grid_name: str,
    profile: str,
    *,
    candidate_root: Path | str,
    precision: str,
    where: Mapping[str, Sequence[str]] | None = None,
    metric: str = "accuracy",
    reference_root: Path | str | None = None,
) -> list[PrecisionComparison]:
    """Pair each setting's runs stored under ``candidate_root`` at ``precision`` with the float32 runs of the same
    keys under ``reference_root`` (default the profile's :func:`results_root`), per panel and series.

    Args:
        grid_name: The grid (:func:`expand`).
        profile: Its profile.
        candidate_root: The root the other precision's runs were stored under (``uldp grid --root``).
        precision: The precision they were trained at; every paired run's configuration must name it.
        where: Only these runs (:func:`expand`'s ``where``).
        metric: The final value compared.
        reference_root: The float32 runs' root.

    Returns:
        One comparison per panel and series with at least one seed stored at both precisions, in the grid's order.

    Raises:
        ValueError: An unknown precision, a stored run whose configuration names another precision than the one its
            root stands for, or a ``metric`` a paired run did not record.
    """
    check_precision(precision)
    reference_root = Path(reference_root) if reference_root else results_root(profile)
    paired: dict[tuple[str, str], list[tuple[int, float, float]]] = {}
    for spec in expand(grid_name, profile, where=where):
        reference = stored_result(reference_root, spec)
        candidate = stored_result(Path(candidate_root), spec)
        if reference is None or candidate is None:
            continue
        for run, root, wanted in (
            (reference, reference_root, "float32"),
            (candidate, candidate_root, precision),
        ):
            if _precision(run) != wanted:
                raise ValueError(
                    f"run {spec.key} under {root} was trained in {_precision(run)}, not {wanted}"
                )
        if not (reference.result.get(metric) and candidate.result.get(metric)):
            recorded = sorted(
                name for name, values in reference.result.items() if isinstance(values, list)
            )
            raise ValueError(
                f"run {spec.key} has no {metric!r} curve to compare; its curves: {', '.join(recorded)}"
            )
        paired.setdefault((spec.panel, spec.series), []).append(
            (spec.seed, reference.result[metric][-1], candidate.result[metric][-1])
        )
    return [
        PrecisionComparison(
            panel=panel,
            series=series,
            metric=metric,
            precision=precision,
            seeds=tuple(seed for seed, _, _ in sorted(rows)),
            reference=tuple(value for _, value, _ in sorted(rows)),
            candidate=tuple(value for _, _, value in sorted(rows)),
        )
        for (panel, series), rows in paired.items()
    ]


def _precision(run: StoredRun) -> str:
    """The precision a stored run trained at (runs stored before the field existed trained in float32)."""
    return str(run.config.get("precision", "float32"))
