"""Tests of uldp.secure.fast against plaintext integers (independent oracle) and phe's own decryption."""

import math
import os

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from phe import paillier

from uldp.secure import fast

PUBLIC, PRIVATE = paillier.generate_paillier_keypair(n_length=512)
N, N2 = PUBLIC.n, PUBLIC.nsquare


@given(
    st.data(),
    st.integers(1, 6),
    st.integers(1, 12),
    st.sampled_from([None, 2, 3, 7, 16]),
    st.sampled_from([None, "comb", "straus"]),
)
@settings(max_examples=40, deadline=None)
def test_weighted_sum_decrypts_to_integer_combination(data, n_users, n_params, window, strategy):
    plaintexts = data.draw(st.lists(st.integers(0, N - 1), min_size=n_users, max_size=n_users))
    entries = st.one_of(st.integers(-(2**60), 2**60), st.sampled_from([0, 1, -1, 2**60, -(2**60)]))
    rows = st.lists(
        st.lists(entries, min_size=n_params, max_size=n_params), min_size=n_users, max_size=n_users
    )
    exponents = np.array(data.draw(rows), dtype=np.int64)
    bases = [PUBLIC.raw_encrypt(m) for m in plaintexts]
    result = fast.weighted_ciphertext_sum(bases, exponents, N2, window=window, strategy=strategy)
    expected = [
        sum(m * int(e) for m, e in zip(plaintexts, exponents[:, j], strict=True)) % N
        for j in range(n_params)
    ]
    assert [PRIVATE.raw_decrypt(int(c)) for c in result] == expected


def test_process_pool_and_crt_decryption_agree_with_phe():
    rng = np.random.default_rng(7)
    plaintexts = [int(x) for x in rng.integers(0, 2**62, size=5)]
    exponents = rng.integers(-(2**40), 2**40, size=(5, 9))
    bases = [PUBLIC.raw_encrypt(m) for m in plaintexts]
    pooled = fast.weighted_ciphertext_sum(bases, exponents, N2, processes=2)
    assert pooled == fast.weighted_ciphertext_sum(bases, exponents, N2)
    for strategy in ("comb", "straus"):  # the two strategies give the very same ciphertexts
        assert (
            fast.weighted_ciphertext_sum(bases, exponents, N2, strategy=strategy, processes=2)
            == pooled
        )
    ours = fast.crt_decrypt(PRIVATE, pooled, processes=2)
    assert ours == [PRIVATE.raw_decrypt(int(c)) for c in pooled]


def test_kept_workers_take_the_same_share_of_every_call():
    """Call j of ``run_each`` always runs in the same kept process, so what a worker keeps (the lattice silo's
    expanded weights) serves the same share of the next call; a shared pool hands tasks to whichever is free."""
    fast.shutdown_pools()
    try:
        first = fast.run_each(os.getpid, [()] * 3)
        assert len(set(first)) == 3 and os.getpid() not in first
        assert all(fast.run_each(os.getpid, [()] * 3) == first for _ in range(20))
        assert sorted(fast.worker_pids()) == sorted(first)
        # calls of other sizes share the processes: fewer tasks take the first workers, more start the missing ones
        assert fast.run_each(os.getpid, [()] * 2) == first[:2]
        more = fast.run_each(os.getpid, [()] * 4)
        assert more[:3] == first and more[3] not in first
        assert sorted(fast.worker_pids()) == sorted(more)
    finally:
        fast.shutdown_pools()
    assert fast.worker_pids() == []


def test_raise_to_is_homomorphic_scalar_multiplication():
    c = PUBLIC.raw_encrypt(12345)
    assert PRIVATE.raw_decrypt(int(fast.raise_to(c, 3 * N + 7, N2))) == 12345 * 7 % N
    ciphertexts = [PUBLIC.raw_encrypt(m) for m in (3, 5, 7)]
    powers = fast.raise_each(ciphertexts, [N - 1, 2, N + 4], N2, processes=2)
    assert [PRIVATE.raw_decrypt(int(c)) for c in powers] == [N - 3, 10, 28]


def test_bad_shapes_rejected():
    with pytest.raises(ValueError, match="shape"):
        fast.weighted_ciphertext_sum([1, 2], np.zeros((3, 2), np.int64), N2)
    with pytest.raises(ValueError, match="integers"):
        fast.weighted_ciphertext_sum([1], np.zeros((1, 2)), N2)
    with pytest.raises(ValueError, match="strategy must be one of"):
        fast.weighted_ciphertext_sum([1], np.zeros((1, 2), np.int64), N2, strategy="pippenger")
    with pytest.raises(ValueError, match=r"odd modulus >= 3 .* got an even number of 71 bits"):
        fast.weighted_ciphertext_sum([1], np.zeros((1, 2), np.int64), 2**70)


@pytest.mark.parametrize("processes", [1, 2])
def test_crt_encryption_decrypts_and_uses_nth_residues(processes):
    lam = (PRIVATE.p - 1) * (PRIVATE.q - 1) // math.gcd(PRIVATE.p - 1, PRIVATE.q - 1)
    plaintexts = [0, 1, 12345, N - 1, 0]
    ciphertexts = fast.crt_encrypt(PRIVATE, plaintexts, processes=processes)
    assert [PRIVATE.raw_decrypt(c) for c in ciphertexts] == plaintexts
    assert len(set(ciphertexts)) == len(ciphertexts)  # fresh randomness, also across forked workers
    for m, c in zip(plaintexts, ciphertexts, strict=True):
        # rho^n has order dividing lambda, so c^lambda = (1 + n)^(m lambda) = 1 + m lambda n (mod n^2)
        assert pow(c, lam, N2) == (1 + m * lam * N) % N2
        assert math.gcd(c, N) == 1 and c % N != 1  # a real randomizer, not rho = 1


# The C comb (uldp.secure._comb) against the gmpy2 comb and against plain pow products (independent oracle).
needs_c_comb = pytest.mark.skipif(
    not fast.c_comb_available(),
    reason="uldp.secure._comb is not built here (or failed its check against gmpy2); the gmpy2 comb is in use",
)


def _pow_products(bases, exponents, modulus):
    """prod_u bases[u] ** exponents[u, j] mod modulus with Python's pow (negative exponents use the inverse)."""
    return [
        math.prod(pow(int(b), int(e), modulus) for b, e in zip(bases, exponents[:, j], strict=True))
        % modulus
        for j in range(exponents.shape[1])
    ]


@needs_c_comb
@given(st.data(), st.integers(1, 4), st.integers(1, 9), st.integers(2, 12))
@settings(max_examples=60, deadline=None)
def test_c_comb_equals_gmpy2_comb_and_pow_on_small_moduli(data, n_bases, n_outputs, window):
    modulus = data.draw(st.integers(3, 2**300).map(lambda m: m | 1), label="modulus")
    bases = data.draw(
        st.lists(
            st.integers(1, modulus - 1).filter(lambda b: math.gcd(b, modulus) == 1),
            min_size=n_bases,
            max_size=n_bases,
        ),
        label="bases",
    )
    entries = st.one_of(st.integers(-(2**45), 2**45), st.sampled_from([0, 1, -1, 2**45, -(2**45)]))
    exponents = np.array(
        data.draw(
            st.lists(
                st.lists(entries, min_size=n_outputs, max_size=n_outputs),
                min_size=n_bases,
                max_size=n_bases,
            )
        ),
        dtype=np.int64,
    )
    ours = fast._comb_partial_c(bases, exponents, modulus, window)
    assert ours == fast._comb_partial_gmpy2(bases, exponents, modulus, window)
    assert ours == _pow_products(bases, exponents, modulus)


@needs_c_comb
def test_c_comb_on_6144_bit_modulus_with_signed_zero_and_single_outputs():
    rng = np.random.default_rng(11)
    n = int.from_bytes(rng.bytes(384), "little") | (1 << 3071) | 1
    modulus = n * n  # n^2 for a 3072-bit n: 96 limbs
    candidates = (int.from_bytes(rng.bytes(768), "little") % modulus for _ in range(8))
    bases = [b for b in candidates if math.gcd(b, n) == 1][:3]
    exponents = rng.integers(-(2**40), 2**40, size=(3, 6))
    exponents[:, 1] = 0  # an output with no non-zero digit stays 1
    exponents[2] = 0  # a base that contributes nothing
    exponents[0, 2], exponents[1, 2] = -1, -(2**40)  # negative digits only
    expected = _pow_products(bases, exponents, modulus)
    assert expected[1] == 1
    for window in (3, 11):
        assert fast._comb_partial_c(bases, exponents, modulus, window) == expected
        assert fast._comb_partial_gmpy2(bases, exponents, modulus, window) == expected
    single = exponents[:, 3:4]
    assert fast._comb_partial_c(bases, single, modulus, 11) == [expected[3]]
    assert (
        fast.weighted_ciphertext_sum(bases, exponents, modulus, strategy="comb", processes=2)
        == expected
    )


@needs_c_comb
def test_c_comb_rejects_bad_input_by_name():
    modulus = 2**127 - 1
    count = 2
    limbs = fast._limbs(modulus, count)
    inverse = fast._limbs(pow(modulus, -1, 2**128), count)
    one = fast._limbs(2**128 % modulus, count)
    accumulators = np.tile(one, (3, 1))
    digits = np.ones((1, 3), np.int32)
    assert fast._comb is not None  # needs_c_comb
    with pytest.raises(ValueError, match="odd modulus"):
        fast._comb_partial_c([3], np.ones((1, 2), np.int64), 2**128, 4)
    with pytest.raises(ValueError, match="modulus must be odd"):
        fast._comb.multiply_in_base(
            accumulators, digits, one, one, fast._limbs(2**127, count), inverse, 4
        )
    with pytest.raises(ValueError, match="modulus_inverse is not the inverse"):
        fast._comb.multiply_in_base(accumulators, digits, one, one, limbs, one, 4)
    with pytest.raises(ValueError, match="digits hold 4 int32 values"):
        fast._comb.multiply_in_base(
            accumulators, np.ones((1, 4), np.int32), one, one, limbs, inverse, 4
        )
    with pytest.raises(ValueError, match="digits must have 4-byte items"):
        fast._comb.multiply_in_base(
            accumulators, np.ones((1, 3), np.int64), one, one, limbs, inverse, 4
        )
    with pytest.raises(ValueError, match="base must have 2 limbs"):
        fast._comb.multiply_in_base(accumulators, digits, one[:1], one, limbs, inverse, 4)
    with pytest.raises(ValueError, match="digit 16 at position 0, output 1 is outside"):
        fast._comb.multiply_in_base(
            accumulators, np.array([[1, 16, 0]], np.int32), one, one, limbs, inverse, 4
        )
    with pytest.raises(ValueError, match="window must be in"):
        fast._comb.multiply_in_base(accumulators, digits, one, one, limbs, inverse, 17)
    with pytest.raises(ValueError, match="not a positive whole number of 2-limb rows"):
        fast._comb.multiply_in_base(accumulators[:, :1].copy(), digits, one, one, limbs, inverse, 4)


def test_comb_falls_back_to_gmpy2_without_the_extension(monkeypatch):
    monkeypatch.setattr(fast, "_comb", None)
    fast.c_comb_available.cache_clear()
    try:
        assert not fast.c_comb_available()
        bases = [PUBLIC.raw_encrypt(m) for m in (4, 9)]
        exponents = np.array([[3, -2, 0], [-5, 7, 1]], dtype=np.int64)
        result = fast.weighted_ciphertext_sum(bases, exponents, N2, strategy="comb")
        assert [PRIVATE.raw_decrypt(int(c)) for c in result] == [(12 - 45) % N, (-8 + 63) % N, 9]
    finally:
        fast.c_comb_available.cache_clear()


def test_signed_digits_reject_a_one_bit_window():
    with pytest.raises(ValueError, match="window must be an integer >= 2, got 1"):
        fast.signed_digits(np.array([1]), 1)
