"""Crafted canaries: the server's view of many independent runs, simulated from each method's own aggregation code.

The adversary is the paper's server (Section 3.2: semi-honest, it sees each round's securely aggregated update). A
crafted canary is a user whose update in every silo where it holds records points along its own coordinate ``e_j``
with a norm of ``norm * C`` (a "Dirac canary", Nasr et al. 2023: a direction no other user's update touches); its
score is the sum over rounds of the observed update's projection on ``e_j`` (the final model minus the initial one,
along ``e_j``). This is the strongest attack the trust model allows: white-box, every round observed.

Local training is replaced by these fixed updates (the simulation is exact for updates that do not depend on the
model), and everything after it is the library's own code, so that a bug there changes the measured leakage:

- ULDP-SGD/AVG(-w) (Algorithm 3): every user's update in every silo is clipped by
  :func:`uldp.training.per_user.clip_rows` to the method's ``hp.clip``, weighted and summed by the method's
  aggregation (:func:`uldp.methods.aggregate` for enhanced weights, else :func:`uldp.methods.weighted_sum` with the
  method's :meth:`weights`), each silo adds Gaussian noise of the method's :meth:`noise_std`, and the method's
  :meth:`server_step` applies the sum; users not sampled by the method's own :meth:`sample_users` (rate ``hp.q``,
  Algorithm 4, drawn for every run at once) contribute nothing. Enhanced weights go through an aggregation hook
  (``aggregate_fn``, :func:`uldp.methods.aggregate` by default), so the same audit runs through Protocol 1's
  :class:`uldp.federation.SecureAggregator` (the server's decrypted aggregate).
- ULDP-NAIVE and DEFAULT (Algorithm 1): a silo's delta is the sum of its users' updates, clipped as a whole when
  the method is private, plus the method's noise.
- ULDP-GROUP-k (Algorithm 2): the method's own flags (:meth:`prepare`) keep at most ``k`` records per user; each
  silo runs DP-SGD with :func:`uldp.training.dpsgd.dpsgd_schedule`'s Poisson rate and steps, each sampled canary
  record contributing its clipped gradient, Gaussian noise ``sigma C`` per step, and opacus' division by the
  expected batch.

Runs are independent and batched: the runs' copies of the model sit side by side in one flat vector, so one call of
the method's aggregation serves thousands of runs (the aggregation is linear per coordinate).

Two scores (:data:`SCORES`): ``"sum"``, the sum over rounds of the update along the canary's coordinate (the
likelihood-ratio test when every round includes the canary), and ``"likelihood"``, the log-likelihood ratio of the
claimed mechanism when user sampling (Algorithm 4) includes the canary in each round with probability ``q``: with
``x_t`` the round's aggregate along the canary's coordinate over the sum's noise std ``sigma C`` and ``mu = 1 /
sigma`` (sensitivity ``C``, Theorem 3), ``sum_t log(1 - q + q exp(mu x_t - mu^2 / 2))``, the Neyman-Pearson test
of the sub-sampled Gaussian pair of Lemma 4 composed over rounds. At ``q = 1`` the two are the same test.

Both audit the paper's claim against readers of the model, who do not know the sample. The server draws the sample
(Protocol 1), so it knows which rounds held the canary: its score ``"known-sample"`` is the log-likelihood ratio
over those rounds alone, ``sum_t b_t (mu x_t - mu^2 / 2)`` with ``b_t`` the canary's draw of the method's own
:meth:`sample_users` (the Neyman-Pearson test given the sample), to be held against the known-sample epsilon
(:func:`uldp.accounting.epsilon_known_sample`, :attr:`uldp.accounting.Adversary.SERVER_SEES_SAMPLE`).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np
import torch
from scipy import optimize
from torch import nn

from uldp.accounting import Adversary
from uldp.common.checks import check_integer, check_positive
from uldp.data.base import Allocation
from uldp.methods import (
    EveryRecordSiloNoise,
    FedAvgMethod,
    Federation,
    GroupMethod,
    Hyperparameters,
    UserLevelMethod,
    aggregate,
    make_method,
    weighted_sum,
)
from uldp.methods.base import seed_stream
from uldp.models import bce_loss
from uldp.training.dpsgd import dpsgd_schedule
from uldp.training.per_user import clip_rows

if TYPE_CHECKING:
    from uldp.methods import AggregateFn, Method

#: Coordinates that only the background users' updates use (beside one coordinate per canary).
BACKGROUND_DIMS = 2
#: Random streams of a crafted audit (children of its seed).
FEDERATION_STREAM, RUNS_STREAM, PREPARE_STREAM = 0, 1, 2
#: How the claimed epsilon is read: the method's user-level guarantee, or (ULDP-GROUP-k) its record-level one.
CLAIMS = ("user", "record")
#: Float type of the simulated updates (single precision: scores are sums of a few dozen terms).
DTYPE = torch.float32
#: Scores of a crafted canary (see the module docstring).
SCORES = ("sum", "likelihood", "known-sample")
#: Whom each score's audit holds against (its adversary, with user sampling).
SCORE_ADVERSARIES = {
    "sum": Adversary.MODEL_READERS,
    "likelihood": Adversary.MODEL_READERS,
    "known-sample": Adversary.SERVER_SEES_SAMPLE,
}


@dataclass(frozen=True)
class CraftedSetting:
    """The audited federation: background users and crafted canaries.

    Attributes:
        n_silos: ``|S|``.
        background_users: Users other than the canaries.
        background_records: Each background user holds ``0..background_records`` records in each silo (at least one
            in all).
        rounds: Rounds ``T``.
        canary_records: Records of a canary in each silo where it has some (``r``).
        canary_silos: Silos holding a canary's records (the first ones); 1 with ``canary_records=1`` is a
            record-level canary.
        canary_norm: Norm of a canary's update (per silo; per record for DP-SGD) in units of ``C``, before clipping.
    """

    n_silos: int = 3
    background_users: int = 12
    background_records: int = 8
    rounds: int = 10
    canary_records: int = 2
    canary_silos: int = 3
    canary_norm: float = 10.0

    def __post_init__(self) -> None:
        check_integer("n_silos", self.n_silos)
        check_integer("background_users", self.background_users)
        check_integer("background_records", self.background_records)
        check_integer("rounds", self.rounds)
        check_integer("canary_records", self.canary_records)
        check_integer("canary_silos", self.canary_silos, maximum=self.n_silos)
        check_positive("canary_norm", self.canary_norm)


def audit_federation(setting: CraftedSetting, n_canaries: int, seed: int) -> Federation:
    """Who holds which records: background users ``0..B-1`` at random, canaries ``B..B+m-1`` as the setting says.

    The records' values are never read (updates are crafted); the model is a placeholder for the methods' API.
    """
    rng = np.random.default_rng(seed_stream(np.random.SeedSequence(seed), FEDERATION_STREAM))
    counts = rng.integers(
        0, setting.background_records + 1, (setting.n_silos, setting.background_users)
    )
    counts[
        rng.integers(0, setting.n_silos, setting.background_users),
        np.arange(setting.background_users),
    ] += 1
    canary = np.zeros((setting.n_silos, n_canaries), dtype=np.int64)
    canary[: setting.canary_silos] = setting.canary_records
    counts = np.concatenate([counts, canary], axis=1)
    silo, user = np.nonzero(counts)
    repeats = counts[silo, user]
    allocation = Allocation(
        np.repeat(user, repeats),
        np.repeat(silo, repeats),
        counts.shape[1],
        setting.n_silos,
        "audit",
        seed,
    )
    n = int(repeats.sum())
    return Federation(nn.Linear(1, 1), bce_loss, torch.zeros(n, 1), torch.zeros(n), allocation)


def claimed_epsilon(
    method: Method,
    federation: Federation,
    rounds: int,
    claim: str = "user",
    *,
    accountant: str = "rdp",
) -> float | None:
    """The epsilon the method claims after ``rounds`` rounds on ``federation`` (already prepared).

    ``claim="record"`` (ULDP-GROUP-k only) is its record-level epsilon: Theorem 2's accountant without the group
    conversion (``k = 1``), the guarantee of plain record-level DP-SGD. ``accountant="pld"`` gives the tightest
    valid epsilon of the same mechanism that the library computes (:mod:`uldp.accounting.pld`: the exact Gaussian
    without sampling, never above RDP), against which an audit's gap is measured.
    """
    if claim not in CLAIMS:
        raise ValueError(f"claim must be one of {CLAIMS}, got {claim!r}")
    if claim == "record":
        if not isinstance(method, GroupMethod):
            raise ValueError(
                f"a record-level claim needs a ULDP-GROUP-k method, got {method.spec.name}"
            )
        method = replace(method, spec=replace(method.spec, group_size=1))
    return method.epsilon(federation, rounds, accountant=accountant)


def calibrate_sigma(
    name: str,
    hp: Hyperparameters,
    federation: Federation,
    *,
    rounds: int,
    epsilon: float,
    claim: str = "user",
    seed: int = 0,
) -> float:
    """The noise multiplier at which ``name`` claims ``epsilon`` after ``rounds`` rounds (matched claims).

    Solves ``claimed_epsilon(sigma) = epsilon`` with Brent's method on ``log sigma`` using the method's own
    accountant on ``federation`` prepared by the method (ULDP-GROUP-k's flags), rounded up so the claim never
    exceeds ``epsilon``.

    Raises:
        ValueError: DEFAULT (no claim), or a target out of reach for sigma in [0.05, 1000].
    """
    epsilon = check_positive("epsilon", epsilon)

    def gap(log_sigma: float) -> float:
        method = make_method(name, replace(hp, sigma=math.exp(log_sigma)))
        prepared = method.prepare(
            federation, seed_stream(np.random.SeedSequence(seed), PREPARE_STREAM)
        )
        claimed = claimed_epsilon(method, prepared, rounds, claim)
        if claimed is None:
            raise ValueError(f"{name} claims no epsilon; there is no sigma to calibrate")
        return math.log(claimed / epsilon)

    low, high = math.log(0.05), math.log(1000.0)
    with (
        warnings.catch_warnings()
    ):  # the accountant warns at the bracket's extreme sigmas; irrelevant here
        warnings.simplefilter("ignore", RuntimeWarning)
        if gap(low) < 0 or gap(high) > 0:
            raise ValueError(
                f"epsilon={epsilon!r} is out of reach of {name} for sigma in [0.05, 1000]"
            )
        return math.exp(optimize.brentq(gap, low, high, xtol=1e-9)) * (1 + 1e-6)


def _background_updates(
    rng: torch.Generator, runs: int, users: int, dims: int, clip: float
) -> torch.Tensor:
    """``[runs, users, dims]`` updates on the background coordinates (the last ones), norms in [0.5, 2] C.

    The other users' data is the same in every run (the neighbouring datasets of DP differ only in the canary), so
    one draw per round and silo serves all runs.
    """
    directions = torch.randn((users, BACKGROUND_DIMS), generator=rng, dtype=DTYPE)
    norms = (0.5 + 1.5 * torch.rand((users, 1), generator=rng, dtype=DTYPE)) * clip
    updates = torch.zeros((runs, users, dims), dtype=DTYPE)
    updates[..., dims - BACKGROUND_DIMS :] = (
        directions / directions.norm(dim=-1, keepdim=True) * norms
    )
    return updates


def _canary_updates(included: torch.Tensor, dims: int, norm: float) -> torch.Tensor:
    """``[runs, m, dims]``: canary ``j``'s update ``norm * e_j`` where it is included, zero elsewhere."""
    runs, m = included.shape
    updates = torch.zeros((runs, m, dims), dtype=DTYPE)
    updates[:, torch.arange(m), torch.arange(m)] = included.to(DTYPE) * norm
    return updates


def _noise(rng: torch.Generator, size: int, std: float) -> torch.Tensor:
    return torch.randn(size, generator=rng, dtype=DTYPE) * std


def _user_level_round(
    method: UserLevelMethod,
    federation: Federation,
    included: torch.Tensor,
    dims: int,
    norm: float,
    rng: torch.Generator,
    round_seed: np.random.SeedSequence,
    aggregate_fn: AggregateFn = aggregate,
) -> torch.Tensor:
    """One round of Algorithm 3 for every run: the aggregated sum ``[runs * dims]``, by the method's own code.

    Users are sampled by the method's :meth:`sample_users` (Algorithm 4), one draw per user and run; enhanced
    weights aggregate through ``aggregate_fn`` (the plain :func:`uldp.methods.aggregate` or Protocol 1's).
    """
    runs = included.shape[0]
    counts = federation.counts
    n_silos, n_users = counts.shape
    clip = check_positive("clip", method.hp.clip)
    sampled = torch.from_numpy(
        method.sample_users(runs * n_users, round_seed).reshape(runs, n_users)
    )
    deltas = []
    for silo in range(n_silos):
        updates = torch.cat(
            [
                _background_updates(rng, runs, n_users - included.shape[1], dims, clip),
                _canary_updates(included, dims, norm * clip),
            ],
            dim=1,
        )
        updates *= torch.from_numpy(counts[silo] > 0)[None, :, None] * sampled[:, :, None]
        clipped = clip_rows(updates.reshape(-1, dims), clip).reshape(runs, n_users, dims)
        deltas.append(
            clipped.permute(1, 0, 2).reshape(n_users, runs * dims)
        )  # runs side by side per user
    noise = [_noise(rng, runs * dims, method.noise_std(n_silos)) for _ in range(n_silos)]
    everyone = np.ones(n_users, dtype=bool)  # sampling is applied to the updates above, per run
    if method.spec.enhanced_weights and method.user_weights is None:
        return aggregate_fn(deltas, counts, everyone, noise)
    return weighted_sum(deltas, method.weights(counts, everyone), noise)


def _silo_level_round(
    method: FedAvgMethod,
    federation: Federation,
    included: torch.Tensor,
    dims: int,
    norm: float,
    rng: torch.Generator,
) -> torch.Tensor:
    """One round of Algorithm 1 (ULDP-NAIVE, DEFAULT): each silo's summed delta, clipped if private, plus noise."""
    runs = included.shape[0]
    counts = federation.counts
    n_silos, n_users = counts.shape
    clip = method.hp.clip or 1.0
    total = torch.zeros(runs * dims, dtype=DTYPE)
    for silo in range(n_silos):
        updates = torch.cat(
            [
                _background_updates(rng, runs, n_users - included.shape[1], dims, clip),
                _canary_updates(included, dims, norm * clip),
            ],
            dim=1,
        )
        delta = (updates * torch.from_numpy(counts[silo] > 0)[None, :, None]).sum(dim=1)
        if method.spec.private:  # then clip is the method's C
            delta = clip_rows(delta, clip)
        total += delta.reshape(-1) + _noise(rng, runs * dims, method.noise_std(n_silos))
    return total


def _dpsgd_round(
    method: GroupMethod,
    federation: Federation,
    included: torch.Tensor,
    dims: int,
    norm: float,
    rng: torch.Generator,
) -> torch.Tensor:
    """One round of Algorithm 2: each silo's DP-SGD delta along the canaries' coordinates, summed over silos.

    Only the canary coordinates are simulated (the other records' gradients lie elsewhere). Per step a kept canary
    record joins the batch with the schedule's rate and adds its clipped gradient; the silo adds ``N(0, sigma^2 C^2)``
    per step and divides by the expected batch; the server sees the round's sum over steps and silos.
    """
    runs, m = included.shape
    counts = federation.counts
    n_silos = counts.shape[0]
    hp = method.hp
    clip, local_lr, sigma = (
        check_positive(name, getattr(hp, name)) for name in ("clip", "local_lr", "sigma")
    )
    epochs = check_integer("local_epochs", hp.local_epochs)
    gradient = clip_rows(torch.full((1, 1), norm * clip, dtype=DTYPE), clip)[0, 0]
    total = torch.zeros((runs, dims), dtype=DTYPE)
    for silo in range(n_silos):
        n_records = int(counts[silo].sum())
        if n_records == 0:
            continue
        schedule = dpsgd_schedule(n_records, batch_size=hp.batch_size, epochs=epochs)
        expected_batch = max(1, round(schedule.sample_rate * n_records))
        kept = torch.from_numpy(counts[silo, -m:]).to(DTYPE)
        # the sum over the round's steps of independent Binomial(kept, rate) draws is Binomial(kept * steps, rate)
        sampled = torch.binomial(
            (kept * schedule.steps).expand(runs, m).contiguous(),
            torch.full((runs, m), schedule.sample_rate, dtype=DTYPE),
            generator=rng,
        )
        signal = torch.zeros((runs, dims), dtype=DTYPE)
        signal[:, :m] = sampled * included * gradient
        noise = torch.randn((runs, dims), generator=rng, dtype=DTYPE) * sigma * clip
        total += local_lr / expected_batch * (signal + noise * math.sqrt(schedule.steps))
    return total.reshape(-1)


def _one_round(
    method: Method,
    federation: Federation,
    included: torch.Tensor,
    dims: int,
    norm: float,
    rng: torch.Generator,
    round_seed: np.random.SeedSequence,
    aggregate_fn: AggregateFn,
) -> torch.Tensor:
    """One round of the method's own algorithm: 3 (ULDP-SGD/AVG), 2 (ULDP-GROUP-k) or 1 (ULDP-NAIVE, DEFAULT)."""
    if isinstance(method, UserLevelMethod):
        return _user_level_round(
            method, federation, included, dims, norm, rng, round_seed, aggregate_fn
        )
    if isinstance(method, GroupMethod):
        return _dpsgd_round(method, federation, included, dims, norm, rng)
    if isinstance(method, FedAvgMethod):
        return _silo_level_round(method, federation, included, dims, norm, rng)
    raise ValueError(
        f"no crafted round for {type(method).__name__}; the registry's classes have one"
    )


def _likelihood_terms(method: Method, federation: Federation) -> tuple[float, float, float]:
    """``(scale, mu, q)`` of the likelihood-ratio score: a round's aggregate over ``scale`` has unit noise, and the
    claimed mechanism moves it by ``mu`` in a round that samples the canary (probability ``q``)."""
    if not method.spec.private or not isinstance(method, EveryRecordSiloNoise):
        raise ValueError(
            f"the likelihood score needs a Gaussian user-level method (ULDP-NAIVE, -SGD, -AVG), got "
            f"{method.spec.name}"
        )
    sigma = check_positive("sigma", method.hp.sigma)
    scale = math.sqrt(federation.n_silos) * method.noise_std(
        federation.n_silos
    )  # sigma times the sensitivity
    return scale, 1.0 / sigma, float(method.accounting_arguments(federation).get("q", 1.0))


def _canaries_sampled(
    method: Method, federation: Federation, runs: int, m: int, round_seed: np.random.SeedSequence
) -> np.ndarray:
    """``[runs, m]``: whether the round's sample held each canary (the last ``m`` users), as the server that drew it
    knows: the same draw of :meth:`sample_users` that :func:`_user_level_round` makes (all True without sampling)."""
    if not isinstance(method, UserLevelMethod):
        return np.ones((runs, m))
    drawn = method.sample_users(runs * federation.n_users, round_seed)
    return drawn.reshape(runs, federation.n_users)[:, -m:].astype(float)


def crafted_scores(
    method: Method,
    setting: CraftedSetting,
    included: np.ndarray,
    *,
    seed: int,
    chunk_runs: int = 20_000,
    score: str = "sum",
    aggregate_fn: AggregateFn = aggregate,
) -> tuple[np.ndarray, Federation]:
    """Scores of crafted canaries in independent runs of ``method`` (the server's view, every round).

    Args:
        method: A method from :func:`uldp.methods.make_method` (or a variant of one, for power checks).
        setting: The federation and canaries.
        included: ``[runs, m]`` booleans: whether canary ``j`` takes part in run ``i``.
        seed: The audit's seed (federation, flags, every run's draws).
        chunk_runs: Runs simulated together (bounds memory; each chunk draws from its own stream, so the scores
            depend on it: keep it fixed to reproduce them).
        score: One of :data:`SCORES`; ``"likelihood"`` uses the rate ``q`` the method's accountant assumes,
            ``"known-sample"`` the sample itself, as the server that draws it knows it (ULDP-NAIVE, ULDP-SGD/AVG
            only).
        aggregate_fn: The aggregation of enhanced-weight methods (``aggregate(deltas, counts, sampled, noise)``,
            the methods' hook; e.g. a :class:`uldp.federation.SecureAggregator` to audit through Protocol 1).

    Returns:
        ``([runs, m] scores, the prepared federation)``; with ``"sum"``, score ``[i, j]`` is the sum over rounds of
        run ``i``'s server update along canary ``j``'s direction, divided by ``C``.

    Raises:
        ValueError: Bad ``included``, ``chunk_runs`` or ``score``, or the likelihood score of another method.
    """
    included = np.asarray(included, dtype=bool)
    if included.ndim != 2 or included.size == 0:
        raise ValueError(
            f"included must be a non-empty [runs, canaries] boolean array, got shape {included.shape}"
        )
    check_integer("chunk_runs", chunk_runs)
    if score not in SCORES:
        raise ValueError(f"score must be one of {SCORES}, got {score!r}")
    runs, m = included.shape
    root = np.random.SeedSequence(seed)
    federation = method.prepare(
        audit_federation(setting, m, seed), seed_stream(root, PREPARE_STREAM)
    )
    likelihood = _likelihood_terms(method, federation) if score != "sum" else None
    dims = m + BACKGROUND_DIMS
    scores = np.zeros((runs, m))
    clip = method.hp.clip or 1.0
    for start in range(0, runs, chunk_runs):
        block = torch.from_numpy(included[start : start + chunk_runs])
        stream = seed_stream(root, RUNS_STREAM, start)
        rng = torch.Generator().manual_seed(int(stream.generate_state(1)[0]))
        params = torch.zeros(block.shape[0] * dims, dtype=DTYPE)
        for round_index in range(setting.rounds):
            total = _one_round(
                method,
                federation,
                block,
                dims,
                setting.canary_norm,
                rng,
                seed_stream(stream, round_index),
                aggregate_fn,
            )
            params = method.server_step(
                params, total, n_users=federation.n_users, n_silos=federation.n_silos
            )
            if likelihood is not None:
                scale, mu, q = likelihood
                observed = total.reshape(-1, dims)[:, :m].double().numpy() / scale
                ratio = mu * observed - mu**2 / 2  # log N(mu, 1) / N(0, 1) at the observation
                if score == "known-sample":
                    ratio = ratio * _canaries_sampled(
                        method, federation, block.shape[0], m, seed_stream(stream, round_index)
                    )
                scores[start : start + block.shape[0]] += (
                    ratio
                    if q >= 1 or score == "known-sample"
                    else np.logaddexp(math.log1p(-q), math.log(q) + ratio)
                )
        if likelihood is None:
            scores[start : start + block.shape[0]] = params.reshape(-1, dims)[:, :m].numpy() / clip
    return scores, federation
