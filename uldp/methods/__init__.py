"""The federated algorithms of the paper, a registry by family (Algorithms 1-4).

``make_method(name, hp)`` (:mod:`uldp.methods.registry`) returns a :class:`~uldp.methods.base.Method`: an object
with ``prepare(federation, seed)``, ``silo_update(...)``, ``server_step(...)``, ``round(params, federation,
round_seed, aggregate_fn, *, sum_fn)``, ``group_size(federation)`` and ``epsilon(federation, rounds)``. Names are
parsed by :mod:`uldp.method_names`:

- ``"DEFAULT"``: FedAvg with global and local learning rates (no privacy), :mod:`uldp.methods.fedavg`.
- ``"ULDP-NAIVE"``: Algorithm 1 / Theorem 1, :mod:`uldp.methods.fedavg`.
- ``"ULDP-GROUP-<k>"``, ``"ULDP-GROUP-max"``, ``"ULDP-GROUP-median"``: Algorithm 2 / Theorem 2,
  :mod:`uldp.methods.group`.
- ``"ULDP-SGD"``, ``"ULDP-SGD-w"``, ``"ULDP-AVG"``, ``"ULDP-AVG-w"``: Algorithms 3-4 / Theorem 3 with user-level
  sampling rate ``q``, :mod:`uldp.methods.uldp_avg`.
- A method of your own: a class and one call, ``register_method(cls, capabilities=Capabilities(...))``.

:func:`aggregate` is the plain server-side aggregation of the enhanced-weight methods (the secure aggregation hook,
:data:`~uldp.methods.base.AggregateFn`); the other methods' rounds take the sum of the silos' updates as a hook too
(:data:`~uldp.methods.base.SumFn`, the masked sum's).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if (
    TYPE_CHECKING
):  # the names of _LAZY, for type checkers and editors (the redundant aliases mark re-exports)
    from uldp.method_names import (
        FAMILIES as FAMILIES,
        KNOWN_METHODS as KNOWN_METHODS,
        Capabilities as Capabilities,
        MethodSpec as MethodSpec,
        known_methods as known_methods,
        parse_method as parse_method,
        register_family as register_family,
    )
    from uldp.methods.base import (
        AggregateFn as AggregateFn,
        EveryRecordSiloNoise as EveryRecordSiloNoise,
        Federation as Federation,
        Hyperparameters as Hyperparameters,
        Method as Method,
        SumFn as SumFn,
        heavy_user_federation as heavy_user_federation,
    )
    from uldp.methods.fedavg import FedAvgMethod as FedAvgMethod
    from uldp.methods.group import GroupMethod as GroupMethod
    from uldp.methods.registry import (
        METHOD_CLASSES as METHOD_CLASSES,
        make_method as make_method,
        register_method as register_method,
        required_hyperparameters as required_hyperparameters,
        unused_hyperparameters as unused_hyperparameters,
    )
    from uldp.methods.uldp_avg import (
        UserLevelMethod as UserLevelMethod,
        aggregate as aggregate,
        check_weights as check_weights,
        enhanced_weights as enhanced_weights,
        uniform_weights as uniform_weights,
        user_level as user_level,
        weighted_sum as weighted_sum,
    )

#: Where each public name lives; imported on first use, so that importing ``uldp.methods`` (``uldp --help``) does not
#: import torch.
_LAZY: dict[str, str] = {
    **dict.fromkeys(
        (
            "Capabilities",
            "FAMILIES",
            "KNOWN_METHODS",
            "MethodSpec",
            "known_methods",
            "parse_method",
            "register_family",
        ),
        "uldp.method_names",
    ),
    **dict.fromkeys(
        (
            "AggregateFn",
            "EveryRecordSiloNoise",
            "Federation",
            "FitDefaults",
            "Hyperparameters",
            "Method",
            "SumFn",
            "heavy_user_federation",
        ),
        "uldp.methods.base",
    ),
    "FedAvgMethod": "uldp.methods.fedavg",
    "GroupMethod": "uldp.methods.group",
    **dict.fromkeys(
        (
            "METHOD_CLASSES",
            "make_method",
            "method_defaults",
            "register_method",
            "required_hyperparameters",
            "unused_hyperparameters",
        ),
        "uldp.methods.registry",
    ),
    **dict.fromkeys(
        (
            "UserLevelMethod",
            "user_level",
            "aggregate",
            "check_weights",
            "enhanced_weights",
            "uniform_weights",
            "weighted_sum",
        ),
        "uldp.methods.uldp_avg",
    ),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'uldp.methods' has no attribute {name!r}")


__all__ = sorted(_LAZY)  # noqa: PLE0605 - a list of the keys of _LAZY (strings); ruff cannot see through sorted()
