"""Tests of the packed Paillier backend (uldp.secure.packing, fast.pack_ciphertexts and the packed protocol path)."""

import math
from dataclasses import replace
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from phe import paillier
from test_secure_protocol import plain_round  # the same plain ULDP-AVG-w oracle

from uldp.secure import ProtocolConfig, ProtocolParameters, SecureSession, encoding, fast, packing
from uldp.secure.messages import MaskedUpdateMessage, RescaleRequestMessage

PACKED = ProtocolParameters(
    key_bits=1024, n_max=300, insecure_test_key=True, backend="packed-paillier"
)
P = 1e-10


@st.composite
def layouts_and_values(draw):
    width = draw(st.integers(2, 70))
    layout = packing.PackedLayout(
        weight_bits=0, resolution_bits=0, slot_bits=width, slots=draw(st.integers(1, 9))
    )
    half = 1 << (width - 1)
    edge = st.sampled_from([-half, -half + 1, -1, 0, 1, half - 2, half - 1])
    values = draw(st.lists(st.one_of(edge, st.integers(-half, half - 1)), max_size=30))
    return layout, values


@given(layouts_and_values())
@settings(max_examples=80)
def test_pack_unpack_round_trip_at_the_slot_edges(case):
    layout, values = case
    packed = packing.pack_integers(values, layout)
    assert len(packed) == layout.ciphertexts_for(len(values))
    assert packing.unpack_integers(packed, len(values), layout) == values
    # the packed integer is the plain positional sum (independent oracle)
    for i, value in enumerate(packed):
        group = values[i * layout.slots : (i + 1) * layout.slots]
        assert value == sum(v * 2 ** (layout.slot_bits * k) for k, v in enumerate(group))


def test_a_value_outside_its_slot_is_refused():
    layout = packing.PackedLayout(weight_bits=0, resolution_bits=0, slot_bits=8, slots=3)
    assert packing.unpack_integers(packing.pack_integers([127, -128], layout), 2, layout) == [
        127,
        -128,
    ]
    with pytest.raises(ValueError, match="slot of 8 bits"):
        packing.pack_integers([128], layout)
    with pytest.raises(ValueError, match="slot of 8 bits"):
        packing.pack_integers([-129], layout)
    with pytest.raises(ValueError, match="need 2 packed"):
        packing.unpack_integers([0], 4, layout)


@given(st.integers(1, 2000), st.integers(0, 2**200), st.booleans(), st.integers(10, 70))
@settings(max_examples=100)
def test_unblinded_weight_is_within_one_of_the_fixed_point_weight(total, blind, sampled, weight):
    c_lcm = encoding.lcm_up_to(2000)
    x = c_lcm // total if sampled else 0
    server_side = packing.rescaled(x + blind, c_lcm=c_lcm, weight=weight)
    w = packing.unblinded_weight(server_side, blind, c_lcm=c_lcm, weight=weight)
    exact = Fraction(2**weight * sampled, total)
    assert abs(w - exact) < 1
    assert w >= 0
    if not sampled:
        assert w == 0


def test_packing_ciphertexts_decrypts_to_the_packed_integers_in_any_number_of_processes():
    public, private = paillier.generate_paillier_keypair(n_length=512)
    n = public.n
    layout = packing.PackedLayout(weight_bits=0, resolution_bits=0, slot_bits=40, slots=5)
    values = [-(2**39), 2**39 - 1, 0, -1, 12345, 7, -99, 3, 1, -2, 2**38, 5, -5]
    ciphertexts = [public.raw_encrypt(v % n) for v in values]
    expected = [p % n for p in packing.pack_integers(values, layout)]
    outputs = [
        fast.pack_ciphertexts(ciphertexts, slots=5, slot_bits=40, n_square=n * n, processes=k)
        for k in (1, 2, 3)
    ]
    assert outputs[0] == outputs[1] == outputs[2]
    assert [private.raw_decrypt(int(c)) for c in outputs[0]] == expected
    fast.shutdown_pools()


@st.composite
def instances(draw):
    n_silos, n_users, dim = (
        draw(st.integers(1, 4)),
        draw(st.integers(1, 6)),
        draw(st.integers(1, 30)),
    )
    counts = np.array(
        draw(
            st.lists(
                st.lists(
                    st.one_of(st.just(0), st.integers(1, 300 // n_silos)),
                    min_size=n_users,
                    max_size=n_users,
                ),
                min_size=n_silos,
                max_size=n_silos,
            )
        )
    )
    counts[0, counts.sum(axis=0) == 0] = 1
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    deltas = rng.uniform(-0.5, 0.5, size=(n_silos, n_users, dim))
    deltas[counts == 0] = 0.0
    noise = rng.uniform(-3, 3, size=(n_silos, dim))
    sampled = np.array(draw(st.lists(st.booleans(), min_size=n_users, max_size=n_users)))
    return counts, deltas, noise, sampled


@given(instances())
@settings(max_examples=15, deadline=None)
def test_packed_round_equals_plain_round_within_precision(instance):
    counts, deltas, noise, sampled = instance
    session = SecureSession(counts, replace(PACKED, precision=P), clip=0.5, noise_bound=3.0)
    result = session.aggregate(deltas, noise, sampled)
    assert np.max(np.abs(result - plain_round(counts, deltas, noise, sampled))) <= P


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_no_slot_overflows_at_the_edges(sign):
    """Largest N_max the 1024-bit key allows, every user at N_max, deltas at +-C and noise at +-its bound: the
    aggregate sits at the slot bound, and decoding stays within P (an overflow would carry into the next slot)."""
    n_max = max(
        m
        for m in range(1, 1000)
        if encoding.lcm_up_to(m).bit_length() + packing.RESCALE_HIDING_BITS + 2 <= 1024
    )
    with pytest.raises(ValueError, match="rescale blind"):
        ProtocolConfig(
            n_silos=2,
            n_users=2,
            clip=1.0,
            noise_bound=1.0,
            parameters=replace(PACKED, n_max=n_max + 1),
        )
    n_silos, n_users, dim, clip, bound = 6, 12, 25, 2.0, 40.0
    counts = np.zeros((n_silos, n_users), dtype=int)
    counts[0] = n_max - (n_silos - 1)
    counts[1:] = 1
    parameters = replace(PACKED, n_max=n_max)
    session = SecureSession(counts, parameters, clip=clip, noise_bound=bound)
    layout = session.config.layout
    assert layout.slots >= 2  # several parameters share each plaintext
    deltas = np.full((n_silos, n_users, dim), sign * clip)
    noise = np.full((n_silos, dim), sign * bound)
    result = session.aggregate(deltas, noise, np.ones(n_users, bool))
    assert (
        np.max(np.abs(result - plain_round(counts, deltas, noise, np.ones(n_users, bool))))
        <= parameters.precision
    )
    # the aggregate uses most of the slot: the bound is not loose by more than a few bits
    assert math.log2(abs(result[0]) * 2**layout.scale_bits) > layout.slot_bits - 6


def test_layout_bounds_hold_and_a_key_without_room_for_one_slot_is_refused():
    config = ProtocolConfig(
        n_silos=5,
        n_users=100,
        clip=0.1,
        sigma=5.0,
        parameters=ProtocolParameters(n_max=2000, backend="packed-paillier"),
    )
    layout = config.layout
    assert layout.slots * layout.slot_bits <= config.parameters.key_bits - 1
    assert packing.error_bound(
        layout, n_users=100, n_silos=5, n_max=2000, delta_bound=0.1
    ) <= Fraction(1e-10)
    bound = packing.slot_bound(
        weight=layout.weight_bits,
        resolution=layout.resolution_bits,
        delta_bound=0.1,
        noise_bound=config.effective_noise_bound,
        n_users=100,
        n_silos=5,
        n_max=2000,
    )
    assert 2 * bound + 1 < 2**layout.slot_bits
    assert (
        8 * 2 * config.parameters.key_bits / 8 / layout.slots <= 10 * 4 * 8
    )  # ciphertext bits per parameter
    with pytest.raises(ValueError, match="packed slot needs"):
        ProtocolConfig(n_silos=2, n_users=2, clip=1e200, noise_bound=1.0, parameters=PACKED)
    with pytest.raises(ValueError, match="backend must be one of"):
        ProtocolParameters(backend="rot13")


def _until_requests(session, sampled):
    weights = session.server.start_round(1, sampled)
    requests = [m for silo in session.silos for m in silo.share_weight_powers(weights)]
    return weights, requests


def test_misuse_is_refused_by_name():
    counts = np.array([[2, 1, 0], [1, 0, 4]])
    session = SecureSession(counts, PACKED, clip=1.0, noise_bound=1.0)
    weights, requests = _until_requests(session, np.ones(3, bool))
    assert all(isinstance(m, RescaleRequestMessage) for m in requests)
    with pytest.raises(ValueError, match="no rescale request from silo"):
        session.server.relay(requests[:1])
    stale = RescaleRequestMessage(
        round_index=9, silo=requests[0].silo, ciphertexts=requests[0].ciphertexts
    )
    with pytest.raises(ValueError, match="for round 9"):
        session.server.relay([stale, requests[1]])
    with pytest.raises(ValueError, match="not in Z"):
        session.server.relay(
            [RescaleRequestMessage(1, 0, (0, *requests[0].ciphertexts[1:])), requests[1]]
        )
    inbox = session.server.relay(requests)
    deltas, noise = np.zeros((2, 3, 4)), np.zeros((2, 4))
    with pytest.raises(ValueError, match="rescaled weights alone"):
        session.silos[0].masked_update(weights, [], deltas[0], noise[0])
    updates = [
        silo.masked_update(weights, inbox[silo.silo_id], deltas[silo.silo_id], noise[silo.silo_id])
        for silo in session.silos
    ]
    assert all(
        isinstance(u, MaskedUpdateMessage) and len(u.ciphertexts) == 1 and u.parameters == 4
        for u in updates
    )
    assert isinstance(updates[1], MaskedUpdateMessage)
    short = MaskedUpdateMessage(
        round_index=1, silo=1, parameters=40, ciphertexts=updates[1].ciphertexts
    )
    with pytest.raises(ValueError, match="for 40 parameters"):
        session.server.finish_round([updates[0], short])
    np.testing.assert_array_equal(session.server.finish_round(updates), np.zeros(4))
    # a Paillier session refuses rescale requests
    plain = SecureSession(counts, replace(PACKED, backend="paillier"), clip=1.0, noise_bound=1.0)
    plain.server.start_round(1, np.ones(3, bool))
    with pytest.raises(ValueError, match="relays sealed messages, got a RescaleRequestMessage"):
        plain.server.relay(requests)


def test_the_server_sees_blinded_rescale_values():
    counts = np.zeros((2, 40), dtype=int)
    counts[0] = 1  # every N_u = 1: without the blind the server would see C_LCM for all
    session = SecureSession(counts, PACKED, clip=1.0, noise_bound=1.0)
    _, requests = _until_requests(session, np.ones(40, bool))
    seen = [z for m in requests for z in session.server.decrypt(m.ciphertexts)]
    c_lcm = session.config.c_lcm
    assert len(set(seen)) == 40 and all(z != c_lcm for z in seen)
    h = packing.rescale_blind_bits(key_bits=1024, n_max=300)
    assert max(seen).bit_length() > h - 8  # the blind dominates: values spread over [0, 2^h)


def test_rounds_do_not_depend_on_the_process_count():
    """Both sides in ProtocolParameters.processes workers: the per-parameter backend decodes to the same floats
    (its decoding is exact), the packed one within P of the plain sum (its weights' rounding is random)."""
    rng = np.random.default_rng(3)
    counts = rng.integers(1, 40, size=(3, 7))
    deltas, noise = rng.uniform(-0.5, 0.5, size=(3, 7, 50)), rng.uniform(-1, 1, size=(3, 50))
    sampled = np.ones(7, bool)
    plain = plain_round(counts, deltas, noise, sampled)
    for backend in ("paillier", "packed-paillier"):
        results = [
            SecureSession(
                counts, replace(PACKED, backend=backend, processes=k), clip=0.5, noise_bound=1.0
            ).aggregate(deltas, noise, sampled)
            for k in (1, 2, "auto")
        ]
        for result in results:
            assert np.max(np.abs(result - plain)) <= PACKED.precision
        if backend == "paillier":
            np.testing.assert_array_equal(results[0], results[1])
            np.testing.assert_array_equal(results[0], results[2])
    fast.shutdown_pools()
