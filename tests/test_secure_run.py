"""``uldp run --secure`` end to end: a secure run of every method equals the plain run with the same seed.

ULDP-AVG-w and ULDP-SGD-w go through Protocol 1, every other method through the masked sum (its pairwise masks
alone), each as Flower runs it: the one federation round of :mod:`uldp.federation` in this process.
The Protocol 1 runs use small test keys (1024 bits, N_max = 300, with the test-only flag of
:class:`~uldp.secure.ProtocolParameters`); the CLI test swaps the same small keys in under the CLI, which otherwise
runs at the paper's 3072 bits.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import uldp.simulation
from uldp.federation import PLAIN, InProcessAggregator, update_bounds
from uldp.method_names import MASKED_SUM, parse_method
from uldp.methods import uldp_avg
from uldp.secure import ProtocolParameters
from uldp.secure.driver import ServerDriver
from uldp.secure.masked_sum import RESOLUTION_BITS, MaskedSumServer, MaskedSumSilo, precision
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
    """The plain run with its weighted sum through the aggregation hook (``uldp_avg.aggregate``, given every silo's
    per-user deltas), recording what the hook received and returned. (Without a hook the round sums each silo a chunk
    of users at a time; ``tests/test_methods.py`` checks that it equals this sum.)"""
    calls = []
    plain = uldp_avg.aggregate
    round_ = uldp_avg.UserLevelMethod.round

    def through_the_hook(self, params, federation, round_seed, aggregate_fn=None, *, sum_fn=None):
        return round_(
            self, params, federation, round_seed, aggregate_fn or recording, sum_fn=sum_fn
        )

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

    monkeypatch.setattr(uldp_avg.UserLevelMethod, "round", through_the_hook)
    result = run(config)
    monkeypatch.setattr(uldp_avg.UserLevelMethod, "round", round_)
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
    with the plain aggregation end bit for bit at the plain run through the plain hook (``uldp_avg.aggregate``: the
    same per-user deltas, the same float32 sums in silo order); with the masked sum within its resolution (|S| 2^-37
    on the sum) and float32 rounding of it. Protocol 1's run is test_secure_run_equals_plain_run's. (Without a hook
    the round sums a chunk of users at a time, equal to the hook's sum within float rounding: tests/test_methods.py.)"""
    config = _config(q=0.5)
    plain = run(config, aggregate_fn=uldp_avg.aggregate)
    method = uldp.simulation._prepared(config)[1]
    hook = InProcessAggregator(kind, method=method)
    routed = run(config, aggregate_fn=hook)
    assert len(hook.round_timings) == config.rounds  # every round went through the federation round
    if kind == PLAIN:
        assert routed.test_loss == plain.test_loss and routed.accuracy == plain.accuracy
    else:
        np.testing.assert_allclose(routed.test_loss, plain.test_loss, rtol=1e-5)
    assert routed.epsilon == plain.epsilon


#: The methods without per-user weights, whose secure aggregation is the masked sum (ULDP-SGD with fixed weights:
#: user 0 split 0.7 / 0.3 over silos 0 and 1, the others evenly over the four silos).
MASKED = ["ULDP-AVG", "ULDP-SGD", "ULDP-NAIVE", "ULDP-GROUP-2", "DEFAULT", "ULDP-SGD fixed"]
FIXED = tuple(
    tuple((0.7, 0.3, 0.0, 0.0)[s] if u == 0 else 0.25 for u in range(8)) for s in range(4)
)


def _masked_config(method: str, **changes) -> RunConfig:
    """A small, fast run of ``method`` (HeartDisease's logistic regression, 8 users over its 4 silos, 2 rounds)."""
    name, _, fixed = method.partition(" ")
    spec = parse_method(name)
    return RunConfig(
        dataset="heart_disease",
        method=name,
        n_users=8,
        rounds=2,
        seed=3,
        local_epochs=None if spec.family == "ULDP-SGD" else 1,
        q=0.5 if spec.per_user else 1.0,
        user_weights=FIXED if fixed else None,
        **changes,
    )


def _recorded(monkeypatch, config, *, shift=None, **arguments):
    """``run(config, **arguments)`` and per round: the total handed to the server step and, under the masked sum,
    what each silo encoded and the server's decoded float64 sum; ``shift(silo, net_mask) -> net_mask`` alters the
    masks."""
    totals: list[np.ndarray] = []
    updates: list[list[np.ndarray]] = []
    decoded: list[np.ndarray] = []
    method_class = type(uldp.simulation._prepared(config)[1])
    step, encode, decode, net_mask = (
        method_class.server_step,
        MaskedSumSilo.masked_update,
        MaskedSumServer.finish_round,
        MaskedSumSilo.net_mask,
    )

    def stepped(self, params, total, **sizes):
        totals.append(total.detach().cpu().numpy().astype(np.float64))
        return step(self, params, total, **sizes)

    def encoded(self, round_index, update):
        if self.silo_id == 0:
            updates.append([])
        updates[-1].append(np.asarray(update, dtype=np.float64))
        return encode(self, round_index, update)

    def decoding(self, round_index, answers, size):
        decoded.append(decode(self, round_index, answers, size))
        return decoded[-1]

    with monkeypatch.context() as patch:
        patch.setattr(method_class, "server_step", stepped)
        patch.setattr(MaskedSumSilo, "masked_update", encoded)
        patch.setattr(MaskedSumServer, "finish_round", decoding)
        if shift is not None:
            patch.setattr(
                MaskedSumSilo,
                "net_mask",
                lambda self, index, count: shift(self.silo_id, net_mask(self, index, count)),
            )
        result = run(config, **arguments)
    return result, {"total": totals, "updates": updates, "decoded": decoded}


@pytest.mark.parametrize("method", MASKED)
def test_a_secure_run_of_a_method_without_per_user_weights_is_the_plain_run_through_the_masked_sum(
    monkeypatch, method
):
    """``secure=True`` runs the masked sum Flower runs for these methods, once a round, and ends at the plain run.

    The bound, per coordinate of a round's sum: silo s encodes its update u_s (float32, exact in float64) as
    E_s = rint(2^36 u_s), |E_s - 2^36 u_s| <= 1/2; the masks cancel in Z_(2^64) and |sum_s E_s| < 2^62 (each silo
    refuses more), so the server reads sum_s E_s exactly, and D = 2^-36 sum_s E_s is exact in float64 while
    |sum_s E_s| < 2^53. Hence |D - sum_s u_s| <= |S| 2^-37 (``precision(|S|)``, 2.9e-11 for 4 silos). The server
    casts D to the model's float32, at most half an ulp, <= 2^-24 |D|: the total the server step gets is within
    |S| 2^-37 + 2^-24 |D| of the exact sum of the silos' updates, which the plain run sums in float32 (its own
    rounding, of the same order). Two rounds of this logistic regression then agree to rtol 1e-5 in test loss.
    """
    config = _masked_config(method)
    plain, plain_rounds = _recorded(monkeypatch, config)
    secure, rounds = _recorded(monkeypatch, replace(config, secure=True))
    n_silos = secure.info["n_silos"]
    assert plain_rounds["updates"] == [] and len(plain_rounds["total"]) == config.rounds
    # one masked-sum round per training round, every silo's update encoded
    assert len(rounds["decoded"]) == len(rounds["total"]) == config.rounds
    assert [len(silos) for silos in rounds["updates"]] == [n_silos] * config.rounds
    for silos, decoded, total in zip(
        rounds["updates"], rounds["decoded"], rounds["total"], strict=True
    ):
        exact = np.array([math.fsum(c) for c in np.stack(silos).T])  # correctly rounded
        bound = precision(n_silos) + 2.0**-53 * np.abs(exact)
        assert np.all(np.abs(decoded - exact) <= bound)
        assert np.all(np.abs(total - exact) <= bound + 2.0**-24 * np.abs(decoded))
        assert np.any(total != 0)
    # round 1 starts from the same model: the silos' updates are the plain run's, summed in float32 there
    np.testing.assert_allclose(plain_rounds["total"][0], rounds["total"][0], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(secure.test_loss, plain.test_loss, rtol=1e-5)
    assert secure.epsilon == plain.epsilon and len(secure.info["secure_timings"]["rounds"]) == 2


@pytest.mark.parametrize("method", MASKED)
def test_the_masked_sum_of_the_simulation_fails_when_its_masks_do_not_cancel(monkeypatch, method):
    """The simulation's secure rounds go through the masks: silo 0 adding 2^20 to its masked values moves round 1's
    decoded sum by exactly 2^20 2^-36 = 2^-16 in every coordinate; silo 0 leaving its masks out leaves the others'
    uncancelled, uniform on the ring (a sum of order 2^27), which the server refuses by the method's norm bound, or,
    for the methods without one (DEFAULT, ULDP-GROUP: no clipped silo update, as on Flower), decodes as it is."""
    config = _masked_config(method, secure=True)
    _, honest = _recorded(monkeypatch, config)
    _, shifted = _recorded(
        monkeypatch, config, shift=lambda silo, net: net + np.uint64(2**20 if silo == 0 else 0)
    )
    assert np.all(shifted["decoded"][0] - honest["decoded"][0] == 2.0 ** (20 - RESOLUTION_BITS))
    assert not np.array_equal(shifted["total"][0], honest["total"][0])

    def uncancelled(silo, net):
        return net * np.uint64(silo != 0)

    method = uldp.simulation._prepared(config)[1]
    if update_bounds(method, n_silos=4, sampled=np.ones(8, dtype=bool), size=1) is None:
        _, garbled = _recorded(monkeypatch, config, shift=uncancelled)
        assert np.abs(garbled["decoded"][0]).max() > 1e3
    else:
        with pytest.raises(ValueError, match="past the bound"):
            _recorded(monkeypatch, config, shift=uncancelled)


def test_a_plain_enhanced_weight_hook_leaves_a_secure_run_of_another_method_masked(monkeypatch):
    """``aggregate_fn`` overrides the -w methods' aggregation only: ULDP-NAIVE's secure rounds still go through the
    masked sum (and report its timings), never in the clear."""
    config = _masked_config("ULDP-NAIVE", secure=True)
    result, rounds = _recorded(monkeypatch, config, aggregate_fn=uldp_avg.aggregate)
    assert len(rounds["decoded"]) == config.rounds
    assert len(result.info["secure_timings"]["rounds"]) == config.rounds


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
