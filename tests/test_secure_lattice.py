"""Tests of the lattice (BFV) round of Protocol 1 (uldp.secure.lattice): exactness within P, misuse, views."""

import secrets
from dataclasses import replace

import numpy as np
import pytest

pytest.importorskip("tenseal")

from test_secure_protocol import plain_round  # the same plain ULDP-AVG-w oracle

from uldp.secure import (
    ProtocolConfig,
    ProtocolParameters,
    SecureSession,
    config,
    encoding,
    lattice,
    lattice_silo,
    packing,
    protocol,
)
from uldp.secure.messages import (
    LatticeKeysMessage,
    LatticeUpdateMessage,
    MaskedUpdateMessage,
    SiloState,
)

P = 1e-10
N_MAX = 300
#: A wrong key or uncancelled masks decrypt to values uniform on the aggregates' range [-B, B] / 2^(g+f) (about +-25
#: here: the plaintext moduli's product is just above 2B + 1): none lands within 1000 P of the right value but with
#: probability about 1e-10 per coordinate.
GARBAGE = 1000 * P


def _setup(counts, *, clip=0.5, noise_bound=3.0, precision=P, processes=1):
    """The layout, the server and the silos (the per-round rescale, Paillier in the protocol, is :func:`_rescale`)."""
    n_silos, n_users = counts.shape
    layout = lattice.layout_for(
        precision=precision,
        n_users=n_users,
        n_silos=n_silos,
        n_max=N_MAX,
        delta_bound=clip,
        noise_bound=noise_bound,
    )
    keys = {(a, b): secrets.token_bytes(32) for a in range(n_silos) for b in range(a + 1, n_silos)}
    server = lattice.LatticeServer(layout)
    silos = [
        lattice_silo.LatticeSilo(
            s,
            counts[s],
            layout,
            public_keys=server.public_keys(),
            galois_keys=server.galois_keys(),
            workers=processes,
            mask_keys={p: keys[min(s, p), max(s, p)] for p in range(n_silos) if p != s},
        )
        for s in range(n_silos)
    ]
    return layout, server, silos


def _rescale(counts, sampled, layout):
    """One round's rescale in the clear: the server's y_u and the silos' c_u (:mod:`uldp.secure.packing`)."""
    c_lcm, g = encoding.lcm_up_to(N_MAX), layout.packed.weight_bits
    blind_bits = packing.rescale_blind_bits(key_bits=1024, n_max=N_MAX)
    blinds = [secrets.randbelow(1 << blind_bits) for _ in range(layout.n_users)]
    rescaled = [
        packing.rescaled((c_lcm // int(n) if b else 0) + r, c_lcm=c_lcm, weight=g)
        for n, b, r in zip(counts.sum(axis=0), sampled, blinds, strict=True)
    ]
    return rescaled, [packing.rescaled(r, c_lcm=c_lcm, weight=g) for r in blinds]


def worst_case_round(n_silos, n_users, dim, sampled, *, per_silo, clip=0.5, noise_bound=3.0):
    """A round at the layout's worst case: every delta at +-C, every noise coordinate at the bound, a user with
    N_max records in one silo (and none elsewhere), every other user with ``per_silo`` records in each silo. Returns
    the layout, the silos' updates, the decrypted sum and the plain round it must be within P of."""
    counts = np.full((n_silos, n_users), per_silo)
    counts[:, 0], counts[1, 0] = 0, N_MAX
    signs = np.where(np.arange(dim) % 2 == 0, 1.0, -1.0)
    deltas = np.broadcast_to(clip * signs, (n_silos, n_users, dim)).copy()
    deltas[counts == 0] = 0.0
    noise = np.broadcast_to(noise_bound * signs, (n_silos, dim)).copy()
    layout, server, silos = _setup(counts, clip=clip, noise_bound=noise_bound)
    rescaled, corrections = _rescale(counts, sampled, layout)
    weights = server.encrypt_weights(rescaled)
    updates = [
        s.masked_update(1, weights, corrections, deltas[i], noise[i]) for i, s in enumerate(silos)
    ]
    return layout, updates, server.finish(updates, dim), plain_round(counts, deltas, noise, sampled)


def _round(server, silos, counts, deltas, noise, sampled, round_index=1):
    rescaled, corrections = _rescale(counts, sampled, server.layout)
    weights = server.encrypt_weights(rescaled)
    return (
        weights,
        corrections,
        [
            silo.masked_update(round_index, weights, corrections, deltas[s], noise[s])
            for s, silo in enumerate(silos)
        ],
    )


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


def test_results_do_not_depend_on_the_process_count():
    counts, deltas, noise, sampled = _instance(
        6, n_users=5, dim=lattice.RING_DEGREE + 3
    )  # two chunks
    counts[2, 4] = 7
    deltas[2, 4] = 0.0  # records but a zero delta: its weight is skipped, the sum stays exact
    deltas[0, :, lattice.RING_DEGREE :] = 0.0  # silo 0's second chunk has no products at all
    layout, server, serial = _setup(counts)
    parallel = [
        lattice_silo.LatticeSilo(
            s,
            counts[s],
            layout,
            public_keys=server.public_keys(),
            galois_keys=server.galois_keys(),
            workers=3,  # four (prime, chunk) ciphertexts over three workers
            mask_keys=silo._mask_keys,
        )
        for s, silo in enumerate(serial)
    ]
    for silo in serial:
        silo.workers = 1
    plain = plain_round(counts, deltas, noise, sampled)
    for round_index in (1, 2):  # the workers keep their contexts between rounds
        rescaled, corrections = _rescale(counts, sampled, layout)
        weights = server.encrypt_weights(rescaled)
        sums = [
            server.finish(
                [
                    silo.masked_update(round_index, weights, corrections, deltas[s], noise[s])
                    for s, silo in enumerate(silos)
                ],
                deltas.shape[2],
            )
            for silos in (serial, parallel)
        ]
        assert np.array_equal(sums[0], sums[1])
        assert np.max(np.abs(sums[1] - plain)) <= P
    for bad in (0, 1.5, True):
        with pytest.raises(ValueError, match="workers"):
            lattice_silo.LatticeSilo(
                0,
                counts[0],
                layout,
                public_keys=server.public_keys(),
                galois_keys=server.galois_keys(),
                mask_keys={},
                workers=bad,  # type: ignore[arg-type]
            )
    assert (
        serial[0].workers == 1
        and lattice_silo.LatticeSilo(
            0,
            counts[0],
            layout,
            public_keys=server.public_keys(),
            galois_keys=server.galois_keys(),
            mask_keys={},
        ).workers
        == config.auto_workers()
        >= 1
    )


def test_security_parameters_are_within_the_he_standard():
    largest = lattice.layout_for(
        precision=1e-12, n_users=10_000, n_silos=100, n_max=2000, delta_bound=10.0, noise_bound=1e4
    )
    bits = lattice.coefficient_modulus_bits(largest.coefficient_bits)
    assert bits <= lattice.HE_STANDARD_MAX_BITS[lattice.RING_DEGREE]
    with pytest.raises(ValueError, match="128-bit security allows"):
        lattice.layout_for(
            precision=1e-12,
            n_users=2**100,
            n_silos=100,
            n_max=2000,
            delta_bound=10.0,
            noise_bound=1e4,
        )


def test_one_silos_update_alone_decrypts_to_noise_and_replays_are_refused():
    counts, deltas, noise, sampled = _instance(2)
    _, server, silos = _setup(counts)
    weights, corrections, updates = _round(server, silos, counts, deltas, noise, sampled)
    alone = server.finish(
        [updates[0]] * 3, deltas.shape[2]
    )  # the masks do not cancel: garbage, not silo 0's sum
    assert (
        np.min(np.abs(alone - 3 * plain_round(counts[:1], deltas[:1], noise[:1], sampled)))
        > GARBAGE
    )
    with pytest.raises(ValueError, match="refuses round 1"):
        silos[0].masked_update(1, weights, corrections, deltas[0], noise[0])


def test_misuse_is_refused_by_name():
    counts, deltas, noise, sampled = _instance(3)
    _, server, silos = _setup(counts)
    rescaled, corrections = _rescale(counts, sampled, server.layout)
    weights = server.encrypt_weights(rescaled)
    with pytest.raises(ValueError, match="ceil\\(\\|U\\| / N\\) = 1 packed ciphertexts"):
        silos[0].masked_update(1, [w[:-1] for w in weights], corrections, deltas[0], noise[0])
    with pytest.raises(ValueError, match="3 corrections"):
        silos[0].masked_update(1, weights, corrections[:-1], deltas[0], noise[0])
    with pytest.raises(ValueError, match="deltas must be"):
        silos[0].masked_update(2, weights, corrections, deltas[0][:, :2], noise[0])
    with pytest.raises(ValueError, match="beyond C="):
        silos[0].masked_update(3, weights, corrections, deltas[0] * 0 + 0.9, noise[0])
    with pytest.raises(ValueError, match="not a ciphertext of this lattice session"):
        silos[0].masked_update(
            4, [(b"garbage",) * len(w) for w in weights], corrections, deltas[0], noise[0]
        )
    with pytest.raises(ValueError, match="non-negative integers"):
        server.encrypt_weights(rescaled[:-1])
    updates = [
        silo.masked_update(5, weights, corrections, deltas[s], noise[s])
        for s, silo in enumerate(silos)
    ]
    with pytest.raises(ValueError, match="aborted"):
        server.finish(updates[:-1], deltas.shape[2])
    with pytest.raises(ValueError, match=r"update of silo 0: .*ciphertexts per plaintext prime"):
        server.finish(updates, 2 * lattice.RING_DEGREE)
    with pytest.raises(ValueError, match="public key"):
        lattice_silo.LatticeSilo(
            0,
            counts[0],
            silos[0].layout,
            public_keys=(b"x", b"y"),
            galois_keys=server.galois_keys(),
            mask_keys={},
        )
    galois = server.galois_keys()
    bound = len(galois[0]) * 10
    for keys in ((galois[0],), (galois[0], b""), (galois[0], b"x" * bound)):
        with pytest.raises(ValueError, match="silo 0: Galois keys must be 2 sets"):
            lattice_silo.LatticeSilo(
                0,
                counts[0],
                silos[0].layout,
                public_keys=server.public_keys(),
                galois_keys=keys,
                mask_keys={},
            )
    spoiled = lattice_silo.LatticeSilo(
        0,
        counts[0],
        silos[0].layout,
        public_keys=server.public_keys(),
        galois_keys=(b"x", b"y"),
        mask_keys={},
    )
    with pytest.raises(ValueError, match="not Galois keys of this lattice session"):
        spoiled.masked_update(6, weights, corrections, deltas[0], noise[0])


def test_ciphertexts_of_another_key_decrypt_to_garbage_and_of_other_parameters_are_refused():
    counts, deltas, noise, sampled = _instance(4)
    layout, server, silos = _setup(counts)
    intruder = lattice.LatticeServer(layout)  # the same public parameters, another secret key
    rescaled, corrections = _rescale(counts, sampled, layout)
    weights = server.encrypt_weights(rescaled)
    updates = [
        silo.masked_update(1, weights, corrections, deltas[s], noise[s])
        for s, silo in enumerate(silos)
    ]
    plain = plain_round(counts, deltas, noise, sampled)
    assert np.max(np.abs(server.finish(updates, deltas.shape[2]) - plain)) <= P
    assert (
        np.min(np.abs(intruder.finish(updates, deltas.shape[2]) - plain)) > GARBAGE
    )  # only the key holder decrypts
    # a silo re-randomising under another key spoils the sum (it cannot pass for the key holder's encryption)
    stranger = lattice_silo.LatticeSilo(
        0,
        counts[0],
        layout,
        public_keys=intruder.public_keys(),
        galois_keys=server.galois_keys(),
        mask_keys=silos[0]._mask_keys,
    )
    spoiled = [stranger.masked_update(2, weights, corrections, deltas[0], noise[0])]
    spoiled += [
        silo.masked_update(2, weights, corrections, deltas[s], noise[s])
        for s, silo in enumerate(silos)
        if s
    ]
    assert np.min(np.abs(server.finish(spoiled, deltas.shape[2]) - plain)) > GARBAGE
    other = lattice.layout_for(
        precision=1e-3, n_users=4, n_silos=3, n_max=N_MAX, delta_bound=0.5, noise_bound=3.0
    )
    assert (
        other.coefficient_bits != layout.coefficient_bits
        or other.plain_moduli != layout.plain_moduli
    )
    foreign = lattice.LatticeServer(other).encrypt_weights([1, 2, 3, 4])
    with pytest.raises(ValueError, match="lattice session"):
        silos[0].masked_update(3, [foreign[0]] * len(weights), corrections, deltas[0], noise[0])


def test_lattice_backend_through_the_protocol_equals_the_plain_round_and_refuses_forged_updates():
    counts, deltas, noise, sampled = _instance(5)
    parameters = ProtocolParameters(
        key_bits=1024, n_max=N_MAX, insecure_test_key=True, backend="lattice"
    )
    session = SecureSession(counts, parameters, clip=0.5, noise_bound=3.0)
    for _ in range(2):  # the setup is reused, each round draws new blinds and masks
        result = session.aggregate(deltas, noise, sampled)
        assert np.max(np.abs(result - plain_round(counts, deltas, noise, sampled))) <= P
    server, size = session.server, deltas.shape[2]
    server._round = 3
    genuine = LatticeUpdateMessage(round_index=3, silo=0, parameters=size, ciphertexts=(b"x",) * 2)
    raw = bytearray(genuine.to_bytes())
    raw[-40] ^= 1
    with pytest.raises(ValueError, match="digest"):
        LatticeUpdateMessage.from_bytes(bytes(raw))
    with pytest.raises(ValueError, match="lattice update of 2 ciphertexts"):
        server.check_masked_update(LatticeUpdateMessage(3, 0, size, (b"x",)), size)
    with pytest.raises(ValueError, match="round 2"):
        server.check_masked_update(LatticeUpdateMessage(2, 0, size, (b"x",) * 2), size)
    with pytest.raises(ValueError, match="lattice update"):
        server.check_masked_update(MaskedUpdateMessage(3, 0, size, (1, 2)), size)
    with pytest.raises(ValueError, match="update of silo 0: not a ciphertext"):
        server.finish_round([LatticeUpdateMessage(3, s, size, (b"x",) * 2) for s in range(3)])
    exported = SiloState.from_bytes(
        session.silos[0].export_state()
    )  # what a Flower silo keeps between messages
    (keys_message,) = server.backend_key_messages()
    assert isinstance(keys_message, LatticeKeysMessage)
    keys = keys_message.public_keys + keys_message.galois_keys
    held = exported.backend_keys[
        len(keys) :
    ]  # the packed weights it holds: their round, then 1 per prime
    assert exported.backend_keys[: len(keys)] == keys and exported.backend_round == 2
    assert int.from_bytes(held[0], "big") in (1, 2) and len(held) == 1 + len(
        keys_message.public_keys
    )
    assert (
        protocol.Silo.restore(exported.to_bytes(), session.config).export_state()
        == exported.to_bytes()
    )


def _lattice_state() -> tuple[SiloState, ProtocolConfig]:
    """Silo 1's state after step 1(a) of a lattice session (Paillier test key and BFV keys) and its config."""
    parameters = ProtocolParameters(
        key_bits=1024, n_max=N_MAX, insecure_test_key=True, backend="lattice"
    )
    config = ProtocolConfig(
        n_silos=3, n_users=3, clip=0.5, sigma=1.0, noise_bound=3.0, parameters=parameters
    )
    server, silo = protocol.Server(config), protocol.Silo(1, np.array([1, 2, 0]), config)
    silo.receive_backend_keys(server.backend_key_messages())
    silo.receive_public_key(server.public_key_message())
    return SiloState.from_bytes(silo.export_state()), config


def test_an_exported_lattice_state_is_refused_field_by_field():
    """A lattice silo's exported state (the server's BFV public keys, its last lattice round) is checked on load as
    step 1(a) checks the keys: one per plaintext prime, within the session's key size, loaded by SEAL against the
    session's context; and a state of another backend holds none."""
    state, config = _lattice_state()
    first, second, *galois = state.backend_keys
    assert (
        len(galois) == len(config.layout.plain_moduli) == 2
    )  # the Galois keys after the public keys
    assert protocol.Silo.restore(state.to_bytes(), config).export_state() == state.to_bytes()
    bound = lattice_silo.public_key_bytes_bound(config.layout)
    assert len(first) <= bound < len(first) + 2 * lattice_silo.SERIALISATION_OVERHEAD
    refused: dict[str, tuple[bytes, ...]] = {  # the error, the keys
        "1 public keys for 2 primes": (first,),
        f"a BFV public key of {bound + 1} bytes, over the {bound} bytes": (
            first + b"\0" * (bound + 1 - len(first)),
            second,
        ),
        "silo 1: not a public key of this lattice session": (
            first[:-1] + b"\xff",
            second,
        ),  # a residue above q_i
    }
    for message, public_keys in refused.items():
        with pytest.raises(ValueError, match=message):
            protocol.Silo.restore(replace(state, backend_keys=public_keys).to_bytes(), config)
    held = (
        *state.backend_keys,
        (1).to_bytes(4, "big"),
        b"weights",
    )  # one ciphertext for two primes
    with pytest.raises(ValueError, match="silo 1: a lattice state holds 1 weights, expected 2"):
        protocol.Silo.restore(replace(state, backend_keys=held).to_bytes(), config)
    held = (*held, b"more")  # the count right: kept (SEAL checks the bytes when the silo uses them)
    restored = protocol.Silo.restore(replace(state, backend_keys=held).to_bytes(), config)
    assert SiloState.from_bytes(restored.export_state()).backend_keys == held
    paillier = replace(config, parameters=replace(config.parameters, backend="paillier"))
    for change in (
        dict(backend_round=0),
        dict(backend_keys=(), backend_round=1),
    ):  # keys, or a round, in Paillier
        with pytest.raises(
            ValueError,
            match="backend keys or a backend round, but this session's backend is 'paillier'",
        ):
            protocol.Silo.restore(replace(state, **change).to_bytes(), paillier)
    with pytest.raises(
        ValueError, match="1 public keys for 2 primes"
    ):  # step 1(a) itself checks them too
        protocol.Silo(1, np.array([1, 2, 0]), config).receive_backend_keys(
            [LatticeKeysMessage(public_keys=(first,), galois_keys=tuple(galois))]
        )
