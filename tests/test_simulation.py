"""RunConfig validation and defaults, short real HeartDisease runs of every method, epsilon without training, the
``uldp run`` CLI."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import pytest

from uldp.secure.config import ProtocolParameters
from uldp.simulation import RunConfig, accounted_epsilon, run

DATA = os.environ.get("ULDP_DATA_DIR") or str(
    Path(__file__).resolve().parents[2] / "shared" / "data"
)
needs_data = pytest.mark.skipif(
    not os.path.isdir(os.path.join(DATA, "heart_disease")),
    reason="HeartDisease files not available",
)


def _floats(values: list[float | None]) -> list[float]:
    """``values``, failing the test where one is ``None`` (a private run has an epsilon after every round)."""
    floats = [value for value in values if value is not None]
    assert len(floats) == len(values), values
    return floats


@pytest.fixture(autouse=True)
def data_dir(monkeypatch):
    monkeypatch.setenv("ULDP_DATA_DIR", DATA)


def test_defaults_come_from_the_paper_settings():
    avg = RunConfig(dataset="heart_disease", method="ULDP-AVG-w", n_users=50, rounds=2)
    assert (
        avg.global_lr,
        avg.clip,
        avg.local_lr,
        avg.local_epochs,
        avg.sigma,
        avg.batch_size,
        avg.n_silos,
    ) == (10.0, 0.1, 0.001, 50, 5.0, 4, 4)
    sgd = RunConfig(dataset="creditcard", method="ULDP-SGD", n_users=100, rounds=2)
    assert (sgd.global_lr, sgd.local_lr, sgd.local_epochs, sgd.batch_size, sgd.n_silos) == (
        10.0,
        None,
        None,
        64,
        5,
    )
    group = RunConfig(dataset="tcga_brca", method="ULDP-GROUP-8", n_users=50, rounds=2)
    assert (group.global_lr, group.clip) == (0.1, 100.0)
    assert RunConfig(dataset="mnist", method="ULDP-AVG", n_users=10000, rounds=1).global_lr == 100.0
    assert RunConfig(dataset="heart_disease", method="DEFAULT", n_users=5, rounds=1).sigma is None


def test_the_method_class_alone_decides_which_paper_hyperparameters_a_run_leaves_unset(monkeypatch):
    from uldp.methods.fedavg import FedAvgMethod

    assert (
        RunConfig(dataset="heart_disease", method="ULDP-NAIVE", n_users=5, rounds=1).local_epochs
        == 50
    )
    monkeypatch.setitem(FedAvgMethod.REQUIRED, "ULDP-NAIVE", ("local_lr", "clip", "sigma"))
    assert (
        RunConfig(dataset="heart_disease", method="ULDP-NAIVE", n_users=5, rounds=1).local_epochs
        is None
    )


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"method": "FEDPROX"}, "known methods: DEFAULT, ULDP-NAIVE, ULDP-GROUP-k"),
        ({"clip": 0.0}, "clip must be a finite number > 0"),
        ({"clip": -1.0}, "clip must be"),
        ({"sigma": 0.0}, "sigma must be"),
        ({"global_lr": -0.1}, "global_lr must be"),
        ({"local_lr": 0.0}, "local_lr must be"),
        ({"q": 0.0}, r"q \(user-level sampling rate\) must be a number in \(0, 1\], got 0.0"),
        ({"q": 1.2}, r"must be a number in \(0, 1\], got 1.2"),
        ({"q": True}, r"must be a number in \(0, 1\], got True"),
        ({"user_weights": ((0.5, 0.2), (0.4, 0.8))}, "summing to 1"),
        ({"user_weights": ((1.5, 0.2), (-0.5, 0.8))}, "summing to 1"),
        (
            {"secure": True, "method": "ULDP-AVG-w", "user_weights": ((1.0, 1.0),)},
            "secure=True runs Protocol 1 for ULDP-AVG-w, which computes the weights n_su / N_u, not fixed",
        ),
        ({"distribution": "pareto"}, "distribution must be"),
        ({"n_users": 0}, "n_users must be"),
        ({"dataset": "cifar"}, "unknown dataset"),
    ],
)
def test_invalid_configs_raise_clear_errors(changes, message):
    arguments = {
        "dataset": "heart_disease",
        "method": "ULDP-AVG",
        "n_users": 2,
        "rounds": 1,
        **changes,
    }
    with pytest.raises(ValueError, match=message):
        RunConfig(**arguments)


def test_q_is_rejected_for_methods_without_user_sampling():
    with pytest.raises(ValueError, match="only defined for ULDP-SGD/AVG"):
        RunConfig(dataset="heart_disease", method="ULDP-NAIVE", n_users=10, rounds=1, q=0.5)


@needs_data
@pytest.mark.parametrize(
    "method",
    [
        "DEFAULT",
        "ULDP-NAIVE",
        "ULDP-GROUP-2",
        "ULDP-GROUP-median",
        "ULDP-SGD",
        "ULDP-SGD-w",
        "ULDP-AVG",
        "ULDP-AVG-w",
    ],
)
def test_short_heart_disease_run_of_every_method(method):
    config = RunConfig(
        dataset="heart_disease",
        method=method,
        n_users=20,
        rounds=3,
        seed=1,
        local_epochs=2,
        q=0.5 if method == "ULDP-AVG-w" else 1.0,
    )
    result = run(config)
    assert result.round == [1, 2, 3]
    for series in (result.test_loss, result.accuracy, result.balanced_accuracy):
        assert len(series) == 3 and all(math.isfinite(v) for v in series)
    if method == "DEFAULT":
        assert result.epsilon == [None] * 3
        assert result.test_loss[-1] < result.test_loss[0]  # it learns
    else:
        epsilons = _floats(result.epsilon)
        assert all(math.isfinite(e) and e > 0 for e in epsilons)
        assert epsilons == sorted(epsilons) and epsilons[0] < epsilons[-1]
    # the accountant needs no training: the same epsilon after every round from the prepared federation alone
    assert [accounted_epsilon(config, rounds=t) for t in (1, 2, 3)] == result.epsilon


@needs_data
@pytest.mark.parametrize("rounds", [0, 4, 1.5, True])
def test_accounted_epsilon_rejects_rounds_outside_the_run(rounds):
    config = RunConfig(dataset="heart_disease", method="ULDP-AVG", n_users=10, rounds=3)
    with pytest.raises(ValueError, match=rf"rounds must be an integer in 1\.\.3, got {rounds!r}"):
        accounted_epsilon(config, rounds=rounds)


@needs_data
def test_same_seed_same_run_and_other_seed_differs():
    config = RunConfig(
        dataset="heart_disease", method="ULDP-AVG", n_users=10, rounds=2, seed=3, local_epochs=1
    )
    first, second = run(config), run(config)
    assert first.test_loss == second.test_loss
    other = run(RunConfig(**{**config.__dict__, "seed": 4}))
    assert other.test_loss != first.test_loss


def test_a_run_records_its_dataset_variant_and_scores_as_its_test_scoring_says():
    config = RunConfig(
        dataset="heart_disease", method="ULDP-AVG", n_users=10, rounds=1, seed=3, local_epochs=1
    )
    pooled = run(config)
    per_centre = run(RunConfig(**{**config.__dict__, "test_scoring": "per-centre"}))
    assert "pooled test set" in pooled.info["dataset_variant"]
    assert "centre's training statistics" in per_centre.info["dataset_variant"]
    assert pooled.test_loss != per_centre.test_loss  # one model, two test sets
    with pytest.raises(ValueError, match="one test set"):
        RunConfig(
            dataset="synthetic", method="ULDP-AVG", n_users=10, rounds=1, test_scoring="per-centre"
        )


def small_creditcard_run(method: str, **changes) -> RunConfig:
    """Four rounds of ``method`` on 400 Creditcard records of 20 users (an MLP with dropout)."""
    return RunConfig(
        dataset="creditcard",
        method=method,
        n_users=20,
        rounds=4,
        seed=2,
        local_epochs=1,
        max_train_records=400,
        **changes,
    )


def interrupt_third_call(monkeypatch, owner: object, name: str) -> None:
    """Make the third call of ``owner.name`` (a function or a method) raise KeyboardInterrupt, as Ctrl-C would."""
    real, calls = getattr(owner, name), []

    def stopping(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, stopping)


@pytest.mark.skipif(
    not os.path.isdir(os.path.join(DATA, "creditcard")), reason="Creditcard files not available"
)
@pytest.mark.parametrize(
    "method, changes", [("DEFAULT", {}), ("ULDP-GROUP-2", {}), ("ULDP-AVG-w", {"q": 0.5})]
)
def test_a_run_interrupted_and_resumed_from_its_checkpoint_ends_exactly_as_an_uninterrupted_one(
    method, changes, tmp_path, monkeypatch
):
    # The Creditcard MLP has dropout: per-silo generators (DEFAULT, DP-SGD) and torch's global one (ULDP-AVG-w)
    config = small_creditcard_run(method, **changes)
    straight = run(config)
    path = tmp_path / "run.ckpt"
    import uldp.simulation

    interrupt_third_call(monkeypatch, uldp.simulation, "evaluate")
    with pytest.raises(KeyboardInterrupt):
        run(config, checkpoint=path, checkpoint_seconds=0)
    monkeypatch.undo()
    resumed = run(config, checkpoint=path)
    assert resumed.info["resumed_from_round"] == 2 and resumed.info["resumed_seconds"] > 0
    for series in ("round", "test_loss", "accuracy", "balanced_accuracy", "epsilon"):
        assert getattr(resumed, series) == getattr(straight, series), series
    # the file is kept after the last round: a second call trains nothing and returns the same result
    again = run(config, checkpoint=path)
    assert again.info["resumed_from_round"] == 4 and again.test_loss == straight.test_loss
    with pytest.raises(ValueError, match="belongs to another configuration"):
        run(RunConfig(**{**config.__dict__, "seed": 3}), checkpoint=path)


@pytest.mark.skipif(
    not os.path.isdir(os.path.join(DATA, "creditcard")), reason="Creditcard files not available"
)
@pytest.mark.parametrize("stop_in", ["evaluate", "round"])
def test_an_interrupt_saves_the_rounds_completed_since_the_last_save(
    stop_in, tmp_path, monkeypatch
):
    # checkpoint_seconds far beyond the run: only the last round or an interrupt saves; stopped in round 3 (in its
    # training or its evaluation, when the model has already moved on), the file holds rounds 1-2 and their model
    config = small_creditcard_run("ULDP-AVG")
    straight = run(config)
    path = tmp_path / "run.ckpt"
    import uldp.simulation
    from uldp.methods.uldp_avg import UserLevelMethod

    owner, name = (
        (uldp.simulation, "evaluate") if stop_in == "evaluate" else (UserLevelMethod, "round")
    )
    interrupt_third_call(monkeypatch, owner, name)
    with pytest.raises(KeyboardInterrupt):
        run(config, checkpoint=path, checkpoint_seconds=3600)
    monkeypatch.undo()
    resumed = run(config, checkpoint=path)
    assert resumed.info["resumed_from_round"] == 2
    for series in ("round", "test_loss", "accuracy", "epsilon"):
        assert getattr(resumed, series) == getattr(straight, series), series


def heart_disease_run(*, rounds: int) -> list[str]:
    """``uldp run``'s arguments of a small ULDP-AVG-w run on HeartDisease with a JSON report."""
    options = {
        "dataset": "heart_disease",
        "method": "ULDP-AVG-w",
        "users": 8,
        "local-epochs": 1,
        "seed": 0,
    }
    options["rounds"] = rounds
    return ["run", *(f"--{name}={value}" for name, value in options.items()), "--json"]


@needs_data
def test_uldp_run_stopped_by_sigterm_saves_its_rounds_and_the_same_command_resumes(
    tmp_path, monkeypatch, capsys
):
    import signal

    import uldp.simulation
    from uldp.cli import main

    path = tmp_path / "cli.ckpt"
    arguments = heart_disease_run(rounds=4)
    assert main(arguments) == 0
    straight = json.loads(capsys.readouterr().out)["rounds"]
    real, calls = uldp.simulation.evaluate, []

    def terminated_in_round_3(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            os.kill(os.getpid(), signal.SIGTERM)  # as `timeout` or `kill PID` would
        return real(*args, **kwargs)

    monkeypatch.setattr(uldp.simulation, "evaluate", terminated_in_round_3)
    assert main([*arguments, "--checkpoint", str(path)]) == 130
    captured = capsys.readouterr()
    assert captured.out == ""
    assert f"stopped by SIGTERM; its completed rounds are saved in {path}" in captured.err
    monkeypatch.undo()
    assert main([*arguments, "--checkpoint", str(path)]) == 0
    resumed = json.loads(capsys.readouterr().out)
    assert resumed["info"]["resumed_from_round"] == 2
    assert [{k: v for k, v in row.items() if k != "seconds"} for row in resumed["rounds"]] == [
        {k: v for k, v in row.items() if k != "seconds"} for row in straight
    ]


@needs_data
def test_checkpoint_arguments_are_checked(tmp_path):
    path = tmp_path / "run.ckpt"
    config = RunConfig(
        dataset="heart_disease", method="ULDP-AVG-w", n_users=10, rounds=1, secure=True
    )
    with pytest.raises(
        ValueError, match="checkpoint is not supported with a secure or custom aggregation"
    ):
        run(config, checkpoint=path)
    bad: Any  # values of the wrong type on purpose
    for bad in (-1, True, "60", float("nan")):
        with pytest.raises(
            ValueError, match=rf"checkpoint_seconds must be a number >= 0, got {bad!r}"
        ):
            run(
                RunConfig(dataset="heart_disease", method="DEFAULT", n_users=10, rounds=1),
                checkpoint=path,
                checkpoint_seconds=bad,
            )
    assert not path.exists()  # refused before anything is written


@needs_data
def test_default_learns_over_more_rounds():
    result = run(
        RunConfig(
            dataset="heart_disease",
            method="DEFAULT",
            n_users=10,
            rounds=4,
            local_epochs=3,
            local_lr=0.01,
            seed=0,
        )
    )
    assert result.test_loss[-1] < result.test_loss[0] - 1e-3


@needs_data
def test_cli_prints_json_last(capsys, tmp_path):
    from uldp.cli import main

    assert (
        main(
            [
                "run",
                "--dataset",
                "heart_disease",
                "--method",
                "ULDP-GROUP",
                "--k",
                "2",
                "--users",
                "8",
                "--rounds",
                "2",
                "--local-epochs",
                "1",
                "--seed",
                "0",
                "--json",
            ]
        )
        == 0
    )
    payload = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert payload["config"]["method"] == "ULDP-GROUP-2"
    assert [set(row) for row in payload["rounds"]] == [
        {"round", "loss", "accuracy", "epsilon", "seconds"}
    ] * 2
    # --checkpoint: a second call with the finished file trains nothing and prints the same rounds
    path = tmp_path / "cli.ckpt"
    arguments = [*heart_disease_run(rounds=2), "--checkpoint", str(path)]
    assert main(arguments) == 0 and path.exists()
    first = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert main(arguments) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["rounds"] == first["rounds"]
    assert (
        main(
            [
                "run",
                "--dataset",
                "heart_disease",
                "--method",
                "ULDP-AVG",
                "--k",
                "2",
                "--users",
                "8",
                "--rounds",
                "1",
                "--seed",
                "0",
            ]
        )
        == 2
    )


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"accountant": "prv"}, "unknown accountant 'prv'; known accountants: rdp, pld"),
        ({"epsilon": 0.0}, "epsilon must be"),
        ({"epsilon": 2.0, "method": "DEFAULT"}, "epsilon needs a private method"),
    ],
)
def test_invalid_privacy_settings_raise_clear_errors(changes, message):
    with pytest.raises(ValueError, match=message):
        RunConfig(
            **{
                "dataset": "heart_disease",
                "method": "ULDP-AVG",
                "n_users": 2,
                "rounds": 1,
                **changes,
            }
        )


def test_new_fields_at_their_defaults_leave_checkpoint_fingerprints_unchanged():
    from dataclasses import asdict
    from types import SimpleNamespace

    import torch

    from uldp.common.persist import fingerprint
    from uldp.simulation import LATER_FIELDS, _checkpoint_fingerprint

    config = RunConfig(dataset="heart_disease", method="ULDP-AVG", n_users=2, rounds=1)
    data = SimpleNamespace(x_train=torch.zeros(5, 1), x_test=torch.zeros(3, 1))
    # Protocol 1's parameters were the two fields secure_key_bits and secure_n_max when checkpoints were first written
    before = {
        name: value
        for name, value in asdict(config).items()
        if name not in LATER_FIELDS and name != "protocol"
    }
    before.update(secure_key_bits=3072, secure_n_max=2000)
    assert _checkpoint_fingerprint(config, data) == fingerprint(
        {"config": before, "train_records": 5, "test_records": 3}
    )
    # the fingerprints that the code before ProtocolParameters wrote, pinned
    assert (
        _checkpoint_fingerprint(config, data)
        == "80371c0996bf794a9fc7c89ae068e7bcf6a0f860cd32f82aea41b33be6ba6172"
    )
    secure = RunConfig(
        dataset="heart_disease",
        method="ULDP-AVG-w",
        n_users=2,
        rounds=1,
        secure=True,
        protocol=ProtocolParameters(key_bits=4096),
    )
    assert (
        _checkpoint_fingerprint(secure, data)
        == "562d70c9bd7497067041a271c24a341f389078a0c0ad1ae90be8e2df64f43c02"
    )
    precise = RunConfig(
        dataset="heart_disease",
        method="ULDP-AVG-w",
        n_users=2,
        rounds=1,
        secure=True,
        protocol=ProtocolParameters(key_bits=4096, precision=1e-6),
    )
    assert _checkpoint_fingerprint(precise, data) != _checkpoint_fingerprint(secure, data)
    pld = RunConfig(
        dataset="heart_disease", method="ULDP-AVG", n_users=2, rounds=1, accountant="pld"
    )
    assert _checkpoint_fingerprint(pld, data) != _checkpoint_fingerprint(config, data)


@needs_data
@pytest.mark.parametrize("method", ["ULDP-NAIVE", "ULDP-GROUP-2", "ULDP-AVG-w"])
def test_pld_run_reports_what_the_accountant_says_and_no_more_than_rdp(method):
    config = RunConfig(
        dataset="heart_disease",
        method=method,
        n_users=20,
        rounds=2,
        seed=1,
        local_epochs=1,
        accountant="pld",
        q=0.5 if method == "ULDP-AVG-w" else 1.0,
    )
    result = run(config)
    assert result.epsilon == [accounted_epsilon(config, rounds=t) for t in (1, 2)]
    rdp = _floats([accounted_epsilon(config, rounds=t, accountant="rdp") for t in (1, 2)])
    assert all(pld <= by_rdp for pld, by_rdp in zip(_floats(result.epsilon), rdp, strict=True))


@needs_data
@pytest.mark.parametrize(
    "method, accountant", [("ULDP-AVG-w", "pld"), ("ULDP-GROUP-2", "pld"), ("ULDP-NAIVE", "rdp")]
)
def test_target_epsilon_calibrates_sigma_and_the_run_spends_the_budget(method, accountant):
    from uldp.accounting import epsilon_for_method

    config = RunConfig(
        dataset="heart_disease",
        method=method,
        n_users=20,
        rounds=2,
        seed=1,
        local_epochs=1,
        accountant=accountant,
        epsilon=4.0,
    )
    assert config.sigma is None
    result = run(config)
    sigma = result.config.sigma
    assert sigma is not None and result.info["calibrated_sigma"] == sigma and result.round == [1, 2]
    spent = _floats(result.epsilon)[-1]
    assert 4.0 * 0.999 <= spent <= 4.0
    if (
        method == "ULDP-NAIVE"
    ):  # independent of the run: the method's closed-form accountant at that sigma
        assert (
            spent == epsilon_for_method(method, sigma=sigma, rounds=2, delta=config.delta).epsilon
        )
    assert accounted_epsilon(config) == spent


@needs_data
def test_a_run_with_sigma_stops_before_the_budget_and_refuses_when_round_one_exceeds_it():
    base: dict[str, Any] = {
        "dataset": "heart_disease",
        "method": "ULDP-AVG-w",
        "n_users": 10,
        "rounds": 3,
        "seed": 0,
        "local_epochs": 1,
        "sigma": 5.0,
    }
    full = _floats([accounted_epsilon(RunConfig(**base), rounds=t) for t in (1, 2, 3)])
    stopped = run(RunConfig(**base, epsilon=(full[1] + full[2]) / 2))
    assert stopped.round == [1, 2] and stopped.epsilon == full[:2]
    assert stopped.info["stopped_by_budget"] == {"rounds_done": 2, "epsilon_next_round": full[2]}
    with pytest.raises(ValueError, match="exceeded by the first round"):
        run(RunConfig(**base, epsilon=full[0] / 2))


@needs_data
def test_cli_run_to_a_budget(capsys):
    from uldp.cli import main

    assert (
        main(
            [
                "run",
                "--dataset",
                "heart_disease",
                "--method",
                "ULDP-AVG-w",
                "--users",
                "8",
                "--rounds",
                "2",
                "--local-epochs",
                "1",
                "--seed",
                "0",
                "--accountant",
                "pld",
                "--epsilon",
                "3",
                "--json",
            ]
        )
        == 0
    )
    payload = json.loads(capsys.readouterr().out)  # one document, nothing else on stdout
    assert payload["config"]["accountant"] == "pld" and payload["config"]["epsilon"] == 3.0
    assert payload["info"]["calibrated_sigma"] == payload["config"]["sigma"]
    assert payload["rounds"][-1]["epsilon"] <= 3.0
