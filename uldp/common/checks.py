"""Argument checks shared by every module, so each refusal is worded the same way and names the bad value.

A bool is refused wherever a number is asked for (``True`` is an ``int`` to Python, and a flag passed where a count or
a rate belongs is a mistake, not the number 1); NumPy integers and floats are accepted like their Python kinds; NaN is
refused by every bound. (``numpy.bool_`` is neither ``numbers.Integral`` nor ``numbers.Real``, so it is refused too.)

>>> check_integer("rounds", 3)
3
>>> check_number("q", 1, above=0, at_most=1)
1.0
>>> check_integer("seed", True, minimum=0)
Traceback (most recent call last):
...
ValueError: seed must be an integer >= 0, got True
"""

from __future__ import annotations

import functools
import math
import numbers
import warnings
from typing import TYPE_CHECKING, Any, TypeVar, cast

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = [
    "check_delta",
    "check_integer",
    "check_number",
    "check_positive",
    "check_rate",
    "renamed_keyword",
]

_F = TypeVar("_F", bound="Callable[..., Any]")


def check_integer(name: str, value: object, *, minimum: int = 1, maximum: int | None = None) -> int:
    """Return ``value`` as an ``int`` if it is an integer in ``minimum..maximum``.

    Args:
        name: The argument's name, for the message.
        value: The value to check: a Python or NumPy integer, not a bool.
        minimum: The smallest allowed value.
        maximum: The largest allowed value, or ``None`` for no upper bound.

    Returns:
        ``int(value)``.

    Raises:
        ValueError: ``value`` is a bool, not an integer, or out of range; the message names it and what is allowed.
    """
    allowed = f">= {minimum}" if maximum is None else f"in {minimum}..{maximum}"
    integer = (
        int(value) if isinstance(value, numbers.Integral) and not isinstance(value, bool) else None
    )
    if integer is None or integer < minimum or (maximum is not None and integer > maximum):
        raise ValueError(f"{name} must be an integer {allowed}, got {value!r}")
    return integer


def check_number(
    name: str,
    value: object,
    *,
    above: float | None = None,
    at_least: float | None = None,
    below: float | None = None,
    at_most: float | None = None,
    finite: bool = False,
) -> float:
    """Return ``value`` as a ``float`` if it is a real number within the given bounds.

    Give at most one lower bound (``above`` strict, ``at_least`` inclusive) and at most one upper bound (``below``
    strict, ``at_most`` inclusive).

    Args:
        name: The argument's name, for the message.
        value: The value to check: a Python or NumPy real number, not a bool and not NaN.
        above: Strict lower bound.
        at_least: Inclusive lower bound.
        below: Strict upper bound.
        at_most: Inclusive upper bound.
        finite: Refuse infinities too.

    Returns:
        ``float(value)``.

    Raises:
        ValueError: ``value`` is a bool, not a real number, NaN, infinite when ``finite``, or out of bounds; the message
            names it and what is allowed.
        TypeError: Both bounds of one side are given.
    """
    if (above is not None and at_least is not None) or (below is not None and at_most is not None):
        raise TypeError(
            "give at most one lower bound (above or at_least) and one upper bound (below or at_most)"
        )
    low, low_open = (above, True) if above is not None else (at_least, False)
    high, high_open = (below, True) if below is not None else (at_most, False)
    if low is not None and high is not None:
        allowed = f"in {'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"
    elif low is not None:
        allowed = f"{'>' if low_open else '>='} {low:g}"
    elif high is not None:
        allowed = f"{'<' if high_open else '<='} {high:g}"
    else:
        allowed = ""
    kind = "a finite number" if finite else "a number"
    # numbers.Real compares with floats, but its ABC declares no operators to a type checker: cast, not convert, so
    # that a huge int is compared exactly
    real = cast("float", value)
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or math.isnan(real):
        ok = False
    else:
        ok = (
            (not finite or math.isfinite(real))
            and (low is None or (real > low if low_open else real >= low))
            and (high is None or (real < high if high_open else real <= high))
        )
    if not ok:
        raise ValueError(f"{name} must be {kind}{' ' + allowed if allowed else ''}, got {value!r}")
    return float(real)


def check_positive(name: str, value: object) -> float:
    """Return ``value`` as a float if it is a finite number > 0 (learning rates, clipping bounds, noise multipliers).

    Raises:
        ValueError: Otherwise, naming ``name`` and the value.
    """
    return check_number(name, value, above=0, finite=True)


def check_rate(name: str, value: object) -> float:
    """Return a sampling rate in (0, 1] (the ``q`` of Poisson sub-sampling, Section 3.4) as a float.

    Raises:
        ValueError: Otherwise, naming ``name`` and the value.
    """
    return check_number(name, value, above=0, at_most=1)


def check_delta(delta: object) -> float:
    """Return the ``delta`` of (epsilon, delta)-DP as a float if it lies in (0, 1).

    Raises:
        ValueError: Otherwise, naming the value.
    """
    return check_number("delta", delta, above=0, below=1)


def renamed_keyword(old: str, new: str) -> Callable[[_F], _F]:
    """A decorator: the function also takes ``old=``, its keyword's name before it became ``new=``, for one release,
    with a ``DeprecationWarning`` (an ``old`` of None is as if not given).

    >>> @renamed_keyword("target_epsilon", "epsilon")
    ... def budget(*, epsilon=None):
    ...     return epsilon
    >>> import warnings
    >>> with warnings.catch_warnings(record=True):
    ...     budget(target_epsilon=2.0)
    2.0

    Raises (from the decorated function):
        ValueError: both names given, naming both values.
    """

    def decorate(function: _F) -> _F:
        label = function.__qualname__.removesuffix(".__init__")

        @functools.wraps(function)
        def accepting(*args: Any, **kwargs: Any) -> Any:
            value = kwargs.pop(old, None)
            if value is not None:
                warnings.warn(
                    f"{label}({old}=...) is deprecated and will be removed in the next release; use {new}=",
                    DeprecationWarning,
                    stacklevel=2,
                )
                if kwargs.get(new) is not None:
                    raise ValueError(
                        f"give {new} or its old name {old}, not both; got {new}={kwargs[new]!r}, {old}={value!r}"
                    )
                kwargs[new] = value
            return function(*args, **kwargs)

        return cast("_F", accepting)

    return decorate
