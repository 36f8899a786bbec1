"""What executes a run of a grid: an :class:`Executor` (the in-process simulation, :data:`SIMULATION`, or a test's
stand-in; called ``Backend`` before, a name now kept for Protocol 1's encryptions), and the datasets it loads, cached
per process."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from uldp.common.checks import check_integer
from uldp.common.provenance import canonical
from uldp.data import load
from uldp.simulation import STORED_NAMES, RunConfig, run

if TYPE_CHECKING:
    from uldp.data import FederatedDataset


@dataclass(frozen=True)
class Executor:
    """What runs a run: ``resolve`` validates the arguments into the full configuration (a JSON-ready dict) and
    ``execute(params, checkpoint)`` runs that configuration and returns the per-round results (a JSON-ready dict),
    resuming from and saving its progress to the file ``checkpoint`` where it can (the grid deletes the file once
    the result is stored). Both must be module-level functions so that worker processes (spawned) can unpickle
    them."""

    resolve: Callable[[Mapping[str, Any]], dict]
    execute: Callable[[Mapping[str, Any], str], dict]


#: Run arguments handled here rather than by ``RunConfig``: ``max_test_records`` evaluates on a fixed random
#: subset of the test set (the smaller profiles; the paper profile always uses the whole test set).
WRAPPER_ARGUMENTS = ("max_test_records",)


#: The backend of a grid's runs that name none: the paper's Protocol 1, whose runtime the secure runs reproduce and
#: which every stored run used while it was the library's default (the library's is now "auto"); it is not a run
#: argument, so the runs keep their keys.
PAPER_BACKEND = "paillier"
#: Protocol 1's worker processes in a grid's runs that name none: one, as every stored run ran (a grid shares the
#: cores between its runs, ``jobs``; the library's default is now "auto", every core); results do not depend on it.
GRID_PROCESSES = 1


def split_arguments(params: Mapping[str, Any]) -> tuple[dict, dict]:
    """The ``RunConfig`` keyword arguments of a run (stored names mapped by :data:`uldp.simulation.STORED_NAMES`;
    Protocol 1's backend :data:`PAPER_BACKEND` and :data:`GRID_PROCESSES` unless named) and its
    :data:`WRAPPER_ARGUMENTS` (``max_test_records`` checked).

    Raises:
        ValueError: A bad ``max_test_records``.
    """
    config = {STORED_NAMES.get(k, k): v for k, v in params.items() if k not in WRAPPER_ARGUMENTS}
    protocol = config.get("protocol", {})
    if isinstance(protocol, Mapping):
        config["protocol"] = {"backend": PAPER_BACKEND, "processes": GRID_PROCESSES, **protocol}
    extra = {k: params[k] for k in WRAPPER_ARGUMENTS if k in params}
    limit = extra.get("max_test_records")
    if limit is not None:
        check_integer("max_test_records", limit)
    return config, extra


@functools.lru_cache(maxsize=2)
def loaded_dataset(name: str, max_test_records: int | None, test_scoring: str) -> FederatedDataset:
    """A loaded dataset, cached per process (a grid runs many configurations on one dataset)."""
    data = load(name, test_scoring=test_scoring)
    if max_test_records is None or max_test_records >= data.x_test.shape[0]:
        return data
    # The same subset for every run (seed 0), so that methods and seeds are compared on equal terms.
    keep = np.sort(np.random.default_rng(0).permutation(data.x_test.shape[0])[:max_test_records])
    return replace(data, x_test=data.x_test[keep], y_test=data.y_test[keep])


def _simulation_resolve(params: Mapping[str, Any]) -> dict:
    config, extra = split_arguments(params)
    return canonical({**asdict(RunConfig(**config)), **extra})


def _simulation_execute(params: Mapping[str, Any], checkpoint: str) -> dict:
    arguments, extra = split_arguments(params)
    config = RunConfig(**arguments)
    # a secure run's protocol state lives in its process: it restarts (protocol_runtime's runs are 3 rounds)
    data = loaded_dataset(config.dataset, extra.get("max_test_records"), config.test_scoring)
    result = asdict(run(config, dataset=data, checkpoint=None if config.secure else checkpoint))
    del result["config"]  # stored once, resolved, beside the result
    return canonical(_finite_floats(result))


def _finite_floats(value: Any) -> Any:
    """Replace non-finite floats (DEFAULT's epsilon is infinite) by ``None`` for strict JSON."""
    if isinstance(value, Mapping):
        return {key: _finite_floats(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite_floats(item) for item in value]
    if hasattr(value, "tolist"):
        return _finite_floats(value.tolist())
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


#: The in-process simulation of :mod:`uldp.simulation`.
SIMULATION = Executor(resolve=_simulation_resolve, execute=_simulation_execute)
