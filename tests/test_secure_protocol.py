"""Tests of Protocol 1 end to end (uldp.secure.protocol and the aggregation hook): Theorem 4, aborts, views."""

import math
import os
from dataclasses import replace

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st
from scipy import stats

from uldp.federation import SecureAggregator
from uldp.secure import (
    ProtocolConfig,
    ProtocolParameters,
    SecureSession,
    fast,
    keys,
    protocol,
)
from uldp.secure.messages import MaskedUpdateMessage, SealedMessage, SiloState

TEST_KEY = ProtocolParameters(key_bits=1024, n_max=300, insecure_test_key=True)
P = 1e-10


def plain_round(counts, deltas, noise, sampled):
    """The non-secure ULDP-AVG-w aggregate: sum_s (sum_u n_su / N_u delta_su + z_s), float64."""
    totals = counts.sum(axis=0)
    weights = np.where(sampled & (totals > 0), counts / np.maximum(totals, 1), 0.0)
    return np.einsum("su,sud->d", weights, deltas) + noise.sum(axis=0)


@st.composite
def instances(draw):
    n_silos, n_users, dim = (
        draw(st.integers(1, 4)),
        draw(st.integers(1, 6)),
        draw(st.integers(1, 4)),
    )
    count = st.one_of(
        st.just(0), st.integers(1, 5), st.integers(50, 300 // n_silos)
    )  # zeros and large counts

    def table(item, width):
        """[n_silos, n_users, width] (or [n_silos, n_users] without ``width``) arrays of ``item``."""
        if width is not None:
            item = st.lists(item, min_size=width, max_size=width)
        return np.array(
            draw(
                st.lists(
                    st.lists(item, min_size=n_users, max_size=n_users),
                    min_size=n_silos,
                    max_size=n_silos,
                )
            )
        )

    counts = table(count, None)
    lonely = draw(st.integers(0, n_users - 1))  # a user present in one silo only
    counts[:, lonely] = 0
    counts[draw(st.integers(0, n_silos - 1)), lonely] = draw(st.integers(1, 300))
    clip = 0.5
    value = st.floats(-clip, clip, allow_nan=False)
    deltas = table(value, dim)
    deltas[counts == 0] = 0.0
    noise = np.array(
        draw(
            st.lists(
                st.lists(st.floats(-3, 3), min_size=dim, max_size=dim),
                min_size=n_silos,
                max_size=n_silos,
            )
        )
    )
    sampled = np.array(draw(st.lists(st.booleans(), min_size=n_users, max_size=n_users))) & (
        counts.sum(axis=0) > 0
    )
    return counts, deltas, noise, sampled, clip


@given(instances())
@settings(max_examples=25, deadline=None)
def test_secure_round_equals_plain_round_within_precision(instance):
    counts, deltas, noise, sampled, clip = instance
    session = SecureSession(counts, replace(TEST_KEY, precision=P), clip=clip, noise_bound=3.0)
    result = session.aggregate(deltas, noise, sampled)
    assert np.max(np.abs(result - plain_round(counts, deltas, noise, sampled))) <= P


def _session(counts, **kwargs):
    return SecureSession(counts, TEST_KEY, clip=1.0, sigma=1.0, **kwargs)


def test_several_rounds_reuse_the_setup_and_stay_exact():
    rng = np.random.default_rng(3)
    counts = rng.integers(0, 30, size=(3, 8))
    session = _session(counts)
    for _ in range(3):
        deltas = rng.uniform(-1, 1, size=(3, 8, 5))
        deltas[counts == 0] = 0
        noise = rng.normal(size=(3, 5))
        sampled = (rng.random(8) < 0.6) & (counts.sum(axis=0) > 0)
        error = session.aggregate(deltas, noise, sampled) - plain_round(
            counts, deltas, noise, sampled
        )
        assert np.max(np.abs(error)) <= P


def _stages_until_updates(session, deltas, noise, sampled):
    server, silos = session.server, session.silos
    weights = server.start_round(1, sampled)
    shares = server.relay([m for silo in silos for m in silo.share_weight_powers(weights)])
    updates = [
        silo.masked_update(weights, shares[silo.silo_id], deltas[silo.silo_id], noise[silo.silo_id])
        for silo in silos
    ]
    return server, updates, weights, shares


def test_missing_silo_aborts_without_decrypting(monkeypatch):
    counts = np.array([[1, 2], [3, 0], [0, 4]])
    session = _session(counts)
    deltas, noise = np.full((3, 2, 3), 0.1), np.zeros((3, 3))
    server, updates, _, _ = _stages_until_updates(session, deltas, noise, np.array([True, True]))

    def never(*args, **kwargs):
        raise AssertionError("decrypted a partial masked sum")

    monkeypatch.setattr(fast, "crt_decrypt", never)
    with pytest.raises(ValueError, match=r"no masked update from silo\(s\) \[1\]"):
        server.finish_round([updates[0], updates[2]])
    with pytest.raises(ValueError, match="duplicate"):
        server.finish_round([updates[0], updates[0], updates[2]])


def test_missing_silo_in_setup_aborts():
    counts = np.array([[1, 2], [3, 0]])
    session = _session(counts)
    with pytest.raises(ValueError, match=r"no blinded histogram from silo\(s\) \[0\]"):
        session.server.receive_histograms([session.silos[1].blinded_histogram()])


def test_tampered_update_and_share_are_rejected():
    counts = np.array([[1, 2], [3, 1]])
    session = _session(counts)
    deltas, noise = np.full((2, 2, 2), 0.1), np.zeros((2, 2))
    server, updates, weights, shares = _stages_until_updates(
        session, deltas, noise, np.array([True, True])
    )
    raw = bytearray(updates[1].to_bytes())
    raw[40] ^= 0x10
    with pytest.raises(ValueError, match="digest"):
        MaskedUpdateMessage.from_bytes(bytes(raw))
    # A relay that alters a sealed share (and fixes the digest) is caught by ChaCha20-Poly1305.
    share = shares[1][0]
    forged = SealedMessage(
        share.sender,
        share.recipient,
        share.round_index,
        share.purpose,
        share.nonce,
        bytes([share.ciphertext[0] ^ 1]) + share.ciphertext[1:],
    )
    silo = session.silos[1]
    silo.share_weight_powers(weights)
    with pytest.raises(ValueError, match="authentication"):
        silo.masked_update(weights, [forged], deltas[1], noise[1])
    # An update from a different round is refused before decryption.
    stale = MaskedUpdateMessage(
        round_index=7, silo=1, parameters=updates[1].parameters, ciphertexts=updates[1].ciphertexts
    )
    with pytest.raises(ValueError, match="round 7"):
        server.finish_round([updates[0], stale])


def test_checks_before_anything_is_sent(monkeypatch):
    def no_keys(*args, **kwargs):
        raise AssertionError("generated keys before checking")

    monkeypatch.setattr(keys, "generate_paillier_keypair", no_keys)
    with pytest.raises(ValueError, match="N_u > N_max=300"):
        SecureSession(np.array([[200], [150]]), TEST_KEY, clip=1.0)
    with pytest.raises(ValueError, match="wrap around"):
        SecureSession(np.array([[1]]), replace(TEST_KEY, n_max=800), clip=1.0)
    with pytest.raises(ValueError, match="wrap around"):
        SecureSession(np.array([[1]]), TEST_KEY, clip=1.0, sigma=1e180)
    with pytest.raises(ValueError, match="at least 2048"):
        replace(TEST_KEY, insecure_test_key=False)


def test_sampled_user_without_records_and_out_of_bound_values_are_refused():
    counts = np.array([[2, 0], [1, 0]])
    session = _session(counts)
    deltas, noise = np.zeros((2, 2, 1)), np.zeros((2, 1))
    with pytest.raises(ValueError, match=r"user\(s\) \[1\].*N_u = 0"):
        session.aggregate(deltas, noise, np.array([True, True]))
    with pytest.raises(ValueError, match=r"user\(s\) \[1\].*N_u = 0"):
        session.server.start_round(1, np.array([True, True]))
    deltas[0, 0, 0] = 2.0
    with pytest.raises(ValueError, match="clip bound"):
        session.aggregate(deltas, noise, np.array([True, False]))


def test_blinds_are_shared_units_and_server_view_is_uniform():
    n_users = 400
    counts = np.zeros((3, n_users), dtype=int)
    counts[0] = 1  # every user has N_u = 1: without blinding the server would see 1 for all of them
    counts[1, ::2] = 4
    session = _session(counts)
    n = session.server.public_key.n
    blinds = [silo._blinds for silo in session.silos]
    assert blinds[0] == blinds[1] == blinds[2]
    assert all(0 < r < n and math.gcd(r, n) == 1 for r in blinds[0])
    view = np.array([b / n for b in session.server.blinded_totals], dtype=float)
    assert stats.kstest(view, "uniform").pvalue > 1e-6
    # One silo's masked update, decrypted alone, is uniform on Z_n as well (the masks hide it).
    deltas, noise = np.zeros((3, n_users, 200)), np.zeros((3, 200))
    _, updates, _, _ = _stages_until_updates(session, deltas, noise, np.ones(n_users, bool))
    alone = session.server.decrypt(updates[0].ciphertexts)
    assert stats.kstest(np.array(alone, dtype=float) / n, "uniform").pvalue > 1e-6


def test_hook_has_plain_signature_and_result():
    aggregate = SecureAggregator(TEST_KEY)
    rng = np.random.default_rng(11)
    counts = rng.integers(0, 10, size=(3, 5))
    counts[:, 4] = 0  # a user without records: zero deltas, weight 0
    deltas = [torch.tensor(rng.normal(size=(5, 4)) * 0.05) for _ in range(3)]
    for s in range(3):
        deltas[s][counts[s] == 0] = 0
    noise = [torch.tensor(rng.normal(size=4)) for _ in range(3)]
    sampled = np.array([True, False, True, True, True])
    result = aggregate(deltas, counts, sampled, noise)
    expected = plain_round(
        counts, np.stack([d.numpy() for d in deltas]), np.stack([z.numpy() for z in noise]), sampled
    )
    assert isinstance(result, torch.Tensor) and result.dtype == torch.float64
    assert np.max(np.abs(result.numpy() - expected)) <= P


def test_hook_with_run_bounds_keeps_its_setup_and_refuses_larger_deltas():
    aggregate = SecureAggregator(TEST_KEY, clip=0.5, sigma=1.0)
    counts = np.array([[1, 2], [3, 0]])
    noise = [torch.zeros(2), torch.zeros(2)]
    small = [torch.full((2, 2), 0.25), torch.tensor([[0.5, -0.5], [0.0, 0.0]])]
    first = aggregate(small, counts, np.array([True, True]), noise)
    session = aggregate.config
    assert session is not None
    second = aggregate(small, counts, np.array([True, True]), noise)
    assert aggregate.config is session and session.clip == 0.5  # C and sigma are the public bounds
    assert torch.equal(first, second) and len(aggregate.round_timings) == 2
    with pytest.raises(ValueError, match="clip bound"):
        aggregate([torch.full((2, 2), 0.75), small[1]], counts, np.array([True, True]), noise)


@pytest.mark.parametrize(
    "change, detail",
    [
        ({"key_bits": 1001, "insecure_test_key": True, "n_max": 300}, "multiple of 8"),
        ({"key_bits": 20000}, "key_bits"),
        ({"insecure_test_key": 1}, "insecure_test_key must be true or false"),
        ({"precision": 1.0}, "precision"),
        ({"precision": 0.0}, "precision"),
        ({"n_max": 0}, "n_max"),
        ({"n_max": 3072}, "n_max"),
        ({"n_max": 2.5}, "n_max"),
        ({"processes": 0}, "processes"),
        ({"processes": "all"}, "processes \\(a count or 'auto'\\)"),
    ],
)
def test_protocol_parameters_refuse_bad_values_by_name(change, detail):
    with pytest.raises(ValueError, match=detail):
        ProtocolParameters(**change)
    with pytest.raises(ValueError, match="fields among"):
        ProtocolParameters.from_mapping({"bits": 512})
    assert ProtocolParameters.from_mapping({"key_bits": 4096}) == ProtocolParameters(key_bits=4096)


def test_the_default_worker_count_is_every_core_up_to_sixteen(monkeypatch):
    """``processes="auto"`` (the default) resolves where the work runs, to the cores this process may use, bounded."""
    from uldp.secure import config

    assert ProtocolParameters().processes == "auto"
    assert ProtocolParameters().workers == min(len(os.sched_getaffinity(0)), 16)
    assert ProtocolParameters(processes=3).workers == 3
    monkeypatch.setattr(config, "available_cores", lambda: 64)
    assert ProtocolParameters().workers == 16 == config.MAX_AUTO_PROCESSES
    monkeypatch.setattr(config, "available_cores", lambda: 1)
    assert ProtocolParameters().workers == 1


def test_a_silo_restored_from_its_state_bytes_between_every_message_computes_the_same_round():
    """Each silo leaves through Silo.export_state after every message and comes back by Silo.restore (as a Flower
    ClientApp in a fresh process would): the round is still within P of the plain one."""
    rng = np.random.default_rng(5)
    counts = rng.integers(0, 20, size=(3, 7))
    counts[:, 0] = [0, 0, 4]
    config = ProtocolConfig(n_silos=3, n_users=7, clip=1.0, sigma=1.0, parameters=TEST_KEY)
    server = protocol.Server(config)
    states = [protocol.Silo(s, counts[s], config).export_state() for s in range(3)]

    def step(s, action):
        silo = protocol.Silo.restore(states[s], config)
        answer = action(silo)
        states[s] = silo.export_state()
        return answer

    public = server.public_key_message()
    answers = [step(s, lambda silo: silo.receive_public_key(public)) for s in range(3)]
    directory = server.relay_dh_keys([dh for dh, _ in answers])
    proofs = [
        server.prove_modulus(request) for _, request in answers
    ]  # each silo's nonce survives its restore
    for s in range(3):
        step(s, lambda silo: silo.accept_modulus(proofs[silo.silo_id]))
    inbox = server.relay(
        [m for s in range(3) for m in step(s, lambda silo: silo.receive_dh_directory(directory))]
    )
    for s in range(3):
        step(s, lambda silo: silo.receive_seed(inbox[silo.silo_id]))
    server.receive_histograms([step(s, lambda silo: silo.blinded_histogram()) for s in range(3)])
    deltas = rng.uniform(-1, 1, size=(3, 7, 4))
    deltas[counts == 0] = 0
    noise = rng.normal(size=(3, 4))
    sampled = (counts.sum(axis=0) > 0) & (rng.random(7) < 0.8)
    weights = server.start_round(1, sampled)
    shares = server.relay(
        [m for s in range(3) for m in step(s, lambda silo: silo.share_weight_powers(weights))]
    )
    updates = [
        step(
            s,
            lambda silo: silo.masked_update(
                weights, shares[silo.silo_id], deltas[silo.silo_id], noise[silo.silo_id]
            ),
        )
        for s in range(3)
    ]
    assert (
        np.max(np.abs(server.finish_round(updates) - plain_round(counts, deltas, noise, sampled)))
        <= P
    )
    restored = protocol.Silo.restore(states[1], config)
    assert restored.export_state() == states[1]
    with pytest.raises(ValueError, match="digest"):
        protocol.Silo.restore(states[1][:-1] + bytes([states[1][-1] ^ 1]), config)
    with pytest.raises(ValueError, match="expected a SiloState"):
        protocol.Silo.restore(updates[0].to_bytes(), config)


@pytest.mark.parametrize(
    "change, message",
    [
        (
            dict(modulus=1),
            "expected an odd 1024-bit modulus, got 1 bits",
        ),  # before: accepted; with a seed, a loop
        (dict(modulus=9), "expected an odd 1024-bit modulus, got 4 bits"),  # before: accepted
        (dict(modulus=2**1024 - 2), "expected an odd 1024-bit modulus"),
        (dict(counts=(2**70, 0, 0)), r"counts must be 3 counts in 0..300"),  # before: OverflowError
        (dict(counts=(1, 2)), r"counts must be 3 counts"),
        (dict(counts=(301, 0, 0)), r"counts must be 3 counts in 0..300"),
        (dict(seed=b"short"), "seed that is not 32 bytes"),
        (dict(aead_keys=(b"k" * 31, b"k" * 32)), "aead key that is not 32 bytes"),
        (dict(round_index=1, own_powers=(0,)), "weight power outside"),
        (dict(silo=7), "silo id 7 outside 0..2"),
    ],
)
def test_a_silo_state_is_refused_field_by_field(change, message):
    """Issue 30 item 8: a state's fields are checked as the steps that set them check them, before any array or
    loop is made of them."""
    config = ProtocolConfig(n_silos=3, n_users=3, clip=1.0, sigma=1.0, parameters=TEST_KEY)
    silo = protocol.Silo(1, np.array([1, 2, 0]), config)
    silo.receive_public_key(protocol.Server(config).public_key_message())
    state = SiloState.from_bytes(silo.export_state())
    assert protocol.Silo.restore(state.to_bytes(), config).export_state() == state.to_bytes()
    with pytest.raises(ValueError, match=message):
        protocol.Silo.restore(replace(state, **change).to_bytes(), config)


def test_only_the_key_holder_decrypts_and_only_ciphertexts_of_its_key():
    session = _session(np.array([[1, 2], [3, 1]]))
    n = session.server.public_key.n
    assert session.server.decrypt([1, (1 + 5 * n) % (n * n)]) == [
        0,
        5,
    ]  # Enc(m) with r = 1 is 1 + m n
    with pytest.raises(ValueError, match=r"\[0, n\^2\)"):
        session.server.decrypt([n * n])


def test_the_old_home_of_secure_aggregator_warns_and_gives_the_federation_class():
    """``uldp.secure.SecureAggregator`` moved up to :mod:`uldp.federation` (it drives the federation round); the old
    name resolves to the same class for one release, with a ``DeprecationWarning``, and is no longer exported."""
    import uldp.secure

    with pytest.warns(DeprecationWarning, match="use uldp.federation.SecureAggregator"):
        old = uldp.secure.SecureAggregator
    assert old is SecureAggregator
    assert "SecureAggregator" not in uldp.secure.__all__
