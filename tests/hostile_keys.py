"""A malicious server's Paillier key for the tests of issue 30 item 9 (beyond the paper): a smooth modulus of the
session's length, and the proof it would have to send with it."""

from __future__ import annotations

import math
import secrets
from dataclasses import replace
from typing import TYPE_CHECKING

import gmpy2

if TYPE_CHECKING:
    from uldp.secure.messages import ModulusProofMessage


def smooth_modulus(key_bits: int, n_max: int) -> int:
    """``n`` = every odd prime power up to ``n_max`` times one prime, exactly ``key_bits`` bits and odd: then
    ``gcd(r N_u, n)`` is the odd part of any ``N_u <= n_max`` for a unit ``r``."""
    smooth = math.prod(
        p ** int(math.log(n_max, p)) for p in range(3, n_max + 1) if gmpy2.is_prime(p)
    )
    low, high = -(-(2 ** (key_bits - 1)) // smooth), (2**key_bits - 1) // smooth
    while True:
        n = smooth * int(gmpy2.next_prime(low + secrets.randbelow(high - low)))
        if n.bit_length() == key_bits:
            return n


def odd_part(value: int) -> int:
    """``value`` without its factors 2."""
    return value >> ((value & -value).bit_length() - 1)


def swapped_modulus(proof: ModulusProofMessage, modulus: int) -> ModulusProofMessage:
    """The honest proof of the server's real key, sent with another modulus: what a server that cannot prove its
    modulus sends (any other forgery fails the same checks)."""
    return replace(proof, modulus=modulus)
