"""Empirical lower bounds on epsilon from a membership attack's scores, at a stated confidence.

Three estimators, all one-sided statements "the mechanism is *not* (epsilon, delta)-DP for any epsilon below the
bound", holding with probability at least ``confidence`` over the audit's randomness:

- **Many runs, one canary** (Jagielski, Ullman and Oprea 2020, "Auditing differentially private machine learning:
  how private is private SGD?"; Nasr et al. 2021, "Adversary instantiation"): each run includes the canary or not,
  the attack thresholds a score. (epsilon, delta)-DP forces ``TPR <= e^eps FPR + delta`` and
  ``TNR <= e^eps FNR + delta`` for every threshold, so with a Clopper-Pearson lower bound ``TPR_lo`` and upper bound
  ``FPR_hi`` (each at level ``(1 - confidence) / 2``, jointly at ``confidence``)
  ``eps >= log((TPR_lo - delta) / FPR_hi)``, and symmetrically. Those papers maximise this over thresholds on
  the runs they bound, which voids the stated confidence; :func:`many_run_bound` chooses the threshold and the
  direction on held-out runs and bounds on the others, so its bound holds at ``confidence``.
- **Many runs, Gaussian scores** (Nasr et al. 2023, "Tight auditing of differentially private machine learning"):
  where the mechanism is Gaussian so are the scores, and a confidence bound on ``mu`` of mu-GDP gives a near-tight
  epsilon from far fewer runs (:func:`gaussian_dp_bound`).
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
from scipy import optimize, stats

from uldp.accounting import gaussian_epsilon
from uldp.common.checks import check_delta, check_integer, check_number

if TYPE_CHECKING:
    from collections.abc import Sequence

#: Thresholds :func:`many_run_bound` tries at most (taken at geometrically spaced ranks of both tails).
MAX_THRESHOLDS = 2000


def clopper_pearson(
    successes: np.ndarray | int, trials: np.ndarray | int, *, level: float
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
        raise ValueError(
            f"need 0 <= successes <= trials and trials >= 1, got {successes!r} of {trials!r}"
        )
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
            estimate; ``inf`` where that threshold has no false positive), on the bounding runs.
        threshold: The score threshold that gave ``epsilon`` (guess "in" when score >= threshold, or "out" when
            ``direction`` is ``"low"``: score < threshold).
        direction: ``"high"`` (bound from TPR/FPR) or ``"low"`` (from TNR/FNR, the symmetric inequality).
        tpr: True positive rate at the threshold (bounding runs).
        fpr: False positive rate at the threshold (bounding runs).
        n_in: Bounding runs with the canary.
        n_out: Bounding runs without it.
        confidence: The confidence level.
        delta: The delta of the (epsilon, delta) statement.
        selection_runs: Runs held out to choose the threshold and direction (not in ``n_in`` or ``n_out``).
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
    selection_runs: int


def _candidate_thresholds(scores_in: np.ndarray, scores_out: np.ndarray, limit: int) -> np.ndarray:
    """Scores at geometrically spaced ranks from both ends of each sample (where the bound is decided)."""
    candidates = []
    for sample in (np.sort(scores_in), np.sort(scores_out)):
        n = sample.size
        ranks = np.unique(np.geomspace(1, n, max(2, limit // 4)).astype(int) - 1)
        candidates += [sample[ranks], sample[n - 1 - ranks]]
    return np.unique(np.concatenate(candidates))


def _threshold_bounds(
    inside: np.ndarray, outside: np.ndarray, thresholds: np.ndarray, *, delta: float, level: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per direction (rows ``"high"``, ``"low"``) and threshold: the Clopper-Pearson bound on epsilon, the point
    estimate, and the threshold's TPR and FPR (guess "in" when the score is at least the threshold)."""
    n_in, n_out = inside.size, outside.size
    true_pos = n_in - np.searchsorted(np.sort(inside), thresholds, side="left")
    false_pos = n_out - np.searchsorted(np.sort(outside), thresholds, side="left")
    tpr_lo, _ = clopper_pearson(true_pos, n_in, level=level)
    _, fpr_hi = clopper_pearson(false_pos, n_out, level=level)
    tpr, fpr = true_pos / n_in, false_pos / n_out
    # "high": TPR_lo - delta over FPR_hi; "low": TNR_lo = 1 - FPR_hi over FNR_hi = 1 - TPR_lo
    numerator = np.stack([tpr_lo - delta, (1 - fpr_hi) - delta])
    denominator = np.stack([fpr_hi, 1 - tpr_lo])
    point_num, point_den = np.stack([tpr - delta, (1 - fpr) - delta]), np.stack([fpr, 1 - tpr])
    with np.errstate(divide="ignore", invalid="ignore"):
        bounds = np.where(
            numerator > 0, np.log(np.maximum(numerator, 1e-300) / denominator), -np.inf
        )
        estimates = np.where(
            point_num > 0, np.log(np.maximum(point_num, 1e-300) / point_den), -np.inf
        )
    return bounds, estimates, tpr, fpr


#: Share of each sample's runs (the first ones, in run order) on which :func:`many_run_bound` chooses its threshold
#: and direction; the other runs bound epsilon.
SELECTION_SHARE = 0.2


def many_run_bound(
    scores_in: Sequence[float] | np.ndarray,
    scores_out: Sequence[float] | np.ndarray,
    *,
    delta: float,
    confidence: float = 0.95,
    max_thresholds: int = MAX_THRESHOLDS,
    selection_share: float = SELECTION_SHARE,
) -> ManyRunBound:
    """Lower bound on epsilon from runs with the canary (``scores_in``) and without it (``scores_out``).

    For a threshold ``t`` the attack guesses "in" when the score is at least ``t``. (epsilon, delta)-DP implies
    ``TPR <= e^eps FPR + delta`` and ``1 - FPR <= e^eps (1 - TPR) + delta``; with one-sided Clopper-Pearson bounds at
    level ``(1 - confidence) / 2`` each this gives ``eps >= log((TPR_lo - delta) / FPR_hi)`` and
    ``eps >= log((TNR_lo - delta) / FNR_hi)`` (Jagielski et al. 2020, Algorithm 2; Nasr et al. 2021, Section 4).

    Those papers maximise this over thresholds on the runs they bound, which voids the confidence: with no leakage
    at all such a maximum over 2,000 thresholds and both directions is positive in 8 to 14.5% of audits at a
    stated 95%. Here the threshold and the direction are chosen on held-out runs: the first ``selection_share`` of
    each sample (run order is independent of the scores, so this is a random split) pick the pair with the largest
    bound among up to ``max_thresholds`` candidates, and the remaining runs alone bound epsilon at that one pair.
    The choice is then independent of the bounding runs, so the bound holds at ``confidence`` exactly as one
    threshold fixed in advance does. A split rather than a Bonferroni bound over thresholds fixed in advance: the
    scores' scale is unknown before the audit, and a tail threshold must be placed on data; a fifth of the runs
    places it well and costs the bound the Clopper-Pearson width of the runs it loses. Higher scores must mean
    "more likely in".

    Args:
        scores_in: Scores of runs that included the canary, in run order (at least two).
        scores_out: Scores of runs that did not, in run order (at least two).
        delta: The delta in (0, 1) of the (epsilon, delta) guarantee under test.
        confidence: Joint confidence of the two intervals, in (0, 1).
        max_thresholds: How many thresholds the selection runs try (>= 4).
        selection_share: Share of each sample held out to choose the threshold, in (0, 1).

    Returns:
        The :class:`ManyRunBound` (its rates and counts are those of the bounding runs).

    Raises:
        ValueError: Fewer than two or non-finite scores, or a bad ``delta``, ``confidence``, ``max_thresholds`` or
            ``selection_share``.

    Example:
        >>> bound = many_run_bound([5.0] * 1000, [0.0] * 1000, delta=1e-5)
        >>> round(bound.epsilon, 2)  # perfect separation of the 800 + 800 bounding runs: log(0.9954 / 0.0046)
        5.38
    """
    delta = check_delta(delta)
    confidence = check_number("confidence", confidence, above=0, below=1)
    share = check_number("selection_share", selection_share, above=0, below=1)
    check_integer("max_thresholds", max_thresholds, minimum=4)
    inside = np.asarray(scores_in, dtype=float).ravel()
    outside = np.asarray(scores_out, dtype=float).ravel()
    for name, sample in (("scores_in", inside), ("scores_out", outside)):
        if sample.size < 2 or not np.isfinite(sample).all():
            raise ValueError(
                f"{name} must be an array of at least two finite scores, got {sample.size} values"
            )
    level = (1 - confidence) / 2
    held_in = min(inside.size - 1, max(1, round(share * inside.size)))
    held_out = min(outside.size - 1, max(1, round(share * outside.size)))
    thresholds = _candidate_thresholds(inside[:held_in], outside[:held_out], max_thresholds)
    chosen, _, _, _ = _threshold_bounds(
        inside[:held_in], outside[:held_out], thresholds, delta=delta, level=level
    )
    direction, index = np.unravel_index(int(np.argmax(chosen)), chosen.shape)
    threshold = thresholds[index : index + 1]
    bounds, estimates, tpr, fpr = _threshold_bounds(
        inside[held_in:], outside[held_out:], threshold, delta=delta, level=level
    )
    return ManyRunBound(
        max(0.0, float(bounds[direction, 0])),
        float(estimates[direction, 0]),
        float(threshold[0]),
        ("high", "low")[direction],
        float(tpr[0]),
        float(fpr[0]),
        inside.size - held_in,
        outside.size - held_out,
        confidence,
        delta,
        held_in + held_out,
    )


@dataclass(frozen=True)
class GaussianBound:
    """The result of :func:`gaussian_dp_bound`.

    Attributes:
        epsilon: The lower bound on epsilon at ``confidence``: the exact epsilon at ``delta`` of the Gaussian
            mechanism with ``mu = mu_lower`` (0 when ``mu_lower`` is not positive).
        mu_lower: The lower confidence bound on ``mu``.
        mu_estimate: The point estimate of ``mu`` (difference of means over the pooled standard deviation).
        estimate: The exact epsilon of ``mu_estimate`` (0 when it is not positive).
        n_in: Runs with the canary.
        n_out: Runs without it.
        confidence: The confidence level.
        delta: The delta of the (epsilon, delta) statement.
    """

    epsilon: float
    mu_lower: float
    mu_estimate: float
    estimate: float
    n_in: int
    n_out: int
    confidence: float
    delta: float


def gaussian_dp_bound(
    scores_in: Sequence[float] | np.ndarray,
    scores_out: Sequence[float] | np.ndarray,
    *,
    delta: float,
    confidence: float = 0.95,
) -> GaussianBound:
    """Lower bound on epsilon when the scores are Gaussian: a confidence bound on ``mu`` of mu-GDP, then its epsilon.

    The f-DP route of Nasr et al. 2023 ("Tight auditing of differentially private machine learning", USENIX
    Security, Section 5): where the mechanism is Gaussian, so are the attack's scores, ``N(m_in, s^2)`` with the
    canary and ``N(m_out, s^2)`` without, and the pair is exactly the Gaussian mechanism of
    ``mu = (m_in - m_out) / s`` (Dong, Roth and Su 2022, mu-GDP), whose epsilon at ``delta`` is
    :func:`uldp.accounting.gaussian_epsilon`. The whole sample estimates ``mu``, not the few runs past a tail
    threshold, so far fewer runs reach a near-tight bound. The confidence bound is exact for Gaussian scores of
    equal variance: ``t = mu_hat sqrt(n_in n_out / (n_in + n_out))`` with ``mu_hat`` over the pooled standard
    deviation has the noncentral t distribution with ``n_in + n_out - 2`` degrees of freedom and noncentrality
    ``mu sqrt(n_in n_out / (n_in + n_out))``; ``mu_lower`` is the noncentrality at which ``P[T >= t] = 1 -
    confidence``. The bound assumes the Gaussian shape: it holds for crafted canaries of a Gaussian mechanism
    without sampling (ULDP-NAIVE, ULDP-SGD/AVG at ``q = 1``), not for a mixture (``q < 1``: use
    :func:`many_run_bound` on likelihood-ratio scores).

    Args:
        scores_in: Scores of runs that included the canary (at least two).
        scores_out: Scores of runs that did not (at least two).
        delta: The delta in (0, 1) of the (epsilon, delta) guarantee under test.
        confidence: Of the lower bound, in (0, 1).

    Returns:
        The :class:`GaussianBound`.

    Raises:
        ValueError: Fewer than two or non-finite scores, scores without spread, or a bad ``delta`` or
            ``confidence``.

    Example:
        >>> rng = np.random.default_rng(0)
        >>> bound = gaussian_dp_bound(rng.normal(1.0, 1.0, 5000), rng.normal(0.0, 1.0, 5000), delta=1e-5)
        >>> bool(0.9 < bound.mu_lower < 1.0 < bound.mu_estimate + 0.05)
        True
    """
    delta = check_delta(delta)
    confidence = check_number("confidence", confidence, above=0, below=1)
    inside = np.asarray(scores_in, dtype=float).ravel()
    outside = np.asarray(scores_out, dtype=float).ravel()
    for name, sample in (("scores_in", inside), ("scores_out", outside)):
        if sample.size < 2 or not np.isfinite(sample).all():
            raise ValueError(
                f"{name} must be an array of at least two finite scores, got {sample.size} values"
            )
    n_in, n_out = inside.size, outside.size
    freedom = n_in + n_out - 2
    spread = math.sqrt(
        (inside.var(ddof=1) * (n_in - 1) + outside.var(ddof=1) * (n_out - 1)) / freedom
    )
    if spread == 0:
        raise ValueError(
            "the scores have no spread: a Gaussian mechanism's scores vary; use many_run_bound"
        )
    mu_hat = (inside.mean() - outside.mean()) / spread
    scale = math.sqrt(n_in * n_out / (n_in + n_out))
    observed, alpha = mu_hat * scale, 1 - confidence
    mu_lower = 0.0
    if stats.nct.sf(observed, freedom, 0.0) < alpha:  # else mu = 0 is not rejected: the bound is 0
        high = observed + 10 * (1 + abs(observed) / math.sqrt(2 * freedom))
        noncentrality = optimize.brentq(
            lambda nc: stats.nct.sf(observed, freedom, nc) - alpha,
            0.0,
            high,
            xtol=1e-10 * max(1.0, observed),
        )
        mu_lower = noncentrality / scale
    return GaussianBound(
        gaussian_epsilon(mu=mu_lower, delta=delta),
        mu_lower,
        float(mu_hat),
        gaussian_epsilon(mu=max(0.0, float(mu_hat)), delta=delta),
        n_in,
        n_out,
        confidence,
        delta,
    )


def roc_curve(
    scores_in: Sequence[float] | np.ndarray, scores_out: Sequence[float] | np.ndarray
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


def one_run_bound(
    scores: Sequence[float] | np.ndarray,
    included: Sequence[bool] | np.ndarray,
    *,
    guesses: Sequence[int] | int,
    delta: float,
    confidence: float = 0.95,
) -> OneRunBound:
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
        raise ValueError(
            f"need finite scores and inclusion flags of one length >= 2, got {scores.size} and "
            f"{included.size}"
        )
    candidates = [
        check_integer("guesses", k, maximum=scores.size // 2) for k in np.atleast_1d(guesses)
    ]
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
