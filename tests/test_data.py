"""Loaders (uldp.data.*) and data-file resolution (uldp.data.paths) on the real offline files."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from uldp.data import DATASETS, creditcard, load, paths

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"


@pytest.fixture(scope="module")
def data_dir() -> Path:
    import os

    chosen = Path(os.environ.get("ULDP_DATA_DIR", DATA))
    if not (chosen / "heart_disease").is_dir():
        pytest.skip(f"no dataset files in {chosen}")
    return chosen


@pytest.fixture(scope="module")
def heart(data_dir):
    return load("heart_disease", data_dir)


@pytest.fixture(scope="module")
def tcga(data_dir):
    return load("tcga_brca", data_dir)


# --- paths -----------------------------------------------------------------------------------------------------


def test_data_dir_comes_from_argument_then_environment(data_dir, monkeypatch, tmp_path):
    monkeypatch.setenv(paths.ENV_VAR, str(data_dir))
    assert paths.resolve_data_dir() == data_dir
    assert paths.resolve_data_dir(tmp_path) == tmp_path
    monkeypatch.delenv(paths.ENV_VAR)
    with pytest.raises(FileNotFoundError, match="ULDP_DATA_DIR"):
        paths.resolve_data_dir()


def test_missing_file_names_expected_path_and_source(tmp_path):
    with pytest.raises(FileNotFoundError) as error:
        load("tcga_brca", tmp_path)
    message = str(error.value)
    assert str(tmp_path / "tcga_brca" / "brca.csv") in message
    assert "FLamby" in message


def test_known_checksums_match_the_files(data_dir):
    for relative, known in paths.KNOWN_FILES.items():
        if known.sha256 and (data_dir / relative).is_file():
            assert paths.sha256_of(data_dir / relative) == known.sha256, relative


def test_a_modified_file_fails_its_checksum(data_dir, tmp_path):
    (tmp_path / "heart_disease").mkdir()
    for name in ("cleveland", "hungarian", "switzerland", "va"):
        shutil.copy(data_dir / f"heart_disease/processed.{name}.data", tmp_path / "heart_disease")
    with open(tmp_path / "heart_disease/processed.va.data", "a") as handle:
        handle.write("63,1,4,140,260,0,1,112,1,3,2,?,?,2\n")
    with pytest.raises(ValueError, match="sha256"):
        load("heart_disease", tmp_path)


def test_unknown_dataset_is_rejected():
    with pytest.raises(ValueError, match="'cifar'"):
        load("cifar")


# --- HeartDisease: FLamby's counts (its README: train/test 199/104, 172/89, 30/16, 85/45) ----------------------


def test_heart_disease_matches_flamby_split(heart, data_dir):
    assert np.bincount(heart.train_silo).tolist() == [199, 172, 30, 85]
    assert np.bincount(heart.info["test_silo"]).tolist() == [104, 89, 16, 45]
    assert heart.x_train.shape[1] == 13 and heart.task == "binary" and heart.n_fixed_silos == 4
    # Independent count of positive labels among complete rows of the raw UCI files.
    positives = 0
    for name in ("cleveland", "hungarian", "switzerland", "va"):
        raw = np.genfromtxt(
            data_dir / f"heart_disease/processed.{name}.data", delimiter=",", missing_values="?"
        )
        complete = ~np.isnan(np.delete(raw, [10, 11, 12], axis=1)).any(axis=1)
        positives += int((raw[complete, 13] > 0).sum())
    assert int(heart.y_train.sum() + heart.y_test.sum()) == positives
    assert set(torch.cat([heart.y_train, heart.y_test]).unique().tolist()) == {0.0, 1.0}


def test_heart_disease_standardised_per_centre_on_train(heart):
    for centre in range(4):
        rows = heart.x_train[torch.from_numpy(heart.train_silo == centre)]
        std = rows.std(dim=0)
        varying = std > 0
        assert torch.allclose(rows.mean(dim=0), torch.zeros(13), atol=1e-5)
        assert torch.allclose(std[varying], torch.ones(int(varying.sum())), atol=1e-4)


def _raw_heart_disease(data_dir):
    """The encoded records, labels, centres and train flags, rebuilt with NumPy alone from the UCI files."""
    from sklearn.model_selection import train_test_split

    rows, labels, centres, train = [], [], [], []
    for centre, name in enumerate(("cleveland", "hungarian", "switzerland", "va")):
        raw = np.genfromtxt(
            data_dir / f"heart_disease/processed.{name}.data", delimiter=",", missing_values="?"
        )
        raw = np.delete(raw, [10, 11, 12], axis=1)
        raw = raw[~np.isnan(raw).any(axis=1)]
        label = (raw[:, -1] > 0).astype(int)
        stratify = label if len(set(label)) > 1 and np.bincount(label).min() > 2 else None
        _, test = train_test_split(
            np.arange(len(raw)),
            train_size=0.66,
            test_size=0.34,
            random_state=43,
            shuffle=True,
            stratify=stratify,
        )
        rows.append(raw[:, :-1])
        labels.append(label)
        centres.append(np.full(len(raw), centre))
        train.append(~np.isin(np.arange(len(raw)), test))
    features = np.concatenate(rows)
    # one-hot of chest pain type (column 2: 1..4) and resting ECG (column 6: 0..2), first level dropped, appended
    kept = features[:, [0, 1, 3, 4, 5, 7, 8, 9]]
    dummies = [features[:, [2]] == value for value in (2, 3, 4)] + [
        features[:, [6]] == value for value in (1, 2)
    ]
    encoded = np.hstack([kept] + [d.astype(float) for d in dummies])
    return encoded, np.concatenate(labels), np.concatenate(centres), np.concatenate(train)


def test_heart_disease_scorings_standardise_the_test_set_as_flamby(data_dir):
    """ "pooled" (the authors'): test records standardised with the pooled training mean and std (ddof 1) + 1e-9;
    "per-centre": with their centre's; the training records are standardised per centre either way."""
    encoded, _, centre, train = _raw_heart_disease(data_dir)
    order = np.argsort(centre, kind="stable")  # the loader orders records by centre
    encoded, centre, train = encoded[order], centre[order], train[order]
    pooled = load("heart_disease", data_dir)
    per_centre = load("heart_disease", data_dir, test_scoring="per-centre")
    assert torch.equal(pooled.x_train, per_centre.x_train)
    reference = encoded[train]
    expected_pooled = (encoded[~train] - reference.mean(0)) / (reference.std(0, ddof=1) + 1e-9)
    np.testing.assert_allclose(pooled.x_test.numpy(), expected_pooled, atol=2e-5)
    expected_per_centre = np.empty_like(expected_pooled)
    for c in range(4):
        own = encoded[train & (centre == c)]
        expected_per_centre[centre[~train] == c] = (
            encoded[~train & (centre == c)] - own.mean(0)
        ) / (own.std(0, ddof=1) + 1e-9)
    np.testing.assert_allclose(per_centre.x_test.numpy(), expected_per_centre, atol=2e-5)
    assert not np.allclose(expected_pooled, expected_per_centre, atol=1e-3)
    assert (
        "pooled test set" in pooled.variant and "centre's training statistics" in per_centre.variant
    )


def test_test_scoring_is_refused_where_a_dataset_has_no_such_variant(data_dir):
    with pytest.raises(ValueError, match="'global'"):
        load("heart_disease", data_dir, test_scoring="global")
    with pytest.raises(ValueError, match="one test set"):
        load("synthetic", data_dir, test_scoring="per-centre")


# --- TcgaBrca ----------------------------------------------------------------------------------------------------


def test_tcga_brca_scorings_give_the_same_test_set(tcga, data_dir):
    """FLamby does not standardise TcgaBrca: its pooled test set is its per-centre test sets together, so the
    scoring cannot change a run (experiments.effective_arguments drops it from TcgaBrca's keys)."""
    per_centre = load("tcga_brca", data_dir, test_scoring="per-centre")
    assert torch.equal(tcga.x_test, per_centre.x_test) and torch.equal(
        tcga.y_test, per_centre.y_test
    )
    # FLamby's pooled test set takes the patients whose "fold" is "test": the per-centre test sets together
    brca = pd.read_csv(data_dir / "tcga_brca/brca.csv")
    split = pd.read_csv(data_dir / "tcga_brca/train_test_split.csv")
    pooled = brca[brca["pid"].isin(split.loc[split["fold"] == "test", "pid"])]
    assert len(pooled) == tcga.x_test.shape[0]
    assert float(tcga.y_test[:, 1].sum()) == pytest.approx(float(pooled["T"].sum()))
    assert torch.equal(tcga.x_train, per_centre.x_train)


def test_tcga_brca_matches_flamby_split(tcga, data_dir):
    assert np.bincount(tcga.train_silo).tolist() == [248, 156, 164, 129, 129, 40]
    assert np.bincount(tcga.info["test_silo"]).tolist() == [63, 40, 42, 33, 33, 11]
    assert tcga.x_train.shape == (866, 39) and tcga.x_test.shape == (222, 39)
    assert tcga.task == "survival" and tcga.labels is None
    # Events and times of the kept patients, looked up independently by pid.
    brca = pd.read_csv(data_dir / "tcga_brca/brca.csv").set_index("pid")
    split = pd.read_csv(data_dir / "tcga_brca/train_test_split.csv")
    train_pids = split.loc[split["fold"] == "train", "pid"]
    assert int(tcga.y_train[:, 0].sum()) == int(brca.loc[train_pids, "E"].sum())
    assert float(tcga.y_train[:, 1].sum()) == pytest.approx(float(brca.loc[train_pids, "T"].sum()))
    assert torch.equal(tcga.y_train[:, 0].unique(), torch.tensor([0.0, 1.0]))


# --- MNIST (label counts from the data README) -------------------------------------------------------------------


def test_mnist_shapes_labels_and_normalisation(data_dir):
    mnist = load("mnist", data_dir)
    assert mnist.x_train.shape == (60000, 1, 28, 28) and mnist.x_test.shape == (10000, 1, 28, 28)
    assert mnist.labels is not None
    assert np.bincount(mnist.labels).tolist() == [
        5923,
        6742,
        5958,
        6131,
        5842,
        5421,
        5918,
        6265,
        5851,
        5949,
    ]
    assert np.bincount(mnist.y_test.numpy()).tolist() == [
        980,
        1135,
        1032,
        1010,
        982,
        892,
        958,
        1028,
        974,
        1009,
    ]
    assert abs(float(mnist.x_train.mean())) < 1e-3 and abs(float(mnist.x_train.std()) - 1.0) < 1e-3
    assert float(mnist.x_train.min()) == pytest.approx(-0.1307 / 0.3081, abs=1e-5)


# --- Creditcard --------------------------------------------------------------------------------------------------


def test_creditcard_subset_split(data_dir):
    data = load("creditcard", data_dir)
    assert data.variant.startswith("creditcard-subset")
    assert (data.n_train, data.x_test.shape[0]) == (4600, 812)
    assert (int(data.y_train.sum()), int(data.y_test.sum())) == (418, 74)
    assert data.x_train.shape[1] == 30 and data.y_train.dtype == torch.int64
    assert torch.allclose(data.x_train.mean(dim=0), torch.zeros(30), atol=1e-4)


def test_creditcard_full_file_gets_paper_undersampling(tmp_path, monkeypatch):
    """A stand-in 'full' file (row check scaled down) goes through the split + undersampling path."""
    rng = np.random.default_rng(0)
    n_rows, n_fraud = 4000, 100
    frame = pd.DataFrame(
        rng.normal(size=(n_rows, 30)), columns=["Time", *[f"V{i}" for i in range(1, 29)], "Amount"]
    )
    frame["Class"] = 0
    frame.loc[rng.choice(n_rows, n_fraud, replace=False), "Class"] = 1
    (tmp_path / "creditcard").mkdir()
    frame.to_csv(tmp_path / "creditcard/creditcard.csv", index=False)
    monkeypatch.setattr(creditcard, "FULL_ROWS", n_rows)
    data = load("creditcard", tmp_path)
    assert data.variant.startswith("creditcard-full")
    assert data.x_test.shape[0] == 600  # ceil(0.15 * 4000)
    train_fraud, train_normal = (
        85,
        3400 - 85,
    )  # stratified 85% of 100 frauds and of 3900 normal rows
    assert int(data.y_train.sum()) == train_fraud
    assert data.n_train == train_fraud + int(0.1 * train_normal)


def test_creditcard_full_file_with_wrong_shape_is_rejected(tmp_path):
    (tmp_path / "creditcard").mkdir()
    pd.DataFrame({"Time": [0.0], "Class": [0]}).to_csv(
        tmp_path / "creditcard/creditcard.csv", index=False
    )
    with pytest.raises(ValueError, match="284807"):
        load("creditcard", tmp_path)


# --- synthetic ---------------------------------------------------------------------------------------------------


def test_synthetic_is_deterministic_and_sized_for_16_parameters():
    first, second = load("synthetic"), load("synthetic")
    assert first.n_train == 10_000 and first.x_train.shape[1] + 1 == 16
    assert torch.equal(first.x_train, second.x_train) and torch.equal(first.y_train, second.y_train)
    assert 0.45 < float(first.y_train.mean()) < 0.55


def test_registry_names_match_dataset_names():
    assert sorted(DATASETS) == ["creditcard", "heart_disease", "mnist", "synthetic", "tcga_brca"]
    assert load("synthetic").name == "synthetic"


def test_mnist_reader_rejects_a_non_idx_file(tmp_path):
    from uldp.data.mnist import read_idx

    bogus = tmp_path / "bogus.gz"
    with gzip.open(bogus, "wb") as handle:
        handle.write(b"\x00\x00\x09\x99" + bytes(8))
    with pytest.raises(ValueError, match="magic"):
        read_idx(bogus)
