"""Bring your own federation: train any PyTorch model on your own records with user-level DP, in one call.

:func:`fit` takes a model, records ``x, y``, and for every record the id of the user (patient) it belongs to and of
the silo (hospital) that holds it. Ids may be any hashable values (strings, ints, tuples); users are numbered in
sorted order of their ids, silos too (``history.users`` / ``history.silos`` give the order). A method of the
registry (:mod:`uldp.methods`: Algorithms 1-4 of the paper) then trains it for ``rounds`` rounds with either a noise
multiplier ``sigma`` or a target ``epsilon`` (solved for sigma by :func:`uldp.accounting.sigma_for_epsilon`, RDP),
and reports per round the test loss, your metrics and the user-level epsilon spent (Theorems 1 and 3).

Standard torch losses are adapted to the library's weighted-loss interface ``(outputs, targets, weight)`` by
:func:`weighted_loss`; modules that per-user training (``torch.func.vmap`` over users) cannot run are refused
before training by :func:`check_module`, naming the layer and what to use instead.

The round loop :func:`train_rounds` is the same one :func:`uldp.simulation.run` runs for the paper's registered
datasets (one core; their stored results are unchanged by it).

Every random draw (user sampling, record order, dropout, noise) derives from ``seed`` through one
``numpy.random.SeedSequence`` (:func:`uldp.methods.base.seed_stream`), never from torch's global generator, so two
calls with the same arguments give the same model whatever ``torch.manual_seed`` was set to in between. The model
you pass is not modified; a trained copy is returned. (Its initial weights are yours: build it under a fixed
``torch.random.fork_rng()`` / ``torch.manual_seed`` if those should be reproducible too.)
"""

from __future__ import annotations

import copy
import hashlib
import inspect
import math
import time
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from tqdm import tqdm

from uldp.accounting import sigma_for_epsilon
from uldp.atomic import check_writable
from uldp.checks import check_integer, check_number, check_positive
from uldp.data.base import Allocation
from uldp.methods import make_method
from uldp.methods.base import Federation, Hyperparameters, parse_method, seed_stream
from uldp.persist import Checkpoint, load_checkpoint, save_checkpoint
from uldp.training.per_user import flat_parameters, load_flat_parameters, record_keys, train_users

if TYPE_CHECKING:
    from pathlib import Path

#: Top-level random streams of a run, children of its root seed: the subset of the training records, the
#: allocation and the initial model (:func:`uldp.simulation.run`), the method's preparation and the rounds (both).
ALLOCATION_STREAM, INIT_STREAM, PREPARE_STREAM, ROUNDS_STREAM, SUBSET_STREAM = range(5)

#: Defaults of :func:`fit`: the paper's ULDP-AVG setting for its tabular MLP (Creditcard, settings.md).
DEFAULTS = {"global_lr": 10.0, "local_lr": 0.01, "clip": 0.1, "local_epochs": 5, "batch_size": 64}

LossFunction = Callable[[Tensor, Tensor, "Tensor | None"], Tensor]
Metric = Callable[[Tensor, Tensor], "float | Tensor"]


class UnsupportedModuleError(ValueError):
    """The model has a layer that per-user training cannot run; the message names it and the replacement."""


# ---------------------------------------------------------------------------------------------------- losses --
def _weighted_mean(per_record: Tensor, weight: Tensor | None) -> Tensor:
    """``sum_i w_i l_i / max(sum_i w_i, 1)`` (the library's weighted mean; 0 when every weight is 0)."""
    if weight is None:
        weight = torch.ones_like(per_record)
    return (per_record * weight).sum() / weight.sum().clamp_min(1.0)


@dataclass(frozen=True)
class WeightedLoss:
    """A loss in the library's interface ``(outputs, targets, weight) -> weighted mean`` (vmap-safe).

    Attributes:
        function: ``(outputs, targets) -> [n]`` per-record losses, or with ``weighted`` the library-interface
            loss ``(outputs, targets, weight)`` itself; pure tensor ops either way.
        kind: ``"cross_entropy"``, ``"bce"``, ``"mse"`` or ``"custom"`` (selects the checks on ``y``).
        weighted: Whether ``function`` already takes the weight and returns the weighted mean.
    """

    function: Callable[..., Tensor]
    kind: str
    weighted: bool = False

    def __call__(self, outputs: Tensor, targets: Tensor, weight: Tensor | None = None) -> Tensor:
        if self.weighted:
            return self.function(outputs, targets, weight)
        per_record = self.function(outputs, targets)
        if per_record.ndim == 0:
            raise ValueError("a loss callable (outputs, targets) must return per-record losses [n], got a scalar; "
                             "use reduction='none'")
        return _weighted_mean(per_record.reshape(per_record.shape[0], -1).mean(dim=-1), weight)

    @property
    def trained(self) -> Callable[..., Tensor]:
        """What the methods train with: a library-interface loss as it is (so :mod:`uldp.training`'s closed-form
        gradients know the paper's losses, :func:`uldp.models.loss_function`), else this adapter."""
        return self.function if self.weighted else self


def _cross_entropy(label_smoothing: float) -> Callable[[Tensor, Tensor], Tensor]:
    def per_record(outputs: Tensor, targets: Tensor) -> Tensor:
        log_p = torch.log_softmax(outputs, dim=-1)
        picked = -log_p.gather(-1, targets.long().unsqueeze(-1)).squeeze(-1)
        return (1 - label_smoothing) * picked - label_smoothing * log_p.mean(dim=-1)
    return per_record


def _bce(pos_weight: Tensor | None) -> Callable[[Tensor, Tensor], Tensor]:
    def per_record(outputs: Tensor, targets: Tensor) -> Tensor:
        logits = outputs.reshape(targets.shape)
        if pos_weight is None:
            return F.softplus(logits) - targets * logits
        # torch's form: (1 - y) z + (1 + (p - 1) y) softplus(-z)
        return (1 - targets) * logits + (1 + (pos_weight - 1) * targets) * F.softplus(-logits)
    return per_record


def _mse(outputs: Tensor, targets: Tensor) -> Tensor:
    difference = outputs.reshape(targets.shape) - targets
    return difference * difference


def weighted_loss(loss: Any) -> WeightedLoss:
    """Adapt a torch loss to the library's weighted-mean interface (``uldp.models.loss_function``'s contract).

    Args:
        loss: ``nn.CrossEntropyLoss()`` (``label_smoothing`` allowed), ``nn.BCEWithLogitsLoss()`` (``pos_weight``
            allowed), ``nn.MSELoss()``, the functions ``F.cross_entropy`` / ``F.binary_cross_entropy_with_logits`` /
            ``F.mse_loss``, a callable ``(outputs, targets) -> [n]`` per-record losses, or a callable
            ``(outputs, targets, weight) -> weighted mean`` (three positional parameters, or a third one named
            ``weight``: the library's own interface, used as it is).

    Returns:
        The :class:`WeightedLoss`; a loss of the reduction ``"mean"`` over the records with weight 1.

    Raises:
        ValueError: A loss with class weights or ``ignore_index`` (not per-record losses), another reduction
            than ``"mean"``, or a callable of another arity.

    Example:
        >>> round(float(weighted_loss(nn.CrossEntropyLoss())(torch.zeros(2, 2), torch.tensor([0, 1]))), 4)
        0.6931
    """
    if isinstance(loss, WeightedLoss):
        return loss
    functions = {F.cross_entropy: nn.CrossEntropyLoss, F.binary_cross_entropy_with_logits: nn.BCEWithLogitsLoss,
                 F.mse_loss: nn.MSELoss}
    if loss in functions:
        loss = functions[loss]()
    if isinstance(loss, nn.modules.loss._Loss):
        if loss.reduction != "mean":
            raise ValueError(f"loss reduction must be 'mean' (the library averages over each user's records), "
                             f"got {loss.reduction!r}")
        if isinstance(loss, nn.CrossEntropyLoss):
            if loss.weight is not None or loss.ignore_index != -100:
                raise ValueError("nn.CrossEntropyLoss with class weights or ignore_index is not supported; "
                                 "use nn.CrossEntropyLoss() or a per-record callable (outputs, targets) -> [n]")
            return WeightedLoss(_cross_entropy(float(loss.label_smoothing)), "cross_entropy")
        if isinstance(loss, nn.BCEWithLogitsLoss):
            if loss.weight is not None:
                raise ValueError("nn.BCEWithLogitsLoss with weight is not supported (pos_weight is); "
                                 "use a per-record callable (outputs, targets) -> [n]")
            return WeightedLoss(_bce(loss.pos_weight), "bce")
        if isinstance(loss, nn.MSELoss):
            return WeightedLoss(_mse, "mse")
        raise ValueError(f"loss {type(loss).__name__} is not adapted automatically; use nn.CrossEntropyLoss, "
                         "nn.BCEWithLogitsLoss, nn.MSELoss or a callable (outputs, targets) -> [n] per-record losses")
    if not callable(loss):
        raise ValueError(f"loss must be a torch loss or a callable, got {type(loss).__name__}")
    positional = [p for p in inspect.signature(loss).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in positional if p.default is inspect.Parameter.empty]
    if len(required) == 3 or (len(required) == 2 and len(positional) >= 3 and positional[2].name == "weight"):
        return WeightedLoss(loss, "custom", weighted=True)
    if len(required) == 2:
        return WeightedLoss(loss, "custom")
    raise ValueError(f"a loss callable takes (outputs, targets) -> [n] per-record losses or (outputs, targets, "
                     f"weight) -> weighted mean; {getattr(loss, '__name__', loss)!r} takes {len(required)} arguments")


# ---------------------------------------------------------------------------------------------------- module --
#: Layers per-user training cannot run, and what to use instead (checked before training, like Opacus'
#: ``ModuleValidator``). Training vmaps every user's copy of the model over a batch of that user's records alone.
_REPLACEMENTS: tuple[tuple[type, str], ...] = (
    (nn.modules.batchnorm._BatchNorm, ("batch normalisation mixes records of a batch and updates running statistics "
                                       "in place, which per-user training (torch.func.vmap over users) cannot keep "
                                       "per user; use nn.GroupNorm(num_groups, num_channels) or nn.LayerNorm instead")),
)


def check_module(model: nn.Module) -> None:
    """Refuse a model that per-user training cannot run, naming each bad layer and its replacement.

    Per-user training (Algorithm 3, lines 9-17, for every user at once: :func:`uldp.training.per_user.train_users`)
    runs ``torch.func.vmap`` over users of ``torch.func.grad`` of the model. Layers that update buffers in place
    (BatchNorm, InstanceNorm with ``track_running_stats``) cannot run there.

    Args:
        model: The model.

    Raises:
        UnsupportedModuleError: Naming every bad layer (``'net.1' (BatchNorm1d)``) and what to use instead, or a
            model without trainable parameters.

    Example:
        >>> check_module(nn.Sequential(nn.Linear(3, 4), nn.GroupNorm(1, 4), nn.Linear(4, 1)))
    """
    problems = []
    for name, module in model.named_modules():
        for kind, advice in _REPLACEMENTS:
            if isinstance(module, kind):
                problems.append(f"layer {name or '<model>'!r} ({type(module).__name__}): {advice}")
        if isinstance(module, nn.modules.instancenorm._InstanceNorm) and module.track_running_stats:
            problems.append(f"layer {name!r} ({type(module).__name__}): track_running_stats=True updates running "
                            "statistics in place; set track_running_stats=False or use nn.GroupNorm")
    if problems:
        raise UnsupportedModuleError("the model cannot be trained per user: " + "; ".join(problems))
    if not any(p.requires_grad for p in model.parameters()):
        raise UnsupportedModuleError("the model has no trainable parameter (requires_grad=True)")


def _trial_step(model: nn.Module, loss_fn: WeightedLoss, x: Tensor, y: Tensor) -> None:
    """One per-user step of two users on the first records: any other layer vmap cannot run fails here, by name."""
    take = min(2, x.shape[0])
    try:
        with torch.random.fork_rng(devices=[]):  # leave every draw of training to the run's seed
            train_users(model, flat_parameters(model), x[:take], y[:take], [np.array([i]) for i in range(take)],
                        loss_fn=loss_fn, local_lr=1e-3, epochs=1, batch_size=1,
                        keys=record_keys(take, 1, torch.Generator().manual_seed(0)))
    except (RuntimeError, TypeError, NotImplementedError, IndexError) as error:
        raise UnsupportedModuleError(
            f"the model or loss fails per-user training (torch.func.vmap over users of torch.func.grad): "
            f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''} -- layers must not update "
            "buffers in place or call .item(); losses must use pure tensor ops") from error


# ------------------------------------------------------------------------------------------------------ data --
def _numeric_tensor(name: str, value: Any) -> Tensor:
    """``value`` (tensor, array, DataFrame, list) as a tensor; refuses non-numeric dtypes by name."""
    if isinstance(value, Tensor):
        tensor = value.detach().cpu()
    else:
        array = np.asarray(value)
        if array.dtype.kind not in "biuf":
            raise ValueError(f"{name} must be numeric (float or integer), got dtype {array.dtype}")
        tensor = torch.from_numpy(np.ascontiguousarray(array))
    if tensor.dtype.is_complex or tensor.dtype == torch.bool:
        raise ValueError(f"{name} must be float or integer, got {tensor.dtype}")
    if tensor.ndim == 0:
        raise ValueError(f"{name} must have one row per record, got a scalar")
    if tensor.dtype.is_floating_point and not bool(torch.isfinite(tensor).all()):
        raise ValueError(f"{name} holds NaN or infinite values (first at flat index "
                         f"{int((~torch.isfinite(tensor)).flatten().nonzero()[0])})")
    return tensor


def features_tensor(name: str, value: Any, dtype: torch.dtype) -> Tensor:
    """Records ``x`` as a tensor: floating point in ``dtype``, integer inputs (token ids) kept; NaN refused."""
    tensor = _numeric_tensor(name, value)
    return tensor.to(dtype) if tensor.dtype.is_floating_point else tensor  # integer inputs (token ids) stay


def targets_tensor(name: str, value: Any, n: int, loss_fn: WeightedLoss, outputs: Tensor,
                   dtype: torch.dtype) -> Tensor:
    """``y`` checked against the loss: class labels in ``0..C-1``, 0/1 targets, or regression targets."""
    y = _numeric_tensor(name, value)
    if y.shape[0] != n:
        raise ValueError(f"{name} has {y.shape[0]} rows, x has {n}")
    if loss_fn.kind == "cross_entropy":
        if y.dtype.is_floating_point or y.ndim != 1:
            raise ValueError(f"{name} must be a 1-D tensor of integer class labels for CrossEntropyLoss, got "
                             f"dtype {y.dtype} and shape {tuple(y.shape)}")
        n_classes = outputs.shape[-1]
        if int(y.min()) < 0 or int(y.max()) >= n_classes:
            raise ValueError(f"{name} labels must lie in 0..{n_classes - 1} (the model outputs {n_classes} "
                             f"logits), got {int(y.min())}..{int(y.max())}")
        return y.long()
    if loss_fn.kind == "bce":
        y = y.to(dtype)
        if outputs[0].numel() != 1 or y[0].numel() != 1:
            raise ValueError(f"BCEWithLogitsLoss needs one logit and one target per record; the model gives "
                             f"{outputs[0].numel()} and {name} has {y[0].numel()}")
        if bool((y < 0).any() or (y > 1).any()):
            raise ValueError(f"{name} must hold 0/1 targets (probabilities in [0, 1]) for BCEWithLogitsLoss, got "
                             f"{float(y.min())}..{float(y.max())}")
        return y.reshape(n)
    if loss_fn.kind == "mse":
        y = y.to(dtype)
        if outputs[0].numel() != y[0].numel():
            raise ValueError(f"MSELoss needs as many outputs as targets per record: the model gives "
                             f"{outputs[0].numel()}, {name} has {y[0].numel()}")
        return y
    return y.to(dtype) if y.dtype.is_floating_point else y


def index_ids(name: str, ids: Any, n: int) -> tuple[np.ndarray, tuple[Hashable, ...]]:
    """Map hashable ids to ``0..K-1`` in sorted order of the distinct ids.

    Args:
        name: The argument's name (for errors).
        ids: One id per record (list, array, tensor, Series): strings, ints, bytes or tuples, of one kind.
        n: The number of records.

    Returns:
        ``(codes int64 [n], the distinct ids in index order)``.

    Raises:
        ValueError: Not one id per record, a missing id (None or NaN), unhashable ids, or ids that cannot be
            ordered together (for example str and int mixed).

    Example:
        >>> index_ids("user_ids", ["bob", "ann", "bob"], 3)[0].tolist()
        [1, 0, 1]
    """
    values = ids.tolist() if hasattr(ids, "tolist") else list(ids)
    if np.ndim(values) > 1 and not all(isinstance(v, tuple) for v in values):
        raise ValueError(f"{name} must be one id per record (1-D), got shape {np.shape(values)}")
    if len(values) != n:
        raise ValueError(f"{name} has {len(values)} ids, x has {n} records")
    try:
        distinct = set(values)
    except TypeError as error:
        raise ValueError(f"{name} must be hashable values (str, int, bytes, tuple): {error}") from error
    if None in distinct or any(isinstance(v, float) and math.isnan(v) for v in distinct):
        raise ValueError(f"{name} holds a missing id (None or NaN); every record needs its {name[:-4]}")
    try:
        labels = tuple(sorted(distinct))
    except TypeError as error:
        kinds = sorted({type(v).__name__ for v in distinct})
        raise ValueError(f"{name} mixes id types that cannot be ordered ({', '.join(kinds)}); use one type") from error
    position = {label: i for i, label in enumerate(labels)}
    return np.fromiter((position[v] for v in values), dtype=np.int64, count=n), labels


# ------------------------------------------------------------------------------------------------ the rounds --
def train_rounds(method: Any, federation: Federation, params: Tensor, *, rounds: int, root: np.random.SeedSequence,
                 evaluate: Callable[[Tensor], dict], aggregate_fn: Any = None, checkpoint: str | Path | None = None,
                 fingerprint: str = "", checkpoint_seconds: float = 60.0, progress: bool = False,
                 description: str = "training", accountant: str = "rdp",
                 epsilon_budget: float | None = None) -> tuple[Tensor, list[dict], int]:
    """The round loop of every in-process run: :func:`fit` and :func:`uldp.simulation.run` (one core).

    Round ``t`` (0-based) is ``method.round`` with the random stream ``seed_stream(root, ROUNDS_STREAM, t)``
    (Algorithms 1-4), then ``evaluate(params)`` and the method's accountant (Theorems 1-3) for epsilon after
    ``t + 1`` rounds. Each round's draws depend on ``root`` and ``t`` alone, so a run resumed from its checkpoint
    (:mod:`uldp.persist`'s atomic format) ends exactly as an uninterrupted one.

    Args:
        method: A method of :func:`uldp.methods.make_method`, prepared on ``federation``.
        federation: The records.
        params: The initial flat model.
        rounds: Rounds ``T`` in all (those of a resumed checkpoint included).
        root: The run's root seed.
        evaluate: ``params -> {name: float}`` after each round (its names go first in each row).
        aggregate_fn: The enhanced-weight aggregation hook (``None``: plain).
        checkpoint: File to resume from and save to, or ``None``.
        fingerprint: What a checkpoint must match (the run's configuration and data).
        checkpoint_seconds: Save at most this often, and always after the last round.
        progress: Show a tqdm bar on stderr.
        description: The bar's label.
        accountant: The accountant of each round's epsilon (``"rdp"`` or ``"pld"``).
        epsilon_budget: Stop before the first round whose epsilon would exceed it (``None``: no budget).

    Returns:
        ``(final params, rows, rounds resumed from the checkpoint)``; a row is ``{"round", **evaluate(params),
        "epsilon", "seconds"}``. Fewer rows than ``rounds`` means the budget stopped the run.

    Raises:
        ValueError: A corrupted checkpoint or one of another configuration.
    """
    if checkpoint is not None:
        check_writable(checkpoint, "checkpoint")  # before any training, not after it
    history: list[dict] = []
    restored = None if checkpoint is None else load_checkpoint(checkpoint, config_fingerprint=fingerprint,
                                                                   like=params.detach().numpy())
    if restored is not None:
        params = torch.from_numpy(restored.params)
        history = list(restored.history)
    resumed = len(history)
    saved = time.perf_counter()
    federation.model.train()
    for t in tqdm(range(resumed, rounds), desc=description, disable=not progress, unit="round", initial=resumed,
                  total=rounds):
        tick = time.perf_counter()
        epsilon = method.epsilon(federation, t + 1, accountant=accountant)  # known before the round is run
        if epsilon_budget is not None and epsilon is not None and epsilon > epsilon_budget:
            break
        params = method.round(params, federation, seed_stream(root, ROUNDS_STREAM, t), aggregate_fn)
        row = {"round": t + 1, **evaluate(params)}
        row.update(epsilon=None if epsilon is None else float(epsilon), seconds=round(time.perf_counter() - tick, 4))
        history.append(row)
        if checkpoint is not None and (t + 1 == rounds or time.perf_counter() - saved >= checkpoint_seconds):
            save_checkpoint(checkpoint, Checkpoint(rounds_done=t + 1, params=params.detach().numpy().copy(),
                                                   config_fingerprint=fingerprint, history=tuple(history)))
            saved = time.perf_counter()
    return params, history, resumed


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


def _resolve_sigma(method: str, *, epsilon: float | None, sigma: float | None, rounds: int, delta: float,
                   q: float) -> float | None:
    """The noise multiplier: ``sigma`` as given, or the smallest one reaching ``epsilon`` (RDP accountant)."""
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
    return sigma_for_epsilon(spec.name, epsilon=epsilon, rounds=rounds, delta=delta, q=q)


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
        checkpoint_seconds: float = 60.0) -> tuple[nn.Module, History]:
    """Train ``model`` on your own records across silos with user-level DP (the paper's Algorithms 1-4).

    A user may hold records in several silos; ULDP-AVG(-w) bounds each user's total contribution per round by the
    clipping bound ``C`` (Theorem 3), so ``epsilon`` protects everything about a user at once.

    Args:
        model: Any ``nn.Module`` that per-user training can run (see :func:`check_module`); not modified.
        x: Records ``[n, ...]`` (tensor, array or DataFrame; float features are cast to the model's dtype).
        y: Targets ``[n, ...]``: integer labels (cross-entropy), 0/1 (BCE), values (MSE or your own loss).
        user_ids: The user (patient) of each record: any hashable values of one type.
        silo_ids: The silo (hospital) holding each record: any hashable values of one type.
        loss: ``nn.CrossEntropyLoss()``, ``nn.BCEWithLogitsLoss()``, ``nn.MSELoss()`` or a callable (see
            :func:`weighted_loss`).
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
    users, user_labels = index_ids("user_ids", user_ids, n)
    silos, silo_labels = index_ids("silo_ids", silo_ids, n)
    if test is not None:
        if not isinstance(test, (tuple, list)) or len(test) != 2:
            raise ValueError("test must be a pair (x_test, y_test)")
        x_test = features_tensor("x_test", test[0], dtype)
        y_test = targets_tensor("y_test", test[1], int(x_test.shape[0]), loss_fn, outputs, dtype)
    metrics = dict(metrics or {})
    if metrics and test is None:
        raise ValueError(f"metrics {sorted(metrics)} need a test set: pass test=(x_test, y_test)")
    _trial_step(model, loss_fn, x, y)
    sigma = _resolve_sigma(spec.name, epsilon=epsilon, sigma=sigma, rounds=rounds, delta=delta, q=q)
    chosen = {"local_lr": local_lr, "global_lr": global_lr, "clip": clip, "local_epochs": local_epochs,
              "batch_size": batch_size}
    # Hyperparameters checks each value's type and range
    values: dict[str, Any] = {name: DEFAULTS[name] if value is None else value for name, value in chosen.items()}
    unused = {"ULDP-SGD": ("local_lr", "local_epochs"), "DEFAULT": ("clip",)}.get(spec.family, ())
    hp = Hyperparameters(global_lr=values["global_lr"], local_lr=None if "local_lr" in unused else values["local_lr"],
                         local_epochs=None if "local_epochs" in unused else values["local_epochs"],
                         batch_size=values["batch_size"], clip=None if "clip" in unused else values["clip"],
                         sigma=sigma, delta=delta, q=q)
    allocation = Allocation(users, silos, len(user_labels), len(silo_labels), scheme="given", seed=seed)
    federation = Federation(model=model, loss_fn=loss_fn.trained, x=x, y=y, allocation=allocation)
    root = np.random.SeedSequence(seed)
    made = make_method(spec.name, hp)
    federation = made.prepare(federation, seed_stream(root, PREPARE_STREAM))
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
    return model, History(rows=rows, sigma=sigma, delta=delta, users=user_labels, silos=silo_labels,
                          resumed_from=resumed, info={"parameters": int(params.numel()), "records": n,
                                                      "hyperparameters": hp})
