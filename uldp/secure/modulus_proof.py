"""Beyond the paper: a proof that the server's Paillier modulus is well formed, checked by a silo before it uses it.

Protocol 1 (step 1(a)) has each silo encrypt under the server's Paillier modulus ``n`` and blind with units of
``Z_n``. The paper's server is semi-honest; a malicious one could send an ``n`` of many small primes, and then
``gcd(B(N_u), n)`` reveals the odd part of every user's record count N_u (issue 30, item 9). A silo that calls
:func:`verify_modulus` on the server's ``n`` before step 1(a) accepts only a modulus with a non-interactive proof
(Fiat-Shamir with SHA-256) of the two statements of Canetti, Gennaro, Goldfeder, Makriyannis and Peled 2020 ("UC
non-interactive, proactive, threshold ECDSA with identifiable aborts", CCS 2020; eprint 2021/060):

- **Paillier-Blum modulus** (CGGMP20's Figure 16, :func:`prove_paillier_blum`): ``n`` is odd and composite, every
  challenge ``y`` has an ``n``-th root (so ``gcd(n, phi(n)) = 1``: ``n`` is square-free) and one of ``y, -y, wy,
  -wy`` has a fourth root (so ``n`` has at most two prime factors). A modulus that is not a product of two distinct
  primes passes each of the :data:`BLUM_CHALLENGES` challenges with probability at most 1/2.
- **No small factor** (CGGMP20's Figure 28, :func:`prove_no_small_factor`): in the silo's own ring-Pedersen group
  (:class:`RingPedersen`, a modulus whose factors only the silo knew, then forgot), the server commits to ``p`` and
  ``q`` and shows ``|p|, |q| <= 2^(l + e + 2) sqrt(n)`` for the challenge bits ``l`` (:data:`CHALLENGE_BITS`) and
  slack ``e`` (:data:`SLACK_BITS`), so both factors exceed ``sqrt(n) / 2^(l + e + 2)`` (:func:`smallest_factor_bits`).
  Its soundness rests on the strong RSA assumption in the silo's group, which is why the silo makes that group
  itself: the server proves once per silo, against that silo's parameters.

What it buys: the server's ``n`` is a product of two primes of at least ``smallest_factor_bits(n)`` bits each (1277
for a 3072-bit key), so ``gcd`` with any value a silo sends reveals nothing, the blinds ``r_u`` are uniform on a
group with no small factors, and Theorem 4's correctness (decoding within the precision P), which assumes such an
``n``, holds. The proof is
zero-knowledge: it reveals nothing about ``p`` and ``q``.

What a malicious server can still do: everything a malicious server can do with a well-formed key. It can decrypt
each silo's contributions before they are summed only if silos send them un-masked (Protocol 1 masks them), and it
still chooses which users are sampled, which weights it encrypts (it can encrypt a weight other than ``1 / N_u``
and so scale one user's update; the silos' own checks of the decoded range bound what that changes), whether and to
whom it relays the silos' messages, and when it aborts. It learns ``|U|`` and ``|S|`` as before. The proof says
nothing about the server's key size (the silo checks it, step 1(a)) or about how the server generated its primes
beyond their number and size.

Key generation for the prover: :func:`blum_paillier_keypair` (primes ``p = q = 3 mod 4``, as the first proof needs).
Secrets and blinding values come from the OS CSPRNG (:mod:`secrets`).

>>> silo = ring_pedersen(256)
>>> public, private = blum_paillier_keypair(1024, insecure_test_key=True)
>>> proof = prove_modulus(private.p, private.q, silo, context=b"session 1")
>>> verify_modulus(public.n, proof, silo, context=b"session 1")
"""

from __future__ import annotations

import hashlib
import math
import secrets
from dataclasses import dataclass

import gmpy2
from phe import paillier

from uldp.secure.config import check_key_bits

#: Challenges of the Paillier-Blum proof: a bad modulus survives each with probability at most 1/2 (CGGMP20's m = 80).
BLUM_CHALLENGES = 80
#: Bits ``l`` of the no-small-factor proof's challenge (soundness 2^-l) and its statistical slack ``e``
#: (zero-knowledge to within about 2^-e). CGGMP20 use one slack ``e = 2 l`` for every mask; here the factors' masks
#: ``alpha, beta`` take ``l + e`` bits over sqrt(n) and the commitments' randomness ``x, y, r`` takes ``2 l + e`` bits
#: over theirs (what masks ``e mu``, ``e nu`` and ``e sigma``): the same zero-knowledge, a tighter factor bound.
CHALLENGE_BITS = 128
SLACK_BITS = 128
#: Below this many bits for the smallest factor the proof would bound nothing useful: :func:`verify_modulus` refuses.
MIN_FACTOR_BITS = 128
#: Miller-Rabin rounds of every primality test here (error below 4^-50).
PRIME_ROUNDS = 50

_DOMAIN = b"uldp/modulus-proof/v1"


@dataclass(frozen=True)
class RingPedersen:
    """A verifier's ring-Pedersen parameters (CGGMP20, Definition 1.3): ``n`` a product of two safe primes and ``s,
    t`` in its group of squares with ``s = t^lambda``. The silo makes them (:func:`ring_pedersen`) and sends them to
    the server, which proves against them."""

    n: int
    s: int
    t: int


@dataclass(frozen=True)
class PaillierBlumProof:
    """CGGMP20 Figure 16: ``w`` of Jacobi symbol -1 and, per challenge ``y_i``, ``x_i^4 = (-1)^a_i w^b_i y_i`` and
    ``z_i^n = y_i`` (mod ``n``)."""

    w: int
    x: tuple[int, ...]
    a: tuple[int, ...]
    b: tuple[int, ...]
    z: tuple[int, ...]


@dataclass(frozen=True)
class NoSmallFactorProof:
    """CGGMP20 Figure 28: commitments ``P = s^p t^mu``, ``Q = s^q t^nu``, ``A``, ``B``, ``T`` and ``sigma``; responses
    ``z1 = alpha + e p``, ``z2 = beta + e q``, ``w1``, ``w2``, ``v`` (signed integers)."""

    P: int
    Q: int
    A: int
    B: int
    T: int
    sigma: int
    z1: int
    z2: int
    w1: int
    w2: int
    v: int


@dataclass(frozen=True)
class ModulusProof:
    """Both proofs for one modulus and one verifier's :class:`RingPedersen` parameters."""

    blum: PaillierBlumProof
    factors: NoSmallFactorProof


# ------------------------------------------------------------------------------------------ key generation --
def _random_prime(bits: int, *, blum: bool) -> int:
    """A uniformly drawn prime of exactly ``bits`` bits with its top two bits set (so a product of two has exactly
    twice as many bits), ``= 3 mod 4`` when ``blum``."""
    while True:
        candidate = secrets.randbits(bits) | (3 << (bits - 2)) | (3 if blum else 1)
        if gmpy2.is_prime(candidate, PRIME_ROUNDS):
            return candidate


def blum_paillier_keypair(key_bits: int, *, insecure_test_key: bool = False
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


def ring_pedersen(bits: int) -> RingPedersen:
    """A silo's ring-Pedersen parameters: ``n`` of ``bits`` bits, the product of two safe primes, ``t`` a random
    square and ``s = t^lambda`` for a random ``lambda``; the factors and ``lambda`` are dropped (the silo only
    verifies). At 2048 bits the safe primes take minutes; make them once per silo and keep them.

    Raises:
        ValueError: ``bits`` not an even number >= 64.
    """
    if isinstance(bits, bool) or not isinstance(bits, int) or bits < 64 or bits % 2:
        raise ValueError(f"bits must be an even integer >= 64, got {bits!r}")
    primes: list[int] = []
    while len(primes) < 2:  # one Miller-Rabin round filters both halves; the survivors get the full test
        half = secrets.randbits(bits // 2 - 1) | (3 << (bits // 2 - 3)) | 1
        if gmpy2.is_prime(half, 1) and gmpy2.is_prime(2 * half + 1, 1) and gmpy2.is_prime(half, PRIME_ROUNDS) \
                and gmpy2.is_prime(2 * half + 1, PRIME_ROUNDS):
            primes.append(2 * half + 1)
    n = primes[0] * primes[1]
    t = _powmod(_unit(n), 2, n)
    return RingPedersen(n=n, s=_powmod(t, secrets.randbelow(n), n), t=t)


def _powmod(base: int, exponent: int, modulus: int) -> int:
    """``base^exponent mod modulus`` by GMP (several times faster than ``pow`` at these sizes; a negative exponent
    inverts ``base`` first)."""
    return int(gmpy2.powmod(base, exponent, modulus))


def _unit(n: int) -> int:
    while True:
        value = secrets.randbelow(n)
        if value > 1 and math.gcd(value, n) == 1:
            return value


# ------------------------------------------------------------------------------------------- Fiat-Shamir --
def _encode(*parts: int | bytes) -> bytes:
    out = bytearray()
    for part in parts:
        raw = part if isinstance(part, bytes) else int(part).to_bytes((abs(part).bit_length() + 8) // 8, "big",
                                                                      signed=True)
        out += len(raw).to_bytes(4, "big") + raw
    return bytes(out)


def _hash_below(bound: int, label: bytes, transcript: bytes) -> int:
    """An integer in ``[0, bound)`` from SHA-256 of the transcript (128 extra bits: the bias is below 2^-128)."""
    need = bound.bit_length() + 128
    stream = b"".join(hashlib.sha256(_DOMAIN + label + counter.to_bytes(4, "big") + transcript).digest()
                      for counter in range((need + 255) // 256))
    return int.from_bytes(stream, "big") % bound


def _blum_challenges(n: int, w: int, context: bytes) -> list[int]:
    """The challenges ``y_i`` in ``Z_n^*`` of the Paillier-Blum proof (a ``y`` sharing a factor with ``n`` is
    skipped: it would factor ``n``)."""
    challenges: list[int] = []
    counter = 0
    while len(challenges) < BLUM_CHALLENGES:
        y = _hash_below(n, b"blum", _encode(n, w, context, counter))
        counter += 1
        if math.gcd(y, n) == 1:
            challenges.append(y)
        if counter > 4 * BLUM_CHALLENGES:
            raise ValueError("the modulus shares a factor with the challenges: it is not a product of two large primes")
    return challenges


def _factor_challenge(n: int, verifier: RingPedersen, commitments: tuple[int, ...], context: bytes) -> int:
    """The no-small-factor challenge ``e`` in ``[-2^l, 2^l]``."""
    transcript = _encode(n, verifier.n, verifier.s, verifier.t, *commitments, context)
    return _hash_below(2 ** (CHALLENGE_BITS + 1) + 1, b"factors", transcript) - 2**CHALLENGE_BITS


# ------------------------------------------------------------------------------------------------- proofs --
def prove_paillier_blum(p: int, q: int, *, context: bytes = b"") -> PaillierBlumProof:
    """CGGMP20 Figure 16 with Fiat-Shamir: ``n = p q`` is a Paillier-Blum modulus.

    Args:
        p, q: The distinct primes, both ``= 3 mod 4``.
        context: Bytes the proof is bound to (the session).

    Raises:
        ValueError: ``p`` or ``q`` not ``3 mod 4``, or equal.
    """
    if p % 4 != 3 or q % 4 != 3 or p == q:
        raise ValueError("a Paillier-Blum proof needs distinct primes p = q = 3 mod 4 (blum_paillier_keypair)")
    n, phi = p * q, (p - 1) * (q - 1)
    w = _unit(n)
    while gmpy2.jacobi(w, n) != -1:
        w = _unit(n)
    n_inverse = _powmod(n, -1, phi)
    root_p, root_q = ((p + 1) // 4) ** 2 % (p - 1), ((q + 1) // 4) ** 2 % (q - 1)
    xs, as_, bs, zs = [], [], [], []
    for y in _blum_challenges(n, w, context):
        for a, b in ((0, 0), (1, 0), (0, 1), (1, 1)):
            candidate = (-1) ** a * _powmod(w, b, n) * y % n
            if gmpy2.legendre(candidate, p) == 1 and gmpy2.legendre(candidate, q) == 1:
                break
        x_p, x_q = _powmod(candidate, root_p, p), _powmod(candidate, root_q, q)
        xs.append(int((x_p + p * ((x_q - x_p) * _powmod(p, -1, q) % q)) % n))
        as_.append(a)
        bs.append(b)
        zs.append(_powmod(y, n_inverse, n))
    return PaillierBlumProof(w=w, x=tuple(xs), a=tuple(as_), b=tuple(bs), z=tuple(zs))


def _signed(bound: int) -> int:
    """Uniform on ``[-bound, bound]`` (OS CSPRNG)."""
    return secrets.randbelow(2 * bound + 1) - bound


def prove_no_small_factor(p: int, q: int, verifier: RingPedersen, *, context: bytes = b"") -> NoSmallFactorProof:
    """CGGMP20 Figure 28 with Fiat-Shamir: both factors of ``n = p q`` are at most ``2^(l + e) sqrt(n)`` (so at
    least ``sqrt(n) / 2^(l + e + 2)``, :func:`smallest_factor_bits`), against the verifier's ring-Pedersen group."""
    n, (big_n, s, t) = p * q, (verifier.n, verifier.s, verifier.t)
    root, spread = math.isqrt(n), 2 ** (CHALLENGE_BITS + SLACK_BITS)
    alpha, beta = _signed(spread * root), _signed(spread * root)
    mu, nu = _signed(2**CHALLENGE_BITS * big_n), _signed(2**CHALLENGE_BITS * big_n)
    sigma = _signed(2**CHALLENGE_BITS * n * big_n)
    r = _signed(2**CHALLENGE_BITS * spread * n * big_n)
    x, y = _signed(2**CHALLENGE_BITS * spread * big_n), _signed(2**CHALLENGE_BITS * spread * big_n)

    def commit(exponent: int, randomness: int) -> int:  # the ring-Pedersen commitment s^exponent t^randomness
        return _powmod(s, exponent, big_n) * _powmod(t, randomness, big_n) % big_n

    commit_p, commit_q, commit_a, commit_b = commit(p, mu), commit(q, nu), commit(alpha, x), commit(beta, y)
    commit_t = _powmod(commit_q, alpha, big_n) * _powmod(t, r, big_n) % big_n
    e = _factor_challenge(n, verifier, (commit_p, commit_q, commit_a, commit_b, commit_t, sigma), context)
    return NoSmallFactorProof(P=commit_p, Q=commit_q, A=commit_a, B=commit_b, T=commit_t, sigma=sigma,
                              z1=alpha + e * p, z2=beta + e * q, w1=x + e * mu, w2=y + e * nu,
                              v=r + e * (sigma - nu * p))


def prove_modulus(p: int, q: int, verifier: RingPedersen, *, context: bytes = b"") -> ModulusProof:
    """Both proofs for ``n = p q`` (the server, once per silo: the second is against that silo's ``verifier``).

    Args:
        p, q: The server's Paillier primes (:func:`blum_paillier_keypair`).
        verifier: The silo's :class:`RingPedersen` parameters.
        context: Bytes both sides bind the proof to (the session; the silo's id).
    """
    return ModulusProof(blum=prove_paillier_blum(p, q, context=context),
                        factors=prove_no_small_factor(p, q, verifier, context=context))


# ------------------------------------------------------------------------------------------- verification --
def smallest_factor_bits(n: int) -> int:
    """The bits every prime factor of ``n`` has at least once :func:`verify_modulus` accepts it:
    ``floor(log2 sqrt(n)) - l - e - 2``.

    >>> smallest_factor_bits(2**3071 + 1)
    1277
    """
    return math.isqrt(n).bit_length() - 1 - CHALLENGE_BITS - SLACK_BITS - 2


def _check_unit(name: str, value: object, modulus: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < modulus \
            or math.gcd(value, modulus) != 1:
        raise ValueError(f"modulus proof: {name} must be a unit modulo its modulus, got {str(value)[:40]}")
    return value


def _check_signed(name: str, value: object, bound: int) -> int:
    """A response within ``[-bound, bound]``; the bound is the honest prover's range with one bit of slack, and it
    also keeps every exponentiation of the verifier to a size fixed by the moduli, not by the proof."""
    if isinstance(value, bool) or not isinstance(value, int) or abs(value) > bound:
        raise ValueError(f"modulus proof: {name} must be an integer in [-{bound.bit_length()} bits, +], got "
                         f"{str(value)[:40]}")
    return value


def verify_paillier_blum(n: int, proof: PaillierBlumProof, *, context: bytes = b"") -> None:
    """Check CGGMP20 Figure 16's proof: ``n`` odd and composite, ``z_i^n = y_i`` and ``x_i^4 = (-1)^a_i w^b_i y_i``.

    Raises:
        ValueError: Naming the first check that fails.
    """
    if n % 2 == 0 or gmpy2.is_prime(n, PRIME_ROUNDS):
        raise ValueError("modulus proof: the modulus must be odd and composite")
    w = _check_unit("w", proof.w, n)
    if gmpy2.jacobi(w, n) != -1:
        raise ValueError("modulus proof: w must have Jacobi symbol -1")
    fields = (proof.x, proof.a, proof.b, proof.z)
    if not all(isinstance(values, tuple) and len(values) == BLUM_CHALLENGES for values in fields):
        raise ValueError(f"modulus proof: x, a, b and z must hold {BLUM_CHALLENGES} values each")
    for i, y in enumerate(_blum_challenges(n, w, context)):
        a, b = proof.a[i], proof.b[i]
        if a not in (0, 1) or b not in (0, 1) or isinstance(a, bool) or isinstance(b, bool):
            raise ValueError(f"modulus proof: a and b must be 0 or 1, got {a!r:.10} and {b!r:.10}")
        if _powmod(_check_unit("z", proof.z[i], n), n, n) != y:
            raise ValueError(f"modulus proof: challenge {i} has no n-th root (gcd(n, phi(n)) != 1)")
        if _powmod(_check_unit("x", proof.x[i], n), 4, n) != (-1) ** a * _powmod(w, b, n) * y % n:
            raise ValueError(f"modulus proof: challenge {i} has no fourth root (n is not a Paillier-Blum modulus)")


def verify_no_small_factor(n: int, proof: NoSmallFactorProof, verifier: RingPedersen, *,
                           context: bytes = b"") -> None:
    """Check CGGMP20 Figure 28's proof against the verifier's own ring-Pedersen parameters.

    Raises:
        ValueError: Naming the first check that fails.
    """
    big_n, s, t = verifier.n, verifier.s, verifier.t
    commitments = tuple(_check_unit(name, getattr(proof, name), big_n) for name in ("P", "Q", "A", "B", "T"))
    spread, challenge = 2 ** (CHALLENGE_BITS + SLACK_BITS + 1), 2**CHALLENGE_BITS  # honest ranges, one bit over
    sigma = _check_signed("sigma", proof.sigma, challenge * n * big_n)
    z1, z2 = (_check_signed(name, getattr(proof, name), spread * math.isqrt(n)) for name in ("z1", "z2"))
    w1, w2 = (_check_signed(name, getattr(proof, name), challenge * spread * big_n) for name in ("w1", "w2"))
    v = _check_signed("v", proof.v, challenge * spread * n * big_n)
    e = _factor_challenge(n, verifier, (*commitments, sigma), context)
    commit_p, commit_q, commit_a, commit_b, commit_t = commitments
    big_r = _powmod(s, n, big_n) * _powmod(t, sigma, big_n) % big_n
    checks = (
        (_powmod(s, z1, big_n) * _powmod(t, w1, big_n), commit_a * _powmod(commit_p, e, big_n)),
        (_powmod(s, z2, big_n) * _powmod(t, w2, big_n), commit_b * _powmod(commit_q, e, big_n)),
        (_powmod(commit_q, z1, big_n) * _powmod(t, v, big_n), commit_t * _powmod(big_r, e, big_n)),
    )
    if not all(left % big_n == right % big_n for left, right in checks):
        raise ValueError("modulus proof: the factors' commitments do not open to the responses (a small factor?)")


def verify_modulus(n: int, proof: ModulusProof, verifier: RingPedersen, *, context: bytes = b"") -> None:
    """What a silo calls on the server's modulus before Protocol 1's step 1(a) accepts it: both proofs, and a
    factor bound of at least :data:`MIN_FACTOR_BITS` bits.

    Args:
        n: The server's Paillier modulus.
        proof: The server's :func:`prove_modulus` for this silo.
        verifier: This silo's own :class:`RingPedersen` parameters (made by the silo, never taken from the server).
        context: The bytes the server bound the proof to (the session; the silo's id).

    Raises:
        ValueError: The proof fails (the message says which check), or ``n`` is too small for the proof to bound
            its factors.
    """
    if isinstance(n, bool) or not isinstance(n, int) or smallest_factor_bits(n) < MIN_FACTOR_BITS:
        raise ValueError(f"modulus proof: the modulus must have at least "
                         f"{2 * (MIN_FACTOR_BITS + CHALLENGE_BITS + SLACK_BITS + 3) - 1} bits for the proof to bound "
                         f"its factors by {MIN_FACTOR_BITS} bits")
    verify_paillier_blum(n, proof.blum, context=context)
    verify_no_small_factor(n, proof.factors, verifier, context=context)
