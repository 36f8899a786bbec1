"""uldp.fitting.inputs before any training: each bad input of a hospital's table gets one clear line (a ValueError
naming the bad value) or a FederationWarning, and training never starts for an error (``train_rounds`` is replaced
by a tripwire, so an error raised by training itself would show as the tripwire)."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn

import uldp
import uldp.fitting
from uldp.fitting import FederationWarning

FEATURES = ["age", "bmi", "sbp"]


class Trained(Exception):
    """Training started (the tripwire in place of ``train_rounds``)."""


def table(n: int = 60, users: int = 20, silos: int = 3) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(rng.normal(size=(n, len(FEATURES))), columns=FEATURES)
    frame["outcome"] = frame["age"] > 0  # pandas bool labels
    frame["mrn"] = [f"MRN-{u:05d}" for u in rng.integers(0, users, n)]
    frame["hospital"] = [f"Hospital {chr(65 + s)}" for s in rng.integers(0, silos, n)]
    return frame


def call(frame: pd.DataFrame, *, x=None, model=None, **arguments) -> None:
    arguments = {"method": "ULDP-AVG-w", "epsilon": 4.0, "rounds": 2, "seed": 0, **arguments}
    uldp.fit(
        model or nn.Linear(len(FEATURES), 1),
        frame[FEATURES] if x is None else x,
        frame["outcome"],
        user_ids=frame["mrn"],
        silo_ids=frame["hospital"],
        loss=nn.BCEWithLogitsLoss(),
        **arguments,
    )


@pytest.fixture(autouse=True)
def tripwire(monkeypatch):
    def trained(*args, **kwargs):
        raise Trained

    monkeypatch.setattr(uldp.fitting.api, "train_rounds", trained)


def one_record_hospital() -> pd.DataFrame:
    frame = table()
    frame.loc[0, "hospital"] = "Clinic Z"
    return frame


def every_record_in_one_hospital() -> pd.DataFrame:
    return table().assign(hospital="Hospital A")


#: (what is wrong, the table, fit's extra arguments, the words of its one line)
ERRORS = [
    (
        "a text column",
        table().assign(bmi="high"),
        {},
        r"x has non-numeric column\(s\) 'bmi' \(object\)",
    ),
    (
        "test set of another width",
        table(),
        {"test": (np.zeros((5, 4), np.float32), np.zeros(5))},
        r"x_test has records of shape \(4,\), the training records \(3,\)",
    ),
    (
        "model of another input width",
        table(),
        {"model": nn.Linear(5, 1)},
        r"the model cannot take x's records of shape \(3,\)",
    ),
    ("rounds 0", table(), {"rounds": 0}, r"rounds must be an integer >= 1, got 0"),
    ("labels as text", table().assign(outcome="yes"), {}, r"y has non-numeric column"),
]

WARNINGS = [
    ("a hospital with one record", one_record_hospital(), {}, r"silo 'Clinic Z' has 1 record"),
    (
        "every patient in one hospital",
        every_record_in_one_hospital(),
        {},
        r"one silo \('Hospital A'\) holds every record",
    ),
    ("delta above 1/|U|", table(), {"delta": 0.09}, r"delta 0.09 is above 1/\|U\| = 0.05"),
    ("epsilon too small", table(), {"epsilon": 0.01}, r"drowns the run's signal"),
]


@pytest.mark.parametrize(("what", "frame", "arguments", "said"), ERRORS, ids=[e[0] for e in ERRORS])
def test_each_bad_input_is_one_clear_line_before_training(what, frame, arguments, said):
    with pytest.raises(ValueError, match=said) as raised:
        call(frame, **arguments)
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize(
    ("what", "frame", "arguments", "said"), WARNINGS, ids=[w[0] for w in WARNINGS]
)
def test_each_doubtful_federation_warns_before_training(what, frame, arguments, said):
    with warnings.catch_warnings(record=True) as caught, pytest.raises(Trained):
        warnings.simplefilter("always")
        call(frame, **arguments)
    found = [str(w.message) for w in caught if issubclass(w.category, FederationWarning)]
    assert len(found) == 1 and re.search(said, found[0]), found


def test_a_sound_table_with_pandas_bool_labels_warns_nothing_and_trains():
    with warnings.catch_warnings(record=True) as caught, pytest.raises(Trained):
        warnings.simplefilter("always")
        call(table())
    assert not [w for w in caught if issubclass(w.category, FederationWarning)]


@pytest.mark.parametrize(
    "labels",
    [
        pd.Series([True, False, True]),
        pd.Series([True, False, True], dtype="boolean"),
        np.array([True, False, True]),
        torch.tensor([True, False, True]),
    ],
    ids=["pandas bool", "pandas boolean", "numpy bool", "torch bool"],
)
def test_bool_labels_are_0_1_targets(labels):
    records = uldp.fitting.resolve_records(
        nn.Linear(2, 1), nn.BCEWithLogitsLoss(), np.zeros((3, 2)), labels
    )
    assert records.y.tolist() == [1.0, 0.0, 1.0]
