"""The rules the book's chapter sources (``book/*.py``) obey, read from their text without running them: no chapter
reads a private name of the library, and no chapter types in its prose a number that a run, a profile or a timing
produces (CONTRIBUTING.md, "Chapters")."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import jupytext
import pytest

BOOK = Path(__file__).resolve().parent.parent / "book"


def _private_names(source: str) -> list[str]:
    """Names with a single leading underscore (not dunders) read as attributes (``x._name``, ``getattr(x, "_name")``)
    or imported, in ``source``."""

    def private(name: str) -> bool:
        return name.startswith("_") and not name.startswith("__")

    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and private(node.attr):
            found.append(node.attr)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "setattr")
            and len(node.args) > 1
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
            and private(node.args[1].value)
        ):
            found.append(node.args[1].value)  # the same attribute, read by name
        elif isinstance(node, ast.ImportFrom):
            found += [part for part in (node.module or "").split(".") if private(part)]
            found += [alias.name for alias in node.names if private(alias.name)]
        elif isinstance(node, ast.Import):
            found += [
                part for alias in node.names for part in alias.name.split(".") if private(part)
            ]
    return found


def test_private_name_finder_sees_attributes_and_imports() -> None:
    source = (
        "from uldp.x import _hidden\nimport uldp._inner\nkey = server._private_key\nname = obj.__class__\n"
        "duration = experiments._duration(5)\nsecret = getattr(server, '_secret')\npublic = getattr(x, 'name')\n"
    )
    assert sorted(_private_names(source)) == [
        "_duration",
        "_hidden",
        "_inner",
        "_private_key",
        "_secret",
    ]


@pytest.mark.parametrize("chapter", sorted(BOOK.glob("*.py")), ids=lambda path: path.name)
def test_no_chapter_reads_a_private_name(chapter: Path) -> None:
    assert _private_names(chapter.read_text()) == []


#: Where a chapter's prose may write numbers freely: maths, code, roles ({ref}, {doc}, {cite}) and link addresses.
_NOT_PROSE = re.compile(
    r"\$\$.*?\$\$|\$[^$]+\$|``.*?``|`[^`]*`|\{[a-z:]+\}`[^`]*`|\]\([^)]*\)", re.S
)
#: What a typed result looks like in prose (see the test's docstring).
_TYPED_RESULT = re.compile(
    r"(?<![\w.])\d+\.\d{2,}(?![\w.])"  # two or more decimals (powers of ten and versions are let through below)
    r"|(?<![\w.])\d+(?:\.\d+)?x\b"  # a ratio, "44x"
    r"|\d+(?:\.\d+)?\s?%\s+(?:below|above|higher|lower|faster|slower|more|less|smaller|larger)\b"
    r"|\bby\s+(?:about\s+)?\d+(?:\.\d+)?(?:\s+to\s+\d+(?:\.\d+)?)?\s?%"
)


def typed_results(markdown: str) -> list[str]:
    """The typed results in a chapter's markdown (outside maths, code, roles and link addresses)."""
    prose = _NOT_PROSE.sub(" ", markdown)
    return [
        match.group(0)
        for match in _TYPED_RESULT.finditer(prose)
        if not re.fullmatch(r"0\.0*1", match.group(0))
        and "Flower" not in prose[max(0, match.start() - 12) :][:12]
    ]


@pytest.mark.parametrize(
    "text, found",
    [
        ("accuracy 0.909 at q = 0.1", ["0.909"]),
        ("ends at 0.70-0.71", ["0.70", "0.71"]),
        ("44x larger", ["44x"]),
        ("by 6 to 9% (the column)", ["by 6 to 9%"]),
        ("17% below the route", ["17% below"]),
        ("by at most 0.00%", ["0.00"]),
        ("$\\sigma = 6.08$ and `0.123` and {ref}`Figure 4 <paper-figure-4>`", []),
        (
            "local learning rate 0.001, global 0.1, Flower 1.41, in 2017, 80% of its records, Figures 4-7",
            [],
        ),
    ],
)
def test_typed_results_are_the_numbers_a_result_would_give(text: str, found: list[str]) -> None:
    assert typed_results(text) == found


@pytest.mark.parametrize("chapter", sorted(BOOK.glob("*.py")), ids=lambda path: path.stem)
def test_no_chapter_types_a_result_in_its_prose(chapter: Path) -> None:
    """A number that a run, a profile or a timing produces is computed in a code cell, never typed in a markdown
    cell (it would go stale when the results change). The rule: outside maths, code, roles and link addresses, a
    chapter's prose has no decimal with two or more digits after the point other than a power of ten (0.909 is a
    result; 0.001 is a setting), no ratio like "44x", and no comparison in per cent ("17% below", "by 6 to 9%").
    Allowed: the paper's item numbers, years of citations, settings (0.1, 0.001, 80% of a user's records), counts,
    and version numbers after "Flower"."""
    cells = [cell.source for cell in jupytext.read(chapter).cells if cell.cell_type == "markdown"]
    assert [found for source in cells for found in typed_results(source)] == []
