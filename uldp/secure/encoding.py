"""Fixed-point encoding on Z_n and the bounds that make Protocol 1 exact (Algorithm 5, Theorem 4).

Algorithm 5 of the paper turns a real x into ``round(x / P) mod n`` and back. We use a power-of-two
resolution ``2**-resolution_bits`` so that ``x * 2**f`` is exact in floating point (no rounding besides the
one deliberate ``rint``), and we pick ``f`` from the target precision P and the number of rounded terms:
each of the |U| sampled users contributes a convex combination (weights n_su/N_u summing to 1) of rounding
errors of at most ``2**-f / 2``, and each of the |S| noise vectors one more, so the decoded aggregate is within
``(|U| + |S|) * 2**-f / 2 <= P`` of the plain float computation. (With the resolution P itself, as Algorithm 5
is written, the bound of Theorem 4 would only be ``(|U| + |S|) * P / 2``.)

The proof of Theorem 4 needs two conditions, both checked here before anything is sent:
(1) every N_u <= N_max, so that C_LCM / N_u is an integer, and (2) the aggregate integer
``sum_s (sum_u E_su n_su C_LCM / N_u + Z_s C_LCM)`` stays below n / 2 in absolute value (no wrap-around mod n;
Decode reads values above n // 2 as negative).

>>> code = encode([0.5, -0.25], resolution_bits=4)
>>> code.tolist()
[8, -4]
>>> decode(to_field(-4 * lcm_up_to(3), 97), resolution_bits=4, c_lcm=lcm_up_to(3), modulus=97)
-0.25
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np

from uldp.common.checks import check_integer, check_number

if TYPE_CHECKING:
    from collections.abc import Iterable

#: Gaussian tail multiplier t with 2 exp(-t^2 / 2) <= 2^-128: a noise coordinate exceeds t standard deviations
#: with probability below 2^-128 (Chernoff bound), so the no-wrap-around check fails only negligibly often.
GAUSSIAN_TAIL_STDS = math.sqrt(2.0 * (128 + 1) * math.log(2.0))

#: Largest |encoded value| kept in an int64 array (headroom for the signed-digit recoding of fast.py).
MAX_ENCODED_MAGNITUDE = 2**61


@lru_cache(maxsize=16)
def lcm_up_to(n_max: int) -> int:
    """C_LCM of Protocol 1, step 1(a): the least common multiple of 1, 2, ..., N_max.

    Args:
        n_max: N_max, the largest number of records of one user over all silos (>= 1).

    Returns:
        lcm(1, ..., n_max); every N_u <= N_max divides it.

    Raises:
        ValueError: if n_max is not a positive integer.

    >>> lcm_up_to(10)
    2520
    """
    return math.lcm(*range(1, check_integer("n_max", n_max) + 1))


def resolution_bits_for(precision: float, n_terms: int) -> int:
    """Smallest f with ``n_terms * 2**-f / 2 <= precision`` (the rounding budget of Theorem 4).

    Args:
        precision: P, the largest allowed max-abs error of the decoded aggregate (e.g. 1e-10).
        n_terms: number of rounded terms per coordinate, |U| + |S|.

    Returns:
        The number of fractional bits f of the fixed-point encoding.

    Raises:
        ValueError: if precision is not in (0, 1) or n_terms < 1.

    >>> resolution_bits_for(0.25, 2)
    2
    """
    check_number("precision P", precision, above=0, below=1)
    check_integer("n_terms", n_terms)
    return max(0, math.ceil(math.log2(n_terms / (2.0 * precision))))


def encode(values: Iterable[float] | np.ndarray, *, resolution_bits: int) -> np.ndarray:
    """Fixed-point part of Encode (Algorithm 5, lines 3-4): ``rint(x * 2**f)`` as exact int64 integers.

    Args:
        values: real numbers (any shape).
        resolution_bits: f, so the resolution is 2**-f.

    Returns:
        int64 array of the same shape (signed; :func:`to_field` maps it into Z_n).

    Raises:
        ValueError: if a value is not finite or its encoding exceeds 2**61 in magnitude.
    """
    array = np.asarray(values, dtype=np.float64)
    if not np.all(np.isfinite(array)):
        raise ValueError(
            "cannot encode NaN or infinite values; check the model deltas and the noise"
        )
    scaled = np.rint(np.ldexp(array, resolution_bits))  # ldexp by a power of two is exact
    if scaled.size and np.max(np.abs(scaled)) >= MAX_ENCODED_MAGNITUDE:
        raise ValueError(
            f"a value of magnitude {float(np.max(np.abs(array))):.3g} needs more than 61 bits at resolution 2^-"
            f"{resolution_bits}; lower the precision requirement or clip the values"
        )
    return scaled.astype(np.int64)


def to_field(value: int, modulus: int) -> int:
    """Line 5 of Encode: map an integer of Z into Z_n (``value mod n``)."""
    return int(value) % modulus


def decode(value: int, *, resolution_bits: int, c_lcm: int, modulus: int) -> float:
    """Decode of Algorithm 5: element of Z_n -> signed integer -> divide by C_LCM and by 2**f.

    The division is exact (rational arithmetic) and rounded once to the nearest float.

    Args:
        value: an element of Z_n (0 <= value < n).
        resolution_bits: f of the encoding.
        c_lcm: C_LCM.
        modulus: n.

    Returns:
        The real number the element stands for.

    Raises:
        ValueError: if value is outside [0, n).
    """
    if not 0 <= value < modulus:
        raise ValueError(
            f"decode expects an element of Z_n in [0, n), got a value of {int(value).bit_length()} bits"
        )
    signed = value - modulus if value > modulus // 2 else value
    return float(Fraction(int(signed), int(c_lcm) << resolution_bits))


def check_counts(counts: np.ndarray, *, n_max: int) -> np.ndarray:
    """Condition (1) of Theorem 4: counts are non-negative integers and every N_u = sum_s n_su <= N_max.

    Args:
        counts: n[s, u], shape (|S|, |U|).
        n_max: N_max.

    Returns:
        N_u per user (int64 array of shape (|U|,)).

    Raises:
        ValueError: naming the users whose N_u exceeds N_max, or bad counts.
    """
    array = np.asarray(counts)
    if array.ndim != 2:
        raise ValueError(f"counts must have shape (silos, users), got shape {array.shape}")
    if not np.issubdtype(array.dtype, np.integer):
        if not np.all(np.equal(np.mod(array, 1), 0)):
            raise ValueError("counts n[s, u] must be whole numbers of records")
        array = array.astype(np.int64)
    if np.any(array < 0):
        raise ValueError("counts n[s, u] must be >= 0")
    totals = array.sum(axis=0).astype(np.int64)
    too_many = np.flatnonzero(totals > n_max)
    if too_many.size:
        shown = ", ".join(f"user {u} has N_u={totals[u]}" for u in too_many[:5])
        raise ValueError(
            f"N_u > N_max={n_max} for {too_many.size} user(s) ({shown}); raise n_max (and the key size, since "
            f"C_LCM grows like e^N_max) or cap the records per user"
        )
    return totals


def aggregate_magnitude_bound(
    *,
    c_lcm: int,
    resolution_bits: int,
    delta_bound: float,
    noise_bound: float,
    n_users: int,
    n_silos: int,
) -> int:
    """Upper bound on |sum_s (sum_u E_su n_su C_LCM / N_u + Z_s C_LCM)| for one coordinate (Theorem 4, cond. 2).

    Each user's encoded deltas enter as a convex combination over silos, so the users contribute at most
    |U| * (delta_bound * 2**f + 1/2) and the silos' noise |S| * (noise_bound * 2**f + 1/2), all times C_LCM.

    Args:
        c_lcm: C_LCM.
        resolution_bits: f.
        delta_bound: bound on |coordinate| of any clipped delta (the clip norm C bounds it).
        noise_bound: bound on |coordinate| of any silo's noise.
        n_users: |U|.
        n_silos: |S|.

    Returns:
        An integer bound B; the protocol is exact when 2 B < n.
    """
    scale = Fraction(2) ** resolution_bits
    per_coordinate = n_users * (Fraction(delta_bound) * scale + Fraction(1, 2)) + n_silos * (
        Fraction(noise_bound) * scale + Fraction(1, 2)
    )
    return math.ceil(per_coordinate * c_lcm)


def noise_tail_bound(*, sigma: float, clip: float, n_silos: int) -> float:
    """High-probability bound on one coordinate of a silo's noise N(0, sigma^2 C^2 / |S|) (Algorithm 3).

    Uses the Gaussian tail Pr[|z| > t std] <= 2 exp(-t^2/2) with t = :data:`GAUSSIAN_TAIL_STDS` (< 2^-128).
    """
    return GAUSSIAN_TAIL_STDS * sigma * clip / math.sqrt(n_silos)


def check_no_wraparound(
    *,
    key_bits: int,
    n_max: int,
    resolution_bits: int,
    delta_bound: float,
    noise_bound: float,
    n_users: int,
    n_silos: int,
) -> None:
    """Check condition (2) of Theorem 4 for every modulus n of ``key_bits`` bits (n >= 2**(key_bits-1)).

    Raises:
        ValueError: naming the sizes involved and what to change when the aggregate could wrap around.
    """
    bound = aggregate_magnitude_bound(
        c_lcm=lcm_up_to(n_max),
        resolution_bits=resolution_bits,
        delta_bound=delta_bound,
        noise_bound=noise_bound,
        n_users=n_users,
        n_silos=n_silos,
    )
    if 2 * bound + 1 >= 2 ** (key_bits - 1):
        raise ValueError(
            f"the aggregate may wrap around mod n: it needs {(2 * bound + 1).bit_length()} bits but a {key_bits}-bit "
            f"key gives only {key_bits - 1} (C_LCM for N_max={n_max} alone takes {lcm_up_to(n_max).bit_length()} "
            f"bits, the values 2^{resolution_bits} * bound {max(delta_bound, noise_bound):.3g} for {n_users} users "
            f"and {n_silos} silos take the rest); use a larger key, a smaller n_max, a coarser precision or smaller "
            f"clip / noise"
        )
