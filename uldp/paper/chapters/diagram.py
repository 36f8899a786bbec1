"""The federation in one picture, drawn once for the chapters that need it: users with records in several silos, the
server, and the messages of Protocol 1 (the private weighting protocol, the paper's Section 4.2) in their order;
and the symbols the book uses, as a glossary.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import matplotlib.pyplot as plt
from IPython.display import Markdown
from matplotlib.patches import FancyBboxPatch

from uldp.paper import plots

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

#: Which silos each drawn user has records in: user 1 in silos 1 and 2, user 2 in all three, and so on.
USER_SILOS: dict[str, tuple[int, ...]] = {
    "user 1": (0, 1),
    "user 2": (0, 1, 2),
    "user 3": (1,),
    "user 4": (1, 2),
}
#: Protocol 1's messages in order, ``(step of the paper's Protocol 1, from, to, what travels)``; "from" and "to" are
#: ``"silos"`` or ``"server"``, ``"server"`` to itself for a step the server computes alone.
PROTOCOL_MESSAGES: tuple[tuple[str, str, str, str], ...] = (
    ("1(a)", "server", "silos", "Paillier public key $PK$"),
    ("1(a)", "silos", "server", "each silo's DH public key $pk_s$"),
    ("1(b)", "server", "silos", "all $pk_s$: pairwise keys $sk_{s,s'}$"),
    ("1(c)", "silos", "silos", "seed $R$ from silo 0, sealed, via the server"),
    ("1(e)", "silos", "server", "blinded, masked counts $r_u n_{su}$ + masks"),
    ("1(f)", "server", "server", "sum $r_u N_u$, its inverse mod $n$"),
    ("2(a)", "server", "silos", "$Enc(1/(r_u N_u))$ per user; 0 if not sampled"),
    ("2(b-c)", "silos", "server", "masked $Enc(\\sum_u w_{su}\\Delta_{su} + z_s)$"),
    ("2(c)", "server", "server", "decrypts the sum over silos"),
)
#: The symbols of the book: ``(symbol in MyST maths, what it is, where it comes from)``.
GLOSSARY: tuple[tuple[str, str, str], ...] = (
    ("$U$, $\\lvert U\\rvert$", "the users and their number", "the allocation (Section 5.1)"),
    ("$S$, $\\lvert S\\rvert$", "the silos and their number", "the dataset or the allocation"),
    ("$n_{su}$", "records of user $u$ in silo $s$", "the allocation"),
    ("$N_u = \\sum_s n_{su}$", "all records of user $u$, over every silo", "Eq. (3)"),
    ("$w_{su} = n_{su} / N_u$", "ULDP-AVG-w's weight of user $u$'s update at silo $s$", "Eq. (3)"),
    ("$C$", "the clipping bound of a user's update (a silo's, for ULDP-NAIVE)", "Algorithms 2-3"),
    (
        "$\\sigma$",
        "the noise multiplier: noise of standard deviation $\\sigma C$",
        "Algorithms 2-3",
    ),
    ("$q$", "the share of users sampled each round (user-level sub-sampling)", "Algorithm 4"),
    ("$k$", "ULDP-GROUP-$k$'s records per user, the group size of its guarantee", "Section 3.1"),
    ("$T$", "the training rounds", "Algorithms 2-3"),
    ("$(\\epsilon, \\delta)$", "the user-level privacy guarantee of a run", "Definition 1"),
)


def _box(ax: Axes, x: float, y: float, width: float, height: float, text: str) -> None:
    ax.add_patch(
        FancyBboxPatch(
            (x - width / 2, y - height / 2),
            width,
            height,
            boxstyle="round,pad=0.02",
            facecolor="#EEEEEE",
            edgecolor="#333333",
        )
    )
    ax.text(x, y, text, ha="center", va="center", fontsize=10)


def protocol_diagram() -> Figure:
    """Users, silos and the server (left: who holds whose records), and Protocol 1's messages between the silos and
    the server in their order (right: set-up once, then each round), from :data:`PROTOCOL_MESSAGES`.

    Returns:
        A figure of two panels with no axes drawn, each at most
        :data:`~uldp.paper.chapters.panels.PANEL_WIDTH` inches wide with its texts, so that a phone shows each
        at its own size (the book shows them as separate images, :mod:`uldp.paper.chapters.panels`).
    """
    fig, (left, right) = plt.subplots(
        1,
        2,
        figsize=(6.4, 5.6),
        dpi=plots.FIGURE_DPI,
        gridspec_kw={"width_ratios": [1, 1.25]},
    )
    for ax in (left, right):
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.axis("off")
    silo_y = [0.8, 0.5, 0.2]
    user_y = [0.86, 0.62, 0.38, 0.14]
    for index, (user, silos) in enumerate(USER_SILOS.items()):
        colour = plots.PALETTE[index * 2]
        left.plot(0.1, user_y[index], "o", color=colour, markersize=11)
        left.text(0.1, user_y[index] - 0.065, user, ha="center", fontsize=9)
        for silo in silos:
            left.plot([0.13, 0.49], [user_y[index], silo_y[silo]], color=colour, lw=1.4, alpha=0.8)
    for silo, y in enumerate(silo_y):
        _box(left, 0.72, y, 0.46, 0.13, f"silo {silo}\n$n_{{su}}$ records of $u$")
    left.set_title("users' records in several silos", fontsize=10)

    lifelines = {"silos": 0.18, "server": 0.82}
    _box(right, lifelines["silos"], 0.93, 0.3, 0.08, "silos $s \\in S$")
    _box(right, lifelines["server"], 0.93, 0.3, 0.08, "server")
    top, bottom = 0.86, 0.02
    for x in lifelines.values():
        right.plot([x, x], [bottom, top], color="#888888", lw=1, ls=":")
    step = (top - bottom) / (len(PROTOCOL_MESSAGES) + 1)
    for index, (label, source, target, what) in enumerate(PROTOCOL_MESSAGES):
        y = top - step * (index + 0.7)
        if index and label.startswith("2") and not PROTOCOL_MESSAGES[index - 1][0].startswith("2"):
            right.axhline(y + step * 0.55, xmin=0.02, xmax=0.98, color="#333333", lw=0.8, ls="--")
            right.text(0.02, y + step * 0.55 + 0.01, "each round:", fontsize=9, style="italic")
        start, end = lifelines[source], lifelines[target]
        if (
            start == end
        ):  # a step computed on one side, or sent from silo to silo through the server
            right.plot(start, y, "s", color="#333333", markersize=7)  # where an arrow would be
        else:
            right.annotate(
                "", xy=(end, y), xytext=(start, y), arrowprops={"arrowstyle": "-|>", "lw": 1.4}
            )
        right.text(0.5, y + 0.012, f"{label}  {what}", ha="center", va="bottom", fontsize=9)
    right.set_title("Protocol 1's messages, in order", fontsize=10)
    fig.tight_layout()
    return fig


def glossary() -> Markdown:
    """The book's symbols (:data:`GLOSSARY`) as a Markdown table: symbol, meaning, where the paper defines it."""
    rows = "\n".join(f"| {symbol} | {meaning} | {source} |" for symbol, meaning, source in GLOSSARY)
    return Markdown(f"| symbol | what it is | in the paper |\n|---|---|---|\n{rows}")
