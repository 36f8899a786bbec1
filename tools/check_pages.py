"""Check every page of the built book: what it renders in a headless browser, and what its text must not contain.

In a headless browser (Chromium, background networking off), for each page of ``_build/html`` (after ``make book``
or ``tools/build_book.py``), in a 1280 px wide window:

- every maths element that Sphinx wrote (``class="math ..."``) became a MathJax container, with no MathJax error;
- nothing scrolls sideways: neither the page nor a block inside it (a table, an output, a displayed equation) is
  wider than the space it has (:data:`SCROLL_PROBE` measures it after the page's scripts ran);

and in a frame as wide as a phone's window, 390 px (:data:`PHONE_WIDTH`), and in one as wide as a tablet's,
768 px (:data:`TABLET_WIDTH`; :data:`FRAME`, :func:`narrow_faults`): the page does not scroll sideways, no figure
scrolls sideways in its own box, every image fits the article's column, and on the phone the figures stack, none
beside another; an image of several panels, or a panel or key of a split figure (``figure.panel-grid``), is read
there at the width the window shows it: its text at least :data:`PHONE_MIN_TEXT_PT` and its legend at least
:data:`MIN_LEGEND_PT` (:func:`narrow_figure_faults`). A table or an output may scroll in its own box there: a
reader swipes a table of eight columns.

In the HTML itself (:func:`page_faults`): every figure has a caption numbered within its chapter ("Figure 3."); no
output shows raw maths (``$...$`` or a ``\\command``), a local absolute path, text written to stderr, a traceback,
a raw NaN/None/inf in a table, a truncated cell ("85/15 str..."), an object's repr (``<... object at 0x...>``,
``RunConfig(dataset=...)``), a cell or line saying "not run", or a warning (``INSECURE``, ``...Warning``); no
figure's legend is smaller than :data:`MIN_LEGEND_PT` at the size the page shows it (:func:`figure_faults`, from
the metadata ``uldp.paper.chapters.captions`` writes into each PNG) or sits inside an axes; no prose cites an entry of
``references.bib`` as plain text ("Mironov 2017") instead of through ``{cite}``.

Not part of ``make test``: it needs Chromium (``chromium`` or ``chromium-browser`` on the PATH, or ``--browser``).

Each page gets its own browser, profile and time limit (``--timeout``); a page the browser does not finish in time
fails and says so. Every page is reported (``ok``, ``FAILED`` with its faults, or ``skip`` for a page that only
redirects), then the count checked and failed.

Usage: ``python tools/check_pages.py [PAGE ...] [--html _build/html] [--browser PATH] [--timeout S]
[--tablet-width PX]``; exit status 1 when a page fails.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import io
import json
import os
import re
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from bs4 import BeautifulSoup
from PIL import Image

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

ROOT = Path(__file__).resolve().parent.parent
WINDOW_WIDTH = 1280
#: The width of a phone's window, CSS pixels (an iPhone 12 to 15 held upright).
PHONE_WIDTH = 390
#: The widest window, CSS pixels, in which ``_static/book.css`` stacks a figure's panels one under another (its
#: ``max-width: 600px``); in a wider one they sit side by side, in a grid of the figure's columns at most.
STACKED_UP_TO = 600
#: The width of a tablet's window, CSS pixels (an iPad held upright; sphinx-book-theme's ``768px`` breakpoint). Up
#: to 960 px (pydata-sphinx-theme's ``lg``: the left sidebar comes back) the article has the window less its margins,
#: and a split figure's panels (317 px at most) share it in a grid: 721 px here, against 948 px at
#: :data:`WINDOW_WIDTH` (measured in Chromium). ``--tablet-width`` checks another width.
TABLET_WIDTH = 768
#: The height of the windows, CSS pixels.
WINDOW_HEIGHT = 900
BROWSER_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--allow-file-access-from-files",  # a narrow frame reads its page's measurements (FRAME)
    "--virtual-time-budget=20000",
    f"--window-size={WINDOW_WIDTH},{WINDOW_HEIGHT}",
    "--dump-dom",
)
#: Run in the page after its own scripts (MathJax included), so that ``--dump-dom`` carries the measurements out, in
#: attributes of ``body``: ``data-scrolls``, every element that scrolls sideways (the page itself as ``page``; one
#: inside a figure prefixed ``in a figure:``); ``data-image-widths``, the width each image of the article is shown
#: at; ``data-layout``, the window's width and the images shown that leave the article's column or sit beside another
#: (:func:`layout_faults`). In a frame (:data:`FRAME`) it writes them into the frame's parent instead.
SCROLL_PROBE = """<script>
window.addEventListener("load", () => setTimeout(() => {
  const found = [];
  if (document.documentElement.scrollWidth > window.innerWidth + 1) found.push("page");
  for (const el of document.querySelectorAll("article *")) {
    // code a reader opens (a folded cell) or copies whole (a code block of the prose) may scroll; outputs may not
    if (el.closest(".cell_input") || (el.closest("div[class*='highlight-']") && !el.closest(".cell_output"))) continue;
    const style = getComputedStyle(el);
    if (["auto", "scroll"].includes(style.overflowX) && el.scrollWidth > el.clientWidth + 1)
      found.push((el.closest("figure") ? "in a figure: " : "") + el.tagName.toLowerCase() + "."
                 + [...el.classList].join(".") + ": " + el.textContent.trim().replace(/\\s+/g, " ").slice(0, 60));
  }
  const out = window.parent !== window ? window.parent.document.body : document.body;
  out.setAttribute("data-scrolls", JSON.stringify(found));
  const images = [...document.querySelectorAll("article img")].map((img) => img.getBoundingClientRect());
  out.setAttribute("data-image-widths", JSON.stringify(images.map((box) => box.width)));
  const column = document.querySelector("article").getBoundingClientRect();
  // an image not shown (a split figure's key for another width) has an empty box at the window's corner
  const wide = images.flatMap((box, i) => box.width
    && (box.left < column.left - 1 || box.right > column.right + 1) ? [i] : []);
  const beside = images.flatMap((box, i) => images.some((other, j) => j !== i && box.width && other.width
    && box.top < other.bottom - 1 && other.top < box.bottom - 1) ? [i] : []);
  out.setAttribute("data-layout", JSON.stringify(
    {window: window.innerWidth, column: column.width, wide: wide, beside: beside}));
}, 5000));
</script>"""
#: A page that shows ``{page}`` in a frame ``{width}`` CSS pixels wide (a phone's, a tablet's): headless Chromium
#: keeps its window at least 500 px wide, and a frame's own width is what the page's CSS (its media queries) and
#: :data:`SCROLL_PROBE` see.
FRAME = (
    '<html><body style="margin: 0"><iframe src="{page}" '
    f'style="border: 0; width: {{width}}px; height: {WINDOW_HEIGHT}px"></iframe></body></html>'
)
#: Raw maths left in an output: an inline ``$...$`` or a LaTeX command (``\\sigma``, ``\\textsc``).
RAW_MATHS = re.compile(r"\$[^$\s][^$]*\$|\\[A-Za-z]{2,}")
#: A table cell that prints a raw value instead of saying what it means: NaN, None, inf, or 5.7e+11.
RAW_CELL = re.compile(r"(?i)^-?(?:nan|none|inf|infinity)$|\d[eE][+-]?\d+\b")
#: A cell cut short by pandas or a formatter: it ends in "..." or "…".
TRUNCATED_CELL = re.compile(r"(?:\.\.\.|…)$")
#: An object's repr printed instead of what it means: ``<Foo object at 0x7f...>`` or ``RunConfig(dataset=...)``.
OBJECT_REPR = re.compile(r"<[\w.]+ object at 0x[0-9a-fA-F]+>|\b[A-Z]\w*\((?:[a-z_]\w*)=")
#: A warning printed into an output instead of said in words: the insecure-noise log, or a warning class's name.
WARNING_TEXT = re.compile(r"\bINSECURE\b|\b[A-Z]\w*Warning\b")
#: A result that a page announces but did not compute.
NOT_RUN = re.compile(r"(?i)\bnot run\b")
#: A figure's caption, numbered within its chapter by ``uldp.paper.chapters.captions``.
FIGURE_NUMBER = re.compile(r"^Figure \d+\.")
#: The smallest legend font, in points at the size the page shows the figure, that a reader reads without zooming.
MIN_LEGEND_PT = 9.0
#: The smallest text, in points at the size a phone or a tablet shows it, of an image of several panels or a panel
#: of a split figure (tick labels, titles, labels): a panel of ``uldp.paper.chapters.panels.PANEL_WIDTH`` inches fits a
#: phone's column at its own size, so its fonts of 9 to 10 pt read as drawn; a whole figure of three panels, 9
#: inches wide, reads at about 4 pt there.
PHONE_MIN_TEXT_PT = 8.0
#: CSS pixels per inch: a figure of w inches shown w * 96 px wide is at its own size.
CSS_PX_PER_INCH = 96.0
#: The article's width, in CSS pixels, at :data:`WINDOW_WIDTH` (measured in Chromium with ``_static/book.css``):
#: the width a figure is shown at, at most, when the browser did not measure it.
ARTICLE_WIDTH = 900.0
#: The PNG text chunk ``uldp.paper.chapters.captions`` writes (``METADATA_KEY`` there).
FIGURE_METADATA = "uldp-figure"
#: A local absolute path (a checkout, a home or temporary folder).
LOCAL_PATH = re.compile(
    r"(?<![\w.:/])/(?:work|home|tmp|Users|root|mnt|private|var/folders)/[\w.+-]+"
)


def rendered_maths(dom: str) -> dict[str, int]:
    """Counts in a page's DOM after its scripts ran: Sphinx's maths elements, MathJax containers, MathJax errors.

    Example:
        >>> rendered_maths('<span class="math notranslate nohighlight"><mjx-container></mjx-container></span>')
        {'maths': 1, 'rendered': 1, 'errors': 0}
    """
    return {
        "maths": len(re.findall(r'class="math notranslate nohighlight"', dom)),
        "rendered": len(re.findall(r"<mjx-container", dom)),
        "errors": len(re.findall(r"<mjx-merror", dom)),
    }


def sideways_scrolls(dom: str) -> list[str]:
    """What :data:`SCROLL_PROBE` found scrolling sideways in a page's DOM (``["?"]`` when it did not run).

    Example:
        >>> sideways_scrolls('<body data-scrolls="[&quot;page&quot;]">')
        ['page']
    """
    found = BeautifulSoup(dom, "html.parser").body
    value = found.get("data-scrolls") if found is not None else None
    return ["? the measurement did not run"] if not isinstance(value, str) else json.loads(value)


def image_widths(dom: str) -> list[float]:
    """The widths, in CSS pixels, at which the page showed each image of its article (in document order), as
    :data:`SCROLL_PROBE` measured them; empty when it did not run.

    Example:
        >>> image_widths('<body data-image-widths="[640.5, 900]">')
        [640.5, 900.0]
    """
    found = BeautifulSoup(dom, "html.parser").body
    value = found.get("data-image-widths") if found is not None else None
    return [float(width) for width in json.loads(value)] if isinstance(value, str) else []


def layout_faults(dom: str, width: int) -> list[str]:
    """What :data:`SCROLL_PROBE` found wrong in a page shown ``width`` CSS pixels wide (:data:`PHONE_WIDTH`,
    :data:`TABLET_WIDTH`): a window of another width than asked for, and the images (numbered from 1 in the
    article's order) that leave the article's column or, up to :data:`STACKED_UP_TO`, sit beside another image
    instead of below it (wider, a split figure's panels sit side by side).

    Example:
        >>> dom = '<body data-layout=\\'{"window": 390, "column": 358, "wide": [1], "beside": []}\\'>'
        >>> layout_faults(dom, 390)
        ['image 2 is wider than the article column (358 px) at 390 px']
        >>> layout_faults(dom.replace("390", "768"), 768)  # beside another is no fault there; too wide still is
        ['image 2 is wider than the article column (358 px) at 768 px']
    """
    found = BeautifulSoup(dom, "html.parser").body
    value = found.get("data-layout") if found is not None else None
    if not isinstance(value, str):
        return ["? the layout measurement did not run"]
    layout = json.loads(value)
    if abs(layout["window"] - width) > 1:
        return [
            f"the browser's window was {layout['window']} px wide, not {width} px: not measured"
        ]
    return [
        f"image {index + 1} is wider than the article column ({layout['column']:.0f} px) at {width} px"
        for index in layout["wide"]
    ] + [
        f"image {index + 1} sits beside another image at {width} px instead of stacking"
        for index in (layout["beside"] if width <= STACKED_UP_TO else [])
    ]


def narrow_faults(dom: str, width: int) -> list[str]:
    """Every fault of a page's DOM measured in a frame ``width`` CSS pixels wide (:data:`PHONE_WIDTH`,
    :data:`TABLET_WIDTH`): the page scrolling sideways, a figure scrolling in its own box, and :func:`layout_faults`
    (a table or an output may scroll in its own box: a reader swipes it on a touch screen).

    Example:
        >>> dom = ('<body data-scrolls=\\'["div.cell_output: 8 columns", "in a figure: figure: x"]\\' '
        ...        'data-layout=\\'{"window": 390, "column": 358, "wide": [], "beside": []}\\'>')
        >>> narrow_faults(dom, 390)
        ['scrolls sideways at 390 px: in a figure: figure: x']
    """
    scrolls = [
        found
        for found in sideways_scrolls(dom)
        if found == "page" or found.startswith(("in a figure:", "figure.", "?"))
    ]
    return [f"scrolls sideways at {width} px: {found}" for found in scrolls] + layout_faults(
        dom, width
    )


def _metadata(source: str) -> tuple[dict | None, int]:
    """The metadata ``uldp.paper.chapters.captions`` writes into an embedded PNG (:data:`FIGURE_METADATA`) and the
    PNG's width in pixels; ``(None, 0)`` for another image."""
    if not source.startswith("data:image/png;base64,"):
        return None, 0
    with Image.open(io.BytesIO(base64.b64decode(source.split(",", 1)[1]))) as image:
        text, width = image.info.get(FIGURE_METADATA), image.width
    return (json.loads(text) if isinstance(text, str) else None), width


def narrow_figure_faults(
    source: str, shown_width: float, *, in_grid: bool, window: int = PHONE_WIDTH
) -> list[str]:
    """What a reader cannot read in an embedded image (``source``) shown ``shown_width`` CSS pixels wide in a
    ``window`` CSS pixels wide (:data:`PHONE_WIDTH`, :data:`TABLET_WIDTH`), when it holds several panels (its
    metadata's ``panels``) or is a panel or the key of a split figure (``in_grid``): text (its smallest,
    ``text_pt``) under :data:`PHONE_MIN_TEXT_PT`, or a legend under :data:`MIN_LEGEND_PT`, at the size shown. Other
    images are not judged here: a figure of one panel scales to the column, and a tap opens it whole.

    Example:
        >>> narrow_figure_faults("a.png", 358.0, in_grid=True)
        []
    """
    metadata, width = _metadata(source)
    if metadata is None or not shown_width or (metadata.get("panels", 0) < 2 and not in_grid):
        return []
    scale = shown_width / (CSS_PX_PER_INCH * width / metadata["dpi"])
    what = (
        f"an image of {metadata['panels']} panels"
        if metadata.get("panels", 0) > 1
        else "a panel of a split figure"
    )
    faults = []
    if metadata.get("text_pt") and metadata["text_pt"] * scale < PHONE_MIN_TEXT_PT - 0.05:
        faults.append(
            f"{what} shown {shown_width:.0f} px wide at {window} px: text of "
            f"{metadata['text_pt'] * scale:.1f} pt ({metadata['text_pt']:g} pt at {scale:.2f} scale), "
            f"under {PHONE_MIN_TEXT_PT:g} pt"
        )
    if metadata.get("legend_pt") and metadata["legend_pt"] * scale < MIN_LEGEND_PT - 0.05:
        faults.append(
            f"{what} shown {shown_width:.0f} px wide at {window} px: a legend of "
            f"{metadata['legend_pt'] * scale:.1f} pt, under {MIN_LEGEND_PT:g} pt"
        )
    return faults


def figure_faults(source: str, shown_width: float | None = None) -> list[str]:
    """What a reader cannot read in an embedded figure (``source``, an image's ``src``), judged from the metadata
    that ``uldp.paper.chapters.captions`` writes into the PNG (:data:`FIGURE_METADATA`): a legend smaller than
    :data:`MIN_LEGEND_PT` at the size shown (``shown_width`` CSS pixels; default the PNG's own width, at most
    :data:`ARTICLE_WIDTH`), or a legend inside an axes. A figure without that metadata is not judged.

    The size shown: a PNG of ``w`` pixels at ``dpi`` is a figure of ``w / dpi`` inches; shown ``shown_width`` CSS
    pixels wide (96 to the inch) its fonts are scaled by ``shown_width / (96 w / dpi)``.
    """
    metadata, width = _metadata(source)
    if metadata is None:
        return []
    shown = shown_width if shown_width else min(float(width), ARTICLE_WIDTH)
    faults = []
    if metadata.get("legend_pt"):
        scale = shown / (CSS_PX_PER_INCH * width / metadata["dpi"])
        shown_pt = metadata["legend_pt"] * scale
        if shown_pt < MIN_LEGEND_PT - 0.05:
            faults.append(
                f"a legend of {shown_pt:.1f} pt as shown ({metadata['legend_pt']:g} pt at "
                f"{scale:.2f} scale), under {MIN_LEGEND_PT:g} pt"
            )
    if metadata.get("legends_inside"):
        faults.append(f"{metadata['legends_inside']} legend(s) inside an axes")
    return faults


def bibliography_citations(bib: str) -> list[re.Pattern[str]]:
    """One pattern per entry of a BibTeX text matching it cited as plain text: the first author's surname, an
    optional "et al." or "and X", then the year ("Mironov 2017", "Abadi et al. (2016)", "Balle and Wang, 2018").

    Example:
        >>> [p.pattern for p in bibliography_citations("@a{k, author = {Mironov, Ilya}, year = {2017}}")]
        ['\\\\bMironov(?:\\\\s+et\\\\s+al\\\\.?|\\\\s+and\\\\s+[A-Z][\\\\w-]+)?,?\\\\s*[(\\\\[]?2017\\\\b']
    """
    patterns = []
    for entry in re.split(r"\n\s*@|^\s*@", bib):
        author, year = (
            re.search(r"author\s*=\s*\{([^,}]+)", entry),
            re.search(r"year\s*=\s*\{?(\d{4})", entry),
        )
        if author and year:
            surname = re.escape(author.group(1).split()[-1])
            patterns.append(
                re.compile(
                    rf"\b{surname}(?:\s+et\s+al\.?|\s+and\s+[A-Z][\w-]+)?,?\s*[(\[]?"
                    rf"{year.group(1)}\b"
                )
            )
    return patterns


def _text(node: object) -> str:
    return re.sub(r"\s+", " ", node.get_text(" ")) if hasattr(node, "get_text") else ""


def page_faults(
    page: str,
    citations: Sequence[re.Pattern[str]] = (),
    widths: Sequence[float] = (),
    narrow_widths: Mapping[int, Sequence[float]] | None = None,
) -> list[str]:
    """What a built page's HTML shows that a reader must not see (an empty list when it is clean).

    - a figure without a caption numbered in its chapter (an image of the article outside ``<figure>`` whose caption
      starts "Figure n."), or with a legend a reader cannot read (:func:`figure_faults`, at the ``widths`` the browser
      measured, :func:`image_widths`, in the article's order of images), or, at the widths measured in a narrow
      window (``narrow_widths``, by the window's width: :data:`PHONE_WIDTH`, :data:`TABLET_WIDTH`), text its reader
      cannot read (:func:`narrow_figure_faults`);
    - in an output: raw maths (:data:`RAW_MATHS`, outside the maths that MathJax renders), text written to stderr,
      an error's traceback (a chapter that failed, rendered from papermill's notebook), a table cell with a raw
      NaN, None, inf or exponent (:data:`RAW_CELL`) or cut short (:data:`TRUNCATED_CELL`), an object's repr
      (:data:`OBJECT_REPR`), "not run" (:data:`NOT_RUN`) or a warning (:data:`WARNING_TEXT`);
    - anywhere but the code: a local absolute path (:data:`LOCAL_PATH`), or a plain-text citation of a bibliography
      entry (``citations``, :func:`bibliography_citations`; a ``{cite}`` link is not plain text).

    Example:
        >>> page_faults('<article><div class="cell_output"><p>$\\\\sigma$</p><img src="a.png"></div></article>')
        ['raw maths in an output: $\\\\sigma$', 'a figure without a numbered caption: a.png']
    """
    soup = BeautifulSoup(page, "html.parser")
    article = soup.find("article") or soup
    # a file quoted as it is (uldp.paper.chapters.reference.QUOTED) speaks in its author's words, not the book's
    for node in article.select(".math, .cell_input, mjx-container, .quoted-file"):
        node.decompose()
    faults = []
    for output in article.select(".cell_output"):
        text = _text(output)
        faults += [f"raw maths in an output: {found}" for found in RAW_MATHS.findall(text)]
        faults += [f"an object's repr in an output: {found}" for found in OBJECT_REPR.findall(text)]
        faults += [f"a warning in an output: {found}" for found in WARNING_TEXT.findall(text)]
        faults += [f"'not run' in an output: {found}" for found in NOT_RUN.findall(text)]
        faults += [f"stderr in an output: {_text(node)[:80]}" for node in output.select(".stderr")]
        faults += [
            f"an error in an output: {_text(node).strip(' -')[:80]}"
            for node in output.select(".traceback")
        ]
        faults += [
            f"a raw value in a table: {_text(cell).strip()}"
            for cell in output.select("td, th")
            if RAW_CELL.search(_text(cell).strip())
        ]
        faults += [
            f"a truncated cell: {_text(cell).strip()}"
            for cell in output.select("td, th")
            if TRUNCATED_CELL.search(_text(cell).strip())
        ]
    for index, image in enumerate(article.find_all("img")):
        source = str(image.get("src", ""))
        figure = image.find_parent("figure")
        caption = figure.find("figcaption") if figure is not None else None
        if caption is not None:  # Sphinx's number across the book, which _static/book.css hides
            for number in caption.select(".caption-number"):
                number.decompose()
        if caption is None or not FIGURE_NUMBER.match(_text(caption).strip()):
            faults.append(f"a figure without a numbered caption: {source[:60]}")
        faults += [
            f"{fault}: {_text(caption).strip()[:50] if caption else source[:60]}"
            for fault in figure_faults(source, widths[index] if index < len(widths) else None)
        ]
        in_grid = figure is not None and "panel-grid" in (figure.get("class") or [])
        faults += [
            f"{fault}: {_text(caption).strip()[:50] if caption else source[:60]}"
            for window, shown in (narrow_widths or {}).items()
            if index < len(shown)
            for fault in narrow_figure_faults(source, shown[index], in_grid=in_grid, window=window)
        ]
    faults += [f"a local path: {found}" for found in LOCAL_PATH.findall(_text(article))]
    for node in article.select("pre, code, a"):
        node.decompose()
    prose = _text(article)
    faults += [
        f"a plain-text citation: {match.group(0)}"
        for pattern in citations
        for match in pattern.finditer(prose)
    ]
    return faults


def browser_dom(command: Sequence[str], timeout: float) -> tuple[str, bool]:
    """Run the headless browser ``command`` and read the DOM it dumps: ``(dom, complete)``.

    The DOM is taken as soon as it is complete (it ends with ``</html>``): the browser is not waited for after that,
    since headless Chromium can hang on its way out after printing the page (it did so, at random pages, under
    load). Whatever the browser started is ended with it (its own process group), at the latest after ``timeout``
    seconds, when ``complete`` is False unless the whole DOM came before.
    """
    deadline = time.monotonic() + timeout
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True
    )
    assert process.stdout is not None
    received = bytearray()
    try:
        with selectors.DefaultSelector() as selector:
            selector.register(process.stdout, selectors.EVENT_READ)
            while (
                not received.rstrip().endswith(b"</html>")
                and (left := deadline - time.monotonic()) > 0
            ):
                if not selector.select(left):
                    continue
                chunk = os.read(process.stdout.fileno(), 1 << 16)
                # no chunk: the browser closed its output, it exited (or crashed) before the deadline
                if not chunk:
                    break
                received += chunk
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        process.stdout.close()
    dom = received.decode("utf-8", errors="replace")
    return dom, dom.rstrip().endswith("</html>")


def check_page(
    page: Path,
    browser: str,
    citations: Sequence[re.Pattern[str]],
    timeout: float,
    narrow: Sequence[int] = (PHONE_WIDTH, TABLET_WIDTH),
) -> list[str]:
    """Every fault of one built page: what the browser measured at :data:`WINDOW_WIDTH` (maths, sideways
    scrolling) and in a frame of each width of ``narrow`` (:func:`narrow_faults`), and :func:`page_faults` (legends
    judged at the widths of :data:`WINDOW_WIDTH`; in the narrow frames, the text of images of several panels and
    of split figures' panels and keys, at the widths there: a figure of one panel scales to the column, and a tap
    opens it whole)."""
    text = page.read_text(encoding="utf-8")
    probe = page.with_name(f".probe-{page.name}")  # beside the page: its relative addresses resolve
    probe.write_text(text.replace("</body>", SCROLL_PROBE + "</body>"), encoding="utf-8")
    frames = {width: page.with_name(f".frame-{width}-{page.name}") for width in narrow}
    for width, frame in frames.items():
        frame.write_text(FRAME.format(page=probe.name, width=width), encoding="utf-8")
    doms = {}
    try:
        for width, shown in ((WINDOW_WIDTH, probe), *frames.items()):
            # a profile of its own: no state shared with other browsers
            with tempfile.TemporaryDirectory(prefix="check-pages-") as profile:
                flags = [*BROWSER_FLAGS, f"--user-data-dir={profile}"]
                doms[width] = browser_dom([browser, *flags, shown.resolve().as_uri()], timeout)
    finally:
        for written in (probe, *frames.values()):
            written.unlink()
    unfinished = [
        f"the browser gave no complete page at {width} px within {timeout:.0f} s ({len(dom)} characters): "
        "not measured"
        for width, (dom, complete) in doms.items()
        if not complete
    ]
    if unfinished:
        return unfinished
    dom = doms[WINDOW_WIDTH][0]
    counts = rendered_maths(dom)
    faults = [f"scrolls sideways at {WINDOW_WIDTH} px: {found}" for found in sideways_scrolls(dom)]
    if counts["rendered"] != counts["maths"] or counts["errors"]:
        faults.append(
            f"maths: {counts['maths']} elements, {counts['rendered']} rendered by MathJax, "
            f"{counts['errors']} MathJax errors"
        )
    for width in narrow:
        faults += narrow_faults(doms[width][0], width)
    return faults + page_faults(
        text,
        citations,
        image_widths(dom),
        {width: image_widths(doms[width][0]) for width in narrow},
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "pages",
        nargs="*",
        type=Path,
        help="pages to check, relative to --html (e.g. book/auditing.html); all when none",
    )
    parser.add_argument("--html", type=Path, default=ROOT / "_build" / "html")
    parser.add_argument(
        "--browser", default=shutil.which("chromium") or shutil.which("chromium-browser")
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=120.0,
        help="seconds the browser has for one page (default 120)",
    )
    parser.add_argument(
        "--tablet-width", type=int, default=TABLET_WIDTH, help="CSS px (default %(default)s)"
    )
    args = parser.parse_args(argv)
    narrow = (PHONE_WIDTH, args.tablet_width)
    if not STACKED_UP_TO < args.tablet_width < WINDOW_WIDTH:
        allowed = f"from {STACKED_UP_TO + 1} to {WINDOW_WIDTH - 1} px"
        parser.error(f"--tablet-width {args.tablet_width}: a tablet's window is {allowed} wide")
    if not args.browser:
        raise SystemExit(
            "no Chromium found: install it (e.g. apt-get install chromium) or pass --browser"
        )
    if args.pages:
        pages = [args.html / page for page in args.pages]
        missing = [str(page) for page in pages if not page.is_file()]
        if missing:
            raise SystemExit(f"no such pages: {', '.join(missing)}")
    else:
        pages = sorted(
            page
            for page in args.html.rglob("*.html")
            if "_static" not in page.parts
            and page.name not in ("genindex.html", "search.html")
            and not page.name.startswith((".probe-", ".frame-"))
        )
    if not pages:
        raise SystemExit(f"no pages under {args.html}: build the book first")
    citations = bibliography_citations((ROOT / "references.bib").read_text(encoding="utf-8"))
    checked, failed = 0, []
    for page in pages:
        name = page.relative_to(args.html)
        if "<article" not in page.read_text(encoding="utf-8"):
            print(f"skip   {name}: no article (a page that only redirects)")
            continue
        start = time.monotonic()
        faults = check_page(page, args.browser, citations, args.timeout, narrow)
        checked += 1
        print(
            f"{'FAILED' if faults else 'ok    '} {name}: {len(faults)} faults "
            f"({time.monotonic() - start:.0f} s)",
            flush=True,
        )
        for fault in faults:
            print(f"    {fault}")
        if faults:
            failed.append(str(name))
    print(
        f"{checked} pages checked, {len(failed)} failed{': ' if failed else ''}{', '.join(failed)}"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
