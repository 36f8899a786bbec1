"""Modulus switching and the wire format of the lattice backend's update (Protocol 1, step 2(c); issue 43 item 5).

A silo's update was sent as SEAL ciphertexts over the whole coefficient modulus q (four to six 60-bit primes, both
components, every one of the N coefficients): 60 times the model's float32 bytes at MNIST size. It now leaves the silo
as a **modulus-switched, trimmed** ciphertext, as Kyber compresses its ciphertexts (``Compress_q(u, d_u)``,
``Compress_q(v, d_v)``, FIPS 203):

1. the silo's flooded sum (:mod:`uldp.secure.lattice_silo`: products, fresh ``Enc(0)``, noise, flood, all at q) is
   switched by SEAL down to the chain's first :data:`LEVEL_PRIMES` primes ``Q2`` (``mod_switch_to_next``: divide by
   the dropped prime and round, per coefficient);
2. each component is then switched to a power of two: ``c0' = round(c0 2^b0 / Q2) mod 2^b0`` and
   ``c1' = round(c1 2^b1 / Q2) mod 2^b1`` (:func:`switch_bits`: ``b1 = b0 + log2 N`` because c1's rounding error is
   multiplied by the secret key, whose 1-norm is at most N);
3. only the coefficients that carry parameters are kept of c0 (the message is coefficient-encoded, so coefficient j
   of ``c0 + c1 s`` decrypts parameter j alone; c1 is needed whole);
4. the pairwise masks of step 1(b) are added in ``Z_(2^b0)`` and ``Z_(2^b1)`` (opposite signs in the two silos of a
   pair, from a ChaCha20 stream keyed per pair, plaintext prime and chunk: :func:`mask_words`), where they cancel
   exactly in the server's sum;
5. the values are bit-packed: ``b0`` bits per used coefficient of c0, ``b1`` bits per coefficient of c1.

The server adds the |S| updates in ``Z_(2^b)``, lifts the sum back to Q2 (``round(c' Q2 / 2^b)``, :func:`lift`) and
decrypts it with SEAL at that level.

**Exactness.** Let ``v`` be the sum's noise at q (``|S| (F + noise)`` at most, :func:`uldp.secure.lattice.noise_bits`
and the flood). At Q2 it is at most ``(Q2 / q) v + |S| (1 + N)`` (SEAL's rounding: below 1 per coefficient over all
steps, times ``1 + ||s||_1``). The switch to ``2^b`` and the lift back add at most ``|S| Q2 / 2^(b0+1) + 1`` to c0's
and ``N (|S| Q2 / 2^(b1+1) + 1)`` to ``c1 s``'s contribution. With ``2^(b0-2) > t |S|`` each of the two is below
``Q2 / (8t)``; the layout asks ``|S| (F + noise) <= q / (8t)``; so the total stays below ``Q2 / (2t) - t - 1`` and
BFV decryption at Q2 returns every ``A_j mod t`` exactly (:func:`check_budget` checks the inequality in integers for
every layout). What remains of the budget is :func:`budget_bits`: at MNIST size (|U| = 100, |S| = 5, P = 1e-10, two
48-bit plaintext primes, q of four 60-bit primes) the worst-case noise fits 2.5 times (1.34 bits) below the bound, and
before the switch the flooded noise sat about 2^7 times below it: the switch spends the budget the flood left unused.

**Security.** Modulus switching is a public, deterministic operation on a ciphertext: anyone can apply it, and it uses
neither key. Whatever the server sees after it is a function of what it would have seen before (the masked, flooded
ciphertexts), so nothing it learns grows (data processing): the IND-CPA argument (Ring-LWE at the full q, 128 bits
by the HE standard) and the circuit-privacy argument (the flood smudges the circuit noise at q, before the switch)
carry over unchanged. The masks move from ``R_q^2`` to ``Z_(2^b0)^k x Z_(2^b1)^N``: still uniform on the group the
update lives in, so any |S| - 1 silos' updates are uniform and independent and the last is fixed by the sum, as in
Theorem 5.
"""

from __future__ import annotations

import hashlib
import math
import struct
from typing import TYPE_CHECKING

import numpy as np

from uldp.secure.masks import KeyStream

if TYPE_CHECKING:
    from collections.abc import Sequence

#: Primes of the level the silos switch to with SEAL before the switch to a power of two.
LEVEL_PRIMES = 2
#: log2 of the ring dimension N (the lattice module's RING_DEGREE).
DEGREE_BITS = 14
_DEGREE = 1 << DEGREE_BITS
_MASK64 = (1 << 64) - 1


def switch_bits(plain_moduli: Sequence[int], n_silos: int) -> tuple[int, int]:
    """(b0, b1): the bits c0 and c1 are switched to, the fewest with ``2^(b0-2) > t |S|`` and ``b1 = b0 + log2 N``
    (each component's rounding then costs at most ``Q2 / (8t)`` of the sum's noise budget; see the module)."""
    b0 = (max(plain_moduli) * n_silos).bit_length() + 2
    return b0, b0 + DEGREE_BITS


def level_modulus(coefficient_primes: Sequence[int]) -> int:
    """Q2: the product of the chain's first :data:`LEVEL_PRIMES` primes (SEAL drops the last ones first)."""
    return math.prod(coefficient_primes[:LEVEL_PRIMES])


def check_budget(
    *,
    coefficient_primes: Sequence[int],
    plain_moduli: Sequence[int],
    n_silos: int,
    flood_bits: int,
) -> None:
    """Check, in integers, that the switched sum decrypts exactly (the inequality of the module docstring).

    Args:
        coefficient_primes: q's data primes (without the special prime), in chain order.
        plain_moduli: the plaintext moduli t_i.
        n_silos: |S|.
        flood_bits: log2 F (one silo's noise before the switch is below ``2^(flood_bits + 1)``).

    Raises:
        ValueError: when the noise could reach ``Q2 / (2t)`` (naming the sizes).
    """
    if (
        budget_bits(
            coefficient_primes=coefficient_primes,
            plain_moduli=plain_moduli,
            n_silos=n_silos,
            flood_bits=flood_bits,
        )
        < 1
    ):
        raise ValueError(
            f"the switched lattice update of {n_silos} silos would not decrypt exactly: q has "
            f"{len(coefficient_primes)} data primes for plaintext moduli of "
            f"{max(plain_moduli).bit_length()} bits and a flood of 2^{flood_bits}"
        )


def budget_bits(
    *,
    coefficient_primes: Sequence[int],
    plain_moduli: Sequence[int],
    n_silos: int,
    flood_bits: int,
) -> float:
    """log2 of how many times the worst-case noise of the switched sum fits in ``Q2 / (2t) - t - 1``: the noise
    budget that remains at decryption (at least 1 bit, i.e. a factor 2, for a valid layout)."""
    if len(coefficient_primes) < LEVEL_PRIMES:
        return -math.inf
    q, level, t = (
        math.prod(coefficient_primes),
        level_modulus(coefficient_primes),
        max(plain_moduli),
    )
    b0, b1 = switch_bits(plain_moduli, n_silos)
    noise = (
        -(-level * n_silos * (1 << (flood_bits + 1)) // q)  # the flooded noise, scaled to Q2
        + n_silos * (1 + _DEGREE)  # SEAL's rounding to Q2, times 1 + ||s||_1
        + n_silos * level // (1 << (b0 + 1))
        + 1  # c0 switched to 2^b0 and lifted back
        + _DEGREE * (n_silos * level // (1 << (b1 + 1)) + 1)  # c1 likewise, times ||s||_1 <= N
    )
    room = level // (2 * t) - t - 1
    return math.log2(room / noise) if room > 0 else -math.inf


def wire_bytes(used: int, bits: tuple[int, int]) -> int:
    """Bytes of one switched ciphertext: ``used`` coefficients of c0 at b0 bits, N of c1 at b1 bits."""
    return -(-used * bits[0] // 8) + -(-_DEGREE * bits[1] // 8)


# --- switching, lifting, masking and packing (values below 2^b, b <= 128, as two uint64 limbs) ----------------------
def switch(residues: np.ndarray, moduli: Sequence[int], bits: int) -> tuple[np.ndarray, np.ndarray]:
    """``round(c 2^bits / Q) mod 2^bits`` of the polynomial c given by its residues [#primes, n] modulo ``moduli``
    (CRT to c in [0, Q), exactly, in Python integers), as (low, high) 64-bit limbs."""
    modulus = math.prod(moduli)
    total = np.zeros(residues.shape[1], dtype=object)
    for q, row in zip(moduli, residues, strict=True):
        cofactor = modulus // q
        total = total + row.astype(object) * (cofactor * pow(cofactor, -1, q))
    switched = (((total % modulus) << bits) + modulus // 2) // modulus % (1 << bits)
    return (switched & _MASK64).astype(np.uint64), (switched >> 64).astype(np.uint64)


def lift(limbs: tuple[np.ndarray, np.ndarray], bits: int, moduli: Sequence[int]) -> np.ndarray:
    """The residues [#primes, n] of ``round(c' Q / 2^bits)``: a switched polynomial back at Q (within Q / 2^(bits+1)
    + 1/2 of the original)."""
    low, high = limbs
    value = low.astype(object) + (high.astype(object) << 64)
    modulus = math.prod(moduli)
    lifted = (value * modulus + (1 << (bits - 1))) >> bits
    return np.stack([(lifted % q).astype(np.uint64) for q in moduli])


def _reduce(low: np.ndarray, high: np.ndarray, bits: int) -> tuple[np.ndarray, np.ndarray]:
    if bits <= 64:
        return low & np.uint64((1 << bits) - 1), np.zeros_like(high)
    return low, high & np.uint64((1 << (bits - 64)) - 1)


def add(
    a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray], bits: int, *, sign: int = 1
):
    """``a + sign b mod 2^bits`` on two-limb values (``sign`` 1 or -1)."""
    if sign == 1:
        low = a[0] + b[0]
        high = a[1] + b[1] + (low < a[0]).astype(np.uint64)
    else:
        low = a[0] - b[0]
        high = a[1] - b[1] - (a[0] < b[0]).astype(np.uint64)
    return _reduce(low, high, bits)


def mask_words(
    key: bytes,
    *,
    round_index: int,
    purpose: int,
    prime: int,
    chunk: int,
    component: int,
    count: int,
    bits: int,
) -> tuple[np.ndarray, np.ndarray]:
    """``count`` values uniform on ``[0, 2^bits)`` from the pair's ChaCha20 stream for (round, prime, chunk,
    component): the stream key is SHA-256 of the pair's mask key and the position, so a worker process draws its own
    chunks' masks without reading the others'."""
    position = struct.pack("<III", prime, chunk, component)
    stream = KeyStream(
        hashlib.sha256(key + position).digest(), round_index=round_index, purpose=purpose
    )
    words = np.frombuffer(stream.read(16 * count), dtype="<u8").reshape(count, 2)
    return _reduce(words[:, 0].copy(), words[:, 1].copy(), bits)


def pack(limbs: tuple[np.ndarray, np.ndarray], bits: int) -> bytes:
    """The values' low ``bits`` bits, concatenated little-endian (``ceil(n bits / 8)`` bytes)."""
    words = np.stack(limbs, axis=1).astype("<u8")
    unpacked = np.unpackbits(words.view(np.uint8).reshape(-1, 16), axis=1, bitorder="little")
    return np.packbits(unpacked[:, :bits].reshape(-1), bitorder="little").tobytes()


def unpack(data: bytes, count: int, bits: int) -> tuple[np.ndarray, np.ndarray]:
    """The inverse of :func:`pack` for ``count`` values."""
    flat = np.unpackbits(np.frombuffer(data, dtype=np.uint8), bitorder="little")[: count * bits]
    full = np.zeros((count, 128), dtype=np.uint8)
    full[:, :bits] = flat.reshape(count, bits)
    words = np.packbits(full, axis=1, bitorder="little").view("<u8")
    return words[:, 0].astype(np.uint64), words[:, 1].astype(np.uint64)
