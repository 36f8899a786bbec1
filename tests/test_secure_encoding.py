"""Tests of uldp.secure.encoding: Algorithm 5 and the conditions of Theorem 4."""

import math
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from uldp.secure import encoding


def _primes_up_to(n):
    return [p for p in range(2, n + 1) if all(p % q for q in range(2, int(p**0.5) + 1))]


@pytest.mark.parametrize("n_max", [1, 2, 10, 97, 300, 2000])
def test_lcm_matches_prime_power_closed_form(n_max):
    # lcm(1..N) = prod over primes p <= N of the largest power of p not above N.
    expected = 1
    for p in _primes_up_to(n_max):
        expected *= p ** math.floor(math.log(n_max, p) + 1e-12)
    assert encoding.lcm_up_to(n_max) == expected


def test_lcm_of_paper_constant_size():
    # The proof of Theorem 4 quotes C_LCM < 10^867 for N_max = 2000.
    assert encoding.lcm_up_to(2000) < 10**867


@given(st.floats(1e-14, 0.5), st.integers(1, 10_000))
@settings(max_examples=50)
def test_resolution_bits_is_the_smallest_meeting_the_budget(precision, n_terms):
    bits = encoding.resolution_bits_for(precision, n_terms)
    assert Fraction(n_terms, 2 * 2**bits) <= Fraction(precision)
    if bits > 0:
        assert Fraction(n_terms, 2 * 2 ** (bits - 1)) > Fraction(precision)


@given(st.lists(st.floats(-1e3, 1e3, allow_nan=False), min_size=1, max_size=20), st.integers(0, 40))
@settings(max_examples=60)
def test_encode_decode_round_trip_within_half_resolution(values, bits):
    modulus = 2**127 - 1
    c_lcm = encoding.lcm_up_to(12)
    codes = encoding.encode(values, resolution_bits=bits)
    for value, code in zip(values, codes.tolist(), strict=True):
        field = encoding.to_field(code * c_lcm, modulus)
        decoded = encoding.decode(field, resolution_bits=bits, c_lcm=c_lcm, modulus=modulus)
        tolerance = (
            Fraction(1, 2 ** (bits + 1)) * (1 + Fraction(1, 2**40)) + Fraction(abs(value)) / 2**52
        )
        assert abs(Fraction(decoded) - Fraction(value)) <= tolerance


def test_decode_reads_upper_half_as_negative():
    assert encoding.decode(96, resolution_bits=0, c_lcm=1, modulus=97) == -1.0
    assert encoding.decode(48, resolution_bits=0, c_lcm=1, modulus=97) == 48.0
    with pytest.raises(ValueError, match="Z_n"):
        encoding.decode(97, resolution_bits=0, c_lcm=1, modulus=97)


def test_encode_rejects_non_finite_and_huge():
    with pytest.raises(ValueError, match="NaN"):
        encoding.encode([np.nan], resolution_bits=3)
    with pytest.raises(ValueError, match="61 bits"):
        encoding.encode([1e9], resolution_bits=40)


def test_check_counts_names_users_over_n_max():
    counts = np.array([[3, 0, 5], [2, 1, 0]])
    assert encoding.check_counts(counts, n_max=5).tolist() == [5, 1, 5]
    with pytest.raises(ValueError, match=r"user 0 has N_u=5"):
        encoding.check_counts(counts, n_max=4)
    with pytest.raises(ValueError, match=">= 0"):
        encoding.check_counts(-counts, n_max=4)


def test_wraparound_check_rejects_2048_bit_keys_at_paper_n_max_and_accepts_3072():
    kwargs: dict[str, Any] = dict(
        n_max=2000, resolution_bits=39, delta_bound=0.1, noise_bound=10.0, n_users=100, n_silos=5
    )
    encoding.check_no_wraparound(key_bits=3072, **kwargs)
    with pytest.raises(ValueError, match="wrap around"):
        encoding.check_no_wraparound(key_bits=2048, **kwargs)


@given(st.integers(1, 6), st.integers(1, 4), st.data())
@settings(max_examples=40)
def test_magnitude_bound_dominates_worst_case_aggregate(n_users, n_silos, data):
    # Exact integer aggregate of the proof of Theorem 4 for an adversarial instance never exceeds the bound.
    n_max, bits, bound_value = 12, 8, 0.75
    c_lcm = encoding.lcm_up_to(n_max)
    row = st.lists(st.integers(0, n_max // n_silos), min_size=n_users, max_size=n_users)
    counts = np.array(data.draw(st.lists(row, min_size=n_silos, max_size=n_silos)))
    signs = data.draw(st.sampled_from([-1, 1]))
    totals = counts.sum(axis=0)
    code = int(encoding.encode([signs * bound_value], resolution_bits=bits)[0])
    exact = 0
    for s in range(n_silos):
        for u in range(n_users):
            if totals[u]:
                exact += code * int(counts[s, u]) * (c_lcm // int(totals[u]))
        exact += code * c_lcm
    bound = encoding.aggregate_magnitude_bound(
        c_lcm=c_lcm,
        resolution_bits=bits,
        delta_bound=bound_value,
        noise_bound=bound_value,
        n_users=n_users,
        n_silos=n_silos,
    )
    assert abs(exact) <= bound


def test_noise_tail_bound_is_negligible():
    t = encoding.GAUSSIAN_TAIL_STDS
    assert 2 * math.exp(-t * t / 2) <= 2.0**-128
    assert encoding.noise_tail_bound(sigma=5.0, clip=0.1, n_silos=4) == pytest.approx(t * 0.25)
