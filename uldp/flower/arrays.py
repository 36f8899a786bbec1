"""The model as Flower users hold it: an ``nn.Module``, its ``state_dict`` or an ``ArrayRecord``, to and from the
flat parameter vector that :class:`~uldp.flower.UldpStrategy` sends (:func:`uldp.flat_parameters`' layout)."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from flwr.app import ArrayRecord
from torch import nn

from uldp.training.per_user import flat_parameters, load_flat_parameters


def flat_model(initial: Any, model: nn.Module | None) -> ArrayRecord:
    """``initial`` as the one flat array the strategy sends the silos.

    Args:
        initial: An ``nn.Module``; its ``state_dict()`` (a mapping of names to tensors or arrays); an
            ``ArrayRecord`` of a state dict (Flower's ``ArrayRecord(model.state_dict())``); or an ``ArrayRecord``
            holding the flat vector itself.
        model: The architecture (the strategy's ``model=``), needed for a state dict: which entries are trained
            parameters and their order; ``None`` accepts only a module or a flat vector.

    Returns:
        ``ArrayRecord([flat float array])``.

    Raises:
        ValueError: A state dict without ``model``, one that does not fit ``model`` (naming the missing and
            unexpected keys), a flat vector of the wrong length, or another type.
    """
    if isinstance(initial, nn.Module):
        flat = flat_parameters(initial)
        if model is not None and flat.numel() != flat_parameters(model).numel():
            raise ValueError(
                f"the initial model has {flat.numel()} parameters, the strategy's model "
                f"{flat_parameters(model).numel()}"
            )
        return ArrayRecord([flat.detach().numpy()])
    if isinstance(initial, ArrayRecord):
        if len(initial) == 1 and next(iter(initial.keys())) == "0" and model is not None:
            vector = initial.to_numpy_ndarrays()[0]
            expected = flat_parameters(model).numel()
            if vector.ndim != 1 or vector.size != expected:
                raise ValueError(
                    f"the initial ArrayRecord holds one array of shape {vector.shape}; the strategy's "
                    f"model needs a flat vector of {expected} parameters (or pass the model or its "
                    "state_dict)"
                )
            return initial
        if model is None or (len(initial) == 1 and next(iter(initial.keys())) == "0"):
            return initial
        initial = initial.to_torch_state_dict()
    if isinstance(initial, Mapping):
        if model is None:
            raise ValueError(
                "a state_dict needs the architecture to flatten it: UldpStrategy(model=...) or pass the "
                "model itself"
            )
        loaded = copy.deepcopy(model)
        state = {
            name: torch.as_tensor(np.asarray(value))
            if not isinstance(value, torch.Tensor)
            else value
            for name, value in initial.items()
        }
        names = set(loaded.state_dict())
        missing, unexpected = sorted(names - set(state)), sorted(set(state) - names)
        if missing or unexpected:
            raise ValueError(
                f"the state_dict does not fit the strategy's model: missing {missing}, "
                f"unexpected {unexpected}"
            )
        try:
            loaded.load_state_dict(state)
        except RuntimeError as error:
            raise ValueError(
                f"the state_dict does not fit the strategy's model: {error}"
            ) from error
        return ArrayRecord([flat_parameters(loaded).detach().numpy()])
    raise ValueError(
        f"the initial model must be an nn.Module, its state_dict or an ArrayRecord, got "
        f"{type(initial).__name__}"
    )


def trained_model(arrays: ArrayRecord, model: nn.Module) -> nn.Module:
    """A copy of ``model`` holding the flat parameters of ``arrays`` (a strategy's ``result.arrays``)."""
    trained = copy.deepcopy(model)
    load_flat_parameters(trained, torch.from_numpy(arrays.to_numpy_ndarrays()[0].copy()))
    return trained
