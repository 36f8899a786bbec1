"""The claims of the paper's results section (Section 5.2), each checked against our stored results.

Every claim is a function of the stored results of the grids (:mod:`uldp.paper.experiments`) that returns what we
measured
and a verdict: ``holds``, ``partly`` or ``does not hold`` (``not measured`` when the results it needs are missing).
A claim made over several settings (panels) holds when it holds in every one, partly when in at least half, and
does not hold otherwise (:mod:`uldp.paper.verdicts`); every size word ("much larger", "much faster", "reasonably high",
"competitive", "practical") has one threshold, stated here and in the row, and every comparison must clear its
threshold by :data:`~uldp.paper.verdicts.SE_MULTIPLE` standard errors over seeds (paired by seed;
:class:`uldp.paper.verdicts.Difference`): a difference inside the spread over seeds does not count. A claim is judged
on its grids' results at the largest profile stored, never on a mix of scales. The protocol-overhead claims live
in :mod:`uldp.paper.scorecard_runtime`.

Utility is the dataset's metric of :data:`uldp.paper.experiments.UTILITY_METRIC` (higher is better); "final" means the
mean over seeds at the last round; "convergence speed" is the mean utility over all rounds (the area under the
curve, so a method that gets high sooner scores higher).
"""

from __future__ import annotations

import contextlib
import itertools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from uldp.paper.experiments import (
    GRIDS,
    PROFILES,
    UTILITY_METRIC,
    ResultSet,
    accounted_results,
    expand,
    load_results,
)
from uldp.paper.experiments.keys import UNIFORM_SCHEMES
from uldp.paper.scorecard_runtime import (
    runtime_dominant,
    runtime_linear,
    runtime_parameters,
    runtime_practical,
    runtime_users,
)
from uldp.paper.verdicts import (  # per_setting is part of this module's interface too
    FAILS,
    HOLDS,
    MISSING,
    PARTLY,
    SE_MULTIPLE,
    Difference,
    Finding,
    NotMeasured,
    difference,
    estimate,
    fraction_verdict,
    margin_verdict,
    per_setting,
    profile_label,
    readable_number,
    stored_grid,
    value as _value,
    values as _values,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

PRIVACY_UTILITY_GRIDS = tuple(
    name for name, grid in GRIDS.items() if grid.kind == "privacy_utility"
)
#: The key of the MNIST paper-profile epsilons from accounting alone (:func:`uldp.paper.experiments.accounted_results`):
#: a claim about epsilon alone is judged at the paper's scale though MNIST's training at that scale does not run here.
MNIST_ACCOUNTING = "mnist-accounting"
#: The methods of the MNIST epsilon claim.
MNIST_ACCOUNTING_METHODS = ("ULDP-GROUP-2", "ULDP-AVG")
#: The key of MNIST's committed short-profile results (the paper's federation, fewer rounds and local epochs): the
#: claim comparing MNIST federations is judged on them when no paper-profile MNIST results are stored.
MNIST_SHORT = "mnist-short"
#: "much larger privacy budgets": GROUP-k's epsilon at least this many times ULDP-AVG's.
MUCH_LARGER = 10.0
#: A utility difference we call noticeable (accuracy or C-index points); also "much lower" and "much faster" (mean
#: utility over rounds at least this much higher) and "competitive" (final utility within this of the best).
NOTICEABLE = 0.02
#: "reasonably high utility": final utility within this of ULDP-AVG's (accuracy or C-index points).
REASONABLE = 0.05
#: "a reasonably small privacy bound": epsilon at most this.
SMALL_EPSILON = 10.0
#: What "within the spread" means in the rows: the comparisons' margin.
MARGIN = f"by more than {SE_MULTIPLE:g} standard errors over seeds"
#: What the Scorecard says wherever it judges ULDP-NAIVE: the noise it ran with.
NAIVE_NOISE = (
    "ULDP-NAIVE ran with the corrected, doubled noise (2 sigma C sqrt(|S|) per silo, for the true "
    "sensitivity 2|S|C; the paper's Algorithm 1 adds half)"
)


@dataclass(frozen=True)
class Claim:
    """One claim of the paper's Section 5.2.

    Attributes:
        key: Short identifier.
        text: The claim, close to the paper's words.
        where: The figure(s) it is about.
        grids: Grids whose results it reads.
        check: Computes the :class:`Finding` from ``{grid name: ResultSet}``.
    """

    key: str
    text: str
    where: str
    grids: tuple[str, ...]
    check: Callable[[Mapping[str, ResultSet]], Finding]


# ---------------------------------------------------------------------------------------------------- measurements


def _utility(results: ResultSet) -> str:
    return UTILITY_METRIC[results.runs[0]["params"]["dataset"]] if results.runs else "accuracy"


def _privacy_utility_panels(
    data: Mapping[str, ResultSet], how: str = "final", metric: str | None = None
) -> list[tuple[str, str, pd.DataFrame]]:
    """``(grid, panel, table)`` for every stored privacy-utility panel (utility unless ``metric`` is given)."""
    found: list[tuple[str, str, pd.DataFrame]] = []
    for name in PRIVACY_UTILITY_GRIDS:
        results = data.get(name)
        if results is None or not results.runs:
            continue
        try:
            table = per_setting(results, metric or _utility(results), how)
        except NotMeasured:
            continue
        found.extend((name, panel, table) for panel in dict.fromkeys(table["panel"]))
    if not found:
        raise NotMeasured("no privacy-utility results are stored")
    return found


def _group_exception(grid: str, table: pd.DataFrame, panel: str) -> bool:
    """The paper's stated exception to GROUP-k's large epsilon: MNIST with many users (few records per user, many
    records in all), where ULDP-GROUP-2 gets a small bound (checked by its own claim)."""
    return grid == "mnist" and bool((table.loc[table["panel"] == panel, "n_users"] >= 1000).all())


def _compare(table: pd.DataFrame, panel: str, a: str, b: str) -> Difference | None:
    """``a - b`` in ``panel`` over seeds (``None`` when either is absent)."""
    high, low = _values(table, panel, a), _values(table, panel, b)
    return None if high is None or low is None else difference(high, low)


def _best(table: pd.DataFrame, panel: str, series: list[str]) -> str | None:
    """The series of ``series`` with the highest mean in ``panel`` (``None`` when none is there)."""
    present = {name: mean for name in series if (mean := _value(table, panel, name)) is not None}
    return max(present, key=lambda name: present[name]) if present else None


def _differences_text(gaps: list[Difference], threshold: float) -> str:
    """The median and range of the differences, their median standard error, and how many clear ``threshold`` by
    their mean alone (inside the spread over seeds)."""
    means = [gap.mean for gap in gaps]
    errors = [gap.se for gap in gaps if np.isfinite(gap.se)]
    within = sum(gap.mean > threshold and not gap.clears(threshold) for gap in gaps)
    spread = f", median SE {np.median(errors):.3f}" if errors else ", one seed: no spread"
    return (
        f"median difference {np.median(means):+.3f}, range {min(means):+.3f} to {max(means):+.3f}{spread}; "
        f"{within} more clear it by the mean alone, within the spread"
    )


def _pairwise(
    data: Mapping[str, ResultSet], better: str, worse: str, how: str, by: float = 0.0
) -> Finding:
    """Claim that ``better`` has higher utility than ``worse``, by more than ``by`` and by more than
    ``SE_MULTIPLE`` standard errors over seeds, in every privacy-utility setting."""
    gaps = [
        gap
        for _grid, panel, table in _privacy_utility_panels(data, how)
        if (gap := _compare(table, panel, better, worse)) is not None
    ]
    hits = sum(gap.clears(by) for gap in gaps)
    verdict = fraction_verdict(hits, len(gaps))
    what = "final utility" if how == "final" else "mean utility over rounds"
    margin = f"more than {by:g} above" if by else "above"
    return Finding(
        f"{better} {margin} {worse} {MARGIN} in {hits} of {len(gaps)} settings ({what}; "
        f"{_differences_text(gaps, by)})",
        verdict,
    )


# ---------------------------------------------------------------------------------------------------------- claims


def _proposed_tradeoff(data: Mapping[str, ResultSet]) -> Finding:
    epsilon = {
        name: per_setting(data[name], "epsilon")
        for name in PRIVACY_UTILITY_GRIDS
        if name in data and data[name].runs
    }
    hits, total = 0, 0
    for name, panel, table in _privacy_utility_panels(data):
        best = _best(table, panel, ["ULDP-AVG", "ULDP-AVG-w", "ULDP-SGD"])
        group = min(
            (
                s
                for s in set(epsilon[name]["series"])
                if s.startswith("ULDP-GROUP") and _value(epsilon[name], panel, s) is not None
            ),
            key=lambda s: _value(epsilon[name], panel, s) or 0.0,
            default=None,
        )
        if best is None or group is None or _group_exception(name, table, panel):
            continue
        utility = _compare(table, panel, best, "ULDP-NAIVE")
        budget = _compare(epsilon[name], panel, group, "ULDP-AVG")
        if utility is None or budget is None:
            continue
        total += 1
        hits += utility.clears(0.0) and budget.clears(0.0)
    verdict = fraction_verdict(hits, total)
    return Finding(
        f"in {hits} of {total} settings the best of ULDP-AVG/AVG-w/SGD has higher utility than "
        "ULDP-NAIVE (at the same epsilon) and ULDP-AVG a smaller epsilon than every ULDP-GROUP-k, both "
        f"{MARGIN} (MNIST with many users excluded, as in the paper); {NAIVE_NOISE}",
        verdict,
    )


def _naive_low(data: Mapping[str, ResultSet]) -> Finding:
    gaps = []
    for _grid, panel, table in _privacy_utility_panels(data):
        present = [s for s in ("ULDP-AVG", "ULDP-AVG-w") if _value(table, panel, s) is not None]
        weaker = min(present, key=lambda s: _value(table, panel, s) or 0.0, default=None)
        if weaker is not None and (gap := _compare(table, panel, weaker, "ULDP-NAIVE")) is not None:
            gaps.append(gap)
    hits = sum(gap.clears(NOTICEABLE) for gap in gaps)
    verdict = fraction_verdict(hits, len(gaps))
    return Finding(
        f"ULDP-NAIVE's final utility is more than {NOTICEABLE} below both ULDP-AVG and ULDP-AVG-w "
        f"{MARGIN} in {hits} of {len(gaps)} settings (the weaker of the two minus ULDP-NAIVE: "
        f"{_differences_text(gaps, NOTICEABLE)}); {NAIVE_NOISE}",
        verdict,
    )


def _group_epsilon(data: Mapping[str, ResultSet]) -> Finding:
    ratios = []
    for name, panel, table in _privacy_utility_panels(data, metric="epsilon"):
        avg = _values(table, panel, "ULDP-AVG")
        groups = [
            s
            for s in set(table["series"])
            if s.startswith("ULDP-GROUP") and _value(table, panel, s)
        ]
        if _group_exception(name, table, panel) or not avg or not groups:
            continue
        group = (
            _values(table, panel, min(groups, key=lambda s: _value(table, panel, s) or 0.0)) or {}
        )
        common = set(group) & set(avg)
        if (
            common
        ):  # per seed: the runs of one seed share the allocation that sets GROUP-k's group size
            ratios.append(estimate({seed: group[seed] / avg[seed] for seed in common}))
    hits = sum(ratio.clears(MUCH_LARGER) for ratio in ratios)
    verdict = fraction_verdict(hits, len(ratios))
    return Finding(
        f"smallest ULDP-GROUP-k epsilon / ULDP-AVG epsilon, per seed: median "
        f"{np.median([r.mean for r in ratios]):.1f}x, minimum {min(r.mean for r in ratios):.1f}x; at "
        f"least {MUCH_LARGER:g}x {MARGIN} in {hits} of {len(ratios)} settings (MNIST with many users "
        "excluded, as in the paper)",
        verdict,
    )


def _default_gap(data: Mapping[str, ResultSet]) -> Finding:
    return _pairwise(data, "DEFAULT", "ULDP-AVG", "final")


def _group_beats_avg_small_n(data: Mapping[str, ResultSet]) -> Finding:
    results = stored_grid(data, "creditcard", "no Creditcard results")
    table = per_setting(results, _utility(results))
    panels = [
        p
        for p in dict.fromkeys(table["panel"])
        if p.endswith("uniform")
        and table.loc[table["panel"] == p, "n_users"].iloc[0] == max(table["n_users"])
    ]
    if not panels or table.loc[table["panel"] == panels[0], "n_users"].iloc[0] < 1000:
        raise NotMeasured("no Creditcard setting with 1000 users, uniform")
    panel = panels[0]
    gaps = {
        s: gap
        for s in ("ULDP-GROUP-max", "ULDP-GROUP-median")
        if (gap := _compare(table, panel, s, "ULDP-AVG")) is not None
    }
    if not gaps:
        raise NotMeasured("ULDP-AVG or ULDP-GROUP-max/median missing in that setting")
    verdicts = {margin_verdict(gap, 0.0) for gap in gaps.values()}
    verdict = HOLDS if verdicts == {HOLDS} else FAILS if verdicts == {FAILS} else PARTLY
    compared = ["ULDP-AVG", *gaps]
    shown = ", ".join(f"{s} {gap.text()}" for s, gap in gaps.items())
    measured = f"{panel}: {_spread(table, panel, compared)}; minus ULDP-AVG: {shown} (held: above {MARGIN})"
    with contextlib.suppress(
        NotMeasured
    ):  # the fraud class is 9% of the rows: accuracy alone hides a lot
        measured += f"; balanced accuracy {_spread(per_setting(results, 'balanced_accuracy'), panel, compared)}"
    return Finding(measured, verdict)


def _spread(table: pd.DataFrame, panel: str, series: list[str]) -> str:
    """``"A 0.912 ± 0.004, B ..."``: each series' mean and std over seeds in ``panel`` (no std from one seed)."""
    shown = []
    for name in series:
        row = table[(table["panel"] == panel) & (table["series"] == name)].iloc[0]
        shown.append(
            f"{name} {row['mean']:.3f}" + (f" ± {row['std']:.3f}" if row["seeds"] > 1 else "")
        )
    return ", ".join(shown)


def _group2_mnist(data: Mapping[str, ResultSet]) -> Finding:
    results = stored_grid(
        data,
        MNIST_ACCOUNTING,
        "no MNIST epsilons (accounting at the paper's settings needs the data)",
    )
    table = per_setting(results, "epsilon")
    rows = table[table["series"] == "ULDP-GROUP-2"]
    if rows.empty or rows["n_users"].nunique() < 2:
        raise NotMeasured("ULDP-GROUP-2 on MNIST with both user counts is missing")
    many, few = (
        rows[rows["n_users"] == rows["n_users"].max()],
        rows[rows["n_users"] == rows["n_users"].min()],
    )
    largest, smallest = many.loc[many["mean"].idxmax()], few.loc[few["mean"].idxmin()]
    avg = table[(table["series"] == "ULDP-AVG") & (table["n_users"] == rows["n_users"].max())][
        "mean"
    ]
    under = estimate(largest["values"]).times(
        -1.0
    )  # -epsilon: "at most SMALL_EPSILON" is -epsilon > -SMALL
    below = difference(smallest["values"], largest["values"])
    verdict = (
        HOLDS
        if under.clears(-SMALL_EPSILON) and below.clears(0.0)
        else PARTLY
        if below.mean > 0
        else FAILS
    )
    return Finding(
        f"ULDP-GROUP-2 epsilon with {rows['n_users'].max()} users: at most {largest['mean']:.2f} "
        f"(ULDP-AVG {avg.mean():.2f}); with {rows['n_users'].min()} users: at least "
        f"{smallest['mean']:.2f} (held: at most {SMALL_EPSILON:g} and below the few-users value, "
        f"{MARGIN})",
        verdict,
    )


def _noniid(data: Mapping[str, ResultSet]) -> Finding:
    results = data.get("mnist", data.get(MNIST_SHORT))
    if results is None or not results.runs:
        raise NotMeasured("no MNIST results")
    drops = _noniid_drops(per_setting(results, "accuracy")).get("ULDP-AVG", {})
    if len(drops) < 2:
        raise NotMeasured("ULDP-AVG on MNIST zipf iid and non-iid with two user counts is missing")
    few, many = drops[min(drops)], drops[max(drops)]
    halved = few.times(0.5).minus(many)  # "much less": less than half of it
    verdict = (
        HOLDS
        if few.clears(NOTICEABLE) and halved.clears(0.0)
        else PARTLY
        if few.mean > many.mean
        else FAILS
    )
    params = results.runs[0]["params"]
    return Finding(
        f"ULDP-AVG final accuracy, zipf iid minus non-iid: {few.text()} with {min(drops)} users, "
        f"{many.text()} with {max(drops)} users, {results.profile} profile (T={params['rounds']}, "
        f"Q={params['local_epochs']}) (held: > {NOTICEABLE} and less than half of it, {MARGIN})",
        verdict,
    )


def _noniid_drops(table: pd.DataFrame) -> dict[str, dict[int, Difference]]:
    """Per method and user count, final accuracy under zipf iid minus under zipf non-iid (over seeds)."""
    drops: dict[str, dict[int, Difference]] = {}
    for (series, n_users), rows in table.groupby(["method", "n_users"], sort=False):
        by = rows.set_index("distribution")["values"]
        if {"zipf", "zipf-noniid"} <= set(by.index):
            drops.setdefault(str(series), {})[int(n_users)] = difference(
                by["zipf"], by["zipf-noniid"]
            )
    return drops


def _group_utility(data: Mapping[str, ResultSet]) -> Finding:
    """Reasonably high (within REASONABLE of ULDP-AVG), and more so where n is small (more users, same data)."""
    high, total, gaps = 0, 0, {}
    for name, panel, table in _privacy_utility_panels(data):
        groups = [
            s
            for s in dict.fromkeys(table.loc[table["panel"] == panel, "series"])
            if s.startswith("ULDP-GROUP")
        ]
        best = _best(table, panel, groups)
        gap = None if best is None else _compare(table, panel, best, "ULDP-AVG")
        if gap is None:
            continue
        total += 1
        high += gap.clears(-REASONABLE)
        row = table[table["panel"] == panel].iloc[0]
        gaps[(name, row.get("distribution"), int(row["n_users"]))] = gap
    if not total:
        raise NotMeasured("no setting has ULDP-AVG and a ULDP-GROUP-k")
    pairs: dict[tuple[str, str | None], dict[int, Difference]] = {}
    for (name, distribution, n_users), gap in gaps.items():
        pairs.setdefault((name, distribution), {})[n_users] = gap
    pairs = {key: users for key, users in pairs.items() if len(users) >= 2}
    small_n = sum(
        users[max(users)].minus(users[min(users)]).clears(0.0) for users in pairs.values()
    )
    verdict = (
        HOLDS
        if high == total and small_n == len(pairs)
        else PARTLY
        if 2 * high >= total or 2 * small_n >= len(pairs)
        else FAILS
    )
    shown = "; ".join(
        f"{name} {dist}: {users[min(users)].text()} with {min(users)} users, "
        f"{users[max(users)].text()} with {max(users)}"
        for (name, dist), users in pairs.items()
    )
    return Finding(
        f"best ULDP-GROUP-k final utility above ULDP-AVG's minus {REASONABLE} {MARGIN} in {high} of "
        f"{total} settings; best GROUP-k minus ULDP-AVG larger with more users (smaller n), {MARGIN}, in "
        f"{small_n} of {len(pairs)} datasets and distributions ({shown})",
        verdict,
    )


def _avg_competitive(data: Mapping[str, ResultSet]) -> Finding:
    """ULDP-AVG's final utility within NOTICEABLE of the best other private method of each setting (the baselines
    and ULDP-SGD; ULDP-AVG-w, its own refinement, has its own claim)."""
    gaps = []
    for _, panel, table in _privacy_utility_panels(data):
        others = [
            s
            for s in dict.fromkeys(table.loc[table["panel"] == panel, "series"])
            if s not in ("DEFAULT", "ULDP-AVG", "ULDP-AVG-w")
        ]
        best = _best(table, panel, others)
        if best is not None and (gap := _compare(table, panel, "ULDP-AVG", best)) is not None:
            gaps.append(gap)
    hits = sum(gap.clears(-NOTICEABLE) for gap in gaps)
    verdict = fraction_verdict(hits, len(gaps))
    return Finding(
        f"ULDP-AVG's final utility above the best of ULDP-NAIVE, ULDP-GROUP-k and ULDP-SGD minus "
        f"{NOTICEABLE} {MARGIN} in {hits} of {len(gaps)} settings (ULDP-AVG minus that best: "
        f"{_differences_text(gaps, -NOTICEABLE)})",
        verdict,
    )


def _noniid_silo_methods(data: Mapping[str, ResultSet]) -> Finding:
    """DEFAULT and every ULDP-GROUP-k lose less final accuracy to user-level non-iid data than ULDP-AVG."""
    results = data.get("mnist", data.get(MNIST_SHORT))
    if results is None or not results.runs:
        raise NotMeasured("no MNIST results")
    drops = _noniid_drops(per_setting(results, "accuracy"))
    silo_trained = [s for s in drops if s == "DEFAULT" or s.startswith("ULDP-GROUP")]
    if "ULDP-AVG" not in drops or not silo_trained:
        raise NotMeasured(
            f"MNIST at the largest profile stored ({results.profile}) has zipf iid and non-iid runs of "
            f"{', '.join(sorted(drops)) or 'no method'} only; DEFAULT and ULDP-GROUP-k need both "
            "(their paper-profile MNIST runs are too long for the reference machine). What would "
            "measure it: `uldp grid mnist --profile short --methods DEFAULT ULDP-GROUP-2 ULDP-GROUP-8` "
            "(the zipf and zipf-noniid panels, 100 and 10000 users, 5 seeds) on a GPU machine, "
            "committed to results/short/mnist"
        )
    hits = total = 0
    shown = []
    for n_users, avg in drops["ULDP-AVG"].items():
        for series in silo_trained:
            if n_users in drops[series]:
                total += 1
                hits += avg.minus(drops[series][n_users]).clears(0.0)
                shown.append(f"{series} {drops[series][n_users].text()}")
        shown.append(f"ULDP-AVG {avg.text()} ({n_users} users)")
    return Finding(
        f"final accuracy, zipf iid minus non-iid: {', '.join(shown)}; a silo-trained method loses less "
        f"than ULDP-AVG, {MARGIN}, in {hits} of {total} comparisons",
        fraction_verdict(hits, total),
    )


def weighting_gaps(data: Mapping[str, ResultSet]) -> pd.DataFrame:
    """Final test loss of ULDP-AVG minus that of ULDP-AVG-w (positive: the weighting helps) per dataset, silo count
    and distribution, from the ``weighting`` grid's results.

    Returns:
        Columns ``dataset, n_silos, distribution, gap`` (the mean over seeds), ``se`` and ``difference`` (the
        :class:`~uldp.paper.verdicts.Difference`, paired by seed).

    Raises:
        NotMeasured: The results are missing.
    """
    results = stored_grid(data, "weighting", "no enhanced-weighting results")
    table = per_setting(results, "test_loss")
    if not {"ULDP-AVG", "ULDP-AVG-w"} <= set(table["method"]):
        raise NotMeasured("ULDP-AVG or ULDP-AVG-w missing in the weighting results")
    rows = []
    for (dataset, n_silos, distribution), group in table.groupby(
        ["dataset", "n_silos", "distribution"], sort=True
    ):
        by = group.set_index("method")["values"]
        if {"ULDP-AVG", "ULDP-AVG-w"} <= set(by.index):
            gap = difference(by["ULDP-AVG"], by["ULDP-AVG-w"])
            rows.append(
                {
                    "dataset": dataset,
                    "n_silos": n_silos,
                    "distribution": distribution,
                    "gap": gap.mean,
                    "se": gap.se,
                    "difference": gap,
                }
            )
    return pd.DataFrame(rows)


def _weighting_helps(data: Mapping[str, ResultSet]) -> Finding:
    gaps = weighting_gaps(data)
    hits = sum(gap.clears(0.0) for gap in gaps["difference"])
    shown = "; ".join(
        f"{r.dataset} |S|={r.n_silos} {r.distribution}: {r.difference.text(4)}"
        for r in gaps.itertuples()
    )
    return Finding(
        f"final test loss of ULDP-AVG minus ULDP-AVG-w: {shown}; above zero {MARGIN} in {hits} of "
        f"{len(gaps)}",
        fraction_verdict(hits, len(gaps)),
    )


def _weighting_zipf(data: Mapping[str, ResultSet]) -> Finding:
    gaps = weighting_gaps(data)
    # the authors' uniform draws (uniform-with-replacement, on TcgaBrca) are the figure's uniform panel
    by = {
        (
            r.dataset,
            r.n_silos,
            "uniform" if r.distribution in UNIFORM_SCHEMES else r.distribution,
        ): r.difference
        for r in gaps.itertuples()
    }
    pairs = [(d, s) for d, s, dist in by if dist == "zipf" and (d, s, "uniform") in by]
    if not pairs:
        raise NotMeasured("weighting results lack uniform or zipf")
    contrasts = {(d, s): by[(d, s, "zipf")].minus(by[(d, s, "uniform")]) for d, s in pairs}
    hits = sum(contrast.clears(0.0) for contrast in contrasts.values())
    # five decimals: the gaps of one silo count can differ in the fourth
    shown = "; ".join(
        f"{d} |S|={s}: zipf {by[(d, s, 'zipf')].mean:+.5f} vs uniform {by[(d, s, 'uniform')].mean:+.5f}"
        f" (zipf minus uniform {contrast.text(5)})"
        for (d, s), contrast in contrasts.items()
    )
    return Finding(
        f"loss gap (AVG minus AVG-w) {shown}; larger under zipf {MARGIN} in {hits} of {len(pairs)}",
        fraction_verdict(hits, len(pairs)),
    )


def _weighting_silos(data: Mapping[str, ResultSet]) -> Finding:
    gaps = weighting_gaps(data)
    zipf = gaps[(gaps["dataset"] == "creditcard") & (gaps["distribution"] == "zipf")].sort_values(
        "n_silos"
    )
    if len(zipf) < 2:
        raise NotMeasured(
            "Creditcard zipf weighting results with at least two silo counts are missing"
        )
    steps = list(zipf["difference"])
    growing = [later.minus(earlier) for earlier, later in itertools.pairwise(steps)]
    verdict = (
        HOLDS
        if all(step.clears(0.0) for step in growing)
        else PARTLY
        if steps[-1].mean > steps[0].mean
        else FAILS
    )
    shown = ", ".join(f"|S|={s}: {g.text(4)}" for s, g in zip(zipf["n_silos"], steps, strict=True))
    return Finding(
        f"Creditcard zipf, loss gap AVG minus AVG-w by silos: {shown} (held: each step up {MARGIN})",
        verdict,
    )


def _sampling_table(data: Mapping[str, ResultSet]) -> tuple[pd.DataFrame, pd.DataFrame]:
    results = stored_grid(data, "user_sampling", "no user-sampling results")
    return per_setting(results, "accuracy"), per_setting(results, "epsilon")


def _sampling_tradeoff(data: Mapping[str, ResultSet]) -> Finding:
    utility, epsilon = _sampling_table(data)
    parts, eps_ok, util_ok = [], 0, 0
    datasets = list(dict.fromkeys(utility["dataset"]))
    for dataset in datasets:
        u = utility[utility["dataset"] == dataset].sort_values("q")
        e = epsilon[epsilon["dataset"] == dataset].sort_values("q")
        eps_ok += bool(
            np.all(np.diff(e["mean"].to_numpy()) > 0)
        )  # accounting alone: no spread over seeds
        cost = difference(u["values"].iloc[-1], u["values"].iloc[0])
        util_ok += cost.clears(0.0)
        parts.append(
            f"{dataset}: q={u['q'].iloc[0]:g} -> accuracy {u['mean'].iloc[0]:.3f}, epsilon "
            f"{e['mean'].iloc[0]:.2f}; q={u['q'].iloc[-1]:g} -> {u['mean'].iloc[-1]:.3f}, "
            f"{e['mean'].iloc[-1]:.2f} (accuracy difference {cost.text()})"
        )
    n = len(datasets)
    verdict = HOLDS if eps_ok == util_ok == n else PARTLY if eps_ok == n else FAILS
    return Finding(
        "; ".join(parts)
        + f" (epsilon grows with q in {eps_ok} of {n}; utility at the largest q above "
        f"that at the smallest {MARGIN} in {util_ok} of {n})",
        verdict,
    )


def _sampling_q07(data: Mapping[str, ResultSet]) -> Finding:
    utility, _ = _sampling_table(data)
    rows = utility[utility["dataset"] == "creditcard"].set_index("q")["values"]
    if not {0.7, 1.0} <= set(rows.index):
        raise NotMeasured("Creditcard with q = 0.7 and q = 1.0 is missing")
    kept = difference(
        rows[0.7], rows[1.0]
    )  # "acceptable loss": q = 0.7 above q = 1.0 minus NOTICEABLE
    return Finding(
        f"Creditcard accuracy q=0.7 minus q=1.0: {kept.text()} (held: above -{NOTICEABLE} {MARGIN})",
        margin_verdict(kept, -NOTICEABLE),
    )


def _sampling_mnist(data: Mapping[str, ResultSet]) -> Finding:
    utility, _ = _sampling_table(data)
    drops = {}
    for dataset in ("creditcard", "mnist"):
        u = utility[utility["dataset"] == dataset].sort_values("q")
        if len(u) >= 2:  # relative to the accuracy at the largest q
            drops[dataset] = difference(u["values"].iloc[-1], u["values"].iloc[0]).times(
                1 / u["mean"].iloc[-1]
            )
    if len(drops) < 2:
        raise NotMeasured(
            "user-sampling results for both Creditcard and MNIST are needed; what would measure it: "
            "`uldp grid user_sampling --profile paper --datasets mnist` (ULDP-AVG-w, 10000 users, "
            "T = 200, q = 0.1, 0.3, 0.5, 1.0, 5 seeds) on a GPU machine, committed to "
            "results/user_sampling"
        )
    cheaper = drops["creditcard"].minus(drops["mnist"])
    return Finding(
        f"relative accuracy loss from the largest to the smallest q: MNIST {drops['mnist'].mean:.1%}, "
        f"Creditcard {drops['creditcard'].mean:.1%} (Creditcard minus MNIST {cheaper.text()}; held: "
        f"above zero {MARGIN})",
        margin_verdict(cheaper, 0.0),
    )


#: Every claim of Section 5.2, in the paper's order.
CLAIMS: tuple[Claim, ...] = (
    Claim(
        "tradeoff",
        "ULDP-AVG/SGD give significantly better privacy-utility trade-offs than the baselines "
        "(ULDP-NAIVE, ULDP-GROUP-k).",
        "Figures 4-7",
        PRIVACY_UTILITY_GRIDS,
        _proposed_tradeoff,
    ),
    Claim(
        "naive-low",
        "ULDP-NAIVE achieves a low privacy bound, but its utility is much lower than the other "
        "methods'.",
        "Figures 4-7",
        PRIVACY_UTILITY_GRIDS,
        _naive_low,
    ),
    Claim(
        "group-epsilon",
        "ULDP-GROUP-k requires much larger privacy budgets (group-privacy conversion).",
        "Figures 4-7",
        PRIVACY_UTILITY_GRIDS,
        _group_epsilon,
    ),
    Claim(
        "avg-vs-sgd",
        "ULDP-AVG converges faster than ULDP-SGD.",
        "Figures 4-7",
        PRIVACY_UTILITY_GRIDS,
        lambda data: _pairwise(data, "ULDP-AVG", "ULDP-SGD", "auc"),
    ),
    Claim(
        "default-gap",
        "There is still a gap between ULDP-AVG and the non-private DEFAULT in ultimately achievable "
        "accuracy, the price of privacy.",
        "Figures 4-7",
        PRIVACY_UTILITY_GRIDS,
        _default_gap,
    ),
    Claim(
        "default-gap-speed",
        "There is still a gap between ULDP-AVG and the non-private DEFAULT in convergence speed.",
        "Figures 4-7",
        PRIVACY_UTILITY_GRIDS,
        lambda data: _pairwise(data, "DEFAULT", "ULDP-AVG", "auc"),
    ),
    Claim(
        "group-small-n",
        "For small n (Creditcard, 1000 users, uniform), ULDP-GROUP-max/median reach higher "
        "accuracy than ULDP-AVG.",
        "Figure 4c",
        ("creditcard",),
        _group_beats_avg_small_n,
    ),
    Claim(
        "avg-competitive",
        "In all datasets ULDP-AVG is competitive in utility.",
        "Figures 4-7",
        PRIVACY_UTILITY_GRIDS,
        _avg_competitive,
    ),
    Claim(
        "avg-w-faster",
        "In all datasets ULDP-AVG-w converges much faster than ULDP-AVG.",
        "Figures 4-7",
        PRIVACY_UTILITY_GRIDS,
        lambda data: _pairwise(data, "ULDP-AVG-w", "ULDP-AVG", "auc", by=NOTICEABLE),
    ),
    Claim(
        "group-utility",
        "ULDP-GROUP-k shows reasonably high utility, especially where n (records per user) is "
        "small.",
        "Figures 4-7",
        PRIVACY_UTILITY_GRIDS,
        _group_utility,
    ),
    Claim(
        "group2-mnist",
        "On MNIST with 10000 users (few records per user, many records), ULDP-GROUP-2 reaches a "
        "reasonably small privacy bound.",
        "Figure 5d-f",
        (MNIST_ACCOUNTING,),
        _group2_mnist,
    ),
    Claim(
        "non-iid",
        "User-level non-iid data hurts ULDP-AVG with 100 users (MNIST), much less with 10000 users.",
        "Figure 5c, 5f",
        ("mnist", MNIST_SHORT),
        _noniid,
    ),
    Claim(
        "non-iid-silo-methods",
        "DEFAULT and ULDP-GROUP-k are less affected by user-level non-iid data (they train "
        "per silo, not per user).",
        "Figure 5c, 5f",
        ("mnist", MNIST_SHORT),
        _noniid_silo_methods,
    ),
    Claim(
        "weighting",
        "The enhanced weighting (ULDP-AVG-w) lowers the test loss compared with ULDP-AVG.",
        "Figure 8",
        ("weighting",),
        _weighting_helps,
    ),
    Claim(
        "weighting-zipf",
        "The gain of ULDP-AVG-w is larger under skewed (zipf) allocations.",
        "Figure 8",
        ("weighting",),
        _weighting_zipf,
    ),
    Claim(
        "weighting-silos",
        "The gain of ULDP-AVG-w grows with the number of silos.",
        "Figure 8",
        ("weighting",),
        _weighting_silos,
    ),
    Claim(
        "sampling",
        "User-level sub-sampling gives a tighter privacy bound at the expense of utility.",
        "Figure 9",
        ("user_sampling",),
        _sampling_tradeoff,
    ),
    Claim(
        "sampling-q07",
        "On Creditcard the utility loss of sub-sampling is acceptable at q = 0.7.",
        "Figure 9a",
        ("user_sampling",),
        _sampling_q07,
    ),
    Claim(
        "sampling-mnist",
        "With 10000 users (MNIST) sub-sampling costs less utility than on Creditcard.",
        "Figure 9b",
        ("user_sampling",),
        _sampling_mnist,
    ),
    Claim(
        "runtime-dominant",
        "The execution time of local training is dominant in the private weighting protocol "
        "(HeartDisease, TcgaBrca).",
        "Figure 10",
        ("protocol_runtime",),
        runtime_dominant,
    ),
    Claim(
        "runtime-users",
        "On the artificial model, the protocol's execution time increases with the number of "
        "users.",
        "Figure 11",
        (),
        runtime_users,
    ),
    Claim(
        "runtime-parameters",
        "The protocol's execution time (the server's aggregation as well) increases with the "
        "parameter size.",
        "Figure 11",
        (),
        runtime_parameters,
    ),
    Claim(
        "runtime-linear",
        "The dominant execution time grows linearly with parameter size and/or the number of "
        "users.",
        "Figure 11",
        (),
        runtime_linear,
    ),
    Claim(
        "runtime-practical",
        "With a small model the private weighting protocol has a practical execution time.",
        "Figure 10",
        ("protocol_runtime",),
        runtime_practical,
    ),
)


def stored_results(
    profile: str, *, paper_root: Any = None, root: Any = None, short_root: Any = None
) -> dict[str, ResultSet]:
    """Per grid, the committed paper-profile results when they cover every line of the figure; else those of the
    panels they cover whole, when there are such panels (a verdict at paper scale on fewer settings); else the
    ``profile``'s stored results. Under :data:`MNIST_ACCOUNTING`, the MNIST epsilons of the paper profile from
    accounting alone (a few seconds: the records are allocated, nothing is trained; left out, so the claim reads
    "not measured", where the MNIST files are missing). Under :data:`MNIST_SHORT`, MNIST's committed short-profile
    results (read from ``short_root``, default ``results/short/``).

    Nothing trains: the experiment chapters (or ``uldp grid``) produce the results.
    """
    data = {MNIST_SHORT: load_results("mnist", "short", root=short_root)}
    with contextlib.suppress(
        FileNotFoundError
    ):  # no MNIST files: the claim reads "not measured", nothing else
        data[MNIST_ACCOUNTING] = accounted_results("mnist", methods=MNIST_ACCOUNTING_METHODS)
    for name in GRIDS:
        paper = load_results(name, "paper", root=paper_root)
        if paper.covers_every_line or profile == "paper":
            data[name] = paper
        elif paper.covered_panels():
            data[name] = paper.only_panels(paper.covered_panels())
        else:
            data[name] = load_results(name, profile, root=root)
    return data


def _source(results: ResultSet) -> str:
    """Which results a verdict rests on: grid, profile (:func:`uldp.paper.verdicts.profile_label`: "paper settings on
    the
    Creditcard subset" where that ran), seeds, runs and panels when not all."""
    text = f"{results.grid}: {profile_label(results)}, {len({run['seed'] for run in results.runs})} seed(s)"
    if results.source == "accounting":
        text += ", epsilon from accounting alone (nothing trained)"
    if not results.complete:
        text += f", {len(results.runs)}/{len(results.runs) + len(results.missing)} runs"
    shown = {run["panel"] for run in results.runs} | {spec.panel for spec in results.missing}
    every = {spec.panel for spec in expand(results.grid, results.profile)}
    if shown < every:
        text += f", only panel(s) {', '.join(sorted(shown))}"
    return text


def at_largest_profile(
    data: Mapping[str, ResultSet], names: tuple[str, ...]
) -> dict[str, ResultSet]:
    """The stored results of the grids ``names`` at the largest profile any of them has (paper, short, default,
    smoke): a verdict rests on one scale, the largest stored. A grid stored only at a smaller profile is left out;
    for instance the book's own small runs of MNIST beside the paper-profile runs of the other datasets.

    >>> from uldp.paper.experiments import ResultSet
    >>> data = {name: ResultSet(name, profile, ({},), (), "memory")
    ...         for name, profile in (("creditcard", "paper"), ("mnist", "default"), ("tcga_brca", "paper"))}
    >>> list(at_largest_profile(data, ("creditcard", "mnist", "tcga_brca", "heart_disease")))
    ['creditcard', 'tcga_brca']
    """
    stored = {name: data[name] for name in names if name in data and data[name].runs}
    largest = max((PROFILES.index(results.profile) for results in stored.values()), default=0)
    return {
        name: results
        for name, results in stored.items()
        if PROFILES.index(results.profile) == largest
    }


def scorecard(data: Mapping[str, ResultSet], *, grid: str | None = None) -> pd.DataFrame:
    """Check every claim of :data:`CLAIMS` against stored results, each on its grids' results at the largest
    profile stored (:func:`at_largest_profile`).

    Args:
        data: ``{grid name: ResultSet}``, e.g. from :func:`stored_results`.
        grid: Only the claims that read this grid.

    Returns:
        One row per claim: ``key, claim, where, measured, verdict, source`` (the profile and seeds of the results
        used).
    """
    rows = []
    for claim in CLAIMS:
        if grid is not None and grid not in claim.grids:
            continue
        used = at_largest_profile(data, claim.grids)
        try:
            finding = claim.check(used)
        except NotMeasured as missing:
            finding = Finding(f"not measured: {missing}", MISSING)
        source = finding.source or "; ".join(_source(results) for results in used.values())
        rows.append(
            {
                "key": claim.key,
                "claim": claim.text,
                "where": claim.where,
                "measured": finding.measured,
                "verdict": finding.verdict,
                "source": source or "-",
            }
        )
    return pd.DataFrame(rows)


#: What :func:`final_table` shows where a series has no stored run at a panel (a reduced profile leaves it out).
NOT_RUN = "not run"


def final_table(results: ResultSet, metric: str | None = None) -> pd.DataFrame:
    """Final utility and epsilon (mean +- std over seeds) per setting and series, as the chapters show them.

    Args:
        results: Stored results of one grid.
        metric: The per-round column to show (default: the dataset's utility metric).

    Returns:
        Rows: panels; columns: series; cells ``"0.912 ± 0.004 | ε 3.21"`` (no epsilon for DEFAULT), and
        :data:`NOT_RUN` where a series has no run at a panel.

    Raises:
        NotMeasured: No stored runs, or the metric is absent.
    """
    utility = per_setting(results, metric or _utility(results))
    epsilon = (
        per_setting(results, "epsilon")
        if any(
            value is not None for run in results.runs for value in run["result"].get("epsilon", [])
        )
        else None
    )
    cells = {}
    for row in utility.itertuples():
        text = f"{row.mean:.3f}" + (
            f" ± {row.std:.3f}" if row.std == row.std else ""
        )  # no std from one seed
        if epsilon is not None and (eps := _value(epsilon, row.panel, row.series)) is not None:
            text += f" | ε {readable_number(eps)}"
        cells[(row.panel, row.series)] = text
    table = pd.Series(cells).unstack(fill_value=NOT_RUN)
    order = list(dict.fromkeys(run["series"] for run in results.runs))
    return table[[s for s in order if s in table.columns]].reindex(
        list(dict.fromkeys(utility["panel"]))
    )
