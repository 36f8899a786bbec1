"""One federated training run, all silos in this process: :class:`RunConfig` in, :class:`RunResult` out.

``run(config)`` loads the dataset, allocates records to users and silos, builds the model and the method of the
registry (:mod:`uldp.methods`), then for each round trains, aggregates, evaluates the global model on the test set
and asks the method's accountant for the user-level epsilon so far. Every random draw (allocation, initial model,
GROUP flags, user sampling, record order, dropout, noise) derives from ``config.seed`` through one
``numpy.random.SeedSequence``: the simulation is seeded on purpose (it models the computation, not the trust
boundary: it measures the methods on public benchmark data, releases no model of private records, and every figure
must re-run exactly); a deployment draws every silo's noise from that silo's own secret instead
(:mod:`uldp.flower.client`, which ``uldp deploy`` runs), and :func:`uldp.fit` from OS entropy unless given a seed.
Unset hyperparameters take the paper's values for the dataset and method
(the paper's settings.md, collected in :data:`uldp.defaults.DATASET_DEFAULTS`).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from uldp.common.checks import check_integer, check_number
from uldp.common.persist import fingerprint
from uldp.common.threads import torch_threads
from uldp.data import allocate, load
from uldp.defaults import SIGMA
from uldp.federation import InProcessAggregator, aggregation_kind
from uldp.fitting import ALLOCATION_STREAM, INIT_STREAM, SUBSET_STREAM, prepare_method, train_rounds
from uldp.methods import Federation
from uldp.methods.base import parse_method, seed_stream
from uldp.models import build_model, evaluate, loss_function
from uldp.run_config import (  # re-exported: the run's configuration lives in its own module
    STORED_NAMES as STORED_NAMES,
    RunConfig as RunConfig,
    paper_hyperparameters as paper_hyperparameters,
)
from uldp.secure.config import ProtocolParameters
from uldp.secure.cost import AUTO as AUTO_BACKEND
from uldp.training.device import device_settings, warn_if_slower
from uldp.training.per_user import flat_parameters, load_flat_parameters

if TYPE_CHECKING:
    from pathlib import Path

    from uldp.data.base import FederatedDataset
    from uldp.methods import Method


@dataclass(frozen=True)
class RunResult:
    """Per-round results of a run (lists indexed by round; absent metrics are empty lists).

    Attributes:
        config: The resolved configuration.
        round: Round numbers ``1..T``.
        test_loss: Test loss of the global model after each round.
        accuracy: Test accuracy (classification).
        balanced_accuracy: Test balanced accuracy (classification).
        c_index: Test C-index (survival).
        epsilon: User-level epsilon spent so far (``None`` for DEFAULT).
        seconds: Wall seconds of each round (training, aggregation, evaluation, accounting).
        info: Facts of the run (parameters ``d``, records used, group size ``k``, setup seconds).
    """

    config: RunConfig
    round: list[int] = field(default_factory=list)
    test_loss: list[float] = field(default_factory=list)
    accuracy: list[float] = field(default_factory=list)
    balanced_accuracy: list[float] = field(default_factory=list)
    c_index: list[float] = field(default_factory=list)
    epsilon: list[float | None] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    info: dict = field(default_factory=dict)

    def rounds_table(self) -> list[dict]:
        """One dict per round: ``round``, ``loss``, ``accuracy`` or ``c_index``, ``epsilon``, ``seconds``."""
        metric = "c_index" if self.c_index else "accuracy"
        return [
            {"round": r, "loss": loss, metric: value, "epsilon": eps, "seconds": sec}
            for r, loss, value, eps, sec in zip(
                self.round,
                self.test_loss,
                getattr(self, metric),
                self.epsilon,
                self.seconds,
                strict=True,
            )
        ]

    def to_json(self) -> dict:
        """``{"config": {...}, "rounds": [...], "info": {...}}`` (the ``uldp run --json`` payload)."""
        return {"config": asdict(self.config), "rounds": self.rounds_table(), "info": self.info}


def _stratified_subset(
    labels: np.ndarray | None, n_records: int, size: int, rng: np.random.Generator
) -> np.ndarray:
    """Sorted indices of a random subset of ``size`` records keeping class proportions (plain random if no labels)."""
    if labels is None:
        return np.sort(rng.choice(n_records, size, replace=False))
    chosen = []
    classes, counts = np.unique(labels, return_counts=True)
    quotas = np.maximum(1, np.round(counts * size / n_records)).astype(int)
    for label, quota in zip(classes, quotas, strict=True):
        members = np.flatnonzero(labels == label)
        chosen.append(rng.choice(members, min(quota, members.size), replace=False))
    return np.sort(np.concatenate(chosen))


def build_federation(
    config: RunConfig, dataset: FederatedDataset | None = None
) -> tuple[Federation, FederatedDataset]:
    """Load (or take), subset and allocate the dataset and build the model: ``(federation, dataset)``."""
    root = np.random.SeedSequence(config.seed)
    data = (
        dataset if dataset is not None else load(config.dataset, test_scoring=config.test_scoring)
    )
    if config.max_train_records is not None and config.max_train_records < data.n_train:
        rng = np.random.default_rng(seed_stream(root, SUBSET_STREAM))
        keep = _stratified_subset(data.labels, data.n_train, config.max_train_records, rng)
        index = torch.from_numpy(keep)
        data = replace(
            data,
            x_train=data.x_train[index],
            y_train=data.y_train[index],
            train_silo=None if data.train_silo is None else data.train_silo[keep],
        )
    allocation_seed = int(seed_stream(root, ALLOCATION_STREAM).generate_state(1)[0])
    allocation = allocate(
        data,
        n_users=config.n_users,
        n_silos=config.n_silos,
        scheme=config.distribution,
        seed=allocation_seed,
        n_labels=config.n_labels if config.distribution == "zipf-noniid" else None,
    )
    init_seed = int(seed_stream(root, INIT_STREAM).generate_state(1)[0])
    model = build_model(config.dataset, seed=init_seed)
    federation = Federation(
        model=model,
        loss_fn=loss_function(config.dataset),
        x=data.x_train,
        y=data.y_train,
        allocation=allocation,
        precision=config.precision,
    )
    return federation, data


def secure_aggregator(config: RunConfig, method: Method | None = None) -> InProcessAggregator:
    """The secure aggregation hook of a run: the one federation round (:mod:`uldp.federation`) in this process, of the
    method's aggregation, as Flower and ``uldp deploy`` run it (:func:`uldp.federation.aggregation_kind`): Protocol 1
    for ULDP-AVG-w / ULDP-SGD-w, with ``config.protocol`` and C and sigma as public bounds; the masked sum (Protocol
    1's pairwise masks alone, :mod:`uldp.secure.masked_sum`) for every other method, through
    :meth:`~uldp.federation.InProcessAggregator.sum_updates`.

    Args:
        config: A run with ``secure=True``.
        method: The run's prepared method, whose norm bounds each round's sum is checked against (None: not checked).

    Returns:
        An :class:`uldp.federation.InProcessAggregator`.
    """
    return InProcessAggregator(
        aggregation_kind(parse_method(config.method), secure=config.secure),
        parameters=config.protocol,
        clip=config.clip,
        sigma=config.sigma,
        method=method,
    )


def _prepared(
    config: RunConfig, dataset: FederatedDataset | None = None
) -> tuple[RunConfig, Any, Federation, FederatedDataset]:
    """The run's configuration (sigma calibrated to ``epsilon`` where it was unset), its method, its prepared
    federation (ULDP-GROUP-k's records kept) and the dataset (:func:`uldp.fitting.prepare_method`)."""
    federation, data = build_federation(config, dataset)
    calibrate = config.sigma is None and config.epsilon is not None
    hp, method, federation = prepare_method(
        config.method,
        (replace(config, sigma=SIGMA) if calibrate else config).hyperparameters(),
        federation,
        np.random.SeedSequence(config.seed),
        user_weights=None if config.user_weights is None else np.asarray(config.user_weights),
        epsilon=config.epsilon if calibrate else None,
        rounds=config.rounds,
        accountant=config.accountant,
    )
    return replace(config, sigma=hp.sigma) if calibrate else config, method, federation, data


def accounted_epsilon(
    config: RunConfig,
    *,
    rounds: int | None = None,
    dataset: FederatedDataset | None = None,
    accountant: str | None = None,
) -> float | None:
    """The user-level epsilon a run of ``config`` reports after ``rounds`` rounds, without training it.

    A method's accountant (Theorem 1 for ULDP-NAIVE, Theorem 2 with group privacy for ULDP-GROUP-k, Theorem 3 and
    Lemma 4 for ULDP-SGD/AVG with user sampling) reads only the shape of the prepared federation: silos, records per
    silo after ULDP-GROUP-k's filtering, the group size, ``q``, ``sigma`` and ``delta``; never the model or the
    data's values. So this equals ``run(config).epsilon[rounds - 1]`` (``tests/test_simulation.py``) at the cost of
    allocating the records: the privacy half of a paper-scale figure without the training that needs a GPU.

    Args:
        config: The run.
        rounds: After how many rounds (default ``config.rounds``).
        dataset: An already loaded dataset (default: ``load(config.dataset)``).
        accountant: ``"rdp"`` or ``"pld"`` (default ``config.accountant``): a stored run can be re-accounted by the
            other accountant, since the accountant never changes the training.

    Returns:
        Epsilon at ``config.delta``; ``None`` for DEFAULT (no guarantee).

    Raises:
        ValueError: ``rounds`` is not an integer in ``1..config.rounds``.
    """
    rounds = config.rounds if rounds is None else rounds
    rounds = check_integer("rounds", rounds, maximum=config.rounds)
    config, method, federation, _ = _prepared(config, dataset)
    epsilon = method.epsilon(
        federation, rounds, accountant=config.accountant if accountant is None else accountant
    )
    return None if epsilon is None else float(epsilon)


def _record_round(result: RunResult, row: dict) -> None:
    """Append one round's ``row`` (``round``, ``test_loss``, the dataset's metrics, ``epsilon``, ``seconds``)."""
    for name, value in row.items():
        getattr(result, name).append(value)


#: RunConfig fields added after checkpoints were first written, with their defaults: they enter a checkpoint's
#: fingerprint only when set otherwise, so the checkpoints of earlier runs still resume.
LATER_FIELDS = {
    "accountant": "rdp",
    "epsilon": None,
    "device": "cpu",
    "precision": "float32",
}


def _checkpoint_fingerprint(config: RunConfig, data: Any) -> str:
    """What a checkpoint must match to be resumed: the resolved configuration and the train and test set sizes
    (a grid may evaluate on a subset of the test set)."""
    stored = {new: old for old, new in STORED_NAMES.items()}
    resolved = {
        stored.get(name, name): value
        for name, value in asdict(config).items()
        if name not in LATER_FIELDS or value != LATER_FIELDS[name]
    }
    # Protocol 1's key size and N_max were two fields before its parameters became one object: checkpoints written
    # then still resume; its other parameters enter only when set otherwise
    protocol, defaults = resolved.pop("protocol"), asdict(ProtocolParameters())
    resolved["secure_key_bits"], resolved["secure_n_max"] = (
        protocol.pop("key_bits"),
        protocol.pop("n_max"),
    )
    # nor does the backend "auto", the default since: a checkpoint is for a plain run, where no backend plays a part;
    # nor the worker count, on which no result depends (its default became "auto", a grid's runs keep 1)
    resolved.update(
        {
            f"protocol.{name}": value
            for name, value in protocol.items()
            if value != defaults[name]
            and (name, value) != ("backend", AUTO_BACKEND)
            and name != "processes"
        }
    )
    return fingerprint(
        {
            "config": resolved,
            "train_records": int(data.x_train.shape[0]),
            "test_records": int(data.x_test.shape[0]),
        }
    )


def run(
    config: RunConfig,
    *,
    progress: bool = False,
    dataset: FederatedDataset | None = None,
    aggregate_fn: Any = None,
    checkpoint: str | Path | None = None,
    checkpoint_seconds: float = 60.0,
    threads: int | None = None,
) -> RunResult:
    """Run federated training and return per-round test metrics, epsilon and wall time.

    Args:
        config: The run.
        progress: Show a tqdm progress bar on stderr.
        dataset: An already loaded :class:`~uldp.data.base.FederatedDataset` (default: ``load(config.dataset)``).
        aggregate_fn: Override of the enhanced-weight aggregation (default: plain, or the one federation round of
            :func:`secure_aggregator` when ``config.secure``). An
            :class:`~uldp.federation.InProcessAggregator` also sums the other methods' silo updates
            (:meth:`~uldp.federation.InProcessAggregator.sum_updates`); a plain function serves the -w methods
            only (with ``config.secure`` the others still run the secure aggregation).
        checkpoint: A file to resume from and save progress to: the global model and the per-round results after
            the last completed round (:mod:`uldp.common.persist`'s atomic format, tied to this configuration and
            data by a fingerprint). Every random draw of round ``t`` derives from ``config.seed`` and ``t`` alone,
            so a run resumed from it ends exactly as an uninterrupted run (``tests/test_simulation.py``); it reports
            ``info["resumed_from_round"]`` and the rounds' earlier seconds in ``info["resumed_seconds"]``. The
            file stays after the last round (the caller deletes it once the result is stored). Not for a secure or
            custom aggregation, whose state lives in the process.
        checkpoint_seconds: Save at most this often (seconds >= 0), and always after the last round and on an
            interrupt (Ctrl-C; SIGTERM under ``uldp grid`` and ``uldp run``), keeping every completed round.
        threads: Torch intra-op threads while the run trains (default ``$ULDP_THREADS``, else 1; see
            :mod:`uldp.common.threads`); the previous number is restored afterwards. Results do not depend on it.

    Returns:
        The :class:`RunResult` (its ``config`` with the calibrated sigma when ``epsilon`` chose it); secure
        runs (``config.secure``: every method's rounds through the secure aggregation Flower runs for it, Protocol 1
        or the masked sum, equal to the plain run within its resolution) add the aggregation's per-part seconds to
        ``info["secure_timings"]``; a run whose next round would exceed
        ``config.epsilon`` stops before it and says so in ``info["stopped_by_budget"]``.

    Raises:
        ValueError: A checkpoint with a secure or custom aggregation, a negative ``checkpoint_seconds``, a
            checkpoint path that cannot be written, a checkpoint file that is corrupted, malformed or belongs to
            another configuration, or an ``epsilon`` that the first round already exceeds.
    """
    if checkpoint is not None and (config.secure or aggregate_fn is not None):
        raise ValueError(
            "checkpoint is not supported with a secure or custom aggregation (its keys and state live "
            "in this process); run without checkpoint"
        )
    check_number("checkpoint_seconds", checkpoint_seconds, at_least=0)
    warn_if_slower(torch.device(config.device), config.precision)
    with torch_threads(threads), device_settings(torch.device(config.device), config.precision):
        return _run(config, progress, dataset, aggregate_fn, checkpoint, checkpoint_seconds)


def _run(
    config: RunConfig,
    progress: bool,
    dataset: FederatedDataset | None,
    aggregate_fn: Any,
    checkpoint: str | Path | None,
    checkpoint_seconds: float,
) -> RunResult:
    """:func:`run` once its arguments are checked and its threads set."""
    start = time.perf_counter()
    root = np.random.SeedSequence(config.seed)
    calibrating = config.sigma is None and config.epsilon is not None
    config, method, federation, data = _prepared(config, dataset)
    budget_check = config.epsilon is not None
    if (
        budget_check
        and method.epsilon(federation, 1, accountant=config.accountant) > config.epsilon
    ):
        raise ValueError(
            f"epsilon={config.epsilon!r} is exceeded by the first round at "
            f"sigma={config.sigma!r} ({config.accountant}); raise sigma or leave it unset to calibrate"
        )
    # the hook of the methods without per-user weights: an InProcessAggregator given, else the run's secure one
    # (a plain function given for the -w methods never leaves a secure run's other rounds in the clear)
    hook = aggregate_fn if isinstance(aggregate_fn, InProcessAggregator) else None
    if hook is None and config.secure:
        hook = secure_aggregator(config, method)
    aggregate_fn = hook if aggregate_fn is None else aggregate_fn
    federation = federation.to(torch.device(config.device))  # the model and the records, once
    params = flat_parameters(federation.model)
    evaluation_model = federation.model
    result = RunResult(
        config=config,
        info={
            "parameters": int(params.numel()),
            "train_records": int(federation.x.shape[0]),
            "n_silos": int(federation.n_silos),
            "dataset_variant": data.variant,
            "group_size": method.group_size(federation),
            "setup_seconds": round(time.perf_counter() - start, 3),
        },
    )
    if calibrating:
        result.info["calibrated_sigma"] = config.sigma

    x_test = data.x_test.to(federation.device)  # once: evaluate's forward passes run there

    def test_metrics(flat: torch.Tensor) -> dict:
        load_flat_parameters(evaluation_model, flat)
        metrics = evaluate(evaluation_model, x_test, data.y_test, config.dataset)
        return {
            "test_loss": float(metrics["loss"]),
            **{
                name: float(metrics[name])
                for name in ("accuracy", "balanced_accuracy", "c_index")
                if name in metrics
            },
        }

    _, history, resumed = train_rounds(
        method,
        federation,
        params,
        rounds=config.rounds,
        root=root,
        evaluate=test_metrics,
        aggregate_fn=aggregate_fn,
        sum_fn=None if hook is None else hook.sum_updates,
        checkpoint=checkpoint,
        fingerprint=_checkpoint_fingerprint(config, data),
        checkpoint_seconds=checkpoint_seconds,
        progress=progress,
        description=f"{config.method} on {config.dataset}",
        accountant=config.accountant,
        epsilon_budget=config.epsilon,
    )
    if len(history) < config.rounds:  # the budget stopped it before the next round
        next_epsilon = method.epsilon(federation, len(history) + 1, accountant=config.accountant)
        result.info["stopped_by_budget"] = {
            "rounds_done": len(history),
            "epsilon_next_round": float(next_epsilon),
        }
    for row in history:
        _record_round(result, row)
    if resumed:
        result.info["resumed_from_round"] = resumed
        result.info["resumed_seconds"] = round(sum(result.seconds[:resumed]), 3)
    if hook is not None and hook.round_timings:
        result.info["secure_timings"] = {
            "setup": dict(hook.timings),
            "rounds": list(hook.round_timings),
        }
    return result
