"""What :func:`uldp.fit` and a Flower silo (:mod:`uldp.flower`) make of your inputs: torch losses in the library's
weighted-loss interface, the model check before training, records as checked tensors (:func:`resolve_records`, the
one place both resolve them), raw ids numbered ``0..K-1``, and the hyperparameters a method takes by default
(:func:`resolve_hyperparameters`).

Standard torch losses are adapted to the library's weighted-loss interface ``(outputs, targets, weight)`` by
:func:`weighted_loss`; modules that per-user training (``torch.func.vmap`` over users) cannot run are refused
before training by :func:`check_module`, naming the layer and what to use instead.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from uldp.method_names import parse_method
from uldp.methods.base import Hyperparameters
from uldp.methods.registry import method_defaults, unused_hyperparameters
from uldp.training.per_user import flat_parameters, record_keys, train_users

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
            raise ValueError(
                "a loss callable (outputs, targets) must return per-record losses [n], got a scalar; "
                "use reduction='none'"
            )
        if per_record.ndim > 1:  # one loss per record: the mean over what lies past its first axis
            per_record = per_record.flatten(start_dim=1).mean(dim=-1)
        # an empty batch (DP-SGD's Poisson sampling draws one now and then) is a loss of 0
        return _weighted_mean(per_record, weight)

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
    functions = {
        F.cross_entropy: nn.CrossEntropyLoss,
        F.binary_cross_entropy_with_logits: nn.BCEWithLogitsLoss,
        F.mse_loss: nn.MSELoss,
    }
    if loss in functions:
        loss = functions[loss]()
    if isinstance(loss, nn.modules.loss._Loss):
        if loss.reduction != "mean":
            raise ValueError(
                f"loss reduction must be 'mean' (the library averages over each user's records), "
                f"got {loss.reduction!r}"
            )
        if isinstance(loss, nn.CrossEntropyLoss):
            if loss.weight is not None or loss.ignore_index != -100:
                raise ValueError(
                    "nn.CrossEntropyLoss with class weights or ignore_index is not supported; "
                    "use nn.CrossEntropyLoss() or a per-record callable (outputs, targets) -> [n]"
                )
            return WeightedLoss(_cross_entropy(float(loss.label_smoothing)), "cross_entropy")
        if isinstance(loss, nn.BCEWithLogitsLoss):
            if loss.weight is not None:
                raise ValueError(
                    "nn.BCEWithLogitsLoss with weight is not supported (pos_weight is); "
                    "use a per-record callable (outputs, targets) -> [n]"
                )
            return WeightedLoss(_bce(loss.pos_weight), "bce")
        if isinstance(loss, nn.MSELoss):
            return WeightedLoss(_mse, "mse")
        raise ValueError(
            f"loss {type(loss).__name__} is not adapted automatically; use nn.CrossEntropyLoss, "
            "nn.BCEWithLogitsLoss, nn.MSELoss or a callable (outputs, targets) -> [n] per-record losses"
        )
    if not callable(loss):
        raise ValueError(f"loss must be a torch loss or a callable, got {type(loss).__name__}")
    positional = [
        p
        for p in inspect.signature(loss).parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    required = [p for p in positional if p.default is inspect.Parameter.empty]
    if len(required) == 3 or (
        len(required) == 2 and len(positional) >= 3 and positional[2].name == "weight"
    ):
        return WeightedLoss(loss, "custom", weighted=True)
    if len(required) == 2:
        return WeightedLoss(loss, "custom")
    raise ValueError(
        f"a loss callable takes (outputs, targets) -> [n] per-record losses or (outputs, targets, "
        f"weight) -> weighted mean; {getattr(loss, '__name__', loss)!r} takes {len(required)} arguments"
    )


# ---------------------------------------------------------------------------------------------------- module --
#: Layers per-user training cannot run, and what to use instead (checked before training, like Opacus'
#: ``ModuleValidator``). Training vmaps every user's copy of the model over a batch of that user's records alone.
_REPLACEMENTS: tuple[tuple[type, str], ...] = (
    (
        nn.modules.batchnorm._BatchNorm,
        (
            "batch normalisation mixes records of a batch and updates running statistics "
            "in place, which per-user training (torch.func.vmap over users) cannot keep "
            "per user; use nn.GroupNorm(num_groups, num_channels) or nn.LayerNorm instead"
        ),
    ),
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
            problems.append(
                f"layer {name!r} ({type(module).__name__}): track_running_stats=True updates running "
                "statistics in place; set track_running_stats=False or use nn.GroupNorm"
            )
    if problems:
        raise UnsupportedModuleError("the model cannot be trained per user: " + "; ".join(problems))
    if not any(p.requires_grad for p in model.parameters()):
        raise UnsupportedModuleError("the model has no trainable parameter (requires_grad=True)")


def trial_step(model: nn.Module, loss_fn: WeightedLoss, x: Tensor, y: Tensor) -> None:
    """One per-user step of two users on the first records: any other layer vmap cannot run fails here, by name."""
    take = min(2, x.shape[0])
    try:
        with torch.random.fork_rng(devices=[]):  # leave every draw of training to the run's seed
            train_users(
                model,
                flat_parameters(model),
                x[:take],
                y[:take],
                [np.array([i]) for i in range(take)],
                loss_fn=loss_fn,
                local_lr=1e-3,
                epochs=1,
                batch_size=1,
                keys=record_keys(take, 1, torch.Generator().manual_seed(0)),
            )
    except (RuntimeError, TypeError, NotImplementedError, IndexError) as error:
        raise UnsupportedModuleError(
            f"the model or loss fails per-user training (torch.func.vmap over users of torch.func.grad): "
            f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''} -- layers must not update "
            "buffers in place or call .item(); losses must use pure tensor ops"
        ) from error


# ------------------------------------------------------------------------------------------------------ data --
def _pandas_array(name: str, value: Any) -> np.ndarray | None:
    """A pandas DataFrame or Series as an array (None for anything else): every non-numeric column named in the
    error; bool and nullable columns (pandas' ``boolean``, ``Int64``) as float64, their missing values as NaN."""
    if type(value).__module__.split(".")[0] != "pandas":
        return None
    import pandas as pd  # a core dependency; imported here so that tensors and arrays never need it

    frame = value if isinstance(value, pd.DataFrame) else pd.DataFrame(value)
    types = {str(column): kind for column, kind in frame.dtypes.items()}
    bad = [
        f"{column!r} ({kind})"
        for column, kind in types.items()
        if not (pd.api.types.is_numeric_dtype(kind) or pd.api.types.is_bool_dtype(kind))
    ]
    if bad:
        raise ValueError(
            f"{name} has non-numeric column(s) {', '.join(bad)}: encode them as numbers first "
            "(one-hot or category codes)"
        )
    plain = all(isinstance(kind, np.dtype) and kind.kind in "iuf" for kind in types.values())
    return np.asarray(value.to_numpy() if plain else value.astype("float64").to_numpy())


def _numeric_tensor(name: str, value: Any, *, bools: torch.dtype = torch.int64) -> Tensor:
    """``value`` (tensor, array, DataFrame, list) as a tensor; refuses non-numeric dtypes by name; bools (numpy,
    pandas or torch) become ``bools`` (0/1)."""
    if isinstance(value, Tensor):
        tensor = value.detach().cpu()
    else:
        array = _pandas_array(name, value)
        array = np.asarray(value) if array is None else array
        if array.dtype.kind not in "biuf":
            raise ValueError(f"{name} must be numeric (float or integer), got dtype {array.dtype}")
        array = np.ascontiguousarray(array)
        # a read-only array (pandas' copy-on-write, np.load's memory maps, broadcast views) is copied: torch can only
        # share writable memory, and warns otherwise
        tensor = torch.from_numpy(array if array.flags.writeable else array.copy())
    if tensor.dtype == torch.bool:
        tensor = tensor.to(bools)
    if tensor.dtype.is_complex:
        raise ValueError(f"{name} must be float or integer, got {tensor.dtype}")
    if tensor.ndim == 0:
        raise ValueError(f"{name} must have one row per record, got a scalar")
    if tensor.dtype.is_floating_point and not bool(torch.isfinite(tensor).all()):
        raise ValueError(
            f"{name} holds NaN or infinite values (first at flat index "
            f"{int((~torch.isfinite(tensor)).flatten().nonzero()[0])})"
        )
    return tensor


def features_tensor(name: str, value: Any, dtype: torch.dtype) -> Tensor:
    """Records ``x`` as a tensor: floating point in ``dtype``, integer inputs (token ids) kept; NaN refused."""
    tensor = _numeric_tensor(name, value, bools=dtype)
    return (
        tensor.to(dtype) if tensor.dtype.is_floating_point else tensor
    )  # integer inputs (token ids) stay


def targets_tensor(
    name: str, value: Any, n: int, loss_fn: WeightedLoss, outputs: Tensor, dtype: torch.dtype
) -> Tensor:
    """``y`` checked against the loss: class labels in ``0..C-1``, 0/1 targets, or regression targets."""
    y = _numeric_tensor(name, value)
    if y.shape[0] != n:
        raise ValueError(f"{name} has {y.shape[0]} rows, x has {n}")
    if loss_fn.kind == "cross_entropy":
        if y.dtype.is_floating_point or y.ndim != 1:
            raise ValueError(
                f"{name} must be a 1-D tensor of integer class labels for CrossEntropyLoss, got "
                f"dtype {y.dtype} and shape {tuple(y.shape)}"
            )
        n_classes = outputs.shape[-1]
        if int(y.min()) < 0 or int(y.max()) >= n_classes:
            raise ValueError(
                f"{name} labels must lie in 0..{n_classes - 1} (the model outputs {n_classes} "
                f"logits), got {int(y.min())}..{int(y.max())}"
            )
        return y.long()
    if loss_fn.kind == "bce":
        y = y.to(dtype)
        if outputs[0].numel() != 1 or y[0].numel() != 1:
            raise ValueError(
                f"BCEWithLogitsLoss needs one logit and one target per record; the model gives "
                f"{outputs[0].numel()} and {name} has {y[0].numel()}"
            )
        if bool((y < 0).any() or (y > 1).any()):
            raise ValueError(
                f"{name} must hold 0/1 targets (probabilities in [0, 1]) for BCEWithLogitsLoss, got "
                f"{float(y.min())}..{float(y.max())}"
            )
        return y.reshape(n)
    if loss_fn.kind == "mse":
        y = y.to(dtype)
        if outputs[0].numel() != y[0].numel():
            raise ValueError(
                f"MSELoss needs as many outputs as targets per record: the model gives "
                f"{outputs[0].numel()}, {name} has {y[0].numel()}"
            )
        return y
    return y.to(dtype) if y.dtype.is_floating_point else y


@dataclass(frozen=True)
class Records:
    """Training records checked against the model and the loss (:func:`resolve_records`).

    Attributes:
        x: Records ``[n, ...]``: floating point in the model's dtype (integer inputs, token ids, kept).
        y: Targets checked against the loss.
        loss: The loss in the library's interface.
        dtype: The model's parameter dtype.
        outputs: The model's outputs on the first records (what targets are checked against).
    """

    x: Tensor
    y: Tensor
    loss: WeightedLoss
    dtype: torch.dtype
    outputs: Tensor

    def held_out(
        self, x: Any, y: Any, *, names: tuple[str, str] = ("x_test", "y_test")
    ) -> tuple[Tensor, Tensor]:
        """Another set of records (a test set) checked as these were, before any training: its records must have
        the training records' shape."""
        x_checked = features_tensor(names[0], x, self.dtype)
        if tuple(x_checked.shape[1:]) != tuple(self.x.shape[1:]):
            raise ValueError(
                f"{names[0]} has records of shape {tuple(x_checked.shape[1:])}, the training records "
                f"{tuple(self.x.shape[1:])}"
            )
        return x_checked, targets_tensor(
            names[1], y, int(x_checked.shape[0]), self.loss, self.outputs, self.dtype
        )


def resolve_records(model: nn.Module, loss: Any, x: Any, y: Any) -> Records:
    """Check ``model``, ``loss`` and the records ``x, y`` as :func:`uldp.fit` and every Flower silo do.

    Args:
        model: The model (:func:`check_module`; run once in eval mode on two records, torch's generator untouched).
        loss: As :func:`weighted_loss` takes it.
        x: Records (tensor, array or DataFrame).
        y: Targets.

    Returns:
        The checked :class:`Records`.

    Raises:
        ValueError: A layer per-user training cannot run, a loss that cannot be weighted per record, no records,
            non-numeric or non-finite values, or targets the loss cannot take (each by name).
    """
    check_module(model)
    loss_fn = weighted_loss(loss)
    dtype = next(p.dtype for p in model.parameters() if p.requires_grad)
    x_checked = features_tensor("x", x, dtype)
    if x_checked.shape[0] == 0:
        raise ValueError("x has no records (0 rows); training needs at least one record")
    was_training = model.training
    try:
        with torch.no_grad(), torch.random.fork_rng(devices=[]):
            outputs = model.eval()(x_checked[:2])
    except (
        RuntimeError,
        TypeError,
        IndexError,
    ) as error:  # a first layer of another width, as a torch error
        raise ValueError(
            f"the model cannot take x's records of shape {tuple(x_checked.shape[1:])} "
            f"({x_checked.dtype}): {type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
        ) from error
    finally:
        model.train(was_training)
    y_checked = targets_tensor("y", y, int(x_checked.shape[0]), loss_fn, outputs, dtype)
    return Records(x_checked, y_checked, loss_fn, dtype, outputs)


def resolve_hyperparameters(
    method: str,
    n_silos: int,
    *,
    sigma: float | None,
    delta: float,
    q: float,
    **chosen: float | int | None,
) -> Hyperparameters:
    """The hyperparameters of ``method``: those given in ``chosen``, the method's own defaults for the rest
    (:func:`uldp.methods.method_defaults`), ``None`` for what the method does not use.

    Args:
        method: A registry name.
        n_silos: ``|S|`` (ULDP-AVG's default ``eta_g`` is per silo).
        sigma: The noise multiplier (``None``: not known yet, or DEFAULT).
        delta: Target delta.
        q: User-level sampling rate.
        chosen: ``global_lr``, ``local_lr``, ``clip``, ``local_epochs``, ``batch_size``: a value, or ``None`` for
            the default.

    Returns:
        The checked :class:`~uldp.methods.base.Hyperparameters`.

    Raises:
        ValueError: An unknown name in ``chosen``, or a bad value (by name).

    Example:
        >>> hp = resolve_hyperparameters("ULDP-AVG-w", 4, sigma=1.0, delta=1e-5, q=1.0, clip=0.5)
        >>> hp.global_lr, hp.clip
        (36.0, 0.5)
    """
    defaults = method_defaults(method).values(n_silos)
    unknown = sorted(set(chosen) - set(defaults))
    if unknown:
        raise ValueError(f"unknown hyperparameters {unknown}; allowed: {', '.join(defaults)}")
    values: dict[str, Any] = {
        name: chosen.get(name) if chosen.get(name) is not None else default
        for name, default in defaults.items()
    }
    # a value the method does not use (not in its class's REQUIRED, e.g. DEFAULT's clip) stays None
    unused = unused_hyperparameters(parse_method(method).family)
    values = {name: None if name in unused else value for name, value in values.items()}
    return Hyperparameters(
        global_lr=values["global_lr"],
        local_lr=values["local_lr"],
        local_epochs=values["local_epochs"],
        batch_size=values["batch_size"],
        clip=values["clip"],
        sigma=sigma,
        delta=delta,
        q=q,
    )


def index_ids(
    name: str, ids: Any, n: int, *, known: Iterable[Hashable] | None = None
) -> tuple[np.ndarray, tuple[Hashable, ...]]:
    """Map hashable ids to ``0..K-1`` in sorted order of the distinct ids (or of ``known``).

    Args:
        name: The argument's name (for errors).
        ids: One id per record (list, array, tensor, Series): strings, ints, bytes or tuples, of one kind.
        n: The number of records.
        known: Every id of the federation, including ids that hold no record here (they are numbered too);
            ``None``: the distinct ids of ``ids``.

    Returns:
        ``(codes int64 [n], the distinct ids in index order)``.

    Raises:
        ValueError: Not one id per record, a missing id (None or NaN), unhashable ids, ids that cannot be
            ordered together (for example str and int mixed), or an id missing from ``known``.

    Example:
        >>> index_ids("user_ids", ["bob", "ann", "bob"], 3)[0].tolist()
        [1, 0, 1]
    """
    values = ids.tolist() if hasattr(ids, "tolist") else list(ids)
    if np.ndim(values) > 1 and not all(isinstance(v, tuple) for v in values):
        raise ValueError(f"{name} must be one id per record (1-D), got shape {np.shape(values)}")
    if len(values) != n:
        raise ValueError(f"{name} has {len(values)} ids, x has {n} records")
    every_name = f"the list of every {name[:-4]} id"
    if isinstance(known, (str, bytes)):
        raise ValueError(
            f"{every_name} must be a collection of ids, not one {type(known).__name__} ({known!r})"
        )
    try:
        distinct = set(values)
        every = (
            distinct
            if known is None
            else set(known.tolist() if hasattr(known, "tolist") else known)
        )
    except TypeError as error:
        raise ValueError(
            f"{name} must be hashable values (str, int, bytes, tuple): {error}"
        ) from error
    if known is not None and any(
        v is None or (isinstance(v, float) and math.isnan(v)) for v in every
    ):
        raise ValueError(f"{every_name} holds a missing id (None or NaN)")
    unknown = distinct - every
    if unknown:
        shown = sorted(map(repr, unknown))[:5]
        raise ValueError(
            f"{name} holds {len(unknown)} id(s) missing from {every_name}, e.g. {', '.join(shown)}"
        )
    distinct = every
    if None in distinct or any(isinstance(v, float) and math.isnan(v) for v in distinct):
        raise ValueError(
            f"{name} holds a missing id (None or NaN); every record needs its {name[:-4]}"
        )
    if any(isinstance(v, (str, bytes)) and not v.strip() for v in distinct):
        raise ValueError(
            f"{name} holds an empty or blank id; every record needs its {name[:-4]}'s id"
        )
    try:
        labels = tuple(sorted(distinct))
    except TypeError as error:
        kinds = sorted({type(v).__name__ for v in distinct})
        raise ValueError(
            f"{name} mixes id types that cannot be ordered ({', '.join(kinds)}); use one type"
        ) from error
    position = {label: i for i, label in enumerate(labels)}
    return np.fromiter((position[v] for v in values), dtype=np.int64, count=n), labels
