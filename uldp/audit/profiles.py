"""The audit chapter's job sets: which audits each profile shows, where their results live, and running them.

:func:`profile_jobs` lists the chapter's jobs (:func:`uldp.audit.jobs.job` mappings) at a profile;
:func:`profile_results` reads the stored ones and runs the rest (:func:`uldp.audit.jobs.run_jobs`), under
:func:`audit_root`: ``results/audit/default/`` (committed) or ``_build/results/audit/smoke/`` (CI).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from uldp.audit.jobs import job, run_jobs
from uldp.common.provenance import REPO_ROOT

if TYPE_CHECKING:
    from pathlib import Path

#: Profiles of the audit jobs (the chapter's parameter).
PROFILES = ("smoke", "default")
#: (method, claim) audited by the chapter: record-level DP-SGD (ULDP-GROUP with every record kept, its
#: record-level epsilon) and the three user-level methods; DEFAULT has no claim.
AUDITED: tuple[tuple[str, str], ...] = (
    ("ULDP-GROUP-max", "record"),
    ("ULDP-NAIVE", "user"),
    ("ULDP-AVG", "user"),
    ("ULDP-AVG-w", "user"),
)


def audit_root(profile: str) -> Path:
    """Where a profile's audit results live: ``results/audit/default`` (committed) or ``_build/results/audit/smoke``."""
    if profile not in PROFILES:
        raise ValueError(f"profile must be one of {PROFILES}, got {profile!r}")
    base = REPO_ROOT / "results" if profile == "default" else REPO_ROOT / "_build" / "results"
    return base / "audit" / profile


#: User-sampling rates of the sampling audits of ULDP-AVG-w (``q = 1`` is its audit without sampling).
SAMPLING_RATES = (0.1, 0.3)


def profile_jobs(profile: str) -> list[dict[str, Any]]:
    """The jobs the chapter shows at ``profile``.

    ``default``: crafted user canaries, many-run estimator, for each audited method at claimed epsilon 1, 2, 4, 8
    (ULDP-AVG with 100,000 runs, the others 50,000) and DEFAULT; ULDP-AVG-w with user sampling at each of
    :data:`SAMPLING_RATES` at 4; ULDP-AVG-w through Protocol 1 at 4 (one run, 600 canaries); the one-run estimator
    (2000 canaries, one run) for each at epsilon 4; single-record canaries for record-level DP-SGD and ULDP-AVG at 4;
    ULDP-AVG and ULDP-AVG-w with the canary in 2 of the 3 silos at 4; natural canaries (10 runs of 8) for each at 4
    and DEFAULT. ``smoke``: the same shape at epsilon 4 only, far fewer runs.
    """
    if profile not in PROFILES:
        raise ValueError(f"profile must be one of {PROFILES}, got {profile!r}")
    smoke = profile == "smoke"
    epsilons = (4.0,) if smoke else (1.0, 2.0, 4.0, 8.0)
    many = 3000 if smoke else 50_000
    jobs = []
    claim: str | None  # a claim, or None for DEFAULT (the last jobs)
    for method, claim in AUDITED:
        for epsilon in epsilons:
            runs = many if smoke or method != "ULDP-AVG" else 100_000
            jobs.append(job(method, claim=claim, epsilon=epsilon, runs=runs))
    jobs.append(job("DEFAULT", claim=None, epsilon=None, runs=many))
    for q in SAMPLING_RATES:
        jobs.append(job("ULDP-AVG-w", claim="user", epsilon=4.0, runs=many, q=q))
    jobs.append(
        job(
            "ULDP-AVG-w",
            claim="user",
            epsilon=4.0,
            estimator="one",
            runs=1,
            canaries=40 if smoke else 600,
            aggregation="protocol1",
        )
    )
    for method, claim in AUDITED:
        jobs.append(
            job(
                method,
                claim=claim,
                epsilon=4.0,
                estimator="one",
                runs=1,
                canaries=300 if smoke else 2000,
            )
        )
    for method, claim in (("ULDP-GROUP-max", "record"), ("ULDP-AVG", "user")):
        jobs.append(job(method, claim=claim, epsilon=4.0, level="record", runs=many))
    for method in ("ULDP-AVG", "ULDP-AVG-w"):
        jobs.append(job(method, claim="user", epsilon=4.0, level="user-2", runs=many))
    for method, claim in (*AUDITED, ("DEFAULT", None)):
        jobs.append(
            job(
                method,
                claim=claim,
                epsilon=None if claim is None else 4.0,
                canary="natural",
                estimator="one",
                runs=1 if smoke else 10,
                canaries=8,
            )
        )
    return jobs


def profile_results(profile: str, *, command: str, progress: bool = False) -> list[dict]:
    """The chapter's audits at ``profile``: stored ones read, missing ones run and stored (see :func:`run_jobs`)."""
    return run_jobs(profile_jobs(profile), audit_root(profile), command=command, progress=progress)
