"""Hand-written backpropagation for the Creditcard MLP, batched over model copies (users or silos).

Why: the Creditcard MLP (:class:`uldp.models.CreditcardMLP`, 5012 parameters) trains on a handful of records per user
and step, so ``vmap(grad(functional_call))`` and opacus' hooks cost far more in framework overhead than in
arithmetic: about 0.17 ms per user and step for ULDP-AVG and 13 ms per DP-SGD step of ULDP-GROUP-k on the 2-core
machine this project runs on. Every layer of this MLP acts on one record at a time (``GroupNorm(1, C)`` normalises a
record over its own features), so the gradient of a record's cross-entropy is a sum of per-layer outer products
``delta_i a_i^T`` (linear layers) and products ``delta_i * xhat_i`` (the norm's affine parameters). This module
computes those per-record terms for ``G`` model copies at once with batched matmuls, then either

- their weighted mean (:func:`weighted_gradient`): one user's gradient in ULDP-AVG / ULDP-SGD (Algorithm 3), or a
  silo's in DEFAULT / ULDP-NAIVE; or
- the sum of the records' gradients each clipped to ``C`` (:func:`clipped_gradient_sum`): the DP-SGD step of
  ULDP-GROUP-k (Algorithm 2, line 9; Abadi et al. 2016), with the per-record norms from
  ``||delta a^T||_F = ||delta|| ||a||`` instead of materialised per-record gradients (opacus' "ghost" identity).

Dropout (train mode) multiplies by ``keep / (1 - p)`` with ``keep = u >= p`` for uniforms ``u`` that the caller
supplies (:data:`Uniforms`), so the same draws can come from one generator per silo whether silos are batched or not.
Both results are checked against autograd and opacus in ``tests/test_mlp.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from uldp.models import CreditcardMLP, cross_entropy_loss

#: ``shape -> uniforms in [0, 1)`` of that shape (``[G, B, features]``), the draws behind the dropout masks.
Uniforms = Callable[[tuple[int, ...]], Tensor]


@dataclass(frozen=True)
class Layer:
    """One leaf module of the MLP in forward order: ``kind`` is linear, relu, groupnorm or dropout; ``weight`` and
    ``bias`` name its parameters (empty for the parameter-free kinds)."""

    kind: str
    name: str
    eps: float = 0.0
    p: float = 0.0
    weight: str = ""
    bias: str = ""


_KINDS = {nn.Linear: "linear", nn.ReLU: "relu", nn.GroupNorm: "groupnorm", nn.Dropout: "dropout"}


def supports(model: nn.Module, loss_fn: Callable) -> bool:
    """Whether ``model`` is a :class:`~uldp.models.CreditcardMLP` trained with the cross-entropy loss."""
    return isinstance(model, CreditcardMLP) and loss_fn is cross_entropy_loss


def layers_of(model: nn.Module) -> tuple[Layer, ...]:
    """The MLP's leaf modules in forward order (``CreditcardMLP.forward`` applies them in registration order).

    Raises:
        ValueError: A leaf this module cannot differentiate, or a ``GroupNorm`` with more than one group.
    """
    found = []
    for name, module in model.named_modules():
        if list(module.children()):
            continue
        kind = _KINDS.get(type(module))
        if kind is None or (kind == "groupnorm" and (module.num_groups != 1 or not module.affine)):
            raise ValueError(
                f"no hand-written gradient for module {name!r} ({module}); "
                f"supported: Linear, ReLU, GroupNorm(1, C) with affine, Dropout"
            )
        named = kind in ("linear", "groupnorm")
        found.append(
            Layer(
                kind,
                name,
                eps=getattr(module, "eps", 0.0),
                p=getattr(module, "p", 0.0),
                weight=f"{name}.weight" if named else "",
                bias=f"{name}.bias" if named else "",
            )
        )
    return tuple(found)


def _forward(
    layers: tuple[Layer, ...], params: dict[str, Tensor], x: Tensor, uniforms: Uniforms | None
) -> tuple[Tensor, list]:
    """Logits ``[G, B, classes]`` and what the backward pass needs of each layer.

    ``GroupNorm(1, C)`` of a ``[G, B, C]`` tensor is a layer norm over the last axis; ATen's fused kernels do its
    normalisation (and, in :func:`record_terms`, its backward) in one call each: on a CPU the cost of this module is
    mostly the number of tensor operations, not their size.
    """
    cache: list[Any] = []  # per layer: its input, output, norm statistics or dropout mask
    a = x
    for layer in layers:
        if layer.kind == "linear":
            cache.append(a)
            a = torch.baddbmm(params[layer.bias].unsqueeze(1), a, params[layer.weight].mT)
        elif layer.kind == "relu":
            a = torch.relu(a)
            cache.append(a)  # the output decides where the gradient passes (threshold_backward)
        elif layer.kind == "groupnorm":
            xhat, mean, rstd = torch.ops.aten.native_layer_norm(
                a, [a.shape[-1]], None, None, layer.eps
            )
            cache.append((a, xhat, mean, rstd))
            a = torch.addcmul(
                params[layer.bias].unsqueeze(1), xhat, params[layer.weight].unsqueeze(1)
            )
        elif (
            uniforms is not None and layer.p > 0
        ):  # dropout in train mode: keep where u >= p, scale 1 / (1 - p)
            mask = (uniforms(tuple(a.shape)) >= layer.p).to(a.dtype) * (1.0 / (1.0 - layer.p))
            cache.append(mask)
            a = a * mask
        else:
            cache.append(None)
    return a, cache


@dataclass(frozen=True)
class RecordTerms:
    """Per-record gradient factors: record ``i``'s gradient w.r.t. parameter tensor ``name`` is built from
    ``factors[name] = (kind, left, right)`` with ``left``, ``right`` of shape ``[G, B, .]``:

    - ``"outer"`` (a linear weight): ``left_i right_i^T`` (output gradient times layer input);
    - ``"product"`` (a norm's scale): ``left_i * right_i`` (output gradient times normalised input);
    - ``"copy"`` (a bias): ``left_i`` (``right`` is ``None``).
    """

    factors: dict[str, tuple[str, Tensor, Tensor | None]]


def record_terms(
    model: nn.Module,
    params: dict[str, Tensor],
    x: Tensor,
    y: Tensor,
    *,
    uniforms: Uniforms | None = None,
    coefficient: Tensor | None = None,
    layers: tuple[Layer, ...] | None = None,
) -> RecordTerms:
    """Per-record gradient factors of the cross-entropy of every record under each of ``G`` parameter copies.

    Args:
        model: A :class:`~uldp.models.CreditcardMLP` (its mode decides dropout; its parameters are ignored).
        params: Parameters batched over copies (``[G, *shape]`` per name).
        x: Records ``[G, B, features]``.
        y: Integer labels ``[G, B]``.
        uniforms: The draws for dropout masks; ``None`` draws them from torch's global generator. Unused in eval mode.
        coefficient: ``[G, B]`` weights to fold into each record's factors (backpropagation is linear in the
            output gradient, so record ``i``'s terms then describe ``coefficient_i g_i``); ``None`` for 1.
        layers: ``layers_of(model)``, when the caller keeps it across steps (walking the modules costs about as
            much as a small layer's arithmetic); ``None`` walks them.

    Returns:
        The factors; :func:`weighted_gradient` and :func:`clipped_gradient_sum` combine them.
    """
    layers = layers_of(model) if layers is None else layers
    if model.training and uniforms is None:
        uniforms = lambda shape: torch.rand(shape, device=x.device)  # noqa: E731 - torch.rand on x's device
    logits, cache = _forward(layers, params, x, uniforms if model.training else None)
    # d(cross-entropy)/d(logits) = softmax - one_hot(y): subtract 1 at each label in place (one_hot costs more)
    delta = torch.softmax(logits, dim=-1)
    label = y.long().unsqueeze(-1)
    delta.scatter_(-1, label, delta.gather(-1, label) - 1.0)
    if coefficient is not None:
        delta = delta * coefficient.unsqueeze(-1)
    factors = {}
    for position in range(len(layers) - 1, -1, -1):
        layer, saved = layers[position], cache[position]
        if layer.kind == "linear":
            factors[layer.weight] = ("outer", delta, saved)
            factors[layer.bias] = ("copy", delta, None)
            if position:
                delta = torch.bmm(delta, params[layer.weight])
        elif layer.kind == "relu":
            delta = torch.ops.aten.threshold_backward(delta, saved, 0)
        elif layer.kind == "groupnorm":
            normalised_input, xhat, mean, rstd = saved
            factors[layer.weight] = ("product", delta, xhat)
            factors[layer.bias] = ("copy", delta, None)
            delta = torch.ops.aten.native_layer_norm_backward(
                delta * params[layer.weight].unsqueeze(1),
                normalised_input,
                [xhat.shape[-1]],
                mean,
                rstd,
                None,
                None,
                [True, False, False],
            )[0]
        elif saved is not None:
            delta = delta * saved
    return RecordTerms(factors)


def combine(
    terms: RecordTerms,
    coefficient: Tensor | None = None,
    *,
    add_to: dict[str, Tensor] | None = None,
    alpha: float = 1.0,
) -> dict[str, Tensor]:
    """``sum_i coefficient[:, i] * grad_i`` per parameter tensor (``[G, *shape]``; ``None``: plain sums).

    With ``add_to``, ``alpha`` times the sums is added to those tensors in place instead (and they are returned): a
    linear weight then takes one fused ``baddbmm_`` and no gradient tensor is formed (an SGD step is
    ``add_to=params, alpha=-lr``).
    """
    out = {}
    for name, (kind, left, right) in terms.factors.items():
        scaled = left if coefficient is None else left * coefficient.unsqueeze(-1)
        if right is None:  # "copy"
            total = scaled.sum(dim=1)
        elif kind == "outer" and add_to is not None:
            out[name] = add_to[name].baddbmm_(scaled.mT, right, alpha=alpha)
            continue
        elif kind == "outer":
            total = torch.bmm(scaled.mT, right)
        else:  # "product"
            total = (scaled * right).sum(dim=1)
        out[name] = total if add_to is None else add_to[name].add_(total, alpha=alpha)
    return out


def record_norms(terms: RecordTerms) -> Tensor:
    """The L2 norm ``[G, B]`` of each record's whole gradient (all parameter tensors together).

    A linear weight's per-record gradient ``delta a^T`` has Frobenius norm ``||delta|| ||a||``, so nothing of size
    ``out x in`` per record is formed.
    """
    squared: Tensor | float = 0.0
    for kind, left, right in terms.factors.values():
        if right is None:  # "copy"
            squared = squared + left.square().sum(dim=-1)
        elif kind == "outer":
            squared = squared + left.square().sum(dim=-1) * right.square().sum(dim=-1)
        else:  # "product"
            squared = squared + (left * right).square().sum(dim=-1)
    return torch.as_tensor(squared).sqrt()


def weighted_gradient(
    model: nn.Module,
    params: dict[str, Tensor],
    x: Tensor,
    y: Tensor,
    weight: Tensor,
    *,
    uniforms: Uniforms | None = None,
    layers: tuple[Layer, ...] | None = None,
) -> dict[str, Tensor]:
    """Gradient of each copy's weighted mean cross-entropy ``sum_i w_i l_i / max(sum_i w_i, 1)`` (Algorithm 3's
    per-user step, or a silo's), the contract of ``vmap(grad(loss))`` over copies.

    Args:
        model, params, x, y, uniforms, layers: As in :func:`record_terms`.
        weight: ``[G, B]`` record weights (0/1 masks for padding).

    Returns:
        Gradients shaped like ``params``.
    """
    coefficient = weight / weight.sum(dim=1, keepdim=True).clamp_min(1.0)
    return combine(
        record_terms(model, params, x, y, uniforms=uniforms, coefficient=coefficient, layers=layers)
    )


def sgd_step_(
    model: nn.Module,
    params: dict[str, Tensor],
    x: Tensor,
    y: Tensor,
    weight: Tensor,
    *,
    lr: float,
    uniforms: Uniforms | None = None,
    layers: tuple[Layer, ...] | None = None,
) -> None:
    """``params -= lr * weighted_gradient(...)`` in place, for every copy (one local SGD step of Algorithm 3).

    The same arithmetic as :func:`weighted_gradient` followed by the update, with each linear weight updated by one
    fused ``baddbmm_``: with one model copy per user the parameter-sized passes dominate a step.
    """
    coefficient = weight / weight.sum(dim=1, keepdim=True).clamp_min(1.0)
    combine(
        record_terms(
            model, params, x, y, uniforms=uniforms, coefficient=coefficient, layers=layers
        ),
        add_to=params,
        alpha=-lr,
    )


def clipped_gradient_sum(
    model: nn.Module,
    params: dict[str, Tensor],
    x: Tensor,
    y: Tensor,
    member: Tensor,
    *,
    clip: float,
    uniforms: Uniforms | None = None,
    layers: tuple[Layer, ...] | None = None,
) -> dict[str, Tensor]:
    """``sum_i member_i min(1, C / ||g_i||) g_i`` per copy, ``g_i`` record ``i``'s cross-entropy gradient: the
    clipped sum of one DP-SGD step (Abadi et al. 2016, Algorithm 1; opacus' per-sample clipping), before noise.

    Args:
        model, params, x, y, uniforms, layers: As in :func:`record_terms`.
        member: ``[G, B]`` 0/1, which slots hold a record of the batch.
        clip: Per-record bound ``C`` > 0.

    Returns:
        Clipped gradient sums shaped like ``params``.
    """
    terms = record_terms(model, params, x, y, uniforms=uniforms, layers=layers)
    norms = record_norms(terms)
    scale = torch.clamp(clip / norms.clamp_min(torch.finfo(norms.dtype).tiny), max=1.0)
    return combine(terms, member * scale)
