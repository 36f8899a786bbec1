"""The errata of the paper that this library found or implements, one home for the list the book shows.

Each entry names the paper's numbered item, what the paper states, what holds instead, where the library does the
correct thing and which chapter shows it. The numbers of the Figure 2 erratum are computed, not stored:
:func:`figure2_erratum` recomputes them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from uldp.accounting import group_privacy_table
from uldp.accounting.pld import epsilon_group_pld


@dataclass(frozen=True)
class Erratum:
    """One erratum of the paper.

    Attributes:
        where: The paper's item (lemma, theorem, algorithm or figure, in the paper's numbering).
        paper: What the paper states.
        correct: What holds, and what the library does.
        library: The module that implements the correct statement.
        chapter: The book chapter that shows it (a document name of ``_toc.yml``).
    """

    where: str
    paper: str
    correct: str
    library: str
    chapter: str


#: The errata; ``paper`` and ``correct`` are MyST markdown (maths between dollars, citations by ``{cite}``).
ERRATA: tuple[Erratum, ...] = (
    Erratum(
        "Lemma 6 and Theorem 2 (RDP group privacy)",
        r"an order $\alpha \ge 2^{k+1}$ gives $(\alpha / 2^k, 3^k \rho)$-RDP for groups of $k$ records",
        r"for $k = 2^c$ and orders $\alpha \ge 2k$: $(\alpha / 2^c, 3^c \rho)$-RDP "
        r"({cite:t}`mironov2017renyi`, Proposition 2); only orders $\alpha \ge 2k$ are valid",
        "uldp.accounting.group",
        "book/group_privacy",
    ),
    Erratum(
        "Figure 2 (group privacy of DP-SGD)",
        r"$\epsilon$ of about 2100 at $k = 32$ and 11400 at $k = 64$",
        r"those values use RDP orders below $2k$, outside the lemma's domain, so they bound nothing; the valid "
        r"routes (RDP at orders $\alpha \ge 2k$, the $(\epsilon, \delta)$ group conversion of "
        "{ref}`Lemma 5 <paper-lemma-5>`, and the "
        "PLD accountant of the group's mixture, with no conversion) are computed beside them on the opening page",
        "uldp.accounting.group",
        "book/group_privacy",
    ),
    Erratum(
        "Theorem 1 (ULDP-NAIVE), its proof",
        r"a user moves a silo's clipped delta by at most $C$, so noise $\sigma C \sqrt{|S|}$ per silo",
        r"a silo clips its whole delta, so removing a user can move it by up to $2C$: the user-level sensitivity "
        r"is $2|S|C$, and the library adds $2 \sigma C \sqrt{|S|}$ per silo so that Theorem 1's $\epsilon$ holds "
        "as stated",
        "uldp.methods.fedavg",
        "book/baselines",
    ),
    Erratum(
        "Algorithm 1 (ULDP-NAIVE)",
        "the delta is global minus local",
        "the delta is local minus global (a sign typo in the pseudo-code)",
        "uldp.methods.fedavg",
        "book/baselines",
    ),
    Erratum(
        "Algorithm 4 (user-level sub-sampling)",
        "the loop zeroes the weights of the sampled users",
        "the weights of the users *not* sampled are zeroed (the loop variable is a typo)",
        "uldp.methods.uldp_avg",
        "book/uldp_avg_sgd",
    ),
)

#: Figure 2's setting (group privacy, Section 2.2): DP-SGD with sigma = 5, sampling rate 0.01, 100,000 iterations,
#: delta = 1e-5.
FIGURE2_SETTING: dict[str, Any] = {"sigma": 5.0, "q": 0.01, "steps": 100_000, "delta": 1e-5}


def figure2_erratum(ks: tuple[int, ...] = (32, 64)) -> list[dict]:
    """Figure 2's group epsilons at group sizes ``ks``: the paper's computation beside the valid routes.

    Returns:
        Per k: ``k``, ``paper`` (the authors' grid of orders, reproducing the figure), ``valid`` (RDP group privacy
        at orders alpha >= 2k only, Lemma 6 as corrected), ``dp`` (the (epsilon, delta) group conversion of Lemma 5,
        exact per order), ``pld`` (the PLD of the group's mixture of Gaussians, no conversion:
        :func:`uldp.accounting.pld.epsilon_group_pld`) and ``paper_grid_valid`` (whether the paper's best order lies
        in the lemma's domain).
    """
    rows = group_privacy_table(**FIGURE2_SETTING, ks=list(ks))
    setting = FIGURE2_SETTING
    return [
        {
            "k": row["k"],
            "paper": row["epsilon_rdp_paper"],
            "valid": row["epsilon_rdp"],
            "dp": row["epsilon_dp"],
            "pld": epsilon_group_pld(
                sigma=setting["sigma"],
                sample_rates=setting["q"],
                steps=setting["steps"],
                k=int(row["k"]),
                delta=setting["delta"],
            ).epsilon,
            "paper_grid_valid": row["paper_grid_valid"],
        }
        for row in rows
    ]
