"""Fed-TCGA-BRCA: FLamby's six regions of TCGA breast-cancer clinical data, for survival analysis."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import torch

from uldp.data.base import FederatedDataset, check_test_scoring
from uldp.data.paths import data_file
from uldp.models import LinearScore, ModelSpec, cox_loss

if TYPE_CHECKING:
    from pathlib import Path

N_CENTRES = 6
REGIONS: tuple[str, ...] = ("Northeast", "South", "West", "Midwest", "Europe", "Canada")
N_FEATURES = 39


def load(data_dir: str | Path | None = None, *, test_scoring: str = "pooled") -> FederatedDataset:
    """Load Fed-TCGA-BRCA as FLamby's ``FedTcgaBrca`` does.

    The centre and the train/test side of a patient come from ``train_test_split.csv`` (``fold2`` is ``train_k`` or
    ``test_k``); the 8 patients of ``brca.csv`` absent from that file are dropped. Features are ``brca.csv``'s
    columns 1-39 (unscaled, as FLamby), targets ``(E, T)``: event indicator and time in days.

    FLamby standardises nothing here, so its pooled test set ``FedTcgaBrca(train=False, pooled=True)``, on which
    the authors scored, holds the very records of its per-centre test sets: both ``test_scoring`` values give the
    same test set (a test checks it bit for bit), and the C-index is taken over all of them at once.

    Args:
        data_dir: Folder holding ``tcga_brca/`` (default ``$ULDP_DATA_DIR``).
        test_scoring: ``"pooled"`` or ``"per-centre"`` (identical here); see :data:`uldp.data.TEST_SCORINGS`.

    Returns:
        A ``survival`` dataset with ``y[:, 0]`` = event, ``y[:, 1]`` = time (float32), 866 training and 222 test
        records, ordered by centre then by ``brca.csv`` row; ``train_silo`` = FLamby's centre, and
        ``info["test_silo"]`` the test records' centres.

    Raises:
        ValueError: The files do not have FLamby's columns or ``fold2`` values.
    """
    check_test_scoring(test_scoring)
    records = pd.read_csv(data_file("tcga_brca/brca.csv", data_dir))
    split = pd.read_csv(data_file("tcga_brca/train_test_split.csv", data_dir))
    if list(records.columns[-2:]) != ["E", "T"] or records.shape[1] != N_FEATURES + 3:
        raise ValueError(
            f"brca.csv has columns {list(records.columns)}, expected pid, 39 features, E, T"
        )
    side_centre = split["fold2"].str.extract(r"^(train|test)_(\d)$")
    if side_centre.isna().any().any():
        values = sorted(split["fold2"].unique())
        raise ValueError(
            f"train_test_split.csv has fold2 values {values}, expected train_k / test_k"
        )
    split = split.assign(side=side_centre[0], centre=side_centre[1].astype(np.int64))
    merged = records.merge(split[["pid", "side", "centre"]], on="pid", how="inner")
    merged = merged.assign(row=np.arange(len(merged))).sort_values(["centre", "row"], kind="stable")

    parts = {}
    for side in ("train", "test"):
        part = merged[merged["side"] == side]
        parts[side] = (
            torch.from_numpy(part.iloc[:, 1 : N_FEATURES + 1].to_numpy(dtype=np.float32)),
            torch.from_numpy(part[["E", "T"]].to_numpy(dtype=np.float32)),
            part["centre"].to_numpy(dtype=np.int64),
        )
    return FederatedDataset(
        name="tcga_brca",
        task="survival",
        x_train=parts["train"][0],
        y_train=parts["train"][1],
        x_test=parts["test"][0],
        y_test=parts["test"][1],
        train_silo=parts["train"][2],
        n_fixed_silos=N_CENTRES,
        variant="tcga_brca: FLamby files, centres from train_test_split.csv fold2, unscaled; test: FLamby's pooled "
        "test set (the per-centre test sets together)",
        info={"test_silo": parts["test"][2], "centres": REGIONS},
    )


def model() -> ModelSpec:
    """Its registry entry's model: FLamby's linear Cox model on 39 features, the Cox partial likelihood."""
    return ModelSpec(partial(LinearScore, 39), cox_loss, "survival")
