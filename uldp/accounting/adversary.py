"""Who an epsilon with user sampling holds against (:mod:`uldp.accounting.known_sample` explains each)."""

from __future__ import annotations

import enum


class Adversary(enum.Enum):
    """The adversary of an epsilon with user sampling (Algorithm 4; the paper's "Private user-level sub-sampling").

    Attributes:
        MODEL_READERS: Sees the released models, not the sample: Lemma 4's amplified epsilon (also the server's
            when the silos draw the sample from randomness it never learns).
        SERVER_SEES_SAMPLE: A server that draws the sample at rate q and knows it: no amplification by what it
            knows (:func:`uldp.accounting.known_sample.epsilon_known_sample`).
        SERVER_CHOOSES_SAMPLE: A server that picks the sample, a target in every round: the epsilon at q = 1.
    """

    MODEL_READERS = "model readers"
    SERVER_SEES_SAMPLE = "server that sees the sample"
    SERVER_CHOOSES_SAMPLE = "server that chooses the sample"


def check_adversary(adversary: Adversary | str) -> Adversary:
    """``adversary`` as an :class:`Adversary` (a member or its value, e.g. ``"server that sees the sample"``).

    Raises:
        ValueError: Neither (the message lists the values).

    >>> check_adversary("model readers")
    <Adversary.MODEL_READERS: 'model readers'>
    """
    if isinstance(adversary, Adversary):
        return adversary
    try:
        return Adversary(adversary)
    except ValueError:
        raise ValueError(
            f"unknown adversary {adversary!r}; known: {', '.join(a.value for a in Adversary)}"
        ) from None
