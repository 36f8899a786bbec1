"""The shared argument checks: what they accept is exactly the documented range, and every refusal names the value."""

import math
import re
from typing import Any

import numpy as np
import pytest
from hypothesis import example, given, strategies as st

from uldp.accounting.rdp import rdp_gaussian
from uldp.common.checks import check_delta, check_integer, check_number, check_positive, check_rate
from uldp.simulation import RunConfig


@given(value=st.integers(-50, 50), minimum=st.integers(-5, 5), span=st.none() | st.integers(0, 10))
def test_integer_accepted_exactly_in_range(value, minimum, span):
    maximum = None if span is None else minimum + span
    inside = value >= minimum and (maximum is None or value <= maximum)
    if inside:
        assert check_integer("n", value, minimum=minimum, maximum=maximum) == value
        assert check_integer("n", np.int64(value), minimum=minimum, maximum=maximum) == value
    else:
        allowed = f">= {minimum}" if maximum is None else f"in {minimum}..{maximum}"
        with pytest.raises(ValueError, match=rf"^n must be an integer {allowed}, got {value}$"):
            check_integer("n", value, minimum=minimum, maximum=maximum)


@pytest.mark.parametrize("bad", [True, False, np.bool_(True), 2.0, "3", None, np.float64(1.0)])
def test_integer_refuses_bools_and_non_integers(bad):
    with pytest.raises(
        ValueError, match=f"^{re.escape(f'rounds must be an integer >= 0, got {bad!r}')}$"
    ):
        check_integer("rounds", bad, minimum=0)


def test_integer_returns_a_python_int():
    assert type(check_integer("n", np.int32(4))) is int


@given(value=st.floats(allow_nan=True, allow_infinity=True) | st.integers(-3, 3))
@example(value=math.nan)
@example(value=-math.inf)
@example(value=0)
@example(value=1)
def test_number_bounds_match_their_definition(value):
    """Each bound kind against a direct comparison: open and closed ends, finiteness, NaN refused."""
    cases: list[tuple[dict[str, Any], bool, str]] = [
        (
            {"above": 0, "at_most": 1},
            not math.isnan(value) and 0 < value <= 1,
            "a number in (0, 1]",
        ),
        ({"above": 0, "below": 1}, not math.isnan(value) and 0 < value < 1, "a number in (0, 1)"),
        ({"at_least": 0}, not math.isnan(value) and value >= 0, "a number >= 0"),
        ({"above": 0, "finite": True}, math.isfinite(value) and value > 0, "a finite number > 0"),
        ({"at_most": -1}, not math.isnan(value) and value <= -1, "a number <= -1"),
        ({}, not math.isnan(value), "a number"),
    ]
    for bounds, allowed, wording in cases:
        if allowed:
            assert check_number("x", value, **bounds) == float(value)
        else:
            with pytest.raises(ValueError) as refused:
                check_number("x", value, **bounds)
            assert str(refused.value) == f"x must be {wording}, got {value!r}"


@pytest.mark.parametrize("bad", [True, np.bool_(False), "0.5", None, [0.5], complex(0.5, 0)])
def test_number_refuses_bools_and_non_reals(bad):
    with pytest.raises(ValueError, match="q must be a number in"):
        check_rate("q", bad)


def test_number_refuses_two_bounds_on_one_side():
    with pytest.raises(TypeError, match="at most one lower bound"):
        check_number("x", 1.0, above=0, at_least=0)
    with pytest.raises(TypeError, match="one upper bound"):
        check_number("x", 1.0, below=2, at_most=2)


def test_named_checks_are_the_documented_ranges():
    assert check_positive("sigma", np.float32(0.5)) == 0.5
    assert check_rate("q", 1) == 1.0 and check_delta(1e-5) == 1e-5
    for bad in (0.0, math.inf, math.nan):
        with pytest.raises(ValueError, match=rf"^sigma must be a finite number > 0, got {bad!r}$"):
            check_positive("sigma", bad)
    for bad in (0, 1, 1.5):
        with pytest.raises(ValueError, match=rf"^delta must be a number in \(0, 1\), got {bad!r}$"):
            check_delta(bad)
    with pytest.raises(ValueError, match=r"^q must be a number in \(0, 1\], got 0$"):
        check_rate("q", 0)


def test_callers_refuse_a_bool_where_a_number_belongs():
    """Callers that took ``True`` as the number 1 before they shared these checks."""
    with pytest.raises(ValueError, match=r"^sigma must be a finite number > 0, got True$"):
        rdp_gaussian(sigma=True, orders=[2.0])
    with pytest.raises(ValueError, match=r"^n_silos must be an integer in 1..1000, got True$"):
        RunConfig(dataset="creditcard", method="ULDP-AVG", n_users=10, rounds=2, n_silos=True)
