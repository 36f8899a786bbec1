"""Hand-written gradients for the models where autograd is mostly framework overhead, behind one interface.

The paper's three small models train on a few records per user and step, so a step through ``vmap(grad(...))`` or
opacus' hooks costs far more in dispatch than in arithmetic on a CPU. :mod:`uldp.training.linear` (HeartDisease's
logistic regression, TcgaBrca's linear Cox model), :mod:`uldp.training.mlp` (the Creditcard MLP) and
:mod:`uldp.training.cnn` (the MNIST CNN: grouped convolutions in oneDNN's channels-last kernels) compute the same
gradients by hand, batched over model copies (users of a silo, or silos). :func:`for_model` says which one
applies; the training engines (:func:`uldp.training.per_user.train_users`,
:func:`uldp.training.dpsgd.dpsgd_train_silos`) use it and fall back to autograd (and opacus) otherwise. Each is tested
against autograd and opacus (``tests/test_linear.py``, ``tests/test_mlp.py``, ``tests/test_cnn.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import Tensor, nn

from uldp.training import cnn, linear, mlp
from uldp.training.device import check_precision

if TYPE_CHECKING:
    from collections.abc import Callable

#: ``shape -> uniforms in [0, 1)``: the draws behind dropout masks (see :data:`uldp.training.mlp.Uniforms`).
Uniforms = mlp.Uniforms


@dataclass(frozen=True)
class ClosedForm:
    """The closed-form gradients of one model and loss, batched over ``G`` parameter copies.

    Attributes:
        weighted_gradient: ``(params, x, y, weight, uniforms) -> grads``: per copy, the gradient of the weighted mean
            loss ``sum_i w_i l_i / max(sum_i w_i, 1)`` (the contract of ``vmap(grad(loss))``); ``params`` ``[G, ...]``
            per name, ``x`` ``[G, B, ...]``, ``weight`` ``[G, B]``.
        clipped_gradient_sum: ``(params, x, y, member, clip, uniforms) -> sums``: per copy, the sum over the batch of
            the per-record gradients (opacus' ``grad_sample`` with mean reduction) each clipped to L2 norm ``clip``:
            one DP-SGD step before noise; ``None`` where only opacus computes per-record gradients (the CNN).
        random: Whether training draws random numbers (dropout masks in train mode) through ``uniforms``.
        sgd_step: ``(params, x, y, weight, lr, uniforms) -> None``: ``params -= lr * weighted_gradient(...)`` in place
            (fused where the model allows; by default the two steps).
    """

    weighted_gradient: Callable[..., dict[str, Tensor]]
    clipped_gradient_sum: Callable[..., dict[str, Tensor]] | None
    random: bool
    sgd_step: Callable[..., None] | None = None

    def sgd_step_(
        self,
        params: dict[str, Tensor],
        x: Tensor,
        y: Tensor,
        weight: Tensor,
        lr: float,
        uniforms: Uniforms | None = None,
    ) -> None:
        """One local SGD step of every copy, in place."""
        if self.sgd_step is not None:
            self.sgd_step(params, x, y, weight, lr, uniforms)
        else:
            descend_(params, self.weighted_gradient(params, x, y, weight, uniforms), lr)


def descend_(params: dict[str, Tensor], grads: dict[str, Tensor], lr: float) -> None:
    """``params[name] -= lr * grads[name]`` in place for every name: one local SGD step of every copy."""
    for name, grad in grads.items():
        params[name].sub_(lr * grad)


def for_model(model: nn.Module, loss_fn: Callable, precision: str = "float32") -> ClosedForm | None:
    """The closed-form gradients of ``model`` with ``loss_fn``, or ``None`` when there are none (use autograd).

    They are written for float32 and float64 (on any device): under ``precision="bf16"`` (autocast,
    :mod:`uldp.training.device`) there are none, and autograd takes the mixed-precision pass.
    """
    if check_precision(precision) == "bf16":
        return None
    if linear.supports(model, loss_fn):
        return ClosedForm(
            weighted_gradient=lambda params, x, y, weight, uniforms=None: linear.weighted_gradient(
                loss_fn, params, x, y, weight
            ),
            clipped_gradient_sum=lambda params, x, y, member, clip, uniforms=None: (
                linear.clipped_gradient_sum(loss_fn, params, x, y, member, clip=clip)
            ),
            random=False,
        )
    if mlp.supports(model, loss_fn):
        layers = mlp.layers_of(model)
        return ClosedForm(
            weighted_gradient=lambda params, x, y, weight, uniforms=None: mlp.weighted_gradient(
                model, params, x, y, weight, uniforms=uniforms, layers=layers
            ),
            clipped_gradient_sum=lambda params, x, y, member, clip, uniforms=None: (
                mlp.clipped_gradient_sum(
                    model, params, x, y, member, clip=clip, uniforms=uniforms, layers=layers
                )
            ),
            random=model.training
            and any(layer.kind == "dropout" and layer.p > 0 for layer in layers),
            sgd_step=lambda params, x, y, weight, lr, uniforms=None: mlp.sgd_step_(
                model, params, x, y, weight, lr=lr, uniforms=uniforms, layers=layers
            ),
        )
    if cnn.supports(model, loss_fn):
        return ClosedForm(
            weighted_gradient=lambda params, x, y, weight, uniforms=None: cnn.weighted_gradient(
                model, params, x, y, weight, uniforms=uniforms
            ),
            clipped_gradient_sum=None,
            random=model.training and (model.conv2_drop.p > 0 or model.fc_drop.p > 0),
        )
    return None


def for_dpsgd(model: nn.Module, loss_fn: Callable) -> ClosedForm | None:
    """:func:`for_model` where it also has per-record clipped sums (closed-form DP-SGD), else ``None`` (opacus)."""
    found = for_model(model, loss_fn)
    return found if found is not None and found.clipped_gradient_sum is not None else None


def copy_uniforms(generators: list[torch.Generator], widths: Tensor, *, active: Tensor) -> Uniforms:
    """Dropout draws for ``G`` copies trained together, each from its own generator, as each would draw alone.

    Copy ``g`` draws ``[widths[g], *features]`` (its own batch width) and only where ``active[g]``; the other slots
    of the ``[G, B, *features]`` result are 1 (kept; they are padding, masked by zero weights). So silos (or users)
    trained in one batched call take exactly the draws they take when trained one by one. The draws are made on the
    generators' device (one device for all), so nothing is copied between devices per step.
    """

    drawing = [
        (g, width)
        for g, (width, on) in enumerate(zip(widths.tolist(), active.tolist(), strict=True))
        if on
    ]

    def draw(shape: tuple[int, ...]) -> Tensor:
        uniforms = torch.ones(shape, device=generators[0].device)
        for g, width in drawing:
            torch.rand((width, *shape[2:]), generator=generators[g], out=uniforms[g, :width])
        return uniforms

    return draw
