"""Credit Card Fraud (Kaggle mlg-ulb): the paper's split and undersampling, or the documented subset equivalent."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import torch
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from uldp.data.base import FederatedDataset
from uldp.data.paths import KNOWN_FILES, data_file, resolve_data_dir
from uldp.models import CreditcardMLP, ModelSpec, cross_entropy_loss

if TYPE_CHECKING:
    from pathlib import Path

FULL_FILE = "creditcard/creditcard.csv"
SUBSET_FILE = "creditcard/creditcard_sample.csv.gz"
FULL_ROWS = 284_807
TEST_SIZE = 0.15
MAJORITY_KEEP_FRACTION = 0.1
SPLIT_SEED = 0
N_FEATURES = 30


def _split_and_scale(frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """85/15 split stratified on ``Class``, features standardised with the training part's mean and std."""
    features = frame.drop(columns="Class").to_numpy(dtype=np.float64)
    labels = frame["Class"].to_numpy(dtype=np.int64)
    x_train, x_test, y_train, y_test = train_test_split(
        features, labels, test_size=TEST_SIZE, random_state=SPLIT_SEED, stratify=labels
    )
    scaler = StandardScaler().fit(x_train)
    return scaler.transform(x_train), scaler.transform(x_test), y_train, y_test


def undersample_majority(labels: np.ndarray, *, keep_fraction: float, seed: int) -> np.ndarray:
    """Indices kept by the paper's undersampling: every minority (fraud) record + ``int(keep_fraction * n_normal)``
    normal records drawn without replacement, minority first (as the authors' code orders them).

    Args:
        labels: 0/1 labels (1 = fraud).
        keep_fraction: Fraction of the normal records to keep, in (0, 1].
        seed: Seed of the draw.

    Returns:
        The kept indices.

    Raises:
        ValueError: ``keep_fraction`` outside (0, 1].
    """
    if not 0.0 < keep_fraction <= 1.0:
        raise ValueError(f"keep_fraction={keep_fraction} must lie in (0, 1]")
    normal = np.flatnonzero(labels == 0)
    kept_normal = np.random.default_rng(seed).choice(
        normal, size=int(len(normal) * keep_fraction), replace=False
    )
    return np.concatenate([np.flatnonzero(labels != 0), kept_normal])


def load(data_dir: str | Path | None = None) -> FederatedDataset:
    """Load Creditcard with the full Kaggle file when present, else the shipped 5,412-row subset.

    Full file (``creditcard/creditcard.csv``, 284,807 rows): the authors' preparation, an 85/15 split stratified on
    the label, standardisation fitted on the training part, then the training part undersampled to all frauds + 10%
    of the normal rows (24,584 rows, 418 frauds). Subset (``creditcard/creditcard_sample.csv.gz``: all 492 frauds +
    4,920 normal rows): the same stratified split and standardisation without the undersampling, which the subset
    already embodies (4,600 training rows with the same 418 frauds; 812 test rows at 9.1% fraud instead of 0.17%).
    ``FederatedDataset.variant`` says which was used. Split and undersampling use the fixed seed 0.

    Args:
        data_dir: Folder holding ``creditcard/`` (default ``$ULDP_DATA_DIR``).

    Returns:
        A ``multiclass`` dataset with 2 classes (int64 labels, 1 = fraud) and 30 standardised features
        (``Time, V1..V28, Amount``).

    Raises:
        ValueError: The full file does not have 284,807 rows and the Kaggle columns.
    """
    full_path = resolve_data_dir(data_dir) / FULL_FILE
    if full_path.is_file():
        frame = pd.read_csv(data_file(FULL_FILE, data_dir))
        if (
            len(frame) != FULL_ROWS
            or frame.shape[1] != N_FEATURES + 1
            or "Class" not in frame.columns
        ):
            raise ValueError(
                f"{str(full_path)!r} has shape {frame.shape}, expected ({FULL_ROWS}, 31) with a Class column "
                f"({KNOWN_FILES[FULL_FILE].source})"
            )
        x_train, x_test, y_train, y_test = _split_and_scale(frame)
        kept = undersample_majority(y_train, keep_fraction=MAJORITY_KEEP_FRACTION, seed=SPLIT_SEED)
        x_train, y_train = x_train[kept], y_train[kept]
        variant = "creditcard-full: paper split 85/15 stratified, train undersampled to frauds + 10% normal"
    else:
        frame = pd.read_csv(data_file(SUBSET_FILE, data_dir))
        x_train, x_test, y_train, y_test = _split_and_scale(frame)
        variant = (
            "creditcard-subset: 5,412-row subset, 85/15 stratified split, no further undersampling"
        )
    return FederatedDataset(
        name="creditcard",
        task="multiclass",
        x_train=torch.from_numpy(x_train.astype(np.float32)),
        y_train=torch.from_numpy(y_train),
        x_test=torch.from_numpy(x_test.astype(np.float32)),
        y_test=torch.from_numpy(y_test),
        variant=variant,
        info={"n_classes": 2},
    )


def model() -> ModelSpec:
    """Its registry entry's model: the authors' ``PrivateFraudNet(30, 30, 4)`` and cross-entropy."""
    return ModelSpec(CreditcardMLP, cross_entropy_loss, "multiclass")
