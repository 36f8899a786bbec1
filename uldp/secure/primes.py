"""Primes for Protocol 1's keys (step 1(a) and, beyond the paper, the set-up of :mod:`uldp.secure.modulus_proof`):
the server's Paillier key with Blum primes ``p = q = 3 mod 4`` (what CGGMP20's Paillier-Blum proof needs), and safe
primes for a silo's ring-Pedersen modulus. Every draw comes from the OS CSPRNG (``secrets``).
"""

from __future__ import annotations

import secrets

import gmpy2
import numpy as np
from phe import paillier

from uldp.secure.config import check_key_bits

#: Miller-Rabin rounds of every primality test here and in :mod:`uldp.secure.modulus_proof` (error below 4^-50).
PRIME_ROUNDS = 50


def _random_prime(bits: int, *, blum: bool) -> int:
    """A uniformly drawn prime of exactly ``bits`` bits with its top two bits set (so a product of two has exactly
    twice as many bits), ``= 3 mod 4`` when ``blum``."""
    while True:
        candidate = secrets.randbits(bits) | (3 << (bits - 2)) | (3 if blum else 1)
        if gmpy2.is_prime(candidate, PRIME_ROUNDS):
            return candidate


#: Odd primes below 2^16: a safe-prime candidate's half ``h`` and ``2h + 1`` are first sieved against them.
_SIEVE_PRIMES = np.array([p for p in range(3, 1 << 16, 2) if gmpy2.is_prime(p)], dtype=np.int64)
#: Candidates sieved at once (consecutive odd halves from one random start).
_SIEVE_WIDTH = 1 << 14


def safe_prime(bits: int) -> int:
    """A safe prime ``p = 2h + 1`` of exactly ``bits`` bits (top two set; ``h`` prime), for the ring-Pedersen modulus
    (CGGMP20, Section 3.3: ``N^`` a product of two safe primes).

    The halves ``h`` are consecutive odd numbers from a random start drawn from the OS CSPRNG (``secrets``): the
    standard incremental search, whose output is not exactly uniform over safe primes but unpredictable, which is
    what the set-up needs (the verifier's own factors are never used). Both ``h`` and ``2h + 1`` are sieved by
    every odd prime below 2^16 before any Miller-Rabin test, which cuts the modular exponentiations about fiftyfold
    (a 1024-bit safe prime in a few seconds instead of a minute).

    Raises:
        ValueError: ``bits`` below 32.
    """
    if isinstance(bits, bool) or not isinstance(bits, int) or bits < 32:
        raise ValueError(f"bits must be an integer >= 32, got {bits!r}")
    inverse_two = (_SIEVE_PRIMES + 1) // 2  # 2^-1 mod r
    while True:
        start = (
            secrets.randbits(bits - 1) | (3 << (bits - 3)) | 1
        )  # h of bits - 1 bits: 2h + 1 has bits bits
        residues = np.array([start % int(r) for r in _SIEVE_PRIMES], dtype=np.int64)
        # h_k = start + 2k: h_k = 0 mod r at k = -start / 2, and 2 h_k + 1 = 0 mod r at k = (-1/2 - start) / 2
        first = (-residues * inverse_two) % _SIEVE_PRIMES
        second = ((-inverse_two - residues) * inverse_two) % _SIEVE_PRIMES
        alive = np.ones(_SIEVE_WIDTH, dtype=bool)
        for r, a, b in zip(_SIEVE_PRIMES.tolist(), first.tolist(), second.tolist(), strict=True):
            alive[a::r] = False
            alive[b::r] = False
        for k in np.flatnonzero(alive).tolist():
            half = start + 2 * k
            if half.bit_length() != bits - 1:
                break
            candidate = (
                2 * half + 1
            )  # one Miller-Rabin round on each first; survivors get the full test
            if (
                gmpy2.is_prime(half, 1)
                and gmpy2.is_prime(candidate, 1)
                and gmpy2.is_prime(half, PRIME_ROUNDS)
                and gmpy2.is_prime(candidate, PRIME_ROUNDS)
            ):
                return candidate


def blum_paillier_keypair(
    key_bits: int, *, insecure_test_key: bool = False
) -> tuple[paillier.PaillierPublicKey, paillier.PaillierPrivateKey]:
    """The server's Paillier key pair (Protocol 1, step 1(a)) with ``n = p q``, ``p = q = 3 mod 4`` and exactly
    ``key_bits`` bits: what :func:`prove_modulus` can prove.

    Raises:
        ValueError: ``key_bits`` not allowed (:func:`uldp.secure.config.check_key_bits`).
    """
    check_key_bits(key_bits, insecure_test_key=insecure_test_key)
    while True:
        p, q = _random_prime(key_bits // 2, blum=True), _random_prime(key_bits // 2, blum=True)
        if p != q:
            public_key = paillier.PaillierPublicKey(p * q)
            return public_key, paillier.PaillierPrivateKey(public_key, p, q)
