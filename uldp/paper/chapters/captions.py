"""Figures of the book's pages: a figure numbered within its chapter, captioned and embedded in the page.

Each chapter runs in a kernel of its own, so the count of :func:`captioned` restarts at 1 on every page: "Figure 3"
is the third figure of its chapter (Sphinx's own number, across the book, is hidden by ``_static/book.css``). A
figure of several panels is embedded as separate images (:func:`uldp.paper.chapters.panels.split_panels`: its key,
then a panel each) in one numbered figure of class ``panel-grid``, which the page lays out side by side or, on a
phone, one under another. Each PNG carries, in a text chunk named :data:`METADATA_KEY`, what ``tools/check_pages.py``
needs to judge it at the size a reader sees it (:func:`figure_metadata`,
:func:`~uldp.paper.chapters.panels.panel_metadata`).
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

from uldp.paper.chapters.panels import (
    METADATA_KEY,
    SAVE_DPI,
    PanelImage,
    grid_columns,
    panel_metadata,
    panels_of,
    split_panels,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["METADATA_KEY", "SAVE_DPI", "captioned", "figure_metadata", "show_captioned"]

#: The figures of this kernel (one chapter) so far: the next one is ``next(_NUMBERS)``.
_NUMBERS = itertools.count(1)
#: CSS pixels per inch: an image of w inches is shown ``w * 96`` px wide where the column allows.
CSS_PX_PER_INCH = 96


def figure_metadata(fig: Figure) -> dict[str, Any]:
    """What a reader's view of the whole of ``fig`` depends on (:func:`~uldp.paper.chapters.panels.panel_metadata`
    of every axes and legend): ``dpi``, ``legend_pt``, ``legends_inside``, ``panels`` and ``text_pt``.

    Example:
        >>> import matplotlib.pyplot as plt
        >>> fig, ax = plt.subplots(dpi=100)
        >>> _ = ax.plot([0, 1], label="a"); _ = ax.legend(fontsize=7)
        >>> fig.canvas.draw(); metadata = figure_metadata(fig)
        >>> metadata["legend_pt"], metadata["legends_inside"], metadata["panels"]
        (7.0, 1, 1)
    """
    legends = [
        *fig.legends,
        *(legend for ax in fig.axes if (legend := ax.get_legend()) is not None),
    ]
    return panel_metadata(
        fig, axes=fig.axes, legends=legends, panels=len(panels_of(fig)), drawn=[fig]
    )


def _whole(fig: Figure) -> bytes:
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
    return buffer.getvalue()


def _image_options(image: PanelImage, alt: str) -> str:
    """The MyST options of one image of a split figure: its classes (``panel``, or ``panel-key`` and, for a key of
    one width, ``panel-key-wide`` or ``panel-key-phone``; and ``no-scaled-link``: a click opens the zoom,
    ``_static/zoom.js``, not the image's address), its own width and a text for readers who cannot see it."""
    role = (
        "panel"
        if not image.key
        else "panel-key"
        if image.key == "both"
        else f"panel-key panel-key-{image.key}"
    )
    return (
        f":class: {role} no-scaled-link\n:width: {round(image.inches * CSS_PX_PER_INCH)}px\n"
        f":alt: {alt}\n"
    )


def captioned(fig: Figure, caption: str) -> Markdown:
    """``fig`` as the chapter's next numbered figure ("**Figure n.**", counted per kernel) with ``caption`` below it
    (MyST: maths and links render), closed.

    A figure of one panel is one image. A figure of several (:func:`~uldp.paper.chapters.panels.panels_of`) is
    split (:func:`~uldp.paper.chapters.panels.split_panels`): the figure's image is its key (or first panel) and the
    other images follow the caption, in the figure's legend, each at its own width; the figure's classes
    ``panel-grid`` and ``panel-columns-N`` (:func:`~uldp.paper.chapters.panels.grid_columns`) have
    ``_static/book.css`` lay them out in the figure's columns on a wide page and one under another on a phone, the
    caption last.

    Images are embedded as PNG data addresses, so the page needs no file beside it. The figure's label is ``fig-``
    and a hash of images and caption: the same in every build of the same figure, and distinct between figures, as
    Sphinx needs of labels.

    Example:
        >>> import matplotlib.pyplot as plt
        >>> captioned(plt.figure(figsize=(1, 1)), "Look at $\\\\epsilon$.").data.startswith("````{figure} data:")
        True
        >>> fig, _ = plt.subplots(1, 2)
        >>> text = captioned(fig, "Two panels.").data
        >>> ":figclass: panel-grid panel-columns-2" in text, text.count("```{image} data:image/png")
        (True, 1)
    """
    number = next(_NUMBERS)
    if len(panels_of(fig)) < 2:
        images = [base64.b64encode(_whole(fig)).decode("ascii")]
        options, rest = "", ""
    else:
        columns = grid_columns(fig)
        split = split_panels(fig)
        images = [base64.b64encode(image.png).decode("ascii") for image in split]
        keys = sum(bool(image.key) for image in split)
        alts = [
            f"Figure {number}, its title and legend"
            if image.key
            else f"Figure {number}, panel {index - keys + 1} of {len(split) - keys}"
            for index, image in enumerate(split)
        ]
        options = f":figclass: panel-grid panel-columns-{columns}\n" + _image_options(
            split[0], alts[0]
        )
        rest = "".join(
            f"\n```{{image}} data:image/png;base64,{encoded}\n{_image_options(image, alt)}```\n"
            for encoded, image, alt in zip(images[1:], split[1:], alts[1:], strict=True)
        )
    name = "fig-" + hashlib.sha256(f"{''.join(images)}{caption}".encode()).hexdigest()[:12]
    return Markdown(
        f"````{{figure}} data:image/png;base64,{images[0]}\n:name: {name}\n{options}\n"
        f"**Figure {number}.** {caption}\n{rest}````"
    )


def show_captioned(fig: Figure, caption: str) -> None:
    """Display ``fig`` as the chapter's next numbered figure with ``caption`` (:func:`captioned`)."""
    display(captioned(fig, caption))
