"""Bring your own federation: train any PyTorch model on your own records with user-level DP, in one call.

:func:`fit` takes a model, records ``x, y``, and for every record the id of the user (patient) it belongs to and of
the silo (hospital) that holds it. Ids may be any hashable values (strings, ints, tuples); users are numbered in
sorted order of their ids, silos too (``history.users`` / ``history.silos`` give the order). A method of the
registry (:mod:`uldp.methods`: Algorithms 1-4 of the paper) then trains it for ``rounds`` rounds with either a noise
multiplier ``sigma`` or a target ``epsilon`` (solved for sigma by :func:`uldp.accounting.sigma_for_epsilon`, RDP),
and reports per round the test loss, your metrics and the user-level epsilon spent (Theorems 1 and 3).

Standard torch losses are adapted to the library's weighted-loss interface by :func:`weighted_loss`; modules that
per-user training cannot run are refused before training by :func:`check_module`, naming the layer and the fix.

:func:`fit` resolves your inputs (:mod:`uldp.fitting.inputs`) into a federation and trains it with
:func:`prepare_method` and the round loop :func:`train_rounds` (:mod:`uldp.fitting.rounds`), the two that
:func:`uldp.simulation.run` calls for the paper's registered datasets. So a registered dataset is one call of
:func:`fit`: its records, its allocation's user and silo ids, :func:`uldp.models.build_model` and
:func:`uldp.models.loss_function` end at ``run``'s model bit for bit, for every method (``tests/test_fitting.py``).

Every random draw (user sampling, record order, dropout, noise) derives from ``seed`` through one
``numpy.random.SeedSequence`` (round ``t``'s stream is :func:`round_seed`), never from torch's global generator, so two
calls with the same arguments give the same model whatever ``torch.manual_seed`` was set to in between. The model
you pass is not modified; a trained copy is returned. (Its initial weights are yours: build it under a fixed
``torch.random.fork_rng()`` / ``torch.manual_seed`` if those should be reproducible too.)
"""

from __future__ import annotations

import copy
import hashlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import Tensor, nn

from uldp.checks import check_integer, check_number, check_positive
from uldp.data.base import Allocation
from uldp.fitting.inputs import (
    LossFunction,
    Metric,
    UnsupportedModuleError,
    WeightedLoss,
    check_module,
    features_tensor,
    index_ids,
    targets_tensor,
    trial_step,
    weighted_loss,
)
from uldp.fitting.rounds import (
    ALLOCATION_STREAM,
    INIT_STREAM,
    PREPARE_STREAM,
    ROUNDS_STREAM,
    SUBSET_STREAM,
    prepare_method,
    round_seed,
    train_rounds,
)
from uldp.methods.base import Federation, Hyperparameters, parse_method
from uldp.methods.registry import unused_hyperparameters
from uldp.training.per_user import flat_parameters, load_flat_parameters

if TYPE_CHECKING:
    from collections.abc import Hashable, Iterable, Mapping
    from pathlib import Path

__all__ = ["ALLOCATION_STREAM", "DEFAULTS", "INIT_STREAM", "PREPARE_STREAM", "ROUNDS_STREAM", "SUBSET_STREAM",
           "History", "LossFunction", "Metric", "UnsupportedModuleError", "WeightedLoss", "check_module",
           "features_tensor", "fit", "index_ids", "prepare_method", "round_seed", "targets_tensor", "train_rounds",
           "weighted_loss"]

#: Defaults of :func:`fit`: the paper's ULDP-AVG setting for its tabular MLP (Creditcard, settings.md).
DEFAULTS = {"global_lr": 10.0, "local_lr": 0.01, "clip": 0.1, "local_epochs": 5, "batch_size": 64}


@dataclass(frozen=True)
class History:
    """What :func:`fit` reports.

    Attributes:
        rows: One dict per round: ``round``, ``loss`` and your metrics on the test set (when one is given),
            ``epsilon`` (user-level, at ``delta``; ``None`` for DEFAULT) and ``seconds``.
        sigma: The noise multiplier used (solved from the target epsilon when one was given).
        delta: The delta of every epsilon.
        users: The user ids in index order (index ``u`` of the method's ``n[s, u]``).
        silos: The silo ids in index order.
        resumed_from: Rounds taken from the checkpoint.
    """

    rows: list[dict]
    sigma: float | None
    delta: float
    users: tuple[Hashable, ...]
    silos: tuple[Hashable, ...]
    resumed_from: int = 0
    info: dict = field(default_factory=dict)

    def column(self, name: str) -> list:
        """Per round, the value named ``name`` (``"loss"``, ``"epsilon"``, a metric, ``"seconds"``).

        Raises:
            ValueError: A name no row has.
        """
        if self.rows and name not in self.rows[-1]:
            raise ValueError(f"no {name!r} in the history; it has {', '.join(self.rows[-1])}")
        return [row[name] for row in self.rows]

    @property
    def epsilon(self) -> float | None:
        """The epsilon spent after the last round."""
        return self.rows[-1]["epsilon"] if self.rows else None


def _check_sigma(method: str, *, epsilon: float | None, sigma: float | None) -> float | None:
    """``sigma`` as given (``None`` with a target ``epsilon``, calibrated once the method is prepared)."""
    spec = parse_method(method)
    if not spec.private:
        if epsilon is not None or sigma is not None:
            raise ValueError("DEFAULT adds no noise: give neither epsilon nor sigma")
        return None
    if (epsilon is None) == (sigma is None):
        raise ValueError(f"{spec.name} needs exactly one of epsilon (a target) or sigma (a noise multiplier); got "
                         f"epsilon={epsilon!r}, sigma={sigma!r}")
    if epsilon is None:  # exactly one of them is given: sigma
        return check_positive("sigma", sigma)
    if spec.family == "ULDP-GROUP":
        raise ValueError(f"a target epsilon for {spec.name} depends on each silo's DP-SGD sampling; give sigma "
                         "(uldp.accounting.epsilon_group computes its epsilon)")
    check_positive("epsilon", epsilon)
    return None


def _digest(*arrays: Any) -> str:
    """SHA-256 of the bytes of tensors and arrays (what a checkpoint's data must match)."""
    h = hashlib.sha256()
    for array in arrays:
        data = array.detach().numpy() if isinstance(array, Tensor) else np.asarray(array)
        h.update(str((data.dtype, data.shape)).encode())
        h.update(np.ascontiguousarray(data).tobytes())
    return h.hexdigest()


def fit(model: nn.Module, x: Any, y: Any, *, user_ids: Any, silo_ids: Any, loss: Any,
        method: str = "ULDP-AVG-w", epsilon: float | None = None, sigma: float | None = None, delta: float = 1e-5,
        rounds: int = 10, q: float = 1.0, metrics: Mapping[str, Metric] | None = None,
        test: tuple[Any, Any] | None = None, seed: int = 0, checkpoint: str | Path | None = None,
        progress: bool = False, local_lr: float | None = None, global_lr: float | None = None,
        clip: float | None = None, local_epochs: int | None = None, batch_size: int | None = None,
        checkpoint_seconds: float = 60.0, all_user_ids: Iterable[Hashable] | None = None
        ) -> tuple[nn.Module, History]:
    """Train ``model`` on your own records across silos with user-level DP (the paper's Algorithms 1-4).

    A user may hold records in several silos; ULDP-AVG(-w) bounds each user's total contribution per round by the
    clipping bound ``C`` (Theorem 3), so ``epsilon`` protects everything about a user at once. The paper's five
    registered datasets are uses of this call (``uldp.simulation.run`` trains them through the same
    :func:`prepare_method` and :func:`train_rounds`; ``tests/test_fitting.py`` checks a run against this call).

    Args:
        model: Any ``nn.Module`` that per-user training can run (see :func:`check_module`); not modified.
        x: Records ``[n, ...]`` (tensor, array or DataFrame; float features are cast to the model's dtype).
        y: Targets ``[n, ...]``: integer labels (cross-entropy), 0/1 (BCE), values (MSE or your own loss).
        user_ids: The user (patient) of each record: any hashable values of one type.
        silo_ids: The silo (hospital) holding each record: any hashable values of one type.
        all_user_ids: Every user of the federation, including users with no record here (a registry of
            patients, or an allocation in which some users drew no record). They count in ``|U|``: the user
            sampling draws one value per user and ULDP-AVG's step divides by ``q |U| |S|`` (Algorithm 3, line 6).
            ``None``: the users of ``user_ids``.
        loss: ``nn.CrossEntropyLoss()``, ``nn.BCEWithLogitsLoss()``, ``nn.MSELoss()`` or a callable (see
            :func:`weighted_loss`; a ``(outputs, targets, weight)`` one, as the paper's, is trained as it is).
        method: A registry name (:mod:`uldp.methods`): ``"ULDP-AVG-w"`` (default), ``"ULDP-AVG"``, ``"ULDP-SGD"``,
            ``"ULDP-NAIVE"``, ``"ULDP-GROUP-<k>"``, ``"DEFAULT"`` (no privacy) ...
        epsilon: Target user-level epsilon after ``rounds`` rounds (RDP accountant); or give ``sigma``.
        sigma: Noise multiplier; or give ``epsilon``.
        delta: Target delta.
        rounds: Rounds ``T``.
        q: User-level Poisson sampling rate per round (ULDP-SGD/AVG, Algorithm 4).
        metrics: ``{name: fn(outputs, y_test) -> float}`` (or a one-element tensor) computed on the test set after
            every round.
        test: Optional held-out ``(x_test, y_test)``; without it the history has no loss (a loss on the training
            records would be a release that the privacy guarantee does not cover).
        seed: The one seed of every random draw (user sampling, record order, dropout, noise).
        checkpoint: File to resume from and save to after rounds (atomic; tied to these arguments and data, but not
            to ``rounds``: with the same ``sigma`` a finished run's checkpoint continues into a longer one).
        progress: Show a progress bar (tqdm, stderr).
        local_lr: ``eta_l`` (default 0.01).
        global_lr: ``eta_g`` (default 10.0, the paper's ULDP-AVG; its step divides by ``q |U| |S|``).
        clip: ``C`` (default 0.1).
        local_epochs: ``Q`` (default 5).
        batch_size: Local mini-batch size (default 64).
        checkpoint_seconds: Save the checkpoint at most this often (and after the last round).

    Returns:
        ``(trained copy of model, History)``.

    Raises:
        ValueError: Bad ids, shapes, dtypes or labels, an unknown method, bad hyperparameters, both or neither of
            epsilon and sigma; :class:`UnsupportedModuleError` (a ValueError) for a layer per-user training cannot
            run, naming it and its replacement.

    Example:
        >>> net = nn.Linear(2, 2)
        >>> x = torch.tensor([[0.0, 1.0], [1.0, 0.0], [1.0, 1.0], [0.0, 0.0]])
        >>> trained, history = fit(net, x, [0, 1, 1, 0], user_ids=["ann", "bob", "ann", "cy"],
        ...                        silo_ids=["north", "south", "south", "north"], loss=nn.CrossEntropyLoss(),
        ...                        epsilon=8.0, rounds=2)
        >>> [row["round"] for row in history.rows], history.users
        ([1, 2], ('ann', 'bob', 'cy'))
    """
    if not isinstance(model, nn.Module):
        raise ValueError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    spec = parse_method(method)
    rounds = check_integer("rounds", rounds)
    seed = check_integer("seed", seed, minimum=0)
    check_number("checkpoint_seconds", checkpoint_seconds, at_least=0)
    check_module(model)
    loss_fn = weighted_loss(loss)
    model = copy.deepcopy(model)
    dtype = next(p.dtype for p in model.parameters() if p.requires_grad)
    x = features_tensor("x", x, dtype)
    n = int(x.shape[0])
    with torch.no_grad(), torch.random.fork_rng(devices=[]):
        outputs = model.eval()(x[:2])
    y = targets_tensor("y", y, n, loss_fn, outputs, dtype)
    users, user_labels = index_ids("user_ids", user_ids, n, known=all_user_ids)
    silos, silo_labels = index_ids("silo_ids", silo_ids, n)
    if test is not None:
        if not isinstance(test, (tuple, list)) or len(test) != 2:
            raise ValueError("test must be a pair (x_test, y_test)")
        x_test = features_tensor("x_test", test[0], dtype)
        y_test = targets_tensor("y_test", test[1], int(x_test.shape[0]), loss_fn, outputs, dtype)
    metrics = dict(metrics or {})
    if metrics and test is None:
        raise ValueError(f"metrics {sorted(metrics)} need a test set: pass test=(x_test, y_test)")
    trial_step(model, loss_fn, x, y)
    sigma = _check_sigma(spec.name, epsilon=epsilon, sigma=sigma)
    chosen = {"local_lr": local_lr, "global_lr": global_lr, "clip": clip, "local_epochs": local_epochs,
              "batch_size": batch_size}
    unused = unused_hyperparameters(spec.family)  # None whatever is passed; Hyperparameters checks the others
    values: dict[str, Any] = {name: None if name in unused else DEFAULTS[name] if value is None else value
                              for name, value in chosen.items()}
    hp = Hyperparameters(**values, sigma=sigma, delta=delta, q=q)  # sigma is None for DEFAULT (_check_sigma)
    allocation = Allocation(users, silos, len(user_labels), len(silo_labels), scheme="given", seed=seed)
    federation = Federation(model=model, loss_fn=loss_fn.trained, x=x, y=y, allocation=allocation)
    root = np.random.SeedSequence(seed)
    hp, made, federation = prepare_method(spec.name, hp, federation, root, target_epsilon=epsilon, rounds=rounds)
    params = flat_parameters(model)

    def evaluate(flat: Tensor) -> dict:
        if test is None:
            return {}
        load_flat_parameters(model, flat)
        was_training = model.training
        model.eval()
        with torch.no_grad():
            out = torch.cat([model(chunk) for chunk in torch.split(x_test, 2048)])
        model.train(was_training)
        return {"loss": float(loss_fn(out, y_test)), **{name: float(fn(out, y_test)) for name, fn in metrics.items()}}

    fingerprint = _digest(x, y, users, silos, params, *(() if test is None else (x_test, y_test)))
    # rounds stay out: a checkpoint of a shorter run with the same sigma continues into a longer one
    fingerprint = hashlib.sha256(repr((spec.name, hp, seed, user_labels, silo_labels, sorted(metrics),
                                       fingerprint)).encode()).hexdigest()
    params, rows, resumed = train_rounds(made, federation, params, rounds=rounds, root=root, evaluate=evaluate,
                                         checkpoint=checkpoint, fingerprint=fingerprint,
                                         checkpoint_seconds=checkpoint_seconds, progress=progress,
                                         description=f"{spec.name}")
    load_flat_parameters(model, params)
    model.train()
    return model, History(rows=rows, sigma=hp.sigma, delta=delta, users=user_labels, silos=silo_labels,
                          resumed_from=resumed, info={"parameters": int(params.numel()), "records": n,
                                                      "hyperparameters": hp})
