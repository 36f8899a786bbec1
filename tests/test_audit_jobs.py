"""Tests of uldp.audit.jobs and uldp.audit.profiles: validation, storage with provenance, resume, the job sets."""

from __future__ import annotations

import json
import math
import re
from typing import TYPE_CHECKING

import pytest

from uldp.accounting import gaussian_epsilon
from uldp.audit import jobs
from uldp.audit.jobs import job, read_stored, run_jobs
from uldp.audit.profiles import audit_root, profile_jobs
from uldp.common.provenance import config_hash

if TYPE_CHECKING:
    from pathlib import Path


def test_job_validates_its_values() -> None:
    with pytest.raises(ValueError, match="unknown method"):
        job("ULDP-XYZ", claim="user", epsilon=1.0, runs=10)
    with pytest.raises(ValueError, match="canary must be"):
        job("ULDP-AVG", claim="user", epsilon=1.0, runs=10, canary="fake")
    with pytest.raises(ValueError, match="both claim and epsilon"):
        job("ULDP-AVG", claim="user", epsilon=None, runs=10)
    with pytest.raises(ValueError, match="one-run"):
        job("ULDP-AVG", claim="user", epsilon=1.0, runs=10, canary="natural")
    with pytest.raises(ValueError, match="one canary per run"):
        job("ULDP-AVG", claim="user", epsilon=1.0, runs=10, canaries=5)
    with pytest.raises(ValueError, match="runs must be"):
        job("ULDP-AVG", claim="user", epsilon=1.0, runs=0)
    with pytest.raises(ValueError, match="confidence"):
        job("ULDP-AVG", claim="user", epsilon=1.0, runs=10, confidence=1.5)
    with pytest.raises(ValueError, match=r"q=0\.5 is only defined"):
        job("ULDP-NAIVE", claim="user", epsilon=1.0, runs=10, q=0.5)
    with pytest.raises(ValueError, match="Protocol 1 aggregates enhanced weights"):
        job("ULDP-AVG", claim="user", epsilon=1.0, runs=10, aggregation="protocol1")
    with pytest.raises(ValueError, match="natural canaries are audited without"):
        job(
            "ULDP-AVG",
            claim="user",
            epsilon=1.0,
            runs=1,
            canary="natural",
            estimator="one",
            canaries=8,
            q=0.5,
        )


def test_run_jobs_stores_with_provenance_and_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = job("ULDP-AVG", claim="user", epsilon=2.0, runs=400)
    first = run_jobs([spec], tmp_path, command="test")[0]
    path = tmp_path / f"{config_hash(spec)}.json"
    stored = json.loads(path.read_text())
    assert stored == first and stored["params"] == spec
    result = stored["result"]
    assert result["claimed_epsilon"] == pytest.approx(2.0, rel=1e-4)
    # q = 1: the tightest valid epsilon is the exact Gaussian of mu = sqrt(T) / sigma (Theorem 3)
    exact = gaussian_epsilon(
        mu=math.sqrt(result["setting"]["rounds"]) / result["sigma"], delta=spec["delta"]
    )
    assert (
        result["tight_epsilon"] == pytest.approx(exact, rel=2e-3) and result["tight_epsilon"] < 2.0
    )
    assert 0 <= result["epsilon_lb"] <= 2.0 and 0 <= result["gaussian_lb"] <= 2.0
    assert result["n_in"] + result["n_out"] == 400 and result["selection_runs"] == pytest.approx(
        0.2 * 400, abs=1
    )
    assert {"command", "git_commit", "packages", "date", "wall_seconds"} <= set(
        stored["provenance"]
    )

    def refuse(params: dict) -> dict:
        raise AssertionError("a stored job must not run again")

    monkeypatch.setattr(jobs, "run_job", refuse)
    assert run_jobs([spec], tmp_path, command="again")[0] == first
    path.write_text('{"schema": 1}')  # an incomplete file is not a result
    assert read_stored(path) is None


@pytest.mark.slow
def test_sampling_and_protocol_jobs_store_their_bounds(tmp_path: Path) -> None:
    sampled, secure = (
        job("ULDP-AVG-w", claim="user", epsilon=2.0, runs=400, q=0.3),
        job(
            "ULDP-AVG-w",
            claim="user",
            epsilon=2.0,
            runs=1,
            estimator="one",
            canaries=20,
            aggregation="protocol1",
        ),
    )
    first, second = (
        payload["result"] for payload in run_jobs([sampled, secure], tmp_path, command="test")
    )
    assert first["tight_epsilon"] < first["claimed_epsilon"] == pytest.approx(2.0, rel=1e-4)
    assert (
        "gaussian_lb" not in first
    )  # the likelihood-ratio scores of a sub-sampled Gaussian are not Gaussian
    assert 0 <= second["gaussian_lb"] <= 2.0 and second["n_in"] + second["n_out"] == 20


def test_one_run_job_reports_its_guesses(tmp_path: Path) -> None:
    spec = job("DEFAULT", claim=None, epsilon=None, estimator="one", runs=1, canaries=200)
    result = run_jobs([spec], tmp_path, command="test")[0]["result"]
    assert result["claimed_epsilon"] is None and result["sigma"] is None
    assert result["correct"] == result["guesses"]  # no noise: every guess is right
    assert result["epsilon_lb"] > 1


def test_profile_jobs_are_distinct_and_cover_the_chapter() -> None:
    for profile in ("smoke", "default"):
        specs = profile_jobs(profile)
        assert len({config_hash(spec) for spec in specs}) == len(specs)
        methods = {spec["method"] for spec in specs}
        assert {"DEFAULT", "ULDP-GROUP-max", "ULDP-NAIVE", "ULDP-AVG", "ULDP-AVG-w"} <= methods
        assert {spec["q"] for spec in specs} == {0.1, 0.3, 1.0}
        assert any(spec["aggregation"] == "protocol1" for spec in specs)
    with pytest.raises(ValueError, match="profile"):
        profile_jobs("paper")


def _committed(estimator: str) -> dict:
    """A stored audit of the default profile (committed), as the honest file the attacks below alter."""
    spec = next(
        spec for spec in profile_jobs("default") if spec["estimator"] == estimator and spec["claim"]
    )
    return json.loads((audit_root("default") / f"{config_hash(spec)}.json").read_text())


@pytest.mark.parametrize(
    "estimator, change, message",
    [
        ("many", lambda p: {**p, "result": "junk"}, "result must be an object of sigma"),
        (
            "many",
            lambda p: {**p, "result": {**p["result"], "epsilon_lb": "high"}},
            "result.epsilon_lb must be",
        ),
        ("many", lambda p: {**p, "result": {**p["result"], "sigma": None}}, "result.sigma must be"),
        (
            "many",
            lambda p: {**p, "result": {**p["result"], "tpr": 1.5}},
            r"result.tpr must be a number in \[0, 1\]",
        ),
        (
            "many",
            lambda p: {**p, "result": {**p["result"], "direction": "up"}},
            "result.direction must be 'high' or 'low'",
        ),
        (
            "many",
            lambda p: {**p, "result": {**p["result"], "roc_tpr": [0.5]}},
            "result.roc_tpr must be a list of 61",
        ),
        ("many", lambda p: {**p, "result": {**p["result"], "n_in": -1}}, "result.n_in must be"),
        (
            "many",
            lambda p: {
                **p,
                "result": {**p["result"], "roc_fpr": [*p["result"]["roc_fpr"][:-1], 0.999]},
            },
            "result.roc_fpr must be the 61 stored rates",
        ),
        (
            "many",
            lambda p: {**p, "result": {key: v for key, v in p["result"].items() if key != "fpr"}},
            "result must be",
        ),
        ("many", lambda p: {**p, "params": {**p["params"], "runs": 0}}, "runs must be an integer"),
        (
            "many",
            lambda p: {**p, "params": {**p["params"], "extra": 1}},
            "params must be a job's arguments",
        ),
        ("many", lambda p: {**p, "params": {**p["params"], "seed": 1}}, "its key .* disagree"),
        ("many", lambda p: {**p, "provenance": {}}, "provenance.wall_seconds must be"),
        (
            "one",
            lambda p: {**p, "result": {**p["result"], "correct": p["result"]["guesses"] + 1}},
            "result.correct",
        ),
        (
            "one",
            lambda p: {**p, "result": {**p["result"], "guess_candidates": []}},
            "result.guess_candidates must be",
        ),
    ],
)
def test_a_tampered_stored_audit_is_a_value_error_naming_the_file(
    tmp_path, estimator, change, message
) -> None:
    honest = _committed(estimator)
    path = tmp_path / f"{honest['key']}.json"
    path.write_text(json.dumps(honest))
    assert read_stored(path) == honest
    path.write_text(json.dumps(change(honest)))
    with pytest.raises(
        ValueError, match=f"stored audit {re.escape(str(path))} is malformed: {message}"
    ):
        read_stored(path)


def test_a_stored_audit_from_a_cpu_whose_rates_differ_in_the_last_bit_is_read(tmp_path) -> None:
    """numpy's geomspace rounds ROC_FPR's last bit differently on different CPUs: a file written on one is read
    on another, and rates further off are still refused."""
    honest = _committed("many")
    rates = honest["result"]["roc_fpr"]
    moved = [math.nextafter(rate, math.inf if k % 2 else 0.0) for k, rate in enumerate(rates)]
    assert moved != rates
    path = tmp_path / f"{honest['key']}.json"
    path.write_text(json.dumps({**honest, "result": {**honest["result"], "roc_fpr": moved}}))
    read = read_stored(path)
    assert read is not None and read["result"]["roc_fpr"] == moved
    assert not jobs._same_rates([rate * (1 + 1e-9) for rate in rates], jobs.ROC_FPR)
    assert not jobs._same_rates(rates[:-1], jobs.ROC_FPR)
