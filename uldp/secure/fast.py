"""The silo's encrypted weighted sum of Protocol 1, step 2(b), made fast; and batch CRT decryption (step 2(c)).

Step 2(b) needs, for every parameter j, ``prod_u Enc(B_inv(N_u))^(E_uj * n_su * r_u * C_LCM mod n)`` mod n^2.
Done literally that is one full-size (|n|-bit) exponentiation per parameter per user. Instead:

1. the full-size constant ``r_u * C_LCM mod n`` is applied once per user and round (:func:`raise_to`), then the
   small factor n_su (at most 11 bits for N_max = 2000), giving ``W_u = Enc(n_su * C_LCM / N_u)``;
2. ``prod_u W_u^(E_uj)`` for all j is a multi-exponentiation with ~40-bit signed exponents over the same |U| bases
   for every j (:func:`weighted_ciphertext_sum`): each exponent is recoded in signed base-2^w digits (the inverse
   ciphertext serves negative digits). With many parameters (a CNN) the *comb* gives each user, per digit position,
   a table of ``W_u^(+-k 2^(w i))`` shared by all parameters, so a parameter costs one modular multiplication per
   user and non-zero digit and no squaring; with few parameters *Straus* interleaving (one table per user, one
   shared squaring chain per parameter) is cheaper. :func:`choose_plan` picks the strategy and w from an operation
   count; users can be split over worker processes (kept between calls). The comb's loops run in C when the
   extension :mod:`uldp.secure._comb` is built (GMP Montgomery multiplication on limb arrays, about 1.25x faster
   per multiplication than gmpy2's ``a * b % m`` at 6144 bits, see ``benchmarks/comb.py``), else in gmpy2;
3. the server decrypts with the CRT modulo p^2 and q^2 (:func:`crt_decrypt`), optionally in worker processes.

Exponents only matter modulo n for the plaintext, so every shortcut decrypts to the same value as the literal
computation; tests check this against the plaintext integers.
"""

from __future__ import annotations

import functools
import math
import multiprocessing
import secrets
from concurrent.futures import ProcessPoolExecutor
from typing import TYPE_CHECKING, Any, TypeVar

import gmpy2
import numpy as np

from uldp.common.checks import check_integer

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from types import ModuleType

_comb: ModuleType | None
try:
    from uldp.secure import _comb
except ImportError:  # the C extension is not built (see setup.py): the gmpy2 comb serves
    _comb = None

_ONE = gmpy2.mpz(1)
T = TypeVar("T")


def raise_to(ciphertext: int, exponent: int, n_square: int) -> gmpy2.mpz:
    """``ciphertext ** exponent mod n^2`` (a homomorphic multiplication of the plaintext by ``exponent``)."""
    return gmpy2.powmod(gmpy2.mpz(ciphertext), gmpy2.mpz(exponent), gmpy2.mpz(n_square))


def _raise_chunk(
    ciphertexts: Sequence[int], exponents: Sequence[int], n_square: int
) -> list[gmpy2.mpz]:
    return [raise_to(c, e, n_square) for c, e in zip(ciphertexts, exponents, strict=True)]


def raise_each(
    ciphertexts: Sequence[int], exponents: Sequence[int], n_square: int, *, processes: int = 1
) -> list[gmpy2.mpz]:
    """``[c ** e mod n^2 for c, e in zip(ciphertexts, exponents)]``, split over ``processes`` worker processes.

    Raises:
        ValueError: if ``ciphertexts`` and ``exponents`` differ in length.
    """
    if len(ciphertexts) != len(exponents):
        raise ValueError(
            f"got {len(ciphertexts)} ciphertexts but {len(exponents)} exponents; they must pair up"
        )
    chunks = [
        c.tolist() for c in np.array_split(np.arange(len(ciphertexts)), max(1, processes)) if c.size
    ]
    if len(chunks) <= 1:
        return _raise_chunk(ciphertexts, exponents, n_square)
    parts = run_each(
        _raise_chunk,
        [
            ([int(ciphertexts[i]) for i in chunk], [int(exponents[i]) for i in chunk], n_square)
            for chunk in chunks
        ],
    )
    return [power for part in parts for power in part]


#: Worker processes kept between calls; each is its own single-process executor, so that a call's j-th task always
#: runs in worker j and what a worker keeps from one call to the next (the lattice silo's expanded weights,
#: :mod:`uldp.secure.lattice_silo`) serves the same share of the next call. A call of fewer tasks uses the first
#: workers, one of more starts the missing ones: calls of different sizes share one set of processes.
_POOL: list[ProcessPoolExecutor] = []


def _workers(count: int) -> tuple[ProcessPoolExecutor, ...]:
    """The first ``count`` kept worker processes, started on first use (a broken one replaced; no fork per call)."""
    context = multiprocessing.get_context("fork")
    for index, worker in enumerate(_POOL[:count]):
        if getattr(worker, "_broken", False):
            worker.shutdown(wait=False)
            _POOL[index] = ProcessPoolExecutor(1, mp_context=context)
    while len(_POOL) < count:
        _POOL.append(ProcessPoolExecutor(1, mp_context=context))
    return tuple(_POOL[:count])


def run_each(function: Callable[..., T], arguments: Sequence[tuple[Any, ...]]) -> list[T]:
    """``[function(*a) for a in arguments]``, the j-th call in kept worker process j (:func:`_workers`), in order.

    The same number of calls in the same order lands on the same processes every time.
    """
    workers = _workers(len(arguments))
    futures = [worker.submit(function, *a) for worker, a in zip(workers, arguments, strict=True)]
    return [future.result() for future in futures]


def worker_pids() -> list[int]:
    """The process ids of the live kept workers (for benchmarks that count their CPU time)."""
    return [pid for worker in _POOL for pid in list(getattr(worker, "_processes", None) or {})]


def shutdown_pools() -> None:
    """Stop the worker processes kept by earlier calls (the next call with ``processes > 1`` starts new ones)."""
    while _POOL:
        _POOL.pop().shutdown()


def signed_digits(exponents: np.ndarray, window: int) -> list[np.ndarray]:
    """Signed base-2^w digits, least significant first: ``sum_i digits[i] * 2**(w i) == exponents``.

    Every digit lies in [-2^(w-1), 2^(w-1)); the list is as long as the largest exponent needs.

    Raises:
        ValueError: if ``window`` < 2 (digits in [-1, 1) cannot write positive numbers).

    >>> [d.tolist() for d in signed_digits(np.array([5, -3, 0]), 2)]
    [[1, 1, 0], [1, -1, 0]]
    """
    check_integer("window", window, minimum=2)  # a 1-bit window has no room for a sign
    half, digit_mask = 1 << (window - 1), (1 << window) - 1
    rest = np.asarray(exponents, dtype=np.int64)
    digits = []
    while rest.any():
        digit = ((rest + half) & digit_mask) - half
        rest = (rest - digit) >> window
        digits.append(digit)
    return digits


def _power_table(base: gmpy2.mpz, top: int, modulus: gmpy2.mpz) -> list[gmpy2.mpz]:
    """``[base^0, base^1, ..., base^top] mod modulus``."""
    table = [_ONE]
    for _ in range(top):
        table.append(table[-1] * base % modulus)
    return table


def _signed_tables(base: gmpy2.mpz, digits: np.ndarray, modulus: gmpy2.mpz) -> tuple[list, list]:
    """Powers of ``base`` and of its inverse (the inverse ciphertext encrypts the negated plaintext) up to the
    largest positive and negative digit."""
    positive = _power_table(base, int(digits.max(initial=0)), modulus)
    bottom = int(-digits.min(initial=0))
    negative = _power_table(gmpy2.invert(base, modulus), bottom, modulus) if bottom else [_ONE]
    return positive, negative


def _multiply_in(
    accumulator: list, digits: np.ndarray, positive: list, negative: list, modulus: gmpy2.mpz
) -> None:
    """``accumulator[j] *= base^digits[j]`` from the signed tables, for the non-zero digits."""
    nonzero = np.flatnonzero(digits)
    for j, digit in zip(nonzero.tolist(), digits[nonzero].tolist(), strict=True):
        accumulator[j] = (
            accumulator[j] * (positive[digit] if digit > 0 else negative[-digit]) % modulus
        )


def _comb_partial_gmpy2(
    bases: Sequence[int], exponents: np.ndarray, n_square: int, window: int
) -> list[gmpy2.mpz]:
    """Fixed-base comb: per base and digit position a table of ``base^(+-k 2^(w i))`` shared by all outputs, so an
    output costs one multiplication per base and non-zero digit and no squaring (best for many outputs)."""
    modulus = gmpy2.mpz(n_square)
    accumulator = [_ONE] * exponents.shape[1]
    for base, row in zip(bases, exponents, strict=True):
        power = gmpy2.mpz(base)  # base^(2^(window * position))
        digits = signed_digits(row, window)
        for position, digit_row in enumerate(digits):
            if position:
                power = gmpy2.powmod(power, 1 << window, modulus)
            _multiply_in(
                accumulator, digit_row, *_signed_tables(power, digit_row, modulus), modulus
            )
    return accumulator


def _limbs(value: int, count: int) -> np.ndarray:
    """``value`` as ``count`` little-endian 64-bit limbs (GMP's mpn layout on x86-64 and other 64-bit hosts)."""
    return np.frombuffer(int(value).to_bytes(8 * count, "little"), dtype="<u8").copy()


def _comb_partial_c(
    bases: Sequence[int], exponents: np.ndarray, n_square: int, window: int
) -> list[gmpy2.mpz]:
    """The comb of :func:`_comb_partial_gmpy2` with its loops in C (:mod:`uldp.secure._comb`): the same products.

    The accumulators live in one uint64 array [d, L] in Montgomery form (x 2^(64 L) mod n^2, L = limbs of n^2);
    per base, the C code builds the signed tables of every digit position and multiplies them in.

    Raises:
        ValueError: if ``n_square`` is even or < 3 (Montgomery arithmetic needs an odd modulus).
        RuntimeError: if the extension is not built.
    """
    if _comb is None:
        raise RuntimeError(
            "uldp.secure._comb is not built (pip install -e . builds it); use _comb_partial_gmpy2"
        )
    modulus = _odd_modulus(n_square)
    count = -(-modulus.bit_length() // 64)
    shift = 64 * count  # R = 2^shift
    modulus_limbs = _limbs(modulus, count)
    inverse_limbs = _limbs(gmpy2.invert(modulus, _ONE << shift), count)
    accumulators = np.tile(_limbs((_ONE << shift) % modulus, count), (exponents.shape[1], 1))
    if accumulators.size:
        for base, row in zip(bases, exponents, strict=True):
            digits = signed_digits(row, window)
            if not digits:
                continue
            base = gmpy2.mpz(base) % modulus
            inverse = gmpy2.invert(base, modulus) if min(d.min() for d in digits) < 0 else _ONE
            _comb.multiply_in_base(
                accumulators,
                np.stack(digits).astype(np.int32),
                _limbs((base << shift) % modulus, count),
                _limbs((inverse << shift) % modulus, count),
                modulus_limbs,
                inverse_limbs,
                window,
            )
        _comb.from_montgomery(accumulators, modulus_limbs, inverse_limbs)
    raw, width = accumulators.tobytes(), 8 * count
    return [
        gmpy2.mpz(int.from_bytes(raw[k : k + width], "little")) for k in range(0, len(raw), width)
    ]


def _odd_modulus(n_square: int) -> gmpy2.mpz:
    """``n_square`` as an mpz after checking that it is odd and >= 3 (a Paillier n^2 is; Montgomery needs it)."""
    modulus = gmpy2.mpz(n_square)
    if modulus < 3 or modulus % 2 == 0:
        shown = (
            str(modulus)
            if modulus.bit_length() <= 64
            else f"an even number of {modulus.bit_length()} bits"
        )
        raise ValueError(f"n_square must be an odd modulus >= 3 (a Paillier n^2), got {shown}")
    return modulus


@functools.cache
def c_comb_available() -> bool:
    """Whether the C comb (:mod:`uldp.secure._comb`) is built and gives gmpy2's products on a 6144-bit check.

    The C code calls GMP's internal REDC (``mpn_redc_n``) and assumes 64-bit limbs; this one-off comparison (a few
    milliseconds) makes a GMP whose interface differs fall back to gmpy2 instead of producing wrong ciphertexts.
    """
    if _comb is None:
        return False
    modulus = gmpy2.mpz(3) ** 3875  # odd, 6142 bits: 96 limbs like n^2 for 3072-bit keys
    bases = [2, gmpy2.mpz(5) ** 2640 + 1]  # units modulo 3^k
    exponents = np.array([[5, -7, 0, 2**40 - 3], [-1, 300, 2**35, -(2**39)]], dtype=np.int64)
    return _comb_partial_c(bases, exponents, modulus, 4) == _comb_partial_gmpy2(
        bases, exponents, modulus, 4
    )


def _comb_partial(
    bases: Sequence[int], exponents: np.ndarray, n_square: int, window: int
) -> list[gmpy2.mpz]:
    """Fixed-base comb (:func:`_comb_partial_gmpy2`), in C when the extension is built and checked."""
    partial = _comb_partial_c if c_comb_available() else _comb_partial_gmpy2
    return partial(bases, exponents, n_square, window)


def _straus_partial(
    bases: Sequence[int], exponents: np.ndarray, n_square: int, window: int
) -> list[gmpy2.mpz]:
    """Interleaved (Straus) multi-exponentiation: one table of ``base^(+-k)`` per base, and per output one chain of
    squarings shared by all bases, most significant digit first (best for few outputs)."""
    modulus = gmpy2.mpz(n_square)
    digits = signed_digits(exponents, window)
    tables = [
        _signed_tables(
            gmpy2.mpz(base),
            np.stack([d[u] for d in digits]) if digits else np.zeros(0, np.int64),
            modulus,
        )
        for u, base in enumerate(bases)
    ]
    accumulator = [_ONE] * exponents.shape[1]
    for step, position in enumerate(reversed(digits)):
        if step:
            accumulator = [gmpy2.powmod(a, 1 << window, modulus) for a in accumulator]
        for digit_row, (positive, negative) in zip(position, tables, strict=True):
            _multiply_in(accumulator, digit_row, positive, negative, modulus)
    return accumulator


_STRATEGIES = {"comb": _comb_partial, "straus": _straus_partial}


def multiplication_count(
    strategy: str, n_bases: int, n_outputs: int, exponent_bits: int, window: int
) -> float:
    """Modular multiplications (and squarings) of a strategy: table building, lookups and squaring chains.

    Per base and digit position the comb builds a table of about 2^w entries and moves on with w squarings; Straus
    builds one table per base and squares every output w times per position. Both then do one multiplication per
    base, output and non-zero digit (a fraction 1 - 2^-w of them).
    """
    positions = math.ceil((exponent_bits + 1) / window)
    lookups = n_bases * n_outputs * positions * (1 - 2.0**-window)
    if strategy == "comb":
        return lookups + n_bases * positions * (2**window + window)
    if strategy == "straus":
        return lookups + n_bases * 2**window + n_outputs * positions * window
    raise ValueError(f"strategy must be one of {sorted(_STRATEGIES)}, got {strategy!r}")


def choose_plan(
    n_bases: int,
    n_outputs: int,
    exponent_bits: int,
    *,
    strategy: str | None = None,
    window: int | None = None,
) -> tuple[str, int]:
    """The strategy (``"comb"`` or ``"straus"``) and digit width w with the fewest modular multiplications.

    Args:
        n_bases, n_outputs, exponent_bits: the size of the multi-exponentiation.
        strategy, window: fix either (None: free).

    >>> choose_plan(100, 21840, 31), choose_plan(20, 16, 34)
    (('comb', 11), ('straus', 5))
    """
    plans = [
        (name, width)
        for name in ([strategy] if strategy else _STRATEGIES)
        for width in ([window] if window else range(2, 17))
    ]
    return min(
        plans,
        key=lambda plan: multiplication_count(plan[0], n_bases, n_outputs, exponent_bits, plan[1]),
    )


def weighted_ciphertext_sum(
    bases: Sequence[int],
    exponents: np.ndarray,
    n_square: int,
    *,
    window: int | None = None,
    strategy: str | None = None,
    processes: int = 1,
) -> list[gmpy2.mpz]:
    """Multi-exponentiation ``prod_u bases[u] ** exponents[u, j] mod n^2`` for every column j.

    With Paillier ciphertexts as bases this is ``Enc(sum_u m_u * exponents[u, j])``: the encrypted weighted sum of
    Protocol 1, step 2(b), once the bases carry the per-user constant.

    Args:
        bases: |U| ciphertexts (elements of Z*_{n^2}).
        exponents: int64 array (|U|, d), signed, |values| < 2^61.
        n_square: n^2.
        window: signed-digit width; with ``strategy``, chosen by :func:`choose_plan` when None.
        strategy: ``"comb"`` (many outputs) or ``"straus"`` (few outputs); None picks the cheaper.
        processes: worker processes (users are split between them); 1 runs in this process.

    Returns:
        d ciphertexts.

    Raises:
        ValueError: on shape mismatch, an even ``n_square``, an unknown strategy or a non-positive ``processes``.
    """
    exponents = np.asarray(exponents)
    if exponents.ndim != 2 or exponents.shape[0] != len(bases):
        raise ValueError(f"exponents must have shape ({len(bases)}, d), got {exponents.shape}")
    if not np.issubdtype(exponents.dtype, np.integer):
        raise ValueError(f"exponents must be integers, got dtype {exponents.dtype}")
    check_integer("processes", processes)
    _odd_modulus(n_square)
    if strategy is not None and strategy not in _STRATEGIES:
        raise ValueError(f"strategy must be one of {sorted(_STRATEGIES)}, got {strategy!r}")
    groups = [
        g
        for g in np.array_split(np.arange(len(bases)), min(processes, max(1, len(bases))))
        if g.size
    ]
    bits = int(np.abs(exponents).max(initial=0)).bit_length()
    strategy, window = choose_plan(
        len(groups[0]) if groups else 1, exponents.shape[1], bits, strategy=strategy, window=window
    )
    partial_sum = _STRATEGIES[strategy]
    if len(groups) <= 1:
        return partial_sum(list(bases), exponents, n_square, window)
    partials = run_each(
        partial_sum, [([int(bases[u]) for u in g], exponents[g], n_square, window) for g in groups]
    )
    modulus = gmpy2.mpz(n_square)
    total = partials[0]
    for partial in partials[1:]:
        total = [a * b % modulus for a, b in zip(total, partial, strict=True)]
    return total


def _pack_chunk(groups: Sequence[Sequence[int]], shift: int, n_square: int) -> list[gmpy2.mpz]:
    modulus = gmpy2.mpz(n_square)
    out = []
    for group in groups:
        packed = gmpy2.mpz(group[-1])
        for ciphertext in reversed(group[:-1]):
            packed = gmpy2.powmod(packed, 1 << shift, modulus) * ciphertext % modulus
        out.append(packed)
    return out


def pack_ciphertexts(
    ciphertexts: Sequence[int], *, slots: int, slot_bits: int, n_square: int, processes: int = 1
) -> list[gmpy2.mpz]:
    """Packed Paillier ciphertexts: ``prod_k c_(iK+k)^(2^(b k)) = Enc(sum_k m_(iK+k) 2^(b k))`` for each group i.

    Horner's rule, ``(((c_(K-1))^(2^b) c_(K-2))^(2^b) ...) c_0``, costs b squarings per packed parameter; the groups
    are split over ``processes`` worker processes (:mod:`uldp.secure.packing`, step 3).

    Args:
        ciphertexts: d ciphertexts (elements of Z*_{n^2}).
        slots: K, ciphertexts per group (the last group may be shorter).
        slot_bits: b.
        n_square: n^2.
        processes: worker processes.

    Returns:
        ceil(d / K) ciphertexts.
    """
    check_integer("slots", slots)
    check_integer("slot_bits", slot_bits)
    check_integer("processes", processes)
    groups = [list(ciphertexts[i : i + slots]) for i in range(0, len(ciphertexts), slots)]
    chunks = [c.tolist() for c in np.array_split(np.arange(len(groups)), processes) if c.size]
    if len(chunks) <= 1:
        return _pack_chunk(groups, slot_bits, n_square)
    parts = run_each(
        _pack_chunk,
        [([[int(c) for c in groups[i]] for i in chunk], slot_bits, n_square) for chunk in chunks],
    )
    return [packed for part in parts for packed in part]


def _encrypt_chunk(key: tuple[int, int], plaintexts: Sequence[int]) -> list[int]:
    """Paillier encryptions ``(1 + m n) * rho^n mod n^2`` with the randomizer computed by the CRT (see
    :func:`crt_encrypt`); ``key`` is (p, q). The randomness comes from the OS CSPRNG in whichever process runs it."""
    p, q = gmpy2.mpz(key[0]), gmpy2.mpz(key[1])
    n, p_square, q_square = p * q, p * p, q * q
    n_square = n * n
    p_square_inverse = gmpy2.invert(p_square, q_square)
    out = []
    for m in plaintexts:
        residue_p = gmpy2.powmod(1 + secrets.randbelow(int(p) - 1), p, p_square)
        residue_q = gmpy2.powmod(1 + secrets.randbelow(int(q) - 1), q, q_square)
        residue = residue_p + p_square * ((residue_q - residue_p) * p_square_inverse % q_square)
        out.append(int((1 + int(m) % n * n) * residue % n_square))
    return out


def crt_encrypt(private_key, plaintexts: Sequence[int], *, processes: int = 1) -> list[int]:
    """Paillier encryptions ``(1 + m n) * rho^n mod n^2`` by the key's owner, the randomizer computed with the CRT.

    ``rho^n mod p^2`` only depends on ``rho mod p`` (``(a + b p)^p = a^p mod p^2``, and q is a unit mod p(p - 1)), so
    a uniform n-th residue is ``a^p mod p^2`` and ``b^q mod q^2`` for uniform a in Z_p^*, b in Z_q^* (OS CSPRNG),
    joined by the CRT: two half-size exponentiations with half-length exponents instead of one full one, the same
    distribution as phe's ``raw_encrypt`` (used by the server in Protocol 1, step 2(a)).

    Args:
        private_key: a ``phe.paillier.PaillierPrivateKey``.
        plaintexts: elements of Z_n.
        processes: worker processes (forked workers draw from the OS CSPRNG too).

    Returns:
        The ciphertexts, elements of Z*_{n^2}.
    """
    key = (int(private_key.p), int(private_key.q))
    values = [int(m) for m in plaintexts]
    chunks = [c.tolist() for c in np.array_split(np.arange(len(values)), processes) if c.size]
    if len(chunks) <= 1:
        return _encrypt_chunk(key, values)
    parts = run_each(_encrypt_chunk, [(key, [values[i] for i in c]) for c in chunks])
    return [c for part in parts for c in part]


def _decrypt_chunk(key: tuple[int, int, int, int, int], ciphertexts: Sequence[int]) -> list[int]:
    """CRT decryption of Paillier ciphertexts with g = n + 1 (as phe), working modulo p^2 and q^2.

    ``key`` is (p, q, h_p, h_q, p^-1 mod q) with h_p = L_p(g^(p-1) mod p^2)^(-1) mod p (Paillier 1999, Sec. 7).
    """
    p, q, h_p, h_q, p_inverse = (gmpy2.mpz(v) for v in key)
    p_square, q_square = p * p, q * q
    out = []
    for c in ciphertexts:
        m_p = (gmpy2.powmod(c, p - 1, p_square) - 1) // p * h_p % p
        m_q = (gmpy2.powmod(c, q - 1, q_square) - 1) // q * h_q % q
        out.append(int(m_p + p * ((m_q - m_p) * p_inverse % q)))
    return out


def crt_decrypt(private_key, ciphertexts: Sequence[int], *, processes: int = 1) -> list[int]:
    """Decrypt many Paillier ciphertexts with the CRT (p, q and h_p, h_q of phe's private key), optionally in processes.

    Args:
        private_key: a ``phe.paillier.PaillierPrivateKey``.
        ciphertexts: elements of Z*_{n^2}.
        processes: worker processes.

    Returns:
        The plaintexts in [0, n).
    """
    key = (
        int(private_key.p),
        int(private_key.q),
        int(private_key.hp),
        int(private_key.hq),
        int(private_key.p_inverse),
    )
    chunks = [
        c.tolist()
        for c in np.array_split(np.array(list(ciphertexts), dtype=object), processes)
        if c.size
    ]
    if len(chunks) <= 1:
        return _decrypt_chunk(key, list(ciphertexts))
    return [
        m for part in run_each(_decrypt_chunk, [(key, chunk) for chunk in chunks]) for m in part
    ]
