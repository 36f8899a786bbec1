"""TcgaBrca's ULDP-SGD low tail: a controlled multi-round comparison of uldp with the authors' procedure.

At the paper's settings (|U| = 50, T = 50, sigma = 5, C = 0.1, global lr 10) the script trains, for every seed,

* ``uldp``: :func:`uldp.simulation.run`, the library, under each allocation (``uniform``, balanced, and
  ``uniform-with-replacement``, the authors' draws);
* ``authors``: a re-implementation of the authors' ULDP-SGD silo step as their code and FLamby's do it (read, not
  copied; github.com/FumiyukiKato/uldp-fl ``local_trainer.py``, FLamby ``fed_tcga_brca/loss.py``): each user's
  records in a silo are shuffled and cut into batches of 8, each batch's gradient of FLamby's sort-order Cox loss
  (a batch mean) is divided by the batch's size once more and summed, the sum is clipped to C and weighted 1/|S|,
  and each silo adds its Gaussian noise from its own ``RandomState(seed + silo + 1)``;
* the same loop with one of the authors' choices at a time replaced by uldp's (Breslow ties, one full-batch
  gradient, the balanced allocation), and the library's noiseless runs,

from the same initial model and, within an allocation, the same allocation as uldp's run of that seed. It also
checks the loop against the library: with uldp's choices, one noiseless round of the loop equals the library's
ULDP-SGD round (cosine and relative difference), and with the authors' choices it reports how close they are.

Usage: ``python benchmarks/tcga_tail.py [--seeds 15] [--json]`` (``ULDP_DATA_DIR`` must hold ``tcga_brca/``).
"""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import dataclass, replace

import numpy as np
import torch

from uldp.fitting import ROUNDS_STREAM
from uldp.methods.base import Federation, seed_stream
from uldp.models import evaluate
from uldp.simulation import RunConfig, build_federation, run

USERS = 50


@dataclass(frozen=True)
class Variant:
    """One way of computing a silo's ULDP-SGD contribution.

    Attributes:
        name: Shown in the output.
        allocation: ``"uniform"`` (uldp's balanced) or ``"uniform-with-replacement"`` (the authors').
        ties: ``"flamby"`` (sort order, FLamby's ``BaselineLoss``) or ``"breslow"`` (uldp's ``cox_loss``).
        batches: ``"authors"`` (batches of 8, each gradient divided by its size again, summed) or ``"full"``
            (one gradient of the mean loss over the user's records in the silo, uldp's).
    """

    name: str
    allocation: str
    ties: str
    batches: str


def flamby_cox_loss(scores: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """FLamby's ``BaselineLoss``: records sorted by decreasing time (Python's stable sort: tied records keep their
    order), record ``i``'s risk set is the records before it and itself, the sum over events is divided by the
    number of records."""
    order = torch.from_numpy(np.argsort(-targets[:, 1].numpy(), kind="stable"))
    ordered = scores[order]
    per_record = targets[order, 0] * (torch.logcumsumexp(ordered, dim=0) - ordered)
    return per_record.mean()


def breslow_cox_loss(scores: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """uldp's Cox loss (:func:`uldp.models.cox_loss`): every record tied with ``T_i`` is in ``i``'s risk set."""
    at_risk = targets[None, :, 1] >= targets[:, None, 1]
    masked = torch.where(at_risk, scores[None, :], torch.tensor(-math.inf, dtype=scores.dtype))
    return (targets[:, 0] * (torch.logsumexp(masked, dim=1) - scores)).mean()


def score_gradient(scores: np.ndarray, targets: np.ndarray, ties: str) -> np.ndarray:
    """d(loss)/d(scores) of :func:`flamby_cox_loss` (``ties="flamby"``) or :func:`breslow_cox_loss` in closed form
    (checked against autograd by :func:`gradient_check`)."""
    events, n = targets[:, 0], len(scores)
    if ties == "breslow":
        at_risk = targets[None, :, 1] >= targets[:, None, 1]  # [i, j]: j in i's risk set
        masked = np.where(at_risk, scores[None, :], -np.inf)
        log_norm = np.logaddexp.reduce(masked, axis=1)
        share = np.where(at_risk, np.exp(masked - log_norm[:, None]), 0.0)
        return (events @ share - events) / n
    order = np.argsort(-targets[:, 1], kind="stable")
    ordered, hits = scores[order], events[order]
    log_norm = np.logaddexp.accumulate(ordered)  # record i's risk set: the records sorted up to i
    later = np.where(hits > 0, -log_norm, -np.inf)[::-1]
    log_events = np.logaddexp.accumulate(later)[
        ::-1
    ]  # log sum over events i >= j of exp(-log_norm_i)
    gradient = np.empty(n)
    gradient[order] = (np.exp(ordered + log_events) - hits) / n
    return gradient


def gradient_check(seed: int = 0) -> float:
    """Largest difference between :func:`score_gradient` and autograd of the two losses on a batch with ties."""
    rng = np.random.default_rng(seed)
    scores = rng.normal(size=9)
    targets = np.c_[rng.integers(0, 2, 9), rng.integers(1, 4, 9)].astype(
        float
    )  # times 1-3: many ties
    largest = 0.0
    for ties, loss in (("flamby", flamby_cox_loss), ("breslow", breslow_cox_loss)):
        tensor = torch.tensor(scores, requires_grad=True)
        (reference,) = torch.autograd.grad(loss(tensor, torch.tensor(targets)), tensor)
        largest = max(
            largest, float(np.abs(score_gradient(scores, targets, ties) - reference.numpy()).max())
        )
    return largest


def user_gradient(
    params: np.ndarray,
    x: np.ndarray,
    y: np.ndarray,
    variant: Variant,
    rng: np.random.RandomState,
    batch_size: int,
) -> np.ndarray:
    """One user's gradient in one silo (the linear Cox model ``x @ w + b``, flat ``[w, b]``)."""
    if variant.batches == "full":
        batches = [np.arange(len(x))]
    else:
        shuffled = rng.permutation(len(x))
        batches = [shuffled[i : i + batch_size] for i in range(0, len(x), batch_size)]
    gradient = np.zeros_like(params)
    for batch in batches:
        ds = score_gradient(x[batch] @ params[:-1] + params[-1], y[batch], variant.ties)
        grad = np.r_[x[batch].T @ ds, ds.sum()]
        gradient += grad / len(batch) if variant.batches == "authors" else grad
    return gradient


def silo_sum(
    params: np.ndarray,
    federation: Federation,
    silo: int,
    variant: Variant,
    rng: np.random.RandomState,
    *,
    clip: float,
    batch_size: int,
    x: np.ndarray,
    y: np.ndarray,
) -> np.ndarray:
    """Silo ``silo``'s clipped, 1/|S|-weighted sum of its users' gradients (before noise); ``x``, ``y``: the
    federation's records as float64 arrays."""
    total = np.zeros_like(params)
    users, groups = federation.user_groups(silo)
    for records in (groups[i] for i in rng.permutation(len(users))):
        gradient = user_gradient(params, x[records], y[records], variant, rng, batch_size)
        total += (
            gradient
            * min(1.0, clip / (float(np.linalg.norm(gradient)) + 1e-6))
            / federation.n_silos
        )
    return total


def loop_run(config: RunConfig, variant: Variant) -> float:
    """The final C-index of the re-implemented ULDP-SGD, from uldp's initial model and allocation."""
    federation, data = build_federation(replace(config, distribution=variant.allocation))
    model = federation.model
    params = torch.nn.utils.parameters_to_vector(model.parameters()).detach().double().numpy()
    x, y = federation.x.double().numpy(), federation.y.double().numpy()
    rngs = [np.random.RandomState(config.seed + s + 1) for s in range(federation.n_silos)]
    assert config.clip is not None and config.sigma is not None and config.global_lr is not None
    assert config.batch_size is not None  # RunConfig fills them for ULDP-SGD
    clip, sigma, lr = config.clip, config.sigma, config.global_lr
    for _ in range(config.rounds):
        total = np.zeros_like(params)
        for s in range(federation.n_silos):
            total += silo_sum(
                params,
                federation,
                s,
                variant,
                rngs[s],
                clip=clip,
                batch_size=config.batch_size,
                x=x,
                y=y,
            )
            total += rngs[s].normal(
                0, sigma * clip / math.sqrt(federation.n_silos), size=params.shape
            )
        params = params - lr * total / (federation.n_users * federation.n_silos)
    torch.nn.utils.vector_to_parameters(torch.from_numpy(params).float(), model.parameters())
    return float(evaluate(model, data.x_test, data.y_test, "tcga_brca")["c_index"])


def round_agreement(config: RunConfig, variant: Variant) -> dict[str, float]:
    """One noiseless round: the loop's descent direction against the library's ULDP-SGD round from the same model."""
    from uldp.methods import make_method, user_level

    federation, _ = build_federation(config)
    params = torch.nn.utils.parameters_to_vector(federation.model.parameters()).detach()
    method = user_level(make_method("ULDP-SGD", config.hyperparameters()))
    library = method.clean_update(
        params, federation, seed_stream(np.random.SeedSequence(config.seed), ROUNDS_STREAM, 0)
    ).double()
    rng = np.random.RandomState(config.seed + 1)
    assert (
        config.clip is not None and config.batch_size is not None
    )  # RunConfig fills them for ULDP-SGD
    ours = torch.zeros_like(library)
    for s in range(federation.n_silos):
        ours -= torch.from_numpy(
            silo_sum(
                params.double().numpy(),
                federation,
                s,
                variant,
                rng,
                clip=config.clip,
                batch_size=config.batch_size,
                x=federation.x.double().numpy(),
                y=federation.y.double().numpy(),
            )
        )
    return {
        "cosine": float(torch.nn.functional.cosine_similarity(library, ours, dim=0)),
        "relative_difference": float((library - ours).norm() / library.norm()),
    }


#: The loop with uldp's choices: one noiseless round of it is the library's round (checked), so its runs are the
#: library's ``uldp (library), uniform`` and are not repeated.
ULDP_CHOICES = Variant("uldp's choices in the loop", "uniform", "breslow", "full")
VARIANTS = (
    Variant("authors' procedure", "uniform-with-replacement", "flamby", "authors"),
    Variant("authors' procedure, Breslow ties", "uniform-with-replacement", "breslow", "authors"),
    Variant(
        "authors' procedure, one full-batch gradient", "uniform-with-replacement", "flamby", "full"
    ),
    Variant("authors' procedure, balanced allocation", "uniform", "flamby", "authors"),
)


def summary(finals: list[float]) -> dict[str, float | int]:
    values = np.asarray(finals)
    return {
        "mean": float(values.mean()),
        "std": float(values.std(ddof=1)),
        "min": float(values.min()),
        "below_0.6": int((values < 0.6).sum()),
        "below_0.5": int((values < 0.5).sum()),
        "seeds": len(values),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=15, help="seeds 0..n-1 of every variant")
    parser.add_argument("--rounds", type=int, default=50, help="rounds T (the paper's 50)")
    parser.add_argument(
        "--json", action="store_true", help="write one JSON document of the results to stdout"
    )
    args = parser.parse_args()
    torch.set_num_threads(1)
    base = RunConfig(dataset="tcga_brca", method="ULDP-SGD", n_users=USERS, rounds=args.rounds)
    agreement = {
        variant.name: round_agreement(base, replace(variant, allocation="uniform"))
        for variant in (ULDP_CHOICES, VARIANTS[0])
    }
    per_seed: dict[str, list[float]] = {}
    for allocation in ("uniform", "uniform-with-replacement"):
        name = f"uldp (library), {allocation}"
        per_seed[name] = [
            run(replace(base, seed=seed, distribution=allocation)).c_index[-1]
            for seed in range(args.seeds)
        ]
        noiseless = replace(base, sigma=1e-9)
        per_seed[f"{name}, noiseless"] = [
            run(replace(noiseless, seed=seed, distribution=allocation)).c_index[-1]
            for seed in range(args.seeds)
        ]
    for variant in VARIANTS:
        per_seed[variant.name] = [
            loop_run(replace(base, seed=seed), variant) for seed in range(args.seeds)
        ]
    summary_table = {name: summary(values) for name, values in per_seed.items()}
    settings = {
        "users": USERS,
        "rounds": args.rounds,
        "sigma": base.sigma,
        "clip": base.clip,
        "global_lr": base.global_lr,
        "batch_size": base.batch_size,
        "seeds": args.seeds,
    }
    report: dict[str, object] = {
        "settings": settings,
        "one_noiseless_round": agreement,
        "closed_form_gradient_error": gradient_check(),
        "final_c_index": per_seed,
        "summary": summary_table,
    }
    if args.json:
        print(json.dumps(report))
        return
    for name, values in summary_table.items():
        print(f"{name:55s} {values}")
    print(agreement)


if __name__ == "__main__":
    main()
