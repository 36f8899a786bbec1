"""Tests of uldp.paper.chapters.panels: a figure of several panels becomes separate images (a key, then a panel each)
that the page lays out as a grid that wraps, each panel narrow enough for a phone's column at its own size."""

from __future__ import annotations

import base64
import io
import json
import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pytest
from PIL import Image

from uldp.paper import plots
from uldp.paper.chapters import captioned
from uldp.paper.chapters.panels import (
    METADATA_KEY,
    PANEL_PAD,
    PANEL_WIDTH,
    key_image,
    panels_of,
    split_panels,
)

ROOT = Path(__file__).resolve().parent.parent
#: One colour per panel's drawing area: a panel's image must hold its own and no other.
FACES = ((1.0, 0.0, 0.0), (0.0, 0.8, 0.0), (0.0, 0.0, 1.0))
#: The column a phone gives a figure of an output, CSS px, in a 390 px window (measured in Chromium).
PHONE_COLUMN = 327


def _three_panels(*, sharey: bool = False) -> plt.Figure:
    """A figure of the book's usual shape: three panels across FIGURE_WIDTH, a title and one legend below them."""
    fig, axes = plt.subplots(1, 3, figsize=(plots.FIGURE_WIDTH, 3.4), sharey=sharey)
    for index, (ax, face) in enumerate(zip(axes, FACES, strict=True)):
        ax.set_facecolor(face)
        ax.plot([0, 1], [0, index + 1], color="white", label=f"ULDP-AVG-w, line {index}")
        ax.set_title(f"panel {index}", fontsize=9)
        ax.set_xlabel("round")
    plots.figure_legend(fig, axes)
    fig.suptitle("Privacy-utility trade-offs: heart_disease (paper profile)")
    return fig


def _pixels(png: bytes) -> np.ndarray:
    with Image.open(io.BytesIO(png)) as image:
        return np.asarray(image.convert("RGB"), dtype=float) / 255


def _holds(pixels: np.ndarray, face: tuple[float, float, float]) -> int:
    """Pixels of ``face``'s colour in an image (within a small tolerance for the antialiased edges)."""
    return int((np.abs(pixels - np.asarray(face)).max(axis=2) < 0.02).sum())


def _metadata(png: bytes) -> dict:
    with Image.open(io.BytesIO(png)) as image:
        return json.loads(image.info[METADATA_KEY])


def test_each_panel_is_an_image_of_its_own_after_a_key_of_title_and_legend() -> None:
    """The oracle is the panels' colours: the image of panel i holds a large area of panel i's face colour and none
    of the others'; the key holds none. A panel's own width fits a phone's column, so a phone shows its fonts at
    their sizes (at least 9 pt)."""
    images = split_panels(_three_panels())
    assert [image.key for image in images] == ["wide", "phone", "", "", ""]
    wide, key, *panels = images
    assert all(_holds(_pixels(image.png), face) == 0 for image in (wide, key) for face in FACES)
    for index, panel in enumerate(panels):
        pixels = _pixels(panel.png)
        counts = [_holds(pixels, face) for face in FACES]
        assert counts[index] > 0.3 * pixels.shape[0] * pixels.shape[1], counts
        assert [count for other, count in enumerate(counts) if other != index] == [0, 0], counts
        # nothing cut at the edges: the frame, ticks and labels lie inside a light border
        dark = pixels.max(axis=2) < 0.9
        assert not (dark[0].any() or dark[-1].any() or dark[:, 0].any() or dark[:, -1].any())
        assert panel.inches * 96 <= PHONE_COLUMN
        metadata = _metadata(panel.png)
        assert metadata["panels"] == 1 and metadata["text_pt"] >= 9
    # the phone's key fits the column at its own size; the wide page's, as wide as the figure, has fewer rows
    assert key.inches <= PANEL_WIDTH < wide.inches <= plots.FIGURE_WIDTH
    assert _pixels(wide.png).shape[0] < _pixels(key.png).shape[0]
    for image in (wide, key):
        assert (
            _metadata(image.png)["legend_pt"] >= 9 and _metadata(image.png)["legends_inside"] == 0
        )


def test_a_panel_cut_from_the_figure_drawn_once_is_matplotlibs_image_of_its_box(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The oracle is matplotlib's own image of a panel's box (``savefig(bbox_inches=box)``, which draws the whole
    figure for each panel): the cut has its height, its width within a pixel (their roundings differ) and the same
    pixels but where a box's corner falls mid-pixel, which savefig draws half a pixel over (here 1.5-2.1% of the
    pixels differ by more than 0.1; cut 2 or 3 pixels off, 7-9%). The panels at the figure's edges pad beyond it
    with its background."""
    from uldp.paper.chapters import panels

    drawn: list[plt.Figure] = []
    compared: list[tuple[np.ndarray, np.ndarray]] = []
    rendered, cropped = panels._rendered, panels._cropped

    def rendering(fig: plt.Figure, dpi: float) -> Image.Image:
        drawn.append(fig)
        return rendered(fig, dpi)

    def cropping(whole: Image.Image, box, dpi: float, metadata: dict) -> bytes:
        png = cropped(whole, box, dpi, metadata)
        compared.append((_pixels(png), _pixels(panels._png(drawn[-1], box, metadata))))
        return png

    monkeypatch.setattr(panels, "_rendered", rendering)
    monkeypatch.setattr(panels, "_cropped", cropping)
    split_panels(_three_panels())
    assert len(drawn) == 1 and len(compared) == 3
    for cut, saved in compared:
        assert cut.shape[0] == saved.shape[0] and abs(cut.shape[1] - saved.shape[1]) <= 1
        width = min(cut.shape[1], saved.shape[1])
        differs = np.abs(cut[:, :width] - saved[:, :width]).max(axis=2) > 0.1
        assert differs.mean() < 0.04, differs.mean()


def test_a_panel_shown_alone_shows_the_scale_a_shared_axis_hid() -> None:
    fig = _three_panels(sharey=True)
    axes = fig.axes
    assert not axes[1].yaxis.get_tick_params()["labelleft"]  # hidden beside the first panel
    split_panels(fig)
    assert all(ax.yaxis.get_tick_params()["labelleft"] for ax in axes)


def test_twins_are_one_panel_and_a_figure_of_one_panel_is_not_split() -> None:
    fig, ax = plt.subplots()
    ax.twinx()
    assert len(panels_of(fig)) == 1
    with pytest.raises(ValueError, match="1 panel"):
        split_panels(fig)
    text = captioned(fig, "One panel.").data
    assert text.count("data:image/png") == 1 and "panel-grid" not in text
    assert key_image("", None, PANEL_WIDTH) is None


def test_a_figure_of_panels_is_one_numbered_figure_whose_panels_wrap() -> None:
    """The page's figure holds the key and every panel as separate images, each at its own width, under one
    number and caption, in a figure of class panel-grid; the book's stylesheet lays that class out as a grid that
    wraps (side by side in a wide column) and, on a phone, as a column (one panel under another)."""
    text = captioned(_three_panels(), "Look at the right panel.").data
    assert ":figclass: panel-grid panel-columns-3" in text
    assert len(re.findall(r"\*\*Figure \d+\.\*\* Look at the right panel\.", text)) == 1
    images = re.findall(r"data:image/png;base64,(\S+)", text)
    widths = [int(width) for width in re.findall(r":width: (\d+)px", text)]
    assert len(images) == len(widths) == 5
    for encoded, width in zip(images, widths, strict=True):
        png = base64.b64decode(encoded)
        with Image.open(io.BytesIO(png)) as image:
            assert width == round(image.width / _metadata(png)["dpi"] * 96)
    assert re.findall(r":class: (.+) no-scaled-link", text) == [
        "panel-key panel-key-wide",
        "panel-key panel-key-phone",
        "panel",
        "panel",
        "panel",
    ]
    # three panels side by side fit the 900 px article of a wide window
    assert sum(widths[2:]) <= 900
    css = (ROOT / "_static" / "book.css").read_text(encoding="utf-8")
    wide, phone = css.split("@media (max-width: 600px)")
    assert re.search(r"figure\.panel-grid \{[^}]*display: grid;", wide)
    # at most as many columns as drawn, the next panels wrapping onto the rows below; fewer where a column would be
    # narrower than --panel-least
    assert "figure.panel-columns-3 { --panel-columns: 3; }" in wide
    assert (
        "grid-template-columns: repeat(auto-fit, minmax(max(min(100%, var(--panel-least)),\n"
        "    (100% - (var(--panel-columns) - 1) * var(--panel-gap)) / var(--panel-columns)), max-content));"
    ) in wide
    assert re.search(r"figure\.panel-grid \{[^}]*display: flex;[^}]*flex-direction: column;", phone)
    # one key at each width: the wide page's from 1200 px, where the article holds a key as wide as the figure
    # (FIGURE_WIDTH, 9 inches) at its own size, the phone's below
    assert "figure.panel-grid img.panel-key-phone { display: none; }" in wide
    narrow_window = wide.split("@media (max-width: 1199.98px) {", 1)[1].split("\n}\n", 1)[0]
    assert "figure.panel-grid img.panel-key-wide { display: none; }" in narrow_window
    assert "figure.panel-grid img.panel-key-phone { display: block; }" in narrow_window
    # 948 px: the figure's box in a 1280 px window, measured in Chromium
    assert 96 * (plots.FIGURE_WIDTH + 2 * PANEL_PAD) <= 948


def test_a_column_of_the_panel_grid_shows_a_panels_text_at_a_readable_size() -> None:
    """The grid never shrinks a column under --panel-least (book.css): there a panel as wide as it may be
    (PANEL_WIDTH) shows the smallest text the book draws in a panel (9 pt, its titles) at 8 pt or more (the least
    tools/check_pages.py allows on a phone or a tablet); and three columns of that width still fit a 1200 px
    window's figure (884 px, measured in Chromium), so a wide window keeps a figure's three columns."""
    css = (ROOT / "_static" / "book.css").read_text(encoding="utf-8")
    found = re.search(r"--panel-least: (\d+)px;", css)
    gap = re.search(r"--panel-gap: (\d+)em;", css)
    assert found is not None and gap is not None
    least = int(found.group(1))
    assert 9 * least / (96 * PANEL_WIDTH) >= 8.0
    assert 3 * least + 2 * 16 * int(gap.group(1)) <= 884


def test_a_title_wider_than_its_panel_is_wrapped_so_the_panel_fits() -> None:
    """Figure 10's right panel is titled "set-up (once) and server aggregation (per round)" at 9 pt: 3.1 inches on
    one line, which no narrower figure narrows; its panel must still fit PANEL_WIDTH (it was 3.34 inches)."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(plots.FIGURE_WIDTH, 4.0))
    labels = [
        "HeartDisease\n|U|=10",
        "HeartDisease\n|U|=100",
        "TcgaBrca\n|U|=10",
        "TcgaBrca\n|U|=100",
    ]
    for ax in (left, right):
        ax.bar(labels, [1, 2, 3, 4], label="part")
    title = "set-up (once) and server aggregation (per round)"
    right.set_title(title, fontsize=9)
    left.set_title("per silo", fontsize=9)
    plots.figure_legend(fig, [right])
    *_, first, second = split_panels(fig)
    assert max(first.inches, second.inches) <= PANEL_WIDTH
    assert right.get_title().replace("\n", " ") == title and "\n" in right.get_title()
    assert left.get_title() == "per silo"  # a title that fits stays on one line


def test_a_key_of_long_labels_fits_a_phone_at_a_readable_size() -> None:
    """A legend whose one column is wider than a phone's key at 10 pt is drawn smaller, to fit, but not under 9 pt;
    labels that fit keep 10 pt."""
    fig, ax = plt.subplots()
    for label in ("ULDP-AVG-w, uniform-with-replacement", "ULDP-AVG, uniform-with-replacement"):
        ax.plot([0, 1], label=label)
    long = key_image("", fig.legend(), PANEL_WIDTH)
    fig, ax = plt.subplots()
    ax.plot([0, 1], label="ULDP-AVG-w")
    short = key_image("", fig.legend(), PANEL_WIDTH)
    assert long is not None and short is not None
    assert long.inches <= PANEL_WIDTH and 9 <= _metadata(long.png)["legend_pt"] < 10
    assert _metadata(short.png)["legend_pt"] == 10
