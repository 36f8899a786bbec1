"""Rényi DP of the (sub-sampled) Gaussian mechanism and its conversion to (epsilon, delta)-DP.

The RDP curves of the sub-sampled Gaussian (the paper's Lemma 4) come from opacus' analysis (Mironov, Talwar and
Zhang 2019, the numerically tight bound behind that lemma); the conversion is the paper's Lemma 2
(Balle et al. 2020, Theorem 21). Everything here is a pure function of its keyword arguments.
"""

from __future__ import annotations

import functools
import math
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from uldp.common.checks import check_delta, check_integer, check_positive, check_rate
from uldp.common.logs import import_quietly

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from uldp.accounting.adversary import Adversary

#: The order grid over which epsilon is minimised: 1.1 to 10.9 in steps of 0.1 (where small-epsilon optima lie),
#: every integer from 11 to 63, then 40 geometrically spaced integers from 64 to 4096 (needed by large groups and
#: by very large noise). A warning is raised when the optimum sits on an edge of the grid that is not a hard
#: limit of the lemma used.
DEFAULT_ORDERS: np.ndarray = np.unique(
    np.concatenate(
        [
            1.0 + np.arange(1, 100) / 10.0,
            np.arange(11, 64, dtype=float),
            np.round(np.geomspace(64, 4096, 40)),
        ]
    )
)


@dataclass(frozen=True)
class PrivacySpent:
    """An (epsilon, delta)-DP guarantee and the RDP order that gave it.

    Attributes:
        epsilon: The privacy loss ``epsilon`` (``inf`` when there is no guarantee).
        order: The RDP order ``alpha`` at which the conversion was tightest (``nan`` when none).
        delta: The target ``delta``.
        adversary: Whom it holds against where user sampling makes it depend on that (:class:`Adversary`);
            None where it does not (no user sampling: every adversary alike).
        colluders: How many silos may collude with that adversary (removing their own noise shares) and the
            guarantee still hold (a silo policy's collusion threshold; 0: the paper's, every silo honest).
    """

    epsilon: float
    order: float
    delta: float
    adversary: Adversary | None = None
    colluders: int = 0


def check_orders(orders: ArrayLike) -> np.ndarray:
    """Return ``orders`` as a float array after checking every order is > 1."""
    array = np.atleast_1d(np.asarray(orders, dtype=float))
    if array.size == 0 or not np.all(array > 1) or not np.all(np.isfinite(array)):
        raise ValueError(f"RDP orders must be finite and > 1, got {orders!r}")
    return array


def rdp_gaussian(*, sigma: float, orders: ArrayLike = DEFAULT_ORDERS) -> np.ndarray:
    """RDP of one Gaussian mechanism with noise multiplier ``sigma`` (paper Lemma 3): ``alpha / (2 sigma^2)``.

    Args:
        sigma: Noise standard deviation divided by the L2 sensitivity.
        orders: RDP orders ``alpha > 1``.

    Returns:
        The RDP ``rho(alpha)`` at each order.

    Raises:
        ValueError: If ``sigma <= 0`` or an order is ``<= 1``.

    >>> rdp_gaussian(sigma=2.0, orders=[2, 4]).tolist()
    [0.25, 0.5]
    """
    sigma = check_positive("sigma", sigma)
    return check_orders(orders) / (2.0 * sigma**2)


def _log_a_integer_order(q: float, sigma: float, alpha: int) -> float:
    """``log A_alpha`` of the sub-sampled Gaussian at an integer order, as opacus computes it, vectorised.

    ``A_alpha = sum_i binom(alpha, i) q^i (1 - q)^(alpha - i) exp((i^2 - i) / (2 sigma^2))`` (Mironov, Talwar and
    Zhang 2019, Section 3.3). opacus sums the terms one by one in Python (seconds for the orders up to 4096); this is
    the same sum with numpy, and like opacus it gives ``nan`` where ``binom`` overflows float64 (orders above about
    1030), which the conversion to epsilon ignores. Equal to opacus to float rounding (``tests/test_accounting.py``).
    """
    from scipy import special  # here, not at the top: ``uldp --help`` stays free of scipy

    i = np.arange(alpha + 1, dtype=float)
    with np.errstate(divide="ignore", over="ignore"):
        terms = (
            np.log(special.binom(alpha, i))
            + i * math.log(q)
            + (alpha - i) * math.log1p(-q)
            + (i * i - i) / (2 * sigma**2)
        )
    if not np.all(np.isfinite(terms)):
        return math.nan
    return float(special.logsumexp(terms))


@functools.lru_cache(maxsize=4096)
def _rdp_one_step(q: float, sigma: float, orders: tuple[float, ...]) -> np.ndarray:
    if q == 1.0:
        return np.asarray(orders, dtype=float) / (2 * sigma**2)
    # Imported here: importing opacus pulls in torch and its privacy engine (seconds), which the CLI's start-up
    # and the closed-form paths do not need.
    opacus_rdp = import_quietly(
        "opacus.accountants.analysis.rdp"
    )  # opacus configures the root logger

    values = []
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        # opacus' log-space helpers emit harmless overflow warnings at very large orders
        warnings.simplefilter("ignore", RuntimeWarning)
        for alpha in orders:
            log_a = (
                _log_a_integer_order(q, sigma, int(alpha))
                if float(alpha).is_integer()
                else opacus_rdp._compute_log_a_for_frac_alpha(q, sigma, alpha)
            )
            values.append(log_a / (alpha - 1))
    return np.asarray(values, dtype=float)


def rdp_subsampled_gaussian(
    *, sigma: float, q: float, steps: int, orders: ArrayLike = DEFAULT_ORDERS
) -> np.ndarray:
    """RDP of ``steps`` compositions of the Poisson-sub-sampled Gaussian mechanism (paper Lemmas 1 and 4).

    With ``q = 1`` this is ``steps * alpha / (2 sigma^2)`` (Lemma 3); for ``q < 1`` it is the numerically
    tight bound of Mironov, Talwar and Zhang (2019) as computed by opacus, composed by Lemma 1.

    Args:
        sigma: Noise multiplier (noise std / sensitivity).
        q: Poisson sampling rate in (0, 1].
        steps: Number of compositions (>= 0).
        orders: RDP orders ``alpha > 1``.

    Returns:
        ``rho(alpha)`` at each order.

    Raises:
        ValueError: On ``sigma <= 0``, ``q`` outside (0, 1], negative ``steps`` or orders ``<= 1``.

    >>> rdp_subsampled_gaussian(sigma=1.0, q=1.0, steps=3, orders=[2.0]).tolist()
    [3.0]
    """
    sigma = check_positive("sigma", sigma)
    q = check_rate("q", q)
    steps = check_integer("steps", steps, minimum=0)
    alphas = check_orders(orders)
    return steps * _rdp_one_step(q, sigma, tuple(alphas.tolist()))


def dp_epsilons(*, orders: ArrayLike, rdp: ArrayLike, delta: float) -> np.ndarray:
    """Per-order epsilon of the RDP to (epsilon, delta)-DP conversion (paper Lemma 2; Balle et al. 2020).

    ``epsilon(alpha) = rho + log((alpha - 1) / alpha) - (log(delta) + log(alpha)) / (alpha - 1)``.

    Args:
        orders: RDP orders ``alpha > 1``.
        rdp: ``rho`` at each order.
        delta: Target delta in (0, 1).

    Returns:
        The epsilon each order gives (any of them is a valid guarantee).
    """
    delta = check_delta(delta)
    alphas = check_orders(orders)
    rhos = np.atleast_1d(np.asarray(rdp, dtype=float))
    if rhos.shape != alphas.shape:
        raise ValueError(
            f"orders and rdp must have the same length, got {alphas.size} and {rhos.size}"
        )
    return rhos + np.log((alphas - 1) / alphas) - (math.log(delta) + np.log(alphas)) / (alphas - 1)


def best_of(
    epsilons: np.ndarray,
    orders: np.ndarray,
    *,
    delta: float,
    hard_lower_edge: bool = False,
    what: str = "epsilon",
) -> PrivacySpent:
    """Pick the smallest epsilon over orders, warning when the optimum is on a soft edge of the grid.

    Args:
        epsilons: Epsilon at each order (``nan``/``inf`` entries are ignored).
        orders: The orders reported with them.
        delta: The delta the guarantee holds for.
        hard_lower_edge: True when the smallest order is a limit of the lemma (no warning there).
        what: Name used in the warning.

    Returns:
        The best guarantee; ``epsilon = inf`` when no order gives a finite one.
    """
    finite = np.isfinite(epsilons)
    if not finite.any():
        return PrivacySpent(epsilon=math.inf, order=math.nan, delta=delta)
    index = int(np.argmin(np.where(finite, epsilons, np.inf)))
    at_low, at_high = index == 0, index == len(orders) - 1
    if at_high or (at_low and not hard_lower_edge):
        edge = "largest" if at_high else "smallest"
        warnings.warn(
            f"{what}: the optimal RDP order {orders[index]:g} is the {edge} of the grid; the bound may be loose "
            "(pass a wider grid of orders)",
            RuntimeWarning,
            stacklevel=3,
        )
    return PrivacySpent(epsilon=float(epsilons[index]), order=float(orders[index]), delta=delta)


def rdp_to_dp(*, orders: ArrayLike, rdp: ArrayLike, delta: float) -> PrivacySpent:
    """Convert an RDP curve to the tightest (epsilon, delta)-DP guarantee over the orders (paper Lemma 2).

    Args:
        orders: RDP orders ``alpha > 1``.
        rdp: ``rho(alpha)`` at each order.
        delta: Target delta in (0, 1).

    Returns:
        The smallest epsilon over the orders, with its order.

    Raises:
        ValueError: On delta outside (0, 1) or mismatched lengths.

    Lemma 2 at each order, by hand: ``rho + log((alpha - 1) / alpha) - (log delta + log alpha) / (alpha - 1)``.

    >>> lemma2 = lambda a, rho: rho + math.log((a - 1) / a) - (math.log(1e-5) + math.log(a)) / (a - 1)
    >>> spent = rdp_to_dp(orders=[2.0, 3.0, 4.0], rdp=[0.1, 0.5, 3.0], delta=1e-5)
    >>> math.isclose(spent.epsilon, min(lemma2(2.0, 0.1), lemma2(3.0, 0.5), lemma2(4.0, 3.0))), spent.order
    (True, 3.0)
    """
    alphas = check_orders(orders)
    return best_of(
        dp_epsilons(orders=alphas, rdp=rdp, delta=delta), alphas, delta=delta, what="rdp_to_dp"
    )
