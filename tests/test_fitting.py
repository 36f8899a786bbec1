"""uldp.fit: any model, records and ids; losses against torch's own, reproducibility, refusals, resume."""

from __future__ import annotations

import json
import math
import os
import struct
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings, strategies as st
from torch import nn
from torch.func import grad, vmap

import uldp
import uldp.fitting
from uldp.accounting import epsilon_uldp
from uldp.common.persist import (
    MAGIC,
    Checkpoint,
    array_from_bytes,
    load_checkpoint,
    save_checkpoint,
)
from uldp.data.base import Allocation
from uldp.fitting import (
    SeedWarning,
    UnsupportedModuleError,
    check_module,
    fit,
    index_ids,
    weighted_loss,
)
from uldp.methods import Federation, Hyperparameters, make_method
from uldp.methods.base import seed_stream
from uldp.models import build_model, loss_function
from uldp.simulation import RunConfig, _checkpoint_fingerprint, build_federation, run
from uldp.training.per_user import flat_parameters


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


def test_same_seed_gives_the_same_model_whatever_the_global_torch_seed():
    x, y, users, silos = records()
    runs = []
    for global_seed in (0, 12345):
        torch.manual_seed(global_seed)
        model, history = fit(
            mlp(),
            x,
            y,
            user_ids=users,
            silo_ids=silos,
            loss=nn.CrossEntropyLoss(),
            test=(x, y),
            seed=7,
            q=0.6,
            **SMALL,
        )
        runs.append(
            (
                uldp.flat_parameters(model),
                [{k: v for k, v in r.items() if k != "seconds"} for r in history.rows],
            )
        )
    torch.testing.assert_close(runs[0][0], runs[1][0], rtol=0, atol=0)
    assert runs[0][1] == runs[1][1]
    other, _ = fit(
        mlp(),
        x,
        y,
        user_ids=users,
        silo_ids=silos,
        loss=nn.CrossEntropyLoss(),
        seed=8,
        q=0.6,
        **SMALL,
    )
    assert not torch.equal(uldp.flat_parameters(other), runs[0][0])


def test_without_a_seed_the_noise_comes_from_os_entropy_and_the_membership_test_of_issue_30_fails():
    """Issue 30, item 3: an adversary who knows every record but the target's re-runs fit on D and on D minus the
    target and compares with the released model. With fit's seeded noise one of the two matched exactly; with OS
    entropy neither does, and the residual is of the noise's size."""
    x, y, users, silos = records()
    arguments: dict[str, Any] = dict(
        user_ids=users,
        silo_ids=silos,
        loss=nn.CrossEntropyLoss(),
        rounds=1,
        local_epochs=1,
        batch_size=8,
        sigma=1.0,
        clip=0.1,
        global_lr=1.0,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error", SeedWarning)  # no seed, no warning
        released, history = fit(mlp(), x, y, **arguments)
        again, _ = fit(mlp(), x, y, **arguments)
    assert not torch.equal(uldp.flat_parameters(released), uldp.flat_parameters(again))
    # the noise of ULDP-AVG-w's step: eta_g / (q |U| |S|) * sigma C (Algorithm 3 lines 6 and 18)
    noise_std = 1.0 * 1.0 * 0.1 / (len(history.users) * len(history.silos))
    target = users[0]
    keep = [u != target for u in users]
    for guess in (0, 1, 7):  # the seeds an adversary would try first
        with pytest.warns(SeedWarning, match="seed stays secret"):
            on_d, _ = fit(mlp(), x, y, seed=guess, **arguments)
        with pytest.warns(SeedWarning):
            without, _ = fit(
                mlp(),
                x[keep],
                y[keep],
                seed=guess,
                **{
                    **arguments,
                    "user_ids": np.array(users)[keep],
                    "silo_ids": np.array(silos)[keep],
                },
            )
        for candidate in (on_d, without):
            residual = float(
                (uldp.flat_parameters(released) - uldp.flat_parameters(candidate)).std()
            )
            assert residual > 0.5 * noise_std


def test_history_shows_no_ids():
    x, y, users, silos = records()
    _, history = fit(
        mlp(), x, y, user_ids=users, silo_ids=silos, loss=nn.CrossEntropyLoss(), **SMALL
    )
    shown = repr(history) + str(history)
    assert not any(u in shown for u in users) and not any(s in shown for s in silos)
    assert f"{len(set(users))} users" in shown and "2 rounds" in shown


@pytest.mark.parametrize("method", ["DEFAULT", "ULDP-AVG-w"])
def test_each_method_trains_a_model_that_is_not_the_papers_with_its_own_defaults(method):
    """Issue 33: DEFAULT took ULDP-AVG's eta_g = 10 and diverged; each method now has its own defaults."""
    x, y, users, silos = records(n=600, users=300)  # user-level noise shrinks with |U| (Theorem 3)
    x_test, y_test, _, _ = records(n=400, seed=1)
    net = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 2))
    privacy: dict[str, Any] = {} if method == "DEFAULT" else {"epsilon": 8.0}
    _, history = fit(
        net,
        x,
        y,
        user_ids=users,
        silo_ids=silos,
        loss=nn.CrossEntropyLoss(),
        method=method,
        rounds=5,
        test=(x_test, y_test),
        **privacy,
        metrics={"accuracy": lambda out, y: (out.argmax(-1) == y).float().mean()},
    )
    with torch.no_grad():
        initial = float(nn.CrossEntropyLoss()(net(x_test), y_test))
    losses = history.column("loss")
    assert losses[-1] < losses[0] < initial and all(math.isfinite(loss) for loss in losses)
    assert history.column("accuracy")[-1] > 0.7


def test_the_record_level_baseline_runs_in_one_call_and_reports_both_levels():
    """DP-SGD in each silo on every record: its record-level epsilon is Opacus' RDP accountant's, maximised over
    silos, and hits the target; the user-level one (group privacy over the most records of a user) is larger."""
    from opacus.accountants.analysis.rdp import compute_rdp, get_privacy_spent

    x, y, users, silos = records()
    _, history = fit(
        mlp(),
        x,
        y,
        user_ids=users,
        silo_ids=silos,
        loss=nn.CrossEntropyLoss(),
        method="DP-SGD",
        epsilon=4.0,
        rounds=2,
        batch_size=8,
    )
    record = history.column("record_epsilon")
    assert record[-1] == pytest.approx(4.0, rel=1e-3) and record[-1] <= 4.0 + 1e-9
    orders = np.concatenate([np.linspace(1.01, 8, 100), np.arange(8, 257)])
    per_silo = []
    for silo in sorted(set(silos)):
        n = sum(s == silo for s in silos)
        batches = math.ceil(n / 8)
        rdp = compute_rdp(
            q=1 / batches, noise_multiplier=history.sigma, steps=2 * batches, orders=orders
        )
        per_silo.append(get_privacy_spent(orders=orders, rdp=rdp, delta=1e-5)[0])
    assert record[-1] == pytest.approx(max(per_silo), rel=0.02)
    assert all(user > rec for user, rec in zip(history.column("epsilon"), record, strict=True))


@pytest.mark.slow
def test_every_private_method_takes_epsilon_and_an_unreachable_target_says_why():
    x, y, users, silos = records()
    arguments: dict[str, Any] = dict(
        user_ids=users, silo_ids=silos, loss=nn.CrossEntropyLoss(), rounds=1, batch_size=8
    )
    _, history = fit(mlp(), x, y, method="ULDP-GROUP-2", epsilon=6.0, **arguments)
    assert history.epsilon is not None and history.epsilon == pytest.approx(6.0, rel=1e-3)
    assert history.epsilon <= 6.0 + 1e-9
    _, history = fit(mlp(), x, y, method="ULDP-GROUP-2", epsilon=6.0, accountant="pld", **arguments)
    assert history.epsilon == pytest.approx(6.0, rel=1e-2)
    with pytest.raises(
        ValueError, match=r"cannot reach epsilon=0.01.*k=\d+ records it keeps per user"
    ):
        fit(mlp(), x, y, method="ULDP-GROUP-max", epsilon=0.01, **{**arguments, "rounds": 50})


def test_a_clip_far_from_the_update_norms_warns_and_says_how_to_choose_it_for_free():
    x, y, users, silos = records()
    arguments: dict[str, Any] = dict(
        user_ids=users,
        silo_ids=silos,
        loss=nn.CrossEntropyLoss(),
        rounds=1,
        sigma=1.0,
        local_epochs=1,
        batch_size=8,
    )
    with pytest.warns(
        uldp.fitting.ClipWarning, match="times off the median per-user update norm.*public or proxy"
    ):
        _, history = fit(mlp(), x, y, clip=1000.0, **arguments)
    median = history.info["update_norms"]["50%"]
    assert history.info["update_norms"]["10%"] <= median <= history.info["update_norms"]["90%"]
    with warnings.catch_warnings():
        warnings.simplefilter("error", uldp.fitting.ClipWarning)
        fit(mlp(), x, y, clip=median, **arguments)
    with pytest.warns(uldp.fitting.ClipWarning, match="shrinks most updates"):
        fit(mlp(), x, y, clip=median / 100, **arguments)


def test_fit_is_the_registry_method_on_the_ids_numbered_in_sorted_order():
    """An independent path: the method's rounds on a Federation built by hand, as the issue's user did."""
    x, y, users, silos = records()
    model, history = fit(
        mlp(),
        x,
        y,
        user_ids=users,
        silo_ids=silos,
        loss=nn.CrossEntropyLoss(),
        seed=3,
        q=0.7,
        global_lr=10.0,
        local_lr=0.01,
        clip=0.1,
        **SMALL,
    )
    user_names, silo_names = sorted(set(users)), sorted(set(silos))
    allocation = Allocation(
        np.array([user_names.index(u) for u in users]),
        np.array([silo_names.index(s) for s in silos]),
        len(user_names),
        len(silo_names),
        "",
        0,
    )
    hp = Hyperparameters(
        global_lr=10.0, local_lr=0.01, local_epochs=2, batch_size=8, clip=0.1, sigma=1.0, q=0.7
    )
    method = make_method("ULDP-AVG-w", hp)
    net = mlp()
    federation = Federation(net, uldp.models.cross_entropy_loss, x, y, allocation)
    params, root = uldp.flat_parameters(net), np.random.SeedSequence(3)
    for t in range(2):
        params = method.round(params, federation, seed_stream(root, 3, t))
    torch.testing.assert_close(uldp.flat_parameters(model), params)
    assert history.users == tuple(user_names) and history.silos == tuple(silo_names)
    assert history.column("epsilon") == [
        epsilon_uldp(sigma=1.0, rounds=t, delta=1e-5, q=0.7).epsilon for t in (1, 2)
    ]


def test_a_target_epsilon_is_met_after_the_last_round():
    x, y, users, silos = records()
    _, history = fit(
        mlp(),
        x,
        y,
        user_ids=users,
        silo_ids=silos,
        loss=nn.CrossEntropyLoss(),
        epsilon=3.0,
        q=0.5,
        rounds=3,
        local_epochs=1,
        batch_size=16,
    )
    assert history.epsilon is not None and 3.0 * (1 - 1e-4) <= history.epsilon <= 3.0
    assert history.sigma == pytest.approx(
        uldp.accounting.sigma_for_epsilon("ULDP-AVG-w", epsilon=3.0, rounds=3, delta=1e-5, q=0.5)
    )


def test_metrics_and_test_loss_are_reported_every_round_and_the_input_model_is_untouched():
    x, y, users, silos = records()
    model = mlp()
    before = uldp.flat_parameters(model)
    trained, history = fit(
        model,
        x,
        y,
        user_ids=users,
        silo_ids=silos,
        loss=nn.CrossEntropyLoss(),
        test=(x, y),
        metrics={"accuracy": lambda out, t: (out.argmax(-1) == t).float().mean()},
        **SMALL,
    )
    assert torch.equal(uldp.flat_parameters(model), before)
    trained.eval()
    with torch.no_grad():
        out = trained(x)
    assert history.rows[-1]["loss"] == pytest.approx(float(F.cross_entropy(out, y)), rel=1e-6)
    assert history.column("accuracy")[-1] == pytest.approx(
        float((out.argmax(-1) == y).float().mean())
    )
    with pytest.raises(ValueError, match="no 'auc'"):
        history.column("auc")


def test_a_run_resumed_from_its_checkpoint_continues_exactly(tmp_path, capsys):
    x, y, users, silos = records()
    arguments: dict[str, Any] = dict(
        user_ids=users,
        silo_ids=silos,
        loss=nn.CrossEntropyLoss(),
        sigma=1.0,
        local_epochs=1,
        batch_size=8,
        seed=0,
    )
    whole, _ = fit(mlp(), x, y, rounds=4, **arguments)
    path = tmp_path / "fit.ckpt"
    fit(mlp(), x, y, rounds=2, checkpoint=path, **arguments)
    resumed, history = fit(mlp(), x, y, rounds=4, checkpoint=path, progress=True, **arguments)
    assert history.resumed_from == 2 and [r["round"] for r in history.rows] == [1, 2, 3, 4]
    torch.testing.assert_close(
        uldp.flat_parameters(resumed), uldp.flat_parameters(whole), rtol=0, atol=0
    )
    assert "4/4" in capsys.readouterr().err
    with pytest.raises(
        ValueError,
        match=r"another configuration \(these differ: clip, sigma\).*another checkpoint= "
        "path",
    ) as refused:
        fit(mlp(), x, y, rounds=4, checkpoint=path, **{**arguments, "sigma": 2.0, "clip": 0.5})
    assert "--checkpoint" not in str(refused.value)
    with pytest.raises(ValueError, match="these differ: user_ids"):
        fit(
            mlp(),
            x,
            y,
            rounds=4,
            checkpoint=path,
            **{**arguments, "user_ids": [u + "x" for u in users]},
        )
    with pytest.raises(ValueError, match="holds 4 rounds, more than the 2 asked"):
        fit(mlp(), x, y, rounds=2, checkpoint=path, **arguments)
    with pytest.raises(ValueError, match="does not exist"):
        fit(mlp(), x, y, rounds=2, checkpoint=tmp_path / "missing" / "fit.ckpt", **arguments)


def _reseal(path: Path, change) -> None:
    """The attack: rewrite a checkpoint's history and seal it again with a fresh digest (the digest is unkeyed)."""
    data = path.read_bytes()[:-32]
    (length,) = struct.unpack_from("<I", data, len(MAGIC))
    header = json.loads(data[len(MAGIC) + 4 : len(MAGIC) + 4 + length])
    params = array_from_bytes(data[len(MAGIC) + 4 + length :])
    save_checkpoint(
        path,
        Checkpoint(
            header["rounds_done"],
            params,
            header["config_fingerprint"],
            tuple(change(header["history"])),
        ),
    )


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda rows: [{**row, "epsilon": 0.001} for row in rows], "round 1 says epsilon 0.001"),
        (lambda rows: [rows[0], {**rows[1], "epsilon": None}], "round 2 says epsilon None"),
        (lambda rows: [{"junk": 1}, {"junk": 2}], "row 0 must be an object with round 1"),
        (lambda rows: [rows[1], rows[0]], "row 0 must be an object with round 1"),
        (
            lambda rows: [
                rows[0],
                {key: value for key, value in rows[1].items() if key != "seconds"},
            ],
            "row 1 must hold",
        ),
        (lambda rows: [rows[0], {**rows[1], "seconds": -1.0}], "seconds must be"),
        (lambda rows: [rows[0], {**rows[1], "seconds": "fast"}], "seconds must be a number"),
    ],
)
def test_a_resealed_checkpoint_is_refused_unless_its_rows_are_what_the_run_writes(
    tmp_path, change, message
):
    x, y, users, silos = records()
    arguments: dict[str, Any] = dict(
        user_ids=users,
        silo_ids=silos,
        loss=nn.CrossEntropyLoss(),
        sigma=1.0,
        local_epochs=1,
        batch_size=8,
        rounds=2,
        checkpoint=tmp_path / "fit.ckpt",
    )
    _, honest = fit(mlp(), x, y, **arguments)
    _reseal(tmp_path / "fit.ckpt", lambda rows: rows)
    assert (
        fit(mlp(), x, y, **arguments)[1].rows == honest.rows
    )  # resealed as it was: resumed as it was
    _reseal(tmp_path / "fit.ckpt", change)
    with pytest.raises(ValueError, match=message):
        fit(mlp(), x, y, **arguments)


def test_default_takes_no_noise_and_other_methods_run_through_the_registry():
    x, y, users, silos = records()
    _, history = fit(
        mlp(),
        x,
        y,
        user_ids=users,
        silo_ids=silos,
        loss=nn.CrossEntropyLoss(),
        method="DEFAULT",
        rounds=1,
        local_epochs=1,
    )
    assert history.epsilon is None and history.sigma is None
    _, history = fit(
        mlp(),
        x,
        y,
        user_ids=users,
        silo_ids=silos,
        loss=nn.CrossEntropyLoss(),
        method="ULDP-NAIVE",
        **SMALL,
    )
    assert history.epsilon is not None and history.epsilon > 0


def test_the_method_class_alone_decides_which_hyperparameters_fit_leaves_unset(monkeypatch):
    from uldp.methods.uldp_avg import UserLevelMethod

    x, y, users, silos = records()
    arguments: dict[str, Any] = dict(
        user_ids=users,
        silo_ids=silos,
        loss=nn.CrossEntropyLoss(),
        method="ULDP-SGD",
        sigma=1.0,
        rounds=1,
        local_lr=0.5,
        local_epochs=3,
    )
    assert fit(mlp(), x, y, **arguments)[1].info["hyperparameters"].local_lr is None
    monkeypatch.setitem(UserLevelMethod.REQUIRED, "ULDP-SGD", ("local_lr", "clip", "sigma"))
    hp = fit(mlp(), x, y, **arguments)[1].info["hyperparameters"]
    assert (hp.local_lr, hp.local_epochs) == (0.5, None)


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(user_ids=["a"] * 5), "user_ids has 5 ids, x has 120 records"),
        (dict(user_ids=[None] + ["a"] * 119), "missing id"),
        (dict(silo_ids=[""] + ["a"] * 119), "silo_ids holds an empty or blank id"),
        (dict(user_ids=["  "] + ["a"] * 119), "user_ids holds an empty or blank id"),
        (
            dict(x=torch.zeros(0, 4), y=torch.zeros(0, dtype=torch.long), user_ids=[], silo_ids=[]),
            "x has no records",
        ),
        (dict(silo_ids=[1] + ["a"] * 119), "mixes id types that cannot be ordered"),
        (dict(user_ids=[[1, 2]] * 120), "one id per record"),
        (dict(y=torch.full((120,), 2)), r"labels must lie in 0..1"),
        (dict(y=torch.zeros(120)), "integer class labels"),
        (dict(y=torch.zeros(119, dtype=torch.long)), "y has 119 rows, x has 120"),
        (dict(x=np.array([["a"] * 4] * 120)), "x must be numeric"),
        (dict(x=torch.full((120, 4), float("nan"))), "NaN or infinite"),
        (dict(sigma=None), "exactly one of epsilon"),
        (dict(epsilon=1.0), "exactly one of epsilon"),
        (dict(method="ULDP-FAST"), "unknown method 'ULDP-FAST'"),
        (dict(q=0.0), "q"),
        (dict(model=lambda v: v), "must be a torch.nn.Module"),
        (dict(metrics={"a": len}), "need a test set"),
        (dict(test=(torch.zeros(3, 4),)), "pair"),
    ],
)
def test_bad_inputs_raise_named_value_errors(change, message):
    x, y, users, silos = records()
    arguments: dict[str, Any] = dict(
        model=mlp(), x=x, y=y, user_ids=users, silo_ids=silos, loss=nn.CrossEntropyLoss(), **SMALL
    )
    arguments.update(change)
    with pytest.raises(ValueError, match=message):
        fit(**arguments)


def test_bce_targets_are_checked_against_the_loss():
    x, _, users, silos = records()
    net = nn.Linear(4, 1)
    with pytest.raises(ValueError, match=r"0/1 targets"):
        fit(
            net,
            x,
            torch.full((120,), 2.0),
            user_ids=users,
            silo_ids=silos,
            loss=nn.BCEWithLogitsLoss(),
            **SMALL,
        )
    model, _ = fit(
        net,
        x,
        (x[:, 0] > 0).float(),
        user_ids=users,
        silo_ids=silos,
        loss=nn.BCEWithLogitsLoss(),
        **SMALL,
    )
    assert model(x).shape == (120, 1)


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


# ------------------------------------------------------------------ a registered dataset is one use of fit --
HEART = Path(
    os.environ.get("ULDP_DATA_DIR") or Path(__file__).resolve().parents[2] / "shared" / "data"
)


@pytest.mark.skipif(
    not (HEART / "heart_disease").is_dir(), reason="HeartDisease files not available"
)
@pytest.mark.parametrize(
    ("method", "n_users"),
    [
        ("ULDP-AVG-w", 20),
        ("ULDP-AVG", 20),
        ("ULDP-SGD-w", 20),
        ("ULDP-NAIVE", 20),
        ("ULDP-GROUP-2", 20),
        ("DEFAULT", 20),
        ("ULDP-AVG-w", 1000),
        ("ULDP-SGD", 1000),
    ],
)
def test_a_registered_dataset_is_one_call_of_fit(
    method: str, n_users: int, tmp_path: Path, monkeypatch
) -> None:
    """uldp.fit on HeartDisease's records, the allocation's user and silo ids, the paper's model, loss and
    hyperparameters ends at simulation.run's model bit for bit, with the same test losses and epsilons; with 1000
    users some hold no record, and fit counts them through all_user_ids."""
    monkeypatch.setenv("ULDP_DATA_DIR", str(HEART))
    config = RunConfig(
        dataset="heart_disease",
        method=method,
        n_users=n_users,
        rounds=2,
        seed=3,
        q=0.5 if method.startswith("ULDP-SGD") else 1.0,
        local_epochs=None if "SGD" in method else 2,
    )
    federation, data = build_federation(config)
    allocation = federation.allocation
    empty_users = int((allocation.counts.sum(axis=0) == 0).sum())
    assert (empty_users > 0) == (n_users == 1000)  # both cases are exercised
    model = build_model("heart_disease", seed=0)
    model.load_state_dict(
        federation.model.state_dict()
    )  # the paper's model with the run's initial weights
    trained, history = uldp.fit(
        model,
        data.x_train,
        data.y_train,
        user_ids=[f"user {u:04d}" for u in allocation.user],
        silo_ids=[f"centre {s}" for s in allocation.silo],
        loss=loss_function("heart_disease"),
        method=method,
        sigma=config.sigma,
        delta=config.delta,
        rounds=config.rounds,
        q=config.q,
        seed=config.seed,
        test=(data.x_test, data.y_test),
        local_lr=config.local_lr,
        global_lr=config.global_lr,
        clip=config.clip,
        local_epochs=config.local_epochs,
        batch_size=config.batch_size,
        all_user_ids=[f"user {u:04d}" for u in range(allocation.n_users)],
    )

    checkpoint = tmp_path / "run.ckpt"
    result = run(config, checkpoint=checkpoint)
    stored = load_checkpoint(checkpoint, config_fingerprint=_checkpoint_fingerprint(config, data))
    assert stored is not None
    assert torch.equal(flat_parameters(trained), torch.from_numpy(stored.params))
    assert history.column("loss") == result.test_loss
    assert history.column("epsilon") == result.epsilon
    assert len(history.users) == n_users


def test_all_user_ids_must_hold_every_user_of_the_records():
    x, y, users, silos = records()
    with pytest.raises(
        ValueError,
        match=r"user_ids holds 1 id\(s\) missing from the list of every user id, e.g. 'pat",
    ):
        fit(
            nn.Linear(4, 3),
            x,
            y,
            user_ids=users,
            silo_ids=silos,
            loss=nn.CrossEntropyLoss(),
            all_user_ids=sorted(set(users))[1:],
            **SMALL,
        )
    _, history = fit(
        nn.Linear(4, 3),
        x,
        y,
        user_ids=users,
        silo_ids=silos,
        loss=nn.CrossEntropyLoss(),
        all_user_ids=[*set(users), "nobody"],
        **SMALL,
    )
    assert "nobody" in history.users and len(history.users) == len(set(users)) + 1
    with pytest.raises(ValueError, match=r"a collection of ids, not one str \('patient-001'\)"):
        fit(
            nn.Linear(4, 3),
            x,
            y,
            user_ids=users,
            silo_ids=silos,
            loss=nn.CrossEntropyLoss(),
            all_user_ids="patient-001",
            **SMALL,
        )
    with pytest.raises(
        ValueError, match=r"the list of every user id holds a missing id \(None or NaN\)"
    ):
        fit(
            nn.Linear(4, 3),
            x,
            y,
            user_ids=users,
            silo_ids=silos,
            loss=nn.CrossEntropyLoss(),
            all_user_ids=[*set(users), None],
            **SMALL,
        )
