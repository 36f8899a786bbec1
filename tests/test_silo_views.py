"""uldp.flower.silo_views: a silo's records are read once per run, node and node config, and never decide its state."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from flower_hospitals import flower_run, hospital_files, load, model  # noqa: F401  (fixture)

import uldp.flower.client as flower_app
from uldp.flower.silo_views import SiloViews
from uldp.policy import SiloPolicy


def context(run_id: int = 1, node_id: int = 101, **node_config) -> SimpleNamespace:
    return SimpleNamespace(
        run_id=run_id, node_id=node_id, node_config={"silo": "Royal", **node_config}
    )


def test_a_view_is_read_once_per_run_node_and_node_config():
    reads: list = []

    def read(ctx):
        reads.append(ctx)
        return {"name": ctx.node_config["silo"], "read": len(reads)}

    views = SiloViews(read)
    first = views.get(context())
    assert views.get(context()) is first and len(reads) == 1
    assert views.get(context(node_id=102))["read"] == 2  # another node
    assert views.get(context(run_id=2))["read"] == 3  # another run: the files again
    assert views.get(context(run_id=2, data="other.csv"))["read"] == 4  # another node config
    assert views.get(context(run_id=1))["read"] == 5  # one view per node: the older run's is gone


def test_a_failed_read_is_not_kept():
    outcomes = [ValueError("y must be numeric"), {"name": "Royal"}]

    def read(ctx):
        outcome = outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    views = SiloViews(read)
    with pytest.raises(ValueError, match="numeric"):
        views.get(context())
    assert views.get(context()) == {"name": "Royal"}


def test_a_flower_run_reads_each_silos_records_once_and_keeps_its_state_in_the_context(
    hospital_files,  # noqa: F811
    monkeypatch,
):
    calls = []

    def counting_load(ctx):
        calls.append(ctx.node_config["silo"])
        return load(ctx)

    monkeypatch.setattr("flower_hospitals.load", counting_load)
    net = model()
    params, strategy, grid = flower_run(
        hospital_files,
        net,
        method="ULDP-AVG-w",
        sigma=1.0,
        q=0.8,
        rounds=3,
        local_epochs=1,
        batch_size=8,
        seed=5,
        secure=False,
    )
    assert (
        sorted(calls) == sorted(set(calls)) and len(calls) == 3
    )  # hello, federation, 3 rounds: one read each
    for ctx in (
        grid.contexts.values()
    ):  # the ledger and the federation stay in the node context, not the cache
        ledger = flower_app._ledger(ctx, SiloPolicy.from_node_config(ctx.node_config))
        assert "uldp" in ctx.state and ledger.last_round("1") == 3 and len(ledger.releases) == 3
    assert np.isfinite(params).all() and len(strategy.epsilons) == 3
