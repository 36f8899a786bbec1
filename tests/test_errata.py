"""uldp.paper.errata: every erratum points at a real module and chapter; Figure 2's numbers are the paper's and
larger."""

import importlib

import pytest
from book_toc import toc_chapters

from uldp.paper.errata import ERRATA, figure2_erratum


def test_every_erratum_names_a_module_and_a_chapter_of_the_book():
    chapters = set(toc_chapters())
    for erratum in ERRATA:
        importlib.import_module(erratum.library)
        assert erratum.chapter in chapters, erratum.chapter


def test_figure2_reproduces_the_papers_values_and_the_valid_ones_are_larger():
    rows = {row["k"]: row for row in figure2_erratum()}
    # the paper's text: "the value reaches 2100 for only k=32, and 11400 at k=64" (Section 2.2)
    assert rows[32]["paper"] == pytest.approx(2100, rel=0.05) and rows[64][
        "paper"
    ] == pytest.approx(11400, rel=0.05)
    for row in rows.values():
        assert row["valid"] > row["paper"] and row["paper_grid_valid"] is False


def test_figure2s_valid_routes_are_below_the_valid_rdp_route_and_pld_is_the_tightest():
    """Lemma 5's (epsilon, delta) conversion and the PLD of the group's mixture are valid bounds; at k = 64 they sit
    below the paper's invalid value, PLD lowest (the PLD accountant's own tests check it against finer steps)."""
    for row in figure2_erratum():
        assert row["pld"] < row["dp"] < row["valid"]
    row = {row["k"]: row for row in figure2_erratum()}[64]
    assert row["pld"] < row["dp"] < row["paper"] < row["valid"]
