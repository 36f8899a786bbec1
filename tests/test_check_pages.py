"""tools/check_pages.py: what a built page must not show a reader (its HTML checks; the browser's are not run here)."""

import base64
import contextlib
import io
import json
import re
import time
from pathlib import Path

import pytest
from PIL import Image
from script_loader import load_script

ROOT = Path(__file__).resolve().parent.parent
check_pages = load_script("tools/check_pages.py")

CITATIONS = check_pages.bibliography_citations(
    (ROOT / "references.bib").read_text(encoding="utf-8")
)
CAPTIONED = (
    '<figure><img src="look.png"><figcaption><p><strong>Figure 1.</strong> Look.</p>'
    "</figcaption></figure>"
)


def _output(html: str) -> str:
    return f'<article><div class="cell_output">{html}</div></article>'


@pytest.mark.parametrize(
    "page, fault",
    [
        (_output("<p>$\\sigma = 6.08$</p>"), "raw maths in an output: $\\sigma = 6.08$"),
        (_output("<p>\\textsc{Encode}</p>"), "raw maths in an output: \\textsc"),
        (
            _output('<div class="output stderr"><pre>INSECURE: shared seed</pre></div>'),
            "stderr in an output: INSECURE",
        ),
        (_output("<pre>results in /work/wt/x/results</pre>"), "a local path: /work/wt"),
        (
            _output(
                "<div class=\"output traceback highlight-ipythontb\"><pre>KeyError: 'seed'</pre></div>"
            ),
            "an error in an output: KeyError",
        ),
        (_output("<table><tr><td>nan</td></tr></table>"), "a raw value in a table: nan"),
        (_output("<table><tr><td>5.7e+11</td></tr></table>"), "a raw value in a table: 5.7e+11"),
        (_output('<img src="a.png">'), "a figure without a numbered caption: a.png"),
        (
            _output(  # Sphinx's number across the book before the paper's: "Fig. 40 Figure 6"
                '<figure><img src="b.png"><figcaption><span class="caption-number">Fig. 40 </span>'
                "<p>Figure 6, reproduced.</p></figcaption></figure>"
            ),
            "a figure without a numbered caption: b.png",
        ),
        (
            _output("<table><tr><td>85/15 str...</td></tr></table>"),
            "a truncated cell: 85/15 str...",
        ),
        (_output("<table><tr><td>zipf, 85/15 st…</td></tr></table>"), "a truncated cell"),
        (
            _output("<pre>&lt;uldp.deploy.Silo object at 0x7f3a2c&gt;</pre>"),
            "an object's repr in an output: <uldp.deploy.Silo object at 0x7f3a2c>",
        ),
        (
            _output("<pre>RunConfig(dataset='synthetic', method='ULDP-AVG')</pre>"),
            "an object's repr in an output: RunConfig(dataset=",
        ),
        (_output("<table><tr><td>not run</td></tr></table>"), "'not run' in an output"),
        (
            _output("<pre>logged 10 times: INSECURE: silo 0 draws its noise</pre>"),
            "a warning in an output: INSECURE",
        ),
        (
            _output("<pre>ClipWarning: clip 1.0 is far from the norms</pre>"),
            "a warning in an output: ClipWarning",
        ),
        (
            "<article><p>as Mironov 2017, Proposition 2 shows</p></article>",
            "a plain-text citation: Mironov 2017",
        ),
        (
            "<article><p>see Balle and Wang (2018)</p></article>",
            "a plain-text citation: Balle and Wang (2018",
        ),
    ],
)
def test_each_leak_is_a_fault(page: str, fault: str) -> None:
    assert any(found.startswith(fault) for found in check_pages.page_faults(page, CITATIONS)), fault


def test_the_number_a_reader_sees_is_the_chapters_not_sphinxs() -> None:
    """Sphinx's "Fig. 40" (hidden by the book's stylesheet) before the chapter's own "Figure 2." is fine."""
    page = _output(
        '<figure><img src="c.png"><figcaption><p><span class="caption-number">Fig. 40 </span>'
        "<span><strong>Figure 2.</strong> The paper's Figure 6, reproduced.</span></p></figcaption></figure>"
    )
    assert check_pages.page_faults(page) == []


def test_a_clean_page_has_no_fault() -> None:
    page = (
        '<article><p>By <a href="bibliography.html#id1">Mironov [2017]</a>, with '
        '<span class="math notranslate nohighlight">\\(\\sigma\\)</span>.</p>'
        '<div class="cell_input"><pre>path = "/tmp/x"  # code a reader opens</pre></div>'
        f'<div class="cell_output">{CAPTIONED}<table><tr><td>0.912 ± 0.004</td><td>-</td></tr></table>'
        "<pre>q=1.0: epsilon = 10.726</pre></div></article>"
    )
    assert check_pages.page_faults(page, CITATIONS) == []


def test_a_file_quoted_as_it_is_speaks_in_its_own_words() -> None:
    """The settings file, shown verbatim (class quoted-file), may say "not run"; the same words elsewhere may not."""
    quoted = '<div class="quoted-file highlight-text"><pre>NAIVE was not run; Zipf(alpha=0.5)</pre></div>'
    assert check_pages.page_faults(_output(quoted)) == []
    assert check_pages.page_faults(_output(quoted.replace("quoted-file ", ""))) == [
        "an object's repr in an output: Zipf(alpha=",
        "'not run' in an output: not run",
    ]


def _figure(width_inches: float, legend_pt: float, *, outside: bool = True) -> str:
    """A page with one figure as the book embeds it (``uldp.paper.chapters.captions``): a legend of ``legend_pt``
    points below the axes, or inside them."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from uldp.paper.chapters.captions import captioned

    fig, ax = plt.subplots(figsize=(width_inches, 3), dpi=100)
    ax.plot([0, 1], [0, 1], label="ULDP-AVG")
    if outside:
        fig.legend(loc="lower center", fontsize=legend_pt)
        fig.subplots_adjust(bottom=0.3)
    else:
        ax.legend(loc="upper left", fontsize=legend_pt)
    source = captioned(fig, "Look.").data.split("\n", 1)[0].removeprefix("````{figure} ")
    return _output(
        f'<figure><img src="{source}"><figcaption><p><strong>Figure 1.</strong> Look.</p>'
        "</figcaption></figure>"
    )


def _png_width(page: str) -> int:
    found = re.search(r'src="data:image/png;base64,([^"]+)"', page)
    assert found is not None
    with Image.open(io.BytesIO(base64.b64decode(found.group(1)))) as image:
        return image.width


def test_a_legend_is_judged_at_the_size_the_page_shows_it() -> None:
    """A PNG w px wide saved at 150 dpi is a figure of w / 150 inches; shown at min(w, 900) px (the article), 96 px
    an inch, a legend of p points reads p * min(w, 900) / (96 w / 150): a 4-inch figure (about 600 px) at 1.5 times
    its size, a 14-inch one (about 2000 px) at under 0.7. A legend inside the axes is a fault whatever its size."""
    for inches, points in ((4, 10), (4, 5), (14, 10), (14, 14)):
        page = _figure(inches, points)
        width = _png_width(page)
        scale = min(width, 900) / (96 * width / 150)
        expected = (
            []
            if points * scale >= 9
            else [
                (
                    f"a legend of {points * scale:.1f} pt as shown ({points} pt at {scale:.2f} scale), "
                    "under 9 pt: Figure 1. Look."
                )
            ]
        )
        assert check_pages.page_faults(page) == expected, (inches, points)
        assert bool(expected) == ((inches, points) in ((4, 5), (14, 10)))
    # measured by the browser: the wide figure shown at its full width passes, the narrow one at 200 px fails
    wide = _figure(14, 10)
    assert check_pages.page_faults(wide, widths=[float(_png_width(wide))]) == []
    assert check_pages.page_faults(_figure(4, 10), widths=[200.0])[0].startswith("a legend of 5.")
    assert check_pages.page_faults(_figure(4, 10, outside=False)) == [
        "1 legend(s) inside an axes: Figure 1. Look."
    ]


def test_the_browser_measures_the_widths_the_images_are_shown_at() -> None:
    assert check_pages.image_widths('<body data-image-widths="[640.5, 900]">') == [640.5, 900.0]
    assert check_pages.image_widths("<body>") == []


def _narrow_dom(scrolls: list[str], window: int = 390, wide=(), beside=()) -> str:
    """A DOM as the scroll probe leaves it in a frame ``window`` px wide (a phone's by default)."""
    layout = {"window": window, "column": 358.0, "wide": list(wide), "beside": list(beside)}
    return f"<body data-scrolls='{json.dumps(scrolls)}' data-layout='{json.dumps(layout)}'></body>"


@pytest.mark.parametrize("window", [390, 768])
def test_on_a_phone_or_tablet_a_table_may_scroll_in_its_box_but_not_the_page_or_a_figure(
    window: int,
) -> None:
    def faults(scrolls: list[str]) -> list[str]:
        return check_pages.narrow_faults(_narrow_dom(scrolls, window), window)

    assert faults(["div.cell_output.docutils: grid 8 columns"]) == []
    assert faults(["page"]) == [f"scrolls sideways at {window} px: page"]
    assert faults(["in a figure: figure.align-default: Figure 1."]) == [
        f"scrolls sideways at {window} px: in a figure: figure.align-default: Figure 1."
    ]


def test_on_a_phone_figures_fit_the_column_and_stack() -> None:
    assert check_pages.narrow_faults(_narrow_dom([], wide=[0], beside=[2, 3]), 390) == [
        "image 1 is wider than the article column (358 px) at 390 px",
        "image 3 sits beside another image at 390 px instead of stacking",
        "image 4 sits beside another image at 390 px instead of stacking",
    ]


def test_on_a_tablet_figures_fit_the_column_and_panels_may_sit_side_by_side() -> None:
    """From 601 px the book lays a split figure's panels out side by side (``_static/book.css``): an image beside
    another is no fault there, one wider than the column still is."""
    assert check_pages.TABLET_WIDTH > check_pages.STACKED_UP_TO
    dom = _narrow_dom([], window=768, wide=[0], beside=[2, 3])
    assert check_pages.narrow_faults(dom, 768) == [
        "image 1 is wider than the article column (358 px) at 768 px"
    ]
    assert check_pages.narrow_faults(_narrow_dom([], window=768, beside=[2, 3]), 768) == []


def test_a_window_of_another_width_than_asked_is_not_measured() -> None:
    """Some headless browsers refuse windows under 500 px: the phone check must not pass on a wider one."""
    assert check_pages.narrow_faults(_narrow_dom([], window=500), 390) == [
        "the browser's window was 500 px wide, not 390 px: not measured"
    ]
    assert check_pages.narrow_faults(_narrow_dom([], window=1280), 768) == [
        "the browser's window was 1280 px wide, not 768 px: not measured"
    ]
    assert check_pages.narrow_faults("<body data-scrolls='[]'></body>", 390) == [
        "? the layout measurement did not run"
    ]


def _fake_browser(tmp_path: Path, body: str) -> str:
    """An executable standing in for Chromium: a shell script run with the browser's flags and the page's address."""
    script = tmp_path / "fake-browser"
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(0o755)
    return str(script)


def _ended(pid: int) -> bool:
    """Whether process ``pid`` has ended (gone or a zombie), waiting for it a while: SIGKILL takes effect a moment
    after os.killpg returns, later on a loaded machine."""
    status = Path(f"/proc/{pid}/status")
    for _ in range(200):
        with contextlib.suppress(FileNotFoundError):
            if "\nState:\tZ" not in status.read_text():
                time.sleep(0.05)
                continue
        return True
    return False


def test_the_dom_is_taken_when_complete_and_whatever_the_browser_started_is_ended(
    tmp_path: Path,
) -> None:
    """Headless Chromium can hang after printing the page: the page still counts, and nothing is left running."""
    pid_file = tmp_path / "child.pid"
    browser = _fake_browser(
        tmp_path, f"sleep 300 &\necho $! > {pid_file}\necho '<html><body>x</body></html>'\nwait"
    )
    dom, complete = check_pages.browser_dom([browser], timeout=60)
    assert complete and dom.strip() == "<html><body>x</body></html>"
    assert _ended(int(pid_file.read_text()))


def test_a_page_the_browser_does_not_finish_in_time_fails_and_says_so(
    tmp_path: Path, capsys
) -> None:
    (tmp_path / "book").mkdir()
    page = "<html><body><article><p>Clean.</p></article></body></html>"
    for name in ("slow", "fine"):
        (tmp_path / "book" / f"{name}.html").write_text(page)
    (tmp_path / "index.html").write_text(
        '<meta http-equiv="Refresh" content="0; url=book/fine.html" />'
    )
    # the slow page prints half a DOM and stops; the other is complete, with the scroll probe's measurements at the
    # width it was asked for
    layout = "{&quot;window&quot;: %s, &quot;column&quot;: 300, &quot;wide&quot;: [], &quot;beside&quot;: []}"
    page_at = "<html><body data-scrolls='[]' data-layout='%s'></body></html>"
    browser = _fake_browser(
        tmp_path,
        'case "$*" in *slow*) echo "<html><body>"; sleep 300;; '
        f'*.frame-390-*) echo "{page_at % (layout % 390)}";; '
        f'*.frame-768-*) echo "{page_at % (layout % 768)}";; *) echo "{page_at % (layout % 1280)}";; esac',
    )
    assert check_pages.main(["--html", str(tmp_path), "--browser", browser, "--timeout", "2"]) == 1
    report = capsys.readouterr().out
    assert "skip   index.html: no article" in report
    assert "ok     book/fine.html" in report
    assert "FAILED book/slow.html" in report and "no complete page at 1280 px within 2 s" in report
    assert "2 pages checked, 1 failed: book/slow.html" in report
    assert not list(tmp_path.rglob(".probe-*")) and not list(tmp_path.rglob(".frame-*"))


def test_every_page_is_measured_at_a_tablets_width_too(tmp_path: Path, capsys) -> None:
    """A page clean at 1280 and 390 px that scrolls sideways in a tablet's frame fails, named at that width; the
    tablet's width can be another of the band where panels sit side by side, and none outside it."""
    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "page.html").write_text(
        "<html><body><article><p>Clean.</p></article></body></html>"
    )
    layout = "{&quot;window&quot;: %s, &quot;column&quot;: 300, &quot;wide&quot;: [], &quot;beside&quot;: []}"
    clean = "<html><body data-scrolls='[]' data-layout='%s'></body></html>"
    scrolls = "<html><body data-scrolls='[&quot;page&quot;]' data-layout='%s'></body></html>"

    def check(tablet: int) -> str:
        browser = _fake_browser(
            tmp_path,
            f'case "$*" in *.frame-390-*) echo "{clean % (layout % 390)}";; '
            f'*.frame-{tablet}-*) echo "{scrolls % (layout % tablet)}";; '
            f'*) echo "{clean % (layout % 1280)}";; esac',
        )
        arguments = ["--html", str(tmp_path), "--browser", browser, "--timeout", "20"]
        code = check_pages.main(
            arguments + ([] if tablet == 768 else ["--tablet-width", str(tablet)])
        )
        assert code == 1
        return capsys.readouterr().out

    assert f"scrolls sideways at {check_pages.TABLET_WIDTH} px: page" in check(768)
    assert "scrolls sideways at 601 px: page" in check(601)
    for outside in (600, 1280):
        with pytest.raises(SystemExit):
            check_pages.main(["--html", str(tmp_path), "--tablet-width", str(outside)])
        assert f"--tablet-width {outside}: a tablet's window is from 601 to 1279 px" in (
            capsys.readouterr().err
        )


def _panels_page(text: str) -> tuple[str, list[float]]:
    """A page with the figure of ``text`` (a MyST figure of ``uldp.paper.chapters.captions``) as Sphinx writes it:
    the first image before the caption, the others after it, in the figure's classes; and each image's own width,
    CSS px."""
    images = re.findall(r"data:image/png;base64,(\S+)", text)
    classes = re.search(r":figclass: ([^\n]+)", text)
    tags = [f'<img src="data:image/png;base64,{encoded}">' for encoded in images]
    widths = []
    for encoded in images:
        png = base64.b64decode(encoded)
        with Image.open(io.BytesIO(png)) as image:
            widths.append(96 * image.width / json.loads(image.info["uldp-figure"])["dpi"])
    page = _output(
        f'<figure class="{classes.group(1) if classes else ""}">{tags[0]}<figcaption><p><strong>Figure 1.'
        f'</strong> Look.</p><div class="legend">{"".join(tags[1:])}</div></figcaption></figure>'
    )
    return page, widths


def test_on_a_phone_or_tablet_a_figure_of_panels_is_judged_by_the_size_of_its_text() -> None:
    """A figure of three panels across 9 inches, embedded whole, reads at about 327 / 864 of its size in a phone's
    column (327 px): its 10 pt ticks at about 4 pt fail. Split into keys and three panels (the book's way), each
    shown at its own width passes; a panel squeezed to 150 px fails again. A figure of one panel is not judged on a
    phone (a tap opens it whole)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from uldp.paper import plots
    from uldp.paper.chapters.captions import METADATA_KEY, captioned, figure_metadata

    def three_panels() -> plt.Figure:
        fig, axes = plt.subplots(1, 3, figsize=(plots.FIGURE_WIDTH, 3.4))
        for index, ax in enumerate(axes):
            ax.plot([0, 1], [0, index], label=f"ULDP-GROUP-median, line {index}")
        plots.figure_legend(fig, axes)
        return fig

    fig, buffer = three_panels(), io.BytesIO()
    fig.canvas.draw()
    metadata = figure_metadata(fig)
    fig.savefig(buffer, format="png", dpi=150, metadata={METADATA_KEY: json.dumps(metadata)})
    plt.close(fig)
    whole = base64.b64encode(buffer.getvalue()).decode("ascii")
    page, (width,) = _panels_page(f"data:image/png;base64,{whole}")
    faults = check_pages.page_faults(page, narrow_widths={390: [327.0]})
    scale = 327.0 / width
    shown = "an image of 3 panels shown 327 px wide at 390 px"
    assert faults == [
        f"{shown}: text of {10 * scale:.1f} pt (10 pt at {scale:.2f} scale), under 8 pt: Figure 1. Look.",
        f"{shown}: a legend of {10 * scale:.1f} pt, under 9 pt: Figure 1. Look.",
    ]
    page, widths = _panels_page(captioned(three_panels(), "Look.").data)
    # a phone hides the wide page's key (the first image): the browser measures it 0 px wide
    assert len(widths) == 5 and max(widths[1:]) <= 327 < widths[0]
    assert check_pages.page_faults(page, narrow_widths={390: [0.0, *widths[1:]]}) == []
    squeezed = check_pages.page_faults(page, narrow_widths={390: [0.0, *widths[1:-1], 150.0]})
    assert len(squeezed) == 1 and squeezed[0].startswith(
        "a panel of a split figure shown 150 px wide at 390 px: text of"
    )
    # three columns in a 601 px window's 554 px (measured in Chromium with the stylesheet of three fixed columns)
    # shrink each panel to 169 px: its 10 pt text under 8 pt, each panel a fault; in fewer columns, each at its own
    # width, none. A key squeezed to 150 px has text under 8 pt and a legend under 9 pt.
    tablet = check_pages.page_faults(page, narrow_widths={601: [0.0, 150.0, *[169.0] * 3]})
    assert len(tablet) == 5 and all(" px wide at 601 px: " in fault for fault in tablet)
    assert sum("a legend of" in fault for fault in tablet) == 1
    assert check_pages.page_faults(page, narrow_widths={768: [0.0, *widths[1:]]}) == []
    both = check_pages.page_faults(
        page, narrow_widths={390: [0.0, *widths[1:]], 768: [0.0, *widths[1:-1], 150.0]}
    )
    assert len(both) == 1 and "shown 150 px wide at 768 px: text of" in both[0]
    one, _ = plt.subplots(figsize=(9, 3))
    single, _ = _panels_page(captioned(one, "Look.").data)
    assert check_pages.page_faults(single, narrow_widths={390: [100.0], 768: [100.0]}) == []
