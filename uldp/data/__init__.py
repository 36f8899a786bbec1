"""Datasets of the paper's experiments and the allocation of their records to users and silos.

``load(name)`` returns a :class:`FederatedDataset`; ``allocate(dataset, ...)`` an :class:`Allocation`.
The data directory is the ``data_dir`` argument, else ``$ULDP_DATA_DIR`` (see :mod:`uldp.data.paths`).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path

from uldp.data.allocation import SCHEMES, allocate
from uldp.data.base import Allocation, FederatedDataset


@dataclass(frozen=True)
class DatasetSpec:
    """A registered dataset.

    Attributes:
        name: Registry name.
        module: Module whose ``load(data_dir)`` builds it.
        default_silos: Number of silos the paper uses (fixed by FLamby for the medical datasets).
        description: One line for listings.
        fixed_silos: Whether the silo of every record is fixed by the data (FLamby's centres), so that the
            allocation only draws users.
    """

    name: str
    module: str
    default_silos: int
    description: str
    fixed_silos: bool = False


DATASETS: dict[str, DatasetSpec] = {
    spec.name: spec
    for spec in (
        DatasetSpec("creditcard", "uldp.data.creditcard", 5, "Credit Card Fraud (Kaggle), 30 features, 2 classes"),
        DatasetSpec("mnist", "uldp.data.mnist", 5, "MNIST digits, 28x28, 10 classes"),
        DatasetSpec("heart_disease", "uldp.data.heart_disease", 4, "FLamby Fed-Heart-Disease, 13 features, 4 centres",
                    fixed_silos=True),
        DatasetSpec("tcga_brca", "uldp.data.tcga_brca", 6, "FLamby Fed-TCGA-BRCA survival, 39 features, 6 regions",
                    fixed_silos=True),
        DatasetSpec("synthetic", "uldp.data.synthetic", 3, "make_classification, 10,000 records, 15 features"),
    )
}


def load(name: str, data_dir: str | Path | None = None) -> FederatedDataset:
    """Load a registered dataset by name.

    Args:
        name: One of :data:`DATASETS`.
        data_dir: The data directory, default ``$ULDP_DATA_DIR``.

    Returns:
        The dataset.

    Raises:
        ValueError: Unknown name.
        FileNotFoundError: A file is missing (the message says which and where to get it).
    """
    if name not in DATASETS:
        raise ValueError(f"unknown dataset {name!r}; choose one of {', '.join(DATASETS)}")
    return importlib.import_module(DATASETS[name].module).load(data_dir)


__all__ = ["DATASETS", "SCHEMES", "Allocation", "DatasetSpec", "FederatedDataset", "allocate", "load"]
