"""uldp.fit (uldp.fitting.api) end to end: reproducibility with a seed and OS entropy without one, a History that
shows no ids, each method's own defaults, the record-level baseline, the registry method on the ids numbered in
sorted order, metrics and test losses per round, the refusals of bad inputs, and a registered dataset as one call of
fit that ends at simulation.run's model bit for bit."""

from __future__ import annotations

import math
import os
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from fitting_helpers import SMALL, fit_arguments, mlp, records
from torch import nn

import uldp
from uldp.accounting import epsilon_uldp
from uldp.common.persist import load_checkpoint
from uldp.data.base import Allocation
from uldp.fitting import SeedWarning, fit
from uldp.methods import Federation, Hyperparameters, make_method
from uldp.methods.base import seed_stream
from uldp.models import build_model, loss_function
from uldp.simulation import RunConfig, _checkpoint_fingerprint, build_federation, run
from uldp.training.per_user import flat_parameters


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
    arguments = fit_arguments(
        users,
        silos,
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
    arguments = fit_arguments(
        users,
        silos,
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
