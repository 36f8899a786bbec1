"""The dataset registry (uldp.data.registry): a dataset is one entry, and every old per-field table reads from it.

A toy dataset written here (its loader reading a checked file, its model, its default settings) is registered with
one call and then runs through the simulation's in-process run, whose test losses and epsilons equal those of
:func:`uldp.fit` on its records exactly, and through the accountant registry.
"""

from __future__ import annotations

import hashlib
from functools import partial
from typing import TYPE_CHECKING

import numpy as np
import pytest
import torch

import uldp
from uldp.accounting import ACCOUNTANTS, epsilon_for_method
from uldp.data import DATASETS, DatasetSpec, load, register_dataset
from uldp.data.base import FederatedDataset
from uldp.data.paths import KNOWN_FILES, data_file
from uldp.data.registry import DatasetSettings, Hyper, KnownFile
from uldp.defaults import DATASET_DEFAULTS
from uldp.method_names import parse_method
from uldp.models import MODELS, LinearScore, ModelSpec, bce_loss, build_model, loss_function
from uldp.simulation import RunConfig, build_federation, run

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

TOY_FILE = "toy/records.csv"
_RNG = np.random.default_rng(7)
_FEATURES = _RNG.normal(size=(80, 3)).round(3)
_LABELS = (_FEATURES @ np.array([1.0, -0.5, 0.25]) > 0).astype(int)
TOY_CSV = "\n".join(
    ",".join(f"{v:.3f}" for v in row) + f",{label}"
    for row, label in zip(_FEATURES, _LABELS, strict=True)
)


def load_toy(data_dir: str | Path | None = None) -> FederatedDataset:
    """The toy's loader: 60 training and 20 test records of 3 features, read from its known file."""
    table = np.loadtxt(data_file(TOY_FILE, data_dir), delimiter=",", dtype=np.float32)
    x, y = torch.from_numpy(table[:, :3]), torch.from_numpy(table[:, 3])
    return FederatedDataset("toy", "binary", x[:60], y[:60], x[60:], y[60:], variant="toy")


def toy_model() -> ModelSpec:
    return ModelSpec(partial(LinearScore, 3), bce_loss, "binary")


TOY = DatasetSpec(
    "toy",
    "a toy binary task, 3 features",
    load=load_toy,
    model=toy_model,
    settings=DatasetSettings(
        "toy",
        (12,),
        3,
        2,
        8,
        ("uniform",),
        {"ULDP-AVG": Hyper(3.0, 0.5, 0.1, 2), "DEFAULT": Hyper(1.0, None, 0.1, 2)},
    ),
    known_files=(
        KnownFile(TOY_FILE, hashlib.sha256(TOY_CSV.encode()).hexdigest(), "this test module"),
    ),
)


@pytest.fixture
def toy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[DatasetSpec]:
    (tmp_path / "toy").mkdir()
    (tmp_path / TOY_FILE).write_text(TOY_CSV)
    monkeypatch.setenv("ULDP_DATA_DIR", str(tmp_path))
    register_dataset(TOY)
    try:
        yield TOY
    finally:
        del DATASETS["toy"]


def test_one_entry_reaches_every_old_table(toy: DatasetSpec) -> None:
    assert DATASET_DEFAULTS["toy"] is toy.settings
    assert KNOWN_FILES[TOY_FILE] is toy.known_files[0]
    assert MODELS["toy"].task == "binary" and loss_function("toy") is bce_loss
    assert sum(p.numel() for p in build_model("toy", seed=0).parameters()) == 4
    assert toy.default_silos == 3
    data = load("toy")
    assert (data.n_train, data.x_test.shape) == (60, (20, 3))


def test_a_changed_known_file_is_refused(toy: DatasetSpec, tmp_path: Path) -> None:
    (tmp_path / TOY_FILE).write_text(TOY_CSV.replace("1", "2", 1))
    with pytest.raises(ValueError, match=r"toy/records\.csv.*expected.*this test module"):
        load("toy")


def test_the_registry_refuses_a_second_entry_or_foreign_settings(toy: DatasetSpec) -> None:
    with pytest.raises(ValueError, match=r"dataset 'toy' is already registered"):
        register_dataset(toy)
    other = DatasetSpec(
        "toy2", "", load_toy, toy_model, DatasetSettings("toy", *_settings_fields(toy))
    )
    with pytest.raises(ValueError, match=r"dataset 'toy2' has the settings of 'toy'"):
        register_dataset(other)
    clash = DatasetSpec(
        "toy2",
        "",
        load_toy,
        toy_model,
        DatasetSettings("toy2", *_settings_fields(toy)),
        toy.known_files,
    )
    with pytest.raises(ValueError, match=r"toy2.*\['toy/records\.csv'\] are another dataset's"):
        register_dataset(clash)
    assert "toy2" not in DATASETS


def _settings_fields(spec: DatasetSpec) -> tuple:
    s = spec.settings
    return (s.users, s.n_silos, s.rounds, s.batch_size, s.distributions, s.families)


def test_every_built_in_dataset_is_one_complete_entry() -> None:
    """The five datasets of the paper: an entry each, the settings naming it, its loader and model importable."""
    assert set(DATASETS) >= {"creditcard", "mnist", "heart_disease", "tcga_brca", "synthetic"}
    for name, spec in DATASETS.items():
        assert spec.settings.dataset == name
        assert MODELS[name].task in ("multiclass", "binary", "survival")
    assert {known.relative_path.split("/")[0] for known in KNOWN_FILES.values()} == {
        "creditcard",
        "mnist",
        "heart_disease",
        "tcga_brca",
    }


@pytest.mark.parametrize("method", ["ULDP-AVG-w", "DEFAULT"])
def test_the_toy_dataset_runs_in_the_simulation_as_one_call_of_fit(
    toy: DatasetSpec, method: str
) -> None:
    """RunConfig fills its unset values from the toy's entry; the run's test losses and epsilons, round by round,
    are exactly (equal floats) those of uldp.fit on its records and allocation."""
    config = RunConfig(dataset="toy", method=method, n_users=12, rounds=2, seed=3)
    assert (config.n_silos, config.batch_size, config.local_epochs) == (3, 8, 2)
    assert config.global_lr == toy.settings.hyper(parse_method(method).family).global_lr
    federation, data = build_federation(config)
    allocation = federation.allocation
    model = build_model("toy", seed=0)
    model.load_state_dict(federation.model.state_dict())
    trained, history = uldp.fit(
        model,
        data.x_train,
        data.y_train,
        user_ids=allocation.user.tolist(),
        silo_ids=allocation.silo.tolist(),
        all_user_ids=range(allocation.n_users),
        loss=loss_function("toy"),
        method=method,
        sigma=config.sigma,
        delta=config.delta,
        rounds=config.rounds,
        seed=config.seed,
        test=(data.x_test, data.y_test),
        local_lr=config.local_lr,
        global_lr=config.global_lr,
        clip=config.clip,
        local_epochs=config.local_epochs,
        batch_size=config.batch_size,
    )
    result = run(config)
    assert history.column("loss") == result.test_loss
    assert history.column("epsilon") == result.epsilon
    assert result.accuracy and all(0.0 <= a <= 1.0 for a in result.accuracy)
    assert sum(p.numel() for p in trained.parameters()) == 4


@pytest.mark.parametrize("accountant", sorted(ACCOUNTANTS))
def test_the_toy_dataset_is_accounted_by_every_registered_accountant(
    toy: DatasetSpec, accountant: str
) -> None:
    config = RunConfig(
        dataset="toy", method="ULDP-AVG", n_users=12, rounds=2, seed=1, accountant=accountant
    )
    result = run(config)
    assert config.sigma == 5.0  # the registered datasets' default noise multiplier
    expected = [
        epsilon_for_method(
            "ULDP-AVG", sigma=5.0, rounds=r, delta=config.delta, accountant=accountant
        ).epsilon
        for r in result.round
    ]
    assert result.epsilon == pytest.approx(expected, rel=1e-12)
    first, last = result.epsilon[0], result.epsilon[-1]
    assert first is not None and last is not None and last > first > 0
