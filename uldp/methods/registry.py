"""The registry of federated methods by family: a registry name in, a :class:`~uldp.methods.base.Method` out.

Each method class states the families it implements and the hyperparameters each needs in its ``REQUIRED``
(:class:`~uldp.methods.base.Method`); :data:`METHOD_CLASSES` collects them. A new method is a class following the
protocol, its family in :data:`uldp.method_names.FAMILIES` (and its names in the parser), and one entry here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from uldp.method_names import parse_method
from uldp.methods.base import Hyperparameters
from uldp.methods.fedavg import FedAvgMethod
from uldp.methods.group import GroupMethod
from uldp.methods.uldp_avg import UserLevelMethod

if TYPE_CHECKING:
    import numpy as np

    from uldp.methods.base import FitDefaults, Method

#: The class of every family of :data:`uldp.method_names.FAMILIES` (Algorithms 1, 2 and 3-4).
METHOD_CLASSES: dict[str, type[FedAvgMethod] | type[GroupMethod] | type[UserLevelMethod]] = {
    family: method_class
    for method_class in (FedAvgMethod, GroupMethod, UserLevelMethod)
    for family in method_class.REQUIRED
}


def required_hyperparameters(family: str) -> tuple[str, ...]:
    """What ``family`` needs besides ``global_lr`` and ``batch_size`` (its class's ``REQUIRED``).

    Example:
        >>> required_hyperparameters("ULDP-SGD")  # one full-batch gradient: no local learning rate or epochs
        ('clip', 'sigma')
    """
    return METHOD_CLASSES[family].REQUIRED[family]


def unused_hyperparameters(family: str) -> tuple[str, ...]:
    """The hyperparameters ``family`` leaves unused: those :class:`Hyperparameters` lets be ``None`` that its class's
    ``REQUIRED`` does not list (a run sets them to ``None`` whatever is passed).

    Example:
        >>> unused_hyperparameters("ULDP-SGD"), unused_hyperparameters("DEFAULT"), unused_hyperparameters("ULDP-AVG")
        (('local_lr', 'local_epochs'), ('clip', 'sigma'), ())
    """
    required = required_hyperparameters(family)
    return tuple(name for name in Hyperparameters.OPTIONAL if name not in required)


def method_defaults(name: str) -> FitDefaults:
    """The defaults of the method registered under ``name`` (its class's ``DEFAULTS`` for its family).

    Example:
        >>> method_defaults("ULDP-AVG-w").global_lr_for(4), method_defaults("DEFAULT").global_lr_for(4)
        (36.0, 1.0)
    """
    family = parse_method(name).family
    return METHOD_CLASSES[family].DEFAULTS[family]


def make_method(
    name: str, hp: Hyperparameters, *, user_weights: np.ndarray | None = None
) -> Method:
    """Build the method registered under ``name``.

    Args:
        name: A registry name (:func:`uldp.method_names.parse_method`).
        hp: Hyperparameters; those the method needs must not be ``None``.
        user_weights: ULDP-SGD/AVG only: a fixed weight matrix ``[S, U]`` (columns summing to 1).

    Returns:
        The method.

    Raises:
        ValueError: Unknown name (lists the known ones), a needed hyperparameter missing, user sampling
            (``q < 1``) or weights given to a method that has none.

    Example:
        >>> from uldp.methods import Hyperparameters
        >>> hp = Hyperparameters(10.0, 0.001, 2, 4, 0.1, 5.0)
        >>> make_method("ULDP-AVG-w", hp).noise_std(4) == hp.sigma * hp.clip / 4 ** 0.5  # Algorithm 3, line 18
        True
    """
    spec = parse_method(name)
    hp.require(spec.name, *required_hyperparameters(spec.family))
    if spec.per_user:  # user sampling (Algorithm 4) and weights (Eq. (3)) are ULDP-SGD/AVG's alone
        return UserLevelMethod(spec, hp, user_weights)
    if hp.q != 1:
        raise ValueError(
            f"user-level sampling q={hp.q} is only defined for ULDP-SGD/AVG, not {spec.name}"
        )
    if user_weights is not None:
        raise ValueError(f"user weights are only defined for ULDP-SGD/AVG, not {spec.name}")
    return METHOD_CLASSES[spec.family](spec, hp)
