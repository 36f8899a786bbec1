"""Beyond the paper: a proof that the server's Paillier modulus is well formed, checked by a silo before it uses it.

Protocol 1 (step 1(a)) has each silo encrypt under the server's Paillier modulus ``n`` and blind with units of
``Z_n``. The paper's server is semi-honest; a malicious one could send an ``n`` of many small primes, and then
``gcd(B(N_u), n)`` reveals the odd part of every user's record count N_u (issue 30, item 9). A silo accepts ``n``
only with a non-interactive proof (Fiat-Shamir with SHA-256) of the two statements of Canetti, Gennaro, Goldfeder,
Makriyannis and Peled 2020 ("UC non-interactive, proactive, threshold ECDSA with identifiable aborts", CCS 2020;
eprint 2021/060), :func:`verify_modulus`; :mod:`uldp.secure.protocol` wires it into Protocol 1's set-up:

- **Paillier-Blum modulus** (CGGMP20's Figure 16, :func:`prove_paillier_blum`): ``n`` is odd and composite, every
  challenge ``y`` has an ``n``-th root (so ``gcd(n, phi(n)) = 1``: ``n`` is square-free) and one of ``y, -y, wy,
  -wy`` has a fourth root (so ``n`` has at most two prime factors). A modulus that is not a product of two distinct
  primes passes each of the ``m`` challenges with probability at most 1/2.
- **No small factor** (CGGMP20's Figure 28, :func:`prove_no_small_factor`): in the silo's own ring-Pedersen group
  (:class:`RingPedersen`, a modulus whose factors only the silo knew, then forgot), the server commits to ``p`` and
  ``q`` and shows ``|p|, |q| <= 2^(l + e + 1) sqrt(n)`` for the challenge bits ``l`` and slack ``e``, so both
  factors exceed ``sqrt(n) / 2^(l + e + 2)`` (:func:`smallest_factor_bits`). Its soundness rests on the strong RSA
  assumption in the silo's group, which is why the silo makes that group itself: the server proves once per silo,
  against that silo's parameters, and first checks the silo's ring-Pedersen proof (CGGMP20's Figure 17,
  :func:`verify_ring_pedersen`: ``s`` lies in ``<t>``), without which its commitments to ``p`` and ``q`` could leak
  them.

The sizes are :class:`ProofParameters`; the defaults (:data:`CGGMP20`) are CGGMP20's security parameters: ``m = 80``
challenges for CGGMP20 Figures 16 and 17, ``l = 256`` challenge bits and ``e = 2 l = 512`` slack bits for
CGGMP20 Figure 28, with a 2048-bit ring-Pedersen modulus of two safe primes. Keys under 2048 bits, which only tests
may use, get smaller sizes (:func:`proof_parameters`).

What it buys: the server's ``n`` is a product of two distinct primes of at least ``smallest_factor_bits(n)`` bits
each (765 for a 3072-bit key), so ``gcd`` with any value a silo sends reveals nothing, the blinds ``r_u`` are
uniform on a group with no small factors, and Theorem 4's correctness (decoding within the precision P), which
assumes such an ``n``, holds. The proofs are zero-knowledge: they reveal nothing about ``p`` and ``q``.

What a malicious server can still do: everything a malicious server can do with a well-formed key. It still chooses
which users are sampled and which weights it encrypts (a weight other than ``B_inv(N_u)`` scales that user's update,
unless the silos' check of :mod:`uldp.secure.weight_check` refuses it), whether and to whom it relays the silos'
messages, in which order, and when it aborts; it decrypts what it likes with its own key (Protocol 1's pairwise masks
are what hide one silo's update). It learns ``|U|`` and ``|S|`` as before. The proof says nothing about the server's key
size (the silo checks it, step 1(a)) or about how the server drew its primes beyond their number and size.

The prover's key: :func:`blum_paillier_keypair` (:mod:`uldp.secure.primes`). Secrets and blinds: the OS CSPRNG.

>>> test_sizes = proof_parameters(1024)
>>> silo, silo_proof = ring_pedersen(test_sizes.pedersen_bits, rounds=test_sizes.blum_challenges)
>>> verify_ring_pedersen(silo, silo_proof, parameters=test_sizes)  # the server, before it proves
>>> public, private = blum_paillier_keypair(1024, insecure_test_key=True)
>>> proof = prove_modulus(private.p, private.q, silo, context=b"session 1", parameters=test_sizes)
>>> verify_modulus(public.n, proof, silo, context=b"session 1", parameters=test_sizes)  # the silo, before it uses n
"""

from __future__ import annotations

import hashlib
import math
import secrets
from dataclasses import dataclass

import gmpy2

from uldp.secure.config import MIN_KEY_BITS
from uldp.secure.primes import (
    PRIME_ROUNDS,
    blum_paillier_keypair as blum_paillier_keypair,  # re-exported
    safe_prime,
)


@dataclass(frozen=True)
class ProofParameters:
    """The sizes of the proofs; the defaults are CGGMP20's security parameters (:data:`CGGMP20`).

    Attributes:
        blum_challenges: ``m`` of the Paillier-Blum proof (CGGMP20 Figure 16) and of the ring-Pedersen proof
            (CGGMP20 Figure 17): a
            bad modulus, or an ``s`` outside ``<t>``, survives each challenge with probability at most 1/2
            (CGGMP20: m = 80).
        challenge_bits: ``l`` of the no-small-factor proof (CGGMP20 Figure 28): its challenge ``e`` lies in
            ``[-2^l, 2^l]``
            (soundness 2^-l; CGGMP20: l = 256, the size of their curve's order).
        slack_bits: ``e`` of Figure 28 (CGGMP20: e = 2 l = 512): the masks exceed what they hide by this many bits
            (zero-knowledge to within about 2^-l), and the factors are bounded by ``sqrt(n) / 2^(l + e + 2)``.
        pedersen_bits: Bits of each silo's ring-Pedersen modulus ``N^`` (a product of two safe primes; 2048, the
            strength of the smallest Paillier key a run may use).
        min_factor_bits: :func:`verify_modulus` refuses a modulus for which the proof bounds its factors below
            this many bits.
    """

    blum_challenges: int = 80
    challenge_bits: int = 256
    slack_bits: int = 512
    pedersen_bits: int = 2048
    min_factor_bits: int = 128


#: CGGMP20's parameters (m = 80, l = 256, e = 2 l), with a 2048-bit ring-Pedersen modulus: every key a run may use.
CGGMP20 = ProofParameters()


def proof_parameters(key_bits: int) -> ProofParameters:
    """The proof sizes for a Paillier key of ``key_bits`` bits: :data:`CGGMP20` for every key of 2048 bits or more
    (all that a run allows without ``insecure_test_key``); smaller test keys get sizes scaled to them (16
    challenges, ``l = key_bits / 16``, ``e = 2 l``, a 256-bit ring-Pedersen modulus, factors of at least 64 bits),
    so tests stay fast.
    Both the server and each silo derive them from the session's key size, so a server cannot weaken them without
    asking for a test key, which a silo refuses unless its operator allowed test keys.

    >>> proof_parameters(3072) == CGGMP20, proof_parameters(512).challenge_bits
    (True, 32)
    """
    if key_bits >= MIN_KEY_BITS:
        return CGGMP20
    return ProofParameters(
        blum_challenges=16,
        challenge_bits=key_bits // 16,
        slack_bits=key_bits // 8,
        pedersen_bits=256,
        min_factor_bits=64,
    )


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
class RingPedersenProof:
    """CGGMP20 Figure 17: ``s`` lies in the group ``t`` generates (the silo knows ``lambda`` with ``s = t^lambda``),
    so the server's commitments ``s^p t^mu`` hide ``p``: per challenge bit ``e_i``, ``t^z_i = A_i s^e_i``."""

    commitments: tuple[int, ...]
    responses: tuple[int, ...]


#: A silo's verifier parameters with their proof, as :func:`ring_pedersen` makes them (public; kept across sessions).
Verifier = tuple[RingPedersen, RingPedersenProof]


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


def ring_pedersen(bits: int, *, rounds: int = CGGMP20.blum_challenges) -> Verifier:
    """A silo's ring-Pedersen parameters and their proof (CGGMP20 Figure 17, Fiat-Shamir): ``n`` of ``bits`` bits, the
    product of two safe primes, ``t`` a random square and ``s = t^lambda`` for a random ``lambda``; the factors and
    ``lambda`` are dropped once the proof is made (the silo only verifies). Public, and reusable across sessions (as
    CGGMP20's auxiliary set-up is): each modulus proof binds the session's context. Its two safe primes come from
    :func:`safe_prime` (about a second for a 2048-bit ``n`` here, benchmarks/modulus_proof.py).

    Raises:
        ValueError: ``bits`` not an even number >= 64, or ``rounds`` not a positive integer.
    """
    if isinstance(bits, bool) or not isinstance(bits, int) or bits < 64 or bits % 2:
        raise ValueError(f"bits must be an even integer >= 64, got {bits!r}")
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
        raise ValueError(f"rounds must be a positive integer, got {rounds!r}")
    primes = [safe_prime(bits // 2), safe_prime(bits // 2)]
    while primes[0] == primes[1]:
        primes[1] = safe_prime(bits // 2)
    n, phi = primes[0] * primes[1], (primes[0] - 1) * (primes[1] - 1)
    t = _powmod(_unit(n), 2, n)
    secret = secrets.randbelow(phi)
    verifier = RingPedersen(n=n, s=_powmod(t, secret, n), t=t)
    masks = [secrets.randbelow(phi) for _ in range(rounds)]
    commitments = tuple(_powmod(t, a, n) for a in masks)
    bits_e = _ring_pedersen_challenges(verifier, commitments)
    return verifier, RingPedersenProof(
        commitments=commitments,
        responses=tuple((a + e * secret) % phi for a, e in zip(masks, bits_e, strict=True)),
    )


def verify_ring_pedersen(
    verifier: RingPedersen, proof: RingPedersenProof, *, parameters: ProofParameters = CGGMP20
) -> None:
    """What the server checks before it proves against a silo's parameters (CGGMP20 Figure 17): ``N^`` odd, of
    ``parameters.pedersen_bits`` bits, ``s`` and ``t`` units, and ``t^z_i = A_i s^e_i`` for every challenge bit (an
    ``s`` outside ``<t>`` passes each with probability at most 1/2; with one, the commitments to ``p`` and ``q``
    could leak them).

    Raises:
        ValueError: Naming the first check that fails.
    """
    big_n = verifier.n
    if (
        isinstance(big_n, bool)
        or not isinstance(big_n, int)
        or big_n.bit_length() != parameters.pedersen_bits
        or big_n % 2 == 0
    ):
        raise ValueError(
            f"ring-Pedersen proof: N^ must be an odd {parameters.pedersen_bits}-bit modulus, got "
            f"{str(big_n)[:40]}"
        )
    s, t = (_check_unit(name, getattr(verifier, name), big_n) for name in ("s", "t"))
    fields = (proof.commitments, proof.responses)
    if not all(
        isinstance(values, tuple) and len(values) == parameters.blum_challenges for values in fields
    ):
        raise ValueError(
            f"ring-Pedersen proof: commitments and responses must hold {parameters.blum_challenges} "
            f"values each"
        )
    commitments = tuple(_check_unit("A", value, big_n) for value in proof.commitments)
    for i, (a, z, e) in enumerate(
        zip(
            commitments,
            proof.responses,
            _ring_pedersen_challenges(verifier, commitments),
            strict=True,
        )
    ):
        if isinstance(z, bool) or not isinstance(z, int) or not 0 <= z < big_n:
            raise ValueError(f"ring-Pedersen proof: response {i} must be an integer in [0, N^)")
        if _powmod(t, z, big_n) != a * _powmod(s, e, big_n) % big_n:
            raise ValueError(
                f"ring-Pedersen proof: challenge {i} fails (s is not shown to lie in <t>)"
            )


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
        raw = (
            part
            if isinstance(part, bytes)
            else int(part).to_bytes((abs(part).bit_length() + 8) // 8, "big", signed=True)
        )
        out += len(raw).to_bytes(4, "big") + raw
    return bytes(out)


def _hash_below(bound: int, label: bytes, transcript: bytes) -> int:
    """An integer in ``[0, bound)`` from SHA-256 of the transcript (128 extra bits: the bias is below 2^-128)."""
    need = bound.bit_length() + 128
    stream = b"".join(
        hashlib.sha256(_DOMAIN + label + counter.to_bytes(4, "big") + transcript).digest()
        for counter in range((need + 255) // 256)
    )
    return int.from_bytes(stream, "big") % bound


def _ring_pedersen_challenges(verifier: RingPedersen, commitments: tuple[int, ...]) -> list[int]:
    """The challenge bits ``e_i`` of CGGMP20 Figure 17."""
    value = _hash_below(
        2 ** len(commitments),
        b"ring-pedersen",
        _encode(verifier.n, verifier.s, verifier.t, *commitments),
    )
    return [(value >> i) & 1 for i in range(len(commitments))]


def _blum_challenges(n: int, w: int, context: bytes, count: int) -> list[int]:
    """The ``count`` challenges ``y_i`` in ``Z_n^*`` of the Paillier-Blum proof (a ``y`` sharing a factor with ``n``
    is skipped: it would factor ``n``)."""
    challenges: list[int] = []
    counter = 0
    while len(challenges) < count:
        y = _hash_below(n, b"blum", _encode(n, w, context, counter))
        counter += 1
        if math.gcd(y, n) == 1:
            challenges.append(y)
        if counter > 4 * count:
            raise ValueError(
                "modulus proof: the modulus shares a factor with many challenges (it has small factors)"
            )
    return challenges


def _factor_challenge(
    n: int,
    verifier: RingPedersen,
    commitments: tuple[int, ...],
    context: bytes,
    challenge_bits: int,
) -> int:
    """The no-small-factor challenge ``e`` in ``[-2^l, 2^l]``."""
    transcript = _encode(n, verifier.n, verifier.s, verifier.t, *commitments, context)
    return _hash_below(2 ** (challenge_bits + 1) + 1, b"factors", transcript) - 2**challenge_bits


# ------------------------------------------------------------------------------------------------- proofs --
def prove_paillier_blum(
    p: int, q: int, *, context: bytes = b"", parameters: ProofParameters = CGGMP20
) -> PaillierBlumProof:
    """CGGMP20 Figure 16 with Fiat-Shamir: ``n = p q`` is a Paillier-Blum modulus.

    Args:
        p, q: The distinct primes, both ``= 3 mod 4``.
        context: Bytes the proof is bound to (the session and the silo).
        parameters: The proof's sizes (``blum_challenges``).

    Raises:
        ValueError: ``p`` or ``q`` not ``3 mod 4``, or equal.
    """
    if p % 4 != 3 or q % 4 != 3 or p == q:
        raise ValueError(
            "a Paillier-Blum proof needs distinct primes p = q = 3 mod 4 (blum_paillier_keypair)"
        )
    n, phi = p * q, (p - 1) * (q - 1)
    w = _unit(n)
    while gmpy2.jacobi(w, n) != -1:
        w = _unit(n)
    n_inverse = _powmod(n, -1, phi)
    root_p, root_q = ((p + 1) // 4) ** 2 % (p - 1), ((q + 1) // 4) ** 2 % (q - 1)
    xs, as_, bs, zs = [], [], [], []
    for y in _blum_challenges(n, w, context, parameters.blum_challenges):
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


def prove_no_small_factor(
    p: int,
    q: int,
    verifier: RingPedersen,
    *,
    context: bytes = b"",
    parameters: ProofParameters = CGGMP20,
) -> NoSmallFactorProof:
    """CGGMP20 Figure 28 with Fiat-Shamir, its masks' ranges as there: both factors of ``n = p q`` are at most
    ``2^(l + e + 1) sqrt(n)`` (so at least ``sqrt(n) / 2^(l + e + 2)``, :func:`smallest_factor_bits`), against the
    verifier's ring-Pedersen group. The verifier's ``s`` must lie in ``<t>`` (:func:`verify_ring_pedersen`), or the
    commitments may leak ``p`` and ``q``."""
    n, (big_n, s, t) = p * q, (verifier.n, verifier.s, verifier.t)
    challenge, spread = (
        2**parameters.challenge_bits,
        2 ** (parameters.challenge_bits + parameters.slack_bits),
    )
    alpha, beta = _signed(spread * math.isqrt(n)), _signed(spread * math.isqrt(n))
    mu, nu = _signed(challenge * big_n), _signed(challenge * big_n)
    sigma = _signed(challenge * n * big_n)
    r = _signed(spread * n * big_n)
    x, y = _signed(spread * big_n), _signed(spread * big_n)

    def commit(
        exponent: int, randomness: int
    ) -> int:  # the ring-Pedersen commitment s^exponent t^randomness
        return _powmod(s, exponent, big_n) * _powmod(t, randomness, big_n) % big_n

    commit_p, commit_q, commit_a, commit_b = (
        commit(p, mu),
        commit(q, nu),
        commit(alpha, x),
        commit(beta, y),
    )
    commit_t = _powmod(commit_q, alpha, big_n) * _powmod(t, r, big_n) % big_n
    e = _factor_challenge(
        n,
        verifier,
        (commit_p, commit_q, commit_a, commit_b, commit_t, sigma),
        context,
        parameters.challenge_bits,
    )
    return NoSmallFactorProof(
        P=commit_p,
        Q=commit_q,
        A=commit_a,
        B=commit_b,
        T=commit_t,
        sigma=sigma,
        z1=alpha + e * p,
        z2=beta + e * q,
        w1=x + e * mu,
        w2=y + e * nu,
        v=r + e * (sigma - nu * p),
    )


def prove_modulus(
    p: int,
    q: int,
    verifier: RingPedersen,
    *,
    context: bytes = b"",
    parameters: ProofParameters = CGGMP20,
) -> ModulusProof:
    """Both proofs for ``n = p q`` (the server, once per silo: the second is against that silo's ``verifier``).

    Args:
        p, q: The server's Paillier primes (:func:`blum_paillier_keypair`).
        verifier: The silo's :class:`RingPedersen` parameters (checked first with :func:`verify_ring_pedersen`).
        context: Bytes both sides bind the proof to (the session; the silo's id and fresh nonce).
        parameters: The proofs' sizes (:func:`proof_parameters` of the key size).
    """
    return ModulusProof(
        blum=prove_paillier_blum(p, q, context=context, parameters=parameters),
        factors=prove_no_small_factor(p, q, verifier, context=context, parameters=parameters),
    )


# ------------------------------------------------------------------------------------------- verification --
def smallest_factor_bits(n: int, parameters: ProofParameters = CGGMP20) -> int:
    """The bits every prime factor of ``n`` has at least once :func:`verify_modulus` accepts it:
    ``floor(log2 sqrt(n)) - l - e - 2``.

    >>> smallest_factor_bits(2**3071 + 1)
    765
    """
    return math.isqrt(n).bit_length() - 1 - parameters.challenge_bits - parameters.slack_bits - 2


def _check_unit(name: str, value: object, modulus: int) -> int:
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or not 0 < value < modulus
        or math.gcd(value, modulus) != 1
    ):
        raise ValueError(
            f"modulus proof: {name} must be a unit modulo its modulus, got {str(value)[:40]}"
        )
    return value


def _check_signed(name: str, value: object, bound: int) -> int:
    """A response within ``[-bound, bound]``; the bound is the honest prover's range with one bit of slack, and it
    also keeps every exponentiation of the verifier to a size fixed by the moduli, not by the proof."""
    if isinstance(value, bool) or not isinstance(value, int) or abs(value) > bound:
        raise ValueError(
            f"modulus proof: {name} must be an integer in [-{bound.bit_length()} bits, +], got "
            f"{str(value)[:40]}"
        )
    return value


def verify_paillier_blum(
    n: int, proof: PaillierBlumProof, *, context: bytes = b"", parameters: ProofParameters = CGGMP20
) -> None:
    """Check CGGMP20 Figure 16's proof: ``n`` odd and composite, ``z_i^n = y_i`` and ``x_i^4 = (-1)^a_i w^b_i y_i``.

    Raises:
        ValueError: Naming the first check that fails.
    """
    if n % 2 == 0 or gmpy2.is_prime(n, PRIME_ROUNDS):
        raise ValueError("modulus proof: the modulus must be odd and composite")
    w = _check_unit("w", proof.w, n)
    if gmpy2.jacobi(w, n) != -1:
        raise ValueError("modulus proof: w must have Jacobi symbol -1")
    count = parameters.blum_challenges
    if not all(
        isinstance(values, tuple) and len(values) == count
        for values in (proof.x, proof.a, proof.b, proof.z)
    ):
        raise ValueError(f"modulus proof: x, a, b and z must hold {count} values each")
    for i, y in enumerate(_blum_challenges(n, w, context, count)):
        a, b = proof.a[i], proof.b[i]
        if a not in (0, 1) or b not in (0, 1) or isinstance(a, bool) or isinstance(b, bool):
            raise ValueError(f"modulus proof: a and b must be 0 or 1, got {a!r:.10} and {b!r:.10}")
        if _powmod(_check_unit("z", proof.z[i], n), n, n) != y:
            raise ValueError(f"modulus proof: challenge {i} has no n-th root (gcd(n, phi(n)) != 1)")
        if _powmod(_check_unit("x", proof.x[i], n), 4, n) != (-1) ** a * _powmod(w, b, n) * y % n:
            raise ValueError(
                f"modulus proof: challenge {i} has no fourth root (n is not a Paillier-Blum modulus)"
            )


def verify_no_small_factor(
    n: int,
    proof: NoSmallFactorProof,
    verifier: RingPedersen,
    *,
    context: bytes = b"",
    parameters: ProofParameters = CGGMP20,
) -> None:
    """Check CGGMP20 Figure 28's proof against the verifier's own ring-Pedersen parameters.

    Raises:
        ValueError: Naming the first check that fails.
    """
    big_n, s, t = verifier.n, verifier.s, verifier.t
    commitments = tuple(
        _check_unit(name, getattr(proof, name), big_n) for name in ("P", "Q", "A", "B", "T")
    )
    # the honest prover's ranges (CGGMP20 Figure 28), one bit over: z = mask + e * factor exceeds the mask's range a
    # little
    challenge, spread = (
        2**parameters.challenge_bits,
        2 ** (parameters.challenge_bits + parameters.slack_bits + 1),
    )
    sigma = _check_signed("sigma", proof.sigma, challenge * n * big_n)
    z1, z2 = (
        _check_signed(name, getattr(proof, name), spread * math.isqrt(n)) for name in ("z1", "z2")
    )
    w1, w2 = (_check_signed(name, getattr(proof, name), spread * big_n) for name in ("w1", "w2"))
    v = _check_signed("v", proof.v, spread * n * big_n)
    e = _factor_challenge(n, verifier, (*commitments, sigma), context, parameters.challenge_bits)
    commit_p, commit_q, commit_a, commit_b, commit_t = commitments
    big_r = _powmod(s, n, big_n) * _powmod(t, sigma, big_n) % big_n
    checks = (
        (_powmod(s, z1, big_n) * _powmod(t, w1, big_n), commit_a * _powmod(commit_p, e, big_n)),
        (_powmod(s, z2, big_n) * _powmod(t, w2, big_n), commit_b * _powmod(commit_q, e, big_n)),
        (_powmod(commit_q, z1, big_n) * _powmod(t, v, big_n), commit_t * _powmod(big_r, e, big_n)),
    )
    if not all(left % big_n == right % big_n for left, right in checks):
        raise ValueError(
            "modulus proof: the factors' commitments do not open to the responses (a small factor?)"
        )


def verify_modulus(
    n: int,
    proof: ModulusProof,
    verifier: RingPedersen,
    *,
    context: bytes = b"",
    parameters: ProofParameters = CGGMP20,
) -> None:
    """What a silo calls on the server's modulus before Protocol 1 uses it (after step 1(a)): both proofs, and a
    factor bound of at least ``parameters.min_factor_bits`` bits.

    Args:
        n: The server's Paillier modulus.
        proof: The server's :func:`prove_modulus` for this silo.
        verifier: This silo's own :class:`RingPedersen` parameters (made by the silo, never taken from the server).
        context: The bytes the server bound the proof to (the session; the silo's id and nonce).
        parameters: The proofs' sizes (:func:`proof_parameters` of the key size).

    Raises:
        ValueError: The proof fails (the message says which check), or ``n`` is too small for the proof to bound
            its factors.
    """
    floor = parameters.min_factor_bits
    if isinstance(n, bool) or not isinstance(n, int) or smallest_factor_bits(n, parameters) < floor:
        raise ValueError(
            f"modulus proof: the modulus must have at least "
            f"{2 * (floor + parameters.challenge_bits + parameters.slack_bits + 3) - 1} bits for the "
            f"proof to bound its factors by {floor} bits"
        )
    verify_paillier_blum(n, proof.blum, context=context, parameters=parameters)
    verify_no_small_factor(n, proof.factors, verifier, context=context, parameters=parameters)
