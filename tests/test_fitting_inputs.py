"""uldp.fitting.inputs before any training: each bad input of a hospital's table gets one clear line (a ValueError
naming the bad value) or a FederationWarning, and training never starts for an error (``train_rounds`` is replaced
by a tripwire, so an error raised by training itself would show as the tripwire). Torch losses adapted to the
weighted-loss interface equal torch's own and run under vmap, losses that cannot be weighted per record are refused
by name, a module per-user training cannot run (BatchNorm, a layer vmap cannot run) is refused naming the layer, and
raw ids map to their rank among the distinct ids."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F
from fitting_helpers import SMALL, records
from hypothesis import given, settings, strategies as st
from torch import nn
from torch.func import grad, vmap

import uldp
import uldp.fitting
from uldp.fitting import (
    FederationWarning,
    UnsupportedModuleError,
    check_module,
    fit,
    index_ids,
    weighted_loss,
)

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


def test_read_only_records_are_taken_without_a_warning_and_left_as_they_were():
    x = np.arange(12, dtype=np.float32).reshape(6, 2)
    y = np.array([0, 1, 1, 0, 1, 0])
    for array in (x, y):
        array.setflags(
            write=False
        )  # as pandas' copy-on-write or a memory-mapped file hands them over
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # torch warns when it shares read-only memory
        resolved = uldp.fitting.resolve_records(nn.Linear(2, 2), nn.CrossEntropyLoss(), x, y)
    resolved.x.add_(1.0)
    assert resolved.y.tolist() == y.tolist() and x[0].tolist() == [0.0, 1.0]


@pytest.mark.parametrize(
    "torch_loss, outputs, targets",
    [
        (nn.CrossEntropyLoss(), torch.randn(6, 3), torch.tensor([0, 2, 1, 1, 0, 2])),
        (
            nn.CrossEntropyLoss(label_smoothing=0.2),
            torch.randn(6, 3),
            torch.tensor([0, 2, 1, 1, 0, 2]),
        ),
        (nn.BCEWithLogitsLoss(), torch.randn(6, 1), torch.tensor([0.0, 1, 1, 0, 1, 0])[:, None]),
        (
            nn.BCEWithLogitsLoss(pos_weight=torch.tensor(3.0)),
            torch.randn(6),
            torch.tensor([0.0, 1, 1, 0, 1, 0]),
        ),
        (nn.MSELoss(), torch.randn(6, 2), torch.randn(6, 2)),
    ],
)
def test_adapted_losses_equal_torch_on_the_weighted_records_and_run_under_vmap(
    torch_loss, outputs, targets
):
    adapted = weighted_loss(torch_loss)
    weight = torch.tensor([1.0, 0, 1, 1, 0, 1])
    keep = weight.bool()
    torch.testing.assert_close(adapted(outputs, targets, None), torch_loss(outputs, targets))
    torch.testing.assert_close(
        adapted(outputs, targets, weight), torch_loss(outputs[keep], targets[keep])
    )
    per_user = vmap(grad(lambda o, t, w: adapted(o, t, w)))(
        outputs[None], targets[None], weight[None]
    )
    expected = torch.func.grad(lambda o: torch_loss(o[keep], targets[keep]))(outputs)
    torch.testing.assert_close(per_user[0], expected)


@pytest.mark.parametrize(
    "torch_loss, outputs, targets",
    [
        (nn.CrossEntropyLoss(), torch.randn(0, 3), torch.zeros(0, dtype=torch.long)),
        (nn.MSELoss(), torch.randn(0, 2), torch.randn(0, 2)),
    ],
)
def test_an_empty_batch_is_a_loss_of_zero_whose_gradient_is_zero(torch_loss, outputs, targets):
    """DP-SGD's Poisson sampling draws an empty batch now and then: it takes a pure-noise step, so its loss must
    backpropagate (a zero gradient), not fail to reshape."""
    outputs = outputs.requires_grad_()
    loss = weighted_loss(torch_loss)(outputs, targets, None)
    loss.backward()
    assert loss.item() == 0.0 and outputs.grad is not None and outputs.grad.shape == outputs.shape


def test_functional_and_callable_losses_match_the_module_losses():
    outputs, targets = torch.randn(5, 3), torch.tensor([0, 1, 2, 1, 0])
    reference = nn.CrossEntropyLoss()(outputs, targets)
    for loss in (
        F.cross_entropy,
        lambda o, t: F.cross_entropy(o, t, reduction="none"),
        uldp.models.cross_entropy_loss,
    ):
        torch.testing.assert_close(weighted_loss(loss)(outputs, targets), reference)


@pytest.mark.parametrize(
    "loss, message",
    [
        (nn.CrossEntropyLoss(reduction="sum"), "reduction must be 'mean'"),
        (nn.CrossEntropyLoss(weight=torch.ones(2)), "class weights"),
        (nn.HuberLoss(), "HuberLoss is not adapted"),
        (lambda o: o, "takes 1 arguments"),
        ("mse", "must be a torch loss or a callable"),
    ],
)
def test_losses_that_cannot_be_weighted_per_record_are_refused_by_name(loss, message):
    with pytest.raises(ValueError, match=message):
        weighted_loss(loss)


def test_batchnorm_is_refused_before_training_naming_the_layer_and_the_fix():
    model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Linear(8, 2))
    with pytest.raises(
        UnsupportedModuleError, match=r"layer '1' \(BatchNorm1d\).*nn.GroupNorm.*nn.LayerNorm"
    ):
        check_module(model)
    x, y, users, silos = records()
    with pytest.raises(ValueError, match="BatchNorm1d"):
        fit(model, x, y, user_ids=users, silo_ids=silos, loss=nn.CrossEntropyLoss(), **SMALL)
    with pytest.raises(UnsupportedModuleError, match="track_running_stats"):
        check_module(nn.InstanceNorm1d(3, track_running_stats=True))


def test_a_layer_vmap_cannot_run_fails_before_training_with_a_named_error():
    class InPlaceBuffer(nn.Module):
        seen: torch.Tensor

        def __init__(self) -> None:
            super().__init__()
            self.linear = nn.Linear(4, 2)
            self.register_buffer("seen", torch.zeros(1))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            self.seen += x.sum()  # an in-place buffer update, like BatchNorm's running statistics
            return self.linear(x)

    x, y, users, silos = records()
    with pytest.raises(UnsupportedModuleError, match="fails per-user training"):
        fit(
            InPlaceBuffer(),
            x,
            y,
            user_ids=users,
            silo_ids=silos,
            loss=nn.CrossEntropyLoss(),
            **SMALL,
        )


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.one_of(st.text(max_size=3), st.integers()).map(str).filter(str.strip),
        min_size=1,
        max_size=30,
    )
)
def test_ids_map_to_their_rank_among_the_distinct_ids(ids):
    codes, labels = index_ids("user_ids", ids, len(ids))
    assert list(labels) == sorted(set(ids))
    assert [labels[c] for c in codes] == ids
