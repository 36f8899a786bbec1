"""Tests of uldp.secure.fast against plaintext integers (independent oracle) and phe's own decryption."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from phe import paillier

from uldp.secure import fast

PUBLIC, PRIVATE = paillier.generate_paillier_keypair(n_length=512)
N, N2 = PUBLIC.n, PUBLIC.nsquare


@given(st.data(), st.integers(1, 6), st.integers(1, 12), st.sampled_from([None, 2, 3, 7, 16]),
       st.sampled_from([None, "comb", "straus"]))
@settings(max_examples=40, deadline=None)
def test_weighted_sum_decrypts_to_integer_combination(data, n_users, n_params, window, strategy):
    plaintexts = data.draw(st.lists(st.integers(0, N - 1), min_size=n_users, max_size=n_users))
    entries = st.one_of(st.integers(-(2**60), 2**60), st.sampled_from([0, 1, -1, 2**60, -(2**60)]))
    exponents = np.array(data.draw(st.lists(st.lists(entries, min_size=n_params, max_size=n_params), min_size=n_users, max_size=n_users)), dtype=np.int64)
    bases = [PUBLIC.raw_encrypt(m) for m in plaintexts]
    result = fast.weighted_ciphertext_sum(bases, exponents, N2, window=window, strategy=strategy)
    expected = [sum(m * int(e) for m, e in zip(plaintexts, exponents[:, j])) % N for j in range(n_params)]
    assert [PRIVATE.raw_decrypt(int(c)) for c in result] == expected


def test_process_pool_and_crt_decryption_agree_with_phe():
    rng = np.random.default_rng(7)
    plaintexts = [int(x) for x in rng.integers(0, 2**62, size=5)]
    exponents = rng.integers(-(2**40), 2**40, size=(5, 9))
    bases = [PUBLIC.raw_encrypt(m) for m in plaintexts]
    pooled = fast.weighted_ciphertext_sum(bases, exponents, N2, processes=2)
    assert pooled == fast.weighted_ciphertext_sum(bases, exponents, N2)
    for strategy in ("comb", "straus"):  # the two strategies give the very same ciphertexts
        assert fast.weighted_ciphertext_sum(bases, exponents, N2, strategy=strategy, processes=2) == pooled
    ours = fast.crt_decrypt(PRIVATE, pooled, processes=2)
    assert ours == [PRIVATE.raw_decrypt(int(c)) for c in pooled]


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


def test_crt_encryption_decrypts_and_uses_nth_residues():
    lam = (PRIVATE.p - 1) * (PRIVATE.q - 1) // math.gcd(PRIVATE.p - 1, PRIVATE.q - 1)
    plaintexts = [0, 1, 12345, N - 1, 0]
    ciphertexts = fast.crt_encrypt(PRIVATE, plaintexts)
    assert [PRIVATE.raw_decrypt(c) for c in ciphertexts] == plaintexts
    assert ciphertexts[0] != ciphertexts[4]  # fresh randomness
    for m, c in zip(plaintexts, ciphertexts):
        # rho^n has order dividing lambda, so c^lambda = (1 + n)^(m lambda) = 1 + m lambda n (mod n^2)
        assert pow(c, lam, N2) == (1 + m * lam * N) % N2
        assert math.gcd(c, N) == 1 and c % N != 1  # a real randomizer, not rho = 1
