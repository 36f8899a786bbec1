"""Datasets of the paper's experiments and the allocation of their records to users and silos.

``load(name)`` returns a :class:`FederatedDataset`; ``allocate(dataset, ...)`` an :class:`Allocation`. A dataset is
one entry of :data:`DATASETS` (:mod:`uldp.data.registry`: its loader, model, defaults and files);
:func:`register_dataset` adds one.
The data directory is the ``data_dir`` argument, else ``$ULDP_DATA_DIR`` (see :mod:`uldp.data.paths`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from uldp.data.allocation import SCHEMES, allocate
from uldp.data.base import TEST_SCORINGS, Allocation, FederatedDataset, check_test_scoring
from uldp.data.registry import DATASETS, DatasetSpec, register_dataset

if TYPE_CHECKING:
    from pathlib import Path


def load(
    name: str, data_dir: str | Path | None = None, *, test_scoring: str = "pooled"
) -> FederatedDataset:
    """Load a registered dataset by name.

    Args:
        name: One of :data:`DATASETS`.
        data_dir: The data directory, default ``$ULDP_DATA_DIR``.
        test_scoring: How the test records are prepared (:data:`TEST_SCORINGS`): ``"pooled"``, the authors'
            scoring, for every dataset; ``"per-centre"`` only for the datasets with fixed silos.

    Returns:
        The dataset.

    Raises:
        ValueError: Unknown name, or a ``test_scoring`` the dataset does not have.
        FileNotFoundError: A file is missing (the message says which and where to get it).
    """
    if name not in DATASETS:
        raise ValueError(f"unknown dataset {name!r}; choose one of {', '.join(DATASETS)}")
    check_test_scoring(test_scoring)
    spec = DATASETS[name]
    if spec.fixed_silos:
        return spec.load(data_dir, test_scoring=test_scoring)
    if test_scoring != "pooled":
        raise ValueError(
            f"dataset {name!r} has one test set; test_scoring must be 'pooled', got {test_scoring!r}"
        )
    return spec.load(data_dir)


__all__ = [
    "DATASETS",
    "SCHEMES",
    "TEST_SCORINGS",
    "Allocation",
    "DatasetSpec",
    "FederatedDataset",
    "allocate",
    "load",
    "register_dataset",
]
