"""Figures of the book's pages: a numbered, captioned figure embedded in the page."""

from __future__ import annotations

import base64
import hashlib
import io
from typing import TYPE_CHECKING

import matplotlib.pyplot as plt
from IPython.display import Markdown, display

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def captioned(fig: Figure, caption: str) -> Markdown:
    """``fig`` as a numbered figure of the page with ``caption`` below it (MyST: maths and links render), closed.

    The image is embedded as a PNG data address, so the page needs no file beside it. The figure's label is
    ``fig-`` and a hash of image and caption: the same in every build of the same figure, and distinct between
    figures, as Sphinx needs of labels.

    Example:
        >>> import matplotlib.pyplot as plt
        >>> captioned(plt.figure(figsize=(1, 1)), "Look at $\\epsilon$.").data.startswith("````{figure} data:image/png")
        True
    """
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", bbox_inches="tight")
    plt.close(fig)
    image = base64.b64encode(buffer.getvalue()).decode("ascii")
    name = "fig-" + hashlib.sha256(f"{image}{caption}".encode()).hexdigest()[:12]
    return Markdown(
        f"````{{figure}} data:image/png;base64,{image}\n:name: {name}\n\n{caption}\n````"
    )


def show_captioned(fig: Figure, caption: str) -> None:
    """Display ``fig`` as a numbered figure with ``caption`` (:func:`captioned`)."""
    display(captioned(fig, caption))
