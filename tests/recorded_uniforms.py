"""Dropout uniforms from a seeded generator, remembered in draw order, and reference forward passes written for
autograd that apply exactly the masks the hand-written gradients used (tests of uldp.training.closed_form, .mlp and
.cnn)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch.func import functional_call

if TYPE_CHECKING:
    from collections.abc import Callable


def recording(seed: int) -> tuple[list[torch.Tensor], Callable[[tuple[int, ...]], torch.Tensor]]:
    """``(draws, uniforms)``: ``uniforms(shape)`` returns float64 uniforms and appends them to ``draws``."""
    draws, gen = [], torch.Generator().manual_seed(seed)

    def uniforms(shape):
        draws.append(torch.rand(shape, generator=gen, dtype=torch.float64))
        return draws[-1]

    return draws, uniforms


def copies(
    model: torch.nn.Module, n_copies: int, gen: torch.Generator, spread: float
) -> dict[str, torch.Tensor]:
    """``n_copies`` parameter sets (batched, float64) around the model's, perturbed by ``spread`` standard normals."""
    return {
        name: value.detach()[None]
        + spread * torch.randn((n_copies, *value.shape), generator=gen, dtype=torch.float64)
        for name, value in model.named_parameters()
    }


def cnn_reference_logits(model, params, x, draws, copy):
    """MnistCNN.forward written with torch.nn.functional, dropout replaced by the recorded masks."""
    h = F.relu(F.max_pool2d(F.conv2d(x, params["conv1.weight"], params["conv1.bias"]), 2))
    z = F.conv2d(h, params["conv2.weight"], params["conv2.bias"])
    if model.training:
        z = z * ((draws[0][copy] >= 0.5).to(z.dtype) / 0.5)[:, :, None, None]
    h = F.relu(F.max_pool2d(z, 2)).flatten(1)
    h = F.relu(h @ params["fc1.weight"].T + params["fc1.bias"])
    if model.training:
        h = h * ((draws[1][copy] >= 0.5).to(h.dtype) / 0.5)
    return h @ params["fc2.weight"].T + params["fc2.bias"]


def mlp_reference_logits(model, params, x, draws, copy):
    """The module's own layers (functional_call) in forward order, dropout replaced by the recorded masks."""
    a, used = x, 0
    for name, module in model.named_modules():
        if list(module.children()):
            continue
        if isinstance(module, torch.nn.Dropout):
            if model.training:
                a = a * (draws[used][copy] >= module.p).to(a.dtype) / (1 - module.p)
                used += 1
        else:
            own = {
                key[len(name) + 1 :]: value
                for key, value in params.items()
                if key.startswith(name + ".")
            }
            a = functional_call(module, own, (a,))
    return a
