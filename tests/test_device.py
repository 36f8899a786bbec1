"""The device and precision plumbing, on the CPU (tests/test_gpu.py compares a GPU with the CPU where one exists):
device strings checked by name, ``fit(device="cpu")`` equal to ``fit()`` bit for bit, bfloat16 autocast close to
float32, and the new run fields leaving the committed results' keys and configurations as they were."""

from __future__ import annotations

import contextlib
import json
import warnings

import numpy as np
import pytest
import torch
from torch import nn

import uldp
from uldp.fitting import SeedWarning
from uldp.fitting.clipping import ClipWarning
from uldp.fitting.federation_checks import FederationWarning
from uldp.models import cross_entropy_loss
from uldp.paper.experiments.executor import _simulation_resolve
from uldp.paper.experiments.store import read_result, results_root
from uldp.simulation import LATER_FIELDS, RunConfig
from uldp.training import per_user
from uldp.training.device import (
    PRECISIONS,
    PrecisionWarning,
    autocast,
    check_precision,
    check_precision_for,
    device_settings,
    resolve_device,
    warn_if_slower,
)

CUDA = torch.cuda.is_available()


# ------------------------------------------------------------------------------------------ device strings --
@pytest.mark.parametrize("given", ["cpu", " CPU ", torch.device("cpu")])
def test_the_cpu_resolves_however_it_is_named(given):
    assert resolve_device(given) == torch.device("cpu")


@pytest.mark.parametrize("given", ["meta", "mps", "gpu", "cuda:x", "cuda:-1", "", "cpu:0 "])
def test_other_devices_are_refused_naming_the_value_and_what_is_allowed(given):
    with pytest.raises(ValueError) as error:
        resolve_device(given)
    assert repr(given) in str(error.value) and "'cpu', " not in str(error.value)
    assert "cpu, cuda, cuda:<index>" in str(error.value)


@pytest.mark.parametrize("given", [0, None, True, 1.5])
def test_a_device_that_is_no_string_is_refused_by_type(given):
    with pytest.raises(
        ValueError, match=f"device must be a string or torch.device .* {type(given).__name__}"
    ):
        resolve_device(given)


def test_a_meta_tensor_device_is_refused_as_a_device():
    with pytest.raises(ValueError, match="'meta'"):
        resolve_device(torch.empty(0, device="meta").device)


@pytest.mark.skipif(CUDA, reason="this machine has CUDA")
@pytest.mark.parametrize("given", ["cuda", "cuda:0", "CUDA:1"])
def test_cuda_without_cuda_says_so(given):
    with pytest.raises(
        ValueError, match=r"needs CUDA, which this machine does not have .*use device='cpu'"
    ):
        resolve_device(given)


@pytest.mark.skipif(not CUDA, reason="needs CUDA")
def test_a_cuda_index_past_the_last_device_is_refused():
    with pytest.raises(ValueError, match="CUDA device"):
        resolve_device(f"cuda:{torch.cuda.device_count()}")


@pytest.mark.parametrize("bad", ["fp16", "bfloat16", "", None, 32])
def test_unknown_precisions_are_refused_by_name(bad):
    with pytest.raises(
        ValueError, match=f"precision must be one of {', '.join(PRECISIONS)}, got {bad!r}"
    ):
        check_precision(bad)


def test_bfloat16_is_refused_for_dpsgd_only():
    assert [check_precision_for(family, "bf16") for family in ("DEFAULT", "ULDP-AVG")] == [
        "bf16"
    ] * 2
    with pytest.raises(ValueError, match="per-record DP-SGD, which runs in float32"):
        check_precision_for("ULDP-GROUP", "bf16")
    assert check_precision_for("ULDP-GROUP", "tf32") == "tf32"


def test_device_settings_leave_the_cpu_alone_and_autocast_only_bfloat16():
    before = (torch.backends.cudnn.benchmark, torch.backends.cudnn.allow_tf32)
    with device_settings(torch.device("cpu"), "float32"):
        assert (torch.backends.cudnn.benchmark, torch.backends.cudnn.allow_tf32) == before
    with autocast(torch.device("cpu"), "float32"):
        assert not torch.is_autocast_enabled("cpu")
    with autocast(torch.device("cpu"), "bf16"):
        assert torch.is_autocast_enabled("cpu")
        assert (torch.ones(2, 2) @ torch.ones(2, 2)).dtype == torch.bfloat16


@pytest.mark.parametrize(
    "n_groups", [1, 3]
)  # one group: the plain autograd loop; several: the per-user engine
@pytest.mark.parametrize("precision", ["float32", "tf32", "bf16"])
def test_train_users_trains_under_its_own_precisions_device_settings(
    monkeypatch, n_groups, precision
):
    """``train_users`` called directly (not through ``fit`` or ``run``) still turns cuDNN's TF32 off for float32:
    torch's default lets cuDNN use it, which a first H200 run measured at 6.5e-3 from the CPU's MNIST deltas."""
    entered = []

    @contextlib.contextmanager
    def recording(device: torch.device, precision: str):
        entered.append((device, precision))
        yield

    monkeypatch.setattr(per_user, "device_settings", recording)
    x = torch.randn(12, 4)
    model = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
    per_user.train_users(
        model,
        per_user.flat_parameters(model),
        x,
        torch.arange(12) % 2,
        np.array_split(np.arange(12), n_groups),
        loss_fn=cross_entropy_loss,
        local_lr=0.1,
        epochs=1,
        batch_size=4,
        keys=per_user.record_keys(12, 1, torch.Generator().manual_seed(0)),
        precision=precision,
    )
    assert entered == [(torch.device("cpu"), precision)]


# ------------------------------------------------------------------------------------------------ fit --
def _records():
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(90, 5, generator=generator)
    y = (x[:, 0] + 0.5 * x[:, 1] > 0).long()
    return x, y, np.arange(90) % 13, np.arange(90) % 3


def _fit(method: str, **options):
    """``(initial parameters, trained parameters, history)`` of a small run with dropout."""
    x, y, users, silos = _records()
    torch.manual_seed(2)
    net = nn.Sequential(nn.Linear(5, 6), nn.ReLU(), nn.Dropout(0.1), nn.Linear(6, 2))
    initial = torch.cat([p.detach().flatten() for p in net.parameters()])
    with warnings.catch_warnings():
        for category in (SeedWarning, ClipWarning, FederationWarning):  # a small run's, on purpose
            warnings.simplefilter("ignore", category)
        model, history = uldp.fit(
            net,
            x,
            y,
            user_ids=users,
            silo_ids=silos,
            loss=nn.CrossEntropyLoss(),
            method=method,
            rounds=2,
            seed=4,
            local_epochs=2,
            test=(x, y),
            sigma=None if method == "DEFAULT" else 1.0,
            **options,
        )
    return initial, torch.cat([p.detach().flatten() for p in model.parameters()]), history


@pytest.mark.parametrize(
    "method", ["DEFAULT", "ULDP-NAIVE", "ULDP-SGD", "ULDP-AVG-w", "ULDP-GROUP-2"]
)
def test_fit_on_the_cpu_device_is_fit_bit_for_bit(method):
    _, plain, plain_history = _fit(method)
    _, on_cpu, cpu_history = _fit(method, device="cpu", precision="float32")
    assert torch.equal(plain, on_cpu)
    assert plain_history.column("loss") == cpu_history.column("loss")
    assert on_cpu.device.type == "cpu"


@pytest.mark.parametrize("device", ["meta", "mps", "cuda:7" if CUDA else "cuda"])
def test_fit_refuses_a_device_it_cannot_train_on_before_training(device):
    with pytest.raises(ValueError, match=repr(device)):
        _fit("ULDP-AVG-w", device=device)


def test_fit_refuses_bfloat16_dpsgd():
    with pytest.raises(ValueError, match="precision='bf16'"):
        _fit("DP-SGD", precision="bf16")


@pytest.mark.parametrize("method", ["ULDP-AVG-w", "ULDP-SGD", "DEFAULT"])
def test_bfloat16_autocast_trains_close_to_float32(method):
    """bfloat16 keeps 8 bits of mantissa: two rounds' update is within 10% of float32's, and not equal to it (the
    autocast took effect). The noise (sigma 1) is the same draws in both, so only the arithmetic differs."""
    initial, full, _ = _fit(method)
    _, half, _ = _fit(method, precision="bf16")
    assert not torch.equal(full, half)
    assert float((full - half).norm() / (full - initial).norm()) < 0.1


def test_bfloat16_on_the_cpu_warns_that_it_is_slower_at_both_entry_points(monkeypatch):
    """fit and simulation.run warn before training (bf16 is for CUDA); float32 and tf32 do not."""
    from uldp import simulation

    cpu = torch.device("cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrecisionWarning)
        warn_if_slower(cpu, "float32")
        warn_if_slower(cpu, "tf32")
    with pytest.warns(
        PrecisionWarning, match="precision='bf16' on the CPU is usually slower than float32"
    ):
        _fit("ULDP-AVG-w", precision="bf16")
    trained = object()  # the run itself is not this test's
    monkeypatch.setattr(simulation, "_run", lambda *args: trained)
    config = RunConfig(
        dataset="heart_disease", method="ULDP-AVG", n_users=4, rounds=1, precision="bf16"
    )
    with pytest.warns(PrecisionWarning, match="use precision='float32' here"):
        assert simulation.run(config) is trained


# ------------------------------------------------------------------------------- the run configuration --
def test_run_config_checks_its_device_and_precision():
    config = RunConfig(dataset="heart_disease", method="ULDP-AVG", n_users=4, rounds=1)
    assert (config.device, config.precision) == ("cpu", "float32")
    assert (
        RunConfig(
            dataset="heart_disease", method="ULDP-AVG", n_users=4, rounds=1, device="CPU"
        ).device
        == "cpu"
    )
    with pytest.raises(ValueError, match="'meta'"):
        RunConfig(dataset="heart_disease", method="ULDP-AVG", n_users=4, rounds=1, device="meta")
    with pytest.raises(ValueError, match="precision"):
        RunConfig(dataset="heart_disease", method="ULDP-AVG", n_users=4, rounds=1, precision="half")
    with pytest.raises(ValueError, match="per-record DP-SGD, which runs in float32"):
        RunConfig(
            dataset="heart_disease", method="ULDP-GROUP-2", n_users=4, rounds=1, precision="bf16"
        )


def test_device_and_precision_enter_a_checkpoint_only_when_not_the_default():
    """Checkpoints written before the fields existed still resume (the fingerprint leaves a field at its default
    out, tests/test_simulation.py), and a checkpoint of another device or precision does not."""
    from dataclasses import fields

    defaults = {field.name: field.default for field in fields(RunConfig)}
    assert {name: defaults[name] for name in ("device", "precision")} == {
        name: LATER_FIELDS[name] for name in ("device", "precision")
    }


def test_the_committed_results_keep_their_bytes_keys_and_configurations():
    """Every committed result (results/, results/short/) reads back and writes out byte for byte, its file name is
    the key of its run arguments (which hold no device or precision), and resolving those arguments today gives its
    stored configuration on every field both have. A run stored before the device existed has neither field in its
    configuration; a later one names both (a device other than the CPU also in its provenance's device name)."""
    files = sorted(
        path for profile in ("paper", "short") for path in results_root(profile).glob("*/*.json")
    )
    if not files:
        pytest.skip("no committed results")
    for path in files:
        stored = read_result(path)  # checks the key against the file name and the run arguments
        assert stored is not None, path
        assert json.dumps(stored.to_json(), indent=1).encode() == path.read_bytes(), path
        assert not {"device", "precision"} & set(stored.params), path
        placement = {k: stored.config[k] for k in ("device", "precision") if k in stored.config}
        assert len(placement) in (0, 2), path
        if placement.get("device", "cpu") != "cpu":
            assert "device_name" in stored.provenance, path
        precision = placement.get("precision", "float32")
        fresh = _simulation_resolve({**stored.params, "precision": precision})
        assert (fresh.pop("device"), fresh.pop("precision")) == ("cpu", precision)
        shared = set(fresh) & set(stored.config)
        assert {k: fresh[k] for k in shared} == {k: stored.config[k] for k in shared}, path


def test_a_grid_on_the_cpu_device_stores_its_runs_under_the_keys_they_always_had(
    tmp_path, monkeypatch
):
    """``run_grid(device="cpu")`` hands the executor the run arguments unchanged (no device among them) and stores
    each run under :func:`~uldp.paper.experiments.expand`'s key; a device it cannot use stops it before any run."""
    import fake_executor

    from uldp.paper.experiments import expand, run_grid

    log = tmp_path / "calls.log"
    monkeypatch.setenv("ULDP_FAKE_LOG", str(log))
    specs = expand("heart_disease", "smoke", seeds=[0], methods=["ULDP-AVG-w"])
    report = run_grid(
        "heart_disease",
        "smoke",
        seeds=[0],
        methods=["ULDP-AVG-w"],
        root=tmp_path,
        executor=fake_executor.FAKE,
        progress=False,
        device="cpu",
    )
    assert report.executed == len({spec.key for spec in specs}) and not report.failed
    assert sorted(path.stem for path in (tmp_path / "heart_disease").glob("*.json")) == sorted(
        {spec.key for spec in specs}
    )
    assert "device" not in log.read_text()
    with pytest.raises(ValueError, match="'meta'"):
        run_grid(
            "heart_disease", "smoke", root=tmp_path, executor=fake_executor.FAKE, device="meta"
        )


def test_uldp_grid_gives_every_run_its_precision_and_refuses_a_bad_one_by_name(
    tmp_path, monkeypatch, capsys
):
    """``uldp grid --precision`` (issue 43): the value reaches every run's configuration (``RunConfig.precision``
    among the executor's arguments) and its provenance, and the runs keep their keys; a bad value stops the grid
    before any run, naming it and the allowed ones (``check_precision``, where ``uldp run`` checks it too)."""
    import inspect

    import fake_executor

    from uldp import cli
    from uldp.paper.experiments import expand, run_grid

    log = tmp_path / "calls.log"
    monkeypatch.setenv("ULDP_FAKE_LOG", str(log))
    monkeypatch.setitem(inspect.unwrap(run_grid).__kwdefaults__, "executor", fake_executor.FAKE)
    grid = [
        "grid",
        "heart_disease",
        "--profile",
        "smoke",
        "--seeds",
        "0",
        "--methods",
        "ULDP-AVG-w",
    ]
    assert cli.main([*grid, "--root", str(tmp_path / "bf16"), "--precision", "bf16"]) == 0
    keys = {
        spec.key for spec in expand("heart_disease", "smoke", seeds=[0], methods=["ULDP-AVG-w"])
    }
    calls = log.read_text().splitlines()
    assert len(calls) == len(keys) and all("('precision', 'bf16')" in call for call in calls)
    stored = [read_result(path) for path in (tmp_path / "bf16" / "heart_disease").glob("*.json")]
    assert {run.key for run in stored if run is not None} == keys  # not part of a run's key
    for run in stored:
        assert run is not None and "precision" not in run.params
        assert run.config["precision"] == run.provenance["precision"] == "bf16"
        assert (
            RunConfig(**{**run.params, "precision": "bf16"}).precision == "bf16"
        )  # what the simulation runs
    log.unlink()
    capsys.readouterr()
    assert cli.main([*grid, "--root", str(tmp_path / "bad"), "--precision", "fp8"]) == 2
    error = capsys.readouterr().err
    assert "precision must be one of float32, tf32, bf16, got 'fp8'" in error
    assert not log.exists() and not (tmp_path / "bad").exists()
    # bf16 is not ULDP-GROUP-k's precision: the whole grid is refused before its first run, not run by run.
    group = [*grid[:-1], "ULDP-AVG-w", "ULDP-GROUP-2", "--root", str(tmp_path / "group")]
    assert cli.main([*group, "--precision", "bf16"]) == 2
    assert "precision='bf16' applies to local training, not ULDP-GROUP" in capsys.readouterr().err
    assert not log.exists() and not (tmp_path / "group").exists()


# ------------------------------------------------------------------------------------------------ Flower --
@pytest.mark.parametrize("device", ["meta", "cuda:7" if CUDA else "cuda"])
def test_a_flower_silo_refuses_a_device_it_cannot_train_on_by_name(tmp_path, device):
    """The silo's own node config names its device (``uldp-device``); one it cannot use fails when it loads its
    records, before any stage is answered."""
    from types import SimpleNamespace

    from uldp.flower.client import DEVICE_KEY, SiloData, silo_view
    from uldp.flower.pseudonyms import write_key_file

    write_key_file(tmp_path / "key")
    x, y, _, _ = _records()
    records = SiloData(x.numpy(), y.numpy(), [f"p{i}" for i in range(len(x))])
    config = {"silo": "North", "uldp-key-file": str(tmp_path / "key")}
    view = silo_view(
        lambda context: records,
        lambda: nn.Linear(5, 2),
        nn.CrossEntropyLoss(),
        SimpleNamespace(node_config={**config, DEVICE_KEY: "cpu"}),
    )
    assert view["x"].device.type == "cpu" and next(view["model"].parameters()).device.type == "cpu"
    with pytest.raises(ValueError, match=repr(device)):
        silo_view(
            lambda context: records,
            lambda: nn.Linear(5, 2),
            nn.CrossEntropyLoss(),
            SimpleNamespace(node_config={**config, DEVICE_KEY: device}),
        )


# --------------------------------------------------------------------------------------------- command line --
def test_uldp_run_refuses_an_unusable_device_in_one_line(capsys):
    from uldp import cli

    arguments = ["run", "--dataset", "heart_disease", "--method", "ULDP-AVG", "--users", "4"]
    status = cli.main([*arguments, "--rounds", "1", "--seed", "0", "--device", "meta"])
    error = capsys.readouterr().err.strip()
    assert status == 2 and "'meta'" in error and len(error.splitlines()) == 1
