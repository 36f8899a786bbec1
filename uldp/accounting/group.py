"""Group privacy: from record-level guarantees to guarantees for groups of ``k`` records.

Two conversions, both used by the paper's Figure 2 and by ULDP-GROUP-k (Theorem 2):

- RDP group privacy (Mironov 2017, Proposition 2; the paper's Lemma 6, whose statement has a typo, see
  ``settings.md``): for ``k = 2^c`` and any order ``alpha >= 2k``, an ``(alpha, rho)``-RDP mechanism is
  ``(alpha / k, 3^c rho)``-RDP for groups of ``k``. Only orders ``alpha >= 2k`` are valid, so the group order
  ``beta = alpha / k`` ranges over ``beta >= 2``.
- (epsilon, delta) group privacy (the paper's Lemma 5): ``(epsilon, delta)``-DP implies
  ``(k epsilon, k e^((k-1) epsilon) delta)``-DP for groups of ``k``, for any integer ``k``.

The paper's Figure 2 shows the (epsilon, delta) route blowing up for large ``k``. The cause is the grid of RDP
orders its code converts with (opacus' default, ending at 63, :data:`AUTHORS_DP_ORDERS`): the group guarantee of
order ``alpha`` exists only for ``alpha > k``, so near ``k = 63`` almost no order is left, and the code caps ``k``
at 62. The bisection over the input delta is not the cause: :func:`paper_group_dp_epsilon`, the exact per-order
solve on that grid, gives the authors' values (tests/test_accounting.py checks it against a bisection).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from uldp.accounting.rdp import (
    DEFAULT_ORDERS,
    PrivacySpent,
    best_of,
    check_orders,
    dp_epsilons,
    rdp_subsampled_gaussian,
)
from uldp.common.checks import check_delta, check_integer, check_positive, check_rate

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

#: The RDP orders of the authors' (epsilon, delta) group-privacy route (``get_privacy_spent`` in their
#: ``noise_utils.py``, opacus' default alphas): 1.1 to 10.9 by 0.1, then the integers 12 to 63.
AUTHORS_DP_ORDERS: tuple[float, ...] = tuple(
    [1 + i / 10 for i in range(1, 100)] + list(range(12, 64))
)
#: The authors' code computes the (epsilon, delta) route for ``k = 62`` when asked for a larger ``k``.
AUTHORS_DP_MAX_K = 62

#: Largest base RDP order evaluated for group privacy (the sub-sampled RDP costs O(alpha) per order; an optimum
#: at this edge raises a warning).
MAX_BASE_ORDER = 2**14

RdpCurve = Callable[[np.ndarray], np.ndarray]


def is_power_of_two(k: int) -> bool:
    """True when ``k`` is 1, 2, 4, 8, ...

    >>> [k for k in range(1, 10) if is_power_of_two(k)]
    [1, 2, 4, 8]
    """
    return k >= 1 and (k & (k - 1)) == 0


def power_of_two_bounds(k: int) -> tuple[int, int]:
    """The largest power of two ``<= k`` and the smallest power of two ``>= k``.

    >>> power_of_two_bounds(6), power_of_two_bounds(8)
    ((4, 8), (8, 8))
    """
    k = check_integer("group size k", k)
    lower = 1 << (k.bit_length() - 1)
    return lower, lower if lower == k else lower << 1


def group_rdp_epsilon(
    rdp_curve: RdpCurve, *, k: int, delta: float, group_orders: ArrayLike = DEFAULT_ORDERS
) -> PrivacySpent:
    """(epsilon, delta) for groups of ``k = 2^c`` records via RDP group privacy (Mironov 2017, Prop. 2).

    The group RDP at order ``beta`` is ``3^c * rho(k * beta)`` for ``beta >= 2`` (that is, base orders
    ``alpha = k beta >= 2k``, the lemma's domain); it is then converted with the paper's Lemma 2. Candidate
    orders are rounded so that ``k * beta`` is an integer above 64. The reported ``order`` is the group order ``beta``.

    Args:
        rdp_curve: The record-level RDP ``rho(alpha)`` as a function of an array of base orders.
        k: Group size, a power of two.
        delta: Target delta in (0, 1).
        group_orders: Candidate group orders ``beta``; those below 2 are dropped.

    Returns:
        The smallest valid epsilon and its group order ``beta``.

    Raises:
        ValueError: If ``k`` is not a power of two (use :func:`group_epsilon_bounds`) or delta is invalid.

    Two records of a Gaussian mechanism with noise multiplier 10 are exactly one with 5 (sensitivity 2): a valid
    group bound is never below that mechanism's epsilon.

    >>> from uldp.accounting.rdp import rdp_gaussian, rdp_to_dp
    >>> curve = lambda alphas: rdp_gaussian(sigma=10.0, orders=alphas)
    >>> spent = group_rdp_epsilon(curve, k=2, delta=1e-5, group_orders=[2, 4, 8, 16, 32, 64])
    >>> orders = [1.5, 2, 4, 8, 16, 32, 64, 128]
    >>> rdp_to_dp(orders=orders, rdp=rdp_gaussian(sigma=5.0, orders=orders), delta=1e-5).epsilon < spent.epsilon
    True
    """
    k = check_integer("group size k", k)
    delta = check_delta(delta)
    if not is_power_of_two(k):
        raise ValueError(
            f"RDP group privacy needs k a power of two, got k={k}; see group_epsilon_bounds"
        )
    # Base orders above 64 are rounded to integers, which keeps the sub-sampled RDP on opacus' fast exact path.
    base = check_orders(group_orders) * k
    base = np.unique(np.where(base > 64, np.round(base), base))
    betas = base[(base >= 2 * k) & (base <= MAX_BASE_ORDER)] / k
    if betas.size == 0:
        raise ValueError(
            f"no group order in {check_orders(group_orders).tolist()!r} satisfies "
            f"2 <= beta <= {MAX_BASE_ORDER / k}"
        )
    c = k.bit_length() - 1
    group_rdp = 3.0**c * rdp_curve(betas * k)
    epsilons = dp_epsilons(orders=betas, rdp=group_rdp, delta=delta)
    return best_of(
        epsilons, betas, delta=delta, hard_lower_edge=betas[0] == 2, what=f"group RDP (k={k})"
    )


def paper_group_rdp_epsilon(rdp_curve: RdpCurve, *, k: int, delta: float) -> PrivacySpent:
    """The paper's Figure 2 computation of RDP group privacy, reproduced to show its erratum.

    The authors' code (``get_group_privacy_spent`` in their ``noise_utils.py``) minimises over the base orders
    ``[2k + i/10 for i < 100] + linspace(k + 10, 64 k, 20)``. For ``k >= 16`` the second list starts below
    ``2k``, outside the lemma's domain, and the minimum lands there: the result is NOT a valid guarantee. The
    reported ``order`` is the base order ``alpha``, as in the authors' code.

    Args:
        rdp_curve: The record-level RDP as a function of an array of base orders.
        k: Group size, a power of two.
        delta: Target delta in (0, 1).

    Returns:
        The paper-style epsilon (a lower value than any valid one when an invalid order wins).
    """
    k = check_integer("group size k", k)
    delta = check_delta(delta)
    if not is_power_of_two(k):
        raise ValueError(f"the paper's computation needs k a power of two, got k={k}")
    alphas = np.concatenate([2 * k + np.arange(100) / 10.0, np.linspace(k + 10, 64 * k, 20)])
    c = k.bit_length() - 1
    epsilons = dp_epsilons(orders=alphas / k, rdp=3.0**c * rdp_curve(alphas), delta=delta)
    index = int(np.nanargmin(epsilons))
    return PrivacySpent(epsilon=float(epsilons[index]), order=float(alphas[index]), delta=delta)


def group_dp_epsilon(
    rdp_curve: RdpCurve, *, k: int, delta: float, orders: ArrayLike = DEFAULT_ORDERS
) -> PrivacySpent:
    """(epsilon, delta) for groups of ``k`` records via (epsilon, delta) group privacy (paper Lemma 5).

    For each order ``alpha`` the record-level guarantee is ``(eps_alpha(d), d)`` for every input delta ``d``
    (Lemma 2) and the group guarantee is ``(k eps_alpha(d), k e^((k-1) eps_alpha(d)) d)``. Setting the group
    delta to the target has a closed-form solution in ``log d`` for each ``alpha > k``::

        log d = (log delta - log k - (k-1) A_alpha) (alpha - 1) / (alpha - k),
        A_alpha = rho(alpha) + log((alpha-1)/alpha) - log(alpha) / (alpha - 1),

    kept when ``0 < d < 1``. Minimising ``k eps_alpha(d)`` over the orders replaces the paper's bisection over
    ``d`` with an exact solve per order; on the same orders both give the same value (see
    :func:`paper_group_dp_epsilon`). The default grid reaches order 4096, so ``k`` is not capped.

    Args:
        rdp_curve: The record-level RDP as a function of an array of orders.
        k: Group size, any integer >= 1.
        delta: Target group delta in (0, 1).
        orders: Candidate orders.

    Returns:
        The smallest group epsilon and the order that gave it.

    A group of one record is the record-level guarantee (Lemma 2 on the same orders):

    >>> from uldp.accounting.rdp import rdp_gaussian, rdp_to_dp
    >>> curve = lambda alphas: rdp_gaussian(sigma=10.0, orders=alphas)
    >>> orders = np.array([8.0, 16.0, 32.0, 64.0])
    >>> spent = group_dp_epsilon(curve, k=1, delta=1e-5, orders=orders)
    >>> spent == rdp_to_dp(orders=orders, rdp=curve(orders), delta=1e-5)
    True
    """
    k = check_integer("group size k", k)
    delta = check_delta(delta)
    alphas = check_orders(orders)
    rho = rdp_curve(alphas)
    if k == 1:
        return best_of(
            dp_epsilons(orders=alphas, rdp=rho, delta=delta),
            alphas,
            delta=delta,
            what="group DP (k=1)",
        )
    usable = alphas > k
    alphas, rho = alphas[usable], rho[usable]
    constant = rho + np.log((alphas - 1) / alphas) - np.log(alphas) / (alphas - 1)
    with np.errstate(invalid="ignore", over="ignore"):
        log_input_delta = (
            (math.log(delta) - math.log(k) - (k - 1) * constant) * (alphas - 1) / (alphas - k)
        )
        record_eps = constant - log_input_delta / (alphas - 1)
        epsilons = np.where((log_input_delta < 0) & np.isfinite(record_eps), k * record_eps, np.inf)
    return best_of(epsilons, alphas, delta=delta, what=f"group DP (k={k})")


def paper_group_dp_epsilon(rdp_curve: RdpCurve, *, k: int, delta: float) -> PrivacySpent:
    """The paper's Figure 2 (epsilon, delta) route: :func:`group_dp_epsilon` on the authors' orders
    (:data:`AUTHORS_DP_ORDERS`, up to 63) with ``k`` capped at :data:`AUTHORS_DP_MAX_K`, as their code runs it.

    A valid guarantee for ``min(k, 62)`` records, not for ``k`` when ``k > 62``; far looser than the same route on
    a wide grid of orders when ``k`` nears 63, because only orders ``alpha > k`` give a group guarantee.

    >>> from uldp.accounting.rdp import rdp_gaussian
    >>> curve = lambda alphas: rdp_gaussian(sigma=10.0, orders=alphas)
    >>> paper_group_dp_epsilon(curve, k=60, delta=1e-5).epsilon > 5 * group_dp_epsilon(curve, k=60, delta=1e-5).epsilon
    True
    """
    k = check_integer("group size k", k)
    with (
        warnings.catch_warnings()
    ):  # the optimum on the grid's edge (63) is the point here, not a surprise
        warnings.simplefilter("ignore", RuntimeWarning)
        return group_dp_epsilon(
            rdp_curve, k=min(k, AUTHORS_DP_MAX_K), delta=delta, orders=AUTHORS_DP_ORDERS
        )


@dataclass(frozen=True)
class GroupPrivacySpent:
    """A group-privacy guarantee for a group size that may not be a power of two.

    Attributes:
        k: The requested group size.
        epsilon: A valid epsilon for groups of ``k`` (from ``k_upper``, the next power of two).
        order: Group RDP order of ``epsilon``.
        delta: Target delta.
        k_upper: Smallest power of two ``>= k`` (the valid upper bound is computed for it).
        k_lower: Largest power of two ``<= k``.
        epsilon_lower: Epsilon for ``k_lower``: what the paper reports for such ``k``; a lower bound on what
            the RDP route can certify for ``k``, NOT a guarantee. Equal to ``epsilon`` when ``k`` is a power of two.
    """

    k: int
    epsilon: float
    order: float
    delta: float
    k_upper: int
    k_lower: int
    epsilon_lower: float


def group_epsilon_bounds(
    rdp_curve: RdpCurve, *, k: int, delta: float, group_orders: ArrayLike = DEFAULT_ORDERS
) -> GroupPrivacySpent:
    """RDP group privacy for any ``k``: a valid bound from the next power of two, and the paper's lower value.

    Args:
        rdp_curve: The record-level RDP as a function of an array of base orders.
        k: Group size >= 1.
        delta: Target delta in (0, 1).
        group_orders: Candidate group orders.

    Returns:
        Both values, labelled.
    """
    k_lower, k_upper = power_of_two_bounds(k)
    upper = group_rdp_epsilon(rdp_curve, k=k_upper, delta=delta, group_orders=group_orders)
    lower = (
        upper
        if k_lower == k_upper
        else group_rdp_epsilon(rdp_curve, k=k_lower, delta=delta, group_orders=group_orders)
    )
    return GroupPrivacySpent(
        k=k,
        epsilon=upper.epsilon,
        order=upper.order,
        delta=upper.delta,
        k_upper=k_upper,
        k_lower=k_lower,
        epsilon_lower=lower.epsilon,
    )


def group_privacy_table(
    *, sigma: float, q: float, steps: int, delta: float, ks: Sequence[int]
) -> list[dict[str, float | int | bool]]:
    """The paper's Figure 2: group epsilon of a sub-sampled Gaussian run for each group size in ``ks``.

    Args:
        sigma: Noise multiplier.
        q: Record-level Poisson sampling rate.
        steps: Number of iterations.
        delta: Target delta.
        ks: Group sizes (any integers >= 1).

    Returns:
        One row per ``k``: ``epsilon_rdp`` (valid RDP group privacy, next power of two for other ``k``),
        ``epsilon_rdp_lower`` (the largest power of two below, the paper's value for such ``k``),
        ``epsilon_dp`` (Lemma 5, exact per-order solve), ``epsilon_dp_paper`` (the same on the authors' orders up
        to 63, ``k`` capped at 62: their plotted value), ``epsilon_rdp_paper`` (the authors' grid, for powers of
        two) and ``paper_grid_valid`` (whether that grid's optimum lies in the lemma's domain).
    """
    sigma, q, steps = (
        check_positive("sigma", sigma),
        check_rate("q", q),
        check_integer("steps", steps, minimum=0),
    )

    def curve(alphas: np.ndarray) -> np.ndarray:
        return rdp_subsampled_gaussian(sigma=sigma, q=q, steps=steps, orders=alphas)

    rows = []
    for k in ks:
        bounds = group_epsilon_bounds(curve, k=k, delta=delta)
        row: dict[str, float | int | bool] = {
            "k": int(k),
            "epsilon_rdp": bounds.epsilon,
            "epsilon_rdp_lower": bounds.epsilon_lower,
            "epsilon_dp": group_dp_epsilon(curve, k=k, delta=delta).epsilon,
            "epsilon_dp_paper": paper_group_dp_epsilon(curve, k=k, delta=delta).epsilon,
        }
        if is_power_of_two(k):
            paper = paper_group_rdp_epsilon(curve, k=k, delta=delta)
            row["epsilon_rdp_paper"] = paper.epsilon
            row["paper_grid_valid"] = bool(paper.order >= 2 * k)
        rows.append(row)
    return rows
