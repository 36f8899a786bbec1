"""Closed-form gradients of linear-score models (HeartDisease's logistic regression, TcgaBrca's linear Cox model).

Why: with 14 or 40 parameters, an SGD step through autograd is all framework overhead on a CPU (about 0.6 ms per
plain step and 1.8 ms per opacus DP-SGD step on the 2-core machine this project is run on), and the paper's
medical settings take hundreds of thousands of such steps per run. For a score ``s = x @ w + b``
(:class:`uldp.models.LinearScore`) and a loss of the scores, the chain rule gives ``dL/dw = sum_i g_i x_i`` and
``dL/db = sum_i g_i`` with ``g = dL/ds``, and ``g`` has a closed form for the BCE and Cox losses; a step is then a
dozen tensor operations. :func:`score_gradient` is checked against autograd (``tests/test_linear.py``) and the
training engines that use it against the autograd ones (``tests/test_per_user.py``, ``tests/test_dpsgd.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import Tensor, nn

from uldp.models import LinearScore, bce_loss, cox_loss

if TYPE_CHECKING:
    from collections.abc import Callable

#: Parameter names of :class:`~uldp.models.LinearScore` in layout order (weight ``[1, F]``, bias ``[1]``).
WEIGHT, BIAS = "linear.weight", "linear.bias"


def _normaliser(weight: Tensor) -> Tensor:
    """``max(sum_i w_i, 1)`` over the last axis, kept for broadcasting (the denominator of the weighted means)."""
    return weight.sum(dim=-1, keepdim=True).clamp_min(1.0)


def _bce_score_gradient(scores: Tensor, targets: Tensor, weight: Tensor) -> Tensor:
    """``dL/ds_i = w_i (sigmoid(s_i) - y_i) / max(sum w, 1)`` for :func:`uldp.models.bce_loss`."""
    return weight * (torch.sigmoid(scores) - targets) / _normaliser(weight)


def _cox_score_gradient(scores: Tensor, targets: Tensor, weight: Tensor) -> Tensor:
    """``dL/ds_k`` of :func:`uldp.models.cox_loss` (Breslow ties, risk sets of weight-1 records).

    With ``L = sum_i w_i E_i (log sum_{j in R_i} exp(s_j) - s_i) / D`` and ``P_ik = exp(s_k) / sum_{j in R_i}
    exp(s_j)`` for ``k`` in ``R_i`` (0 outside): ``dL/ds_k = (sum_i w_i E_i P_ik - w_k E_k) / D``.
    """
    events, times = targets[..., 0], targets[..., 1]
    at_risk = (times.unsqueeze(-2) >= times.unsqueeze(-1)) & (
        weight.unsqueeze(-2) > 0
    )  # [i, j]: T_j >= T_i
    outside = torch.finfo(scores.dtype).min / 4
    share = torch.softmax(
        torch.where(at_risk, scores.unsqueeze(-2), outside), dim=-1
    )  # 0 outside R_i
    cases = weight * events
    return ((cases.unsqueeze(-1) * share).sum(dim=-2) - cases) / _normaliser(weight)


#: The closed forms by loss function.
SCORE_GRADIENTS: dict[Callable, Callable[[Tensor, Tensor, Tensor], Tensor]] = {
    bce_loss: _bce_score_gradient,
    cox_loss: _cox_score_gradient,
}


def supports(model: nn.Module, loss_fn: Callable) -> bool:
    """Whether ``model`` is a :class:`~uldp.models.LinearScore` and ``loss_fn`` has a closed-form score gradient."""
    return isinstance(model, LinearScore) and loss_fn in SCORE_GRADIENTS


def score_gradient(
    loss_fn: Callable, scores: Tensor, targets: Tensor, weight: Tensor | None = None
) -> Tensor:
    """The gradient ``dL/ds`` of a weighted mean loss with respect to the scores, batched over leading axes.

    Args:
        loss_fn: :func:`~uldp.models.bce_loss` or :func:`~uldp.models.cox_loss`.
        scores: Scores ``[..., n]``.
        targets: Targets ``[..., n]`` (BCE) or ``[..., n, 2]`` (Cox: event, time).
        weight: Record weights ``[..., n]`` (0/1 masks for padding); ``None`` for all ones.

    Returns:
        ``[..., n]``, equal to autograd's gradient of ``loss_fn(scores, targets, weight)`` per leading index.

    Raises:
        ValueError: A loss without a closed form here.
    """
    if loss_fn not in SCORE_GRADIENTS:
        raise ValueError(
            f"no closed-form score gradient for {getattr(loss_fn, '__name__', loss_fn)!r}; "
            f"known: {', '.join(f.__name__ for f in SCORE_GRADIENTS)}"
        )
    weight = torch.ones_like(scores) if weight is None else weight.to(scores.dtype)
    return SCORE_GRADIENTS[loss_fn](scores, targets, weight)


def linear_scores(params: dict[str, Tensor], x: Tensor) -> Tensor:
    """Scores ``[U, B]`` of records ``x`` ``[U, B, F]`` under per-user parameters (weight ``[U, 1, F]``,
    bias ``[U, 1]``)."""
    return torch.einsum("ubf,uf->ub", x, params[WEIGHT][:, 0, :]) + params[BIAS]


def weighted_gradient(
    loss_fn: Callable, params: dict[str, Tensor], x: Tensor, y: Tensor, weight: Tensor
) -> dict[str, Tensor]:
    """Per-user gradients of the weighted mean loss, in closed form (the contract of ``vmap(grad(loss))``).

    Args:
        loss_fn: The BCE or Cox loss.
        params: Batched over users: weight ``[U, 1, F]``, bias ``[U, 1]``.
        x: Records ``[U, B, F]``.
        y: Targets ``[U, B(, 2)]``.
        weight: ``[U, B]`` record weights (0/1 padding masks).

    Returns:
        Gradients shaped like ``params``.
    """
    g = score_gradient(loss_fn, linear_scores(params, x), y, weight)  # [U, B]
    return {
        WEIGHT: torch.einsum("ub,ubf->uf", g, x).unsqueeze(1),
        BIAS: g.sum(dim=-1, keepdim=True),
    }


def clipped_gradient_sum(
    loss_fn: Callable,
    params: dict[str, Tensor],
    x: Tensor,
    y: Tensor,
    member: Tensor,
    *,
    clip: float,
) -> dict[str, Tensor]:
    """One DP-SGD step's sum of per-record gradients clipped to ``clip``, per copy (before noise).

    Record ``i``'s gradient is what opacus computes for a linear layer with ``loss_reduction="mean"``: the batch
    size ``b`` times ``dL/ds_i [x_i, 1]`` for the batch's mean loss ``L``; its norm is ``|b dL/ds_i| ||[x_i, 1]||``.

    Args:
        loss_fn, params, x, y: As in :func:`weighted_gradient` (copies are silos).
        member: ``[S, B]`` 0/1, which slots hold a record of the batch.
        clip: Per-record bound ``C`` > 0.

    Returns:
        Clipped sums shaped like ``params``.
    """
    g = score_gradient(loss_fn, linear_scores(params, x), y, member) * member.sum(
        dim=-1, keepdim=True
    )
    lengths = (x.square().sum(dim=-1) + 1.0).sqrt()
    g = g * torch.clamp(clip / (g.abs() * lengths), max=1.0)  # min(1, C / ||g_i [x_i, 1]||)
    return {
        WEIGHT: torch.einsum("ub,ubf->uf", g, x).unsqueeze(1),
        BIAS: g.sum(dim=-1, keepdim=True),
    }
