"""The Scorecard's claims about the privacy-utility figures (Section 5.2, Figures 4-7), each a function of the stored
results that returns a :class:`~uldp.paper.verdicts.Finding`.

Utility is the metric a constant predictor cannot pass where the classes are imbalanced (:func:`judged_metric`:
balanced accuracy on Creditcard, whose "normal" class is nine tenths of the test set, the C-index on TcgaBrca,
accuracy elsewhere); "final" means the last round; "convergence speed" is the mean utility over all rounds (the area
under the curve, so a method that gets high sooner scores higher). Each comparison is a paired difference over
seeds, judged per setting by :func:`~uldp.paper.verdicts.margin_verdict` and over settings by
:func:`~uldp.paper.verdicts.settings_verdict`.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

import numpy as np

from uldp.paper.experiments import GRIDS, UTILITY_METRIC
from uldp.paper.verdicts import (
    SE_MULTIPLE,
    Difference,
    Finding,
    NotMeasured,
    counted,
    difference,
    estimate,
    margin_verdict,
    per_setting,
    settings_verdict,
    stored_grid,
    value,
    values,
)

if TYPE_CHECKING:
    from collections.abc import Mapping

    import pandas as pd

    from uldp.paper.experiments import ResultSet

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


def in_part(grid: str) -> str:
    """The key of ``grid``'s paper-profile runs in panels stored only in part (MNIST's Figure 9 sub-sampling
    endpoints before the rates between them): shown and described, never judged.

    >>> in_part("user_sampling")
    'user_sampling-in-part'
    """
    return f"{grid}-in-part"


#: "much larger privacy budgets": GROUP-k's epsilon at least this many times ULDP-AVG's.
MUCH_LARGER = 10.0
#: A utility difference we call noticeable (accuracy or C-index points); also "much lower" and "much faster" (mean
#: utility over rounds at least this much higher) and "competitive" (final utility within this of the best).
NOTICEABLE = 0.02
#: "reasonably high utility": final utility within this of ULDP-AVG's (accuracy or C-index points).
REASONABLE = 0.05
#: "a reasonably small privacy bound": epsilon at most this.
SMALL_EPSILON = 10.0
#: What the margin of every verdict is, in the rows.
MARGIN = f"by more than {SE_MULTIPLE:g} standard errors over seeds, paired by seed"
#: What the Scorecard says wherever it judges ULDP-NAIVE: the noise it ran with.
NAIVE_NOISE = (
    "ULDP-NAIVE ran with the corrected, doubled noise (2σC√|S| per silo, for the true sensitivity 2|S|C; "
    "the paper's Algorithm 1 adds half)"
)
#: The metric each dataset's claims are judged on where it differs from the figures' (a constant predictor reaches
#: 0.909 accuracy on Creditcard's test set but 0.5 balanced accuracy).
JUDGED_METRICS: dict[str, str] = {"creditcard": "balanced_accuracy"}
#: The metrics' names in the rows.
METRIC_NAMES: dict[str, str] = {
    "accuracy": "accuracy",
    "balanced_accuracy": "balanced accuracy",
    "c_index": "C-index",
    "test_loss": "test loss",
    "epsilon": "epsilon",
}


def judged_metric(dataset: str) -> str:
    """The utility metric the claims read for ``dataset``: one a constant predictor cannot pass.

    >>> judged_metric("creditcard"), judged_metric("tcga_brca"), judged_metric("mnist")
    ('balanced_accuracy', 'c_index', 'accuracy')
    """
    return JUDGED_METRICS.get(dataset, UTILITY_METRIC.get(dataset, "accuracy"))


def utility_metric(results: ResultSet) -> str:
    """:func:`judged_metric` of the dataset of ``results`` (accuracy when it has no runs)."""
    return judged_metric(results.runs[0]["params"]["dataset"]) if results.runs else "accuracy"


def privacy_utility_panels(
    data: Mapping[str, ResultSet], how: str = "final", metric: str | None = None
) -> list[tuple[str, str, pd.DataFrame]]:
    """``(grid, panel, table)`` for every stored privacy-utility panel (utility unless ``metric`` is given)."""
    found: list[tuple[str, str, pd.DataFrame]] = []
    for name in PRIVACY_UTILITY_GRIDS:
        results = data.get(name)
        if results is None or not results.runs:
            continue
        try:
            table = per_setting(results, metric or utility_metric(results), how)
        except NotMeasured:
            continue
        found.extend((name, panel, table) for panel in dict.fromkeys(table["panel"]))
    if not found:
        raise NotMeasured("no privacy-utility results are stored")
    return found


def setting_label(grid: str, panel: str, gap: Difference) -> str:
    """A setting as a forest plot and a row name it: ``"heart_disease |U|=50, zipf (20 seeds)"``."""
    return f"{grid} {panel} ({gap.seeds} seed{'s' if gap.seeds != 1 else ''})"


def _group_exception(grid: str, table: pd.DataFrame, panel: str) -> bool:
    """The paper's stated exception to GROUP-k's large epsilon: MNIST with many users (few records per user, many
    records in all), where ULDP-GROUP-2 gets a small bound (checked by its own claim)."""
    return grid == "mnist" and bool((table.loc[table["panel"] == panel, "n_users"] >= 1000).all())


def compare(table: pd.DataFrame, panel: str, a: str, b: str) -> Difference | None:
    """``a - b`` in ``panel`` over seeds (``None`` when either is absent)."""
    high, low = values(table, panel, a), values(table, panel, b)
    return None if high is None or low is None else difference(high, low)


def _best(table: pd.DataFrame, panel: str, series: list[str]) -> str | None:
    """The series of ``series`` with the highest mean in ``panel`` (``None`` when none is there)."""
    present = {name: mean for name in series if (mean := value(table, panel, name)) is not None}
    return max(present, key=lambda name: present[name]) if present else None


def differences_text(gaps: list[Difference]) -> str:
    """The median and range of the differences and their median standard error."""
    means = [gap.mean for gap in gaps]
    errors = [gap.se for gap in gaps if np.isfinite(gap.se)]
    spread = f", median SE {np.median(errors):.3f}" if errors else ", one seed: no spread"
    return f"median difference {np.median(means):+.3f}, range {min(means):+.3f} to {max(means):+.3f}{spread}"


def judged(
    gaps: list[tuple[str, Difference]], threshold: float, measure: str, claim: str
) -> Finding:
    """The finding of a claim that one difference per setting clears ``threshold``: ``claim`` (what must hold, in
    words), the verdicts counted per setting and the differences summarised; the gaps kept for a forest plot."""
    verdicts = [margin_verdict(gap, threshold) for _, gap in gaps]
    verdict = settings_verdict(verdicts)
    return Finding(
        f"{claim} ({measure}): {counted(verdicts)}; {differences_text([gap for _, gap in gaps])}",
        verdict,
        gaps=tuple(gaps),
        threshold=threshold,
        measure=measure,
    )


def pairwise(
    data: Mapping[str, ResultSet], better: str, worse: str, how: str, by: float = 0.0
) -> Finding:
    """Claim that ``better`` has higher utility than ``worse`` by more than ``by``, in every privacy-utility setting."""
    gaps = [
        (setting_label(grid, panel, gap), gap)
        for grid, panel, table in privacy_utility_panels(data, how)
        if (gap := compare(table, panel, better, worse)) is not None
    ]
    what = "final utility" if how == "final" else "mean utility over rounds"
    margin = f"more than {by:g} above" if by else "above"
    return judged(gaps, by, f"{better} minus {worse}, {what}", f"{better} {margin} {worse}")


def proposed_tradeoff(data: Mapping[str, ResultSet]) -> Finding:
    epsilon = {
        name: per_setting(data[name], "epsilon")
        for name in PRIVACY_UTILITY_GRIDS
        if name in data and data[name].runs
    }
    gaps, verdicts = [], []
    for name, panel, table in privacy_utility_panels(data):
        best = _best(table, panel, ["ULDP-AVG", "ULDP-AVG-w", "ULDP-SGD"])
        group = min(
            (
                s
                for s in set(epsilon[name]["series"])
                if s.startswith("ULDP-GROUP") and value(epsilon[name], panel, s) is not None
            ),
            key=lambda s: value(epsilon[name], panel, s) or 0.0,
            default=None,
        )
        if best is None or group is None or _group_exception(name, table, panel):
            continue
        utility = compare(table, panel, best, "ULDP-NAIVE")
        budget = compare(epsilon[name], panel, group, "ULDP-AVG")
        if utility is None or budget is None:
            continue
        gaps.append((setting_label(name, panel, utility), utility))
        verdicts.append(
            settings_verdict([margin_verdict(utility, 0.0), margin_verdict(budget, 0.0)])
        )
    return Finding(
        "the best of ULDP-AVG/AVG-w/SGD has higher utility than ULDP-NAIVE (at the same epsilon) and ULDP-AVG a "
        f"smaller epsilon than every ULDP-GROUP-k, both {MARGIN}: {counted(verdicts)} (MNIST with many users "
        f"excluded, as in the paper); {NAIVE_NOISE}",
        settings_verdict(verdicts),
        gaps=tuple(gaps),
        measure="best of ULDP-AVG/AVG-w/SGD minus ULDP-NAIVE, final utility",
    )


def naive_low(data: Mapping[str, ResultSet]) -> Finding:
    gaps = []
    for grid, panel, table in privacy_utility_panels(data):
        present = [s for s in ("ULDP-AVG", "ULDP-AVG-w") if value(table, panel, s) is not None]
        weaker = min(present, key=lambda s: value(table, panel, s) or 0.0, default=None)
        if weaker is not None and (gap := compare(table, panel, weaker, "ULDP-NAIVE")) is not None:
            gaps.append((setting_label(grid, panel, gap), gap))
    finding = judged(
        gaps,
        NOTICEABLE,
        "the weaker of ULDP-AVG and ULDP-AVG-w minus ULDP-NAIVE, final utility",
        f"ULDP-NAIVE more than {NOTICEABLE} below both ULDP-AVG and ULDP-AVG-w",
    )
    return Finding(
        f"{finding.measured}; {NAIVE_NOISE}",
        finding.verdict,
        gaps=finding.gaps,
        threshold=finding.threshold,
        measure=finding.measure,
    )


def group_epsilon(data: Mapping[str, ResultSet]) -> Finding:
    ratios = []
    for name, panel, table in privacy_utility_panels(data, metric="epsilon"):
        avg = values(table, panel, "ULDP-AVG")
        groups = [
            s for s in set(table["series"]) if s.startswith("ULDP-GROUP") and value(table, panel, s)
        ]
        if _group_exception(name, table, panel) or not avg or not groups:
            continue
        group = values(table, panel, min(groups, key=lambda s: value(table, panel, s) or 0.0)) or {}
        # per seed: the runs of one seed share the allocation that sets GROUP-k's group size
        common = set(group) & set(avg)
        if common:
            ratio = estimate({seed: group[seed] / avg[seed] for seed in common})
            ratios.append((setting_label(name, panel, ratio), ratio))
    finding = judged(
        ratios,
        MUCH_LARGER,
        "smallest ULDP-GROUP-k epsilon / ULDP-AVG epsilon, per seed",
        f"ULDP-GROUP-k's epsilon at least {MUCH_LARGER:g} times ULDP-AVG's",
    )
    return Finding(
        f"{finding.measured}; median ratio {np.median([r.mean for _, r in ratios]):.1f}x "
        "(MNIST with many users excluded, as in the paper)",
        finding.verdict,
        gaps=finding.gaps,
        threshold=finding.threshold,
        measure=finding.measure,
    )


def _spread(table: pd.DataFrame, panel: str, series: list[str]) -> str:
    """``"A 0.912 ± 0.004, B ..."``: each series' mean and std over seeds in ``panel`` (no std from one seed)."""
    shown = []
    for name in series:
        row = table[(table["panel"] == panel) & (table["series"] == name)].iloc[0]
        shown.append(
            f"{name} {row['mean']:.3f}" + (f" ± {row['std']:.3f}" if row["seeds"] > 1 else "")
        )
    return ", ".join(shown)


def group_beats_avg_small_n(data: Mapping[str, ResultSet]) -> Finding:
    results = stored_grid(data, "creditcard", "no Creditcard results")
    metric = utility_metric(results)
    table = per_setting(results, metric)
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
        if (gap := compare(table, panel, s, "ULDP-AVG")) is not None
    }
    if not gaps:
        raise NotMeasured("ULDP-AVG or ULDP-GROUP-max/median missing in that setting")
    compared = ["ULDP-AVG", *gaps]
    measured = (
        f"{panel}, {METRIC_NAMES[metric]}: {_spread(table, panel, compared)}; minus ULDP-AVG: "
        + ", ".join(f"{s} {gap.interval()}" for s, gap in gaps.items())
    )
    with contextlib.suppress(NotMeasured):  # accuracy beside: what the paper's figure shows
        measured += f"; accuracy {_spread(per_setting(results, 'accuracy'), panel, compared)}"
    return Finding(
        measured,
        settings_verdict([margin_verdict(gap, 0.0) for gap in gaps.values()]),
        gaps=tuple((f"{s} minus ULDP-AVG ({gap.seeds} seeds)", gap) for s, gap in gaps.items()),
        measure=f"final {METRIC_NAMES[metric]}, {panel}",
    )


def group2_mnist(data: Mapping[str, ResultSet]) -> Finding:
    results = stored_grid(
        data,
        MNIST_ACCOUNTING,
        "no MNIST epsilons (accounting at the paper's settings needs the data)",
    )
    table = per_setting(results, "epsilon")
    rows = table[table["series"] == "ULDP-GROUP-2"]
    if rows.empty or rows["n_users"].nunique() < 2:
        raise NotMeasured("ULDP-GROUP-2 on MNIST with both user counts is missing")
    many = rows[rows["n_users"] == rows["n_users"].max()]
    few = rows[rows["n_users"] == rows["n_users"].min()]
    largest, smallest = many.loc[many["mean"].idxmax()], few.loc[few["mean"].idxmin()]
    avg = table[(table["series"] == "ULDP-AVG") & (table["n_users"] == rows["n_users"].max())]
    # -epsilon: "at most SMALL_EPSILON" is -epsilon > -SMALL_EPSILON
    under = estimate(largest["values"]).times(-1.0)
    below = difference(smallest["values"], largest["values"])
    return Finding(
        f"ULDP-GROUP-2 epsilon with {rows['n_users'].max()} users: at most {largest['mean']:.2f} "
        f"(ULDP-AVG {avg['mean'].mean():.2f}); with {rows['n_users'].min()} users: at least "
        f"{smallest['mean']:.2f} (held: at most {SMALL_EPSILON:g} and below the few-users value, {MARGIN})",
        settings_verdict([margin_verdict(under, -SMALL_EPSILON), margin_verdict(below, 0.0)]),
    )


def _noniid_results(data: Mapping[str, ResultSet]) -> ResultSet:
    results = data.get("mnist", data.get(MNIST_SHORT))
    if results is None or not results.runs:
        raise NotMeasured("no MNIST results")
    return results


def noniid(data: Mapping[str, ResultSet]) -> Finding:
    results = _noniid_results(data)
    drops = _noniid_drops(per_setting(results, "accuracy")).get("ULDP-AVG", {})
    if len(drops) < 2:
        raise NotMeasured("ULDP-AVG on MNIST zipf iid and non-iid with two user counts is missing")
    few, many = drops[min(drops)], drops[max(drops)]
    halved = few.times(0.5).minus(many)  # "much less": less than half of it
    params = results.runs[0]["params"]
    return Finding(
        f"ULDP-AVG final accuracy, zipf iid minus non-iid: {few.interval()} with {min(drops)} users, "
        f"{many.interval()} with {max(drops)} users, {results.profile} profile (T={params['rounds']}, "
        f"Q={params['local_epochs']}) (held: > {NOTICEABLE} and less than half of it, {MARGIN})",
        settings_verdict([margin_verdict(few, NOTICEABLE), margin_verdict(halved, 0.0)]),
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


def group_utility(data: Mapping[str, ResultSet]) -> Finding:
    """Reasonably high (within REASONABLE of ULDP-AVG), and more so where n is small (more users, same data)."""
    gaps: dict[tuple[str, str | None, int], Difference] = {}
    labelled = []
    for name, panel, table in privacy_utility_panels(data):
        groups = [
            s
            for s in dict.fromkeys(table.loc[table["panel"] == panel, "series"])
            if s.startswith("ULDP-GROUP")
        ]
        best = _best(table, panel, groups)
        gap = None if best is None else compare(table, panel, best, "ULDP-AVG")
        if gap is None:
            continue
        labelled.append((setting_label(name, panel, gap), gap))
        row = table[table["panel"] == panel].iloc[0]
        gaps[(name, row.get("distribution"), int(row["n_users"]))] = gap
    if not gaps:
        raise NotMeasured("no setting has ULDP-AVG and a ULDP-GROUP-k")
    pairs: dict[tuple[str, str | None], dict[int, Difference]] = {}
    for (name, distribution, n_users), gap in gaps.items():
        pairs.setdefault((name, distribution), {})[n_users] = gap
    pairs = {key: users for key, users in pairs.items() if len(users) >= 2}
    high = [margin_verdict(gap, -REASONABLE) for _, gap in labelled]
    small_n = [
        margin_verdict(users[max(users)].minus(users[min(users)]), 0.0) for users in pairs.values()
    ]
    return Finding(
        f"best ULDP-GROUP-k final utility above ULDP-AVG's minus {REASONABLE}: {counted(high)}; larger with "
        f"more users (smaller n): {counted(small_n)} of datasets and distributions",
        settings_verdict(high + small_n),
        gaps=tuple(labelled),
        threshold=-REASONABLE,
        measure="best ULDP-GROUP-k minus ULDP-AVG, final utility",
    )


def avg_competitive(data: Mapping[str, ResultSet]) -> Finding:
    """ULDP-AVG's final utility within NOTICEABLE of the best other private method of each setting (the baselines
    and ULDP-SGD; ULDP-AVG-w, its own refinement, has its own claim)."""
    gaps = []
    for grid, panel, table in privacy_utility_panels(data):
        others = [
            s
            for s in dict.fromkeys(table.loc[table["panel"] == panel, "series"])
            if s not in ("DEFAULT", "ULDP-AVG", "ULDP-AVG-w")
        ]
        best = _best(table, panel, others)
        if best is not None and (gap := compare(table, panel, "ULDP-AVG", best)) is not None:
            gaps.append((setting_label(grid, panel, gap), gap))
    return judged(
        gaps,
        -NOTICEABLE,
        "ULDP-AVG minus the best of ULDP-NAIVE, ULDP-GROUP-k and ULDP-SGD, final utility",
        f"ULDP-AVG's final utility above that best minus {NOTICEABLE}",
    )


def noniid_silo_methods(data: Mapping[str, ResultSet]) -> Finding:
    """DEFAULT and every ULDP-GROUP-k lose less final accuracy to user-level non-iid data than ULDP-AVG."""
    results = _noniid_results(data)
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
    verdicts, shown = [], []
    for n_users, avg in drops["ULDP-AVG"].items():
        for series in silo_trained:
            if n_users in drops[series]:
                verdicts.append(margin_verdict(avg.minus(drops[series][n_users]), 0.0))
                shown.append(f"{series} {drops[series][n_users].text()}")
        shown.append(f"ULDP-AVG {avg.text()} ({n_users} users)")
    return Finding(
        f"final accuracy, zipf iid minus non-iid: {', '.join(shown)}; a silo-trained method loses less "
        f"than ULDP-AVG, {MARGIN}: {counted(verdicts)}",
        settings_verdict(verdicts),
    )
