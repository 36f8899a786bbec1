"""Fed-Heart-Disease: FLamby's four centres of the UCI Heart Disease data, with FLamby's preprocessing and split."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import torch
from sklearn.model_selection import train_test_split

from uldp.data.base import TEST_SCORING_VARIANTS, FederatedDataset, check_test_scoring
from uldp.data.paths import data_file
from uldp.models import LinearScore, ModelSpec, bce_loss

if TYPE_CHECKING:
    from pathlib import Path

CENTRES: tuple[str, ...] = ("cleveland", "hungarian", "switzerland", "va")
TRAIN_FRACTION = 0.66
SPLIT_RANDOM_STATE = 43
_DROPPED_COLUMNS = [10, 11, 12]  # slope, ca, thal: mostly missing outside Cleveland
_CATEGORICAL_COLUMNS = [2, 6]  # chest pain type, resting ECG
_STD_EPSILON = 1e-9


def _centre_split(labels: pd.Series) -> np.ndarray:
    """FLamby's per-centre split: 66% train, shuffled with random_state 43, stratified when each class has > 2."""
    binary = (labels > 0).astype(int)
    classes, counts = np.unique(binary, return_counts=True)
    stratify = binary if len(classes) > 1 and bool(np.all(counts > 2)) else None
    _, test_index = train_test_split(
        np.arange(len(labels)),
        test_size=1.0 - TRAIN_FRACTION,
        train_size=TRAIN_FRACTION,
        random_state=SPLIT_RANDOM_STATE,
        shuffle=True,
        stratify=stratify,
    )
    is_train = np.ones(len(labels), dtype=bool)
    is_train[test_index] = False
    return is_train


def _standardise(records: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """``(records - mean) / (std + 1e-9)`` with the mean and torch's unbiased std of ``reference``, as FLamby."""
    reference_tensor = torch.from_numpy(reference)
    mean, std = reference_tensor.mean(dim=0), reference_tensor.std(dim=0)
    return ((torch.from_numpy(records) - mean) / (std + _STD_EPSILON)).numpy()


def load(data_dir: str | Path | None = None, *, test_scoring: str = "pooled") -> FederatedDataset:
    """Load Fed-Heart-Disease exactly as FLamby's ``HeartDiseaseRaw`` / ``FedHeartDisease`` prepare it.

    Per centre file: ``?`` -> missing, drop columns 10, 11, 12, drop rows with a missing value; label = column 13
    binarised to ``> 0``; split 66/34 per centre (``train_test_split(train_size=0.66, random_state=43)``, stratified
    on the label when each class has more than 2 records), giving train/test 199/104, 172/89, 30/16, 85/45.
    Columns 2 and 6 are one-hot encoded over the pooled data (``drop_first``), giving 13 features; each centre's
    training records are standardised with the mean and (unbiased) std of that centre's training records, plus
    1e-9, as FLamby's per-centre datasets ``FedHeartDisease(center=c, train=True)`` that each silo trains on.

    The test records are scored as the authors scored them (``test_scoring="pooled"``): FLamby's pooled test set
    ``FedHeartDisease(train=False, pooled=True)``, every centre's test records standardised with the mean and std of
    the pooled training records. ``"per-centre"`` standardises each centre's test records with that centre's
    training statistics instead (FLamby's per-centre test sets; uldp's scoring before issue 19).

    Args:
        data_dir: Folder holding ``heart_disease/`` (default ``$ULDP_DATA_DIR``).
        test_scoring: ``"pooled"`` (the authors') or ``"per-centre"``; see :data:`uldp.data.TEST_SCORINGS`.

    Returns:
        A ``binary`` dataset (float32 0/1 labels) with ``train_silo`` = FLamby's centre (cleveland=0, hungarian=1,
        switzerland=2, va=3), records ordered by centre; ``info["test_silo"]`` holds the test records' centres.
    """
    features, labels, centres, is_train = [], [], [], []
    for code, name in enumerate(CENTRES):
        frame = pd.read_csv(
            data_file(f"heart_disease/processed.{name}.data", data_dir), header=None
        )
        frame = (
            frame.replace("?", np.nan)
            .drop(columns=_DROPPED_COLUMNS)
            .dropna(axis=0)
            .apply(pd.to_numeric)
        )
        features.append(frame.iloc[:, :-1])
        labels.append(frame.iloc[:, -1])
        centres.append(np.full(len(frame), code, dtype=np.int64))
        is_train.append(_centre_split(frame.iloc[:, -1]))
    encoded = pd.get_dummies(
        pd.concat(features, ignore_index=True), columns=_CATEGORICAL_COLUMNS, drop_first=True
    ).to_numpy(dtype=np.float32)
    label = (pd.concat(labels, ignore_index=True).to_numpy() > 0).astype(np.float32)
    centre = np.concatenate(centres)
    train = np.concatenate(is_train)

    check_test_scoring(test_scoring)
    standardised = np.empty_like(encoded)
    for c in range(len(CENTRES)):
        rows = centre == c
        standardised[rows] = _standardise(encoded[rows], encoded[rows & train])
    if test_scoring == "pooled":
        standardised[~train] = _standardise(encoded[~train], encoded[train])

    return FederatedDataset(
        name="heart_disease",
        task="binary",
        x_train=torch.from_numpy(standardised[train]),
        y_train=torch.from_numpy(label[train]),
        x_test=torch.from_numpy(standardised[~train]),
        y_test=torch.from_numpy(label[~train]),
        train_silo=centre[train],
        n_fixed_silos=len(CENTRES),
        variant="heart_disease: FLamby preprocessing, per-centre 66/34 split (random_state 43), training records "
        f"standardised per centre; test: {TEST_SCORING_VARIANTS[test_scoring]}",
        info={"test_silo": centre[~train], "centres": CENTRES, "n_classes": 2},
    )


def model() -> ModelSpec:
    """Its registry entry's model: FLamby's logistic regression on 13 features and BCE."""
    return ModelSpec(partial(LinearScore, 13), bce_loss, "binary")
