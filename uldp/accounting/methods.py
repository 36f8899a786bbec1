"""The user-level guarantee of every method of the paper, and the inverse (sigma for a target epsilon).

- ULDP-NAIVE (Theorem 1, corrected): per round, each silo's clipped delta gets noise ``2 sigma C sqrt(|S|)``, so
  the sum has noise std ``2 sigma C |S|`` for the true user-level sensitivity ``2 |S| C`` (a silo clips its whole
  delta, which one user can move across the C-ball; the paper's proof says ``|S| C``): a Gaussian mechanism with
  noise multiplier ``sigma`` per round, ``T`` rounds. See :mod:`uldp.methods.fedavg`.
- ULDP-SGD / ULDP-AVG, with any weights (Theorem 3): user-level sensitivity ``C`` of the summed update and noise
  ``sigma C / sqrt(|S|)`` per silo (std ``sigma C`` in the sum): noise multiplier ``sigma``, ``T`` rounds, and
  with user-level Poisson sampling at rate ``q`` (Algorithm 4) the sub-sampled Gaussian (Lemma 4) against whoever
  does not know the sample; against a server that sees it or chooses it, :mod:`uldp.accounting.known_sample`. Each
  such epsilon names its :class:`~uldp.accounting.adversary.Adversary` (``adversary=`` here, in the result too).
- ULDP-GROUP-k (Theorem 2): each silo runs DP-SGD with record-level Poisson rate ``gamma_s`` for ``steps_s``
  steps; the record-level RDP is the maximum over silos, converted to groups of ``k`` records.

Each guarantee is computed by an :class:`Accountant` chosen by name from :data:`ACCOUNTANTS` (as Opacus' accountants
are): adding one is a subclass and one line there; :func:`epsilon_for_method`, :func:`sigma_for_epsilon` and the
command-line options read the registry.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from uldp.accounting.accountants import (
    ACCOUNTANTS,
    SIGMA_RANGE,
    SIGMA_START,
    Accountant,
    PldAccountant,
    RdpAccountant,
    check_accountant,
    sigma_for_budget,
)
from uldp.accounting.adversary import Adversary, check_adversary
from uldp.accounting.known_sample import gaussian_against
from uldp.accounting.rdp import DEFAULT_ORDERS, PrivacySpent, rdp_subsampled_gaussian, rdp_to_dp
from uldp.accounting.theorems import epsilon_group, epsilon_naive, epsilon_uldp, max_silo_rdp
from uldp.common.checks import check_delta, check_integer, check_number, check_positive, check_rate
from uldp.method_names import parse_method

if TYPE_CHECKING:
    from collections.abc import Sequence

#: What this module has always offered; the accountants live in :mod:`uldp.accounting.accountants` and the
#: theorems' guarantees in :mod:`uldp.accounting.theorems`, both importable from here as before.
__all__ = [
    "ACCOUNTANTS",
    "SIGMA_RANGE",
    "SIGMA_START",
    "Accountant",
    "PldAccountant",
    "RdpAccountant",
    "check_accountant",
    "epsilon_for_method",
    "epsilon_group",
    "epsilon_naive",
    "epsilon_of_releases",
    "epsilon_server_view",
    "epsilon_uldp",
    "max_silo_rdp",
    "sigma_for_budget",
    "sigma_for_epsilon",
]


def epsilon_server_view(
    *,
    sigma: float,
    rounds: int,
    delta: float,
    n_silos: int,
    weight_norm: float = 1.0,
    q: float = 1.0,
    accountant: str = "rdp",
    adversary: Adversary | str = Adversary.SERVER_SEES_SAMPLE,
) -> PrivacySpent:
    """User-level (epsilon, delta) of what the server sees WITHOUT secure aggregation: every silo's noisy update.

    Adapts Theorem 3 (and Lemma 4 for ``q < 1``) from the sum to the vector of the |S| silos' releases. Silo s sends
    ``sum_u w_su clip(Delta_su) + N(0, sigma^2 C^2 / |S|)``; user u moves that vector by at most ``C ||w_u||_2``
    (the l2 norm of the user's weights over silos), so each round is a Gaussian mechanism with noise multiplier
    ``sigma / (sqrt(|S|) ||w_u||_2)``. With uniform weights (ULDP-AVG, ``w_su = 1 / |S|``) ``||w_u||_2 =
    1 / sqrt(|S|)`` and the view costs what the released model costs; with enhanced weights (ULDP-AVG-w) a user whose
    records all sit in one silo has ``w_su = 1`` there, ``||w_u||_2 = 1``, and the multiplier drops to
    ``sigma / sqrt(|S|)``.

    Args:
        sigma: The run's noise multiplier (of the summed noise, std ``sigma C``).
        rounds: Rounds ``T`` (>= 0).
        delta: Target delta in (0, 1).
        n_silos: |S|.
        weight_norm: ``max_u ||w_u||_2`` in ``[1 / sqrt(|S|), 1]`` (1, the worst case, by default).
        q: User-level sampling rate in (0, 1].
        accountant: A name of :data:`~uldp.accounting.ACCOUNTANTS`.
        adversary: With ``q < 1``, what the server knows of the sample (:class:`Adversary` or its value): by
            default it sees the sample it draws (Protocol 1), so no amplification by it; ``MODEL_READERS`` only
            where the silos hide the sample from it.

    Returns:
        The guarantee against the server's view, naming its adversary where ``q < 1``.

    Raises:
        ValueError: ``weight_norm`` outside ``[1 / sqrt(|S|), 1]``, or bad privacy arguments.

    >>> view = epsilon_server_view(sigma=5.0, rounds=10, delta=1e-5, n_silos=3).epsilon
    >>> released = epsilon_uldp(sigma=5.0, rounds=10, delta=1e-5).epsilon
    >>> round(view, 2), round(released, 2)
    (5.25, 2.81)
    """
    n_silos = check_integer("n_silos", n_silos, minimum=1)
    weight_norm = check_number(
        "weight_norm", weight_norm, at_least=1 / math.sqrt(n_silos) * (1 - 1e-12), at_most=1.0
    )
    effective = check_positive("sigma", sigma) / (math.sqrt(n_silos) * weight_norm)
    return gaussian_against(
        ACCOUNTANTS[check_accountant(accountant)],
        check_adversary(adversary),
        sigma=effective,
        rounds=rounds,
        delta=delta,
        q=q,
    )


def epsilon_of_releases(
    *, releases: Sequence[tuple[float, float]], delta: float, accountant: str = "rdp"
) -> PrivacySpent:
    """User-level (epsilon, delta) of a sequence of (sub-sampled) Gaussian releases, each with its own multiplier.

    What a silo has actually released (:mod:`uldp.policy`): round t is the Gaussian mechanism of Theorem 3 with
    noise multiplier ``sigma_t`` (user-level sensitivity 1 after scaling), Poisson-sub-sampled at rate ``q_t``
    (Lemma 4). Rounds compose: RDP curves add (Mironov 2017, Proposition 1), PLDs convolve.

    Args:
        releases: ``(sigma_t, q_t)`` per release.
        delta: Target delta in (0, 1).
        accountant: A name of :data:`~uldp.accounting.ACCOUNTANTS`.

    Returns:
        The guarantee (epsilon 0 without releases).

    Rounds of one multiplier and rate are :func:`epsilon_uldp`'s:

    >>> a = epsilon_of_releases(releases=[(5.0, 0.5)] * 20, delta=1e-5).epsilon
    >>> math.isclose(a, epsilon_uldp(sigma=5.0, rounds=20, delta=1e-5, q=0.5).epsilon, rel_tol=1e-12)
    True
    """
    delta = check_delta(delta)
    pld = check_accountant(accountant) == "pld"
    groups: dict[tuple[float, float], int] = {}
    for sigma, q in releases:
        key = (check_positive("sigma", sigma), check_rate("q", q))
        groups[key] = groups.get(key, 0) + 1
    if not groups:
        return PrivacySpent(epsilon=0.0, order=math.nan, delta=delta)
    if pld:
        from uldp.accounting.pld import gaussian_pld, pld_epsilon

        def epsilon_at(interval: float) -> float:
            plds = [
                gaussian_pld(sigma=sigma, q=q, steps=count, value_discretization_interval=interval)
                for (sigma, q), count in groups.items()
            ]
            total = plds[0]
            for other in plds[1:]:
                total = total.compose(other)
            return float(total.get_epsilon_for_delta(delta))

        return PrivacySpent(epsilon=pld_epsilon(epsilon_at), order=math.nan, delta=delta)
    rdp = sum(
        rdp_subsampled_gaussian(sigma=sigma, q=q, steps=count, orders=DEFAULT_ORDERS)
        for (sigma, q), count in groups.items()
    )
    return rdp_to_dp(orders=DEFAULT_ORDERS, rdp=rdp, delta=delta)


def epsilon_for_method(
    method: str,
    *,
    sigma: float,
    rounds: int,
    delta: float,
    q: float = 1.0,
    k: int | None = None,
    sample_rates: float | Sequence[float] | None = None,
    steps_per_round: int | Sequence[int] | None = None,
    accountant: str = "rdp",
    value_discretization_interval: float | None = None,
    adversary: Adversary | str = Adversary.MODEL_READERS,
) -> PrivacySpent:
    """The user-level guarantee of ``method`` after ``rounds`` rounds, by the accountant named ``accountant``.

    Args:
        method: A registry name (``"ULDP-AVG-w"``, ``"ULDP-GROUP-8"``, ...). ``"DEFAULT"`` has no guarantee.
        sigma: Noise multiplier.
        rounds: Rounds so far.
        delta: Target delta.
        q: User-level sampling rate (ULDP-SGD/AVG only).
        k: Group size for ULDP-GROUP (overrides a numeric suffix; needed for ``-max`` / ``-median``).
        sample_rates: ULDP-GROUP: per-silo DP-SGD record sampling rate.
        steps_per_round: ULDP-GROUP: per-silo DP-SGD steps in one round.
        accountant: A name of :data:`ACCOUNTANTS`: ``"rdp"`` (the paper's) or ``"pld"``
            (:mod:`uldp.accounting.pld`; for ULDP-GROUP the mixture-of-Gaussians group accountant, no group-privacy
            conversion), never above ``"rdp"``: an accountant with a :attr:`Accountant.guard` reports the smaller of
            its own guarantee and the guard's, both valid.
        value_discretization_interval: PLD only: the discretisation step (``None``: chosen by
            :func:`uldp.accounting.pld.pld_epsilon`).
        adversary: ULDP-SGD/AVG with ``q < 1``: whom the epsilon holds against (:class:`Adversary` or its value):
            the paper's readers of the model (amplified, the default), a server that sees the sample, or one that
            chooses it.

    Returns:
        The guarantee (for ULDP-GROUP by RDP, the valid upper bound of :func:`epsilon_group`), naming its
        adversary where user sampling makes it depend on one.

    Raises:
        ValueError: An unknown accountant (the message lists the registered ones) or bad arguments.

    >>> spent = epsilon_for_method("ULDP-AVG-w", sigma=5.0, rounds=100, delta=1e-5, accountant="pld")
    >>> spent.epsilon < epsilon_for_method("ULDP-AVG-w", sigma=5.0, rounds=100, delta=1e-5).epsilon
    True
    """
    arguments: dict[str, Any] = {
        "sigma": sigma,
        "rounds": rounds,
        "delta": delta,
        "q": q,
        "k": k,
        "sample_rates": sample_rates,
        "steps_per_round": steps_per_round,
        "adversary": check_adversary(adversary),
    }
    spent = _accounted(
        method,
        accountant=accountant,
        value_discretization_interval=value_discretization_interval,
        **arguments,
    )
    guard = ACCOUNTANTS[check_accountant(accountant)].guard
    return (
        spent
        if guard is None
        else _tighter(spent, _accounted(method, accountant=guard, **arguments))
    )


def _accounted(
    method: str,
    *,
    sigma: float,
    rounds: int,
    delta: float,
    q: float,
    k: int | None,
    sample_rates: float | Sequence[float] | None,
    steps_per_round: int | Sequence[int] | None,
    accountant: str,
    adversary: Adversary,
    value_discretization_interval: float | None = None,
) -> PrivacySpent:
    """The guarantee of :func:`epsilon_for_method` by one accountant alone (``"pld"`` without the RDP guard)."""
    spec = parse_method(method)
    chosen = ACCOUNTANTS[check_accountant(accountant)]
    if not spec.private:
        return PrivacySpent(epsilon=math.inf, order=math.nan, delta=check_delta(delta))
    if (
        not spec.capabilities.group_privacy
    ):  # ULDP-NAIVE (Theorem 1) or ULDP-SGD/AVG (Theorem 3, Lemma 4 for q < 1)
        return gaussian_against(
            chosen,
            adversary,
            sigma=sigma,
            rounds=rounds,
            delta=delta,
            q=q if spec.per_user else 1.0,
            value_discretization_interval=value_discretization_interval,
        )
    group_size = k if k is not None else spec.group_size
    if not isinstance(group_size, (int, np.integer)):
        raise ValueError(f"{method} needs the numeric group size k (got {group_size!r})")
    if sample_rates is None or steps_per_round is None:
        raise ValueError(f"{method} needs sample_rates and steps_per_round (DP-SGD per silo)")
    rounds = check_integer("rounds", rounds, minimum=0)
    total_steps = np.atleast_1d(np.asarray(steps_per_round, dtype=np.int64)) * rounds
    if rounds == 0:
        return PrivacySpent(epsilon=0.0, order=math.nan, delta=check_delta(delta))
    return chosen.group(
        sigma=sigma,
        sample_rates=sample_rates,
        steps=total_steps.tolist(),
        k=int(group_size),
        delta=delta,
        value_discretization_interval=value_discretization_interval,
    )


def _tighter(pld: PrivacySpent, rdp: PrivacySpent) -> PrivacySpent:
    """The smaller of two valid guarantees of one mechanism at one delta: the PLD's, unless the RDP guard's is below.

    Both are upper bounds on the same mechanism's epsilon, so their minimum is one too. The PLD's is the tighter
    in every case measured, once its step follows epsilon (:func:`uldp.accounting.pld.pld_epsilon`); this is the
    last guard that the ``"pld"`` accountant never reports more than the paper's.
    """
    return rdp if rdp.epsilon < pld.epsilon else pld


def sigma_for_epsilon(
    method: str,
    *,
    epsilon: float,
    rounds: int,
    delta: float,
    q: float = 1.0,
    k: int | None = None,
    sample_rates: float | Sequence[float] | None = None,
    steps_per_round: int | Sequence[int] | None = None,
    accountant: str = "rdp",
    tolerance: float = 1e-6,
    adversary: Adversary | str = Adversary.MODEL_READERS,
) -> float:
    """The smallest noise multiplier ``sigma`` for which ``method`` reaches ``epsilon`` after ``rounds`` rounds.

    Solved by the accountant's :meth:`Accountant.solve_sigma` on its own guarantee (:func:`_accounted`), without
    the guard of :func:`epsilon_for_method`: the guard can only lower epsilon, so the guarantee at the sigma found
    still meets the target, and the search skips the guard's cost.

    Args:
        method: A registry name other than ``"DEFAULT"``.
        epsilon: Target epsilon > 0.
        rounds: Number of rounds (>= 1).
        delta: Target delta.
        q, k, sample_rates, steps_per_round: As in :func:`epsilon_for_method`.
        accountant: A name of :data:`ACCOUNTANTS`.
        tolerance: Relative tolerance on sigma.
        adversary: As in :func:`epsilon_for_method` (the target holds against it).

    Returns:
        ``sigma`` (the guarantee at it is within tolerance of ``epsilon``, never above it by more).

    Raises:
        ValueError: On bad arguments (``delta`` outside (0, 1), named with that range, before any search),
            ``DEFAULT``, or a target outside what sigma in [1e-3, 1e4] reaches.
    """
    epsilon = check_positive("epsilon", epsilon)
    delta = check_delta(delta)
    if not parse_method(method).private:
        raise ValueError("DEFAULT has no privacy guarantee; there is no sigma for it")
    if check_integer("rounds", rounds, minimum=0) == 0:
        raise ValueError("rounds must be >= 1 to calibrate sigma")
    arguments: dict[str, Any] = {
        "rounds": rounds,
        "delta": delta,
        "q": q,
        "k": k,
        "sample_rates": sample_rates,
        "steps_per_round": steps_per_round,
        "adversary": check_adversary(adversary),
    }

    def epsilon_at(sigma: float, interval: float | None = None) -> float:
        return _accounted(
            method,
            sigma=sigma,
            accountant=accountant,
            value_discretization_interval=interval,
            **arguments,
        ).epsilon

    return ACCOUNTANTS[check_accountant(accountant)].solve_sigma(
        epsilon_at, epsilon=epsilon, tolerance=tolerance
    )
