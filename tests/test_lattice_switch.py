"""Tests of the lattice update's modulus switch and wire format (uldp.secure.lattice_switch), the weights sent once per
sample (uldp.secure.backends.lattice) and the traffic they leave (issue 43 item 5)."""

import math
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

pytest.importorskip("tenseal")

from test_secure_lattice import N_MAX, P, worst_case_round
from test_secure_protocol import plain_round

from uldp.secure import (
    ProtocolParameters,
    SecureSession,
    lattice,
    lattice_switch,
)
from uldp.secure.backends.base import Backend
from uldp.secure.backends.lattice import LatticeBackend
from uldp.secure.driver import STAGE_UPDATE
from uldp.secure.messages import LatticeWeightsMessage


def _limbs(values):
    values = np.array(values, dtype=object)
    return (values & (2**64 - 1)).astype(np.uint64), (values >> 64).astype(np.uint64)


def _ints(limbs):
    return [int(lo) + (int(hi) << 64) for lo, hi in zip(*limbs, strict=True)]


@settings(max_examples=40, deadline=None)
@given(bits=st.integers(1, 128), data=st.data())
def test_pack_unpack_and_masks_cancel(bits, data):
    values = data.draw(st.lists(st.integers(0, 2**bits - 1), min_size=1, max_size=40))
    mask = data.draw(
        st.lists(st.integers(0, 2**bits - 1), min_size=len(values), max_size=len(values))
    )
    packed = lattice_switch.pack(_limbs(values), bits)
    assert len(packed) == -(-len(values) * bits // 8)
    assert _ints(lattice_switch.unpack(packed, len(values), bits)) == values
    plus = lattice_switch.add(_limbs(values), _limbs(mask), bits)
    assert _ints(plus) == [(v + m) % 2**bits for v, m in zip(values, mask, strict=True)]
    assert _ints(lattice_switch.add(plus, _limbs(mask), bits, sign=-1)) == values


@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_switch_then_lift_is_within_the_rounding_bound(data):
    moduli = [1152921504606584833, 1152921504598720513]  # two 60-bit primes
    modulus = math.prod(moduli)
    bits = data.draw(st.integers(20, 100))
    values = data.draw(st.lists(st.integers(0, modulus - 1), min_size=1, max_size=30))
    residues = np.array([[v % q for v in values] for q in moduli], dtype=np.uint64)
    switched = lattice_switch.switch(residues, moduli, bits)
    for v, s in zip(values, _ints(switched), strict=True):  # round(v 2^b / Q) mod 2^b, exactly
        assert s == ((v << bits) + modulus // 2) // modulus % (1 << bits)
    lifted = lattice_switch.lift(switched, bits, moduli)
    for v, residue in zip(values, lifted.T, strict=True):
        back = int(residue[0]) + moduli[0] * (
            (int(residue[1]) - int(residue[0])) * pow(moduli[0], -1, moduli[1]) % moduli[1]
        )
        error = min((back - v) % modulus, (v - back) % modulus)
        assert error <= modulus / 2 ** (bits + 1) + 1  # the bound the budget uses


def test_the_budget_is_checked_and_refuses_too_few_primes():
    layout = lattice.layout_for(
        precision=P, n_users=100, n_silos=5, n_max=2000, delta_bound=0.1, noise_bound=3.0
    )
    primes = [
        m.value()
        for m in lattice._seal().CoeffModulus.Create(
            lattice.RING_DEGREE, list(layout.coefficient_bits)
        )
    ]
    moduli, flood = layout.plain_moduli, layout.flood_bits
    assert (
        lattice_switch.budget_bits(
            coefficient_primes=primes[:-1], plain_moduli=moduli, n_silos=5, flood_bits=flood
        )
        >= 1
    )
    with pytest.raises(ValueError, match="would not decrypt exactly"):
        lattice_switch.check_budget(
            coefficient_primes=primes[:2], plain_moduli=moduli, n_silos=5, flood_bits=flood
        )
    assert math.prod(layout.plain_moduli) > 2 * layout.slot_bound + 1
    assert all(
        t < 2**48 for t in layout.plain_moduli
    )  # just above sqrt(2B + 1), not 59-bit batching primes


def test_worst_case_norms_at_the_bound_decrypt_exactly():
    """Every delta at +-C, every noise coordinate at the bound, a user with N_max records in one silo: the largest
    slots and the largest circuit noise the layout allows, over two chunks."""
    n_silos, dim = 3, lattice.RING_DEGREE + 2
    layout, updates, result, plain = worst_case_round(
        n_silos, 4, dim, np.ones(4, dtype=bool), per_silo=N_MAX // n_silos
    )
    assert np.max(np.abs(result - plain)) <= P
    expected = [
        lattice_switch.wire_bytes(
            min(lattice.RING_DEGREE, dim - c * lattice.RING_DEGREE), layout.switch_bits
        )
        for c in range(2)
    ]
    assert [[len(c) for c in prime] for prime in updates[0]] == [expected] * len(
        layout.plain_moduli
    )


def _recording(session):
    """Wrap every silo driver's answer to record the bytes each silo receives at the update stage."""
    received = []

    def wrap(driver):
        answer = driver.answer

        def recorded(stage, round_index, message, **kwargs):
            if stage == STAGE_UPDATE:
                received.append(sum(len(p) for p in message))
            return answer(stage, round_index, message, **kwargs)

        driver.answer = recorded

    for driver in session.silo_drivers:
        wrap(driver)
    return received


def test_weights_are_sent_once_per_sample_and_again_to_a_silo_without_them():
    rng = np.random.default_rng(7)
    counts = rng.integers(1, 50, (3, 4))
    deltas = rng.uniform(-0.5, 0.5, (3, 4, 6))
    noise = rng.uniform(-3, 3, (3, 6))
    parameters = ProtocolParameters(
        key_bits=1024, n_max=N_MAX, insecure_test_key=True, backend="lattice"
    )
    session = SecureSession(counts, parameters, clip=0.5, noise_bound=3.0)
    received = _recording(session)
    everyone, some = np.ones(4, dtype=bool), np.array([True, False, True, True])
    for sampled in (everyone, everyone, some, some, everyone):
        result = session.aggregate(deltas, noise, sampled)
        assert np.max(np.abs(result - plain_round(counts, deltas, noise, sampled))) <= P
    light = min(received)  # the Paillier messages alone (their length varies by a few bytes)
    assert (
        max(received) > 100 * light
    )  # the BFV weights dominate; a round that reuses them carries none
    heavy = [[size > 10 * light for size in received[i : i + 3]] for i in range(0, 15, 3)]
    assert heavy == [[True] * 3, [False] * 3, [True] * 3, [False] * 3, [True] * 3]
    _lattice(session.silos[1].backend)._held = None  # restored from its state: it holds no weights
    del received[:]
    result = session.aggregate(deltas, noise, everyone)
    assert np.max(np.abs(result - plain_round(counts, deltas, noise, everyone))) <= P
    assert [size > 10 * light for size in received] == [False, True, False]


def _lattice(backend: Backend) -> LatticeBackend:
    assert isinstance(backend, LatticeBackend)
    return backend


def test_a_light_answer_to_a_silo_without_the_weights_is_refused(monkeypatch):
    counts = np.full((3, 3), 5)
    deltas, noise = np.zeros((3, 3, 2)), np.zeros((3, 2))
    parameters = ProtocolParameters(
        key_bits=1024, n_max=N_MAX, insecure_test_key=True, backend="lattice"
    )
    session = SecureSession(counts, parameters, clip=0.5, noise_bound=3.0)
    everyone = np.ones(3, dtype=bool)
    session.aggregate(deltas, noise, everyone)
    backend = session.server.backend
    honest = backend.answer_shares

    def light(server, messages):  # a server that never resends the weights
        answers = honest(server, messages)
        assert all(isinstance(m, LatticeWeightsMessage) for a in answers.values() for m in a)
        return {s: [replace(m, ciphertexts=()) for m in a] for s, a in answers.items()}  # type: ignore[call-arg]

    monkeypatch.setattr(backend, "answer_shares", light)
    _lattice(session.silos[1].backend)._held = None
    with pytest.raises(
        ValueError, match="reuses the BFV weights of round 1, which this silo does not hold"
    ):
        session.aggregate(deltas, noise, everyone)
