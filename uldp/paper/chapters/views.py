"""The Scorecard's views: the claims that read some grids, judged on those grids' results alone (the experiment
chapters, the Scorecard and the opening page read them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from uldp.paper import scorecard

if TYPE_CHECKING:
    from collections.abc import Mapping

    import pandas as pd

    from uldp.paper.experiments import ResultSet


@dataclass(frozen=True)
class ScorecardView:
    """One view of the Scorecard: the claims that read some grids, judged on those grids' results alone.

    Attributes:
        title: The dataset or figure, as a tab of the Scorecard and a name in the opening page's findings.
        chapter: The chapter that shows those results (a document of ``_toc.yml``, relative to ``book/``).
        grids: The grids (keys of :func:`uldp.paper.scorecard.stored_results`) of this view.
    """

    title: str
    chapter: str
    grids: tuple[str, ...]


#: The Scorecard's views: the four privacy-utility datasets, then the other figures of Section 5.
SCORECARD_VIEWS: tuple[ScorecardView, ...] = (
    ScorecardView("Creditcard", "exp_creditcard", ("creditcard",)),
    ScorecardView(
        "MNIST", "exp_mnist", ("mnist", scorecard.MNIST_SHORT, scorecard.MNIST_ACCOUNTING)
    ),
    ScorecardView("HeartDisease", "exp_heart_disease", ("heart_disease",)),
    ScorecardView("TcgaBrca", "exp_tcga_brca", ("tcga_brca",)),
    ScorecardView("Enhanced weighting", "exp_weighting", ("weighting",)),
    ScorecardView("User sub-sampling", "exp_user_sampling", ("user_sampling",)),
    ScorecardView("Protocol runtime", "exp_weighting", ("protocol_runtime",)),
)


def view_scorecard(data: Mapping[str, ResultSet], view: ScorecardView) -> pd.DataFrame:
    """The Scorecard's rows (:func:`uldp.paper.scorecard.scorecard`) for the claims that read any grid of ``view``,
    each judged on ``view``'s grids alone: a claim about Figures 4-7 is judged on this dataset's settings only."""
    subset = {name: results for name, results in data.items() if name in view.grids}
    keys = [claim.key for claim in scorecard.CLAIMS if set(claim.grids) & set(view.grids)]
    rows = scorecard.scorecard(subset)
    return rows[rows["key"].isin(keys)].reset_index(drop=True)
