"""Helpers shared by the tests of uldp.fitting (tests/test_fitting*.py).

A small table of records with patient and hospital ids, the model that trains on it, and the few rounds that keep a
call of fit quick.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn


def records(
    n: int = 120, seed: int = 0, users: int = 15
) -> tuple[torch.Tensor, torch.Tensor, list[str], list[str]]:
    rng = np.random.default_rng(seed)
    x = torch.from_numpy(rng.normal(size=(n, 4))).float()
    y = (x[:, 0] + 0.5 * x[:, 1] > 0).long()
    patients = [f"patient-{u:03d}" for u in rng.integers(0, users, n)]
    silos = [["Hospital North", "Hospital South", "Clinic East"][s] for s in rng.integers(0, 3, n)]
    return x, y, patients, silos


def mlp() -> nn.Module:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(1)
        return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Dropout(0.2), nn.Linear(8, 2))


SMALL: dict[str, Any] = dict(rounds=2, local_epochs=2, batch_size=8, sigma=1.0)


def fit_arguments(users: list[str], silos: list[str], **options: Any) -> dict[str, Any]:
    """The keyword arguments of a ``fit`` call on :func:`records`' ids with cross-entropy, plus ``options``."""
    return dict(user_ids=users, silo_ids=silos, loss=nn.CrossEntropyLoss(), **options)
