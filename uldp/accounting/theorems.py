"""The RDP guarantees of the paper's mechanisms, one function per theorem (no accountant registry here).

- ULDP-NAIVE (Theorem 1, corrected): per round, each silo's clipped delta gets noise ``2 sigma C sqrt(|S|)``, so
  the sum has noise std ``2 sigma C |S|`` for the true user-level sensitivity ``2 |S| C``: a Gaussian mechanism with
  noise multiplier ``sigma`` per round, ``T`` rounds (:func:`epsilon_naive`).
- ULDP-SGD / ULDP-AVG, with any weights (Theorem 3, Lemma 4 with user-level Poisson sampling): noise multiplier
  ``sigma``, ``T`` rounds (:func:`epsilon_uldp`).
- ULDP-GROUP-k (Theorem 2): per-silo DP-SGD, record-level RDP maximised over silos and converted to groups of ``k``
  records (:func:`epsilon_group`).

The accountants of :mod:`uldp.accounting.accountants` call these; :mod:`uldp.accounting.methods` picks one per method.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from uldp.accounting.group import GroupPrivacySpent, group_dp_epsilon, group_epsilon_bounds
from uldp.accounting.rdp import DEFAULT_ORDERS, PrivacySpent, rdp_subsampled_gaussian, rdp_to_dp
from uldp.common.checks import check_delta, check_integer, check_positive, check_rate

if TYPE_CHECKING:
    from collections.abc import Sequence

    from numpy.typing import ArrayLike


def epsilon_naive(
    *, sigma: float, rounds: int, delta: float, orders: ArrayLike = DEFAULT_ORDERS
) -> PrivacySpent:
    """User-level (epsilon, delta) of ULDP-NAIVE after ``rounds`` rounds (paper Theorem 1).

    Args:
        sigma: Noise multiplier.
        rounds: Number of rounds ``T`` (>= 0).
        delta: Target delta in (0, 1).
        orders: RDP orders to minimise over.

    Returns:
        The guarantee (``epsilon = 0`` after zero rounds).

    ``T`` rounds of the Gaussian mechanism with noise multiplier ``sigma`` are one with ``sigma / sqrt(T)`` (their
    RDP curves ``T alpha / (2 sigma^2)`` are equal):

    >>> math.isclose(epsilon_naive(sigma=5.0, rounds=100, delta=1e-5).epsilon,
    ...              epsilon_naive(sigma=0.5, rounds=1, delta=1e-5).epsilon, rel_tol=1e-12)
    True
    """
    return epsilon_uldp(sigma=sigma, rounds=rounds, delta=delta, q=1.0, orders=orders)


def epsilon_uldp(
    *, sigma: float, rounds: int, delta: float, q: float = 1.0, orders: ArrayLike = DEFAULT_ORDERS
) -> PrivacySpent:
    """User-level (epsilon, delta) of ULDP-SGD / ULDP-AVG (any weights) after ``rounds`` rounds.

    Theorem 3 for ``q = 1`` (closed form ``T alpha / (2 sigma^2)`` in RDP), and the sub-sampled Gaussian of
    Lemma 4 with user-level Poisson sampling rate ``q`` (Algorithm 4).

    Args:
        sigma: Noise multiplier.
        rounds: Number of rounds ``T`` (>= 0).
        delta: Target delta in (0, 1).
        q: User-level sampling rate in (0, 1].
        orders: RDP orders to minimise over.

    Returns:
        The guarantee (``epsilon = 0`` after zero rounds).
    """
    sigma = check_positive("sigma", sigma)
    rounds = check_integer("rounds", rounds, minimum=0)
    delta = check_delta(delta)
    q = check_rate("q", q)
    if rounds == 0:
        return PrivacySpent(epsilon=0.0, order=math.nan, delta=delta)
    rdp = rdp_subsampled_gaussian(sigma=sigma, q=q, steps=rounds, orders=orders)
    return rdp_to_dp(orders=orders, rdp=rdp, delta=delta)


def max_silo_rdp(
    *,
    sigma: float,
    sample_rates: float | Sequence[float],
    steps: int | Sequence[int],
    orders: np.ndarray,
) -> np.ndarray:
    """Record-level RDP of per-silo DP-SGD, maximised over silos at each order (Theorem 2's ``max_s rho_s``)."""
    rates = np.atleast_1d(np.asarray(sample_rates, dtype=float))
    counts = np.atleast_1d(np.asarray(steps))
    if rates.size == 1 and counts.size > 1:
        rates = np.full(counts.size, rates[0])
    if counts.size == 1 and rates.size > 1:
        counts = np.full(rates.size, counts[0])
    if rates.size != counts.size:
        raise ValueError(
            f"sample_rates and steps must be per silo with equal lengths, got {rates.size} and {counts.size}"
        )
    curves = [
        rdp_subsampled_gaussian(sigma=sigma, q=float(rate), steps=int(count), orders=orders)
        for rate, count in zip(rates, counts, strict=True)
    ]
    return np.max(curves, axis=0)


def epsilon_group(
    *,
    sigma: float,
    sample_rates: float | Sequence[float],
    steps: int | Sequence[int],
    k: int,
    delta: float,
    conversion: str = "rdp",
) -> GroupPrivacySpent:
    """User-level (epsilon, delta) of ULDP-GROUP-k (paper Theorem 2, with the errata of settings.md).

    Each silo ``s`` runs DP-SGD with record-level Poisson rate ``sample_rates[s]`` for ``steps[s]`` steps in
    total; the record-level RDP is ``max_s rho_s`` and a user owns at most ``k`` records, so group privacy for
    ``k`` gives the user-level guarantee.

    Args:
        sigma: DP-SGD noise multiplier.
        sample_rates: Record-level sampling rate per silo (or one for all).
        steps: DP-SGD steps per silo so far (or one for all).
        k: Records kept per user (group size).
        delta: Target delta in (0, 1).
        conversion: ``"rdp"`` (RDP group privacy, what the paper uses; for ``k`` not a power of two the valid
            value of the next power of two, with the paper's lower value in ``epsilon_lower``) or ``"dp"``
            (Lemma 5, valid for every integer ``k``).

    Returns:
        The guarantee with both power-of-two values.

    Raises:
        ValueError: On invalid arguments or an unknown conversion.
    """
    sigma = check_positive("sigma", sigma)
    delta = check_delta(delta)
    for rate in np.atleast_1d(sample_rates):
        check_rate("sample_rates", float(rate))
    for count in np.atleast_1d(steps):
        check_integer("steps", int(count) if float(count).is_integer() else count, minimum=0)

    def curve(alphas: np.ndarray) -> np.ndarray:
        return max_silo_rdp(sigma=sigma, sample_rates=sample_rates, steps=steps, orders=alphas)

    if conversion == "rdp":
        return group_epsilon_bounds(curve, k=k, delta=delta)
    if conversion == "dp":
        spent = group_dp_epsilon(curve, k=k, delta=delta)
        return GroupPrivacySpent(
            k=k,
            epsilon=spent.epsilon,
            order=spent.order,
            delta=delta,
            k_upper=k,
            k_lower=k,
            epsilon_lower=spent.epsilon,
        )
    raise ValueError(f"conversion must be 'rdp' or 'dp', got {conversion!r}")
