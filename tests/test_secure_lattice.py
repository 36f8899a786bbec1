"""Tests of the lattice (BFV) round of Protocol 1 (uldp.secure.lattice): exactness within P, misuse, views."""

import secrets

import numpy as np
import pytest

pytest.importorskip("tenseal")

from test_secure_protocol import plain_round  # the same plain ULDP-AVG-w oracle

from uldp.secure import encoding, lattice, packing

P = 1e-10
N_MAX = 300


def _setup(counts, *, clip=0.5, noise_bound=3.0, precision=P):
    """The layout, the server and the silos (the per-round rescale, Paillier in the protocol, is :func:`_rescale`)."""
    n_silos, n_users = counts.shape
    layout = lattice.layout_for(precision=precision, n_users=n_users, n_silos=n_silos, n_max=N_MAX,
                                delta_bound=clip, noise_bound=noise_bound)
    keys = {(a, b): secrets.token_bytes(32) for a in range(n_silos) for b in range(a + 1, n_silos)}
    server = lattice.LatticeServer(layout)
    silos = [lattice.LatticeSilo(s, counts[s], layout, public_keys=server.public_keys(),
                                 mask_keys={p: keys[min(s, p), max(s, p)] for p in range(n_silos) if p != s})
             for s in range(n_silos)]
    return layout, server, silos


def _rescale(counts, sampled, layout):
    """One round's rescale in the clear: the server's y_u and the silos' c_u (:mod:`uldp.secure.packing`)."""
    c_lcm, g = encoding.lcm_up_to(N_MAX), layout.packed.weight_bits
    blind_bits = packing.rescale_blind_bits(key_bits=1024, n_max=N_MAX)
    blinds = [secrets.randbelow(1 << blind_bits) for _ in range(layout.n_users)]
    rescaled = [packing.rescaled((c_lcm // int(n) if b else 0) + r, c_lcm=c_lcm, weight=g)
                for n, b, r in zip(counts.sum(axis=0), sampled, blinds, strict=True)]
    return rescaled, [packing.rescaled(r, c_lcm=c_lcm, weight=g) for r in blinds]


def _round(server, silos, counts, deltas, noise, sampled, round_index=1):
    rescaled, corrections = _rescale(counts, sampled, server.layout)
    weights = server.encrypt_weights(rescaled)
    return weights, corrections, [silo.masked_update(round_index, weights, corrections, deltas[s], noise[s])
                                  for s, silo in enumerate(silos)]


def _instance(seed, n_silos=3, n_users=4, dim=5, clip=0.5):
    rng = np.random.default_rng(seed)
    counts = rng.integers(0, N_MAX // n_silos, (n_silos, n_users))
    counts[:, 0] = 0
    counts[1, 0] = N_MAX  # a user with N_max records, all in one silo
    deltas = rng.uniform(-clip, clip, (n_silos, n_users, dim))
    deltas[..., 0] = clip  # the largest delta
    deltas[counts == 0] = 0.0
    noise = rng.uniform(-3, 3, (n_silos, dim))
    sampled = rng.random(n_users) < 0.7
    sampled[0] = True
    return counts, deltas, noise, sampled & (counts.sum(axis=0) > 0)


@pytest.mark.parametrize("seed", [0, 1])
def test_lattice_round_equals_plain_round_within_precision(seed):
    counts, deltas, noise, sampled = _instance(seed)
    layout, server, silos = _setup(counts)
    _, _, updates = _round(server, silos, counts, deltas, noise, sampled)
    result = server.finish(updates, deltas.shape[2])
    assert np.max(np.abs(result - plain_round(counts, deltas, noise, sampled))) <= P
    assert len(layout.plain_moduli) == 2  # P = 1e-10 needs slots wider than one 60-bit prime


def test_security_parameters_are_within_the_he_standard():
    largest = lattice.layout_for(precision=1e-12, n_users=10_000, n_silos=100, n_max=2000, delta_bound=10.0,
                                 noise_bound=1e4)
    bits = lattice.coefficient_modulus_bits(largest.coefficient_bits)
    assert bits <= lattice.HE_STANDARD_MAX_BITS[lattice.RING_DEGREE]
    with pytest.raises(ValueError, match="128-bit security allows"):
        lattice.layout_for(precision=1e-12, n_users=2**100, n_silos=100, n_max=2000, delta_bound=10.0, noise_bound=1e4)


def test_one_silos_update_alone_decrypts_to_noise_and_replays_are_refused():
    counts, deltas, noise, sampled = _instance(2)
    _, server, silos = _setup(counts)
    weights, corrections, updates = _round(server, silos, counts, deltas, noise, sampled)
    alone = server.finish([updates[0]] * 3, deltas.shape[2])  # the masks do not cancel: garbage, not silo 0's sum
    assert np.min(np.abs(alone - 3 * plain_round(counts[:1], deltas[:1], noise[:1], sampled))) > 1.0
    with pytest.raises(ValueError, match="refuses round 1"):
        silos[0].masked_update(1, weights, corrections, deltas[0], noise[0])


def test_misuse_is_refused_by_name():
    counts, deltas, noise, sampled = _instance(3)
    _, server, silos = _setup(counts)
    rescaled, corrections = _rescale(counts, sampled, server.layout)
    weights = server.encrypt_weights(rescaled)
    with pytest.raises(ValueError, match="\\|U\\| = 4 ciphertexts"):
        silos[0].masked_update(1, [w[:-1] for w in weights], corrections, deltas[0], noise[0])
    with pytest.raises(ValueError, match="3 corrections"):
        silos[0].masked_update(1, weights, corrections[:-1], deltas[0], noise[0])
    with pytest.raises(ValueError, match="deltas must be"):
        silos[0].masked_update(2, weights, corrections, deltas[0][:, :2], noise[0])
    with pytest.raises(ValueError, match="beyond C="):
        silos[0].masked_update(3, weights, corrections, deltas[0] * 0 + 0.9, noise[0])
    with pytest.raises(ValueError, match="not a ciphertext of this lattice session"):
        silos[0].masked_update(4, [(b"garbage",) * len(w) for w in weights], corrections, deltas[0], noise[0])
    with pytest.raises(ValueError, match="non-negative integers"):
        server.encrypt_weights(rescaled[:-1])
    updates = [silo.masked_update(5, weights, corrections, deltas[s], noise[s]) for s, silo in enumerate(silos)]
    with pytest.raises(ValueError, match="aborted"):
        server.finish(updates[:-1], deltas.shape[2])
    with pytest.raises(ValueError, match=r"update of silo 0: .*ciphertexts per plaintext prime"):
        server.finish(updates, 2 * lattice.RING_DEGREE)
    with pytest.raises(ValueError, match="public key"):
        lattice.LatticeSilo(0, counts[0], silos[0].layout, public_keys=(b"x", b"y"), mask_keys={})
