"""tools/build_book.py: the offline check of the rendered pages and the tags that fold code cells."""

from pathlib import Path

import nbformat
import pytest
import yaml
from script_loader import load_script

ROOT = Path(__file__).resolve().parent.parent
build_book = load_script("tools/build_book.py")


@pytest.mark.parametrize(
    "page, expected",
    [
        ('<script src="_static/mathjax/tex-chtml.js"></script>', []),
        ('<script src="../_static/a.js"></script><link rel="stylesheet" href="_static/b.css">', []),
        (
            '<script src="https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-chtml.js"></script>',
            ["https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-chtml.js"],
        ),
        (
            '<script defer="defer" src="http://example.org/x.js"></script>',
            ["http://example.org/x.js"],
        ),
        ('<SCRIPT SRC="//unpkg.com/thebe"></SCRIPT>', ["//unpkg.com/thebe"]),
        (
            '<link href="https://fonts.example/f.css" rel="stylesheet"/>',
            ["https://fonts.example/f.css"],
        ),
        ('<link rel="preload" as="script" href="https://x.org/p.js">', ["https://x.org/p.js"]),
        # links a reader follows are not loaded by the page
        (
            '<a href="https://arxiv.org/abs/2308.12210">paper</a><link rel="canonical" href="https://x.org/">',
            [],
        ),
        ('<script>var url = "https://x.org/not-loaded.js";</script>', []),
        ('<img src="data:image/png;base64,AAAA">', []),
    ],
)
def test_external_assets_finds_exactly_the_outside_scripts_and_stylesheets(page, expected):
    assert build_book.external_assets(page) == expected


def test_check_offline_names_the_page_and_address(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "index.html").write_text('<script src="_static/ok.js"></script>')
    (tmp_path / "sub" / "page.html").write_text('<script src="https://cdn.example/m.js"></script>')
    with pytest.raises(SystemExit, match=r"sub/page\.html: https://cdn\.example/m\.js"):
        build_book.check_offline(tmp_path)
    (tmp_path / "sub" / "page.html").write_text("<p>no scripts</p>")
    build_book.check_offline(tmp_path)  # passes


def test_cells_are_folded_except_those_shown_and_the_default_parameters_are_removed(tmp_path):
    notebook = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_markdown_cell("# Title"),
            nbformat.v4.new_code_cell('profile = "default"', metadata={"tags": ["parameters"]}),
            nbformat.v4.new_code_cell("plot()"),
            nbformat.v4.new_code_cell("api_call()", metadata={"tags": ["show-input"]}),
            nbformat.v4.new_code_cell("hidden()", metadata={"tags": ["remove-cell"]}),
        ]
    )
    path = tmp_path / "chapter.ipynb"
    nbformat.write(notebook, path)
    build_book.tag_cells_for_the_book(path)
    tags = [cell.metadata.get("tags", []) for cell in nbformat.read(path, as_version=4).cells]
    assert tags == [
        [],
        ["parameters", "remove-cell"],
        ["hide-input"],
        ["show-input"],
        ["remove-cell"],
    ]


def test_every_profile_has_a_banner_naming_it():
    for profile in build_book.PROFILES:
        assert f"{profile} profile" in build_book.PROFILE_BANNERS[profile]


def test_only_a_partial_book_lets_links_to_pages_outside_it_go(tmp_path):
    """A chapter built alone links to the page of the paper's items, which it lacks; the full book checks every
    link (Sphinx's -W turns an undefined label into an error)."""
    build_book.stage_config(tmp_path, "smoke", ["book/introduction", "book/baselines"])
    partial = yaml.safe_load((tmp_path / "_config.yml").read_text())["sphinx"]["config"]
    assert {"ref.ref", "ref.doc"} <= set(partial["suppress_warnings"])
    assert yaml.safe_load((tmp_path / "_toc.yml").read_text())["root"] == "book/introduction"
    build_book.stage_config(tmp_path, "smoke")
    full = yaml.safe_load((tmp_path / "_config.yml").read_text())["sphinx"]["config"]
    assert not {"ref.ref", "ref.doc"} & set(full.get("suppress_warnings", []))


def _parsed_toc(path: Path):
    """The table of contents as Jupyter Book reads it (its parser refuses what the build would refuse)."""
    from sphinx_external_toc.parsing import parse_toc_yaml

    return parse_toc_yaml(path)


@pytest.mark.parametrize(
    "only",
    [[entry] for entry in build_book.toc_entries(yaml.safe_load((ROOT / "_toc.yml").read_text()))]
    + [["book/settings", "book/baselines"]],
)
def test_a_partial_book_of_any_pages_has_a_table_of_contents_jupyter_book_accepts(tmp_path, only):
    """`--only PAGE --html` staged an empty ``chapters`` list, which Jupyter Book refuses, for a single page."""
    build_book.stage_config(tmp_path, "smoke", only)
    site = _parsed_toc(tmp_path / "_toc.yml")
    assert set(site) == set(only)


def test_a_partial_book_keeps_the_parts_and_order_of_its_pages():
    toc = {
        "format": "jb-book",
        "root": "intro",
        "parts": [
            {
                "caption": "Method",
                "chapters": [{"file": "a", "sections": [{"file": "a1"}]}, {"file": "b"}],
            },
            {"caption": "Experiments", "chapters": [{"file": "c"}]},
            {"caption": "Reference", "chapters": [{"file": "d"}]},
        ],
    }
    assert build_book.partial_toc(toc, ["d", "a1", "intro", "b"]) == {
        "format": "jb-book",
        "root": "intro",
        "parts": [
            {"caption": "Method", "chapters": [{"file": "a1"}, {"file": "b"}]},
            {"caption": "Reference", "chapters": [{"file": "d"}]},
        ],
    }
    assert build_book.partial_toc(
        toc, ["c", "b"]
    ) == {  # without the opening page the book's first one leads
        "format": "jb-book",
        "root": "b",
        "parts": [{"caption": "Experiments", "chapters": [{"file": "c"}]}],
    }
    with pytest.raises(ValueError, match="unknown: \\['e'\\]"):
        build_book.partial_toc(toc, ["a", "e"])


def test_time_left_takes_the_last_builds_times_then_this_builds_mean():
    assert build_book.time_left(["a", "b"], {"a": 30.0, "b": 50.0}, [1000.0]) == 80.0
    assert build_book.time_left(["a", "b"], {"a": 30.0}, [10.0, 20.0]) == 45.0
    assert build_book.time_left(["a"], {}, []) == build_book.UNTIMED_CHAPTER_S
    assert build_book.time_left([], {"a": 30.0}, [10.0]) == 0.0


def test_chapter_times_are_kept_per_profile_across_builds(tmp_path, monkeypatch):
    monkeypatch.setattr(build_book, "TIMES", tmp_path / "times.json")
    assert build_book.read_times("smoke") == {}
    build_book.write_times("smoke", {"a": 1.5})
    build_book.write_times("default", {"a": 90.0})
    build_book.write_times("smoke", {"b": 2.0})
    assert build_book.read_times("smoke") == {"a": 1.5, "b": 2.0}
    assert build_book.read_times("default") == {"a": 90.0}
    (tmp_path / "times.json").write_text("not json")
    assert build_book.read_times("smoke") == {}
