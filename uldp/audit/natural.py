"""Natural canaries: real training runs of a registered method, scored by the final model's loss on each canary.

A natural canary is a user whose records look real: records of the dataset's test set (never trained on otherwise)
with their labels flipped, so that a model that takes them in fits them better than one that does not. Each canary
holds ``r`` records in each of ``k`` silos. The federation is :func:`uldp.simulation.build_federation`'s, the
training is the method's own :meth:`round` (local training, clipping, weights, noise, server step), round after
round from the run's seed, exactly as :func:`uldp.simulation.run` does; the canaries included in a run are appended
as extra users. The attack sees only the final model (a weaker adversary than the every-round view of
:mod:`uldp.audit.crafted`): a canary's score is minus the model's mean loss on its records.

Many canaries per run, each included with probability 1/2, feed the one-run estimator of Steinke, Nasr and
Jagielski (:func:`uldp.audit.estimators.one_run_bound`); canaries of several independent runs can be pooled, since
including or removing one canary changes only its own run, so the pooled output is as private in each canary as one
run.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from uldp.common.checks import check_integer, check_positive
from uldp.data import load
from uldp.data.base import Allocation, FederatedDataset
from uldp.fitting import PREPARE_STREAM, round_seed
from uldp.methods import Federation, make_method
from uldp.methods.base import seed_stream
from uldp.simulation import RunConfig, build_federation
from uldp.training.per_user import flat_parameters, load_flat_parameters

#: Random stream (child of the run's seed) that picks the canaries' records.
CANARY_STREAM = 10


@dataclass(frozen=True)
class NaturalSetting:
    """The federation, training and canaries of a natural-canary audit.

    Attributes:
        dataset: A dataset of :func:`uldp.data.load` with a binary task and a test set (``"synthetic"``,
            ``"creditcard"``, ``"heart_disease"``).
        n_users: Users of the federation (besides the canaries).
        n_silos: Silos.
        rounds: Rounds ``T``.
        local_epochs: ``Q``.
        local_lr: Local learning rate.
        global_lr: Server learning rate (``None``: the paper's for the method).
        clip: Clipping bound (``None``: the paper's for the method).
        max_train_records: Training records kept (a stratified subset).
        canaries: Canaries per run ``m``.
        canary_records: Records of a canary in each of its silos ``r``.
        canary_silos: Silos holding each canary's records (the first ones).
    """

    dataset: str = "synthetic"
    n_users: int = 30
    n_silos: int = 3
    rounds: int = 5
    local_epochs: int = 2
    local_lr: float = 0.5
    global_lr: float | None = None
    clip: float | None = None
    max_train_records: int = 300
    canaries: int = 8
    canary_records: int = 6
    canary_silos: int = 3

    def __post_init__(self) -> None:
        for name in (
            "n_users",
            "n_silos",
            "rounds",
            "local_epochs",
            "max_train_records",
            "canaries",
            "canary_records",
        ):
            check_integer(name, getattr(self, name))
        check_integer("canary_silos", self.canary_silos, maximum=self.n_silos)
        check_positive("local_lr", self.local_lr)

    def config(self, method: str, *, sigma: float | None, seed: int) -> RunConfig:
        """The :class:`~uldp.simulation.RunConfig` of one run (the paper's other hyperparameters)."""
        return RunConfig(
            dataset=self.dataset,
            method=method,
            n_users=self.n_users,
            rounds=self.rounds,
            seed=seed,
            n_silos=self.n_silos,
            local_epochs=self.local_epochs,
            local_lr=self.local_lr,
            global_lr=self.global_lr,
            clip=self.clip,
            sigma=sigma,
            max_train_records=self.max_train_records,
        )


def with_canaries(
    federation: Federation,
    x: torch.Tensor,
    y: torch.Tensor,
    included: np.ndarray,
    setting: NaturalSetting,
) -> Federation:
    """``federation`` plus the included canaries' records: canary ``j`` is user ``|U| + j``.

    ``x``, ``y``: ``[m, k, r, ...]`` every canary's records per silo. Excluded canaries keep their user id with no
    record (the neighbouring dataset without them).
    """
    m, k, r = x.shape[:3]
    chosen = np.flatnonzero(included)
    users = np.repeat(federation.n_users + chosen, k * r)
    silos = np.tile(np.repeat(np.arange(k), r), chosen.size)
    index = torch.from_numpy(chosen)
    allocation = federation.allocation
    joined = Allocation(
        np.concatenate([allocation.user, users]),
        np.concatenate([allocation.silo, silos]),
        federation.n_users + m,
        federation.n_silos,
        allocation.scheme,
        allocation.seed,
    )
    return Federation(
        federation.model,
        federation.loss_fn,
        torch.cat([federation.x, x[index].reshape(-1, *x.shape[3:])]),
        torch.cat([federation.y, y[index].reshape(-1)]),
        joined,
    )


def canary_records(
    data: FederatedDataset, setting: NaturalSetting, seed: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """``[m, k, r, ...]`` test records with flipped labels, drawn without replacement from the run's seed among the
    test records farthest from the test set's mean (real records, but atypical ones: the most exposed)."""
    shape = (setting.canaries, setting.canary_silos, setting.canary_records)
    needed = int(np.prod(shape))
    flat = data.x_test.reshape(data.x_test.shape[0], -1).double()
    distance = (flat - flat.mean(dim=0)).norm(dim=1)
    pool = torch.argsort(distance, descending=True)[: 4 * needed].numpy()
    if needed > data.x_test.shape[0] // 4:
        raise ValueError(
            f"{needed} canary records needed; the test set of {setting.dataset} has "
            f"{data.x_test.shape[0]} (at most a quarter may be canaries)"
        )
    rng = np.random.default_rng(seed_stream(np.random.SeedSequence(seed), CANARY_STREAM))
    index = torch.from_numpy(rng.choice(pool, needed, replace=False))
    x = data.x_test[index].reshape(*shape, *data.x_test.shape[1:])
    return x, (1 - data.y_test[index]).reshape(shape)


def natural_run(
    method_name: str,
    setting: NaturalSetting,
    included: np.ndarray,
    *,
    sigma: float | None,
    seed: int,
    canaries: tuple[torch.Tensor, torch.Tensor],
    dataset: FederatedDataset | None = None,
) -> np.ndarray:
    """One training run with the included canaries; returns every canary's score (minus its loss), ``[m]``.

    Args:
        method_name: A registry name.
        setting: The federation and canaries.
        included: ``[m]`` booleans.
        sigma: The noise multiplier (``None`` for DEFAULT).
        seed: The run's seed (federation, training, noise).
        canaries: ``(x, y)`` of :func:`canary_records`.
        dataset: An already loaded dataset (default: loaded).

    Returns:
        ``[m]`` scores; higher means "more likely included".
    """
    included = np.asarray(included, dtype=bool)
    if included.shape != (setting.canaries,):
        raise ValueError(f"included must have shape ({setting.canaries},), got {included.shape}")
    config = setting.config(method_name, sigma=sigma, seed=seed)
    federation, _ = build_federation(config, dataset)
    x, y = canaries
    federation = with_canaries(federation, x, y, included, setting)
    method = make_method(config.method, config.hyperparameters())
    root = np.random.SeedSequence(seed)
    federation = method.prepare(federation, seed_stream(root, PREPARE_STREAM))
    params = flat_parameters(federation.model)
    federation.model.train()
    for t in range(config.rounds):
        params = method.round(params, federation, round_seed(root, t))
    model = federation.model
    load_flat_parameters(model, params)
    model.eval()
    with torch.no_grad():
        outputs = model(x.reshape(-1, *x.shape[3:])).reshape(setting.canaries, -1)
        targets = y.reshape(setting.canaries, -1)
        return np.array(
            [
                -float(federation.loss_fn(outputs[j], targets[j], None))
                for j in range(setting.canaries)
            ]
        )


def natural_scores(
    method_name: str, setting: NaturalSetting, *, runs: int, sigma: float | None, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Scores of ``runs`` independent runs with the same canaries, each included with probability 1/2 per run.

    Returns:
        ``(scores, included)``, both ``[runs, m]``; see :func:`standardised` for comparing canaries.
    """
    check_integer("runs", runs)
    dataset = load(setting.dataset)
    canaries = canary_records(dataset, setting, seed)
    rng = np.random.default_rng(seed_stream(np.random.SeedSequence(seed), CANARY_STREAM + 1))
    included = rng.random((runs, setting.canaries)) < 0.5
    scores = [
        natural_run(
            method_name,
            setting,
            included[run],
            sigma=sigma,
            seed=seed * 100_003 + run,
            canaries=canaries,
            dataset=dataset,
        )
        for run in range(runs)
    ]
    return np.stack(scores), included


def standardised(scores: np.ndarray) -> np.ndarray:
    """Each canary's scores ``[runs, m]`` centred and scaled over the runs (some records are just easier to fit).

    A function of the whole pooled output, whatever each canary's inclusion, so the one-run guarantee still holds:
    the pooled runs are one mechanism in which each (canary, run) pair changes one run only.
    """
    scores = np.asarray(scores, dtype=float)
    spread = scores.std(axis=0)
    return (scores - scores.mean(axis=0)) / np.where(spread > 0, spread, 1.0)


def natural_federation(method_name: str, setting: NaturalSetting, seed: int) -> Federation:
    """The federation of a run with every canary included (for calibrating sigma to a claimed epsilon)."""
    config = setting.config(method_name, sigma=None if method_name == "DEFAULT" else 1.0, seed=seed)
    federation, data = build_federation(config)
    x, y = canary_records(data, setting, seed)
    return with_canaries(federation, x, y, np.ones(setting.canaries, dtype=bool), setting)
