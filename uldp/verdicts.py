"""Verdicts of the Scorecard (:mod:`uldp.scorecard`): what a claim check returns, and the shared rules.

A claim made over several settings holds when it holds in every one, partly when in at least half, and does not
hold otherwise; ``not measured`` when the results it needs are missing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from uldp.experiments import ResultSet

HOLDS, PARTLY, FAILS, MISSING = "holds", "partly", "does not hold", "not measured"
#: The start of the dataset variant of a Creditcard run on the shipped 5,412-row subset (provenance
#: ``dataset_variant``); results stored before that field existed all ran on it.
CREDITCARD_SUBSET = "creditcard-subset"


class NotMeasured(Exception):
    """The results a claim needs are not stored (the message says which)."""


@dataclass(frozen=True)
class Finding:
    """What a claim function found: a sentence with our numbers, and the verdict."""

    measured: str
    verdict: str


def stored_grid(data: Mapping[str, ResultSet], grid: str, missing: str) -> ResultSet:
    """The stored results of ``grid``, or :class:`NotMeasured` saying ``missing`` when there are none."""
    results = data.get(grid)
    if results is None or not results.runs:
        raise NotMeasured(missing)
    return results


def fraction_verdict(hits: int, total: int) -> str:
    """The verdict of a claim that held in ``hits`` of ``total`` settings (:class:`NotMeasured` when none).

    >>> fraction_verdict(3, 3), fraction_verdict(2, 4), fraction_verdict(1, 3)
    ('holds', 'partly', 'does not hold')
    """
    if total == 0:
        raise NotMeasured("no setting has the methods this claim compares")
    return HOLDS if hits == total else PARTLY if 2 * hits >= total else FAILS


def profile_label(results: ResultSet) -> str:
    """The scale of ``results`` in words: the profile, or "paper settings on the Creditcard subset" where Creditcard
    runs among them ran on the 5,412-row subset instead of the paper's file (said of the Creditcard panels only when
    the grid has others).

    >>> runs = ({"params": {"dataset": "creditcard"}, "provenance": {}},)
    >>> profile_label(ResultSet("creditcard", "paper", runs, (), "memory"))
    'paper settings on the Creditcard subset'
    >>> profile_label(ResultSet("tcga_brca", "paper", ({"params": {"dataset": "tcga_brca"}},), (), "memory"))
    'paper'
    """
    creditcard = [run for run in results.runs if run["params"].get("dataset") == "creditcard"]
    if not any(run.get("provenance", {}).get("dataset_variant", CREDITCARD_SUBSET).startswith(CREDITCARD_SUBSET)
               for run in creditcard):
        return results.profile
    label = f"{results.profile} settings on the Creditcard subset"
    return label if len(creditcard) == len(results.runs) else f"{results.profile} (Creditcard panels: {label})"
