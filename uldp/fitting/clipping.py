"""Whether the clipping bound ``C`` fits what it clips, and how to choose it without spending the privacy budget.

Every private method clips something before adding noise calibrated to ``C``: ULDP-AVG a user's update after ``Q``
local epochs (Algorithm 3 line 16), ULDP-SGD a user's gradient (line 23), ULDP-GROUP's DP-SGD a record's gradient
(Algorithm 2), ULDP-NAIVE a silo's whole update (Algorithm 1). A bound far above the typical norm buys noise that
no update needs (the noise is ``sigma C`` whatever the updates); one far below shrinks every update, so the step
is set by ``C`` rather than by the data. :func:`update_norms` computes those norms at the initial model on a
sample, and :func:`clip_advice` says when ``C`` is more than :data:`FAR` times off their median.

Choosing ``C`` from the private records' norms is itself a release that the reported epsilon does not count.
Without spending budget: compute the norms on public or proxy records (a public dataset of the same kind, synthetic
records, a cohort that is already public): ``uldp.fit`` on them reports the quantiles in
``history.info["update_norms"]``; take ``C`` near the median. Or tune on the private records with the cost of the
tuning added to the epsilon (Papernot and Steinke 2022, "Hyperparameter tuning with Renyi differential privacy").
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from uldp.methods.base import global_torch_seed, needed, seed_stream, torch_generator
from uldp.training.per_user import record_keys, train_user_chunks, user_gradient_chunks

if TYPE_CHECKING:
    from torch import Tensor

    from uldp.methods.base import Federation

#: How many times off the median norm ``C`` may be before :func:`clip_advice` warns.
FAR = 4.0
#: The most groups (users, records or silos) whose norms are computed.
SAMPLE = 256


class ClipWarning(UserWarning):
    """The clipping bound is far from the norms of what it clips (see :mod:`uldp.fitting.clipping`)."""


def _groups(federation: Federation, unit: str) -> list[np.ndarray]:
    """The record groups clipped one at a time (``unit`` of :attr:`uldp.method_names.Capabilities.clipped`): per
    silo, per record, or per (silo, user)."""
    if unit == "per-silo":
        return [
            federation.silo_records(s)
            for s in range(federation.n_silos)
            if federation.silo_records(s).size
        ]
    if unit == "per-record":
        return [np.array([i]) for i in range(int(federation.x.shape[0]))]
    return [group for s in range(federation.n_silos) for group in federation.user_groups(s)[1]]


def update_norms(
    method: Any,
    federation: Federation,
    params: Tensor,
    seed: np.random.SeedSequence,
    *,
    sample: int = SAMPLE,
) -> np.ndarray:
    """The norms of what ``method`` clips, at ``params``, for up to ``sample`` groups drawn from ``seed``.

    Args:
        method: A method of the registry (its ``spec.capabilities.clipped`` and ``hp``).
        federation: The records.
        params: The model, flat.
        seed: Where the sample, the record order and dropout come from (a stream of its own: training's draws do
            not change).
        sample: The most groups.

    Returns:
        The norms (empty for DEFAULT, which clips nothing).
    """
    hp, clipped = method.hp, method.spec.capabilities.clipped
    if not clipped:
        return np.zeros(0)
    unit, what = clipped.split(" ", 1)
    groups = _groups(federation, unit)
    rng = np.random.default_rng(seed_stream(seed, 0))
    chosen = [
        groups[i]
        for i in np.sort(rng.choice(len(groups), size=min(sample, len(groups)), replace=False))
    ]
    norms = np.zeros(len(chosen))

    # Each chunk's norms as the engine hands it over, so that the sample's [sample, d] updates are never held at once.
    def keep_norms(rows: np.ndarray, updates: Tensor) -> None:
        norms[rows] = updates.norm(dim=1).detach().cpu().numpy()

    with torch.random.fork_rng(devices=[]), global_torch_seed(seed_stream(seed, 1)):
        if what == "update":
            epochs = needed(hp.local_epochs, "local_epochs")
            keys = record_keys(
                int(federation.x.shape[0]), epochs, torch_generator(seed_stream(seed, 2))
            ).to(federation.device)
            train_user_chunks(
                federation.model,
                params,
                federation.x,
                federation.y,
                chosen,
                consume=keep_norms,
                loss_fn=federation.loss_fn,
                local_lr=needed(hp.local_lr, "local_lr"),
                epochs=epochs,
                batch_size=hp.batch_size,
                keys=keys,
            )
        else:  # a gradient: a user's (ULDP-SGD) or a record's (ULDP-GROUP, DP-SGD)
            user_gradient_chunks(
                federation.model,
                params,
                federation.x,
                federation.y,
                chosen,
                consume=keep_norms,
                loss_fn=federation.loss_fn,
            )
    return norms


def clip_advice(clip: float | None, norms: np.ndarray, *, what: str) -> str | None:
    """A sentence when ``clip`` is more than :data:`FAR` times off the median of ``norms``, else ``None``.

    Example:
        >>> clip_advice(0.1, np.array([1.0, 2.0, 3.0]), what="per-user update") is not None
        True
        >>> clip_advice(2.0, np.array([1.0, 2.0, 3.0]), what="per-user update") is None
        True
    """
    if clip is None or norms.size == 0:
        return None
    median = float(np.median(norms))
    if median <= 0 or median / FAR <= clip <= median * FAR:
        return None
    effect = (
        "the noise (sigma C) is calibrated to a bound most updates are far below"
        if clip > median
        else "clipping shrinks most updates, so C rather than the data sets the step"
    )
    return (
        f"clip={clip:g} is {max(clip / median, median / clip):.0f} times off the median {what} norm "
        f"{median:.3g} at the initial model ({effect}). Choose C near the median norm without spending the "
        "budget: on public or proxy records (uldp.fit on them reports history.info['update_norms']), or by "
        "tuning whose privacy cost is added to epsilon (Papernot and Steinke 2022); choosing C from this "
        "message on the private records leaks what the reported epsilon does not count"
    )
