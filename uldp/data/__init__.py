"""Datasets of the paper's experiments and the allocation of their records to users and silos.

``load(name)`` returns a :class:`FederatedDataset`; ``allocate(dataset, ...)`` an :class:`Allocation`.
The data directory is the ``data_dir`` argument, else ``$ULDP_DATA_DIR`` (see :mod:`uldp.data.paths`).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

from uldp.data.allocation import SCHEMES, allocate
from uldp.data.base import TEST_SCORINGS, Allocation, FederatedDataset, check_test_scoring
from uldp.defaults import DATASET_DEFAULTS

if TYPE_CHECKING:
    from pathlib import Path


@dataclass(frozen=True)
class DatasetSpec:
    """A registered dataset.

    Attributes:
        name: Registry name.
        module: Module whose ``load(data_dir)`` builds it.
        default_silos: Number of silos the paper uses (:data:`uldp.defaults.DATASET_DEFAULTS`; fixed by FLamby for the
            medical datasets).
        description: One line for listings.
        fixed_silos: Whether the silo of every record is fixed by the data (FLamby's centres), so that the
            allocation only draws users; such a loader takes ``test_scoring`` (:data:`TEST_SCORINGS`).
        scoring_changes_test_set: Whether the ``test_scoring`` variants give different test sets (HeartDisease's
            standardisation); where they do not (TcgaBrca, unscaled), a run's result cannot depend on it.
    """

    name: str
    module: str
    default_silos: int
    description: str
    fixed_silos: bool = False
    scoring_changes_test_set: bool = False


DATASETS: dict[str, DatasetSpec] = {
    spec.name: spec
    for spec in (
        DatasetSpec(
            "creditcard",
            "uldp.data.creditcard",
            DATASET_DEFAULTS["creditcard"].n_silos,
            "Credit Card Fraud (Kaggle), 30 features, 2 classes",
        ),
        DatasetSpec(
            "mnist",
            "uldp.data.mnist",
            DATASET_DEFAULTS["mnist"].n_silos,
            "MNIST digits, 28x28, 10 classes",
        ),
        DatasetSpec(
            "heart_disease",
            "uldp.data.heart_disease",
            DATASET_DEFAULTS["heart_disease"].n_silos,
            "FLamby Fed-Heart-Disease, 13 features, 4 centres",
            fixed_silos=True,
            scoring_changes_test_set=True,
        ),
        DatasetSpec(
            "tcga_brca",
            "uldp.data.tcga_brca",
            DATASET_DEFAULTS["tcga_brca"].n_silos,
            "FLamby Fed-TCGA-BRCA survival, 39 features, 6 regions",
            fixed_silos=True,
        ),
        DatasetSpec(
            "synthetic",
            "uldp.data.synthetic",
            DATASET_DEFAULTS["synthetic"].n_silos,
            "make_classification, 10,000 records, 15 features",
        ),
    )
}


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
    module = importlib.import_module(DATASETS[name].module)
    if DATASETS[name].fixed_silos:
        return module.load(data_dir, test_scoring=test_scoring)
    if test_scoring != "pooled":
        raise ValueError(
            f"dataset {name!r} has one test set; test_scoring must be 'pooled', got {test_scoring!r}"
        )
    return module.load(data_dir)


__all__ = [
    "DATASETS",
    "SCHEMES",
    "TEST_SCORINGS",
    "Allocation",
    "DatasetSpec",
    "FederatedDataset",
    "allocate",
    "load",
]
