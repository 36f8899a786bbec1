"""Hand-written backpropagation for the MNIST CNN, batched over model copies (the users of a silo).

Why: under ``vmap`` over users, each convolution with per-user weights becomes a grouped convolution in PyTorch's
native (contiguous) kernels, and most of a per-user training step on a CPU is spent there (its backward alone was
46% of a step at 1000 users). Written out by hand, the same grouped convolutions can run in channels-last memory
format through oneDNN, which is about twice as fast for the forward pass and the weight gradient here, and the step
needs no autograd graph: ``benchmarks/per_user_training.py`` measures the whole step against ``vmap`` and the
per-user loop.

The model is :class:`uldp.models.MnistCNN`: ``conv1 (1->10, k5) -> max-pool 2 -> ReLU -> conv2 (10->20, k5) ->
Dropout2d -> max-pool 2 -> ReLU -> fc1 (320->50) -> ReLU -> Dropout -> fc2 (50->10)``. ``G`` copies with ``B``
records each are laid out as one batch of ``B`` images with ``G`` times the channels (copy-major), so a convolution of
every copy with its own weights is one convolution with ``groups=G``; the linear layers are batched matmuls. Dropout
masks come from caller-supplied uniforms (:data:`uldp.training.mlp.Uniforms`, shape ``[G, B, features]``) as for the
MLP. :func:`weighted_gradient` is checked against autograd in ``tests/test_cnn.py``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeGuard

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from uldp.models import MnistCNN, cross_entropy_loss

if TYPE_CHECKING:
    from collections.abc import Callable

    from uldp.training.mlp import Uniforms

_aten = torch.ops.aten
_POOL = [2, 2]


def supports(model: nn.Module, loss_fn: Callable) -> TypeGuard[MnistCNN]:
    """Whether ``model`` is a :class:`~uldp.models.MnistCNN` trained with the cross-entropy loss."""
    return isinstance(model, MnistCNN) and loss_fn is cross_entropy_loss


def _dropout_mask(
    uniforms: Uniforms, shape: tuple[int, ...], p: float, dtype: torch.dtype
) -> Tensor:
    """``1[u >= p] / (1 - p)`` for uniforms of ``shape`` (the MLP's convention)."""
    return (uniforms(shape) >= p).to(dtype) * (1.0 / (1.0 - p))


def _memory_format(device: torch.device) -> torch.memory_format:
    """Channels-last on the CPU (oneDNN's fast grouped convolutions, measured there); contiguous elsewhere (the
    layout whose grouped convolutions measured 411-430k record-steps per second on an H100, issue 43)."""
    return torch.channels_last if device.type == "cpu" else torch.contiguous_format


def _grouped(weight: Tensor) -> Tensor:
    """Per-copy conv weights ``[G, out, in, k, k]`` as one grouped-conv weight ``[G * out, in, k, k]``, in
    :func:`_memory_format`."""
    return weight.reshape(-1, *weight.shape[2:]).contiguous(
        memory_format=_memory_format(weight.device)
    )


def weighted_gradient(
    model: MnistCNN,
    params: dict[str, Tensor],
    x: Tensor,
    y: Tensor,
    weight: Tensor,
    *,
    uniforms: Uniforms | None = None,
) -> dict[str, Tensor]:
    """Gradient of each copy's weighted mean cross-entropy ``sum_i w_i l_i / max(sum_i w_i, 1)`` (the contract of
    ``vmap(grad(loss))`` over copies; Algorithm 3's per-user local step).

    Args:
        model: A :class:`~uldp.models.MnistCNN` (its mode decides dropout; its parameters are ignored).
        params: Parameters batched over copies (``[G, *shape]`` per name).
        x: Images ``[G, B, 1, 28, 28]``.
        y: Labels ``[G, B]``.
        weight: ``[G, B]`` record weights (0/1 padding masks).
        uniforms: Draws for the dropout masks (train mode); ``None``: torch's global generator.

    Returns:
        Gradients shaped like ``params``.
    """
    n_copies, batch = x.shape[:2]
    dropout = model.training
    draw = (lambda shape: torch.rand(shape, device=x.device)) if uniforms is None else uniforms
    conv1_weight, conv2_weight = _grouped(params["conv1.weight"]), _grouped(params["conv2.weight"])
    channels2 = params["conv2.weight"].shape[1]
    images = x.transpose(0, 1).reshape(
        batch, n_copies * x.shape[2], *x.shape[3:]
    )  # [B, G * in, H, W]
    images = images.contiguous(memory_format=_memory_format(x.device))
    # forward
    conv1 = F.conv2d(images, conv1_weight, params["conv1.bias"].reshape(-1), groups=n_copies)
    pooled1, where1 = _aten.max_pool2d_with_indices(conv1, _POOL, _POOL)
    hidden1 = torch.relu(pooled1)
    conv2 = F.conv2d(hidden1, conv2_weight, params["conv2.bias"].reshape(-1), groups=n_copies)
    if dropout:  # Dropout2d: one draw per record and channel
        channel_mask = _dropout_mask(
            draw, (n_copies, batch, channels2), model.conv2_drop.p, x.dtype
        )
        channel_mask = channel_mask.transpose(0, 1).reshape(batch, n_copies * channels2, 1, 1)
        conv2 = conv2 * channel_mask
    pooled2, where2 = _aten.max_pool2d_with_indices(conv2, _POOL, _POOL)
    hidden2 = torch.relu(pooled2)  # [B, G * 20, 4, 4]
    flat = hidden2.reshape(batch, n_copies, -1).transpose(
        0, 1
    )  # [G, B, 320], per record (channel, h, w)
    hidden3 = torch.relu(
        torch.baddbmm(params["fc1.bias"].unsqueeze(1), flat, params["fc1.weight"].mT)
    )
    dropped3 = hidden3
    if dropout:
        unit_mask = _dropout_mask(draw, tuple(hidden3.shape), model.fc_drop.p, x.dtype)
        dropped3 = hidden3 * unit_mask
    logits = torch.baddbmm(params["fc2.bias"].unsqueeze(1), dropped3, params["fc2.weight"].mT)
    # backward, each record's loss gradient scaled by its weight w_i / max(sum w, 1)
    coefficient = weight / weight.sum(dim=1, keepdim=True).clamp_min(1.0)
    delta = (
        torch.softmax(logits, dim=-1) - F.one_hot(y.long(), logits.shape[-1]).to(x.dtype)
    ) * coefficient[..., None]
    grads = {"fc2.weight": torch.bmm(delta.mT, dropped3), "fc2.bias": delta.sum(dim=1)}
    delta = torch.bmm(delta, params["fc2.weight"])
    if dropout:
        delta = delta * unit_mask
    delta = _aten.threshold_backward(delta, hidden3, 0)
    grads["fc1.weight"], grads["fc1.bias"] = torch.bmm(delta.mT, flat), delta.sum(dim=1)
    delta = torch.bmm(delta, params["fc1.weight"]).transpose(0, 1).reshape(hidden2.shape)
    delta = _aten.threshold_backward(delta, hidden2, 0)
    delta = _aten.max_pool2d_with_indices_backward(
        delta, conv2, _POOL, _POOL, [0, 0], [1, 1], False, where2
    )
    if dropout:
        delta = delta * channel_mask
    delta, conv2_grad, conv2_bias = _aten.convolution_backward(
        delta,
        hidden1,
        conv2_weight,
        [conv2_weight.shape[0]],
        [1, 1],
        [0, 0],
        [1, 1],
        False,
        [0, 0],
        n_copies,
        [True, True, True],
    )
    delta = _aten.threshold_backward(delta, hidden1, 0)
    delta = _aten.max_pool2d_with_indices_backward(
        delta, conv1, _POOL, _POOL, [0, 0], [1, 1], False, where1
    )
    _, conv1_grad, conv1_bias = _aten.convolution_backward(
        delta,
        images,
        conv1_weight,
        [conv1_weight.shape[0]],
        [1, 1],
        [0, 0],
        [1, 1],
        False,
        [0, 0],
        n_copies,
        [False, True, True],
    )
    grads["conv2.weight"] = conv2_grad.reshape(params["conv2.weight"].shape)
    grads["conv2.bias"] = conv2_bias.reshape(n_copies, -1)
    grads["conv1.weight"] = conv1_grad.reshape(params["conv1.weight"].shape)
    grads["conv1.bias"] = conv1_bias.reshape(n_copies, -1)
    return grads
