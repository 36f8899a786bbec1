"""The two data structures every experiment stands on: a dataset and an allocation of its records."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

import numpy as np

if TYPE_CHECKING:  # annotations only: ``uldp --help`` and ``uldp epsilon`` must not import torch
    import torch

Task = Literal["multiclass", "binary", "survival"]

#: How the test records of a dataset with fixed silos (FLamby's) are scored, and what each means. ``"pooled"`` is
#: the authors' (FLamby's pooled test set); ``"per-centre"`` prepares each centre's test records as FLamby's
#: per-centre test sets do. Datasets without fixed silos have one test set, scored as ``"pooled"``.
TEST_SCORING_VARIANTS: dict[str, str] = {
    "pooled": "FLamby's pooled test set, standardised with the pooled training statistics (the authors' scoring)",
    "per-centre": "each centre's test records standardised with that centre's training statistics",
}
TEST_SCORINGS: tuple[str, ...] = tuple(TEST_SCORING_VARIANTS)


def check_test_scoring(test_scoring: str) -> str:
    """Return ``test_scoring`` if it is one of :data:`TEST_SCORINGS`.

    Raises:
        ValueError: Any other value (the message lists the allowed ones).
    """
    if test_scoring not in TEST_SCORINGS:
        raise ValueError(
            f"test_scoring must be one of {', '.join(map(repr, TEST_SCORINGS))}, got {test_scoring!r}"
        )
    return test_scoring


@dataclass(frozen=True)
class FederatedDataset:
    """A dataset with its train/test split, as the paper uses it.

    Attributes:
        name: Registry name (``"creditcard"``, ``"mnist"``, ``"heart_disease"``, ``"tcga_brca"``, ``"synthetic"``).
        task: ``"multiclass"`` (integer labels, cross-entropy), ``"binary"`` (0/1 float labels, BCE) or
            ``"survival"`` (targets ``[:, 0]`` = event indicator, ``[:, 1]`` = time; Cox loss).
        x_train: Training features, float32, first dimension = records.
        y_train: Training targets (int64 labels, float32 0/1, or float32 ``[n, 2]`` (event, time)).
        x_test: Test features.
        y_test: Test targets.
        train_silo: For datasets whose silos are fixed (FLamby's centres), the silo of each training record;
            ``None`` when the allocation chooses silos.
        n_fixed_silos: Number of fixed silos, or ``None``.
        variant: What was loaded, for provenance (for example which Creditcard file and split).
    """

    name: str
    task: Task
    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor
    train_silo: np.ndarray | None = None
    n_fixed_silos: int | None = None
    variant: str = ""
    info: dict = field(default_factory=dict)

    @property
    def n_train(self) -> int:
        """Number of training records."""
        return int(self.x_train.shape[0])

    @property
    def labels(self) -> np.ndarray | None:
        """Integer class labels of the training records (``None`` for survival data)."""
        if self.task == "survival":
            return None
        return self.y_train.numpy().astype(np.int64)


@dataclass(frozen=True)
class Allocation:
    """The owner (user) and holder (silo) of every training record.

    Attributes:
        user: ``int64 [n_train]``, the user of each record, in ``0 .. n_users - 1``.
        silo: ``int64 [n_train]``, the silo of each record, in ``0 .. n_silos - 1``.
        n_users: Number of users ``|U|``.
        n_silos: Number of silos ``|S|``.
        scheme: The allocation scheme that produced it.
        seed: The seed that reproduces it.
    """

    user: np.ndarray
    silo: np.ndarray
    n_users: int
    n_silos: int
    scheme: str
    seed: int

    @property
    def counts(self) -> np.ndarray:
        """``n[s, u]``: the number of records of user ``u`` in silo ``s`` (shape ``[n_silos, n_users]``)."""
        counts = np.zeros((self.n_silos, self.n_users), dtype=np.int64)
        np.add.at(counts, (self.silo, self.user), 1)
        return counts

    def records(self, silo: int, user: int) -> np.ndarray:
        """Indices of the training records of ``user`` held by ``silo``."""
        return np.flatnonzero((self.silo == silo) & (self.user == user))
