"""One name per concept (issue 40 item 6; CONTRIBUTING's glossary). A target epsilon is ``epsilon=`` /
``--epsilon`` everywhere, the old ``target_epsilon`` / ``--target-epsilon`` kept for one release with a
DeprecationWarning, and the stored runs, which name the argument ``target_epsilon``, still load under the same keys
and fingerprints. What runs a grid's runs is its executor (``backend`` before, kept one release)."""

from __future__ import annotations

import json
import warnings
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from uldp.cli import main
from uldp.paper.experiments.executor import split_arguments
from uldp.paper.experiments.store import read_result
from uldp.simulation import RunConfig, _checkpoint_fingerprint

RESULTS = Path(__file__).resolve().parents[1] / "results"
BASE: dict[str, Any] = {
    "dataset": "heart_disease",
    "method": "ULDP-AVG-w",
    "n_users": 50,
    "rounds": 3,
    "seed": 1,
}


def test_the_old_keyword_and_attribute_warn_and_mean_epsilon():
    with pytest.warns(DeprecationWarning, match="use epsilon="):
        old = RunConfig(**BASE, target_epsilon=2.0)  # type: ignore[call-arg]
    assert old == RunConfig(**BASE, epsilon=2.0) and old.epsilon == 2.0
    with pytest.warns(DeprecationWarning, match=r"use \.epsilon"):
        assert old.target_epsilon == 2.0
    with pytest.raises(ValueError, match="not both"), pytest.warns(DeprecationWarning):
        RunConfig(**BASE, epsilon=2.0, target_epsilon=3.0)  # type: ignore[call-arg]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert replace(old, sigma=4.0).epsilon == 2.0  # the library itself never uses the old name


def test_a_budgeted_run_keeps_its_checkpoint_fingerprint():
    data = SimpleNamespace(x_train=np.zeros((100, 3)), x_test=np.zeros((10, 3)))
    config = RunConfig(**BASE, accountant="pld", epsilon=2.0)
    # computed at 334a51e, before the rename, for RunConfig(**BASE, accountant="pld", target_epsilon=2.0)
    assert (
        _checkpoint_fingerprint(config, data)
        == "3200866de7caff8e12062575d3f5af109355294c532745077611878852632768"
    )


def test_every_committed_result_loads_under_its_key_and_its_budget_reaches_epsilon():
    budgeted = 0
    for path in sorted(RESULTS.glob("**/*.json")):
        stored = read_result(
            path
        )  # recomputes the key from the stored arguments, raises when they disagree
        if stored is None:  # a benchmark's file, not a stored run
            continue
        assert stored.key == path.stem
        if "target_epsilon" in stored.params:
            arguments, _ = split_arguments(stored.params)
            with warnings.catch_warnings():
                warnings.simplefilter("error", DeprecationWarning)
                config = RunConfig(**arguments)
            assert config.epsilon == stored.params["target_epsilon"] is not None
            budgeted += 1
    assert budgeted >= 40  # the PLD re-runs at the paper's epsilon


@pytest.mark.parametrize("command", [["epsilon"], ["grid"]])
def test_the_old_flag_warns_and_means_epsilon(command, capsys, tmp_path):
    if command == ["epsilon"]:
        arguments = ["--method", "ULDP-AVG-w", "--rounds", "10", "--delta", "1e-5", "--json"]
    else:
        arguments = ["heart_disease", "--profile", "smoke", "--root", str(tmp_path), "--dry-run"]
        arguments += ["--accountant", "pld", "--json"]
    assert main([*command, *arguments, "--epsilon", "2"]) == 0
    new = json.loads(capsys.readouterr().out)
    with pytest.warns(DeprecationWarning, match="--target-epsilon is deprecated"):
        assert main([*command, *arguments, "--target-epsilon", "2"]) == 0
    assert json.loads(capsys.readouterr().out)["inputs"] == new["inputs"]
    assert new["inputs"]["epsilon"] == 2.0


def test_the_grid_runner_takes_an_executor_and_its_old_name_warns(tmp_path):
    import fake_executor

    from uldp.paper import experiments

    with pytest.warns(DeprecationWarning, match="use Executor"):
        assert experiments.Backend is experiments.Executor
    with pytest.warns(DeprecationWarning, match="use executor="):
        old = experiments.run_grid(
            "heart_disease",
            "smoke",
            root=tmp_path / "old",
            backend=fake_executor.FAKE,
            progress=False,
        )
    new = experiments.run_grid(
        "heart_disease", "smoke", root=tmp_path / "new", executor=fake_executor.FAKE, progress=False
    )
    assert old.executed == new.executed > 0 and not old.failed
    assert sorted(p.name for p in (tmp_path / "old").rglob("*.json")) == sorted(
        p.name for p in (tmp_path / "new").rglob("*.json")
    )


def test_the_public_functions_take_epsilon_and_their_old_keyword_warns(tmp_path):
    """expand, load_results, run_grid, pld_equal_epsilon and prepare_method take ``epsilon=``; ``target_epsilon=``
    warns for one release and means the same, and both at once are refused naming them."""
    import fake_executor

    from uldp.fitting import prepare_method
    from uldp.paper.beyond import pld_equal_epsilon
    from uldp.paper.experiments import expand, load_results, run_grid
    from uldp.paper.verdicts import NotMeasured

    budget: dict[str, Any] = {"accountant": "pld"}
    new = expand("heart_disease", "smoke", epsilon=2.0, **budget)
    private = [spec for spec in new if spec.kwargs["method"] != "DEFAULT"]
    assert private and all(
        spec.kwargs["target_epsilon"] == 2.0 for spec in private
    )  # its stored name
    with pytest.warns(DeprecationWarning, match=r"expand\(target_epsilon=\.\.\.\) is deprecated"):
        assert expand("heart_disease", "smoke", target_epsilon=2.0, **budget) == new  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="not both"), pytest.warns(DeprecationWarning):
        expand("heart_disease", "smoke", epsilon=2.0, target_epsilon=3.0)  # type: ignore[call-arg]
    with pytest.warns(DeprecationWarning, match="use epsilon="):
        old = load_results("heart_disease", "smoke", root=tmp_path, target_epsilon=2.0, **budget)  # type: ignore[call-arg]
    assert (
        old.missing
        == load_results("heart_disease", "smoke", root=tmp_path, epsilon=2.0, **budget).missing
    )
    with pytest.warns(DeprecationWarning, match="use epsilon="):
        ran = run_grid(  # type: ignore[call-arg]
            "heart_disease",
            "smoke",
            root=tmp_path,
            executor=fake_executor.FAKE,
            progress=False,
            target_epsilon=2.0,
            **budget,
        )
    assert ran.executed == len({spec.key for spec in new})
    with (
        pytest.warns(DeprecationWarning, match="use epsilon="),
        pytest.raises(NotMeasured, match="epsilon 2"),
    ):
        pld_equal_epsilon("heart_disease", target_epsilon=2.0, root=str(tmp_path))  # type: ignore[call-arg]
    from uldp.simulation import build_federation

    config = RunConfig(**BASE, sigma=1.0)
    federation = build_federation(config)[0]
    hp = config.hyperparameters()
    root = np.random.SeedSequence(0)
    calibrated = prepare_method(config.method, hp, federation, root, epsilon=2.0, rounds=3)[0]
    with pytest.warns(DeprecationWarning, match=r"prepare_method\(target_epsilon"):
        again = prepare_method(config.method, hp, federation, root, target_epsilon=2.0, rounds=3)[0]  # type: ignore[call-arg]
    assert again.sigma == calibrated.sigma != hp.sigma
