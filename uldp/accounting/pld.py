"""Privacy-loss-distribution (PLD) accounting of every method: tighter than RDP, selected by name.

RDP (:mod:`uldp.accounting.rdp`) bounds the privacy loss through its moments and loses some slack converting them
to (epsilon, delta) (the paper's Lemma 2). A PLD holds the whole distribution of the privacy loss, discretised
pessimistically, so its epsilon is an upper bound within the discretisation step of the exact one (Koskela et
al. 2020; Doroshenko et al. 2022, connect-the-dots). Everything here is dp-accounting 0.6.0's PLD:

- ULDP-NAIVE (Theorem 1) and ULDP-SGD/AVG without sampling (Theorem 3): a Gaussian with noise multiplier
  ``sigma`` for ``T`` rounds is exactly one Gaussian with multiplier ``sigma / sqrt(T)``
  (``from_gaussian_mechanism``; no composition error).
- ULDP-SGD/AVG with user-level Poisson sampling at rate ``q`` (Algorithm 4): the sub-sampled Gaussian of Lemma 4,
  ``from_gaussian_mechanism(sampling_prob=q)`` composed ``T`` times (``self_compose``).
- ULDP-GROUP-k (Theorem 2): instead of record-level RDP and a group-privacy conversion (RDP group privacy,
  Lemma 6, or (epsilon, delta) group privacy, Lemma 5), the pair of distributions of a ``k``-record group is
  accounted directly. Under Poisson sampling at rate ``gamma`` the
  number of the group's records in a batch is ``J ~ Binomial(k, gamma)``; with clipped gradients aligned (the
  worst case: Choquette-Choo, Ganesh, Steinke and Thakurta 2023, Corollary 4.7) one DP-SGD step is the mixture of
  Gaussians ``sum_j P(J = j) N(j, sigma^2)`` against ``N(0, sigma^2)`` (Ganesh 2024, "Tight group-level DP
  guarantees for DP-SGD with sampling via mixture of Gaussians mechanisms"): ``from_mixture_gaussian_mechanism``,
  composed over the silo's steps. Over silos it is composed as Theorem 2 composes: the maximum over silos.

What dp-accounting lacks, written here: the binomial sensitivity distribution of a group (a few lines), the
maximum over silos, and the choice of the discretisation step (:func:`pld_epsilon`).

Scope of the group bound: it is the guarantee for a group whose ``k`` records lie in the silo that costs most,
as Theorem 2's ``max_s rho_s``. When silos share the rate and steps, this is also the worst placement of the
group over silos: a split puts ``(j_1, ..., j_S)`` sampled records in parallel releases, a vector of norm
``sqrt(sum j_s^2) <= sum j_s``, dominated by the aligned mixture (Corollary 4.7 above). For silos with different
rates and steps no such proof is given here.
"""

from __future__ import annotations

import functools
import math
from typing import TYPE_CHECKING

import numpy as np

from uldp.accounting.rdp import PrivacySpent
from uldp.common.checks import check_delta, check_integer, check_number, check_positive, check_rate

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

#: The discretisation steps of :func:`pld_epsilon`: the first one, the finest one (RELATIVE_INTERVAL times epsilon,
#: never below SMALLEST_INTERVAL) and the relative move of epsilon under which refining stops. FINE_INTERVAL is the
#: step of a PLD built without one. The finest step is relative to epsilon, with no absolute floor near the
#: epsilons in use: a floor of 1e-4 left epsilon 0.0111 at sigma 150, 3000 rounds, q 0.01, where the exact value is
#: 0.00876 and RDP gives 0.0101 (``tests/test_accounting_pld.py``).
COARSE_INTERVAL = 3e-2
FINE_INTERVAL = 1e-4
RELATIVE_INTERVAL = 3e-5
SMALLEST_INTERVAL = 1e-9
REFINE_TOLERANCE = 0.01
#: Binomial masses below this are dropped from a group's sensitivity distribution (delta pays for them).
MASS_TRUNCATION = 1e-30


def _pld_module():
    # Imported here: dp-accounting pulls in its whole package (about a second), which RDP-only callers skip.
    from dp_accounting.pld import privacy_loss_distribution

    return privacy_loss_distribution


def gaussian_epsilon(*, mu: float, delta: float) -> float:
    """The exact epsilon at ``delta`` of the Gaussian mechanism with ``mu = sensitivity / noise std``.

    Its privacy profile is ``delta(eps) = Phi(mu / 2 - eps / mu) - e^eps Phi(-mu / 2 - eps / mu)`` (Theorem 8 of Balle
    and
    Wang 2018), decreasing in ``eps``; this solves ``delta(eps) = delta`` (Brent). It is the tightest valid
    epsilon of ULDP-NAIVE and ULDP-SGD/AVG without sampling (``mu = sqrt(T) / sigma``, Theorems 1 and 3), and the
    epsilon of mu-GDP (Dong, Roth and Su 2022), which the audits use (:mod:`uldp.audit.estimators`).

    Args:
        mu: Sensitivity over noise standard deviation (>= 0).
        delta: Target delta in (0, 1).

    Returns:
        Epsilon (0 when ``delta(0) <= delta``).

    Raises:
        ValueError: Negative or non-finite ``mu``, or a bad ``delta``.

    >>> round(gaussian_epsilon(mu=1.0, delta=1e-5), 4) == round(epsilon_uldp_pld(sigma=1.0, rounds=1,
    ...                                                                       delta=1e-5).epsilon, 4)
    True
    """
    mu = check_number("mu", mu, at_least=0, finite=True)
    delta = check_delta(delta)

    def phi(
        x: float,
    ) -> float:  # the normal cdf through erfc: accurate in the lower tail, where 1 + erf is not
        return 0.5 * math.erfc(-x / math.sqrt(2))

    def profile(eps: float) -> float:
        return phi(mu / 2 - eps / mu) - math.exp(eps) * phi(-mu / 2 - eps / mu) - delta

    if mu == 0 or profile(0.0) <= 0:
        return 0.0
    high = 1.0
    while profile(high) > 0:
        high *= 2
    from scipy import optimize  # here, not at the top: ``uldp epsilon`` stays free of scipy

    return float(optimize.brentq(profile, 0.0, high, xtol=1e-12))


def gaussian_pld(
    *,
    sigma: float,
    q: float = 1.0,
    steps: int,
    value_discretization_interval: float = FINE_INTERVAL,
):
    """PLD of ``steps`` compositions of the Poisson-sub-sampled Gaussian (Lemma 4; Theorems 1 and 3 at ``q = 1``).

    At ``q = 1`` the composition is exact: ``T`` Gaussians of multiplier ``sigma`` are one of ``sigma / sqrt(T)``.

    Args:
        sigma: Noise multiplier.
        q: Poisson sampling rate in (0, 1].
        steps: Compositions (>= 1).
        value_discretization_interval: The PLD's discretisation step (pessimistic rounding).

    Returns:
        A ``dp_accounting.pld.privacy_loss_distribution.PrivacyLossDistribution`` (add and remove relations).
    """
    pld = _pld_module()
    if q == 1.0:
        return pld.from_gaussian_mechanism(
            sigma / math.sqrt(steps), value_discretization_interval=value_discretization_interval
        )
    one = pld.from_gaussian_mechanism(
        sigma, sampling_prob=q, value_discretization_interval=value_discretization_interval
    )
    return one.self_compose(steps)


def group_sensitivities(*, k: int, q: float) -> tuple[np.ndarray, np.ndarray, float]:
    """The sensitivity distribution of a ``k``-record group under Poisson sampling: ``J ~ Binomial(k, q)``.

    Returns:
        ``(sensitivities, probabilities, dropped)``: the values ``j`` whose mass is at least
        :data:`MASS_TRUNCATION`, their probabilities renormalised, and the mass dropped (a bound on the total
        variation between the exact and the truncated mixture, added to delta by :func:`group_pld_epsilon`).

    >>> values, probs, dropped = group_sensitivities(k=2, q=0.5)
    >>> values.tolist(), np.round(probs, 12).tolist(), dropped
    ([0.0, 1.0, 2.0], [0.25, 0.5, 0.25], 0.0)
    """
    j = np.arange(k + 1)
    from scipy import stats  # here, not at the top: ``uldp epsilon`` stays free of scipy

    mass = stats.binom.pmf(j, k, q)
    keep = mass >= MASS_TRUNCATION
    dropped = float(mass[~keep].sum())
    return j[keep].astype(float), mass[keep] / mass[keep].sum(), dropped


def group_pld(
    *,
    sigma: float,
    q: float,
    steps: int,
    k: int,
    value_discretization_interval: float = FINE_INTERVAL,
):
    """PLD of ``steps`` DP-SGD steps for a group of ``k`` records: the mixture of Gaussians (Ganesh 2024).

    One step releases ``N(J, sigma^2)`` with ``J ~ Binomial(k, q)`` against ``N(0, sigma^2)`` (sensitivity 1 per
    record, clipped gradients aligned), composed ``steps`` times. At ``q = 1`` it is a Gaussian of sensitivity k.
    """
    pld = _pld_module()
    if q == 1.0:
        return gaussian_pld(
            sigma=sigma / k,
            steps=steps,
            value_discretization_interval=value_discretization_interval,
        )
    values, probs, _ = group_sensitivities(k=k, q=q)
    one = pld.from_mixture_gaussian_mechanism(
        sigma,
        values.tolist(),
        probs.tolist(),
        value_discretization_interval=value_discretization_interval,
    )
    return one.self_compose(steps)


def pld_epsilon(
    epsilon_at: Callable[[float], float],
    *,
    value_discretization_interval: float | None = None,
    coarse: float | None = None,
) -> float:
    """The epsilon of a PLD whose value at a discretisation step is ``epsilon_at(interval)``, choosing the step.

    With an explicit ``value_discretization_interval`` it is used as is. With ``None`` (the default) the step
    starts at :data:`COARSE_INTERVAL` and is divided by 4 until epsilon moves by at most
    :data:`REFINE_TOLERANCE` (relative) or the step is within a factor 2 of
    ``max(SMALLEST_INTERVAL, RELATIVE_INTERVAL * epsilon)``: the step follows epsilon down, so a small epsilon is
    as accurate, relatively, as a large one.
    The pessimistic connect-the-dots error shrinks about as the square of the step (measured: Figure 2's run),
    so a last move of 1% leaves about 0.1%; few compositions stop at once and large epsilons never pay for a
    fine step. Measured on Figure 2's run (1e5 steps) against ever finer steps: 0.03% at ``k = 1``, at most 0.3%
    up to ``k = 32`` and 0.8% at ``k = 64`` (epsilon 1020 for 1012; ``tests/test_accounting_pld.py``). Every pass
    rounds pessimistically, so each is a valid upper bound and the smallest is returned.

    Args:
        epsilon_at: Epsilon at the target delta of the PLD discretised with a given step.
        value_discretization_interval: The step, or ``None`` to choose it as above.
        coarse: ``epsilon_at(COARSE_INTERVAL)`` when the caller has it already.

    Returns:
        The epsilon (``inf`` where none exists at this delta).
    """
    if value_discretization_interval is not None:
        return epsilon_at(
            check_positive("value_discretization_interval", value_discretization_interval)
        )
    interval = COARSE_INTERVAL
    epsilon = epsilon_at(interval) if coarse is None else coarse
    while math.isfinite(epsilon):
        finest = max(SMALLEST_INTERVAL, RELATIVE_INTERVAL * epsilon)
        if interval <= 2 * finest:  # less than halving the step is not worth a pass
            break
        interval = max(finest, interval / 4)
        finer = epsilon_at(interval)
        moved, epsilon = epsilon - finer, min(epsilon, finer)
        if moved <= REFINE_TOLERANCE * epsilon:
            break
    return epsilon


@functools.lru_cache(maxsize=4096)
def _epsilon_at(
    kind: str, sigma: float, q: float, steps: int, k: int, delta: float, interval: float
) -> float:
    """Epsilon of one mechanism at one step: a run asks for the same silo's value at every round and every silo,
    and the sigma search and the group's silo-by-silo refinement ask for the same coarse pass again."""
    if kind == "gaussian":
        return float(
            gaussian_pld(
                sigma=sigma, q=q, steps=steps, value_discretization_interval=interval
            ).get_epsilon_for_delta(delta)
        )
    _, _, dropped = group_sensitivities(k=k, q=q)
    # a truncated mixture is within total variation `dropped` of the exact one at each step (union over steps)
    remaining = delta - steps * dropped
    if remaining <= 0:
        raise ValueError(
            f"delta={delta!r} is below the truncated binomial mass {steps * dropped:.3g}"
        )
    return float(
        group_pld(
            sigma=sigma, q=q, steps=steps, k=k, value_discretization_interval=interval
        ).get_epsilon_for_delta(remaining)
    )


def epsilon_uldp_pld(
    *,
    sigma: float,
    rounds: int,
    delta: float,
    q: float = 1.0,
    value_discretization_interval: float | None = None,
) -> PrivacySpent:
    """User-level (epsilon, delta) of ULDP-NAIVE (Theorem 1, ``q = 1``) or ULDP-SGD/AVG (Theorem 3; user
    sampling: Algorithm 4).

    The same mechanism as :func:`uldp.accounting.epsilon_uldp`, accounted by its PLD.

    Args:
        sigma: Noise multiplier.
        rounds: Rounds ``T`` (>= 0).
        delta: Target delta in (0, 1).
        q: User-level sampling rate in (0, 1].
        value_discretization_interval: PLD step (``None``: chosen by :func:`pld_epsilon`).

    Returns:
        The guarantee (``order`` is ``nan``: no RDP order is involved; ``epsilon = 0`` after zero rounds).

    At ``q = 1``, ``T`` rounds are one Gaussian mechanism with ``mu = sqrt(T) / sigma``, whose exact
    ``delta(epsilon) = Phi(mu / 2 - epsilon / mu) - e^epsilon Phi(-mu / 2 - epsilon / mu)``
    (Theorem 8 of Balle and Wang 2018): the PLD's epsilon meets the target delta, and 0.1% less epsilon would not.

    >>> from statistics import NormalDist
    >>> mu, phi = math.sqrt(100) / 5.0, NormalDist().cdf
    >>> exact_delta = lambda eps: phi(mu / 2 - eps / mu) - math.exp(eps) * phi(-mu / 2 - eps / mu)
    >>> epsilon = epsilon_uldp_pld(sigma=5.0, rounds=100, delta=1e-5).epsilon
    >>> exact_delta(epsilon) <= 1e-5 < exact_delta(0.999 * epsilon)
    True
    """
    sigma, delta, q = check_positive("sigma", sigma), check_delta(delta), check_rate("q", q)
    rounds = check_integer("rounds", rounds, minimum=0)
    if rounds == 0:
        return PrivacySpent(epsilon=0.0, order=math.nan, delta=delta)
    epsilon = pld_epsilon(
        functools.partial(_epsilon_at, "gaussian", sigma, q, rounds, 1, delta),
        value_discretization_interval=value_discretization_interval,
    )
    return PrivacySpent(epsilon=epsilon, order=math.nan, delta=delta)


def epsilon_group_pld(
    *,
    sigma: float,
    sample_rates: float | Sequence[float],
    steps: int | Sequence[int],
    k: int,
    delta: float,
    value_discretization_interval: float | None = None,
) -> PrivacySpent:
    """User-level (epsilon, delta) of ULDP-GROUP-k by the mixture-of-Gaussians PLD (Theorem 2, without the group
    conversion of Lemma 6 or 5).

    Each silo ``s`` runs DP-SGD at record rate ``sample_rates[s]`` for ``steps[s]`` steps; a user owns at most
    ``k`` records (Algorithm 2's flags). Per silo the group's PLD is :func:`group_pld`; the guarantee is the
    largest epsilon over silos (Theorem 2's maximum; see the module docstring for its scope). Valid for every
    integer ``k`` (no power of two needed). With the default step every silo is first accounted coarsely, and only
    the silos whose coarse bound could still be the largest are refined (a refined epsilon is at most the coarse
    one).

    Args:
        sigma: DP-SGD noise multiplier.
        sample_rates: Record-level sampling rate per silo (or one for all).
        steps: DP-SGD steps per silo so far (or one for all).
        k: Records kept per user (group size >= 1).
        delta: Target delta in (0, 1).
        value_discretization_interval: PLD step (``None``: chosen by :func:`pld_epsilon`).

    Returns:
        The guarantee (``order`` is ``nan``).

    Raises:
        ValueError: On invalid arguments or mismatched per-silo lengths.
    """
    sigma, delta, k = (
        check_positive("sigma", sigma),
        check_delta(delta),
        check_integer("group size k", k),
    )
    rates = [check_rate("sample_rates", float(rate)) for rate in np.atleast_1d(sample_rates)]
    counts = [
        check_integer("steps", int(count) if float(count).is_integer() else count, minimum=0)
        for count in np.atleast_1d(steps)
    ]
    if len(rates) == 1 and len(counts) > 1:
        rates = rates * len(counts)
    if len(counts) == 1 and len(rates) > 1:
        counts = counts * len(rates)
    if len(rates) != len(counts):
        raise ValueError(
            f"sample_rates and steps must be per silo with equal lengths, got {len(rates)} and "
            f"{len(counts)}"
        )
    silos = [
        functools.partial(_epsilon_at, "group", sigma, rate, count, k, delta)
        for rate, count in sorted(set(zip(rates, counts, strict=True)))
        if count > 0
    ]
    if value_discretization_interval is not None:
        epsilons = [
            pld_epsilon(silo, value_discretization_interval=value_discretization_interval)
            for silo in silos
        ]
        return PrivacySpent(epsilon=max(epsilons, default=0.0), order=math.nan, delta=delta)
    best = 0.0
    for coarse, silo in sorted(
        ((silo(COARSE_INTERVAL), silo) for silo in silos), key=lambda pair: -pair[0]
    ):
        if coarse <= best:
            break  # this silo's refined epsilon is at most its coarse one: it cannot be the largest
        best = max(best, pld_epsilon(silo, coarse=coarse))
    return PrivacySpent(epsilon=best, order=math.nan, delta=delta)


def mixture_group_curve(
    *,
    sigma: float,
    q: float,
    steps: int,
    delta: float,
    ks: Sequence[int],
    value_discretization_interval: float | None = None,
) -> list[dict[str, float | int]]:
    """The group-privacy curve of the paper's Figure 2 by the mixture accountant: epsilon for each ``k`` in ``ks``.

    Args:
        sigma: Noise multiplier.
        q: Record-level Poisson sampling rate.
        steps: Number of iterations.
        delta: Target delta.
        ks: Group sizes (integers >= 1).
        value_discretization_interval: PLD step (``None``: chosen by :func:`pld_epsilon`).

    Returns:
        One row per ``k``: ``{"k": k, "epsilon_mixture": epsilon}``.
    """
    return [
        {
            "k": int(k),
            "epsilon_mixture": epsilon_group_pld(
                sigma=sigma,
                sample_rates=q,
                steps=steps,
                k=k,
                delta=delta,
                value_discretization_interval=value_discretization_interval,
            ).epsilon,
        }
        for k in ks
    ]
