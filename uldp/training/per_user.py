"""Local training of every user of a silo at once (the per-user loops of Algorithm 3, ULDP-AVG / ULDP-SGD).

ULDP-AVG trains one model copy per user and silo (Algorithm 3, lines 9-17): ``Q`` epochs of plain SGD over the
user's own records in the silo, in mini-batches of the local batch size. Doing this user by user costs ``|U|`` small
Python loops per silo and round; here all users of a silo train together. Each user's records are padded to a common
length with a 0/1 mask, the per-user parameters are stacked along a leading user axis, and one step of every user is
``torch.func.vmap`` over ``torch.func.grad`` of ``torch.func.functional_call`` or, for the paper's models, one
batched step of their hand-written gradients (:mod:`uldp.training.closed_form`), updated in place. Users are sorted
by record count and processed in chunks, which bounds memory and keeps padding small when counts are skewed (Zipf
allocations).

Both engines draw the order of records from the same per-record random keys (one key per record and epoch, sorted
within each user), so :func:`train_users` (fast) and :func:`train_users_loop` (the plain per-user loop kept as the
oracle and the benchmark's baseline) take identical mini-batches; they agree to float precision whenever the model
itself is deterministic (no dropout).

Convolutions: ``vmap`` over ``conv2d`` with per-user weights becomes a grouped convolution in native contiguous
kernels, which is slow on a CPU. The MNIST CNN's closed form (:mod:`uldp.training.cnn`) runs the same grouped
convolutions in oneDNN's channels-last kernels instead; for other CNNs, :mod:`uldp.training.unfold` computes each
convolution as im2col and one matmul, which ``vmap`` turns into one batched matmul.
``benchmarks/per_user_training.py`` measures all three.
"""

from __future__ import annotations

import contextlib
import copy
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.func import functional_call, grad, vmap

from uldp.common.checks import check_integer, check_positive
from uldp.training import closed_form as closed_forms
from uldp.training.chunks import chunk_floats_for, padded_indices, per_record_floats, user_chunks
from uldp.training.device import autocast, device_settings

#: A loss ``(outputs, targets, weight) -> weighted mean loss`` (see :func:`uldp.models.loss_function`).
LossFunction = Callable[[Tensor, Tensor, Tensor | None], Tensor]


@dataclass(frozen=True)
class ParameterLayout:
    """How a module's trainable parameters map to one flat vector of length :attr:`size`.

    Attributes:
        names: Parameter names in ``named_parameters`` order.
        shapes: Their shapes.
    """

    names: tuple[str, ...]
    shapes: tuple[tuple[int, ...], ...]

    @classmethod
    def of(cls, model: nn.Module) -> ParameterLayout:
        """Return the layout of ``model``'s trainable parameters."""
        named = [(name, tuple(p.shape)) for name, p in model.named_parameters() if p.requires_grad]
        return cls(tuple(name for name, _ in named), tuple(shape for _, shape in named))

    @property
    def size(self) -> int:
        """Number of scalars ``d`` in the flat vector."""
        return sum(math.prod(shape) for shape in self.shapes)

    def flatten(self, params: Mapping[str, Tensor], batch_dims: int = 0) -> Tensor:
        """Concatenate ``params`` (each with ``batch_dims`` leading axes) into ``[..., d]``."""
        return torch.cat(
            [params[name].flatten(start_dim=batch_dims) for name in self.names], dim=-1
        )

    def unflatten(self, flat: Tensor) -> dict[str, Tensor]:
        """Split ``flat`` of shape ``[..., d]`` into named tensors of shape ``[..., *shape]``."""
        if flat.shape[-1] != self.size:
            raise ValueError(
                f"flat vector has {flat.shape[-1]} entries, the layout needs {self.size}"
            )
        pieces = torch.split(flat, [math.prod(shape) for shape in self.shapes], dim=-1)
        lead = tuple(flat.shape[:-1])
        return {
            name: piece.reshape(lead + shape)
            for name, piece, shape in zip(self.names, pieces, self.shapes, strict=True)
        }


def flat_parameters(model: nn.Module) -> Tensor:
    """Return a detached copy of ``model``'s trainable parameters as one flat vector."""
    layout = ParameterLayout.of(model)
    return layout.flatten(dict(model.named_parameters())).detach().clone()


def load_flat_parameters(model: nn.Module, flat: Tensor) -> None:
    """Copy the flat vector ``flat`` into ``model``'s trainable parameters (in place)."""
    params = ParameterLayout.of(model).unflatten(flat)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name in params:
                param.copy_(params[name])


@contextlib.contextmanager
def _without_onednn() -> Iterator[None]:
    """Use PyTorch's native CPU kernels instead of oneDNN's inside the block (restored afterwards)."""
    previous = torch.backends.mkldnn.enabled
    torch.backends.mkldnn.enabled = False  # type: ignore[assignment]  # torch's stubs type the flag as its ContextProp
    try:
        yield
    finally:
        torch.backends.mkldnn.enabled = previous


def record_keys(n_records: int, epochs: int, generator: torch.Generator) -> Tensor:
    """Random keys ``[epochs, n_records]`` in [0, 1): each user visits its records in increasing key order."""
    return torch.rand((epochs, n_records), generator=generator)


def _check_groups(groups: Sequence[np.ndarray], n_records: int) -> list[np.ndarray]:
    checked = [np.asarray(g, dtype=np.int64) for g in groups]
    if any(g.size == 0 for g in checked):
        raise ValueError("every user group must hold at least one record index")
    flat = np.concatenate(checked) if checked else np.zeros(0, dtype=np.int64)
    if flat.size and (
        flat.min() < 0 or flat.max() >= n_records
    ):  # all groups at once, then name the first bad one
        bad = next(g for g in checked if g.min() < 0 or g.max() >= n_records)
        raise ValueError(
            f"record indices must lie in [0, {n_records}), got {bad.min()}..{bad.max()}"
        )
    return checked


def _make_user_grad(model: nn.Module, loss_fn: LossFunction, params_batched: bool) -> Callable:
    """``vmap`` over users of the gradient of one user's weighted mean loss."""

    def user_loss(params: dict[str, Tensor], x: Tensor, y: Tensor, weight: Tensor) -> Tensor:
        return loss_fn(functional_call(model, params, (x,)), y, weight)

    return vmap(
        grad(user_loss), in_dims=(0 if params_batched else None, 0, 0, 0), randomness="different"
    )


#: Receives one chunk of users' results: ``(rows, values)``, ``values[i]`` the result of ``groups[rows[i]]``.
ChunkConsumer = Callable[[np.ndarray, Tensor], None]


def train_users(
    model: nn.Module,
    params: Tensor,
    x: Tensor,
    y: Tensor,
    groups: Sequence[np.ndarray],
    *,
    loss_fn: LossFunction,
    local_lr: float,
    epochs: int,
    batch_size: int,
    keys: Tensor,
    chunk_floats: int | None = None,
    dropout_generators: Sequence[torch.Generator] | None = None,
    precision: str = "float32",
) -> Tensor:
    """:func:`train_user_chunks` keeping every chunk: ``[len(groups), d]`` deltas, row ``u`` for ``groups[u]``.

    Args and Raises: as :func:`train_user_chunks`, which a caller that needs less than every user's delta at once
    (a weighted sum) calls instead, holding one chunk of deltas at a time.
    """
    deltas = torch.zeros((len(groups), params.numel()), dtype=params.dtype, device=params.device)
    train_user_chunks(
        model,
        params,
        x,
        y,
        groups,
        consume=row_writer(deltas),
        loss_fn=loss_fn,
        local_lr=local_lr,
        epochs=epochs,
        batch_size=batch_size,
        keys=keys,
        chunk_floats=chunk_floats,
        dropout_generators=dropout_generators,
        precision=precision,
    )
    return deltas


def row_writer(target: Tensor) -> ChunkConsumer:
    """A :data:`ChunkConsumer` that writes each chunk's values into its rows of ``target``."""

    def write(rows: np.ndarray, values: Tensor) -> None:
        target[torch.from_numpy(rows).to(target.device)] = values

    return write


def train_user_chunks(
    model: nn.Module,
    params: Tensor,
    x: Tensor,
    y: Tensor,
    groups: Sequence[np.ndarray],
    *,
    consume: ChunkConsumer,
    loss_fn: LossFunction,
    local_lr: float,
    epochs: int,
    batch_size: int,
    keys: Tensor,
    chunk_floats: int | None = None,
    dropout_generators: Sequence[torch.Generator] | None = None,
    precision: str = "float32",
) -> None:
    """Train one model copy per user on that user's records and hand each chunk of users' deltas to ``consume``.

    Implements lines 10-15 of Algorithm 3 (ULDP-AVG) for all users of one silo at once: starting from the global
    model ``params``, user ``u`` runs ``epochs`` epochs of SGD with learning rate ``local_lr`` over its records
    ``groups[u]`` in mini-batches of ``batch_size`` (the last one smaller), in the order given by ``keys``, and
    returns ``Delta_u = x_u - x_t`` (local minus global). With a single group holding all of a silo's records this is
    the silo-level local training of FedAvg, ULDP-NAIVE (Algorithm 1) and DEFAULT.

    Args:
        model: The architecture (its current parameters are ignored; its mode, train or eval, is used).
            (:func:`~uldp.training.unfold.vmap_friendly` ``(model)`` computes convolutions as im2col matmuls; plain
            vmap measured faster.)
            A model with hand-written gradients (:func:`uldp.training.closed_form.for_model`: the linear medical
            models, the Creditcard MLP) takes them instead of autograd.
        params: Global model, flat ``[d]`` (see :class:`ParameterLayout`).
        x: The silo's records ``[n, ...]``.
        y: Their targets ``[n, ...]``.
        groups: Per user, the indices into ``x`` of that user's records (each non-empty).
        consume: Called once per chunk of users, in no promised order, with ``(rows, deltas)``: ``deltas[i]`` is the
            delta of ``groups[rows[i]]``. Every user is in exactly one chunk, so memory holds one chunk's deltas
            (the chunks fit ``chunk_floats``), not ``[len(groups), d]``. Called outside any autocast.
        loss_fn: Weighted mean loss ``(outputs, targets, weight)`` written with pure tensor ops.
        local_lr: Local learning rate ``eta_l`` > 0.
        epochs: Number of local epochs ``Q`` >= 1.
        batch_size: Local mini-batch size >= 1.
        keys: ``[epochs, n]`` random keys from :func:`record_keys` that fix the order of records.
        chunk_floats: Bound on the floats one chunk of users may use (``None``: :func:`chunk_floats_for` the device).
        dropout_generators: One generator per group (on the records' device) for the dropout draws of a closed-form
            model (group ``g`` then draws exactly what it would draw trained alone with torch's global generator in
            that state, so silos trained together equal silos trained one by one); ``None``: torch's global
            generator.
        precision: ``"float32"``, ``"tf32"`` or ``"bf16"``: the forward and backward passes under bfloat16
            autocast, through ``vmap(grad(...))`` (the closed forms are float32 only). On CUDA the call applies
            :func:`uldp.training.device.device_settings` for it (TF32 only for ``"tf32"``: torch's own default lets
            cuDNN use TF32, which a first H200 run measured at 6.5e-3 from the CPU's MNIST deltas).

    Every tensor is computed on the device of ``params``, ``x``, ``y`` and ``keys`` (one device for all).

    Raises:
        ValueError: On an empty group, an out-of-range index, a bad learning rate, epoch count or batch size, or
            dropout generators for a model without closed-form gradients or not one per group.
    """
    _check_training_arguments(local_lr, epochs, batch_size, keys, x)
    groups = _check_groups(groups, x.shape[0])
    closed_form = closed_forms.for_model(model, loss_fn, precision)
    if dropout_generators is not None and (
        closed_form is None or len(dropout_generators) != len(groups)
    ):
        raise ValueError(
            f"dropout_generators needs a model with closed-form gradients and one generator per group; "
            f"got {len(dropout_generators)} for {len(groups)} groups of a {type(model).__name__}"
        )
    if len(groups) == 1 and closed_form is None:
        # One model copy (silo-level training of DEFAULT / ULDP-NAIVE): nothing to batch over, and plain autograd
        # costs about a fifth of vmap(grad(...)) per step. Same mini-batches, so the same result.
        with device_settings(params.device, precision), autocast(params.device, precision):
            delta = train_users_loop(
                model,
                params,
                x,
                y,
                groups,
                loss_fn=loss_fn,
                local_lr=local_lr,
                epochs=epochs,
                batch_size=batch_size,
                keys=keys,
            )
        consume(np.zeros(1, dtype=np.int64), delta)
        return
    layout = ParameterLayout.of(model)
    device = params.device
    global_params = layout.unflatten(params.detach())
    sgd_step_: Callable[
        [dict[str, Tensor], Tensor, Tensor, Tensor, float, closed_forms.Uniforms | None], None
    ]
    if closed_form is not None:
        sgd_step_ = closed_form.sgd_step_
    else:
        user_grad = _make_user_grad(model, loss_fn, params_batched=True)

        def autograd_step_(
            params: dict[str, Tensor],
            x: Tensor,
            y: Tensor,
            weight: Tensor,
            lr: float,
            uniforms: closed_forms.Uniforms | None,
        ) -> None:  # uniforms: always None (no closed form)
            closed_forms.descend_(params, user_grad(params, x, y, weight), lr)

        sgd_step_ = autograd_step_

    per_record = per_record_floats(model, x)
    width = lambda n: min(batch_size, n)  # noqa: E731 - the batch width a chunk with n_max records needs
    floats_per_user = lambda n: 3 * layout.size + n * x[0].numel() + width(n) * per_record  # noqa: E731
    chunk_floats = chunk_floats_for(device) if chunk_floats is None else chunk_floats
    # oneDNN's grouped convolution in contiguous layout (what vmap over users makes of a conv) lost precision in
    # float32 (3.7e-5 against the float64 result on MNIST deltas of size 1e-2, the native kernel 1e-6) and was no
    # faster at 1000 users; the closed-form CNN calls oneDNN in channels-last layout itself (uldp.training.cnn).
    # Under bfloat16 autocast the native kernels have no fast path (the engine measured 10 times slower than a plain
    # vmap with oneDNN on the CPU, benchmarks/gpu.py), and float32's precision is not kept anyway.
    for members in user_chunks(
        groups, floats_per_user, chunk_floats, lambda n: -(-n // width(n)) * width(n)
    ):
        with (
            _without_onednn()
            if closed_form is None and precision != "bf16"
            else contextlib.nullcontext(),
            device_settings(device, precision),
            autocast(device, precision),
        ):
            index, counts = padded_indices(groups, members, device)
            n_users, n_max = index.shape
            xs, ys = x[index], y[index]
            valid = torch.arange(n_max, device=device)[None, :] < counts[:, None]
            users = torch.arange(n_users, device=device)[:, None]
            batch = width(n_max)
            n_batches = -(-n_max // batch)
            positions = torch.arange(n_batches * batch, device=device).reshape(n_batches, batch)
            local = {
                name: value.expand((n_users, *value.shape)).clone()
                for name, value in global_params.items()
            }
            generators = None
            if dropout_generators is not None and closed_form is not None and closed_form.random:
                generators = [dropout_generators[m] for m in members]
            for epoch in range(epochs):
                order = torch.where(valid, keys[epoch][index], 2.0).argsort(dim=1, stable=True)
                order = F.pad(
                    order, (0, n_batches * batch - n_max)
                )  # padding slots point at record 0, masked below
                for step in range(n_batches):
                    slot = order[:, step * batch : (step + 1) * batch]
                    mask = (
                        positions[step][None, :] < counts[:, None]
                    )  # real records sort first in every row
                    uniforms = (
                        None
                        if generators is None
                        else closed_forms.copy_uniforms(
                            generators, torch.clamp(counts, max=batch), active=counts > step * batch
                        )
                    )
                    # a user whose records ran out has all-zero weights, hence an exactly zero gradient: no step
                    sgd_step_(
                        local,
                        xs[users, slot],
                        ys[users, slot],
                        mask.to(params.dtype),
                        local_lr,
                        uniforms,
                    )
        consume(members, layout.flatten(local, batch_dims=1) - params.detach()[None, :])


def train_users_loop(
    model: nn.Module,
    params: Tensor,
    x: Tensor,
    y: Tensor,
    groups: Sequence[np.ndarray],
    *,
    loss_fn: LossFunction,
    local_lr: float,
    epochs: int,
    batch_size: int,
    keys: Tensor,
) -> Tensor:
    """The plain per-user loop: the oracle for :func:`train_users` (same arguments, same mini-batches).

    Each user gets a fresh copy of ``model`` loaded with ``params`` and ``torch.optim.SGD``; one backward pass per
    mini-batch of real records, no padding, no ``vmap``. Slow but obviously Algorithm 3, lines 10-15.

    Returns:
        ``[len(groups), d]`` deltas (local minus global).
    """
    _check_training_arguments(local_lr, epochs, batch_size, keys, x)
    groups = _check_groups(groups, x.shape[0])
    deltas = torch.zeros((len(groups), params.numel()), dtype=params.dtype, device=params.device)
    for row, records in enumerate(groups):
        user_model = copy.deepcopy(model)
        load_flat_parameters(user_model, params)
        optimizer = torch.optim.SGD(
            [p for p in user_model.parameters() if p.requires_grad], lr=local_lr
        )
        records_t = torch.from_numpy(records).to(params.device)
        for epoch in range(epochs):
            ordered = records_t[keys[epoch][records_t].argsort(stable=True)]
            for batch in ordered.split(batch_size):
                optimizer.zero_grad()
                loss_fn(user_model(x[batch]), y[batch], None).backward()
                optimizer.step()
        deltas[row] = flat_parameters(user_model) - params.detach()
    return deltas


def user_gradients(
    model: nn.Module,
    params: Tensor,
    x: Tensor,
    y: Tensor,
    groups: Sequence[np.ndarray],
    *,
    loss_fn: LossFunction,
    chunk_floats: int | None = None,
    precision: str = "float32",
) -> Tensor:
    """:func:`user_gradient_chunks` keeping every chunk: ``[len(groups), d]`` gradients, on the device of ``params``.

    Args and Raises: as :func:`user_gradient_chunks`.
    """
    gradients = torch.zeros((len(groups), params.numel()), dtype=params.dtype, device=params.device)
    user_gradient_chunks(
        model,
        params,
        x,
        y,
        groups,
        consume=row_writer(gradients),
        loss_fn=loss_fn,
        chunk_floats=chunk_floats,
        precision=precision,
    )
    return gradients


def user_gradient_chunks(
    model: nn.Module,
    params: Tensor,
    x: Tensor,
    y: Tensor,
    groups: Sequence[np.ndarray],
    *,
    consume: ChunkConsumer,
    loss_fn: LossFunction,
    chunk_floats: int | None = None,
    precision: str = "float32",
) -> None:
    """Each user's full-batch gradient of its weighted mean loss at ``params`` (ULDP-SGD, Algorithm 3 line 21), handed
    to ``consume`` one chunk of users at a time.

    Args:
        model: The architecture (mode used; parameters ignored).
        params: Global model, flat ``[d]``.
        x: The silo's records.
        y: Their targets.
        groups: Per user, the indices of its records (each non-empty).
        consume: As in :func:`train_user_chunks`, with gradients for deltas.
        loss_fn: Weighted mean loss.
        chunk_floats: Memory bound per chunk of users (``None``: :func:`chunk_floats_for` the device).
        precision: As in :func:`train_user_chunks`.
    """
    groups = _check_groups(groups, x.shape[0])
    layout = ParameterLayout.of(model)
    global_params = layout.unflatten(params.detach())
    closed_form = closed_forms.for_model(model, loss_fn, precision)
    per_record = per_record_floats(model, x) + x[0].numel()
    device = params.device
    chunk_floats = chunk_floats_for(device) if chunk_floats is None else chunk_floats
    for members in user_chunks(
        groups, lambda n: layout.size + n * per_record, chunk_floats, padded_length=lambda n: n
    ):
        index, counts = padded_indices(groups, members, device)
        mask = (torch.arange(index.shape[1], device=device)[None, :] < counts[:, None]).to(
            params.dtype
        )
        if closed_form is None:
            with autocast(device, precision):
                grads = _make_user_grad(model, loss_fn, params_batched=False)(
                    global_params, x[index], y[index], mask
                )
        else:  # every user starts from the global model: one shared copy, broadcast over users
            shared = {
                name: value.expand((len(members), *value.shape))
                for name, value in global_params.items()
            }
            grads = closed_form.weighted_gradient(shared, x[index], y[index], mask)
        consume(members, layout.flatten(grads, batch_dims=1))


def clip_rows(rows: Tensor, clip: float) -> Tensor:
    """Scale each row ``v`` to ``v * min(1, clip / ||v||_2)`` (the per-user clipping of Algorithm 3, line 16).

    Args:
        rows: ``[n, d]`` vectors.
        clip: Clipping bound ``C`` > 0.

    Returns:
        ``[n, d]`` rows of L2 norm at most ``clip``.

    Example:
        >>> clip_rows(torch.tensor([[3.0, 4.0], [0.3, 0.4]]), 1.0)
        tensor([[0.6000, 0.8000],
                [0.3000, 0.4000]])
    """
    check_positive("clip", clip)
    norms = rows.norm(dim=-1, keepdim=True)
    return rows * torch.clamp(clip / norms.clamp_min(torch.finfo(rows.dtype).tiny), max=1.0)


def _check_training_arguments(
    local_lr: float, epochs: int, batch_size: int, keys: Tensor, x: Tensor
) -> None:
    check_positive("local_lr", local_lr)
    check_integer("epochs", epochs)
    check_integer("batch_size", batch_size)
    if tuple(keys.shape) != (epochs, x.shape[0]):
        raise ValueError(f"keys must have shape ({epochs}, {x.shape[0]}), got {tuple(keys.shape)}")
