"""The privacy accountants by name (:data:`ACCOUNTANTS`, as Opacus keeps its accountants) and the sigma search.

Each :class:`Accountant` accounts the two mechanisms behind every method's guarantee (the Gaussian of Theorems 1 and 3,
sub-sampled by Lemma 4; per-silo DP-SGD of Theorem 2) and inverts them with :func:`sigma_for_budget`. Adding one is a
subclass and one line in :data:`ACCOUNTANTS`; :func:`uldp.accounting.methods.epsilon_for_method`,
:func:`uldp.accounting.methods.sigma_for_epsilon` and the command-line options read the registry.
"""

from __future__ import annotations

import abc
import math
import warnings
from typing import TYPE_CHECKING, ClassVar

from uldp.accounting.known_sample import epsilon_known_sample_pld, epsilon_known_sample_rdp
from uldp.accounting.pld import COARSE_INTERVAL, epsilon_group_pld, epsilon_uldp_pld
from uldp.accounting.rdp import PrivacySpent
from uldp.accounting.theorems import epsilon_group, epsilon_uldp
from uldp.common.checks import check_number, check_positive

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

#: The noise multipliers :func:`sigma_for_budget` searches, and where it starts (the paper's sigma).
SIGMA_RANGE: tuple[float, float] = (1e-3, 1e4)
SIGMA_START = 5.0
#: The epsilon :func:`sigma_for_budget` compares in place of one at or below 0 (its gap is on a log scale).
_EPSILON_FLOOR = 1e-300


def sigma_for_budget(
    epsilon_at: Callable[[float], float],
    *,
    epsilon: float,
    start: float = SIGMA_START,
    factor: float = 2.0,
    tolerance: float = 1e-6,
) -> float:
    """The smallest noise multiplier whose epsilon ``epsilon_at(sigma)`` is at most the target ``epsilon``.

    Epsilon decreases monotonically in sigma: the bracket grows from ``start`` by ``factor`` (within
    [1e-3, 1e4]) until it holds the target, then a bracketing root finder (Brent) solves on ``log sigma``. An
    ``epsilon_at`` at or below 0 (Lemma 2's conversion at a large delta, down to ``log(1 - delta)``) meets every
    target.

    Args:
        epsilon_at: The guarantee's epsilon as a function of sigma (any accountant, any mechanism).
        epsilon: Target epsilon > 0.
        start: A first guess of sigma (a good one saves evaluations).
        factor: How much the bracket grows at each step (> 1; small when ``start`` is close).
        tolerance: Relative tolerance on sigma.

    Returns:
        ``sigma`` (the guarantee at it is within tolerance of ``epsilon``, never above it by more).

    Raises:
        ValueError: A target outside what sigma in [1e-3, 1e4] reaches.

    >>> round(sigma_for_budget(lambda sigma: 10.0 / sigma, epsilon=2.0), 4)
    5.0
    """
    epsilon = check_positive("epsilon", epsilon)
    low_limit, high_limit = math.log(SIGMA_RANGE[0]), math.log(SIGMA_RANGE[1])
    step = math.log(check_number("factor", factor, above=1))

    def gap(log_sigma: float) -> float:
        with (
            warnings.catch_warnings()
        ):  # grid-edge warnings at the bracket's extreme sigmas are irrelevant here
            warnings.simplefilter("ignore", RuntimeWarning)
            reached = epsilon_at(math.exp(log_sigma))
        # At a large delta, Lemma 2's conversion falls to log(1 - delta) < 0 as sigma grows and the PLD's to 0: such
        # a sigma meets every target, so it counts as far below it (a finite floor keeps Brent's steps finite).
        return math.log(max(reached, _EPSILON_FLOOR)) - math.log(epsilon)

    low = high = min(max(math.log(check_positive("start", start)), low_limit), high_limit)
    while gap(high) > 0:
        if high >= high_limit:
            raise ValueError(
                f"epsilon={epsilon!r} is not reachable with sigma in {list(SIGMA_RANGE)}"
            )
        low, high = high, min(high + step, high_limit)
    while low == high or gap(low) <= 0:
        if low <= low_limit:
            raise ValueError(
                f"epsilon={epsilon!r} is not reachable with sigma in {list(SIGMA_RANGE)}"
            )
        high, low = low, max(low - step, low_limit)
    from scipy import optimize  # here, not at the top: ``uldp --help`` stays free of scipy

    root = optimize.brentq(gap, low, high, xtol=tolerance / 10)
    return math.exp(root) * (1 + tolerance)  # round up: never promise less privacy than asked


class Accountant(abc.ABC):
    """A privacy accountant of the two mechanisms behind every method's guarantee, registered by :attr:`name` in
    :data:`ACCOUNTANTS` (Opacus' ``IAccountant`` and its registry play this part there).

    :meth:`gaussian` accounts ULDP-NAIVE (Theorem 1) and ULDP-SGD/AVG (Theorem 3; Lemma 4 with user sampling),
    :meth:`group` ULDP-GROUP-k (Theorem 2), and :meth:`solve_sigma` inverts either for
    :func:`~uldp.accounting.methods.sigma_for_epsilon`.
    """

    #: The registry name (``--accountant`` on the command line).
    name: ClassVar[str]
    #: Another accountant whose guarantee :func:`~uldp.accounting.methods.epsilon_for_method` reports where it is
    #: the smaller (both valid): the last guard that a tighter accountant never reports more than the paper's.
    guard: ClassVar[str | None] = None

    @abc.abstractmethod
    def gaussian(
        self,
        *,
        sigma: float,
        rounds: int,
        delta: float,
        q: float,
        value_discretization_interval: float | None,
    ) -> PrivacySpent:
        """``rounds`` rounds of the Gaussian with multiplier ``sigma``, Poisson-sub-sampled at rate ``q``."""

    @abc.abstractmethod
    def known_sample(
        self,
        *,
        sigma: float,
        rounds: int,
        delta: float,
        q: float,
        value_discretization_interval: float | None,
    ) -> PrivacySpent:
        """The same rounds against an adversary that knows which rounds held the user
        (:mod:`uldp.accounting.known_sample`)."""

    @abc.abstractmethod
    def group(
        self,
        *,
        sigma: float,
        sample_rates: float | Sequence[float],
        steps: list[int],
        k: int,
        delta: float,
        value_discretization_interval: float | None,
    ) -> PrivacySpent:
        """Per-silo DP-SGD (``steps[s]`` steps at record rate ``sample_rates[s]``) for a group of ``k`` records."""

    def solve_sigma(
        self,
        epsilon_at: Callable[[float, float | None], float],
        *,
        epsilon: float,
        tolerance: float,
    ) -> float:
        """The smallest sigma with ``epsilon_at(sigma, None) <= epsilon`` (:func:`sigma_for_budget`); the second
        argument of ``epsilon_at`` is the PLD discretisation step (``None``: the accountant's own)."""
        return sigma_for_budget(
            lambda sigma: epsilon_at(sigma, None), epsilon=epsilon, tolerance=tolerance
        )


class RdpAccountant(Accountant):
    """The paper's: RDP of the (sub-sampled) Gaussian (Lemmas 2 and 4), group privacy by RDP (Lemma 6, valid
    orders); ``value_discretization_interval`` does not apply and is ignored."""

    name = "rdp"

    def gaussian(
        self,
        *,
        sigma: float,
        rounds: int,
        delta: float,
        q: float,
        value_discretization_interval: float | None,
    ) -> PrivacySpent:
        """:func:`epsilon_uldp`."""
        return epsilon_uldp(sigma=sigma, rounds=rounds, delta=delta, q=q)

    def known_sample(
        self,
        *,
        sigma: float,
        rounds: int,
        delta: float,
        q: float,
        value_discretization_interval: float | None,
    ) -> PrivacySpent:
        """:func:`uldp.accounting.known_sample.epsilon_known_sample_rdp`."""
        return epsilon_known_sample_rdp(sigma=sigma, q=q, rounds=rounds, delta=delta)

    def group(
        self,
        *,
        sigma: float,
        sample_rates: float | Sequence[float],
        steps: list[int],
        k: int,
        delta: float,
        value_discretization_interval: float | None,
    ) -> PrivacySpent:
        """The valid upper bound of :func:`epsilon_group`."""
        spent = epsilon_group(sigma=sigma, sample_rates=sample_rates, steps=steps, k=k, delta=delta)
        return PrivacySpent(epsilon=spent.epsilon, order=spent.order, delta=spent.delta)


class PldAccountant(Accountant):
    """The privacy-loss distribution of dp-accounting (:mod:`uldp.accounting.pld`; ULDP-GROUP-k as a mixture of
    Gaussians)."""

    name = "pld"
    guard = "rdp"

    def gaussian(
        self,
        *,
        sigma: float,
        rounds: int,
        delta: float,
        q: float,
        value_discretization_interval: float | None,
    ) -> PrivacySpent:
        """:func:`uldp.accounting.pld.epsilon_uldp_pld`."""
        return epsilon_uldp_pld(
            sigma=sigma,
            rounds=rounds,
            delta=delta,
            q=q,
            value_discretization_interval=value_discretization_interval,
        )

    def known_sample(
        self,
        *,
        sigma: float,
        rounds: int,
        delta: float,
        q: float,
        value_discretization_interval: float | None,
    ) -> PrivacySpent:
        """:func:`uldp.accounting.known_sample.epsilon_known_sample_pld`."""
        return epsilon_known_sample_pld(
            sigma=sigma,
            q=q,
            rounds=rounds,
            delta=delta,
            value_discretization_interval=value_discretization_interval,
        )

    def group(
        self,
        *,
        sigma: float,
        sample_rates: float | Sequence[float],
        steps: list[int],
        k: int,
        delta: float,
        value_discretization_interval: float | None,
    ) -> PrivacySpent:
        """:func:`uldp.accounting.pld.epsilon_group_pld`."""
        return epsilon_group_pld(
            sigma=sigma,
            sample_rates=sample_rates,
            steps=steps,
            k=k,
            delta=delta,
            value_discretization_interval=value_discretization_interval,
        )

    def solve_sigma(
        self,
        epsilon_at: Callable[[float, float | None], float],
        *,
        epsilon: float,
        tolerance: float,
    ) -> float:
        """Solved first at the coarse PLD step (fast; pessimistic, so its sigma is at least the fine one), then at
        the default step from there."""
        start = SIGMA_START
        for interval, factor in ((COARSE_INTERVAL, 2.0), (None, 1.02)):

            def at_interval(sigma: float, interval: float | None = interval) -> float:
                return epsilon_at(sigma, interval)

            start = sigma_for_budget(
                at_interval, epsilon=epsilon, start=start, factor=factor, tolerance=tolerance
            )
        return start


#: The accountants by name: ``"rdp"`` (the paper's and the default) and ``"pld"``. A new accountant is a subclass
#: of :class:`Accountant` and one entry here.
ACCOUNTANTS: dict[str, Accountant] = {
    accountant.name: accountant for accountant in (RdpAccountant(), PldAccountant())
}


def check_accountant(accountant: str) -> str:
    """Return ``accountant`` if it names one of :data:`ACCOUNTANTS`.

    Raises:
        ValueError: Unknown name (the message lists the registered ones).

    >>> check_accountant("pld")
    'pld'
    """
    if not isinstance(accountant, str) or accountant not in ACCOUNTANTS:
        raise ValueError(
            f"unknown accountant {accountant!r}; known accountants: {', '.join(ACCOUNTANTS)}"
        )
    return accountant
