"""Convolutions that ``vmap`` over users turns into one batched matmul (the per-user engine's option for CNNs).

``vmap`` over ``conv2d`` with per-user weights becomes a grouped convolution in native contiguous kernels, which is
slow on a CPU. :func:`vmap_friendly` swaps every ``nn.Conv2d`` of a model for :class:`UnfoldConv2d`: the same
parameters, computed as im2col ``unfold`` followed by a matmul. ``benchmarks/per_user_training.py`` measures it
against plain ``vmap`` and the MNIST CNN's closed form (:mod:`uldp.training.cnn`).
"""

from __future__ import annotations

import copy
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn


class UnfoldConv2d(nn.Module):
    """``nn.Conv2d`` computed as im2col and one matmul, with the same ``weight`` and ``bias`` parameters.

    The patches come from strided views (``Tensor.unfold``) gathered by one copy, and the convolution is one
    ``[out, C*kh*kw] @ [C*kh*kw, n*oh*ow]`` matmul; under ``vmap`` over users that is a single batched matmul,
    where a plain ``conv2d`` with per-user weights becomes a grouped convolution.

    Raises:
        ValueError: For grouped or dilated convolutions, or non-zero padding modes (not needed by the paper's CNN).
    """

    def __init__(self, conv: nn.Conv2d):
        super().__init__()
        if (
            conv.groups != 1
            or conv.dilation != (1, 1)
            or conv.padding_mode != "zeros"
            or isinstance(conv.padding, str)
        ):
            raise ValueError(
                f"UnfoldConv2d supports groups=1, dilation=1 and numeric zero padding; got {conv}"
            )
        self.weight = conv.weight
        self.bias = conv.bias
        self.kernel_size, self.stride, self.padding = conv.kernel_size, conv.stride, conv.padding

    def forward(self, x: Tensor) -> Tensor:
        if any(self.padding):
            x = F.pad(x, (self.padding[1], self.padding[1], self.padding[0], self.padding[0]))
        n, _, height, width = x.shape
        out_h = (height - self.kernel_size[0]) // self.stride[0] + 1
        out_w = (width - self.kernel_size[1]) // self.stride[1] + 1
        columns = _Im2Col.apply(x, self.kernel_size, self.stride)  # [C*kh*kw, n*oh*ow]
        out = (self.weight.flatten(1) @ columns).reshape(-1, n, out_h, out_w).transpose(0, 1)
        if self.bias is not None:
            out = out + self.bias[:, None, None]
        return out


class _Im2Col(torch.autograd.Function):
    """Patches ``[C*kh*kw, n*oh*ow]`` of ``x [n, C, H, W]`` from strided views; backward is ``F.fold``.

    ``Tensor.unfold`` alone would do, but its backward has no ``vmap`` batching rule (a slow per-user loop).
    """

    generate_vmap_rule = True

    @staticmethod
    def forward(x: Tensor, kernel: tuple[int, int], stride: tuple[int, int]) -> Tensor:
        patches = x.unfold(2, kernel[0], stride[0]).unfold(
            3, kernel[1], stride[1]
        )  # [n, C, oh, ow, kh, kw]
        n, channels, out_h, out_w = patches.shape[:4]
        return patches.permute(1, 4, 5, 0, 2, 3).reshape(
            channels * kernel[0] * kernel[1], n * out_h * out_w
        )

    @staticmethod
    def setup_context(
        ctx: Any, inputs: tuple, output: Tensor
    ) -> None:  # ctx: torch's FunctionCtx, given attributes
        x, kernel, stride = inputs
        ctx.shape, ctx.kernel, ctx.stride = tuple(x.shape), kernel, stride

    @staticmethod
    def backward(ctx: Any, grad_columns: Tensor) -> tuple[Tensor, None, None]:
        n, _, height, width = ctx.shape
        blocks = grad_columns.reshape(grad_columns.shape[0], n, -1).transpose(
            0, 1
        )  # [n, C*kh*kw, L]
        return F.fold(blocks, (height, width), ctx.kernel, stride=ctx.stride), None, None


def vmap_friendly(model: nn.Module) -> nn.Module:
    """Return a deep copy of ``model`` with every ``nn.Conv2d`` replaced by :class:`UnfoldConv2d`.

    Parameter names and values are unchanged, so flat vectors and ``functional_call`` work on both.
    """
    clone = copy.deepcopy(model)
    for child in list(clone.modules()):
        for child_name, grandchild in list(child.named_children()):
            if isinstance(grandchild, nn.Conv2d):
                setattr(child, child_name, UnfoldConv2d(grandchild))
    return clone
