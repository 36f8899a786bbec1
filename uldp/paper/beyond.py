"""Beyond the paper: what the tighter PLD accountant (:mod:`uldp.accounting.pld`) buys in utility.

Every epsilon of the paper comes from RDP. At the same user-level epsilon, the privacy-loss-distribution accountant
allows a smaller noise multiplier. :func:`pld_equal_epsilon` compares the paper's runs (``sigma = 5``, epsilon by
RDP) with runs of the same grid trained to the same epsilon by PLD (``uldp grid NAME --profile paper --methods
ULDP-AVG-w --accountant pld --epsilon EPS``: sigma calibrated by PLD, everything else the paper's), and
:func:`pld_claim` states the finding as a Scorecard row.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from uldp.accounting import epsilon_for_method
from uldp.common.checks import renamed_keyword
from uldp.paper.experiments import (
    GRIDS,
    UTILITY_METRIC,
    ResultSet,
    accounted_results,
    expand,
    load_results,
)
from uldp.paper.verdicts import (
    MISSING,
    SE_MULTIPLE,
    NotMeasured,
    counted,
    difference,
    margin_verdict,
    per_setting,
    settings_verdict,
)

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

#: The settings re-run at the paper's epsilon with PLD's smaller sigma: (grid, target epsilon) where the target is
#: RDP's epsilon of the paper's ULDP-AVG-w runs (sigma 5, delta 1e-5; HeartDisease T = 50, Creditcard T = 100).
PLD_RERUNS: tuple[tuple[str, float], ...] = (("heart_disease", 7.0773), ("creditcard", 10.7255))


def _only(results: ResultSet, method: str) -> ResultSet:
    return results.restricted(run for run in results.runs if run["series"] == method)


@renamed_keyword("target_epsilon", "epsilon")
def pld_equal_epsilon(
    grid: str, *, epsilon: float, method: str = "ULDP-AVG-w", root: str | None = None
) -> pd.DataFrame:
    """Final utility of ``method`` at the paper's sigma (RDP) and at PLD's sigma for the same epsilon.

    Args:
        grid: A privacy-utility grid (``"heart_disease"``, ``"creditcard"``, ...).
        epsilon: The epsilon the PLD runs were trained to (the RDP epsilon of the paper's runs; its old name
            ``target_epsilon`` is accepted for one release, with a ``DeprecationWarning``).
        method: The method compared.
        root: Results root (default: the paper profile's).

    Returns:
        One row per setting (panel) with PLD runs: ``sigma_rdp``, ``sigma_pld``, ``epsilon_rdp``, ``epsilon_pld``
        (final, each by its own accountant), ``utility_rdp``, ``utility_pld`` (mean of the final utility over the
        seeds both have run) with their ``std_*`` and ``seeds_*``, ``gain`` (PLD minus RDP) and ``difference`` (the
        gain paired by seed, a :class:`~uldp.paper.verdicts.Difference`).

    Raises:
        NotMeasured: No stored PLD runs of the grid at that epsilon.
    """
    metric = UTILITY_METRIC[expand(grid, "paper", seeds=[0])[0].kwargs["dataset"]]
    rdp = _only(load_results(grid, "paper", root=root), method)
    pld = _only(
        load_results(grid, "paper", root=root, accountant="pld", epsilon=epsilon),
        method,
    )
    # compare on the same seeds (paired: the same allocation and initial model), whatever the PLD grid has run yet
    paired = {(run["panel"], run["seed"]) for run in pld.runs}
    rdp = rdp.restricted(run for run in rdp.runs if (run["panel"], run["seed"]) in paired)
    if not pld.runs or not rdp.runs:
        raise NotMeasured(
            f"no stored {method} runs of {grid} at epsilon {epsilon:g} by PLD; run "
            f"`uldp grid {grid} --profile paper --methods {method} --accountant pld "
            f"--epsilon {epsilon}`"
        )
    rows = []
    for label, results in (("rdp", rdp), ("pld", pld)):
        utility = per_setting(results, metric).set_index("panel")
        epsilons = per_setting(results, "epsilon").set_index("panel")
        sigma: dict[str, float | None] = {}
        for run in results.runs:
            info = run["result"].get("info") or {}
            sigma.setdefault(run["panel"], info.get("calibrated_sigma", run["config"].get("sigma")))
        rows.append(
            pd.DataFrame(
                {
                    f"utility_{label}": utility["mean"],
                    f"std_{label}": utility["std"],
                    f"seeds_{label}": utility["seeds"],
                    f"epsilon_{label}": epsilons["mean"],
                    f"sigma_{label}": pd.Series(sigma),
                }
            )
        )
    table = pd.concat(rows, axis=1, join="inner")
    table["gain"] = table["utility_pld"] - table["utility_rdp"]
    # paired by seed: a seed's runs share the allocation, the initial model and the noise draws (scaled by sigma)
    by_seed = {
        label: per_setting(results, metric).set_index("panel")["values"]
        for label, results in (("rdp", rdp), ("pld", pld))
    }
    table["difference"] = [
        difference(by_seed["pld"][panel], by_seed["rdp"][panel]) for panel in table.index
    ]
    table.index.name = "panel"
    return table


def user_level_epsilons() -> pd.DataFrame:
    """Every distinct user-level setting of the paper's grids (ULDP-NAIVE, and ULDP-SGD/AVG with their ``q``; the
    guarantee depends only on sigma, T, q and delta: Theorems 1 and 3) with its epsilon by RDP and by PLD.

    Returns:
        One row per setting: ``methods``, ``T``, ``q``, ``sigma``, the ``grids`` that run it, ``epsilon RDP``,
        ``epsilon PLD`` and ``PLD / RDP``.
    """
    settings: dict[tuple, set[str]] = {}
    for grid in GRIDS:
        for spec in expand(grid, "paper", seeds=[0]):
            params = spec.kwargs
            if params["sigma"] is None or params["method"].startswith("ULDP-GROUP"):
                continue
            family = "ULDP-NAIVE" if params["method"] == "ULDP-NAIVE" else "ULDP-SGD/AVG"
            settings.setdefault(
                (family, params["rounds"], params["q"], params["sigma"], params["delta"]), set()
            ).add(grid)
    rows = []
    for (family, rounds, q, sigma, delta), grids in sorted(settings.items()):
        method = "ULDP-NAIVE" if family == "ULDP-NAIVE" else "ULDP-AVG-w"
        by = {
            accountant: epsilon_for_method(
                method, sigma=sigma, rounds=rounds, delta=delta, q=q, accountant=accountant
            ).epsilon
            for accountant in ("rdp", "pld")
        }
        rows.append(
            {
                "methods": family,
                "T": rounds,
                "q": q,
                "sigma": sigma,
                "grids": ", ".join(sorted(grids)),
                "epsilon RDP": by["rdp"],
                "epsilon PLD": by["pld"],
                "PLD / RDP": by["pld"] / by["rdp"],
            }
        )
    return pd.DataFrame(rows)


def group_epsilons(methods: Mapping[str, Sequence[str]]) -> pd.DataFrame:
    """ULDP-GROUP-k's epsilon after the last round of the paper's runs (seed 0), by RDP (what the runs report) and
    by PLD's mixture accountant, from the prepared federations without training
    (:func:`uldp.paper.experiments.accounted_results`).

    Args:
        methods: Grid name -> the ULDP-GROUP-k methods to account.

    Returns:
        One row per run: ``dataset`` (the grid), ``setting`` (panel), ``method``, ``epsilon RDP``,
        ``epsilon PLD (mixture)`` and ``PLD / RDP``.
    """
    rows = []
    for grid, chosen in methods.items():
        rdp, pld = (
            accounted_results(grid, methods=chosen, accountant=accountant)
            for accountant in ("rdp", "pld")
        )
        for by_rdp, by_pld in zip(rdp.runs, pld.runs, strict=True):
            low, high = by_pld["result"]["epsilon"][0], by_rdp["result"]["epsilon"][0]
            rows.append(
                {
                    "dataset": grid,
                    "setting": by_rdp["panel"],
                    "method": by_rdp["series"],
                    "epsilon RDP": high,
                    "epsilon PLD (mixture)": low,
                    "PLD / RDP": low / high,
                }
            )
    return pd.DataFrame(rows)


def _sigma(value: float | None) -> str:
    return "not recorded" if value is None or pd.isna(value) else f"{value:.2f}"


def pld_claim(
    reruns: tuple[tuple[str, float], ...] = PLD_RERUNS, *, root: str | None = None
) -> dict:
    """The Scorecard row "beyond the paper": at equal epsilon, PLD's smaller sigma raises ULDP-AVG-w's final
    utility. Per setting re-run, the gain paired by seed is judged by :func:`uldp.paper.verdicts.margin_verdict`; the
    claim by :func:`uldp.paper.verdicts.settings_verdict`.

    Returns:
        ``{"key", "claim", "where", "measured", "verdict", "source"}`` as :func:`uldp.paper.scorecard.scorecard`'s rows.
    """
    found, missing = [], []
    for grid, epsilon in reruns:
        try:
            found.append((grid, epsilon, pld_equal_epsilon(grid, epsilon=epsilon, root=root)))
        except NotMeasured as reason:
            missing.append(str(reason))
    row = {
        "key": "pld-utility",
        "where": "beyond the paper (Tighter accounting)",
        "claim": "At equal user-level epsilon, PLD's smaller sigma gives ULDP-AVG-w higher utility than the "
        "paper's RDP sigma.",
        "source": "-",
    }
    if not found:
        return {**row, "measured": "not measured: " + "; ".join(missing), "verdict": MISSING}
    seeds = pd.concat([table["seeds_pld"] for _, _, table in found])
    row["source"] = (
        f"paper settings, {seeds.min()} to {seeds.max()} seeds of the PLD runs per setting"
        if seeds.min() != seeds.max()
        else f"paper settings, {seeds.min()} seeds"
    )
    if any(grid == "creditcard" for grid, _, _ in found):
        row["source"] += " (Creditcard: paper settings on the Creditcard subset)"
    gains = pd.concat([table.assign(grid=grid) for grid, _, table in found])
    parts = [
        f"{grid} {panel}: sigma {_sigma(r.sigma_rdp)} -> {_sigma(r.sigma_pld)} at epsilon {epsilon:g}, utility "
        f"{r.utility_rdp:.3f} ± {r.std_rdp:.3f} -> {r.utility_pld:.3f} ± {r.std_pld:.3f} "
        f"({r.difference.interval()})"
        for grid, epsilon, table in found
        for panel, r in table.iterrows()
    ]
    verdicts = [margin_verdict(gap, 0.0) for gap in gains["difference"]]
    measured = (
        f"gain above zero by more than {SE_MULTIPLE:g} standard errors, paired by seed: {counted(verdicts)}; "
        + "; ".join(parts)
    )
    if missing:
        measured += "; not run: " + "; ".join(missing)
    return {**row, "measured": measured, "verdict": settings_verdict(verdicts)}
