"""Every figure, table, lemma, theorem, definition, proposition, algorithm, protocol, section and equation that uldp/
and book/ cite uses the numbering of the paper (../shared/paper/uldp-fl.tex), and names what the paper's item is.

The tex is numbered here as LaTeX numbers it: figures and tables by the order of their (outer) captions, their
sub-figures by the order of the captions inside the figure, one counter per ``\\newtheorem`` (none shares one),
sections and sub-sections in order (letters after ``\\appendix``), algorithms by caption, the ``protocol``
environment by its own counter, equations by every ``equation`` and ``align`` line without ``\\nonumber``/``\\notag``.
"""

from __future__ import annotations

import os
import re
import string
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: The paper beside the checkout (``../shared/paper``), else beside the data directory of ``ULDP_DATA_DIR``.
TEX = next(
    (
        path
        for path in (
            ROOT.parent / "shared" / "paper" / "uldp-fl.tex",
            Path(os.environ.get("ULDP_DATA_DIR", ROOT)).parent / "paper" / "uldp-fl.tex",
        )
        if path.exists()
    ),
    ROOT.parent / "shared" / "paper" / "uldp-fl.tex",
)

#: Citation words and the paper item kind they cite.
KINDS = {
    "Figure": "figure",
    "Figures": "figure",
    "Fig.": "figure",
    "Figs.": "figure",
    "Table": "table",
    "Tables": "table",
    "Lemma": "lemma",
    "Lemmas": "lemma",
    "Theorem": "theorem",
    "Theorems": "theorem",
    "Definition": "definition",
    "Definitions": "definition",
    "Proposition": "proposition",
    "Algorithm": "algorithm",
    "Algorithms": "algorithm",
    "Protocol": "protocol",
    "Section": "section",
    "Sections": "section",
    "Sec.": "section",
    "Eq.": "equation",
    "Eqs.": "equation",
    "Equation": "equation",
}
ITEM = r"\d+(?:\.\d+)*(?:[a-h](?:-[a-h])?)?(?![\w.]\w)"
CITATION = re.compile(
    r"(?<![\w.])(?P<kind>"
    + "|".join(re.escape(k) for k in sorted(KINDS, key=len, reverse=True))
    + r")\s+\(?(?P<items>"
    + ITEM
    + r"(?:\)?(?:\s*(?:-|–|,|/|and|or|to)\s*)\(?"
    + ITEM
    + r")*)"
)
#: A clause with one of these cites another paper (Balle et al. 2020, Theorem 21; {cite:t}`mironov2017renyi`,
#: Proposition 2; ...).
EXTERNAL = re.compile(
    r"et al\.|CGGMP|Mironov|Balle|Abadi|Paillier|Zhang|Talwar|opacus|Dwork|Bonawitz|FLamby"
    r"|\{cite(?::\w+)?\}"
)

#: What each cited item is about, as the paper's caption or statement says it: a sentence that names an item of the
#: same kind must name the cited one (regular expressions, case-insensitive). Items without keywords are only
#: checked to exist.
KEYWORDS: dict[tuple[str, str], str] = {
    ("figure", "2"): r"group",
    ("figure", "3"): r"intuiti|sensitivit",
    ("figure", "4"): r"creditcard|privacy-utility",
    ("figure", "5"): r"mnist|privacy-utility",
    ("figure", "6"): r"heart|privacy-utility",
    ("figure", "7"): r"tcga|privacy-utility",
    ("figure", "8"): r"weighting|ULDP-AVG-w",
    ("figure", "9"): r"sub-?sampling|sampling rate",
    ("figure", "10"): r"runtime|run time|execution time|medical|costs",
    ("figure", "11"): r"artificial|parameter size|linear",
    ("lemma", "1"): r"compos",
    ("lemma", "2"): r"RDP to|convert|conversion",
    ("lemma", "3"): r"(?<!sampled )Gaussian mechanism|one Gaussian|alpha / \(2 sigma\^2\)",
    ("lemma", "4"): r"sub-?sampled Gaussian|amplification",
    ("lemma", "5"): r"\(epsilon, delta\)[- ]group|\\delta\)\$? group",
    ("lemma", "6"): r"RDP group|group[- ]privacy of RDP",
    ("theorem", "1"): r"NAIVE",
    ("theorem", "2"): r"GROUP",
    ("theorem", "3"): r"ULDP-AVG|ULDP-SGD|SGD/AVG",
    ("theorem", "4"): r"correctness|within (the precision )?\$?P\b|precision|condition|wrap",
    ("theorem", "5"): r"learns|uniform on|reveal",
    ("algorithm", "1"): r"NAIVE",
    ("algorithm", "2"): r"GROUP|flags",
    ("algorithm", "3"): r"ULDP-AVG|ULDP-SGD|per-user|per user|w_su|clip",
    ("algorithm", "4"): r"sampl",
    ("algorithm", "5"): r"Encode|Decode|fixed-point|resolution",
    ("table", "1"): r"symbol|notation",
    ("table", "2"): r"DP variants|comparison of",
    ("section", "3.3"): r"baseline|ULDP-NAIVE|ULDP-GROUP",
    ("section", "3.4"): r"ULDP-AVG|ULDP-SGD|propos|sampl",
    ("section", "5.1"): r"settings|distribut|allocat|model",
    ("section", "5.2"): r"results|claim",
    ("equation", "3"): r"weight",
    ("equation", "4"): r"phi\(n\)|invertib",
}


@dataclass
class Item:
    """One numbered thing of the paper."""

    kind: str
    number: str
    title: str
    label: str | None = None
    subfigures: list[str] = field(default_factory=list)


def _strip_comments(text: str) -> str:
    return re.sub(r"(?<!\\)%.*", "", text)


def _braced(text: str, start: int) -> tuple[str, int]:
    """The contents of the brace group opening at ``text[start]`` and the index after it."""
    depth = 0
    for index in range(start, len(text)):
        depth += {"{": 1, "}": -1}.get(text[index], 0)
        if depth == 0:
            return text[start + 1 : index], index + 1
    raise ValueError(f"unbalanced braces at {start}")


def parse_paper(tex: str) -> dict[tuple[str, str], Item]:
    """``{(kind, number): Item}`` for every numbered item of the tex."""
    tex = _strip_comments(tex)
    theorems = dict(re.findall(r"\\newtheorem\{(\w+)\}\{(\w+)\}", tex))
    shared = re.findall(r"\\newtheorem\{\w+\}\[\w+\]", tex)
    assert not shared, f"shared theorem counters are not handled: {shared}"
    counters: dict[str, int] = {}
    items: dict[tuple[str, str], Item] = {}
    stack: list[str] = []
    figure: list[str] = []  # sub-figure captions of the figure being read
    sections: list[int] = [0, 0, 0]
    appendix = False
    last: Item | None = None
    token = re.compile(
        r"\\(begin|end)\{([\w*]+)\}|\\(section|subsection|subsubsection)\*?\{|\\(caption)\{|"
        r"\\label\{([^}]*)\}|\\(appendix)\b"
    )

    def step(kind: str, title: str) -> Item:
        counters[kind] = counters.get(kind, 0) + 1
        item = Item(kind, str(counters[kind]), title)
        items[(kind, item.number)] = item
        return item

    position = 0
    while match := token.search(tex, position):
        position = match.end()
        begin, env, heading, caption, label, appendix_cmd = match.groups()
        if begin == "begin":
            stack.append(env)
            if env in ("figure", "figure*"):
                figure = []
            elif env.rstrip("*") in theorems:
                title = tex[position : position + 200].split("\n")[0]
                last = step(theorems[env.rstrip("*")].lower(), title)
            elif env == "protocol":
                label_text, after = _braced(tex, position)
                title, _ = _braced(tex, after)
                last = step("protocol", title)
                last.label = label_text
        elif begin == "end":
            stack.pop()
        elif heading:
            title, position = _braced(tex, match.end() - 1)
            level = ("section", "subsection", "subsubsection").index(heading)
            sections[level] += 1
            sections[level + 1 :] = [0] * (2 - level)
            head = string.ascii_uppercase[sections[0] - 1] if appendix else str(sections[0])
            number = ".".join([head] + [str(n) for n in sections[1 : level + 1]])
            last = items[("section", number)] = Item("section", number, title)
        elif caption:
            title, position = _braced(tex, match.end() - 1)
            inner = [
                env
                for env in stack
                if env in ("figure", "figure*", "table", "table*", "algorithm", "subfigure")
            ]
            if inner and inner[-1] == "subfigure":
                figure.append(title)
                continue
            kind = inner[-1].rstrip("*") if inner else None
            assert kind, f"caption outside a float: {title!r}"
            last = step(kind, title)
            if kind == "figure":
                last.subfigures = figure
        elif label is not None:
            if (
                last is not None
                and last.label is None
                and not label.startswith("eq:")
                and "subfigure" not in stack
            ):
                last.label = label
        elif appendix_cmd:
            appendix, sections = True, [0, 0, 0]
    for equation, (label, title) in enumerate(_equations(tex), start=1):
        items[("equation", str(equation))] = Item("equation", str(equation), title, label)
    return items


def _equations(tex: str) -> list[tuple[str | None, str]]:
    """``(label, body)`` per equation number: an ``equation`` without ``\\nonumber``/``\\notag``, and each line of an
    ``align`` without one."""
    numbered = []
    for env, body in re.findall(r"\\begin\{(equation|align)\}(.*?)\\end\{\1\}", tex, re.S):
        for line in [body] if env == "equation" else body.split("\\\\"):
            if not re.search(r"\\(nonumber|notag)\b", line):
                label = re.search(r"\\label\{(eq:[^}]*)\}", line)
                numbered.append((label[1] if label else None, line.strip()))
    return numbered


@pytest.fixture(scope="module")
def paper() -> dict[tuple[str, str], Item]:
    if not TEX.exists():
        pytest.skip(f"the paper's tex is not at {TEX}")
    return parse_paper(TEX.read_text())


def test_the_parser_numbers_the_paper_as_latex_does(paper):
    """Known numbers of the typeset paper, read off its structure by hand."""

    def number(kind: str, label: str) -> str:
        return next(
            item.number for item in paper.values() if item.kind == kind and item.label == label
        )

    assert (
        number("figure", "fig:problem") == "1"
        and number("figure", "fig:groupdp_comparison_sigma5") == "2"
    )
    assert number("figure", "fig:creditcard") == "4" and number("figure", "fig:tcga_brca") == "7"
    assert paper[("figure", "9")].title.startswith(
        "User-level sub-sampling"
    )  # a figure without a label counts
    assert number("figure", "fig:private_weighting_artificial_runtime") == "11"
    mnist = paper[("figure", "5")].subfigures
    assert len(mnist) == 6 and mnist[5].startswith("$n \\approx 6$")
    assert (
        number("lemma", "lemma:rdp_subsampled") == "4"
        and number("lemma", "lemma:rdp_group_privacy") == "6"
    )
    assert (
        number("theorem", "theo:correctness") == "4" and number("definition", "def:asuldp") == "4"
    )
    assert number("algorithm", "alg:encode_decode") == "5" and number("protocol", "proto:1") == "1"
    assert (
        number("table", "table:notation") == "1" and number("table", "table:dp_comparison") == "2"
    )
    assert (
        paper[("section", "5.1")].title == "Settings"
        and paper[("section", "5.2")].title == "Results"
    )
    assert paper[("section", "E")].title.startswith("Convergence") and ("section", "7") not in paper
    assert number("equation", "eq:optimal_weight") == "3"


@dataclass(frozen=True)
class Citation:
    path: str
    line: int
    kind: str
    number: str
    sub: str
    sentence: str
    range_with: str = ""  # the other end, for either end of a range ("4-7": 4 with 7, 7 with 4)


def _sentence(text: str, start: int, end: int) -> str:
    """The sentence around ``text[start:end]`` (abbreviations such as "et al." and "Sec." do not end one)."""
    stop = re.compile(
        r'(?<!et al)(?<!e\.g)(?<!i\.e)(?<!\bSec)(?<!\bEq)(?<!\bFig)(?<!\bvs)\.\s|\n\s*\n|"""|\n\s*#\s*\n|'
        r"\n#: "
    )
    before = [m.end() for m in stop.finditer(text, max(0, start - 400), start)]
    after = stop.search(text, end)
    first = before[-1] if before else max(0, start - 400)
    last = after.start() if after else end + 400
    # code, not prose: no further than the lines next to the citation's
    first = max(first, text.rfind("\n", 0, max(0, text.rfind("\n", 0, start))) + 1)
    following = text.find("\n", text.find("\n", end) + 1)
    return text[first : last if following < 0 else min(last, following)]


def _clause(text: str, start: int, end: int) -> str:
    """The clause around a citation: within its parentheses and semicolons."""
    left = max(text.rfind(c, max(0, start - 200), start) for c in "(;\n")
    right = min((i for i in (text.find(c, end, end + 200) for c in ");\n") if i >= 0), default=end)
    return text[left + 1 : right]


def _expand(items: str) -> list[tuple[str, str, str]]:
    """``"5-8"`` -> 5, 6, 7, 8; ``"6c, 6f"`` -> (6, c), (6, f); ``"6d-f"`` -> (6, d-f). The third field is, for an end
    of a range, the other end (``"5-8"``: 8 for 5 and 5 for 8), else empty."""
    found: list[tuple[str, str, str]] = []
    parts = re.findall(ITEM + r"|-|–|to", items)
    previous = None
    for index, part in enumerate(parts):
        if part in ("-", "–", "to"):
            continue
        match = re.fullmatch(r"(\d+(?:\.\d+)*)([a-h](?:-[a-h])?)?", part)
        assert match, part  # findall above matched ITEM
        number, sub = match.groups()
        other = ""
        if previous is not None and index >= 2 and parts[index - 1] in ("-", "–", "to"):
            found[-1] = (*found[-1][:2], number)
            other = previous
            if "." not in number:
                found.extend((str(n), "", "") for n in range(int(previous) + 1, int(number)))
        found.append((number, sub or "", other))
        previous = number
    return found


#: A link to the book's page of the paper's items, read as its text: {ref}`Lemma 3 <paper-lemma-3>` -> Lemma 3.
LINK = re.compile(r"\{ref\}`([^`<]*?)\s*<paper-[^>]+>`")
#: What joins the items of a list that names the kind for each item: "Lemma 1, Lemma 3 and Lemma 6".
LIST_JOIN = re.compile(r"[\s#]*(?:,|,?[\s#]*(?:and|or))[\s#]*")


def citations() -> list[Citation]:
    """Every citation of the paper's numbered items in uldp/**/*.py and book/*.py (a link counts as its text)."""
    found = []
    for path in sorted([*ROOT.glob("uldp/**/*.py"), *ROOT.glob("book/*.py")]):
        text = LINK.sub(r"\1", path.read_text())
        matches = [
            match
            for match in CITATION.finditer(text)
            if not EXTERNAL.search(_clause(text, match.start(), match.end()))
        ]
        for index, match in enumerate(matches):
            line = text.count("\n", 0, match.start()) + 1
            sentence = _sentence(text, match.start(), match.end())
            numbers = _expand(match["items"])
            neighbours = [
                (matches[i], first, second)
                for i, first, second in (
                    (index - 1, index - 1, index),
                    (index + 1, index, index + 1),
                )
                if 0 <= i < len(matches)
            ]
            listed = len(numbers) > 1 or any(
                KINDS[other["kind"]] == KINDS[match["kind"]]
                and LIST_JOIN.fullmatch(text, matches[first].end(), matches[second].start())
                for other, first, second in neighbours
            )
            for (
                number,
                sub,
                other_end,
            ) in numbers:  # a list or range: each item exists, a range's ends agree
                found.append(
                    Citation(
                        str(path.relative_to(ROOT)),
                        line,
                        KINDS[match["kind"]],
                        number,
                        sub,
                        "" if listed else sentence,
                        other_end,
                    )
                )
    return found


def _alternatives(pattern: str) -> list[str]:
    """The top-level alternatives of a keyword pattern: ``"creditcard|privacy-utility"`` -> both."""
    alternatives, depth, start = [], 0, 0
    for index, char in enumerate(pattern):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "|" and depth == 0:
            alternatives.append(pattern[start:index])
            start = index + 1
    return [*alternatives, pattern[start:]]


def _shared(kind: str, numbers: range) -> set[str]:
    """The keyword alternatives that every item of ``numbers`` has (empty when one has no keywords)."""
    patterns = [KEYWORDS.get((kind, str(n))) for n in numbers]
    if not patterns or any(p is None for p in patterns):
        return set()
    return set.intersection(*(set(_alternatives(p)) for p in patterns if p is not None))


def _family(kind: str, end: str, other: str) -> str:
    """What the items of the range from ``other`` to ``end``, less ``end``, share."""
    low, high = sorted((int(end), int(other)))
    inner = range(low + 1, high + 1) if int(end) == low else range(low, high)
    return "|".join(sorted(_shared(kind, inner)))


def _overrun(kind: str, end: str, other: str) -> str | None:
    """``end`` when the range from ``other`` to it runs one item past a family: the items without ``end`` (two or
    more) share a keyword that ``end`` lacks ("Figures 4-8" of the privacy-utility Figures 4-7); else None."""
    if not (end.isdigit() and other.isdigit()):
        return None
    low, high = sorted((int(end), int(other)))
    inner = range(low + 1, high + 1) if int(end) == low else range(low, high)
    if len(inner) >= 2 and _shared(kind, inner) and not _shared(kind, range(low, high + 1)):
        return end
    return None


def mismatches(paper: dict[tuple[str, str], Item], cited: list[Citation]) -> list[str]:
    """What is wrong with each citation: a number the paper lacks, or a sentence naming another item of the kind."""
    wrong = []
    for c in cited:
        where = f"{c.path}:{c.line}: {c.kind} {c.number}{c.sub}"
        item = paper.get((c.kind, c.number))
        if item is None:
            wrong.append(f"{where}: the paper has no {c.kind} {c.number}")
            continue
        for letter in re.findall(r"[a-h]", c.sub):
            if string.ascii_lowercase.index(letter) >= len(item.subfigures):
                wrong.append(f"{where}: {c.kind} {c.number} has no sub-figure ({letter})")
        own = KEYWORDS.get((c.kind, c.number))
        if c.range_with and _overrun(c.kind, c.number, c.range_with) == c.number:
            wrong.append(
                f"{where}: the range to {c.kind} {c.range_with} runs one item past the items it "
                f"otherwise spans, which are all about {_family(c.kind, c.number, c.range_with)!r}"
            )
        others = [
            pattern
            for (kind, number), pattern in KEYWORDS.items()
            if kind == c.kind and number != c.number
        ]
        if (
            own
            and any(re.search(p, c.sentence, re.I) for p in others)
            and not re.search(own, c.sentence, re.I)
        ):
            wrong.append(
                f"{where}: the sentence names another {c.kind} of the paper, not this one "
                f"({own!r}): {' '.join(c.sentence.split())[:160]!r}"
            )
    return wrong


def test_every_citation_exists_in_the_paper_and_names_what_it_is(paper):
    cited = citations()
    assert len(cited) > 100  # the scan finds the library's and the book's citations
    assert not mismatches(paper, cited), "\n".join(mismatches(paper, cited))


def test_the_check_catches_the_old_numbering(paper):
    """Citations as uldp wrote them before it took the tex's numbering: figures 5-11, Lemma 5 for the sub-sampled
    Gaussian, Lemma 7, Section 6.1, Table 3, Eq. 4."""
    old = [
        Citation(
            "old",
            1,
            "figure",
            "11",
            "",
            "Figure 11: time per part of the protocol on the medical datasets.",
        ),
        Citation("old", 2, "figure", "5", "", "The paper's Figure 5: test accuracy on Creditcard."),
        Citation(
            "old", 3, "lemma", "5", "", "the sub-sampled Gaussian (Lemma 5) with user sampling"
        ),
        Citation(
            "old", 4, "lemma", "7", "", "Theorem 3 and Lemma 7 for ULDP-SGD/AVG with user sampling"
        ),
        Citation("old", 5, "section", "6", "", "The paper (Section 6.1) distributes records"),
        Citation("old", 6, "table", "3", "", "the Table 3 rounds T"),
        Citation("old", 7, "figure", "6", "d-h", "Figure 6d-h: MNIST with 10000 users"),
        Citation("old", 8, "table", "2", "", "the symbols of the paper's Table 2"),
        Citation("old", 9, "equation", "4", "", "enhanced weights (Eq. 4) and user-level sampling"),
        Citation(
            "old", 10, "lemma", "3", "", "(epsilon, delta) group privacy (the paper's Lemma 3)"
        ),
    ]
    assert len(mismatches(paper, old)) == len(old), mismatches(paper, old)


def test_the_check_catches_a_wrong_end_of_a_range(paper):
    """Both ends of a range are checked: "Figures 4-7" (the privacy-utility figures) passes; with its end changed to
    the weighting Figure 8, or its start to the sensitivity Figure 3, it fails, at the end that moved."""

    def cite(items: str) -> list[Citation]:
        return [
            Citation("range", 1, "figure", number, sub, "", other)
            for number, sub, other in _expand(items)
        ]

    assert [(c.number, c.range_with) for c in cite("4-7")] == [
        ("4", "7"),
        ("5", ""),
        ("6", ""),
        ("7", "4"),
    ]
    assert not mismatches(paper, cite("4-7"))
    assert [m.split(":")[2].strip() for m in mismatches(paper, cite("4-8"))] == ["figure 8"]
    assert [m.split(":")[2].strip() for m in mismatches(paper, cite("3-7"))] == ["figure 3"]
    assert not mismatches(paper, cite("4-11"))  # every experiment figure: no family to run past
    assert "range:1: figure 40: the paper has no figure 40" in mismatches(paper, cite("4-40"))
