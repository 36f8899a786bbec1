"""The book's list of the paper's numbered items (``uldp.paper.items``) and the chapters' links to it.

Every item exists in the paper's tex with that kind and number and carries the paper's name for it (read by
``test_paper_numbering.parse_paper``, which numbers the tex as LaTeX does); every function it names exists; every
``{ref}`... <paper-...>` `` in a chapter points to an item and its text names that item; every chapter of ``_toc.yml``
links to at least one item; the prose of the chapters names no item without linking it; and each item lists exactly
the chapters that link to it or name it in a heading.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import jupytext
import pytest
from book_toc import toc_chapters
from test_paper_numbering import CITATION, EXTERNAL, KINDS, TEX, _clause, _expand, parse_paper

from uldp.paper import items as paper_items
from uldp.paper.items import ITEMS, PaperItem

ROOT = Path(__file__).resolve().parents[1]
PAGE = "book/paper_items"
#: A cross-reference to an item of the page: ``{ref}`Lemma 3 <paper-lemma-3>` ``.
REFERENCE = re.compile(r"\{ref\}`(?P<text>[^`<]*?)\s*<(?P<label>paper-[^>]+)>`")
#: Inline code, inline maths and references: a citation inside one is not prose to link.
NOT_PROSE = re.compile(r"\{ref\}`[^`]*`|`[^`]*`|\$[^$]*\$")


@pytest.fixture(scope="module")
def paper():
    if not TEX.exists():
        pytest.skip(
            f"the paper's tex is not at {TEX} (the shared folder beside the checkout is absent)"
        )
    return parse_paper(TEX.read_text())


def plain(title: str, labels: dict[str, str]) -> str:
    """A title with its LaTeX reduced to comparable words: citations dropped, ``\\ref`` resolved to the number,
    macros unwrapped, ``$ { } [ ] \\`` removed, lower case, no final full stop."""
    title = re.sub(r"\\cite\{[^}]*\}", "", title)
    title = re.sub(r"\\ref\{([^}]*)\}", lambda m: labels.get(m[1], m[1]), title)
    title = (
        re.sub(r"\\textcolor\{\w+\}", "", title)
        .replace("\\method", "ULDP-FL")
        .replace("\\xspace", "")
    )
    title = re.sub(r"\\(textsc|textit|textbf|emph)\b", "", title).replace("\\&", "&")
    title = re.sub(r"[${}\[\]\\]", "", title)
    return " ".join(title.split()).lower().rstrip(".")


def mismatches(paper, items) -> list[str]:
    """What is wrong with each item against the parsed tex: a number the paper lacks, or another name."""
    labels = {item.label: item.number for item in paper.values() if item.label}
    wrong = []
    for item in items:
        found = paper.get((item.kind, item.number))
        if found is None:
            wrong.append(f"{item.name}: the paper has no {item.kind} {item.number}")
            continue
        theirs, ours = plain(found.title, labels), plain(item.title, labels)
        if item.kind != "equation" and theirs and not theirs.startswith(ours):
            wrong.append(f"{item.name}: the paper calls it {theirs!r}, the list {ours!r}")
    return wrong


def markdown_cells(chapter: str) -> list[str]:
    return [
        cell.source
        for cell in jupytext.read(ROOT / f"{chapter}.py").cells
        if cell.cell_type == "markdown"
    ]


def references(chapter: str) -> list[re.Match]:
    return [match for source in markdown_cells(chapter) for match in REFERENCE.finditer(source)]


def unlinked_mentions(source: str) -> list[str]:
    """Citations of the paper's items in a markdown cell's prose (not in a heading, code, maths or a reference, and
    not of another paper's item) that are not links."""
    hidden = [match.span() for match in NOT_PROSE.finditer(source)]
    found = []
    for match in CITATION.finditer(source):
        line_start = source.rfind("\n", 0, match.start()) + 1
        if source.startswith("#", line_start) or any(a <= match.start() < b for a, b in hidden):
            continue
        if not EXTERNAL.search(_clause(source, match.start(), match.end())):
            found.append(" ".join(match.group(0).split()))
    return found


def test_every_item_is_the_papers_item_of_that_number_and_name(paper):
    assert len(ITEMS) >= 50
    assert not mismatches(paper, ITEMS), "\n".join(mismatches(paper, ITEMS))


def test_the_list_holds_every_definition_lemma_theorem_algorithm_figure_table_and_main_section(
    paper,
):
    listed = {(item.kind, item.number) for item in ITEMS}
    required = {
        key
        for key in paper
        if key[0]
        in (
            "definition",
            "proposition",
            "lemma",
            "theorem",
            "algorithm",
            "protocol",
            "figure",
            "table",
        )
    }
    required |= {key for key in paper if key[0] == "section" and re.fullmatch(r"\d", key[1])}
    assert required <= listed, f"missing from uldp.paper.items.ITEMS: {sorted(required - listed)}"


def test_the_check_catches_a_wrong_number_or_name(paper):
    """Items as they would be with the settings document's lemma numbering, a shifted figure, a section the paper
    lacks and a swapped title: each is reported."""
    wrong = [
        PaperItem("lemma", "4", "RDP Gaussian mechanism", "."),
        PaperItem("lemma", "3", "Group privacy conversion (record-level DP to GDP)", "."),
        PaperItem("figure", "7", "HeartDisease", "."),
        PaperItem("section", "5.3", "Results", "."),
        PaperItem("theorem", "4", "Privacy of Protocol 1", "."),
        PaperItem("algorithm", "2", "ULDP-NAIVE", "."),
    ]
    assert len(mismatches(paper, wrong)) == len(wrong), mismatches(paper, wrong)


def test_items_are_unique_and_their_labels_too():
    keys = [(item.kind, item.number) for item in ITEMS]
    assert len(set(keys)) == len(keys)
    assert len({item.label for item in ITEMS}) == len(ITEMS)
    assert {item.kind for item in ITEMS} <= set(paper_items.KINDS)


def test_every_implementation_named_exists():
    def resolve(name: str) -> object:
        parts = name.split(".")
        for split in range(len(parts), 0, -1):
            try:
                target = importlib.import_module(".".join(parts[:split]))
            except ModuleNotFoundError:
                continue
            for attribute in parts[split:]:
                target = getattr(target, attribute)
            return target
        raise ModuleNotFoundError(name)

    for item in ITEMS:
        for name in item.implemented_by:
            assert name.startswith("uldp"), f"{item.name}: {name}"
            try:
                resolve(name)
            except (AttributeError, ModuleNotFoundError) as error:
                pytest.fail(f"{item.name} names {name}, which does not exist: {error}")


def test_the_page_renders_one_target_per_item_and_refuses_an_unknown_kind():
    page = paper_items.markdown(*paper_items.KINDS)
    for item in ITEMS:
        assert page.count(f"({item.label})=\n**{item.name}**") == 1
    assert "paper-lemma-3)=" not in paper_items.markdown("figure")
    with pytest.raises(ValueError, match="'lemmas'"):
        paper_items.markdown("lemmas")


def test_the_page_is_in_the_table_of_contents_and_renders_every_kind():
    assert PAGE in toc_chapters()
    source = (ROOT / f"{PAGE}.py").read_text()
    rendered = set()
    for call in re.findall(r"Markdown\(markdown\(([^)]*)\)\)", source):
        rendered |= set(re.findall(r'"(\w+)"', call))
    assert rendered == set(paper_items.KINDS)
    assert source.count('mystnb={"markdown_format": "myst"}') == len(
        re.findall(r"Markdown\(markdown\(", source)
    )


@pytest.mark.parametrize("chapter", [c for c in toc_chapters() if c != PAGE])
def test_each_chapter_links_to_items_that_exist_and_names_them_right(chapter):
    by_label = {item.label: item for item in ITEMS}
    found = references(chapter)
    assert found, f"{chapter} links to none of the paper's items"
    for match in found:
        item = by_label.get(match["label"])
        assert item is not None, f"{chapter}: {match[0]} points to no item of uldp.paper.items"
        text = " ".join(match["text"].split())
        if (
            text == item.number
        ):  # the end of a range: "{ref}`Figures 4 <...>` to {ref}`7 <paper-figure-7>`"
            continue
        cited = CITATION.fullmatch(text.rstrip(")").replace("(", ""))
        assert cited, f"{chapter}: the text of {match[0]} cites no item"
        kind, (number, _, _) = KINDS[cited["kind"]], _expand(cited["items"])[0]
        assert (kind, number) == (item.kind, item.number), (
            f"{chapter}: {match[0]} says {text!r} but links {item.name}"
        )


@pytest.mark.parametrize("chapter", [c for c in toc_chapters() if c != PAGE])
def test_the_prose_links_every_item_it_names(chapter):
    unlinked = [
        mention for source in markdown_cells(chapter) for mention in unlinked_mentions(source)
    ]
    assert not unlinked, (
        f"{chapter} names {unlinked} without a link ({{ref}}`Lemma 3 <paper-lemma-3>`)"
    )


def test_unlinked_mentions_skip_headings_code_maths_links_and_other_papers():
    source = (
        "## Figure 4: accuracy\nSee Lemma 5 and `Theorem 1`, $Figure 2$, {ref}`Lemma 6 <paper-lemma-6>`,\n"
        "(Mironov 2017, Proposition 2).\nThen Algorithm\n4."
    )
    assert unlinked_mentions(source) == ["Lemma 5", "Algorithm 4"]


def treated(chapter: str) -> set[tuple[str, str]]:
    """The items a chapter treats: those it links to (a linked range "Figures 4 to 7" counts 5 and 6 too) and those
    its headings name."""
    found = set()
    for source in markdown_cells(chapter):
        for match in REFERENCE.finditer(source):
            found.add(tuple(match["label"].removeprefix("paper-").split("-", 1)))
        for first, last in re.findall(
            r"<paper-(\w+-\d+)>`\s+to\s+\{ref\}`\d+\s*<paper-(\w+-\d+)>`", source
        ):
            kind, start = first.split("-")
            found |= {(kind, str(n)) for n in range(int(start), int(last.split("-")[1]))}
        for heading in re.findall(r"(?m)^#+ .*", source):
            found |= {
                (KINDS[m["kind"]], number)
                for m in CITATION.finditer(heading)
                for number, _, _ in _expand(m["items"])
            }
    return {(kind, number.replace("-", ".")) for kind, number in found}


def test_each_item_lists_the_chapters_that_treat_it():
    treating: dict[tuple[str, str], set[str]] = {}
    for chapter in toc_chapters():
        if chapter != PAGE:
            for key in treated(chapter):
                treating.setdefault(key, set()).add(chapter)
    for item in ITEMS:
        key = (item.kind, item.number)
        assert set(item.chapters) == treating.get(key, set()), (
            f"{item.name}: listed chapters {sorted(item.chapters)}, treated (linked or a heading) in "
            f"{sorted(treating.get(key, set()))}"
        )
