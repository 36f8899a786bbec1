"""uldp: user-level differential privacy for cross-silo federated learning.

A library and an executable book that reproduce, check and extend Kato et al., "ULDP-FL: Federated Learning
with Across-Silo User-Level Differential Privacy" (VLDB). Sub-packages:

- :mod:`uldp.accounting`: RDP and (epsilon, delta) guarantees of every method, group privacy (errata fixed).
- :mod:`uldp.data`: the datasets and the allocation of records to users and silos.
- :mod:`uldp.models`: the paper's models, losses and metrics.
- :mod:`uldp.methods`, :mod:`uldp.training`, :mod:`uldp.simulation`: the federated algorithms.
- :mod:`uldp.secure`: the private weighting protocol (Protocol 1).
- :func:`uldp.fit` (:mod:`uldp.fitting`): your own model, records and user ids, in one call; :mod:`uldp.flower`:
  the same on Flower, each silo reading its own files.
"""

from typing import TYPE_CHECKING

__version__ = "0.1.0"

if (
    TYPE_CHECKING
):  # the names of _LAZY and _SUBPACKAGES, for type checkers and editors (aliases mark re-exports)
    from uldp import (
        accounting as accounting,
        data as data,
        fitting as fitting,
        flower as flower,
        methods as methods,
        models as models,
        secure as secure,
        simulation as simulation,
        training as training,
    )
    from uldp.fitting import (
        History as History,
        SeedWarning as SeedWarning,
        UnsupportedModuleError as UnsupportedModuleError,
        check_module as check_module,
        fit as fit,
        weighted_loss as weighted_loss,
    )
    from uldp.training.per_user import (
        flat_parameters as flat_parameters,
        load_flat_parameters as load_flat_parameters,
    )

#: The public training call and its helpers, imported on first use so that ``import uldp`` (and the CLI) stays
#: free of torch: ``uldp.fit(model, x, y, user_ids=..., silo_ids=..., loss=..., epsilon=...)``.
_LAZY = {
    "fit": "uldp.fitting",
    "History": "uldp.fitting",
    "check_module": "uldp.fitting",
    "weighted_loss": "uldp.fitting",
    "SeedWarning": "uldp.fitting",
    "UnsupportedModuleError": "uldp.fitting",
    "flat_parameters": "uldp.training.per_user",
    "load_flat_parameters": "uldp.training.per_user",
}
#: The sub-packages the docstring above lists, imported on first use too (``import uldp; uldp.accounting``).
_SUBPACKAGES = (
    "accounting",
    "data",
    "fitting",
    "flower",
    "methods",
    "models",
    "secure",
    "simulation",
    "training",
)
__all__ = ["__version__", *_LAZY]  # noqa: PLE0604 - the keys of _LAZY are strings; ruff cannot see through the unpacking


def __getattr__(name: str) -> object:
    import importlib

    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    if name in _SUBPACKAGES:
        return importlib.import_module(f"uldp.{name}")
    raise AttributeError(f"module 'uldp' has no attribute {name!r}")
