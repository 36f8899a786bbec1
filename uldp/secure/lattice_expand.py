"""The lattice backend's weights in one ciphertext per plaintext prime, expanded by each silo (Protocol 1, step 2(b)).

What it replaces. Step 2(b) of Protocol 1 has the server send every silo the encrypted weights ``Enc(w_u)`` of all
|U| users; with BFV that was one ciphertext per user and plaintext prime (105 MB per round at MNIST size, |U| = 100,
whenever the server drew a new sample). Now the server sends, per plaintext prime t, ``ceil(|U| / N)`` ciphertexts,
each encrypting up to N users' rescaled weights as the coefficients of one polynomial (:func:`packed_rows`):

    ``V(X) = sum_u (y_u 2^-L mod t) X^u``,  L = :func:`levels` (the ``2^-L`` undoes the expansion's factor 2^L).

Each silo subtracts its rescale corrections the same way (``sum_u (c_u 2^-L mod t) X^u``, a plaintext), and
**expands** the result into one ciphertext per user whose plaintext is the constant ``w_u = y_u - c_u``
(:func:`expand`; the oblivious expansion of SealPIR, Angel et al., IEEE S&P 2018, Algorithm 3): at level
``l < L``, every ciphertext ``c`` becomes ``c + tau(c)`` and ``(tau(c) - c) X^(N - 2^l)`` with ``tau`` the
automorphism ``X -> X^(N / 2^l + 1)``, which keeps the coefficients at even multiples of 2^l doubled and cancels the
others. After L levels, ciphertext u holds ``2^L (y_u - c_u) 2^-L = w_u`` at coefficient 0 and 0 elsewhere, exactly
(in Z_t). From there the round is unchanged (:mod:`uldp.secure.lattice_silo`: products, re-randomisation, flood,
switch, masks), so the updates sent and the server's decryption do not change.

Why expand rather than multiply the packed weights directly. With ``w(X) = sum_u w_u X^u`` and a plaintext holding
``B = floor(N / |U|)`` parameters per product (``Delta_(u,j)`` at ``X^(j|U| + |U| - 1 - u)``), the product's
coefficient ``X^(j|U| + |U| - 1)`` is ``sum_u w_u Delta_(u,j)`` with no other term, so one received ciphertext
suffices without any key; but each product then carries only B parameters, and every parameter's output
coefficient needs its own ``|U|`` plaintext coefficients, so no sum of products packs more than N / |U| of them in one
ciphertext. A silo would send ``ceil(d |U| / N)`` ciphertexts per prime, each with its whole c1 (at MNIST size 134
per prime, about 37 MB, against 0.84 MB today). Without automorphisms, dense outputs need |U| weight ciphertexts per
output ciphertext (what the server sent before); the Galois keys move that cost to a one-time set-up.

The automorphisms need the server's Galois keys for the L elements ``N / 2^l + 1`` (:func:`galois_elements`), sent
once, seeded, in step 1(a) beside the public keys (:meth:`uldp.secure.lattice.LatticeServer.galois_keys`).

Security (Theorem 5's argument, as in :mod:`uldp.secure.lattice`):

- *The silos learn nothing more.* They receive ``ceil(|U| / N)`` ciphertexts of the same values ``y_u`` (scaled by a
  public constant) instead of |U|: IND-CPA under Ring-LWE hides them as it hid the |U| ones, and hides the sample
  b_u that ``y_u`` carries. The Galois keys are key-switching keys, Ring-LWE samples under the server's secret s
  that encrypt ``tau(s)``: they are pseudorandom under Ring-LWE with the circular-security assumption that SEAL's
  rotations and every BFV deployment with Galois or relinearisation keys make (the HE standard's parameters, 128 bits
  at N = 16384, are the same). Nothing about the weights or the other silos' counts is in them.
- *The server learns nothing more.* What it receives is unchanged in form: the switched, flooded, masked update.
  The expansion is a public operation on the server's own ciphertext: its noise (the server's encryption error, its
  own key-switching errors and SEAL's roundings) is a function of values the server knows, and the only noise that
  depends on a silo's inputs is still the products' ``v_u X_u``, which the flood smudges. The flood is sized from
  :func:`uldp.secure.lattice.noise_bits`, which now bounds ``v_u`` by :func:`expansion_noise` instead of a fresh
  encryption's error, so the smudging lemma's ``F >= 2^lambda N n_ct ||e_circuit||`` still holds.
- *Exactness.* Every operation is exact in Z_t; the noise bound (:func:`expansion_noise`) enters the layout's check
  that the sum decrypts exactly (:func:`uldp.secure.lattice.layout_for`), so the result is within P as before.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from collections.abc import Sequence

#: log2 of the ring dimension N (the lattice module's RING_DEGREE, which imports this module).
DEGREE_BITS = 14
_DEGREE = 1 << DEGREE_BITS


def levels(users: int) -> int:
    """L: the expansion levels for ``users`` users per ciphertext (``2^L >= min(users, N)``; 0 for one user)."""
    return (max(1, min(users, _DEGREE)) - 1).bit_length()


def groups(users: int) -> int:
    """Weight ciphertexts per plaintext prime: ``ceil(|U| / N)`` (N users' weights per ciphertext)."""
    return -(-users // _DEGREE)


def galois_elements(level_count: int) -> list[int]:
    """The automorphisms ``X -> X^(N / 2^l + 1)``, ``l < L``, whose Galois keys the expansion needs."""
    return [_DEGREE // (1 << level) + 1 for level in range(level_count)]


def expansion_noise(level_count: int, *, error_bound: int, data_primes: int) -> int:
    """A bound on the noise of one expanded weight ciphertext, with the proof.

    Write a BFV ciphertext's invariant as ``c0 + c1 s = (q / t) m + v (mod q)`` with m an integer polynomial taken
    modulo t (``(q / t) t = q``, so any representative of m serves and the automorphisms' sign changes cost nothing).
    A fresh seeded encryption has ``||v|| <= E + 1/2`` (E the error bound, 1/2 SEAL's rounding of ``q m / t``); the
    subtraction of the corrections' plaintext adds at most 1/2. An automorphism maps v to ``tau(v)`` (the same norm)
    and adds the key switch's error: SEAL decomposes c1 over the k data primes, ``sum_j c1_j e_j / P`` with
    ``|c1_j| < q_j < 2 P`` (60-bit primes, P the special one) and ``||e_j|| <= E``, is at most ``2 k N E``, and the
    division by P rounds each component by 1/2, which ``1 + ||s||_1 <= 1 + N`` times costs at most ``(N + 1) / 2``.
    Adding or subtracting two ciphertexts adds their noises; the monomial ``X^(N - 2^l)`` keeps the norm. So a level
    maps a bound b to ``2 b + 2 k N E + N``, and after L levels the noise is at most
    ``2^L (E + 1 + 2 k N E + N)``.

    Args:
        level_count: L.
        error_bound: E, SEAL's error bound.
        data_primes: k, the data primes of q (a bound on them serves).
    """
    return (1 << level_count) * (
        error_bound + 1 + 2 * data_primes * _DEGREE * error_bound + _DEGREE
    )


def noise_bits_of(level_count: int, *, error_bound: int, data_primes: int) -> int:
    """``ceil(log2(expansion_noise(...)))``, what :func:`uldp.secure.lattice.noise_bits` adds to log2 N."""
    return math.ceil(
        math.log2(expansion_noise(level_count, error_bound=error_bound, data_primes=data_primes))
    )


def packed_rows(values: Sequence[int], plain_modulus: int) -> list[np.ndarray]:
    """The coefficient rows of the weight polynomials: per group of N users, ``(v_u 2^-L mod t)`` at coefficient
    ``u mod N`` (uint64, N each), L = :func:`levels` of |U| (the same for the silos' corrections).

    >>> [row[:3].tolist() for row in packed_rows([1, 2, 3], 7)]  # 2^-2 mod 7 = 2
    [[2, 4, 6]]
    """
    inverse = pow(1 << levels(len(values)), -1, plain_modulus)
    rows = []
    for start in range(0, len(values), _DEGREE):
        row = np.zeros(_DEGREE, dtype=np.uint64)
        part = values[start : start + _DEGREE]
        row[: len(part)] = [int(v) * inverse % plain_modulus for v in part]
        rows.append(row)
    return rows


def expand(
    sealapi: Any,
    evaluator: Any,
    ciphertext: Any,
    galois_keys: Any,
    *,
    level_count: int,
    wanted: Sequence[int],
    monomial: Any,
) -> list[Any]:
    """The oblivious expansion (see the module), pruned to the ``wanted`` users: result i encrypts ``2^L m_u`` as a
    constant for ``u = wanted[i]`` (each below 2^L), given ``m(X) = sum_u m_u X^u``.

    After level l a ciphertext is kept per residue ``u mod 2^(l+1)`` of a wanted user (it holds exactly those
    users' coefficients), so a silo whose users are few pays fewer automorphisms than 2^L - 1.

    Args:
        sealapi: SEAL's bindings.
        evaluator: the context's evaluator.
        ciphertext: the packed ciphertext (coefficient form).
        galois_keys: the server's Galois keys for :func:`galois_elements` of L.
        level_count: L.
        wanted: the users (coefficients) whose ciphertexts to return.
        monomial: ``monomial(e)``, the plaintext ``X^e`` (coefficient 1) of the context.
    """
    current = {0: ciphertext}
    for level in range(level_count):
        element, step = _DEGREE // (1 << level) + 1, 1 << level
        needed = {u % (2 * step) for u in wanted}
        shift = monomial(_DEGREE - step)
        following = {}
        for residue, source in current.items():
            image = sealapi.Ciphertext()
            evaluator.apply_galois(source, element, galois_keys, image)
            if residue in needed:  # c + tau(c): the coefficients at even multiples of 2^l, doubled
                total = sealapi.Ciphertext()
                evaluator.add(source, image, total)
                following[residue] = total
            if (
                residue + step in needed
            ):  # (tau(c) - c) X^(N - 2^l) = (c - tau(c)) X^(-2^l): the odd ones
                difference = sealapi.Ciphertext()
                evaluator.sub(image, source, difference)
                evaluator.multiply_plain_inplace(difference, shift)
                following[residue + step] = difference
        current = following
    return [current[u] for u in wanted]
