"""``uldp run --secure`` end to end: a secure ULDP-AVG-w run equals the plain run with the same seed.

The secure runs use small test keys (1024 bits, N_max = 300, with the test-only flag of
:class:`~uldp.secure.ProtocolParameters`); the CLI test swaps the same small keys in under the CLI, which otherwise
runs at the paper's 3072 bits.
"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import uldp.simulation
from uldp.federation import PLAIN, InProcessAggregator
from uldp.method_names import MASKED_SUM
from uldp.methods import uldp_avg
from uldp.secure import ProtocolParameters
from uldp.secure.driver import ServerDriver
from uldp.simulation import RunConfig, run

DATA = os.environ.get("ULDP_DATA_DIR") or str(
    Path(__file__).resolve().parents[2] / "shared" / "data"
)
pytestmark = pytest.mark.skipif(
    not os.path.isdir(os.path.join(DATA, "heart_disease")),
    reason="HeartDisease files not available",
)
TEST_KEYS = dict(protocol=ProtocolParameters(key_bits=1024, n_max=300, insecure_test_key=True))


@pytest.fixture(autouse=True)
def data_dir(monkeypatch):
    monkeypatch.setenv("ULDP_DATA_DIR", DATA)


def _config(**changes):
    return RunConfig(
        dataset="heart_disease",
        method="ULDP-AVG-w",
        n_users=12,
        rounds=2,
        seed=3,
        distribution="zipf",
        local_epochs=1,
        **changes,
    )


def _recorded_plain_run(monkeypatch, config):
    """The plain run, recording what its aggregation received and returned."""
    calls = []
    plain = uldp_avg.aggregate

    def recording(deltas, counts, sampled, noise):
        total = plain(deltas, counts, sampled, noise)
        calls.append(
            {
                "deltas": np.stack([d.numpy() for d in deltas]),
                "noise": np.stack([z.numpy() for z in noise]),
                "sampled": np.asarray(sampled).copy(),
                "total": total.numpy().astype(np.float64),
            }
        )
        return total

    monkeypatch.setattr(uldp_avg, "aggregate", recording)
    result = run(config)
    monkeypatch.setattr(uldp_avg, "aggregate", plain)
    return result, calls


def _recorded_secure_run(monkeypatch, config):
    """The secure run through ``run``'s own secure path (the federation round in process), recording each round's
    inputs as the silos hand them to Protocol 1, the users sampled and the server's decoded float64 sum."""
    calls = []
    aggregate_arrays, finish_round = InProcessAggregator.aggregate_arrays, ServerDriver.finish_round

    def recording(self, work, table, sampled, like):
        deltas, noise = zip(*(silo.secure_inputs() for silo in work), strict=True)
        calls.append(
            {"deltas": np.stack(deltas), "noise": np.stack(noise), "sampled": np.array(sampled)}
        )
        return aggregate_arrays(self, work, table, sampled, like)

    def decoded(self, answers, size):
        calls[-1]["total"] = finish_round(self, answers, size)
        return calls[-1]["total"]

    monkeypatch.setattr(InProcessAggregator, "aggregate_arrays", recording)
    monkeypatch.setattr(ServerDriver, "finish_round", decoded)
    return run(config), calls


@pytest.mark.parametrize(
    ("q", "backend"),
    [(1.0, "paillier"), (0.5, "paillier"), pytest.param(0.5, "lattice", id="0.5-lattice")],
)
def test_secure_run_equals_plain_run(monkeypatch, q, backend):
    if backend == "lattice":
        pytest.importorskip("tenseal")
    plain, plain_calls = _recorded_plain_run(monkeypatch, _config(q=q))
    keys = {"protocol": replace(TEST_KEYS["protocol"], backend=backend)}
    secure, secure_calls = _recorded_secure_run(monkeypatch, _config(q=q, secure=True, **keys))
    counts = uldp.simulation.build_federation(secure.config)[0].counts
    assert len(secure_calls) == len(plain_calls) == 2  # every round went through Protocol 1
    for p, s in zip(plain_calls, secure_calls, strict=True):
        # the same noise and sampling in both runs (the protocol leaves out users without records: weight 0)
        np.testing.assert_array_equal(s["noise"], p["noise"].astype(np.float64))
        np.testing.assert_array_equal(s["sampled"], p["sampled"] & (counts.sum(axis=0) > 0))
        # the decoded aggregate is within P of the float64 sum of the very deltas the protocol got (Theorem 4)
        weights = np.where(s["sampled"], counts / counts.sum(axis=0), 0.0)
        exact = np.einsum("su,sud->d", weights, s["deltas"]) + s["noise"].sum(axis=0)
        assert np.max(np.abs(s["total"] - exact)) <= 1e-10
        # and within float32 rounding of the plain run's aggregate
        np.testing.assert_allclose(s["total"], p["total"], rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(
        secure_calls[0]["deltas"], plain_calls[0]["deltas"].astype(np.float64)
    )
    if q < 1:
        assert not plain_calls[0]["sampled"].all()  # sub-sampling really left users out
    np.testing.assert_allclose(secure.test_loss, plain.test_loss, rtol=1e-5)
    assert secure.accuracy == pytest.approx(plain.accuracy, abs=1e-9)
    timings = secure.info["secure_timings"]
    assert (
        set(timings["setup"]) >= {"key_exchange", "blinded_histogram"}
        and len(timings["rounds"]) == 2
    )


@pytest.mark.parametrize("kind", [PLAIN, MASKED_SUM])
def test_the_simulation_through_the_federation_round_of_each_kind_is_the_plain_run(kind):
    """The simulation's rounds driven through the one federation round (uldp.federation, every party in this process)
    with the plain aggregation end bit for bit at the plain run (the same float32 sums in silo order); with the
    masked sum within its resolution (|S| 2^-37 on the sum) and float32 rounding of it. Protocol 1's run is
    test_secure_run_equals_plain_run's."""
    config = _config(q=0.5)
    plain = run(config)
    method = uldp.simulation._prepared(config)[1]
    hook = InProcessAggregator(kind, method=method)
    routed = run(config, aggregate_fn=hook)
    assert len(hook.round_timings) == config.rounds  # every round went through the federation round
    if kind == PLAIN:
        assert routed.test_loss == plain.test_loss and routed.accuracy == plain.accuracy
    else:
        np.testing.assert_allclose(routed.test_loss, plain.test_loss, rtol=1e-5)
    assert routed.epsilon == plain.epsilon


def test_small_keys_need_the_test_flag():
    with pytest.raises(ValueError, match="at least 2048"):
        _config(secure=True, protocol={"key_bits": 1024, "n_max": 300})
    with pytest.raises(ValueError, match="multiple of 8"):
        _config(secure=True, protocol={"key_bits": 1025, "insecure_test_key": True, "n_max": 300})
    with pytest.raises(ValueError, match="fields among"):
        _config(secure=True, protocol={"secure_key_bits": 1024})


def test_cli_secure_flag_runs_the_protocol(monkeypatch, capsys):
    from uldp.cli import main

    original = uldp.simulation.secure_aggregator
    used = []

    def small_keys(config, method=None):
        used.append(config)
        return original(RunConfig(**{**config.__dict__, **TEST_KEYS}), method)

    monkeypatch.setattr(uldp.simulation, "secure_aggregator", small_keys)
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
                "1",
                "--local-epochs",
                "1",
                "--seed",
                "0",
                "--secure",
                "--json",
            ]
        )
        == 0
    )
    payload = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert payload["config"]["secure"] is True and payload["config"]["protocol"]["key_bits"] == 3072
    assert len(payload["rounds"]) == 1 and np.isfinite(payload["rounds"][0]["loss"])
    assert len(used) == 1 and used[0].secure
