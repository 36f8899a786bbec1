"""Tests of the packed weights and their expansion at the silo (uldp.secure.lattice_expand), against SEAL's decryption:
every expanded ciphertext holds its own user's weight alone, within the noise bound, and the round stays exact at the
worst case with many users."""

import functools
import math
import os
from collections import OrderedDict

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

pytest.importorskip("tenseal")

from test_secure_lattice import N_MAX, P, _rescale, _setup, worst_case_round
from test_secure_protocol import plain_round  # the same plain ULDP-AVG-w oracle

from uldp.secure import lattice, lattice_expand, lattice_weights


@functools.cache
def _server(n_users: int) -> lattice.LatticeServer:
    """A key holder of a 3-silo session with ``n_users`` users (keys are slow to make: one per size)."""
    return lattice.LatticeServer(
        lattice.layout_for(
            precision=P, n_users=n_users, n_silos=3, n_max=N_MAX, delta_bound=0.5, noise_bound=3.0
        )
    )


def _expanded(server: lattice.LatticeServer, values, corrections, wanted):
    """Per plaintext prime, the silo's expansion of the server's packed ``values`` less ``corrections``."""
    sealapi, layout = lattice._seal(), server.layout
    out = []
    for index, (context, data) in enumerate(
        zip(server._contexts, server.encrypt_weights(values), strict=True)
    ):
        galois = sealapi.GaloisKeys()
        if server.galois_keys()[index]:
            lattice._load(galois, context.context, server.galois_keys()[index])
        (packed,) = [context.load(c) for c in data]
        (correction,) = lattice_expand.packed_rows(corrections, context.t)
        context.evaluator.sub_plain_inplace(packed, context.vector(correction.astype(np.int64)))
        out.append(
            lattice_expand.expand(
                sealapi,
                context.evaluator,
                packed,
                galois,
                level_count=lattice_expand.levels(layout.n_users),
                wanted=wanted,
                monomial=context.monomial,
            )
        )
    return out


@pytest.mark.parametrize("n_users", [1, 2, 5, 100])
@settings(max_examples=3, deadline=None)
@given(data=st.data())
def test_each_expanded_ciphertext_holds_its_own_users_weight_alone(n_users, data):
    """Decrypted by the key holder, expanded ciphertext u is the constant ``y_u - c_u mod t``: a weight placed at any
    other coefficient, a wrong scale 2^-L or a wrong automorphism would show here. Its noise stays within
    :func:`uldp.secure.lattice_expand.expansion_noise` (SEAL's own noise budget is the oracle)."""
    server = _server(n_users)
    values = data.draw(st.lists(st.integers(0, 2**60), min_size=n_users, max_size=n_users))
    corrections = data.draw(st.lists(st.integers(0, 2**40), min_size=n_users, max_size=n_users))
    wanted = sorted(  # the silo expands only toward its contributing users
        data.draw(st.sets(st.integers(0, n_users - 1), min_size=1, max_size=n_users))
    )
    sealapi, layout = lattice._seal(), server.layout
    level_count = lattice_expand.levels(n_users)
    assert (1 << level_count) >= n_users > (1 << level_count) // 2 or n_users == 1
    bound = lattice_expand.expansion_noise(
        level_count, error_bound=lattice.ERROR_BOUND, data_primes=len(layout.coefficient_bits) - 1
    )
    for context, decryptor, expanded in zip(
        server._contexts,
        server._decryptors,
        _expanded(server, values, corrections, wanted),
        strict=True,
    ):
        assert len(expanded) == len(wanted)
        q = math.prod(context.moduli)
        for user, ciphertext in zip(wanted, expanded, strict=True):
            plain = sealapi.Plaintext()
            decryptor.decrypt(ciphertext, plain)
            coefficients = [plain.data(j) for j in range(plain.coeff_count())]
            assert coefficients[0] == (values[user] - corrections[user]) % context.t
            assert not any(coefficients[1:])
            # SEAL's budget is log2(q / (2 t ||v||)), rounded down: the noise is within the bound
            budget = decryptor.invariant_noise_budget(ciphertext)
            assert budget >= math.floor(math.log2(q / (2 * context.t * bound))) - 1


def test_weights_are_one_ciphertext_per_prime_and_groups_of_n_users():
    server = _server(100)
    weights = server.encrypt_weights(list(range(100)))
    assert [len(prime) for prime in weights] == [1] * len(server.layout.plain_moduli)
    assert lattice_expand.groups(100) == 1
    assert lattice_expand.groups(lattice.RING_DEGREE + 1) == 2
    assert lattice_expand.levels(lattice.RING_DEGREE + 1) == 14 == lattice_expand.levels(2**14)
    assert lattice_expand.levels(100) == 7 and lattice_expand.levels(1) == 0
    assert lattice_expand.galois_elements(2) == [
        lattice.RING_DEGREE + 1,
        lattice.RING_DEGREE // 2 + 1,
    ]
    rows = lattice_expand.packed_rows(list(range(lattice.RING_DEGREE + 3)), 65537)
    inverse = pow(2**14, -1, 65537)
    assert len(rows) == 2 and rows[1][:3].tolist() == [
        (lattice.RING_DEGREE + u) * inverse % 65537 for u in range(3)
    ]
    assert not rows[1][3:].any()


def test_worst_case_with_a_hundred_users_decrypts_exactly():
    """Every delta at +-C, every noise coordinate at the bound, a user with N_max records, 100 users: seven levels of
    expansion, the largest weight noise a 100-user session has; the sum is still within P of the plain round."""
    n_silos, n_users = 3, 100
    sampled = np.arange(n_users) % 3 != 1
    sampled[0] = True
    _, _, result, plain = worst_case_round(
        n_silos, n_users, 3, sampled, per_silo=N_MAX // (2 * n_silos)
    )
    assert np.max(np.abs(result - plain)) <= P


def counted_expansions(monkeypatch) -> list[int]:
    """An empty cache of expanded weights, and the list of the primes a silo of this process expands from now on."""

    calls: list[int] = []
    expand = lattice_weights._expand_weights

    def counted(task, index, weights):
        calls.append(index)
        return expand(task, index, weights)

    monkeypatch.setattr(lattice_weights, "_expand_weights", counted)
    monkeypatch.setattr(lattice_weights, "_EXPANDED", OrderedDict())
    return calls


def test_the_expansion_is_made_once_per_sample_and_reused_while_the_weights_are_held(monkeypatch):
    """A silo process keeps the weights it expanded: rounds that reuse the server's weights (the same
    sample, the same corrections) expand nothing and stay exact; new weights are expanded again."""
    rng = np.random.default_rng(11)
    counts = rng.integers(1, 40, (3, 6))  # every user in every silo: the silos expand the same W_u
    deltas, noise = rng.uniform(-0.5, 0.5, (3, 6, 4)), rng.uniform(-3, 3, (3, 4))
    sampled = np.array([True, True, False, True, True, True])
    layout, server, silos = _setup(counts)
    calls = counted_expansions(monkeypatch)
    rescaled, corrections = _rescale(counts, sampled, layout)
    weights = server.encrypt_weights(rescaled)
    expected = plain_round(counts, deltas, noise, sampled)
    for round_index, new in ((1, False), (2, False), (3, True)):
        if new:  # a new sample: new weights and corrections
            rescaled, corrections = _rescale(counts, sampled, layout)
            weights = server.encrypt_weights(rescaled)
        del calls[:]
        updates = [
            s.masked_update(round_index, weights, corrections, deltas[i], noise[i])
            for i, s in enumerate(silos)
        ]
        assert np.max(np.abs(server.finish(updates, 4) - expected)) <= P
        assert sorted(calls) == ([] if round_index == 2 else list(range(len(layout.plain_moduli))))
    del calls[:]  # the same weights with other corrections are other W_u: expanded again
    silos[0].masked_update(4, weights, [c + 1 for c in corrections], deltas[0], noise[0])
    assert sorted(calls) == list(range(len(layout.plain_moduli)))


def test_silos_of_one_process_keep_their_own_expansions_within_the_byte_bound(monkeypatch):
    """An in-process federation: silos with different users expand different W_u; each keeps its own for the next
    round (a cache by prime alone let each silo overwrite the one before: every round expanded again), and the
    least recently used go first when the bound is reached."""

    rng = np.random.default_rng(12)
    counts = rng.integers(1, 40, (3, 6))
    counts[0, :2] = counts[1, 2:4] = counts[2, 4:] = 0  # three different sets of users
    deltas, noise = rng.uniform(-0.5, 0.5, (3, 6, 4)), rng.uniform(-3, 3, (3, 4))
    sampled = np.ones(6, dtype=bool)
    layout, server, silos = _setup(counts)
    calls = counted_expansions(monkeypatch)
    rescaled, corrections = _rescale(counts, sampled, layout)
    weights = server.encrypt_weights(rescaled)
    expected = plain_round(counts, deltas, noise, sampled)
    primes = len(layout.plain_moduli)

    def one_round(round_index: int) -> None:
        del calls[:]
        updates = [
            s.masked_update(round_index, weights, corrections, deltas[i], noise[i])
            for i, s in enumerate(silos)
        ]
        assert np.max(np.abs(server.finish(updates, 4) - expected)) <= P

    one_round(1)
    assert len(calls) == 3 * primes and len(lattice_weights._EXPANDED) == 3 * primes
    one_round(2)
    assert calls == []
    one_entry = next(iter(lattice_weights._EXPANDED.values()))[0]
    monkeypatch.setattr(lattice_weights, "EXPANDED_CACHE_BYTES", one_entry)
    lattice_weights._EXPANDED.clear()
    one_round(3)  # room for one expansion: each silo's replaces the last
    assert len(calls) == 3 * primes and len(lattice_weights._EXPANDED) == 1


def test_a_silo_with_worker_processes_expands_each_sample_once(monkeypatch, tmp_path):
    """With 2 workers, each keeps the expansions of its own share of the primes: a round with the same sample
    expands nothing in either (a shared pool, handing a share to whichever worker is free, expanded again)."""
    from uldp.secure import fast

    log = tmp_path / "expansions"
    expand = lattice_weights._expand_weights

    def logged(task, index, weights, *users):  # runs in the workers: they append to one file
        with open(log, "a") as handle:
            handle.write(f"{os.getpid()} {index}\n")
        return expand(task, index, weights, *users)

    rng = np.random.default_rng(13)
    counts = rng.integers(1, 40, (3, 6))
    counts[0, :2] = counts[1, 2:4] = counts[2, 4:] = (
        0  # three sets of users: three expansions per prime
    )
    deltas, noise = rng.uniform(-0.5, 0.5, (3, 6, 4)), rng.uniform(-3, 3, (3, 4))
    sampled = np.ones(6, dtype=bool)
    layout, server, silos = _setup(counts, processes=2)
    rescaled, corrections = _rescale(counts, sampled, layout)
    weights = server.encrypt_weights(rescaled)
    expected = plain_round(counts, deltas, noise, sampled)
    monkeypatch.setattr(lattice_weights, "_expand_weights", logged)
    monkeypatch.setattr(lattice_weights, "_EXPANDED", OrderedDict())
    fast.shutdown_pools()  # the workers fork from here on, with the logging expansion
    try:
        for round_index in range(1, 5):
            log.write_text("")
            updates = [
                s.masked_update(round_index, weights, corrections, deltas[i], noise[i])
                for i, s in enumerate(silos)
            ]
            assert np.max(np.abs(server.finish(updates, 4) - expected)) <= P
            made = log.read_text().split("\n")[:-1]
            if round_index == 1:  # each silo's primes, shared by the two workers
                assert len({line.split()[0] for line in made}) == 2
                assert sorted(int(line.split()[1]) for line in made) == sorted(
                    list(range(len(layout.plain_moduli))) * 3
                )
            else:
                assert made == []
    finally:
        fast.shutdown_pools()


def test_four_workers_expand_a_new_sample_once_between_them_and_a_held_one_not_at_all(
    monkeypatch, tmp_path
):
    """With 4 workers and 2 primes, a new sample's weights are expanded in 2 residue classes per prime, once in all
    (each class's users once, by one worker), and every worker reads them; the same sample again expands nothing,
    also in silos restored from their state; a new one is expanded again. The sums stay exact within P."""
    from uldp.secure import fast, lattice_silo

    log = tmp_path / "expansions"
    expand = lattice_weights._expand_weights

    def logged(task, index, weights, users=None):  # runs in the workers: they append to one file
        with open(log, "a") as handle:
            handle.write(f"{index} {','.join(map(str, task.users if users is None else users))}\n")
        return expand(task, index, weights, *([] if users is None else [users]))

    rng = np.random.default_rng(17)
    counts = rng.integers(1, 40, (2, 6))
    counts[0, 5] = 0  # silo 0's users: 0-4, silo 1's: 0-5
    dim = lattice.RING_DEGREE + 3  # two chunks per prime: four items, one per worker
    deltas, noise = rng.uniform(-0.5, 0.5, (2, 6, dim)), rng.uniform(-3, 3, (2, dim))
    sampled = np.ones(6, dtype=bool)
    layout, server, silos = _setup(counts, processes=4)
    assert len(layout.plain_moduli) == 2
    expected = plain_round(counts, deltas, noise, sampled)
    classes = ["0,2,4", "1,3", "0,2,4", "1,3,5"]  # per silo, users u mod 2 == 0 and == 1
    monkeypatch.setattr(lattice_weights, "_expand_weights", logged)
    monkeypatch.setattr(lattice_weights, "_EXPANDED", OrderedDict())
    fast.shutdown_pools()  # the workers fork from here on, with the logging expansion
    try:
        weights = corrections = None
        for round_index, new_sample in ((1, True), (2, False), (3, False), (4, True)):
            if new_sample:
                rescaled, corrections = _rescale(counts, sampled, layout)
                weights = server.encrypt_weights(rescaled)
            if (
                round_index == 3
            ):  # silos restored between messages (a Flower silo each round) hold it too
                silos = [
                    lattice_silo.LatticeSilo(
                        s.silo_id,
                        counts[s.silo_id],
                        layout,
                        public_keys=server.public_keys(),
                        galois_keys=server.galois_keys(),
                        workers=4,
                        mask_keys=s._mask_keys,
                        answered_round=2,
                    )
                    for s in silos
                ]
            log.write_text("")
            updates = [
                s.masked_update(round_index, weights, corrections, deltas[i], noise[i])
                for i, s in enumerate(silos)
            ]
            assert np.max(np.abs(server.finish(updates, dim) - expected)) <= P
            made = sorted(log.read_text().split("\n")[:-1])
            shares = sorted(f"{prime} {users}" for prime in (0, 1) for users in classes)
            assert made == (shares if new_sample else [])
    finally:
        fast.shutdown_pools()


def test_a_worker_expands_with_the_galois_keys_the_silo_accepted_and_no_others(tmp_path):
    """Workers read a prime's Galois keys from the round's inputs (``galois-<i>.bin``) instead of each task carrying
    them, and only while their SHA-256 is the one the silo took on accepting them: a changed file is refused, naming
    the silo; in process the task's own keys are checked the same way."""
    import hashlib
    from dataclasses import replace

    from uldp.secure import lattice_silo

    keys = b"the server's Galois keys"
    task = lattice_silo._RoundTask(
        layout=None,  # type: ignore[arg-type]  # not read here
        public_keys=(),
        galois_digests=(hashlib.sha256(keys).digest(),),
        users=(),
        mask_keys=(),
        silo_id=3,
        round_index=1,
        corrections=(),
        noise=np.zeros(1, dtype=np.int64),
        inputs=str(tmp_path),
    )
    (tmp_path / "galois-0.bin").write_bytes(keys)
    assert lattice_weights._galois_bytes(task, 0) == keys
    (tmp_path / "galois-0.bin").write_bytes(keys + b"!")
    with pytest.raises(
        ValueError, match="silo 3: Galois keys for prime 0 that are not the accepted ones"
    ):
        lattice_weights._galois_bytes(task, 0)
    alone = replace(task, inputs=None, galois_keys=(keys,))
    assert lattice_weights._galois_bytes(alone, 0) == keys
    with pytest.raises(ValueError, match="not the accepted ones"):
        lattice_weights._galois_bytes(replace(alone, galois_keys=(b"other",)), 0)
