"""A synthetic binary classification dataset for the private-weighting protocol benchmarks."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

import numpy as np
import torch
from sklearn.datasets import make_classification

from uldp.data.base import FederatedDataset
from uldp.models import LinearScore, ModelSpec, bce_loss

if TYPE_CHECKING:
    from pathlib import Path

N_TRAIN = 10_000
N_TEST = 2_000
N_FEATURES = 15
SEED = 0


def load(data_dir: str | Path | None = None) -> FederatedDataset:
    """Generate the paper's artificial dataset: 10,000 training records for a 16-parameter model.

    ``sklearn.datasets.make_classification`` (seed 0) draws 12,000 records with 15 features (5 informative,
    2 redundant), two balanced classes; the first 10,000 are the training records, the last 2,000 the test set.
    A logistic regression on 15 features has 15 weights + 1 bias = 16 parameters, the paper's default model size
    for the protocol benchmarks.

    Args:
        data_dir: Ignored (nothing is read); accepted so every loader has the same signature.

    Returns:
        A ``binary`` dataset (float32 0/1 labels).
    """
    del data_dir
    features, labels = make_classification(
        n_samples=N_TRAIN + N_TEST,
        n_features=N_FEATURES,
        n_informative=5,
        n_redundant=2,
        n_classes=2,
        random_state=SEED,
    )
    x = torch.from_numpy(features.astype(np.float32))
    y = torch.from_numpy(labels.astype(np.float32))
    return FederatedDataset(
        name="synthetic",
        task="binary",
        x_train=x[:N_TRAIN],
        y_train=y[:N_TRAIN],
        x_test=x[N_TRAIN:],
        y_test=y[N_TRAIN:],
        variant=f"synthetic: make_classification(n={N_TRAIN + N_TEST}, features={N_FEATURES}, seed={SEED})",
        info={"n_classes": 2},
    )


def model() -> ModelSpec:
    """Its registry entry's model: a logistic regression on the 15 features and BCE."""
    return ModelSpec(partial(LinearScore, N_FEATURES), bce_loss, "binary")
