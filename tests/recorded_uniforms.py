"""Dropout uniforms from a seeded generator, remembered in draw order, so that a reference forward pass written with
autograd can apply exactly the masks the hand-written gradients used (tests of uldp.training.mlp and .cnn)."""

from __future__ import annotations

from collections.abc import Callable

import torch


def recording(seed: int) -> tuple[list[torch.Tensor], Callable[[tuple[int, ...]], torch.Tensor]]:
    """``(draws, uniforms)``: ``uniforms(shape)`` returns float64 uniforms and appends them to ``draws``."""
    draws, gen = [], torch.Generator().manual_seed(seed)

    def uniforms(shape):
        draws.append(torch.rand(shape, generator=gen, dtype=torch.float64))
        return draws[-1]

    return draws, uniforms
