"""The one call :func:`fit`: a user's model, records and ids in, a trained copy and its :class:`History` out.

It resolves the inputs (:mod:`uldp.fitting.inputs`) into a federation and trains it with
:func:`~uldp.fitting.rounds.prepare_method` and :func:`~uldp.fitting.rounds.train_rounds`; the package
:mod:`uldp.fitting` re-exports it (its docstring says what the call guarantees). The module is not named ``fit``:
a submodule ``uldp.fitting.fit`` would become the package's attribute ``fit`` once imported and shadow the function.
"""

from __future__ import annotations

import copy
import hashlib
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import Tensor, nn

from uldp.accounting import epsilon_for_method
from uldp.common.checks import check_integer, check_number, check_positive
from uldp.common.persist import fields_fingerprint
from uldp.data.base import Allocation
from uldp.fitting.clipping import ClipWarning, clip_advice, update_norms
from uldp.fitting.federation_checks import FederationWarning, federation_warnings
from uldp.fitting.inputs import (
    Metric,
    index_ids,
    resolve_hyperparameters,
    resolve_records,
    trial_step,
)
from uldp.fitting.rounds import (
    CLIP_ADVICE_STREAM,
    prepare_method,
    train_rounds,
)
from uldp.methods.base import Federation, needed, parse_method, seed_stream
from uldp.training.device import (
    check_precision_for,
    device_settings,
    resolve_device,
    warn_if_slower,
)
from uldp.training.per_user import flat_parameters, load_flat_parameters

if TYPE_CHECKING:
    from collections.abc import Hashable, Iterable, Mapping


class SeedWarning(UserWarning):
    """:func:`fit` was given a seed: its noise is reproducible, so the guarantee assumes the seed stays secret."""


def _root_seed(seed: int | None) -> np.random.SeedSequence:
    """The run's root: OS entropy (``seed=None``), or ``seed`` with a :class:`SeedWarning` (research and tests)."""
    if seed is None:
        return np.random.SeedSequence()  # entropy from the OS (secrets.randbits(128))
    seed = check_integer("seed", seed, minimum=0)
    warnings.warn(
        f"seed={seed} makes the noise reproducible: the user-level guarantee then holds only while the seed "
        "stays secret (whoever knows it and the other users' records can re-run fit with and without a "
        "user and compare exactly). Leave seed=None for a model you release.",
        SeedWarning,
        stacklevel=3,
    )
    return np.random.SeedSequence(seed)


@dataclass(frozen=True, repr=False)
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
        info: ``parameters``, ``records``, ``hyperparameters`` (those used, defaults filled in) and
            ``update_norms``: the 10/50/90% quantiles of the norms the clipping bound met at the initial model
            (:mod:`uldp.fitting.clipping`; run on public or proxy records, they choose ``clip`` for free).

    Its ``repr`` counts users and silos but never shows their ids (ids can be protected health information).
    """

    rows: list[dict]
    sigma: float | None
    delta: float
    users: tuple[Hashable, ...]
    silos: tuple[Hashable, ...]
    resumed_from: int = 0
    info: dict = field(default_factory=dict)

    def __repr__(self) -> str:
        return (
            f"History({len(self.rows)} rounds, epsilon={self.epsilon}, sigma={self.sigma}, delta={self.delta}, "
            f"{len(self.users)} users, {len(self.silos)} silos, resumed_from={self.resumed_from})"
        )

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
        raise ValueError(
            f"{spec.name} needs exactly one of epsilon (a target) or sigma (a noise multiplier); got "
            f"epsilon={epsilon!r}, sigma={sigma!r}"
        )
    if epsilon is None:  # exactly one of them is given: sigma
        return check_positive("sigma", sigma)
    check_positive("epsilon", epsilon)
    return None


#: The record-level baseline of :func:`fit`: DP-SGD in each silo on every record (ULDP-GROUP-max: ``k`` is the most
#: records of any user, so no record is dropped), its target epsilon record-level.
RECORD_LEVEL = "DP-SGD"


def _digest(*arrays: Any) -> str:
    """SHA-256 of the bytes of tensors and arrays (what a checkpoint's data must match)."""
    h = hashlib.sha256()
    for array in arrays:
        data = array.detach().cpu().numpy() if isinstance(array, Tensor) else np.asarray(array)
        h.update(str((data.dtype, data.shape)).encode())
        h.update(np.ascontiguousarray(data).tobytes())
    return h.hexdigest()


def fit(
    model: nn.Module,
    x: Any,
    y: Any,
    *,
    user_ids: Any,
    silo_ids: Any,
    loss: Any,
    method: str = "ULDP-AVG-w",
    epsilon: float | None = None,
    sigma: float | None = None,
    delta: float = 1e-5,
    rounds: int = 10,
    q: float = 1.0,
    metrics: Mapping[str, Metric] | None = None,
    test: tuple[Any, Any] | None = None,
    seed: int | None = None,
    checkpoint: str | Path | None = None,
    progress: bool = False,
    local_lr: float | None = None,
    global_lr: float | None = None,
    clip: float | None = None,
    local_epochs: int | None = None,
    batch_size: int | None = None,
    checkpoint_seconds: float = 60.0,
    all_user_ids: Iterable[Hashable] | None = None,
    accountant: str = "rdp",
    device: str | torch.device = "cpu",
    precision: str = "float32",
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
            ``"ULDP-NAIVE"``, ``"ULDP-GROUP-<k>"``, ``"DEFAULT"`` (no privacy) ...; or ``"DP-SGD"``
            (:data:`RECORD_LEVEL`), the record-level baseline: DP-SGD in each silo on every record (ULDP-GROUP
            without filtering), its ``epsilon`` target record-level. For every ULDP-GROUP method each row also
            has ``record_epsilon`` (DP-SGD's own guarantee) beside the user-level ``epsilon`` (group privacy over
            the ``k`` records kept per user, Theorem 2).
        epsilon: Target epsilon after ``rounds`` rounds (user-level; record-level for ``"DP-SGD"``), solved for
            sigma with the method's accountant; a target no sigma reaches is refused before training, saying why.
            Or give ``sigma``.
        sigma: Noise multiplier; or give ``epsilon``.
        delta: Target delta.
        rounds: Rounds ``T``.
        q: User-level Poisson sampling rate per round (ULDP-SGD/AVG, Algorithm 4).
        metrics: ``{name: fn(outputs, y_test) -> float}`` (or a one-element tensor) computed on the test set after
            every round.
        test: Optional held-out ``(x_test, y_test)``; without it the history has no loss (a loss on the training
            records would be a release that the privacy guarantee does not cover).
        seed: ``None`` (the default): every random draw (user sampling, record order, dropout, noise) comes from
            OS entropy. An integer makes the run reproducible (research, tests) and warns (:class:`SeedWarning`):
            the guarantee then assumes the seed stays secret.
        checkpoint: File to resume from and save to after rounds (atomic; tied to these arguments and data, but not
            to ``rounds``: with the same ``sigma`` a finished run's checkpoint continues into a longer one).
        progress: Show a progress bar (tqdm, stderr).
        local_lr: ``eta_l``.
        global_lr: ``eta_g`` (ULDP-AVG's step divides by ``q |U| |S|``, FedAvg's by ``|S|``).
        clip: ``C`` (see :mod:`uldp.fitting.clipping` for choosing it without spending the budget).
        local_epochs: ``Q``.
        batch_size: Local mini-batch size.

            Unset, each takes the method's own default (:func:`uldp.methods.method_defaults`: for ULDP-AVG(-w)
            ``eta_g = 9 |S|``, ``eta_l = 0.1``, ``C = 1``, ``Q = 5``; for DEFAULT ``eta_g = 1``, ``eta_l = 0.01``,
            ``Q = 5``; batches of 64), not the paper's per-dataset values (:mod:`uldp.defaults`).
        checkpoint_seconds: Save the checkpoint at most this often (and after the last round).
        accountant: ``"rdp"`` (the paper's) or ``"pld"`` (for ULDP-GROUP-k the mixture-of-Gaussians accountant
            of a k-record group, tighter than RDP's group conversion: :mod:`uldp.accounting.pld`).
        device: Where to train: ``"cpu"`` (the default), ``"cuda"`` or ``"cuda:<index>"``
            (:func:`uldp.training.device.resolve_device`). The model and the records are moved there once; every
            method trains there. The noise, the user sample and the record order are drawn on the CPU from the
            run's generators exactly as on a CPU run and moved once per round (the guarantee rests on the same
            secret root seed, see :func:`uldp.methods.base.gaussian_noise`); only dropout masks come from the
            device's generator. A GPU run equals the CPU run within float tolerance for a model without dropout
            (``tests/test_gpu.py``). A checkpoint resumes on the device it was written on.
        precision: ``"float32"`` (the default; on CUDA with TF32 off), ``"tf32"`` (CUDA's TF32 matmuls and
            convolutions) or ``"bf16"`` (bfloat16 autocast for the local training's forward and backward passes;
            not for ULDP-GROUP-k and DP-SGD, whose per-record clipping runs in float32; on the CPU it warns,
            :class:`uldp.training.device.PrecisionWarning`: usually slower than float32 there).

    Returns:
        ``(trained copy of model, History)``; the copy lives on ``device``.

    Raises:
        ValueError: Bad ids, shapes, dtypes or labels, an unknown method, bad hyperparameters, both or neither of
            epsilon and sigma, an unknown or unavailable device or precision; :class:`UnsupportedModuleError` (a
            ValueError) for a layer per-user training cannot run, naming it and its replacement.

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
    record_level = method == RECORD_LEVEL
    spec = parse_method("ULDP-GROUP-max" if record_level else method)
    target = resolve_device(device)
    check_precision_for(spec.family, precision)
    warn_if_slower(target, precision)
    rounds = check_integer("rounds", rounds)
    root = _root_seed(seed)
    check_number("checkpoint_seconds", checkpoint_seconds, at_least=0)
    if checkpoint is not None and not Path(checkpoint).parent.is_dir():
        raise ValueError(
            f"checkpoint={str(checkpoint)!r}: its directory {str(Path(checkpoint).parent)!r} does not "
            "exist; create it or give another path"
        )
    model = copy.deepcopy(model).cpu()  # checked on the CPU, then trained on the target device
    records = resolve_records(model, loss, x, y)
    loss_fn, x, y = records.loss, records.x, records.y
    n = int(x.shape[0])
    users, user_labels = index_ids("user_ids", user_ids, n, known=all_user_ids)
    silos, silo_labels = index_ids("silo_ids", silo_ids, n)
    if test is not None:
        if not isinstance(test, (tuple, list)) or len(test) != 2:
            raise ValueError("test must be a pair (x_test, y_test)")
        x_test, y_test = records.held_out(*test)
    metrics = dict(metrics or {})
    if metrics and test is None:
        raise ValueError(f"metrics {sorted(metrics)} need a test set: pass test=(x_test, y_test)")
    trial_step(model, loss_fn, x, y)
    sigma = _check_sigma(spec.name, epsilon=epsilon, sigma=sigma)
    hp = resolve_hyperparameters(
        spec.name,
        len(silo_labels),
        sigma=sigma,
        delta=delta,
        q=q,
        local_lr=local_lr,
        global_lr=global_lr,
        clip=clip,
        local_epochs=local_epochs,
        batch_size=batch_size,
    )
    # the caller gives the allocation: no seed reproduces it (-1)
    allocation = Allocation(
        users, silos, len(user_labels), len(silo_labels), scheme="given", seed=-1
    )
    federation = Federation(
        model=model, loss_fn=loss_fn.trained, x=x, y=y, allocation=allocation, precision=precision
    )
    hp, made, federation = prepare_method(
        spec.name,
        hp,
        federation,
        root,
        epsilon=epsilon,
        rounds=rounds,
        accountant=accountant,
        record_level=record_level,
    )
    federation = federation.to(target)  # the model and the records, once
    params = flat_parameters(model)
    for (
        finding
    ) in federation_warnings(  # issue 42: before any training (uldp.fitting.federation_checks)
        dict(
            zip(
                map(str, silo_labels),
                np.bincount(silos, minlength=len(silo_labels)).tolist(),
                strict=True,
            )
        ),
        len(user_labels),
        delta=delta,
        sigma=hp.sigma,
        q=hp.q,
        parameters=int(params.numel()),
        rounds=rounds,
    ):
        warnings.warn(finding, FederationWarning, stacklevel=2)
    with device_settings(target, precision):
        norms = update_norms(made, federation, params, seed_stream(root, CLIP_ADVICE_STREAM))
    advice = clip_advice(hp.clip, norms, what=spec.capabilities.clipped)
    if advice is not None:
        warnings.warn(advice, ClipWarning, stacklevel=2)

    def evaluate(flat: Tensor) -> dict:
        if test is None:
            return {}
        load_flat_parameters(model, flat)
        was_training = model.training
        model.eval()
        with torch.no_grad():  # forward on the device, the loss and metrics on the CPU (as given)
            out = torch.cat([model(chunk.to(target)).cpu() for chunk in torch.split(x_test, 2048)])
        model.train(was_training)
        return {
            "loss": float(loss_fn(out, y_test)),
            **{name: float(fn(out, y_test)) for name, fn in metrics.items()},
        }

    # one digest per argument, so that a mismatched resume names them; rounds stay out: a checkpoint of a shorter
    # run with the same sigma continues into a longer one
    fingerprint = fields_fingerprint(
        {
            "method": spec.name,
            **{
                name: getattr(hp, name)
                for name in (
                    "global_lr",
                    "local_lr",
                    "clip",
                    "local_epochs",
                    "batch_size",
                    "sigma",
                    "delta",
                    "q",
                )
            },
            # the seed with the records: a small integer alone could be found from its digest in the file
            "seed": (seed, _digest(x, y, users)),
            "x": _digest(x),
            "y": _digest(y),
            "user_ids": (user_labels, _digest(users)),
            "silo_ids": (silo_labels, _digest(silos)),
            "model": _digest(params),
            "test": None if test is None else _digest(x_test, y_test),
            "metrics": sorted(metrics),
            "accountant": accountant,
            # later fields, in the digest only when set otherwise (earlier checkpoints still resume): a checkpoint
            # resumes on the device and in the precision it was written in (their floats differ from the CPU's)
            **({"device": str(target)} if target.type != "cpu" else {}),
            **({"precision": precision} if precision != "float32" else {}),
        }
    )
    with device_settings(target, precision):
        params, rows, resumed = train_rounds(
            made,
            federation,
            params,
            rounds=rounds,
            root=root,
            evaluate=evaluate,
            checkpoint=checkpoint,
            fingerprint=fingerprint,
            checkpoint_seconds=checkpoint_seconds,
            progress=progress,
            description=method,
            checkpoint_option="checkpoint=",
            accountant=accountant,
        )
    if (
        spec.capabilities.group_privacy
    ):  # DP-SGD's own record-level guarantee beside the user-level one
        arguments = {**made.accounting_arguments(federation), "k": 1}
        rows = [
            {
                **row,
                "record_epsilon": float(
                    epsilon_for_method(
                        spec.name,
                        sigma=needed(hp.sigma, "sigma"),
                        rounds=row["round"],
                        delta=delta,
                        accountant=accountant,
                        **arguments,
                    ).epsilon
                ),
            }
            for row in rows
        ]
    load_flat_parameters(model, params)
    model.train()
    return model, History(
        rows=rows,
        sigma=hp.sigma,
        delta=delta,
        users=user_labels,
        silos=silo_labels,
        resumed_from=resumed,
        info={
            "parameters": int(params.numel()),
            "records": n,
            "hyperparameters": hp,
            "update_norms": {f"{p}%": float(np.percentile(norms, p)) for p in (10, 50, 90)}
            if norms.size
            else {},
        },
    )
