"""Figures of the book's pages: a figure numbered within its chapter, captioned and embedded in the page.

Each chapter runs in a kernel of its own, so the count of :func:`captioned` restarts at 1 on every page: "Figure 3"
is the third figure of its chapter (Sphinx's own number, across the book, is hidden by ``_static/book.css``). The
PNG carries, in a text chunk named :data:`METADATA_KEY`, what ``tools/check_pages.py`` needs to judge the figure at
the size a reader sees it: its resolution, the smallest legend font in points and how many legends sit inside an
axes (:func:`figure_metadata`).
"""

from __future__ import annotations

import base64
import hashlib
import io
import itertools
import json
from typing import TYPE_CHECKING, Any

import matplotlib.pyplot as plt
from IPython.display import Markdown, display

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: The PNG text chunk that carries :func:`figure_metadata` (read by ``tools/check_pages.py``).
METADATA_KEY = "uldp-figure"
#: The least resolution a figure is saved at, pixels per inch: sharp, and shown at least at its own size in the
#: article (96 px an inch) when it is narrower than the article.
SAVE_DPI = 150.0
#: The figures of this kernel (one chapter) so far: the next one is ``next(_NUMBERS)``.
_NUMBERS = itertools.count(1)


def figure_metadata(fig: Figure) -> dict[str, Any]:
    """What a reader's view of ``fig`` depends on: ``dpi`` (pixels per inch of the saved PNG: the figure's own, at
    least :data:`SAVE_DPI`), ``legend_pt`` (the
    smallest font size, in points, of any legend's text; ``None`` without a legend) and ``legends_inside`` (legends
    whose box overlaps an axes' drawing area, hiding data or crowding it).

    Example:
        >>> import matplotlib.pyplot as plt
        >>> fig, ax = plt.subplots(dpi=100)
        >>> _ = ax.plot([0, 1], label="a"); _ = ax.legend(fontsize=7)
        >>> figure_metadata(fig)
        {'dpi': 150.0, 'legend_pt': 7.0, 'legends_inside': 1}
    """
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]  # Agg and inline canvases have one
    legends = [
        *fig.legends,
        *(legend for ax in fig.axes if (legend := ax.get_legend()) is not None),
    ]
    sizes = [text.get_fontsize() for legend in legends for text in legend.get_texts()]
    axes_boxes = [ax.get_window_extent(renderer) for ax in fig.axes if ax.get_visible()]
    inside = sum(
        any(legend.get_window_extent(renderer).overlaps(box) for box in axes_boxes)
        for legend in legends
    )
    return {
        "dpi": max(float(fig.dpi), SAVE_DPI),
        "legend_pt": float(min(sizes)) if sizes else None,
        "legends_inside": int(inside),
    }


def captioned(fig: Figure, caption: str) -> Markdown:
    """``fig`` as the chapter's next numbered figure ("**Figure n.**", counted per kernel) with ``caption`` below it
    (MyST: maths and links render), closed.

    The image is embedded as a PNG data address, so the page needs no file beside it, with
    :func:`figure_metadata` in its text chunk :data:`METADATA_KEY`. The figure's label is ``fig-`` and a hash of
    image and caption: the same in every build of the same figure, and distinct between figures, as Sphinx needs of
    labels.

    Example:
        >>> import matplotlib.pyplot as plt
        >>> captioned(plt.figure(figsize=(1, 1)), "Look at $\\\\epsilon$.").data.startswith("````{figure} data:")
        True
    """
    fig.canvas.draw()  # lays the figure out, so that the legends' boxes are where the PNG has them
    metadata = figure_metadata(fig)
    buffer = io.BytesIO()
    fig.savefig(
        buffer,
        format="png",
        bbox_inches="tight",
        dpi=metadata["dpi"],
        metadata={METADATA_KEY: json.dumps(metadata)},
    )
    plt.close(fig)
    image = base64.b64encode(buffer.getvalue()).decode("ascii")
    name = "fig-" + hashlib.sha256(f"{image}{caption}".encode()).hexdigest()[:12]
    return Markdown(
        f"````{{figure}} data:image/png;base64,{image}\n:name: {name}\n\n"
        f"**Figure {next(_NUMBERS)}.** {caption}\n````"
    )


def show_captioned(fig: Figure, caption: str) -> None:
    """Display ``fig`` as the chapter's next numbered figure with ``caption`` (:func:`captioned`)."""
    display(captioned(fig, caption))
