"""The library's default backend became "auto" (uldp.secure.cost.choose_backend): what was stored before the change
still loads, keeps its key and resolves to the backend it ran with; checkpoints keep their fingerprints."""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from uldp.paper.experiments.executor import SIMULATION, split_arguments
from uldp.paper.experiments.store import read_result
from uldp.secure.config import ProtocolConfig, ProtocolParameters
from uldp.simulation import RunConfig, _checkpoint_fingerprint

RESULTS = Path(__file__).resolve().parents[1] / "results"


def test_every_stored_run_resolves_to_the_protocol_it_ran_with():
    """Every committed result file loads (its key recomputed from its arguments, or read_result raises) and the grid
    runner's resolved configuration names the Protocol 1 parameters stored beside the result (the paper's
    backend), though the library's default is now "auto"."""
    checked = 0
    for path in sorted(RESULTS.glob("**/*.json")):
        stored = read_result(path)
        if stored is None or "protocol" not in stored.config:  # benchmarks' and audits' own files
            continue
        assert SIMULATION.resolve(stored.params)["protocol"] == stored.config["protocol"], path
        checked += 1
    assert checked > 500  # the runs stored since Protocol 1's parameters became one object


def test_a_grid_run_keeps_the_checkpoint_fingerprint_it_had_when_paillier_was_the_default():
    data = SimpleNamespace(x_train=np.zeros((100, 3)), x_test=np.zeros((10, 3)))
    params: dict[str, Any] = {
        "dataset": "heart_disease",
        "method": "ULDP-AVG-w",
        "n_users": 50,
        "rounds": 3,
        "seed": 1,
    }
    # computed at f44df92, before the change, for RunConfig(**params)
    before = "2ea19fbffeec1b590b8cf4606aa0e7810fe433a9796732e8f3c29e5368e9c180"
    config, _ = split_arguments(params)  # what a grid runs: the paper's backend
    assert _checkpoint_fingerprint(RunConfig(**config), data) == before
    assert RunConfig(**params).protocol.backend == "auto"
    # checkpoints are for plain runs, where no backend plays a part: the library's new default keeps it too
    assert _checkpoint_fingerprint(RunConfig(**params), data) == before
    named = RunConfig(**params, protocol=ProtocolParameters(backend="lattice"))
    assert _checkpoint_fingerprint(named, data) != before


@pytest.mark.parametrize("backend", ["auto", "lattice"])
def test_the_cli_passes_its_backend_to_the_run_and_says_what_auto_chose(
    backend, monkeypatch, capsys
):
    from uldp import simulation, simulation_cli

    seen = {}

    def fake_run(config, **_):
        seen["protocol"] = config.protocol
        # what the run's session does with "auto": the choice reaches the operator on stderr
        ProtocolConfig(3, 40, 1.0, parameters=config.protocol)
        raise SystemExit(0)

    monkeypatch.setattr(simulation, "run", fake_run)
    monkeypatch.setattr(
        logging.getLogger("uldp.secure.cost"), "handlers", []
    )  # made afresh, on this stderr
    monkeypatch.setattr(simulation_cli, "load", lambda *a, **k: None)
    from uldp.cli import main

    argv = ["run", "--dataset", "heart_disease", "--method", "ULDP-AVG-w", "--users", "20"]
    argv += ["--rounds", "1", "--seed", "0", "--secure", "--backend", backend]
    with pytest.raises(SystemExit):
        main(argv)
    assert seen["protocol"].backend == backend
    said = "secure aggregation backend 'auto': packed-paillier" in capsys.readouterr().err
    assert said == (backend == "auto")
