"""Keyed CSPRNG streams for Protocol 1: pairwise additive masks (steps 1(e), 2(c)) and multiplicative blinds (1(d)).

A stream is ChaCha20 keyed by a 256-bit secret (a pairwise key from X25519 + HKDF, or a key derived from the seed
R), with the nonce naming the round and the purpose, so every (pair, round, purpose) gets an independent stream.
Elements of Z_n are drawn by rejection sampling (exactly uniform); blinds additionally reject values not coprime
to n, so r_u is uniform on Z_n^*. No simulation RNG is involved: the keys come from the OS CSPRNG.

>>> key = bytes(32)
>>> a = uniform_elements(key, modulus=101, count=5, round_index=0, purpose=PURPOSE_HISTOGRAM)
>>> a == uniform_elements(key, modulus=101, count=5, round_index=0, purpose=PURPOSE_HISTOGRAM)
True
>>> all(0 <= x < 101 for x in a)
True
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms

from uldp.common.checks import check_integer

if TYPE_CHECKING:
    from collections.abc import Iterator

#: Purposes of mask streams (part of the ChaCha20 nonce): one per place masks are used.
PURPOSE_HISTOGRAM = 1
PURPOSE_UPDATE = 2
PURPOSE_BLINDS = 3
PURPOSE_RESCALE = 4
#: The masks of the masked sum of plain updates (:mod:`uldp.secure.masked_sum`), in Z_(2^64).
PURPOSE_SUM = 5
#: The silos' user sample (:mod:`uldp.secure.sampling`): one 64-bit draw per user and round.
PURPOSE_SAMPLE = 6

_BLOCK = 1 << 16


class KeyStream:
    """The ChaCha20 keystream for (key, round, purpose), read sequentially."""

    def __init__(self, key: bytes, *, round_index: int, purpose: int) -> None:
        if len(key) != 32:
            raise ValueError(f"a stream key has 32 bytes, got {len(key)}")
        if not 0 <= round_index < 2**64 or not 0 <= purpose < 2**32:
            raise ValueError(f"round index {round_index} or purpose {purpose} out of range")
        # 16-byte nonce of cryptography's ChaCha20: 4-byte block counter (0), then purpose and round.
        nonce = bytes(4) + purpose.to_bytes(4, "little") + round_index.to_bytes(8, "little")
        self._encryptor = Cipher(algorithms.ChaCha20(key, nonce), mode=None).encryptor()
        self._buffer = b""

    def read(self, size: int) -> bytes:
        """The next ``size`` bytes of keystream."""
        while len(self._buffer) < size:
            self._buffer += self._encryptor.update(bytes(max(_BLOCK, size)))
        out, self._buffer = self._buffer[:size], self._buffer[size:]
        return out


def _candidates(stream: KeyStream, modulus: int) -> Iterator[int]:
    """Integers below 2**bits(n), uniformly from the stream; callers reject those >= n."""
    bits = modulus.bit_length()
    width = (bits + 7) // 8
    excess = 8 * width - bits
    while True:
        chunk = stream.read(width * 64)
        for start in range(0, len(chunk), width):
            yield int.from_bytes(chunk[start : start + width], "big") >> excess


def uniform_elements(
    key: bytes, *, modulus: int, count: int, round_index: int, purpose: int
) -> list[int]:
    """``count`` independent uniform elements of Z_n from the stream (key, round, purpose); rejection sampling.

    Args:
        key: 32-byte stream key (a pairwise mask key).
        modulus: n.
        count: how many elements.
        round_index: protocol round (0 for setup).
        purpose: one of the PURPOSE_* constants.

    Returns:
        A list of ints in [0, n).
    """
    check_integer("modulus", modulus, minimum=2)
    out: list[int] = []
    for candidate in _candidates(KeyStream(key, round_index=round_index, purpose=purpose), modulus):
        if len(out) == count:
            break
        if candidate < modulus:
            out.append(candidate)
    return out


def unit_blinds(key: bytes, *, modulus: int, count: int) -> list[int]:
    """Multiplicative blinds r_u uniform on Z_n^* (Protocol 1, step 1(d)), identical in every silo sharing ``key``.

    Args:
        key: 32-byte key derived from the shared seed R.
        modulus: n.
        count: |U|.

    Returns:
        ``count`` elements r with 0 < r < n and gcd(r, n) = 1.
    """
    out: list[int] = []
    for candidate in _candidates(KeyStream(key, round_index=0, purpose=PURPOSE_BLINDS), modulus):
        if len(out) == count:
            break
        if 0 < candidate < modulus and math.gcd(candidate, modulus) == 1:
            out.append(candidate)
    return out


def signed_mask_sum(
    pair_keys: dict[int, bytes],
    *,
    own_id: int,
    modulus: int,
    count: int,
    round_index: int,
    purpose: int,
) -> list[int]:
    """Net pairwise mask of one silo: sum_{s<s'} r_{s,s'} - sum_{s>s'} r_{s,s'} (mod n), per element.

    Summed over all silos these cancel exactly (proof of Theorem 4).

    Args:
        pair_keys: mask key shared with each other silo, by that silo's id.
        own_id: this silo's id.
        modulus: n.
        count: number of masked elements.
        round_index: protocol round.
        purpose: PURPOSE_HISTOGRAM or PURPOSE_UPDATE.

    Returns:
        ``count`` elements of Z_n.
    """
    total = [0] * count
    for peer_id, key in sorted(pair_keys.items()):
        sign = 1 if own_id < peer_id else -1
        stream = uniform_elements(
            key, modulus=modulus, count=count, round_index=round_index, purpose=purpose
        )
        total = [(acc + sign * value) % modulus for acc, value in zip(total, stream, strict=True)]
    return total
