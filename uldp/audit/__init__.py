"""User-level privacy audits of the registered methods: membership attacks by the server, against the claimed epsilon.

The paper leaves as future work an empirical comparison of user-level and record-level DP in FL through user- and
record-level membership inference (Section 6, the conclusion). An epsilon is a promise; an audit measures a lower bound
on the epsilon a method actually spends, against the strongest adversary its trust model allows (the server, which sees
every round's aggregate, Section 3.2). A lower bound above the claim means a bug.

- :mod:`uldp.audit.estimators`: lower bounds at a stated confidence, from many runs with one canary
  (Clopper-Pearson at a threshold chosen on held-out runs, after Jagielski et al. 2020 / Nasr et al. 2021; or, for
  Gaussian scores, a confidence bound on mu of mu-GDP, Nasr et al. 2023) or from one run with many canaries
  (Steinke, Nasr and Jagielski 2023).
- :mod:`uldp.audit.crafted`: crafted canaries, every round observed, simulated from the methods' own clipping,
  weights, noise calibration and server step, many runs batched in one tensor.
- :mod:`uldp.audit.natural`: natural canaries (real-looking records), real training, final-model loss.
- :mod:`uldp.audit.jobs`: audit jobs, seeded and stored one JSON file each with provenance, resumable.
- :mod:`uldp.audit.profiles`: the chapter's job sets by profile and where their results live.
"""

from uldp.audit.crafted import CraftedSetting, calibrate_sigma, claimed_epsilon, crafted_scores
from uldp.audit.estimators import (
    GaussianBound,
    ManyRunBound,
    OneRunBound,
    clopper_pearson,
    gaussian_dp_bound,
    many_run_bound,
    one_run_bound,
    one_run_epsilon,
    one_run_p_value,
    roc_curve,
)
from uldp.audit.jobs import job, run_job, run_jobs
from uldp.audit.natural import NaturalSetting, natural_scores
from uldp.audit.profiles import audit_root, profile_jobs, profile_results

__all__ = [
    "CraftedSetting",
    "GaussianBound",
    "ManyRunBound",
    "NaturalSetting",
    "OneRunBound",
    "audit_root",
    "calibrate_sigma",
    "claimed_epsilon",
    "clopper_pearson",
    "crafted_scores",
    "gaussian_dp_bound",
    "job",
    "many_run_bound",
    "natural_scores",
    "one_run_bound",
    "one_run_epsilon",
    "one_run_p_value",
    "profile_jobs",
    "profile_results",
    "roc_curve",
    "run_job",
    "run_jobs",
]
