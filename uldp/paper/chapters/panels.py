"""A figure of several panels as separate images, so that a page lays them out for its width: side by side in a wide
article, in fewer columns on a tablet, one under another on a phone (``_static/book.css``, ``figure.panel-grid``),
each at a size whose text reads without zooming.

:func:`split_panels` cuts a drawn figure into its panels (an axes with its twins, its labels and title), after
laying the figure out again at most :data:`PANEL_WIDTH` inches a column, and draws the figure's title and shared
legend once, as a key of their own (:func:`key_image`). Each image carries what ``tools/check_pages.py`` needs to
judge it at the size a page shows it (:func:`panel_metadata`).
"""

from __future__ import annotations

import io
import json
import textwrap
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import matplotlib.pyplot as plt
from matplotlib.layout_engine import ConstrainedLayoutEngine
from matplotlib.text import Text
from matplotlib.transforms import Bbox
from PIL import Image, PngImagePlugin

if TYPE_CHECKING:
    from collections.abc import Sequence

    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

#: The PNG text chunk that carries an image's metadata (read by ``tools/check_pages.py``).
METADATA_KEY = "uldp-figure"
#: The least resolution an image is saved at, pixels per inch: sharp, and shown at least at its own size in the
#: article (96 px an inch) when it is narrower than the article.
SAVE_DPI = 150.0
#: The widest image of a panel or key, in inches (:data:`PANEL_PAD` either side included): at 96 CSS px an inch,
#: 317 px, inside the column a phone gives a figure of an output (327 px in a 390 px window, measured in Chromium),
#: so that a phone shows a panel at its own size and its fonts at their point sizes.
PANEL_WIDTH = 3.3
#: The key's font sizes, points: the figure's title and its legend (``uldp.paper.plots.LEGEND_PT``).
KEY_TITLE_PT = 11.0
KEY_LEGEND_PT = 10.0
#: The smallest the key's legend is drawn, points, when one column of it at :data:`KEY_LEGEND_PT` is wider than the
#: key: the least a page may show (``tools/check_pages.py``'s ``MIN_LEGEND_PT``).
KEY_LEAST_PT = 9.0
#: How much wider than :data:`PANEL_WIDTH` a figure is, inches, before it may get a key of its own width for a wide
#: page beside the narrow one of a phone (when that key is shorter: its legend in fewer rows).
WIDE_KEY_MARGIN = 0.5
#: The space left around a panel or a key, inches.
PANEL_PAD = 0.06


@dataclass(frozen=True)
class PanelImage:
    """One image of a split figure.

    Attributes:
        png: The PNG, :data:`METADATA_KEY` in its text chunk.
        inches: Its width in inches (the page shows it ``96 * inches`` CSS px wide, less where the column is
            narrower).
        key: Where it is the figure's key (title and shared legend) rather than a panel (``""``): ``"both"``, the
            key at every width; ``"wide"``, the key of a wide page, as wide as the figure; ``"phone"``, the key of a
            phone, a tablet or a narrow window, at most :data:`PANEL_WIDTH` inches (``_static/book.css`` shows one of
            the two: the wide page's from 1200 px).
    """

    png: bytes
    inches: float
    key: str = ""


def _texts(artists: Sequence[Any]) -> list[Text]:
    """The visible, non-empty texts drawn by ``artists`` (an axes: its tick labels, labels, title, legend, texts)."""
    return [
        text
        for artist in artists
        for text in artist.findobj(Text)
        if text.get_visible() and text.get_text().strip()
    ]


def panel_metadata(
    fig: Figure,
    *,
    axes: Sequence[Axes],
    legends: Sequence[Any],
    panels: int,
    drawn: Sequence[Any] | None = None,
) -> dict[str, Any]:
    """What a reader's view of an image of ``fig`` holding ``axes`` and ``legends`` depends on: ``dpi`` (pixels per
    inch of the PNG: the figure's own, at least :data:`SAVE_DPI`), ``legend_pt`` (the smallest font size, in points,
    of any legend's text; ``None`` without one), ``legends_inside`` (legends whose box overlaps an axes' drawing
    area, hiding data or crowding it), ``panels`` (how many panels the image holds) and ``text_pt`` (the smallest
    font size of any text that ``drawn``, default ``axes`` and ``legends``, draws: tick labels, labels, titles,
    legends; ``None`` without text).

    The figure must be drawn (``fig.canvas.draw()``), so that the legends' boxes are where the PNG has them.
    """
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]  # Agg and inline canvases have one
    sizes = [text.get_fontsize() for legend in legends for text in legend.get_texts()]
    axes_boxes = [ax.get_window_extent(renderer) for ax in axes if ax.get_visible()]
    inside = sum(
        any(legend.get_window_extent(renderer).overlaps(box) for box in axes_boxes)
        for legend in legends
    )
    text_sizes = [
        text.get_fontsize() for text in _texts([*axes, *legends] if drawn is None else drawn)
    ]
    return {
        "dpi": max(float(fig.dpi), SAVE_DPI),
        "legend_pt": float(min(sizes)) if sizes else None,
        "legends_inside": int(inside),
        "panels": panels,
        "text_pt": float(min(text_sizes)) if text_sizes else None,
    }


def panels_of(fig: Figure) -> list[list[Axes]]:
    """The panels of ``fig``: its visible axes, an axes and its twins (the same place in the figure) as one panel,
    in the order they were added."""
    groups: dict[tuple[float, ...], list[Axes]] = {}
    for ax in fig.axes:
        if ax.get_visible():
            place = tuple(round(value, 4) for value in ax.get_position().bounds)
            groups.setdefault(place, []).append(ax)
    return list(groups.values())


def _on_a_grid(axes: Sequence[Axes]) -> bool:
    """Whether every one of ``axes`` is laid out by a grid (a subplot), none placed by hand: what
    ``tight_layout`` can lay out again."""
    return all(ax.get_subplotspec() is not None for ax in axes)


#: The most columns a page lays a split figure's panels out in (``_static/book.css``, ``panel-columns-N``).
MOST_COLUMNS = 4


def grid_columns(fig: Figure) -> int:
    """How many columns a wide page lays ``fig``'s panels out in: the columns of the grid it was drawn on (the
    widest gridspec of its axes), or its number of panels when one was placed by hand; at most
    :data:`MOST_COLUMNS`."""
    panels = panels_of(fig)
    axes = [ax for panel in panels for ax in panel]
    if not _on_a_grid(axes):
        return min(len(panels), MOST_COLUMNS)
    specs = [spec for ax in axes if (spec := ax.get_subplotspec()) is not None]
    widest = max(spec.get_topmost_subplotspec().get_gridspec().ncols for spec in specs)
    return max(1, min(widest, MOST_COLUMNS))


def _show_own_scale(panel: Sequence[Axes]) -> None:
    """A panel shown alone shows its own scale: the tick labels that a shared axis hid beside another panel (the
    left ones of all but the first column, the bottom ones of all but the last row) are drawn again."""
    ax = panel[0]
    if not ax.axison:
        return
    shown = {**ax.yaxis.get_tick_params(), **ax.xaxis.get_tick_params()}
    if not shown.get("labelleft") and not shown.get("labelright"):
        ax.tick_params(axis="y", labelleft=True)
    if not shown.get("labelbottom") and not shown.get("labeltop"):
        ax.tick_params(axis="x", labelbottom=True)


def key_image(
    title: str, legend: Any | None, width: float, where: str = "both"
) -> PanelImage | None:
    """The figure's key (for ``where``, :attr:`PanelImage.key`): its ``title`` above its shared ``legend``'s
    entries, both redrawn for an image of at most ``width`` inches, :data:`PANEL_PAD` either side (the title
    wrapped at :data:`KEY_TITLE_PT`, the legend in the most columns that fit at :data:`KEY_LEGEND_PT`, measured, or
    in one column at a smaller size down to :data:`KEY_LEAST_PT`); ``None`` when there is neither."""
    handles = list(legend.legend_handles) if legend is not None else []
    labels = [text.get_text() for text in legend.get_texts()] if legend is not None else []
    if not title and not handles:
        return None
    height = (
        0.3 * len(title) / 20 + 0.3 * len(handles) + 0.5
    )  # room for any wrapping; the PNG is cut to what is drawn
    key = plt.figure(figsize=(width, height), dpi=SAVE_DPI)
    renderer = key.canvas.get_renderer()  # type: ignore[attr-defined]  # Agg and inline canvases have one
    limit = (width - 2 * PANEL_PAD) * key.dpi
    below = 0.1  # inches from the top to the legend's top
    if title:
        heading = key.text(0.5, 1 - 0.1 / height, "", ha="center", va="top", fontsize=KEY_TITLE_PT)
        # about 0.5 em a character to start with, fewer until the lines fit
        for characters in range(max(12, int(width * 72 / (0.5 * KEY_TITLE_PT))), 11, -2):
            heading.set_text("\n".join(textwrap.wrap(title, characters)))
            if heading.get_window_extent(renderer).width <= limit:
                break
        below += heading.get_window_extent(renderer).height / key.dpi + 0.08
    legends: list[Any] = []
    # the most columns that fit; in one column too wide (a long label), a smaller font, down to KEY_LEAST_PT
    sizes = [(columns, KEY_LEGEND_PT) for columns in range(len(handles), 0, -1)]
    sizes += [
        (1, KEY_LEGEND_PT - step / 2)
        for step in range(1, int(2 * (KEY_LEGEND_PT - KEY_LEAST_PT)) + 1)
    ]
    for columns, size in sizes:
        for drawn in legends:
            drawn.remove()
        legends = [
            key.legend(
                handles,
                labels,
                loc="upper center",
                ncol=columns,
                fontsize=size,
                frameon=False,
                bbox_to_anchor=(0.5, 1 - below / height),
            )
        ]
        if legends[0].get_window_extent(renderer).width <= limit:
            break
    key.canvas.draw()
    metadata = panel_metadata(key, axes=[], legends=legends, panels=0, drawn=[key])
    png = _png(key, "tight", metadata)
    plt.close(key)
    return PanelImage(png, _inches(png, metadata), key=where)


def _png(fig: Figure, box: Any, metadata: dict[str, Any]) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(
        buffer,
        format="png",
        bbox_inches=box,
        pad_inches=PANEL_PAD,
        dpi=metadata["dpi"],
        metadata={METADATA_KEY: json.dumps(metadata)},
    )
    return buffer.getvalue()


def _height(png: bytes) -> int:
    return int.from_bytes(png[20:24], "big")  # the IHDR chunk's height, after its width


def _inches(png: bytes, metadata: dict[str, Any]) -> float:
    width = int.from_bytes(
        png[16:20], "big"
    )  # the IHDR chunk's width, the first after the signature
    return width / metadata["dpi"]


def _box(fig: Figure, panel: Sequence[Axes]) -> Bbox:
    """Where ``panel`` is drawn, labels and title included, in inches of ``fig``."""
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]  # Agg and inline canvases have one
    boxes = [box for ax in panel if (box := ax.get_tightbbox(renderer)) is not None]
    return Bbox.union(boxes).transformed(fig.dpi_scale_trans.inverted())


def _wrap_titles(fig: Figure, panel: Sequence[Axes]) -> bool:
    """Wrap the title (``set_title``'s, centred: the book draws no other) of each axes of ``panel`` wider than the
    axes onto lines as wide at most (a narrower figure narrows an axes, not its title, which would keep the panel
    wider than :data:`PANEL_WIDTH`); whether one was wrapped."""
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]  # Agg and inline canvases have one
    wrapped = False
    for ax in panel:
        room, text = ax.get_window_extent(renderer).width, ax.title.get_text()
        for characters in range(len(text) - 1, 11, -1):
            if not ax.title.get_visible() or ax.title.get_window_extent(renderer).width <= room:
                break
            ax.title.set_text("\n".join(textwrap.wrap(text, characters)))
            wrapped = True
    return wrapped


def _narrow(fig: Figure, panels: Sequence[Sequence[Axes]]) -> None:
    """Lay ``fig`` out again (``tight_layout``, unless it lays itself out) as narrow as needed for its widest panel,
    padded, to be at most :data:`PANEL_WIDTH` inches, its height kept: at most four tries, each wrapping the titles
    of the panels still too wide (:func:`_wrap_titles`) or, when none was wrapped, scaling the width by what the
    widest panel is over."""
    limit = PANEL_WIDTH - 2 * PANEL_PAD
    for _ in range(4):
        if not isinstance(fig.get_layout_engine(), ConstrainedLayoutEngine):
            fig.tight_layout()
        fig.canvas.draw()
        widths = [_box(fig, panel).width for panel in panels]
        if max(widths) <= limit:
            return
        wrapped = [
            _wrap_titles(fig, panel)
            for panel, width in zip(panels, widths, strict=True)
            if width > limit
        ]
        if any(wrapped):
            continue
        width, height = fig.get_size_inches()
        fig.set_size_inches(width * limit / max(widths), height)


def split_panels(fig: Figure) -> list[PanelImage]:
    """``fig`` as separate images: its key (title and shared legend, :func:`key_image`) first, when it has either
    (two where a key as wide as the figure is shorter than one as wide as a panel: the first for a wide page, the
    second for a phone), then one image per panel (:func:`panels_of`), in order; closes ``fig``.

    A figure of plots laid out on a grid is first narrowed until its widest panel is at most :data:`PANEL_WIDTH`
    inches (:func:`_narrow`); a drawing (an axes with its axis off, its texts placed in data coordinates, which a
    narrower panel would crowd) keeps the size it was drawn at. The title and figure legend are set aside for the
    key, and each panel shows its own scale (:func:`_show_own_scale`): on a phone every panel then fits the column
    at its own size.

    Raises:
        ValueError: ``fig`` has fewer than two panels (show it as one image).
    """
    panels = panels_of(fig)
    if len(panels) < 2:
        raise ValueError(
            f"a figure of {len(panels)} panel(s) is shown whole, not split; need 2 or more"
        )
    title = fig.get_suptitle()
    fig.suptitle("")  # the key shows it
    legend = fig.legends[0] if fig.legends else None
    for shared in fig.legends:
        shared.set_visible(False)
    for panel in panels:
        _show_own_scale(panel)
    if all(ax.axison for panel in panels for ax in panel) and _on_a_grid(
        [ax for panel in panels for ax in panel]
    ):
        _narrow(fig, panels)
    fig.canvas.draw()
    images = []
    width = fig.get_figwidth()
    narrow = key_image(title, legend, min(PANEL_WIDTH, width))
    wide = (
        key_image(title, legend, width, "wide") if width > PANEL_WIDTH + WIDE_KEY_MARGIN else None
    )
    if narrow is not None and wide is not None and _height(wide.png) < _height(narrow.png):
        # fewer rows across a wide page: that key there, the narrow one on a phone
        images += [wide, PanelImage(narrow.png, narrow.inches, key="phone")]
    elif narrow is not None:
        images.append(narrow)
    dpi = max(float(fig.dpi), SAVE_DPI)
    whole = _rendered(fig, dpi)
    for panel in panels:
        legends = [found for ax in panel if (found := ax.get_legend()) is not None]
        metadata = panel_metadata(fig, axes=panel, legends=legends, panels=1)
        box = _box(fig, panel).padded(PANEL_PAD)  # savefig's pad_inches pads only a "tight" box
        png = _cropped(whole, box, dpi, metadata)
        images.append(PanelImage(png, _inches(png, metadata)))
    plt.close(fig)
    return images


def _rendered(fig: Figure, dpi: float) -> Image.Image:
    """``fig`` drawn once, whole, at ``dpi``: every panel is cut from it (:func:`_cropped`), where saving each
    panel's box drew the whole figure again (a third of an experiment chapter's run, cProfile of ``exp_tcga_brca``)."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi)
    return Image.open(buffer).convert("RGBA")


def _cropped(whole: Image.Image, box: Bbox, dpi: float, metadata: dict[str, Any]) -> bytes:
    """The PNG of ``box`` (inches from the figure's lower left corner) cut from the figure drawn ``whole`` at
    ``dpi``, with ``metadata`` in its :data:`METADATA_KEY` text chunk; what lies beyond the figure (a panel's
    padding at its edge) takes the colour of the figure's corner, its background."""
    # as wide and high as savefig makes a box (its renderer truncates the box's size in pixels)
    left, bottom = round(box.x0 * dpi), whole.height - round(box.y0 * dpi)
    right, top = left + int(box.width * dpi), bottom - int(box.height * dpi)
    image = Image.new("RGBA", (right - left, bottom - top), whole.getpixel((0, 0)))
    inside = (max(left, 0), max(top, 0), min(right, whole.width), min(bottom, whole.height))
    image.paste(whole.crop(inside), (inside[0] - left, inside[1] - top))
    info = PngImagePlugin.PngInfo()
    info.add_text(METADATA_KEY, json.dumps(metadata))
    buffer = io.BytesIO()
    image.save(buffer, format="png", pnginfo=info)
    return buffer.getvalue()
