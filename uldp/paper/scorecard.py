"""The claims of the paper's results section (Section 5.2), each checked against our stored results.

Every claim is a function of the stored results of the grids (:mod:`uldp.paper.experiments`) that returns what we
measured and a verdict that says which way the results point (:mod:`uldp.paper.verdicts`): ``holds``, ``not shown``
(the paper's direction, or none, inside the spread over seeds), ``contradicted`` (the other direction, beyond it) or
``not measured``. Every size word ("much larger", "much faster", "reasonably high", "competitive", "practical") has
one threshold, stated in :mod:`uldp.paper.scorecard_utility` and in the row, and every comparison must clear its
threshold by :data:`~uldp.paper.verdicts.SE_MULTIPLE` standard errors over seeds, paired by seed. A claim is judged
on its grids' results at the largest profile stored, never on a mix of scales. The claims live beside this module:
the privacy-utility figures' in :mod:`uldp.paper.scorecard_utility`, the weighting and sub-sampling figures' in
:mod:`uldp.paper.scorecard_figures`, the protocol overhead's in :mod:`uldp.paper.scorecard_runtime`.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pandas as pd

from uldp.paper.experiments import (
    GRIDS,
    PROFILES,
    TAILED_METRICS,
    UTILITY_METRIC,
    ResultSet,
    accounted_results,
    expand,
    load_results,
)
from uldp.paper.scorecard_figures import (
    sampling_mnist,
    sampling_q07,
    sampling_tradeoff,
    weighting_gaps,
    weighting_helps,
    weighting_silos,
    weighting_zipf,
)
from uldp.paper.scorecard_runtime import (
    runtime_dominant,
    runtime_linear,
    runtime_parameters,
    runtime_practical,
    runtime_users,
)
from uldp.paper.scorecard_utility import (
    MNIST_ACCOUNTING,
    MNIST_ACCOUNTING_METHODS,
    MNIST_SHORT,
    MUCH_LARGER,
    NAIVE_NOISE,
    NOTICEABLE,
    PRIVACY_UTILITY_GRIDS,
    REASONABLE,
    SMALL_EPSILON,
    avg_competitive,
    group2_mnist,
    group_beats_avg_small_n,
    group_epsilon,
    group_utility,
    in_part,
    naive_low,
    noniid,
    noniid_silo_methods,
    pairwise,
    proposed_tradeoff,
)
from uldp.paper.verdicts import (
    CONTRADICTED,
    HOLDS,
    MISSING,
    NOT_SHOWN,
    SE_MULTIPLE,
    Finding,
    NotMeasured,
    per_setting,
    profile_label,
    readable_number,
    value,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

#: The names other modules read from here (the claims' thresholds and keys live in the claims' modules).
__all__ = [
    "CLAIMS",
    "CONTRADICTED",
    "HOLDS",
    "MISSING",
    "MNIST_ACCOUNTING",
    "MNIST_SHORT",
    "MUCH_LARGER",
    "NAIVE_NOISE",
    "NOTICEABLE",
    "NOT_RUN",
    "NOT_SHOWN",
    "REASONABLE",
    "SE_MULTIPLE",
    "SMALL_EPSILON",
    "TAILED_METRICS",
    "Claim",
    "at_largest_profile",
    "final_table",
    "in_part",
    "judge",
    "per_setting",
    "scorecard",
    "stored_results",
    "weighting_gaps",
]


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


#: Every claim of Section 5.2, in the paper's order.
CLAIMS: tuple[Claim, ...] = (
    Claim(
        "tradeoff",
        "ULDP-AVG/SGD give significantly better privacy-utility trade-offs than the baselines "
        "(ULDP-NAIVE, ULDP-GROUP-k).",
        "Figures 4-7",
        PRIVACY_UTILITY_GRIDS,
        proposed_tradeoff,
    ),
    Claim(
        "naive-low",
        "ULDP-NAIVE achieves a low privacy bound, but its utility is much lower than the other "
        "methods'.",
        "Figures 4-7",
        PRIVACY_UTILITY_GRIDS,
        naive_low,
    ),
    Claim(
        "group-epsilon",
        "ULDP-GROUP-k requires much larger privacy budgets (group-privacy conversion).",
        "Figures 4-7",
        PRIVACY_UTILITY_GRIDS,
        group_epsilon,
    ),
    Claim(
        "avg-vs-sgd",
        "ULDP-AVG converges faster than ULDP-SGD.",
        "Figures 4-7",
        PRIVACY_UTILITY_GRIDS,
        lambda data: pairwise(data, "ULDP-AVG", "ULDP-SGD", "auc"),
    ),
    Claim(
        "default-gap",
        "There is still a gap between ULDP-AVG and the non-private DEFAULT in ultimately achievable "
        "accuracy, the price of privacy.",
        "Figures 4-7",
        PRIVACY_UTILITY_GRIDS,
        lambda data: pairwise(data, "DEFAULT", "ULDP-AVG", "final"),
    ),
    Claim(
        "default-gap-speed",
        "There is still a gap between ULDP-AVG and the non-private DEFAULT in convergence speed.",
        "Figures 4-7",
        PRIVACY_UTILITY_GRIDS,
        lambda data: pairwise(data, "DEFAULT", "ULDP-AVG", "auc"),
    ),
    Claim(
        "group-small-n",
        "For small n (Creditcard, 1000 users, uniform), ULDP-GROUP-max/median reach higher "
        "accuracy than ULDP-AVG.",
        "Figure 4c",
        ("creditcard",),
        group_beats_avg_small_n,
    ),
    Claim(
        "avg-competitive",
        "In all datasets ULDP-AVG is competitive in utility.",
        "Figures 4-7",
        PRIVACY_UTILITY_GRIDS,
        avg_competitive,
    ),
    Claim(
        "avg-w-faster",
        "In all datasets ULDP-AVG-w converges much faster than ULDP-AVG.",
        "Figures 4-7",
        PRIVACY_UTILITY_GRIDS,
        lambda data: pairwise(data, "ULDP-AVG-w", "ULDP-AVG", "auc", by=NOTICEABLE),
    ),
    Claim(
        "group-utility",
        "ULDP-GROUP-k shows reasonably high utility, especially where n (records per user) is "
        "small.",
        "Figures 4-7",
        PRIVACY_UTILITY_GRIDS,
        group_utility,
    ),
    Claim(
        "group2-mnist",
        "On MNIST with 10000 users (few records per user, many records), ULDP-GROUP-2 reaches a "
        "reasonably small privacy bound.",
        "Figure 5d-f",
        (MNIST_ACCOUNTING,),
        group2_mnist,
    ),
    Claim(
        "non-iid",
        "User-level non-iid data hurts ULDP-AVG with 100 users (MNIST), much less with 10000 users.",
        "Figure 5c, 5f",
        ("mnist", MNIST_SHORT),
        noniid,
    ),
    Claim(
        "non-iid-silo-methods",
        "DEFAULT and ULDP-GROUP-k are less affected by user-level non-iid data (they train "
        "per silo, not per user).",
        "Figure 5c, 5f",
        ("mnist", MNIST_SHORT),
        noniid_silo_methods,
    ),
    Claim(
        "weighting",
        "The enhanced weighting (ULDP-AVG-w) lowers the test loss compared with ULDP-AVG.",
        "Figure 8",
        ("weighting",),
        weighting_helps,
    ),
    Claim(
        "weighting-zipf",
        "The gain of ULDP-AVG-w is larger under skewed (zipf) allocations.",
        "Figure 8",
        ("weighting",),
        weighting_zipf,
    ),
    Claim(
        "weighting-silos",
        "The gain of ULDP-AVG-w grows with the number of silos.",
        "Figure 8",
        ("weighting",),
        weighting_silos,
    ),
    Claim(
        "sampling",
        "User-level sub-sampling gives a tighter privacy bound at the expense of utility.",
        "Figure 9",
        ("user_sampling",),
        sampling_tradeoff,
    ),
    Claim(
        "sampling-q07",
        "On Creditcard the utility loss of sub-sampling is acceptable at q = 0.7.",
        "Figure 9a",
        ("user_sampling",),
        sampling_q07,
    ),
    Claim(
        "sampling-mnist",
        "With 10000 users (MNIST) sub-sampling costs less utility than on Creditcard.",
        "Figure 9b",
        ("user_sampling",),
        sampling_mnist,
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
    ``profile``'s stored results; beside them, under :func:`in_part` of the grid, the paper-profile runs of the
    panels stored only in part, which no verdict reads. Under :data:`MNIST_ACCOUNTING`, the MNIST epsilons of the
    paper profile from accounting alone (a few seconds: the records are allocated, nothing is trained; left out,
    so the claim reads "not measured", where the MNIST files are missing). Under :data:`MNIST_SHORT`, MNIST's
    committed short-profile results (read from ``short_root``, default ``results/short/``).

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
            continue
        if paper.covered_panels():
            data[name] = paper.only_panels(paper.covered_panels())
        else:
            data[name] = load_results(name, profile, root=root)
        if paper.partial_panels():
            data[in_part(name)] = paper.only_panels(paper.partial_panels())
    return data


def _source(results: ResultSet) -> str:
    """Which results a verdict rests on: grid, profile (:func:`uldp.paper.verdicts.profile_label`: "paper settings on
    the Creditcard subset" where that ran), seeds (per line of a panel where the lines have different numbers), runs
    and panels when not all."""
    per_line: dict[tuple[str, str], set[int]] = {}
    for run in results.runs:
        per_line.setdefault((run["panel"], run["series"]), set()).add(run["seed"])
    counts = sorted({len(seeds) for seeds in per_line.values()})
    seeds = (
        f"{len({run['seed'] for run in results.runs})} seed(s)"
        if len(counts) <= 1
        else f"{counts[0]} to {counts[-1]} seeds per line"
    )
    text = f"{results.grid}: {profile_label(results)}, {seeds}"
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


def judge(claim: Claim, data: Mapping[str, ResultSet]) -> Finding:
    """``claim``'s finding on its grids' results at the largest profile stored (:func:`at_largest_profile`), or a
    ``not measured`` one saying what is missing."""
    try:
        return claim.check(at_largest_profile(data, claim.grids))
    except NotMeasured as missing:
        return Finding(f"not measured: {missing}", MISSING)


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
        finding = judge(claim, data)
        used = at_largest_profile(data, claim.grids)
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
        metric: The per-round column to show (default: the metric of the dataset's figure,
            :data:`uldp.paper.experiments.UTILITY_METRIC`).

    Returns:
        Rows: panels; columns: series; cells ``"0.912 ± 0.004 | ε 3.21"`` (no epsilon for DEFAULT), with the median
        and interquartile range for a metric of :data:`TAILED_METRICS` and the number of seeds where it differs
        between cells, and :data:`NOT_RUN` where a series has no run at a panel.

    Raises:
        NotMeasured: No stored runs, or the metric is absent.
    """
    dataset = results.runs[0]["params"]["dataset"] if results.runs else ""
    metric = metric or UTILITY_METRIC.get(dataset, "accuracy")
    utility = per_setting(results, metric)
    epsilon = (
        per_setting(results, "epsilon")
        if any(
            value is not None for run in results.runs for value in run["result"].get("epsilon", [])
        )
        else None
    )
    several = utility["seeds"].nunique() > 1
    cells = {}
    for row in utility.itertuples():
        text = f"{row.mean:.3f}" + (f" ± {row.std:.3f}" if row.seeds > 1 else "")
        if metric in TAILED_METRICS and row.seeds > 1:
            text += f" (median {row.median:.3f}, IQR {row.q1:.3f} to {row.q3:.3f})"
        if several:
            text += f", {row.seeds} seeds"
        if epsilon is not None and (eps := value(epsilon, row.panel, row.series)) is not None:
            text += f" | ε {readable_number(eps)}"
        cells[(row.panel, row.series)] = text
    table = pd.Series(cells).unstack(fill_value=NOT_RUN)
    order = list(dict.fromkeys(run["series"] for run in results.runs))
    return table[[s for s in order if s in table.columns]].reindex(
        list(dict.fromkeys(utility["panel"]))
    )
