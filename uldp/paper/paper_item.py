"""One numbered item of the paper (:class:`PaperItem`), the kinds of items (:data:`KINDS`) and how the book prints
an item's title (:func:`shown_name`); the list itself is :data:`uldp.paper.items.ITEMS`.

Example:
    >>> PaperItem("lemma", "4", "Privacy of ULDP-AVG", "").label
    'paper-lemma-4'
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: Item kinds, in the order of the book's page.
KINDS: tuple[str, ...] = (
    "section",
    "definition",
    "proposition",
    "lemma",
    "theorem",
    "algorithm",
    "protocol",
    "equation",
    "figure",
    "table",
)


@dataclass(frozen=True)
class PaperItem:
    """One numbered item of the paper.

    Attributes:
        kind: One of :data:`KINDS` (``"lemma"``, ``"figure"``, ...).
        number: Its number in the paper (``"3"``, ``"5.1"``).
        title: Its name as the paper gives it (the bracketed name of a lemma, the caption's first words, the
            section heading), in MyST markdown; for an unnamed theorem or proposition, what it is about.
        summary: What it says, in one line of our own words.
        implemented_by: Dotted names of the modules, functions or classes of ``uldp`` that implement or compute it
            (empty for an illustration or a definition nothing computes).
        chapters: The book chapters that treat it (document names of ``_toc.yml``), each linking to it.
    """

    kind: str
    number: str
    title: str
    summary: str
    implemented_by: tuple[str, ...] = ()
    chapters: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        """How the text cites it: ``"Lemma 3"``, ``"Section 5.1"``, ``"Eq. 3"``."""
        return (
            f"Eq. {self.number}"
            if self.kind == "equation"
            else f"{self.kind.capitalize()} {self.number}"
        )

    @property
    def label(self) -> str:
        """Its MyST target on the book's page: ``paper-<kind>-<number>``, dots as dashes, lower case."""
        return f"paper-{self.kind}-{self.number.lower().replace('.', '-')}"


def shown_name(name: str) -> str:
    """An item's title as the book prints it: the paper's TeX text commands (``\\textsc{...}``, ``\\textit{...}``)
    dropped around their words, which MyST would print raw; maths between dollars stays for MathJax.

    >>> shown_name(r"\\textsc{Encode} and \\textsc{Decode}")
    'Encode and Decode'
    >>> shown_name(r"$(\\epsilon, \\delta)$-DP")
    '$(\\\\epsilon, \\\\delta)$-DP'
    """
    return re.sub(r"\\text(?:sc|it|bf|rm|tt)\{([^{}]*)\}", r"\1", name)
