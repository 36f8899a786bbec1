"""User sampling's epsilon against whoever sees the sample: no amplification by a sample the adversary knows.

Lemma 4 (the sub-sampled Gaussian, Algorithm 4) amplifies privacy only against an adversary that does not know
which rounds held the user: the paper's paragraph "Private user-level sub-sampling" says so, since in Protocol 1 the
server draws the sample. Each reported epsilon with user sampling therefore names its :class:`Adversary`:

- :attr:`Adversary.MODEL_READERS`: whoever sees the released models and not the sample (the paper's amplified
  epsilon; also the server's when the silos draw the sample from randomness it never learns).
- :attr:`Adversary.SERVER_SEES_SAMPLE`: a server that draws the sample honestly (Poisson at rate ``q``) and knows
  it. Given the sample, user u took part in ``k ~ Binomial(T, q)`` rounds, and ``T`` rounds of the Gaussian with
  multiplier ``sigma`` restricted to those ``k`` are one Gaussian with ``mu = sqrt(k) / sigma`` (Theorem 3). The
  sample does not depend on the data, so the pair of views (sample, releases) has the privacy profile

  ``delta(eps) = sum_k Binom(k; T, q) delta_Gauss(eps; sqrt(k) / sigma)``,

  where ``delta_Gauss(eps; mu) = Phi(mu / 2 - eps / mu) - e^eps Phi(-mu / 2 - eps / mu)`` is the Gaussian
  mechanism's exact profile (Balle and Wang 2018, Theorem 8): the hockey-stick divergence of a mixture over a
  common public variable is the mixture of the divergences. Computed three ways, cross-checked in
  ``tests/test_accounting_known_sample.py``: the closed form (exact, :func:`epsilon_known_sample`), PLD per ``k``
  (dp-accounting, :func:`epsilon_known_sample_pld`) and RDP per ``k`` converted by Lemma 2
  (:func:`epsilon_known_sample_rdp`), each mixed over ``k``.
- :attr:`Adversary.SERVER_CHOOSES_SAMPLE`: a server that picks the sample can put a target in every round: no
  amplification at all, the epsilon at ``q = 1`` (Theorem 3).

A silo that knows the actual sample can account each user's actual participation ex post
(:func:`epsilon_of_participation`).
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING

import numpy as np

from uldp.accounting.adversary import Adversary
from uldp.accounting.pld import MASS_TRUNCATION, _pld_module, pld_epsilon
from uldp.accounting.rdp import DEFAULT_ORDERS, PrivacySpent, check_orders
from uldp.common.checks import check_delta, check_integer, check_positive, check_rate

if TYPE_CHECKING:
    from collections.abc import Callable

    from numpy.typing import ArrayLike

    from uldp.accounting.accountants import Accountant


def participation(
    *, rounds: int, q: float, truncation: float = 0.0
) -> tuple[np.ndarray, np.ndarray, float]:
    """The distribution of the rounds that hold one user: ``k ~ Binomial(T, q)``.

    Args:
        rounds: T.
        q: The Poisson sampling rate.
        truncation: Masses below it are dropped (0: none).

    Returns:
        ``(k, pmf, dropped)``: the values kept, their probabilities (not renormalised) and the mass dropped, which
        bounds what the dropped values add to any delta (each of their deltas is at most 1).

    >>> k, pmf, dropped = participation(rounds=2, q=0.5)
    >>> k.tolist(), pmf.round(12).tolist(), dropped
    ([0, 1, 2], [0.25, 0.5, 0.25], 0.0)
    """
    from scipy import stats  # here, not at the top: ``uldp epsilon`` stays free of scipy

    k = np.arange(rounds + 1)
    pmf = stats.binom.pmf(k, rounds, q)
    keep = pmf >= truncation
    return k[keep], pmf[keep], float(pmf[~keep].sum())


def gaussian_delta(*, mu: ArrayLike, epsilon: float) -> np.ndarray:
    """The Gaussian mechanism's exact privacy profile ``delta(eps; mu)`` (Balle and Wang 2018, Theorem 8).

    Args:
        mu: Sensitivity over noise std, one value or an array (0 gives delta 0).
        epsilon: The epsilon at which to evaluate it (>= 0).

    Returns:
        ``Phi(mu / 2 - eps / mu) - e^eps Phi(-mu / 2 - eps / mu)`` elementwise.

    >>> float(gaussian_delta(mu=1.0, epsilon=0.0)[0].round(6))  # total variation of N(0,1), N(1,1): 2 Phi(1/2) - 1
    0.382925
    """
    from scipy import special

    mus = np.atleast_1d(np.asarray(mu, dtype=float))
    safe = np.where(mus > 0, mus, 1.0)
    value = special.ndtr(safe / 2 - epsilon / safe) - np.exp(
        epsilon + special.log_ndtr(-safe / 2 - epsilon / safe)
    )
    return np.where(mus > 0, np.maximum(value, 0.0), 0.0)


def _solve_profile(profile: Callable[[float], float], *, delta: float) -> float:
    """The smallest epsilon >= 0 with ``profile(epsilon) <= delta`` for a decreasing profile (Brent)."""
    if profile(0.0) <= delta:
        return 0.0
    high = 1.0
    while profile(high) > delta:
        high *= 2
        if high > 1e6:
            return math.inf
    from scipy import optimize

    return float(optimize.brentq(lambda eps: profile(eps) - delta, 0.0, high, xtol=1e-12))


def _checked(sigma: float, q: float, rounds: int, delta: float) -> tuple[float, float, int, float]:
    return (
        check_positive("sigma", sigma),
        check_rate("q", q),
        check_integer("rounds", rounds, minimum=0),
        check_delta(delta),
    )


def epsilon_known_sample(*, sigma: float, q: float, rounds: int, delta: float) -> PrivacySpent:
    """User-level (epsilon, delta) of ULDP-SGD/AVG with user sampling against a server that sees the sample, exact.

    The closed form of the module docstring: ``delta(eps) = sum_k Binom(k; T, q) delta_Gauss(eps; sqrt(k) /
    sigma)`` (Theorem 3 per participation count, Algorithm 4's Poisson sample known), solved for ``delta``.

    Args:
        sigma: Noise multiplier (of the summed noise).
        q: User-level Poisson sampling rate in (0, 1].
        rounds: T (>= 0).
        delta: Target delta in (0, 1).

    Returns:
        The guarantee, its adversary :attr:`Adversary.SERVER_SEES_SAMPLE` (``order`` nan).

    One round: the user is in it with probability q, so ``q delta_Gauss(eps; 1 / sigma) = delta``:

    >>> spent = epsilon_known_sample(sigma=2.0, q=0.1, rounds=1, delta=1e-5)
    >>> from uldp.accounting.pld import gaussian_epsilon
    >>> math.isclose(spent.epsilon, gaussian_epsilon(mu=0.5, delta=1e-4), rel_tol=1e-8)
    True
    """
    sigma, q, rounds, delta = _checked(sigma, q, rounds, delta)
    k, pmf, _ = participation(rounds=rounds, q=q)
    mus = np.sqrt(k) / sigma

    def profile(epsilon: float) -> float:
        return float(pmf @ gaussian_delta(mu=mus, epsilon=epsilon))

    return PrivacySpent(
        epsilon=_solve_profile(profile, delta=delta),
        order=math.nan,
        delta=delta,
        adversary=Adversary.SERVER_SEES_SAMPLE,
    )


def epsilon_known_sample_pld(
    *,
    sigma: float,
    q: float,
    rounds: int,
    delta: float,
    value_discretization_interval: float | None = None,
) -> PrivacySpent:
    """:func:`epsilon_known_sample` by dp-accounting's PLD: one Gaussian PLD per participation count ``k``
    (``mu = sqrt(k) / sigma``, Theorem 3), their deltas mixed by ``Binom(k; T, q)``.

    Each PLD is discretised pessimistically, so its delta, and the mixture's epsilon, is an upper bound on the
    exact one. Counts of mass below :data:`uldp.accounting.pld.MASS_TRUNCATION` are dropped and their mass taken
    from the target delta.

    Args:
        sigma, q, rounds, delta: As in :func:`epsilon_known_sample`.
        value_discretization_interval: The PLD step (``None``: chosen by :func:`uldp.accounting.pld.pld_epsilon`).

    Returns:
        The guarantee against :attr:`Adversary.SERVER_SEES_SAMPLE`.
    """
    sigma, q, rounds, delta = _checked(sigma, q, rounds, delta)
    k, pmf, dropped = participation(rounds=rounds, q=q, truncation=MASS_TRUNCATION)
    present = k > 0
    if not present.any():  # no round yet, or none that can hold the user
        return PrivacySpent(
            epsilon=0.0, order=math.nan, delta=delta, adversary=Adversary.SERVER_SEES_SAMPLE
        )
    pld = _pld_module()

    def epsilon_at(interval: float) -> float:
        curves = [
            pld.from_gaussian_mechanism(
                sigma / math.sqrt(count), value_discretization_interval=interval
            )
            for count in k[present]
        ]

        def profile(epsilon: float) -> float:
            return sum(
                float(p) * curve.get_delta_for_epsilon(epsilon)
                for p, curve in zip(pmf[present], curves, strict=True)
            )

        return _solve_profile(profile, delta=delta - dropped)

    return PrivacySpent(
        epsilon=pld_epsilon(
            epsilon_at, value_discretization_interval=value_discretization_interval
        ),
        order=math.nan,
        delta=delta,
        adversary=Adversary.SERVER_SEES_SAMPLE,
    )


def epsilon_known_sample_rdp(
    *, sigma: float, q: float, rounds: int, delta: float, orders: ArrayLike = DEFAULT_ORDERS
) -> PrivacySpent:
    """:func:`epsilon_known_sample` by RDP: for each participation count ``k`` the Gaussian's RDP ``k alpha / (2
    sigma^2)`` (Theorem 3) converted to a delta at each epsilon by the paper's Lemma 2, solved for delta
    (``delta_k(eps) = min_alpha exp((alpha - 1)(rho + log((alpha - 1) / alpha) - eps)) / alpha``), mixed by
    ``Binom(k; T, q)``.

    Lemma 2's delta bounds the exact one, so this epsilon is at least :func:`epsilon_known_sample`'s.

    Args:
        sigma, q, rounds, delta: As in :func:`epsilon_known_sample`.
        orders: RDP orders to minimise over (each count takes its own best order).

    Returns:
        The guarantee against :attr:`Adversary.SERVER_SEES_SAMPLE` (``order`` nan: one per count).
    """
    sigma, q, rounds, delta = _checked(sigma, q, rounds, delta)
    alphas = check_orders(orders)
    k, pmf, dropped = participation(rounds=rounds, q=q, truncation=MASS_TRUNCATION)
    rho = np.outer(k, alphas) / (2 * sigma**2)
    exponent_base = (alphas - 1) * (rho + np.log((alphas - 1) / alphas)) - np.log(alphas)

    def profile(epsilon: float) -> float:
        log_deltas = np.min(exponent_base - (alphas - 1) * epsilon, axis=1)
        per_count = np.where(k > 0, np.minimum(np.exp(np.minimum(log_deltas, 0.0)), 1.0), 0.0)
        return float(pmf @ per_count)

    return PrivacySpent(
        epsilon=_solve_profile(profile, delta=delta - dropped),
        order=math.nan,
        delta=delta,
        adversary=Adversary.SERVER_SEES_SAMPLE,
    )


def epsilon_chosen_sample(*, sigma: float, rounds: int, delta: float) -> PrivacySpent:
    """User-level (epsilon, delta) against a server that chooses the sample: a target may be in every round, so
    ``T`` rounds of the Gaussian with multiplier ``sigma`` (Theorem 3 at ``q = 1``), exact (Balle and Wang 2018).

    Args:
        sigma: Noise multiplier.
        rounds: T (>= 0).
        delta: Target delta in (0, 1).

    Returns:
        The guarantee against :attr:`Adversary.SERVER_CHOOSES_SAMPLE`.

    >>> chosen = epsilon_chosen_sample(sigma=5.0, rounds=100, delta=1e-5).epsilon
    >>> math.isclose(chosen, epsilon_known_sample(sigma=5.0, q=1.0, rounds=100, delta=1e-5).epsilon)
    True
    """
    spent = epsilon_of_participation(sigma=sigma, k=rounds, delta=delta)
    return PrivacySpent(
        epsilon=spent.epsilon,
        order=math.nan,
        delta=spent.delta,
        adversary=Adversary.SERVER_CHOOSES_SAMPLE,
    )


def epsilon_of_participation(*, sigma: float, k: int, delta: float) -> PrivacySpent:
    """Ex post: the epsilon of a user who took part in ``k`` rounds of a known sample (one Gaussian with ``mu =
    sqrt(k) / sigma``, Theorem 3; Balle and Wang 2018's exact profile). A silo that knows the actual sample reports
    the largest over its users.

    Args:
        sigma: Noise multiplier.
        k: Rounds that held the user (>= 0).
        delta: Target delta in (0, 1).

    Returns:
        The guarantee against :attr:`Adversary.SERVER_SEES_SAMPLE` (0 for a user never sampled).
    """
    sigma = check_positive("sigma", sigma)
    mu = math.sqrt(check_integer("k", k, minimum=0)) / sigma
    delta = check_delta(delta)
    return PrivacySpent(
        epsilon=_solve_profile(
            lambda eps: float(gaussian_delta(mu=mu, epsilon=eps)[0]), delta=delta
        ),
        order=math.nan,
        delta=delta,
        adversary=Adversary.SERVER_SEES_SAMPLE,
    )


def gaussian_against(
    chosen: Accountant,
    adversary: Adversary,
    *,
    sigma: float,
    rounds: int,
    delta: float,
    q: float,
    value_discretization_interval: float | None = None,
) -> PrivacySpent:
    """``rounds`` rounds of the Gaussian with multiplier ``sigma`` and user sampling at rate ``q`` (Theorem 3,
    Algorithm 4) against ``adversary``, by the accountant ``chosen``: Lemma 4's amplification for
    ``MODEL_READERS``, the known-sample mixture for ``SERVER_SEES_SAMPLE``, ``q = 1`` for
    ``SERVER_CHOOSES_SAMPLE``. With ``q < 1`` the result names its adversary; at ``q = 1`` every adversary alike.
    """
    q = check_rate("q", q)
    if q == 1.0 or adversary is Adversary.SERVER_CHOOSES_SAMPLE:
        spent = chosen.gaussian(
            sigma=sigma,
            rounds=rounds,
            delta=delta,
            q=1.0,
            value_discretization_interval=value_discretization_interval,
        )
    elif adversary is Adversary.SERVER_SEES_SAMPLE:
        spent = chosen.known_sample(
            sigma=sigma,
            rounds=rounds,
            delta=delta,
            q=q,
            value_discretization_interval=value_discretization_interval,
        )
    else:
        spent = chosen.gaussian(
            sigma=sigma,
            rounds=rounds,
            delta=delta,
            q=q,
            value_discretization_interval=value_discretization_interval,
        )
    return dataclasses.replace(spent, adversary=None if q == 1.0 else adversary)
