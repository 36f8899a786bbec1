"""Empirical lower bounds on epsilon from a membership attack's scores, at a stated confidence.

Two estimators, both one-sided statements "the mechanism is *not* (epsilon, delta)-DP for any epsilon below the
bound", holding with probability at least ``confidence`` over the audit's randomness:

- **Many runs, one canary** (Jagielski, Ullman and Oprea 2020, "Auditing differentially private machine learning:
  how private is private SGD?"; Nasr et al. 2021, "Adversary instantiation"): each run includes the canary or not,
  the attack thresholds a score. (epsilon, delta)-DP forces ``TPR <= e^eps FPR + delta`` and
  ``TNR <= e^eps FNR + delta`` for every threshold, so with a Clopper-Pearson lower bound ``TPR_lo`` and upper bound
  ``FPR_hi`` (each at level ``(1 - confidence) / 2``, jointly at ``confidence``)
  ``eps >= log((TPR_lo - delta) / FPR_hi)``, and symmetrically. :func:`many_run_bound` maximises this over
  thresholds, as those papers do.
- **One run, many canaries** (Steinke, Nasr and Jagielski 2023, "Privacy auditing with one (1) training run",
  NeurIPS, arXiv:2305.08846): ``m`` canaries, each included independently with probability 1/2; the auditor guesses
  "in" for the ``k+`` highest scores, "out" for the ``k-`` lowest and abstains on the rest. Their main theorem: for an
  eps-DP mechanism the number ``W`` of correct guesses among ``r = k+ + k-`` is stochastically dominated by
  ``Binomial(r, e^eps / (1 + e^eps))``; for (eps, delta)-DP,
  ``P[W >= v] <= f(v) + 2 m delta max_{1<=i<=v} (f(v - i) - f(v)) / i`` with ``f(v) = P[Binomial >= v]`` (the
  p-value of their Appendix D). :func:`one_run_epsilon` is the largest eps rejected at the stated confidence
  (their Algorithm 2, by bisection), and :func:`one_run_bound` fixes the guess counts in advance (several candidates
  share the error budget by a union bound).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from scipy import stats

from uldp.checks import check_delta, check_integer, check_number

if TYPE_CHECKING:
    from collections.abc import Sequence

#: Thresholds :func:`many_run_bound` tries at most (taken at geometrically spaced ranks of both tails).
MAX_THRESHOLDS = 2000


def clopper_pearson(successes: np.ndarray | int, trials: np.ndarray | int, *, level: float
                    ) -> tuple[np.ndarray, np.ndarray]:
    """One-sided Clopper-Pearson bounds on a binomial proportion, each holding with probability ``1 - level``.

    Args:
        successes: Observed successes ``k`` (array or scalar).
        trials: Trials ``n`` >= 1.
        level: Error probability of each one-sided bound, in (0, 1).

    Returns:
        ``(lower, upper)``: ``P[p < lower] <= level`` and ``P[p > upper] <= level`` (0 and 1 at the edges).

    Example:
        >>> low, high = clopper_pearson(0, 10, level=0.025)
        >>> float(low), round(float(high), 4)
        (0.0, 0.3085)
    """
    check_number("level", level, above=0, below=1)
    k = np.asarray(successes, dtype=float)
    n = np.asarray(trials, dtype=float)
    if (n < 1).any() or (k < 0).any() or (k > n).any():
        raise ValueError(f"need 0 <= successes <= trials and trials >= 1, got {successes!r} of {trials!r}")
    with np.errstate(invalid="ignore"):
        lower = np.where(k > 0, stats.beta.ppf(level, k, n - k + 1), 0.0)
        upper = np.where(k < n, stats.beta.ppf(1 - level, k + 1, n - k), 1.0)
    return lower, upper


@dataclass(frozen=True)
class ManyRunBound:
    """The result of :func:`many_run_bound`.

    Attributes:
        epsilon: The lower bound on epsilon at ``confidence`` (0 when no threshold gives a positive one).
        estimate: ``log((TPR - delta) / FPR)`` at the chosen threshold without the confidence intervals (the point
            estimate; ``inf`` where that threshold has no false positive).
        threshold: The score threshold that gave ``epsilon`` (guess "in" when score >= threshold, or "out" when
            ``direction`` is ``"low"``: score < threshold).
        direction: ``"high"`` (bound from TPR/FPR) or ``"low"`` (from TNR/FNR, the symmetric inequality).
        tpr: True positive rate at the threshold.
        fpr: False positive rate at the threshold.
        n_in: Runs with the canary.
        n_out: Runs without it.
        confidence: The confidence level.
        delta: The delta of the (epsilon, delta) statement.
    """

    epsilon: float
    estimate: float
    threshold: float
    direction: str
    tpr: float
    fpr: float
    n_in: int
    n_out: int
    confidence: float
    delta: float


def _candidate_thresholds(scores_in: np.ndarray, scores_out: np.ndarray, limit: int) -> np.ndarray:
    """Scores at geometrically spaced ranks from both ends of each sample (where the bound is decided)."""
    candidates = []
    for sample in (np.sort(scores_in), np.sort(scores_out)):
        n = sample.size
        ranks = np.unique(np.geomspace(1, n, max(2, limit // 4)).astype(int) - 1)
        candidates += [sample[ranks], sample[n - 1 - ranks]]
    return np.unique(np.concatenate(candidates))


def many_run_bound(scores_in: Sequence[float] | np.ndarray, scores_out: Sequence[float] | np.ndarray, *,
                   delta: float, confidence: float = 0.95, max_thresholds: int = MAX_THRESHOLDS) -> ManyRunBound:
    """Lower bound on epsilon from runs with the canary (``scores_in``) and without it (``scores_out``).

    For each threshold ``t`` the attack guesses "in" when the score is at least ``t``. (epsilon, delta)-DP implies
    ``TPR <= e^eps FPR + delta`` and ``1 - FPR <= e^eps (1 - TPR) + delta``; with one-sided Clopper-Pearson bounds at
    level ``(1 - confidence) / 2`` each this gives ``eps >= log((TPR_lo - delta) / FPR_hi)`` and
    ``eps >= log((TNR_lo - delta) / FNR_hi)``. The bound is the maximum over thresholds and both inequalities
    (Jagielski et al. 2020, Algorithm 2; Nasr et al. 2021, Section 4). Higher scores must mean "more likely in".

    Args:
        scores_in: Scores of runs that included the canary (at least one).
        scores_out: Scores of runs that did not (at least one).
        delta: The delta in (0, 1) of the (epsilon, delta) guarantee under test.
        confidence: Joint confidence of the two intervals, in (0, 1).
        max_thresholds: How many thresholds to try (>= 4).

    Returns:
        The :class:`ManyRunBound`.

    Raises:
        ValueError: Empty or non-finite scores, or a bad ``delta``, ``confidence`` or ``max_thresholds``.

    Example:
        >>> bound = many_run_bound([5.0] * 1000, [0.0] * 1000, delta=1e-5)
        >>> round(bound.epsilon, 2)  # perfect separation of 1000 + 1000 runs: log(0.996 / 0.0037)
        5.6
    """
    delta = check_delta(delta)
    confidence = check_number("confidence", confidence, above=0, below=1)
    check_integer("max_thresholds", max_thresholds, minimum=4)
    inside = np.asarray(scores_in, dtype=float).ravel()
    outside = np.asarray(scores_out, dtype=float).ravel()
    for name, sample in (("scores_in", inside), ("scores_out", outside)):
        if sample.size == 0 or not np.isfinite(sample).all():
            raise ValueError(f"{name} must be a non-empty array of finite scores, got {sample.size} values")
    thresholds = _candidate_thresholds(inside, outside, max_thresholds)
    level = (1 - confidence) / 2
    n_in, n_out = inside.size, outside.size
    true_pos = n_in - np.searchsorted(np.sort(inside), thresholds, side="left")
    false_pos = n_out - np.searchsorted(np.sort(outside), thresholds, side="left")
    tpr_lo, _ = clopper_pearson(true_pos, n_in, level=level)
    _, fpr_hi = clopper_pearson(false_pos, n_out, level=level)
    tpr, fpr = true_pos / n_in, false_pos / n_out
    best = ManyRunBound(0.0, 0.0, float(thresholds[0]), "high", float(tpr[0]), float(fpr[0]), n_in, n_out,
                        confidence, delta)
    # "high": TPR_lo - delta over FPR_hi; "low": TNR_lo = 1 - FPR_hi over FNR_hi = 1 - TPR_lo
    for direction, numerator, denominator, point_num, point_den in (
            ("high", tpr_lo - delta, fpr_hi, tpr - delta, fpr),
            ("low", (1 - fpr_hi) - delta, 1 - tpr_lo, (1 - fpr) - delta, 1 - tpr)):
        with np.errstate(divide="ignore", invalid="ignore"):
            bounds = np.where(numerator > 0, np.log(np.maximum(numerator, 1e-300) / denominator), -np.inf)
        index = int(np.argmax(bounds))
        if bounds[index] > best.epsilon:
            with np.errstate(divide="ignore"):
                estimate = math.log(point_num[index] / point_den[index]) if point_num[index] > 0 else -math.inf
            best = ManyRunBound(float(bounds[index]), estimate, float(thresholds[index]), direction,
                                float(tpr[index]), float(fpr[index]), n_in, n_out, confidence, delta)
    return best


def roc_curve(scores_in: Sequence[float] | np.ndarray, scores_out: Sequence[float] | np.ndarray
              ) -> tuple[np.ndarray, np.ndarray]:
    """The attack's ROC curve (guess "in" when the score is at least a threshold), every distinct threshold.

    Returns:
        ``(fpr, tpr)``, both increasing from the highest threshold to the lowest.

    Example:
        >>> fpr, tpr = roc_curve([2.0, 3.0], [1.0, 2.0])
        >>> fpr.tolist(), tpr.tolist()
        ([0.0, 0.5, 1.0], [0.5, 1.0, 1.0])
    """
    inside = np.sort(np.asarray(scores_in, dtype=float).ravel())
    outside = np.sort(np.asarray(scores_out, dtype=float).ravel())
    thresholds = np.unique(np.concatenate([inside, outside]))[::-1]
    tpr = (inside.size - np.searchsorted(inside, thresholds, side="left")) / inside.size
    fpr = (outside.size - np.searchsorted(outside, thresholds, side="left")) / outside.size
    return fpr, tpr


def one_run_p_value(*, m: int, r: int, v: int, epsilon: float, delta: float) -> float:
    """Steinke-Nasr-Jagielski's p-value: ``P[W >= v]`` bounded for an (epsilon, delta)-DP mechanism.

    ``W`` counts the correct guesses among ``r`` non-abstaining guesses on ``m`` canaries, each included with
    probability 1/2. With ``f(v) = P[Binomial(r, e^eps / (1 + e^eps)) >= v]`` the bound is
    ``f(v) + 2 m delta max_{1 <= i <= v} (f(v - i) - f(v)) / i`` (their main theorem and its approximate-DP form,
    computed as in their Appendix D), capped at 1.

    Args:
        m: Canaries randomised (>= 1).
        r: Guesses made (``0..m``).
        v: Correct guesses (``0..r``).
        epsilon: The epsilon under test (>= 0).
        delta: The delta under test, in [0, 1).

    Returns:
        The p-value in [0, 1].

    Example:
        >>> round(one_run_p_value(m=100, r=100, v=60, epsilon=0.0, delta=0.0), 4)  # P[Bin(100, 1/2) >= 60]
        0.0284
    """
    m = check_integer("m", m)
    r = check_integer("r", r, minimum=0, maximum=m)
    v = check_integer("v", v, minimum=0, maximum=r)
    epsilon = check_number("epsilon", epsilon, at_least=0, finite=True)
    delta = check_number("delta", delta, at_least=0, below=1)
    p = 1.0 / (1.0 + math.exp(-epsilon))
    tail = float(stats.binom.sf(v - 1, r, p))
    if delta == 0 or v == 0:
        return min(tail, 1.0)
    steps = np.arange(1, v + 1)
    # f(v - i) - f(v) = P[v - i <= Binomial < v], a cumulative sum of the pmf below v
    between = np.cumsum(stats.binom.pmf(v - steps, r, p))
    return float(min(tail + 2 * m * delta * np.max(between / steps), 1.0))


def one_run_epsilon(*, m: int, r: int, v: int, delta: float, confidence: float = 0.95) -> float:
    """The largest epsilon that ``v`` correct guesses out of ``r`` reject at ``confidence`` (0 if none).

    Steinke et al.'s Algorithm 2: the p-value of :func:`one_run_p_value` increases with epsilon, so bisection finds
    the last epsilon whose p-value is below ``1 - confidence``.

    Args:
        m, r, v, delta: As in :func:`one_run_p_value`.
        confidence: In (0, 1).

    Returns:
        The lower bound on epsilon.

    Example:
        >>> round(one_run_epsilon(m=1000, r=1000, v=1000, delta=0.0), 2)  # all right: p^1000 = 0.05 at logit(p)
        5.81
    """
    confidence = check_number("confidence", confidence, above=0, below=1)
    alpha = 1 - confidence
    if one_run_p_value(m=m, r=r, v=v, epsilon=0.0, delta=delta) >= alpha:
        return 0.0
    low, high = 0.0, 1.0
    while one_run_p_value(m=m, r=r, v=v, epsilon=high, delta=delta) < alpha:
        low, high = high, 2 * high
    for _ in range(40):
        middle = (low + high) / 2
        if one_run_p_value(m=m, r=r, v=v, epsilon=middle, delta=delta) < alpha:
            low = middle
        else:
            high = middle
    return low


@dataclass(frozen=True)
class OneRunBound:
    """The result of :func:`one_run_bound`.

    Attributes:
        epsilon: The lower bound at ``confidence`` (maximum over the candidate guess counts, each tested at
            ``(1 - confidence) / len(candidates)``).
        guesses: ``r = k+ + k-`` of the best candidate.
        correct: Its correct guesses ``v``.
        m: Canaries.
        confidence: The confidence level.
        delta: The delta under test.
    """

    epsilon: float
    guesses: int
    correct: int
    m: int
    confidence: float
    delta: float


def one_run_bound(scores: Sequence[float] | np.ndarray, included: Sequence[bool] | np.ndarray, *,
                  guesses: Sequence[int] | int, delta: float, confidence: float = 0.95) -> OneRunBound:
    """Steinke et al.'s one-run audit: guess "in" for the ``k`` highest scores and "out" for the ``k`` lowest.

    Each candidate ``k`` in ``guesses`` (fixed before looking at the scores) gives ``r = 2k`` guesses; the
    candidates share the error ``1 - confidence`` equally (a union bound), so the maximum over them holds at
    ``confidence``.

    Args:
        scores: One score per canary (higher: more likely included).
        included: Whether each canary was included (drawn with probability 1/2 each, independently).
        guesses: Candidate ``k`` values (each in ``1..m // 2``).
        delta: The delta under test.
        confidence: In (0, 1).

    Returns:
        The :class:`OneRunBound`.

    Raises:
        ValueError: Scores and flags of different lengths, or a ``k`` out of range.
    """
    scores = np.asarray(scores, dtype=float).ravel()
    included = np.asarray(included, dtype=bool).ravel()
    if scores.size != included.size or scores.size < 2 or not np.isfinite(scores).all():
        raise ValueError(f"need finite scores and inclusion flags of one length >= 2, got {scores.size} and "
                         f"{included.size}")
    candidates = [check_integer("guesses", k, maximum=scores.size // 2) for k in np.atleast_1d(guesses)]
    confidence = check_number("confidence", confidence, above=0, below=1)
    each = 1 - (1 - confidence) / len(candidates)
    order = np.argsort(scores, kind="stable")
    best = OneRunBound(0.0, 2 * candidates[0], 0, scores.size, confidence, delta)
    for k in candidates:
        correct = int(included[order[-k:]].sum() + (~included[order[:k]]).sum())
        epsilon = one_run_epsilon(m=scores.size, r=2 * k, v=correct, delta=delta, confidence=each)
        if epsilon > best.epsilon or best.correct == 0:
            best = OneRunBound(epsilon, 2 * k, correct, scores.size, confidence, delta)
    return best
