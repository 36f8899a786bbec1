"""The federated algorithms of the paper, a registry by name (Algorithms 1-4).

``make_method(name, hp)`` returns an object with ``prepare(federation, seed)``, ``round(params, federation,
round_seed, aggregate_fn)`` and ``epsilon(federation, rounds)``:

- ``"DEFAULT"``: FedAvg with global and local learning rates (no privacy), :mod:`uldp.methods.fedavg`.
- ``"ULDP-NAIVE"``: Algorithm 1 / Theorem 1, :mod:`uldp.methods.fedavg`.
- ``"ULDP-GROUP-<k>"``, ``"ULDP-GROUP-max"``, ``"ULDP-GROUP-median"``: Algorithm 2 / Theorem 2, :mod:`uldp.methods.group`.
- ``"ULDP-SGD"``, ``"ULDP-SGD-w"``, ``"ULDP-AVG"``, ``"ULDP-AVG-w"``: Algorithms 3-4 / Theorem 3 with user-level
  sampling rate ``q``, :mod:`uldp.methods.uldp_avg`.

:func:`aggregate` is the plain server-side aggregation of the enhanced-weight methods (the secure aggregation hook).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

    from uldp.methods.base import Hyperparameters
    from uldp.methods.fedavg import FedAvgMethod
    from uldp.methods.group import GroupMethod
    from uldp.methods.uldp_avg import UserLevelMethod

    Method = FedAvgMethod | GroupMethod | UserLevelMethod

#: Where each public name lives; imported on first use, so that importing ``uldp.methods.cli`` (``uldp --help``)
#: does not import torch.
_LAZY: dict[str, str] = {
    **dict.fromkeys(("FAMILIES", "KNOWN_METHODS", "AggregateFn", "Federation", "Hyperparameters", "MethodSpec",
                     "heavy_user_federation", "parse_method"), "uldp.methods.base"),
    "FedAvgMethod": "uldp.methods.fedavg", "GroupMethod": "uldp.methods.group",
    **dict.fromkeys(("UserLevelMethod", "aggregate", "check_weights", "enhanced_weights", "uniform_weights",
                     "weighted_sum"), "uldp.methods.uldp_avg"),
}


def __getattr__(name: str) -> Any:
    if name == "Method":
        return __getattr__("FedAvgMethod") | __getattr__("GroupMethod") | __getattr__("UserLevelMethod")
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'uldp.methods' has no attribute {name!r}")


#: What each family needs besides ``global_lr`` and ``batch_size``.
REQUIRED: dict[str, tuple[str, ...]] = {
    "DEFAULT": ("local_lr", "local_epochs"),
    "ULDP-NAIVE": ("local_lr", "local_epochs", "clip", "sigma"),
    "ULDP-GROUP": ("local_lr", "local_epochs", "clip", "sigma"),
    "ULDP-SGD": ("clip", "sigma"),
    "ULDP-AVG": ("local_lr", "local_epochs", "clip", "sigma"),
}


def make_method(name: str, hp: Hyperparameters, *, user_weights: np.ndarray | None = None) -> Method:
    """Build the method registered under ``name``.

    Args:
        name: A registry name (see the module docstring).
        hp: Hyperparameters; those the method needs must not be ``None``.
        user_weights: ULDP-SGD/AVG only: a fixed weight matrix ``[S, U]`` (columns summing to 1).

    Returns:
        The method.

    Raises:
        ValueError: Unknown name (lists the known ones), a needed hyperparameter missing, user sampling
            (``q < 1``) or weights given to a method that has none.

    Example:
        >>> from uldp.methods import Hyperparameters
        >>> make_method("ULDP-AVG-w", Hyperparameters(10.0, 0.001, 2, 4, 0.1, 5.0)).noise_std(4)
        0.25
    """
    from uldp.methods.base import parse_method
    from uldp.methods.fedavg import FedAvgMethod
    from uldp.methods.group import GroupMethod
    from uldp.methods.uldp_avg import UserLevelMethod

    spec = parse_method(name)
    hp.require(spec.name, *REQUIRED[spec.family])
    if not spec.per_user:
        if hp.q != 1:
            raise ValueError(f"user-level sampling q={hp.q} is only defined for ULDP-SGD/AVG, not {spec.name}")
        if user_weights is not None:
            raise ValueError(f"user weights are only defined for ULDP-SGD/AVG, not {spec.name}")
    if spec.family in ("DEFAULT", "ULDP-NAIVE"):
        return FedAvgMethod(spec, hp)
    if spec.family == "ULDP-GROUP":
        return GroupMethod(spec, hp)
    return UserLevelMethod(spec, hp, user_weights)


__all__ = [
    "FAMILIES", "KNOWN_METHODS", "AggregateFn", "FedAvgMethod", "Federation", "GroupMethod", "Hyperparameters",
    "Method", "MethodSpec", "REQUIRED", "UserLevelMethod", "aggregate", "check_weights", "enhanced_weights",
    "heavy_user_federation", "make_method", "parse_method", "uniform_weights", "weighted_sum",
]
