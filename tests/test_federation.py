"""uldp.federation: the round every transport drives, run here with every party in one process.

A toy method defined in this module goes through the same round as the library's methods (plain and masked sum);
ULDP-AVG-w goes through Protocol 1. The oracle is the plain sum of the silos' updates computed directly from each
silo's own ``silo_update`` (an independent path: no aggregation, no encoding).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

import numpy as np
import pytest
import torch
from torch import nn

from uldp.data.base import Allocation
from uldp.federation import (
    PLAIN,
    InProcessAggregator,
    InProcessFederation,
    MethodSilo,
    aggregation_kind,
    update_bounds,
)
from uldp.method_names import MASKED_SUM, PROTOCOL_1, parse_method
from uldp.methods import Federation, Hyperparameters, aggregate, make_method
from uldp.methods.base import EveryRecordSiloNoise
from uldp.secure.masked_sum import precision

if TYPE_CHECKING:
    from uldp.methods.base import Method

N_SILOS, N_USERS, SIZE = 3, 6, 5


class ToyMean(EveryRecordSiloNoise):
    """A toy method: each silo sends the mean of its records, clipped to C, plus its N(0, (sigma C)^2) noise."""

    spec = parse_method("ULDP-NAIVE")

    def __init__(self, hp: Hyperparameters) -> None:
        self.hp = hp

    def noise_std(self, n_silos: int) -> float:
        return float(self.hp.sigma or 0.0) * float(self.hp.clip or 0.0)

    def silo_update(self, params, federation, round_seed, silo, *, sampled, counts):
        mean = federation.x[federation.silo_records(silo)].mean(dim=0) - params
        mean = mean * min(1.0, float(self.hp.clip or 0.0) / max(float(mean.norm()), 1e-12))
        return mean + self.silo_noise(params.numel(), federation.n_silos, round_seed, silo)


class Inflated(ToyMean):
    """A dishonest silo's toy: its update a thousand times the honest one."""

    def silo_update(self, params, federation, round_seed, silo, *, sampled, counts):
        honest = super().silo_update(
            params, federation, round_seed, silo, sampled=sampled, counts=counts
        )
        return honest * 1e3


def summed(outputs: torch.Tensor, targets: torch.Tensor, weight: torch.Tensor | None = None):
    """A toy loss (the toy method never trains; ULDP-AVG-w's local steps follow its gradient)."""
    return outputs.sum()


def toy_method(method_class: type[ToyMean] = ToyMean) -> Method:
    """The toy as a :class:`uldp.methods.base.Method`: the round reads only its spec, hp and silo_update."""
    return cast("Method", method_class(TOY_HP))


def toy_federation(seed: int = 0) -> Federation:
    rng = np.random.default_rng(seed)
    n = 24
    allocation = Allocation(
        rng.integers(0, N_USERS, n), np.arange(n) % N_SILOS, N_USERS, N_SILOS, "toy", seed
    )
    x = torch.from_numpy(rng.normal(size=(n, SIZE)).astype(np.float32))
    y = torch.zeros(n, dtype=torch.long)
    return Federation(nn.Linear(SIZE, 2), summed, x, y, allocation)


def silos_of(method, federation: Federation, *, secure: bool) -> list[MethodSilo]:
    return [
        MethodSilo(
            method,
            federation.keep(federation.allocation.silo == s),
            silo_id=s,
            n_silos=N_SILOS,
            counts=federation.counts,
            secure=secure,
        )
        for s in range(N_SILOS)
    ]


def seeds(round_index: int) -> list[np.random.SeedSequence]:
    return [np.random.SeedSequence([round_index, s]) for s in range(N_SILOS)]


def direct_sum(method, federation: Federation, params: np.ndarray, round_index: int, sampled):
    """The oracle: each silo's silo_update on its own records (as a transport holds them), summed in float64."""
    return sum(
        method.silo_update(
            torch.from_numpy(params),
            federation.keep(federation.allocation.silo == s),
            seeds(round_index)[s],
            s,
            sampled=sampled,
            counts=federation.counts,
        )
        .numpy()
        .astype(np.float64)
        for s in range(N_SILOS)
    )


TOY_HP = Hyperparameters(
    global_lr=1.0, local_lr=None, local_epochs=None, batch_size=4, clip=1.0, sigma=0.5
)


@pytest.mark.parametrize("secure", [False, True])
def test_a_toy_method_runs_through_the_round_in_process(secure):
    """Plain: the silos' updates summed in silo order, bit for bit the direct float32 sum; the masked sum: within
    |S| 2^-37 of it (uldp.secure.masked_sum's precision), and no single answer is a silo's update."""
    federation, method = toy_federation(), toy_method()
    kind = aggregation_kind(method.spec, secure=secure)
    assert kind == (MASKED_SUM if secure else PLAIN)
    local = InProcessFederation(silos_of(method, federation, secure=secure), kind)
    params = np.zeros(SIZE, dtype=np.float32)
    everyone = np.ones(N_USERS, dtype=bool)
    for round_index in (1, 2):
        total = local.aggregate(params, round_index, everyone, seeds(round_index))
        expected = direct_sum(method, federation, params, round_index, everyone)
        assert total.dtype == np.float32
        if secure:
            assert (
                np.abs(total - expected).max() <= precision(N_SILOS) + 1e-6 * np.abs(expected).max()
            )
        else:
            plain = np.zeros(SIZE, np.float32)
            for s in range(N_SILOS):  # float32, in silo order, as every transport sums
                plain += (
                    local.silos[s]
                    .work(params, seeds(round_index)[s], everyone, lambda: None)
                    .update()
                )
            np.testing.assert_array_equal(total, plain)
            np.testing.assert_allclose(total, expected, rtol=1e-5, atol=1e-6)
        params = params + total


def test_a_round_is_answered_once_and_an_inflated_update_is_refused():
    """The masked sum answers each round index once; a silo sending past its bound (clip + noise tail) is refused:
    by name in the clear, by the sum's norm under the masks."""
    federation, method = toy_federation(), toy_method()
    params, everyone = np.zeros(SIZE, np.float32), np.ones(N_USERS, dtype=bool)
    bounds = update_bounds(method, n_silos=N_SILOS, sampled=everyone, size=SIZE)
    assert bounds is not None and len(bounds) == N_SILOS
    masked = InProcessFederation(silos_of(method, federation, secure=True), MASKED_SUM)
    masked.aggregate(params, 1, everyone, seeds(1), bounds=bounds)
    with pytest.raises(ValueError, match="round 1"):
        masked.aggregate(params, 1, everyone, seeds(1), bounds=bounds)
    inflated = toy_method(Inflated)
    for kind, message in (
        (PLAIN, r"silo 0 sent a contribution of norm .* past the bound"),
        (MASKED_SUM, r"securely aggregated sum has norm .* past the bound"),
    ):
        silos = silos_of(method, federation, secure=kind != PLAIN)
        silos[0].method = inflated
        local = InProcessFederation(silos, kind)
        with pytest.raises(ValueError, match=message):
            local.aggregate(params, 1, everyone, seeds(1), bounds=bounds)


def test_protocol_1_in_process_is_within_p_of_the_plain_weighted_sum():
    """ULDP-AVG-w through Protocol 1 (512-bit test key): the decoded sum is within P of sum_s (sum_u w_su
    Delta_su + z_s) computed directly (Theorem 4), with w_su = n_su / N_u from the whole table."""
    from uldp.secure.config import ProtocolConfig, ProtocolParameters

    federation = toy_federation(1)
    hp = Hyperparameters(
        global_lr=1.0, local_lr=0.1, local_epochs=1, batch_size=4, clip=1.0, sigma=0.5
    )
    method = make_method("ULDP-AVG-w", hp)
    assert aggregation_kind(method.spec, secure=True) == PROTOCOL_1
    protocol = ProtocolConfig.for_training(
        N_SILOS,
        N_USERS,
        clip=1.0,
        sigma=0.5,
        parameters=ProtocolParameters(key_bits=512, insecure_test_key=True, n_max=100),
    )
    silos = silos_of(method, federation, secure=True)
    for silo in silos:  # each silo knows only its own row of n[s, u]
        own = np.zeros_like(federation.counts)
        own[silo.silo_id] = federation.counts[silo.silo_id]
        silo.counts = own
    local = InProcessFederation(silos, PROTOCOL_1, protocol=protocol)
    params = torch.nn.utils.parameters_to_vector(federation.model.parameters()).detach().numpy()
    everyone = np.ones(N_USERS, dtype=bool)
    total = local.aggregate(params, 1, everyone, seeds(1))
    expected = direct_sum(method, federation, params, 1, everyone)
    assert np.abs(total - expected).max() <= 1e-5


@pytest.mark.parametrize("kind", [PLAIN, MASKED_SUM, PROTOCOL_1])
def test_the_simulations_hook_drives_the_round_of_each_kind(kind):
    """The methods' aggregation hook over the federation round (what uldp.simulation runs): plain, bit for bit the
    plain aggregate (the same float32 sums in silo order); the masked sum within |S| 2^-37 of it plus float32
    rounding; Protocol 1 within P = 1e-10 of the float64 weighted sum (Theorem 4). Users without records are left
    out of the sample, and each round's sum is checked against the method's bounds."""
    from uldp.secure.config import ProtocolParameters

    rng = np.random.default_rng(3)
    counts = rng.integers(0, 5, size=(N_SILOS, N_USERS))
    counts[:, -1] = 0  # a user without records: zero deltas, weight 0
    deltas = [
        torch.tensor(rng.uniform(-0.3, 0.3, (N_USERS, SIZE)), dtype=torch.float32)
        for _ in range(N_SILOS)
    ]
    for s in range(N_SILOS):
        deltas[s][counts[s] == 0] = 0
    noise = [torch.tensor(rng.normal(0, 0.5, SIZE), dtype=torch.float32) for _ in range(N_SILOS)]
    hp = Hyperparameters(
        global_lr=1.0, local_lr=0.1, local_epochs=1, batch_size=4, clip=1.0, sigma=1.0
    )
    method = make_method("ULDP-AVG-w", hp)
    hook = InProcessAggregator(
        kind,
        parameters=ProtocolParameters(key_bits=512, insecure_test_key=True, n_max=100),
        clip=1.0,
        sigma=1.0,
        method=method,
    )
    for round_index in (1, 2):
        sampled = rng.random(N_USERS) < 0.8
        total = hook(deltas, counts, sampled, noise)
        plain = aggregate(deltas, counts, sampled, noise)
        weights = np.where(sampled, counts / np.maximum(counts.sum(axis=0), 1), 0.0)
        exact = sum(
            weights[s] @ deltas[s].double().numpy() + noise[s].double().numpy()
            for s in range(N_SILOS)
        )
        assert total.dtype == torch.float32 and len(hook.round_timings) == round_index
        if kind == PLAIN:
            assert torch.equal(total, plain)
        elif kind == MASKED_SUM:
            assert np.abs(total.numpy() - plain.numpy()).max() <= precision(N_SILOS) + 1e-6
        else:  # within P before the float32 step, then one float32 rounding
            error = np.abs(total.double().numpy() - exact).max()
            assert error <= 1e-10 + 2.0**-24 * np.abs(exact).max()
    # within Protocol 1's per-coordinate bound, past the l2 norms the method implies: refused, nothing applied
    inflated = [torch.full((SIZE,), 7.0) for _ in range(N_SILOS)]
    with pytest.raises(ValueError, match="past the bound"):
        hook(deltas, counts, np.ones(N_USERS, dtype=bool), inflated)


def test_the_hook_refuses_an_unknown_aggregation_and_protocol_1_without_its_parameters():
    with pytest.raises(ValueError, match="unknown aggregation 'tls'; known: plain"):
        InProcessAggregator("tls")
    with pytest.raises(ValueError, match="needs Protocol 1's parameters"):
        InProcessAggregator(PROTOCOL_1)


def test_the_hook_sums_finished_updates_only_outside_protocol_1():
    """``sum_updates`` (the methods without per-user weights): plain, bit for bit the float32 sum in silo order;
    Protocol 1 refuses it before any set-up, since it weights per-user deltas itself."""
    from uldp.secure.config import ProtocolParameters

    updates = [torch.tensor([0.5, -1.25], dtype=torch.float32) * (s + 1) for s in range(N_SILOS)]
    counts, everyone = np.ones((N_SILOS, N_USERS), dtype=np.int64), np.ones(N_USERS, dtype=bool)
    total = InProcessAggregator(PLAIN).sum_updates(updates, counts, everyone)
    assert total.dtype == torch.float32 and torch.equal(total, updates[0] + updates[1] + updates[2])
    protocol = InProcessAggregator(
        PROTOCOL_1, parameters=ProtocolParameters(key_bits=512, insecure_test_key=True, n_max=100)
    )
    with pytest.raises(ValueError, match="the protocol-1 aggregation weights per-user deltas"):
        protocol.sum_updates(updates, counts, everyone)
    assert protocol.config is None  # refused before any session
