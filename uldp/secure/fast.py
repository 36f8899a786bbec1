"""The silo's encrypted weighted sum of Protocol 1, step 2(b), made fast; and batch CRT decryption (step 2(c)).

Step 2(b) needs, for every parameter j, ``prod_u Enc(B_inv(N_u))^(E_uj * n_su * r_u * C_LCM mod n)`` mod n^2.
Done literally that is one full-size (|n|-bit) exponentiation per parameter per user. Instead:

1. the full-size constant ``r_u * C_LCM mod n`` is applied once per user and round (:func:`raise_to`), then the
   small factor n_su (at most 11 bits for N_max = 2000), giving ``W_u = Enc(n_su * C_LCM / N_u)``;
2. ``prod_u W_u^(E_uj)`` for all j is a multi-exponentiation with ~40-bit signed exponents over the same |U| bases
   for every j: each exponent is recoded in signed base-2^w digits, each user gets, per digit position, a table of
   ``W_u^(+-k 2^(w i))`` (the inverse ciphertext serves negative digits), built once and shared by all parameters,
   so a parameter costs about one modular multiplication per user and digit position
   (:func:`weighted_ciphertext_sum`); users can be split over worker processes.

Exponents only matter modulo n for the plaintext, so every shortcut decrypts to the same value as the literal
computation; tests check this against the plaintext integers.
"""

from __future__ import annotations

import math
import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from typing import Sequence

import gmpy2
import numpy as np

_ONE = gmpy2.mpz(1)


def raise_to(ciphertext: int, exponent: int, n_square: int) -> gmpy2.mpz:
    """``ciphertext ** exponent mod n^2`` (a homomorphic multiplication of the plaintext by ``exponent``)."""
    return gmpy2.powmod(gmpy2.mpz(ciphertext), gmpy2.mpz(exponent), gmpy2.mpz(n_square))


def choose_window(n_bases: int, n_outputs: int, exponent_bits: int) -> int:
    """Digit width w minimising table building plus lookups (in modular multiplications).

    Per base and digit position the table costs about 2^w multiplications (w squarings to move to the next
    position are negligible); every output costs one multiplication per base and non-zero digit.
    """

    def cost(width: int) -> float:
        positions = math.ceil((exponent_bits + 1) / width)
        return n_bases * positions * (2**width + width + n_outputs * (1 - 2.0**-width))

    return min(range(2, 17), key=cost)


def _partial_sum(bases: Sequence[int], exponents: np.ndarray, n_square: int, window: int) -> list[gmpy2.mpz]:
    """``prod_u bases[u]^exponents[u, j] mod n^2`` for one group of users, with signed fixed-window tables."""
    modulus = gmpy2.mpz(n_square)
    half, digit_mask = 1 << (window - 1), (1 << window) - 1
    accumulator = [_ONE] * exponents.shape[1]
    for base, row in zip(bases, exponents):
        rest = row.astype(np.int64)
        power = gmpy2.mpz(base)  # base^(2^(window * position))
        while rest.any():
            digits = ((rest + half) & digit_mask) - half  # signed digits in [-2^(w-1), 2^(w-1))
            rest = (rest - digits) >> window
            nonzero = np.flatnonzero(digits)
            positive, negative = [_ONE], [_ONE]
            top = int(digits.max(initial=0))
            for _ in range(top):
                positive.append(positive[-1] * power % modulus)
            bottom = int(-digits.min(initial=0))
            if bottom:
                inverse = gmpy2.invert(power, modulus)  # the inverse ciphertext encrypts the negated plaintext
                for _ in range(bottom):
                    negative.append(negative[-1] * inverse % modulus)
            for j, digit in zip(nonzero.tolist(), digits[nonzero].tolist()):
                accumulator[j] = accumulator[j] * (positive[digit] if digit > 0 else negative[-digit]) % modulus
            if rest.any():
                power = gmpy2.powmod(power, 1 << window, modulus)
    return accumulator


def weighted_ciphertext_sum(
    bases: Sequence[int],
    exponents: np.ndarray,
    n_square: int,
    *,
    window: int | None = None,
    processes: int = 1,
) -> list[gmpy2.mpz]:
    """Multi-exponentiation ``prod_u bases[u] ** exponents[u, j] mod n^2`` for every column j.

    With Paillier ciphertexts as bases this is ``Enc(sum_u m_u * exponents[u, j])``: the encrypted weighted sum of
    Protocol 1, step 2(b), once the bases carry the per-user constant.

    Args:
        bases: |U| ciphertexts (elements of Z*_{n^2}).
        exponents: int64 array (|U|, d), signed, |values| < 2^61.
        n_square: n^2.
        window: signed-digit width; chosen by :func:`choose_window` when None.
        processes: worker processes (users are split between them); 1 runs in this process.

    Returns:
        d ciphertexts.

    Raises:
        ValueError: on shape mismatch or a non-positive ``processes``.
    """
    exponents = np.asarray(exponents)
    if exponents.ndim != 2 or exponents.shape[0] != len(bases):
        raise ValueError(f"exponents must have shape ({len(bases)}, d), got {exponents.shape}")
    if not np.issubdtype(exponents.dtype, np.integer):
        raise ValueError(f"exponents must be integers, got dtype {exponents.dtype}")
    if processes < 1:
        raise ValueError(f"processes must be >= 1, got {processes}")
    if window is None:
        bits = int(np.abs(exponents).max(initial=0)).bit_length()
        window = choose_window(len(bases), exponents.shape[1], bits)
    groups = [g for g in np.array_split(np.arange(len(bases)), min(processes, max(1, len(bases)))) if g.size]
    if len(groups) <= 1:
        return _partial_sum(list(bases), exponents, n_square, window)
    with ProcessPoolExecutor(len(groups), mp_context=multiprocessing.get_context("fork")) as pool:
        futures = [
            pool.submit(_partial_sum, [int(bases[u]) for u in g], exponents[g], n_square, window) for g in groups
        ]
        partials = [future.result() for future in futures]
    modulus = gmpy2.mpz(n_square)
    total = partials[0]
    for partial in partials[1:]:
        total = [a * b % modulus for a, b in zip(total, partial)]
    return total


def _decrypt_chunk(p: int, q: int, n: int, ciphertexts: Sequence[int]) -> list[int]:
    """CRT decryption of Paillier ciphertexts with g = n + 1 (as phe), working modulo p^2 and q^2."""
    p, q, n = gmpy2.mpz(p), gmpy2.mpz(q), gmpy2.mpz(n)
    p_square, q_square = p * p, q * q
    # h_p = L_p(g^(p-1) mod p^2)^(-1) mod p, and likewise for q (Paillier 1999, Sec. 7).
    h_p = gmpy2.invert((gmpy2.powmod(n + 1, p - 1, p_square) - 1) // p, p)
    h_q = gmpy2.invert((gmpy2.powmod(n + 1, q - 1, q_square) - 1) // q, q)
    q_inverse = gmpy2.invert(q, p)
    out = []
    for c in ciphertexts:
        m_p = (gmpy2.powmod(c, p - 1, p_square) - 1) // p * h_p % p
        m_q = (gmpy2.powmod(c, q - 1, q_square) - 1) // q * h_q % q
        out.append(int(m_q + q * ((m_p - m_q) * q_inverse % p)))
    return out


def crt_decrypt(private_key, ciphertexts: Sequence[int], *, processes: int = 1) -> list[int]:
    """Decrypt many Paillier ciphertexts with the CRT (p and q of phe's private key), optionally in processes.

    Args:
        private_key: a ``phe.paillier.PaillierPrivateKey``.
        ciphertexts: elements of Z*_{n^2}.
        processes: worker processes.

    Returns:
        The plaintexts in [0, n).
    """
    p, q, n = int(private_key.p), int(private_key.q), int(private_key.public_key.n)
    chunks = [c.tolist() for c in np.array_split(np.array(list(ciphertexts), dtype=object), processes) if c.size]
    if len(chunks) <= 1:
        return _decrypt_chunk(p, q, n, list(ciphertexts))
    with ProcessPoolExecutor(len(chunks), mp_context=multiprocessing.get_context("fork")) as pool:
        return [m for part in pool.map(_decrypt_chunk, [p] * len(chunks), [q] * len(chunks), [n] * len(chunks), chunks) for m in part]
