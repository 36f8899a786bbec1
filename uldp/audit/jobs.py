"""Audit jobs: one method, one claimed epsilon, one kind of canary and one estimator, stored as one JSON file each.

A job is a plain mapping of JSON values (:func:`job`); its file is ``<root>/<key>.json`` with ``key`` the
:func:`uldp.common.provenance.config_hash` of that mapping, written atomically with the job, its result and provenance
(:func:`uldp.common.provenance`: command, git commit, packages; plus date and wall time), so that an interrupted
set of audits resumes where it stopped and a stored result says where it comes from. Every random draw derives
from the job's ``seed``. The ``default`` profile's results are committed under ``results/audit/default/``; the
``smoke`` profile (CI) writes under ``_build/results/audit/smoke/``.

Kinds of job:

- ``canary="crafted"`` (:mod:`uldp.audit.crafted`): the server's every-round view; ``estimator="many"`` runs
  ``runs`` independent runs with one canary each, included with probability 1/2 (Clopper-Pearson bound at a
  threshold chosen on held-out runs); ``estimator="one"`` is Steinke et al.'s one-run audit with ``canaries``
  canaries in ``runs`` run(s). Where the scores are Gaussian by construction (a private method other than
  ULDP-GROUP-k, without user sampling; with several canaries per run, a user-level method, whose canaries are
  independent users on independent coordinates) the f-DP bound of Nasr et al. 2023 is stored beside it
  (``gaussian_lb``). ``q < 1`` audits ULDP-SGD/AVG's user sampling with the likelihood-ratio score;
  ``aggregation="protocol1"`` sends enhanced weights through Protocol 1 (:func:`protocol_aggregator`).
  Every job with a claim stores ``tight_epsilon``, the tightest valid epsilon of the same mechanism
  (the PLD accountant: the exact Gaussian without sampling), beside the claimed (RDP) one.
- ``canary="natural"`` (:mod:`uldp.audit.natural`): real training, final-model loss; one-run estimator on the
  standardised scores of ``canaries`` canaries in each of ``runs`` runs.

``level="user"`` canaries hold ``r`` records in each of the 3 silos, ``"user-2"`` in 2 of them (where uniform and
enhanced weights differ); ``level="record"`` canaries one record in one silo (the record-level comparison).
``claim="record"`` reads ULDP-GROUP-k's record-level epsilon instead of its user-level one: the method is then plain
record-level DP-SGD with its record-level promise.
"""

from __future__ import annotations

import datetime
import math
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from uldp.audit.crafted import (
    PREPARE_STREAM,
    CraftedSetting,
    audit_federation,
    calibrate_sigma,
    claimed_epsilon,
    crafted_scores,
)
from uldp.audit.estimators import gaussian_dp_bound, many_run_bound, one_run_bound, roc_curve
from uldp.audit.natural import NaturalSetting, natural_federation, natural_scores, standardised
from uldp.common.atomic import read_complete_json, write_json_atomic
from uldp.common.checks import check_delta, check_integer, check_number, check_rate
from uldp.common.provenance import config_hash, provenance
from uldp.methods import GroupMethod, Hyperparameters, UserLevelMethod, aggregate, make_method
from uldp.methods.base import seed_stream
from uldp.secure import ProtocolParameters

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from uldp.methods import AggregateFn, Method

#: Version of the audit result layout (2: held-out thresholds, the Gaussian bound, sampling and Protocol 1).
SCHEMA_VERSION = 2
#: How a crafted audit aggregates enhanced weights: the plain sum, or Protocol 1 (:func:`protocol_aggregator`).
AGGREGATIONS = ("plain", "protocol1")
#: Protocol 1's parameters in audits through it: test-size keys (the audit tests the noise the protocol adds, not
#: the keys' strength) and N_max above any user's records in the crafted federation.
AUDIT_PROTOCOL = ProtocolParameters(key_bits=512, insecure_test_key=True, n_max=64)
#: Canary levels: a user with 2 records in each of the 3 silos, the same in 2 of the 3 silos, or a single record.
LEVELS = ("user", "user-2", "record")
#: Hyperparameters of crafted audits (``sigma`` is calibrated per job to the claimed epsilon).
CRAFTED_HP = Hyperparameters(
    global_lr=1.0, local_lr=0.1, local_epochs=1, batch_size=16, clip=1.0, sigma=1.0
)
#: False-positive rates at which stored ROC curves keep their true-positive rate (log-spaced, for log axes).
ROC_FPR = tuple(float(f) for f in np.geomspace(1e-6, 1.0, 61))
#: How far a stored rate may be from :data:`ROC_FPR`'s: numpy's ``geomspace`` differs in the last bit between CPUs
#: (its SIMD ``log`` and ``exp``: an AMD EPYC gives 9.999999999999999e-06 where the committed files hold 1e-05).
ROC_FPR_RTOL = 1e-12


def job(
    method: str,
    *,
    claim: str | None,
    epsilon: float | None,
    canary: str = "crafted",
    level: str = "user",
    estimator: str = "many",
    runs: int,
    canaries: int = 1,
    seed: int = 0,
    delta: float = 1e-5,
    confidence: float = 0.95,
    q: float = 1.0,
    aggregation: str = "plain",
) -> dict[str, Any]:
    """The JSON mapping of one audit job (validated).

    Args:
        method: A registry name.
        claim: ``"user"``, ``"record"`` (ULDP-GROUP-k) or ``None`` (DEFAULT: no claim, ``epsilon`` ``None``).
        epsilon: The claimed epsilon the method's sigma is calibrated to.
        canary: ``"crafted"`` or ``"natural"``.
        level: One of :data:`LEVELS`.
        estimator: ``"many"`` or ``"one"`` (natural canaries: ``"one"`` only).
        runs: Independent runs.
        canaries: Canaries per run (``"many"``: 1).
        seed: The job's seed.
        delta: The delta of the claim and of the bound.
        confidence: Of the lower bound.
        q: User-level sampling rate (ULDP-SGD/AVG only; crafted canaries, scored by the likelihood ratio).
        aggregation: One of :data:`AGGREGATIONS` (``"protocol1"``: crafted canaries of an enhanced-weight method).

    Raises:
        ValueError: A value out of its allowed set, or a claim without epsilon (or the reverse).
    """
    spec = make_method(
        method, replace(CRAFTED_HP, q=check_rate("q", q))
    ).spec  # in the registry, q allowed
    for name, value, allowed in (
        ("claim", claim, ("user", "record", None)),
        ("canary", canary, ("crafted", "natural")),
        ("level", level, LEVELS),
        ("estimator", estimator, ("many", "one")),
        ("aggregation", aggregation, AGGREGATIONS),
    ):
        if value not in allowed:
            raise ValueError(f"{name} must be one of {allowed}, got {value!r}")
    if (claim is None) != (epsilon is None):
        raise ValueError(
            f"give both claim and epsilon or neither, got claim={claim!r}, epsilon={epsilon!r}"
        )
    if canary == "natural" and estimator != "one":
        raise ValueError("natural canaries use the one-run estimator (estimator='one')")
    if estimator == "many" and canaries != 1:
        raise ValueError(
            f"the many-run estimator audits one canary per run, got canaries={canaries!r}"
        )
    if canary == "natural" and (q != 1 or aggregation != "plain"):
        raise ValueError(
            f"natural canaries are audited without sampling or Protocol 1, got q={q!r}, "
            f"aggregation={aggregation!r}"
        )
    if aggregation == "protocol1" and not spec.enhanced_weights:
        raise ValueError(
            f"Protocol 1 aggregates enhanced weights (ULDP-SGD-w, ULDP-AVG-w), not {method}"
        )
    check_integer("runs", runs)
    check_integer("canaries", canaries)
    check_integer("seed", seed, minimum=0)
    check_delta(delta)
    check_number("confidence", confidence, above=0, below=1)
    return {
        "method": method,
        "claim": claim,
        "epsilon": epsilon,
        "canary": canary,
        "level": level,
        "estimator": estimator,
        "runs": runs,
        "canaries": canaries,
        "seed": seed,
        "delta": delta,
        "confidence": confidence,
        "q": q,
        "aggregation": aggregation,
    }


def protocol_aggregator(method: Method) -> AggregateFn:
    """Protocol 1 (:class:`uldp.federation.SecureAggregator`, test-size keys :data:`AUDIT_PROTOCOL`) with the method's
    public bounds C and sigma: the aggregation an audit through the protocol uses (the server's decrypted sum)."""
    from uldp.federation import (
        SecureAggregator,
    )  # the ``secure`` extra (phe, gmpy2), on this path only

    return SecureAggregator(AUDIT_PROTOCOL, clip=method.hp.clip, sigma=method.hp.sigma)


def gaussian_scores(method: Method, params: Mapping[str, Any]) -> bool:
    """Whether a crafted job's scores are Gaussian by construction, so that :func:`gaussian_dp_bound` applies: a
    private method whose noise is one Gaussian per round (not ULDP-GROUP-k's DP-SGD sampling), without user
    sampling, and with several canaries per run only for user-level methods (ULDP-NAIVE clips a silo's summed
    delta, which couples the canaries)."""
    return (
        params["canary"] == "crafted"
        and params["claim"] is not None
        and params["q"] == 1
        and not isinstance(method, GroupMethod)
        and (params["canaries"] == 1 or isinstance(method, UserLevelMethod))
    )


def crafted_setting(level: str) -> CraftedSetting:
    """The crafted audit's federation (3 silos) and canary of ``level`` (one of :data:`LEVELS`)."""
    return {
        "user": CraftedSetting(),
        "user-2": CraftedSetting(canary_silos=2),
        "record": CraftedSetting(canary_records=1, canary_silos=1),
    }[level]


def natural_setting(level: str) -> NaturalSetting:
    """The natural audit's federation (synthetic data, 3 silos) and canary of ``level`` (one of :data:`LEVELS`)."""
    return {
        "user": NaturalSetting(),
        "user-2": NaturalSetting(canary_silos=2),
        "record": NaturalSetting(canary_records=1, canary_silos=1),
    }[level]


def _roc(scores_in: np.ndarray, scores_out: np.ndarray) -> list[float]:
    """The true-positive rate at each of :data:`ROC_FPR` (the best threshold with at most that FPR)."""
    fpr, tpr = roc_curve(scores_in, scores_out)
    index = np.searchsorted(fpr, ROC_FPR, side="right") - 1
    return [float(tpr[i]) if i >= 0 else 0.0 for i in index]


def run_job(params: Mapping[str, Any]) -> dict[str, Any]:
    """Run one audit job (a :func:`job` mapping) and return its JSON-ready result.

    Returns:
        ``sigma``, ``claimed_epsilon`` (the method's accountant), ``tight_epsilon`` (the PLD accountant), the bound
        (``epsilon_lb``, ``estimate`` and the estimator's details; ``gaussian_lb``, ``mu_lower``, ``mu_estimate``
        and ``gaussian_estimate`` where :func:`gaussian_scores`), the ROC at :data:`ROC_FPR` (pooled scores),
        ``seconds`` and ``runs_per_minute`` (both including the calibration of sigma; ``benchmarks/audit.py`` times
        the runs alone).
    """
    params = job(**params)
    started = time.perf_counter()
    method_name, claim, level = params["method"], params["claim"], params["level"]
    seed = params["seed"]
    rng = np.random.default_rng(seed_stream(np.random.SeedSequence(seed), 99))
    setting: CraftedSetting | NaturalSetting
    if params["canary"] == "crafted":
        setting = crafted_setting(level)
        federation = audit_federation(setting, params["canaries"], seed)
        hp = replace(CRAFTED_HP, delta=params["delta"], q=params["q"])
        rounds = setting.rounds
    else:
        setting = natural_setting(level)
        federation = natural_federation(method_name, setting, seed)
        hp = replace(
            setting.config(
                method_name, sigma=None if claim is None else 1.0, seed=seed
            ).hyperparameters(),
            delta=params["delta"],
        )
        rounds = setting.rounds
    sigma = None
    if claim is not None:
        sigma = calibrate_sigma(
            method_name,
            hp,
            federation,
            rounds=rounds,
            epsilon=params["epsilon"],
            claim=claim,
            seed=seed,
        )
        hp = replace(hp, sigma=sigma)
    method = make_method(method_name, hp)
    if isinstance(setting, CraftedSetting):
        included = rng.random((params["runs"], params["canaries"])) < 0.5
        aggregate_fn = (
            protocol_aggregator(method) if params["aggregation"] == "protocol1" else aggregate
        )
        scores, prepared = crafted_scores(
            method,
            setting,
            included,
            seed=seed,
            aggregate_fn=aggregate_fn,
            score="likelihood" if params["q"] < 1 else "sum",
        )
    else:
        scores, included = natural_scores(
            method_name, setting, runs=params["runs"], sigma=sigma, seed=seed
        )
        scores = standardised(scores)
        prepared = method.prepare(
            federation, seed_stream(np.random.SeedSequence(seed), PREPARE_STREAM)
        )
    claimed = tight = None
    if claim is not None:
        claimed = claimed_epsilon(method, prepared, rounds, claim)
        tight = claimed_epsilon(method, prepared, rounds, claim, accountant="pld")
    inside, outside = scores[included], scores[~included]
    result: dict[str, Any] = {
        "sigma": sigma,
        "claimed_epsilon": claimed,
        "tight_epsilon": tight,
        "setting": asdict(setting),
        "n_in": int(inside.size),
        "n_out": int(outside.size),
    }
    if gaussian_scores(method, params):
        gaussian = gaussian_dp_bound(
            inside, outside, delta=params["delta"], confidence=params["confidence"]
        )
        result.update(
            gaussian_lb=gaussian.epsilon,
            mu_lower=gaussian.mu_lower,
            mu_estimate=gaussian.mu_estimate,
            gaussian_estimate=gaussian.estimate,
        )
    if params["estimator"] == "many":
        many = many_run_bound(
            inside, outside, delta=params["delta"], confidence=params["confidence"]
        )
        result.update(
            epsilon_lb=many.epsilon,
            estimate=many.estimate,
            threshold=many.threshold,
            direction=many.direction,
            tpr=many.tpr,
            fpr=many.fpr,
            selection_runs=many.selection_runs,
        )
    else:
        slots = scores.size
        candidates = sorted({max(1, slots // d) for d in (100, 20, 6)})
        one = one_run_bound(
            scores.ravel(),
            included.ravel(),
            guesses=candidates,
            delta=params["delta"],
            confidence=params["confidence"],
        )
        result.update(
            epsilon_lb=one.epsilon,
            guesses=one.guesses,
            correct=one.correct,
            guess_candidates=candidates,
        )
    result["estimate"] = _finite(result.get("estimate"))
    seconds = time.perf_counter() - started
    result.update(
        roc_fpr=list(ROC_FPR),
        roc_tpr=_roc(inside, outside),
        seconds=round(seconds, 3),
        runs_per_minute=round(60 * params["runs"] / seconds, 1),
    )
    return result


def _finite(value: float | None) -> float | str | None:
    """JSON has no infinity: an infinite point estimate is stored as the string ``"inf"``."""
    if value is None or math.isfinite(value):
        return value
    return "inf" if value > 0 else "-inf"


def read_stored(path: Path) -> dict | None:
    """The stored audit at ``path``, or ``None`` when there is none or it is incomplete (no ``result``).

    Raises:
        ValueError: A complete file whose fields are not what :func:`run_jobs` writes (:func:`check_stored`); the
            message names the file.
    """
    payload = read_complete_json(path, schema=SCHEMA_VERSION)
    if payload is None:
        return None
    try:
        check_stored(payload, key=Path(path).stem)
    except ValueError as error:
        raise ValueError(
            f"stored audit {path} is malformed: {error}; delete it to run it again"
        ) from None
    return payload


#: The result fields of every audit, and those of each estimator (:func:`run_job`).
RESULT_FIELDS = (
    "sigma",
    "claimed_epsilon",
    "tight_epsilon",
    "setting",
    "n_in",
    "n_out",
    "epsilon_lb",
    "estimate",
    "roc_fpr",
    "roc_tpr",
    "seconds",
    "runs_per_minute",
)
ESTIMATOR_FIELDS = {
    "many": ("threshold", "direction", "tpr", "fpr", "selection_runs"),
    "one": ("guesses", "correct", "guess_candidates"),
}
#: The fields of the Gaussian-DP bound, all present where the audit's scores are Gaussian (:func:`gaussian_scores`).
GAUSSIAN_FIELDS = ("gaussian_lb", "mu_lower", "mu_estimate", "gaussian_estimate")


def _same_rates(stored: object, rates: tuple[float, ...]) -> bool:
    """Whether ``stored`` is a list of ``rates`` up to :data:`ROC_FPR_RTOL` (the same grid computed on another CPU)."""
    return (
        isinstance(stored, list)
        and len(stored) == len(rates)
        and all(isinstance(rate, float) for rate in stored)
        and all(
            math.isclose(a, b, rel_tol=ROC_FPR_RTOL, abs_tol=0.0)
            for a, b in zip(stored, rates, strict=True)
        )
    )


def check_stored(payload: Mapping[str, Any], *, key: str) -> None:
    """Check every field of a stored audit (what :func:`run_jobs` writes) against its type and range.

    Args:
        payload: The parsed file.
        key: Its file name without ``.json``: the :func:`uldp.common.provenance.config_hash` of its job.

    Raises:
        ValueError: Naming the first field that is missing, extra, of the wrong type or out of range, or a job, key
            and file name that disagree.
    """
    if set(payload) != {"schema", "key", "params", "result", "provenance"}:
        raise ValueError(
            f"the file must hold schema, key, params, result and provenance, got "
            f"{', '.join(sorted(map(str, payload)))[:120]}"
        )
    params, result, provenance = payload["params"], payload["result"], payload["provenance"]
    try:
        valid = isinstance(params, dict) and job(**params) == params
    except TypeError:
        valid = False
    if not valid:
        raise ValueError(f"params must be a job's arguments, got {str(params)[:80]}")
    if not payload["key"] == key == config_hash(params):
        raise ValueError(
            f"its key {str(payload['key'])[:20]!r}, file name {key!r} and job (key {config_hash(params)}) "
            f"disagree"
        )
    if not isinstance(provenance, dict):
        raise ValueError(f"provenance must be an object, got {str(provenance)[:40]}")
    check_number("provenance.wall_seconds", provenance.get("wall_seconds"), at_least=0, finite=True)
    expected = (*RESULT_FIELDS, *ESTIMATOR_FIELDS[params["estimator"]])
    if not isinstance(result, dict) or set(result) - set(GAUSSIAN_FIELDS) != set(expected):
        raise ValueError(
            f"result must be an object of {', '.join(expected)}, got {str(result)[:80]}"
        )
    gaussian = set(result) & set(GAUSSIAN_FIELDS)
    if gaussian and gaussian != set(GAUSSIAN_FIELDS):
        raise ValueError(
            f"result must hold all of {', '.join(GAUSSIAN_FIELDS)} or none, got {', '.join(gaussian)}"
        )
    for name in gaussian:
        if result[name] not in ("inf", "-inf"):
            check_number(f"result.{name}", result[name])
    for name in (
        "sigma",
        "claimed_epsilon",
        "tight_epsilon",
    ):  # each exactly when the job has a claim
        if params["claim"] is None and result[name] is not None:
            raise ValueError(
                f"result.{name} must be null for a job without a claim, got {result[name]!r:.40}"
            )
        if params["claim"] is not None:
            check_number(
                f"result.{name}",
                result[name],
                above=0 if name == "sigma" else None,
                at_least=None if name == "sigma" else 0,
                finite=True,
            )
    setting = result["setting"]
    if not isinstance(setting, dict) or not all(
        value is None or isinstance(value, (str, int, float)) for value in setting.values()
    ):
        raise ValueError(
            f"result.setting must be an object of numbers and strings, got {str(setting)[:80]}"
        )
    for name in ("n_in", "n_out"):
        check_integer(f"result.{name}", result[name], minimum=0)
    check_number("result.epsilon_lb", result["epsilon_lb"], finite=True)
    if result["estimate"] not in (None, "inf", "-inf"):
        check_number("result.estimate", result["estimate"], finite=True)
    if not _same_rates(result["roc_fpr"], ROC_FPR):
        raise ValueError(
            f"result.roc_fpr must be the {len(ROC_FPR)} stored rates ROC_FPR, got "
            f"{str(result['roc_fpr'])[:60]}"
        )
    tpr = result["roc_tpr"]
    if not isinstance(tpr, list) or len(tpr) != len(ROC_FPR):
        raise ValueError(
            f"result.roc_tpr must be a list of {len(ROC_FPR)} rates, got {str(tpr)[:60]}"
        )
    for rate in tpr:
        check_number("result.roc_tpr", rate, at_least=0, at_most=1)
    for name in ("seconds", "runs_per_minute"):
        check_number(f"result.{name}", result[name], at_least=0, finite=True)
    if params["estimator"] == "many":
        check_number("result.threshold", result["threshold"])
        if result["direction"] not in ("high", "low"):
            raise ValueError(
                f"result.direction must be 'high' or 'low', got {result['direction']!r:.40}"
            )
        for name in ("tpr", "fpr"):
            check_number(f"result.{name}", result[name], at_least=0, at_most=1)
        check_integer("result.selection_runs", result["selection_runs"], minimum=0)
        return
    guesses = check_integer("result.guesses", result["guesses"], minimum=0)
    check_integer("result.correct", result["correct"], minimum=0, maximum=guesses)
    candidates = result["guess_candidates"]
    if not isinstance(candidates, list) or not candidates:
        raise ValueError(
            f"result.guess_candidates must be a non-empty list, got {str(candidates)[:60]}"
        )
    for candidate in candidates:
        check_integer("result.guess_candidates", candidate)


def run_jobs(
    jobs: Iterable[Mapping[str, Any]], root: Path | str, *, command: str, progress: bool = False
) -> list[dict]:
    """Run the jobs not yet stored under ``root`` (resuming), store each atomically, return every payload.

    Args:
        jobs: :func:`job` mappings.
        root: The results folder.
        command: What started them (provenance).
        progress: Print one line per job run.

    Returns:
        One payload per job, in order: ``schema``, ``key``, ``params``, ``result``, ``provenance``.
    """
    base = provenance(command)
    payloads = []
    for params in jobs:
        params = job(**params)
        key = config_hash(params)
        path = Path(root) / f"{key}.json"
        payload = read_stored(path)
        if payload is None:
            started = time.perf_counter()
            result = run_job(params)
            payload = {
                "schema": SCHEMA_VERSION,
                "key": key,
                "params": params,
                "result": result,
                "provenance": {
                    **base,
                    "date": _now(),
                    "wall_seconds": round(time.perf_counter() - started, 3),
                },
            }
            write_json_atomic(path, payload)
            if progress:
                print(
                    f"{params['method']} {params['canary']} {params['estimator']} eps={params['epsilon']}: "
                    f"lb {result['epsilon_lb']:.3f} ({result['seconds']:.0f} s)",
                    flush=True,
                )
        payloads.append(payload)
    return payloads


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
