"""The registry of federated methods by family: a registry name in, a :class:`~uldp.methods.base.Method` out.

Each method class states the families it implements and the hyperparameters each needs in its ``REQUIRED``
(:class:`~uldp.methods.base.Method`); :data:`METHOD_CLASSES` collects them. A built-in method is a class following
the protocol, its family in :data:`uldp.method_names.FAMILY_CAPABILITIES` (and its names in the parser), and one entry
here; a method of your own is a class and one call, :func:`register_method`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from uldp.method_names import FAMILY_CAPABILITIES, Capabilities, parse_method, register_family
from uldp.methods.base import Hyperparameters
from uldp.methods.fedavg import FedAvgMethod
from uldp.methods.group import GroupMethod
from uldp.methods.uldp_avg import UserLevelMethod

if TYPE_CHECKING:
    import numpy as np

    from uldp.methods.base import FitDefaults, Method

#: The class of every family of :data:`uldp.method_names.FAMILY_CAPABILITIES` (Algorithms 1, 2 and 3-4, then the
#: families of :func:`register_method`).
METHOD_CLASSES: dict[str, type[Method]] = {
    family: method_class
    for method_class in (FedAvgMethod, GroupMethod, UserLevelMethod)
    for family in method_class.REQUIRED
}


def register_method(method_class: type[Method], *, capabilities: Capabilities) -> None:
    """Register a method of your own: each family of its ``REQUIRED`` becomes a registry name.

    After this one call, ``make_method``, ``uldp.fit``, the accountants (:func:`uldp.accounting.epsilon_for_method`,
    which read only ``capabilities``) and the transports (:mod:`uldp.federation`, :mod:`uldp.flower`) run it by name.
    Its guarantee is the built-in theorem its capabilities name: Theorem 1/3's Gaussian mechanism on the silos' noisy
    sum (with Lemma 4's amplification where ``per_user``), or Theorem 2's group privacy where ``group_privacy``; the
    class must add the noise that theorem assumes (``tests/test_method_registry.py`` registers a toy and checks it
    against a built-in method bit for bit).

    Args:
        method_class: A class following :class:`~uldp.methods.base.Method`, whose ``REQUIRED`` and ``DEFAULTS`` name
            the same new families (a ``per_user`` class also takes ``user_weights`` as its third argument).
        capabilities: What its methods need (:class:`uldp.method_names.Capabilities`).

    Raises:
        ValueError: A class without ``REQUIRED``/``DEFAULTS`` for the same families, or a family name that is taken
            or of the wrong form (:func:`uldp.method_names.register_family`); nothing is registered then.
    """
    required = getattr(method_class, "REQUIRED", None)
    defaults = getattr(method_class, "DEFAULTS", None)
    if not isinstance(required, dict) or not required:
        raise ValueError(
            f"{getattr(method_class, '__name__', method_class)!r} must name its families in REQUIRED "
            f"(family -> hyperparameters it needs)"
        )
    if not isinstance(defaults, dict) or set(defaults) != set(required):
        raise ValueError(
            f"{method_class.__name__}.DEFAULTS must give a FitDefaults for exactly its REQUIRED families "
            f"{sorted(required)}, got {sorted(defaults) if isinstance(defaults, dict) else defaults!r}"
        )
    unknown = [
        name
        for needs in required.values()
        for name in needs
        if name not in Hyperparameters.OPTIONAL
    ]
    if unknown:
        raise ValueError(
            f"{method_class.__name__}.REQUIRED names {unknown}; allowed: {', '.join(Hyperparameters.OPTIONAL)}"
        )
    registered: list[str] = []
    try:
        for family in required:
            register_family(family, capabilities)
            registered.append(family)
    except ValueError:
        for family in registered:  # all or nothing
            del FAMILY_CAPABILITIES[family]
        raise
    for family in required:
        METHOD_CLASSES[family] = method_class


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
    method_class: Any = METHOD_CLASSES[
        spec.family
    ]  # a Method class; the protocol has no constructor
    if (
        spec.per_user
    ):  # user sampling (Algorithm 4) and weights (Eq. (3)): the per-user families' alone
        return method_class(spec, hp, user_weights)
    if hp.q != 1:
        raise ValueError(
            f"user-level sampling q={hp.q} is only defined for ULDP-SGD/AVG, not {spec.name}"
        )
    if user_weights is not None:
        raise ValueError(f"user weights are only defined for ULDP-SGD/AVG, not {spec.name}")
    return method_class(spec, hp)
