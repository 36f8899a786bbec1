"""MNIST: 60,000 training and 10,000 test digits from the IDX files, normalised as the authors did."""

from __future__ import annotations

import gzip
from typing import TYPE_CHECKING

import numpy as np
import torch

from uldp.data.base import FederatedDataset
from uldp.data.paths import data_file
from uldp.models import MnistCNN, ModelSpec, cross_entropy_loss

if TYPE_CHECKING:
    from pathlib import Path

MEAN = 0.1307
STD = 0.3081
_IMAGE_MAGIC = 0x803
_LABEL_MAGIC = 0x801


def read_idx(path: Path) -> np.ndarray:
    """Read a gzip-compressed IDX file (images ``[n, 28, 28]`` or labels ``[n]``, uint8).

    Args:
        path: The ``.gz`` file.

    Returns:
        The array stored in the file.

    Raises:
        ValueError: The magic number or the size does not match an IDX image or label file.
    """
    with gzip.open(path, "rb") as handle:
        raw = handle.read()
    magic = int.from_bytes(raw[0:4], "big")
    if magic not in (_IMAGE_MAGIC, _LABEL_MAGIC):
        raise ValueError(
            f"{str(path)!r} has IDX magic {magic:#x}, expected 0x803 (images) or 0x801 (labels)"
        )
    n_dims = magic & 0xFF
    shape = tuple(int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(n_dims))
    body = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * n_dims)
    if body.size != int(np.prod(shape)):
        raise ValueError(
            f"{str(path)!r} holds {body.size} bytes of data, its header says shape {shape}"
        )
    return body.reshape(shape)


def _images(path: Path) -> torch.Tensor:
    pixels = torch.from_numpy(read_idx(path).astype(np.float32) / 255.0)
    return ((pixels - MEAN) / STD).unsqueeze(1)


def load(data_dir: str | Path | None = None) -> FederatedDataset:
    """Load MNIST with the standard 60K/10K split, pixels scaled to [0, 1] then normalised by (0.1307, 0.3081).

    The authors re-shuffled the union of train and test into a stratified 60K/10K split; we keep the standard split
    (same sizes and label balance), so results do not depend on a split seed.

    Args:
        data_dir: Folder holding ``mnist/`` (default ``$ULDP_DATA_DIR``).

    Returns:
        A ``multiclass`` dataset, ``x`` of shape ``[n, 1, 28, 28]`` float32, ``y`` int64 labels 0..9.
    """
    x_train = _images(data_file("mnist/train-images-idx3-ubyte.gz", data_dir))
    y_train = torch.from_numpy(
        read_idx(data_file("mnist/train-labels-idx1-ubyte.gz", data_dir)).astype(np.int64)
    )
    x_test = _images(data_file("mnist/t10k-images-idx3-ubyte.gz", data_dir))
    y_test = torch.from_numpy(
        read_idx(data_file("mnist/t10k-labels-idx1-ubyte.gz", data_dir)).astype(np.int64)
    )
    return FederatedDataset(
        name="mnist",
        task="multiclass",
        x_train=x_train,
        y_train=y_train,
        x_test=x_test,
        y_test=y_test,
        variant="mnist: standard 60K/10K IDX split, normalised (0.1307, 0.3081)",
        info={"n_classes": 10},
    )


def model() -> ModelSpec:
    """Its registry entry's model: the authors' ``CNNMnist`` and cross-entropy."""
    return ModelSpec(MnistCNN, cross_entropy_loss, "multiclass")
