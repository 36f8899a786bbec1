"""The opening page and the Scorecard chapter (``book/introduction.py``, ``book/scorecard.py``): the Scorecard as
tabs and the paper's main claims in words, with what the results cannot show."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from IPython.display import Markdown

from uldp.paper import experiments, scorecard
from uldp.paper.chapters.experiment import scale_sentence
from uldp.paper.chapters.figure_extras import short_profile_note
from uldp.paper.chapters.views import SCORECARD_VIEWS, ScorecardView, view_scorecard
from uldp.paper.verdicts import MISSING, VERDICT_WORDS, badge

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from uldp.data import FederatedDataset
    from uldp.paper.experiments import ResultSet


def _cell(text: str) -> str:
    """``text`` for a cell of a Markdown table (a ``|`` would end the cell)."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def scorecard_markdown(rows: pd.DataFrame, chapters: Mapping[str, str]) -> str:
    """A Markdown table of Scorecard rows: the claim (its figures linked to the chapters that show them), what was
    measured, the verdict as a coloured badge and the results it rests on.

    Args:
        rows: Rows of :func:`uldp.paper.scorecard.scorecard` or :func:`view_scorecard`.
        chapters: Per claim key, the chapters to link (``{key: "[Creditcard](exp_creditcard), ..."}`` is built by
            :func:`claim_chapters`).
    """
    lines = ["| claim | measured | verdict | results |", "|---|---|---|---|"]
    lines += [
        f"| {_cell(row.where)}: {_cell(row.claim)} ({chapters.get(row.key, '')}) | {_cell(row.measured)} | "
        f"{badge(row.verdict)} | {_cell(row.source)} |"
        for row in rows.itertuples()
    ]
    return "\n".join(lines)


def claim_chapters(views: Sequence[ScorecardView] = SCORECARD_VIEWS) -> dict[str, str]:
    """Per claim key, links to the chapters of the views whose grids it reads (``{doc}`` links named by view)."""
    found: dict[str, dict[str, str]] = {}
    for claim in scorecard.CLAIMS:
        for view in views:
            if set(claim.grids) & set(view.grids):
                found.setdefault(claim.key, {})[view.chapter] = view.title
    return {
        key: ", ".join(f"{{doc}}`{title} <{chapter}>`" for chapter, title in links.items())
        for key, links in found.items()
    }


@dataclass(frozen=True)
class Verdicts:
    """The Scorecard judged once for a page: over all results, and per view.

    Attributes:
        overall: :func:`uldp.paper.scorecard.scorecard` of all the results.
        views: Per view of :data:`SCORECARD_VIEWS`, its :func:`view_scorecard`.
    """

    overall: pd.DataFrame
    views: dict[ScorecardView, pd.DataFrame]

    @classmethod
    def judge(cls, data: Mapping[str, ResultSet]) -> Verdicts:
        """Judge every claim on ``data`` (:func:`uldp.paper.scorecard.stored_results`), then per view."""
        return cls(
            scorecard.scorecard(data),
            {view: view_scorecard(data, view) for view in SCORECARD_VIEWS},
        )


def scorecard_tabs(verdicts: Verdicts) -> Markdown:
    """The Scorecard as tabs: every claim over all results first, then one tab per :data:`SCORECARD_VIEWS` view,
    each a table of :func:`scorecard_markdown`, the claims linked to their chapters."""
    links = claim_chapters()
    tabs = [("All results", verdicts.overall)] + [
        (view.title, rows) for view, rows in verdicts.views.items()
    ]
    body = "\n".join(
        f":::{{tab-item}} {title}\n{scorecard_markdown(rows, links)}\n:::" for title, rows in tabs
    )
    return Markdown(f"::::{{tab-set}}\n{body}\n::::")


def _joined(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def claim_findings(verdicts: Verdicts, key: str) -> str:
    """One claim in words: its verdict over all results, then where it holds and where not, dataset by dataset
    (:func:`view_scorecard`), each with what was measured and the scale of the results it rests on.

    Raises:
        ValueError: ``key`` is not a claim of :data:`uldp.paper.scorecard.CLAIMS`.
    """
    claims = {claim.key: claim for claim in scorecard.CLAIMS}
    if key not in claims:
        raise ValueError(f"unknown claim {key!r}; claims: {', '.join(claims)}")
    overall = verdicts.overall.set_index("key").loc[key]
    judged = []
    for view, rows in verdicts.views.items():
        if set(claims[key].grids) & set(view.grids):
            row = rows.set_index("key").loc[key]
            if row["verdict"] != MISSING:
                judged.append((view, row))
    found = dict.fromkeys(row["verdict"] for _, row in judged)
    where = "; ".join(
        f"**{verdict}** on "
        + _joined(
            [
                f"{{doc}}`{view.title} <{view.chapter}>`"
                for view, row in judged
                if row["verdict"] == verdict
            ]
        )
        for verdict in found
    )
    details = "\n".join(
        f"  - {view.title} ({row['source']}): {row['measured']}" for view, row in judged
    )
    return (
        f"- *{overall['claim']}* Over all results: **{overall['verdict']}**; dataset by dataset: {where}.\n"
        f"{details}"
    )


# ------------------------------------------------------------------------------------------- the opening page


def verdict_counts(verdicts: Sequence[str]) -> str:
    """The Scorecard's verdicts counted in a sentence.

    >>> verdict_counts(["holds", "holds", "contradicted", "not measured"])
    "Of the paper's 4 claims, 2 hold, 1 is contradicted and 1 is not measured."
    """
    counts = pd.Series(list(verdicts), dtype=object).value_counts()
    parts = [f"{count} {VERDICT_WORDS[verdict][count > 1]}" for verdict, count in counts.items()]
    return f"Of the paper's {len(verdicts)} claims, {_joined(parts)}."


def limits(data: Mapping[str, ResultSet], creditcard: FederatedDataset) -> Markdown:
    """What the results cannot show, computed: the scale of MNIST's largest stored results
    (:func:`scale_sentence`, :func:`short_profile_note`), and the Creditcard records this book ran on with their
    fraud share (``creditcard``, the dataset as :func:`uldp.data.load` gives it).
    """
    parts = []
    mnist = max(
        (
            results
            for name, results in data.items()
            if name in ("mnist", scorecard.MNIST_SHORT) and results.runs
        ),
        key=lambda results: experiments.PROFILES.index(results.profile),
        default=None,
    )
    if mnist is None:
        parts.append(
            "- **MNIST** has no stored training results: only its $\\epsilon$, from accounting alone."
        )
    else:
        parts.append(
            f"- **MNIST** is the one privacy-utility figure not trained at the paper's scale. "
            f"{scale_sentence(mnist)}"
            + (f" {short_profile_note(mnist).data}" if mnist.profile == "short" else "")
        )
    labels = class_labels(creditcard)
    parts.append(
        f"- **Creditcard** ran on the data this book has offline ({creditcard.variant}): "
        f"{len(labels):,} records, {labels.mean():.0%} of them frauds, far more than in the full file, "
        "so its accuracies and balanced accuracies are not the paper's numbers: compare the methods with "
        "one another, not with the paper's figure."
    )
    return Markdown("\n".join(parts))


def class_labels(dataset: FederatedDataset) -> np.ndarray:
    """The class labels of a classification dataset, training and test records together, as a NumPy array."""
    return np.concatenate([dataset.y_train.numpy().reshape(-1), dataset.y_test.numpy().reshape(-1)])
