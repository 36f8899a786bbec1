"""uldp.secure.modulus_proof: a silo accepts the server's Paillier modulus only with proofs that it is a product of
two large primes (CGGMP20's Paillier-Blum and no-small-factor proofs); small keys, as every secure test."""

from __future__ import annotations

import math
from dataclasses import replace

import gmpy2
import pytest

from uldp.secure import modulus_proof, primes
from uldp.secure.modulus_proof import (
    CGGMP20,
    blum_paillier_keypair,
    proof_parameters,
    prove_modulus,
    prove_paillier_blum,
    ring_pedersen,
    smallest_factor_bits,
    verify_modulus,
    verify_paillier_blum,
    verify_ring_pedersen,
)

SIZES = proof_parameters(
    1024
)  # the test keys' sizes (m = 16, l = 64, e = 128, a 256-bit ring-Pedersen modulus)
SILO, SILO_PROOF = ring_pedersen(SIZES.pedersen_bits, rounds=SIZES.blum_challenges)
PUBLIC, PRIVATE = blum_paillier_keypair(1024, insecure_test_key=True)
PROOF = prove_modulus(PRIVATE.p, PRIVATE.q, SILO, context=b"session", parameters=SIZES)


def blum_primes(count: int, bits: int) -> list[int]:
    return [primes._random_prime(bits, blum=True) for _ in range(count)]


def cheating_blum_proof(primes: list[int], context: bytes) -> modulus_proof.PaillierBlumProof:
    """The best a prover can do for a modulus of several primes: n-th roots exist (distinct primes), and for each
    challenge it takes the sign and w that make a square modulo the most primes, then fourth roots where it can."""
    n = math.prod(primes)
    w = next(v for v in range(2, n) if gmpy2.jacobi(v, n) == -1)
    inverse = pow(n, -1, math.lcm(*(p - 1 for p in primes)))
    xs, as_, bs, zs = [], [], [], []
    for y in modulus_proof._blum_challenges(n, w, context, SIZES.blum_challenges):
        a, b = max(
            ((a, b) for a in (0, 1) for b in (0, 1)),
            key=lambda ab: sum(
                gmpy2.legendre((-1) ** ab[0] * w ** ab[1] * y, p) == 1 for p in primes
            ),
        )
        candidate = (-1) ** a * w**b * y % n
        roots = [pow(candidate, ((p + 1) // 4) ** 2, p) for p in primes]
        crt = sum(
            root * (n // p) * pow(n // p, -1, p) for root, p in zip(roots, primes, strict=True)
        )
        xs.append(crt % n)
        as_.append(a)
        bs.append(b)
        zs.append(pow(y, inverse, n))
    return modulus_proof.PaillierBlumProof(w=w, x=tuple(xs), a=tuple(as_), b=tuple(bs), z=tuple(zs))


def test_an_honest_modulus_is_accepted_and_only_in_its_context():
    verify_modulus(PUBLIC.n, PROOF, SILO, context=b"session", parameters=SIZES)
    assert smallest_factor_bits(PUBLIC.n, SIZES) == 317 >= SIZES.min_factor_bits
    with pytest.raises(ValueError, match="modulus proof"):
        verify_modulus(PUBLIC.n, PROOF, SILO, context=b"another session", parameters=SIZES)
    with pytest.raises(ValueError, match="modulus proof"):  # another silo's group
        verify_modulus(
            PUBLIC.n,
            PROOF,
            ring_pedersen(SIZES.pedersen_bits)[0],
            context=b"session",
            parameters=SIZES,
        )


def test_the_defaults_are_cggmp20s_and_only_test_keys_get_smaller_sizes():
    assert (CGGMP20.blum_challenges, CGGMP20.challenge_bits, CGGMP20.slack_bits) == (80, 256, 512)
    assert proof_parameters(2048) == proof_parameters(3072) == CGGMP20
    assert smallest_factor_bits(2**3071 + 1) == 765
    assert proof_parameters(512).challenge_bits == 32 and proof_parameters(512).pedersen_bits == 256


def test_a_silos_ring_pedersen_parameters_are_checked_before_the_server_proves():
    """CGGMP20 Figure 17: with an s outside <t> the commitments s^p t^mu could leak p; the server refuses it."""
    verify_ring_pedersen(SILO, SILO_PROOF, parameters=SIZES)
    outside = replace(SILO, s=SILO.n - SILO.s)  # -s is no square, so it is not in <t>
    with pytest.raises(ValueError, match=r"challenge \d+ fails"):
        verify_ring_pedersen(outside, SILO_PROOF, parameters=SIZES)
    with pytest.raises(ValueError, match="odd 2048-bit modulus"):
        verify_ring_pedersen(SILO, SILO_PROOF)  # the default sizes want a 2048-bit N^
    with pytest.raises(ValueError, match="16 values"):
        verify_ring_pedersen(
            SILO, replace(SILO_PROOF, responses=SILO_PROOF.responses[1:]), parameters=SIZES
        )


def test_the_gcd_attack_works_on_a_smooth_modulus_and_a_silo_refuses_that_modulus():
    """Issue 30 item 9: with n a product of small primes, gcd(B(N_u), n) = gcd(r_u N_u, n) reveals the small odd
    factors of every N_u; a silo that verifies the modulus never blinds under such an n."""
    primes = blum_primes(16, 64)
    smooth = math.prod(primes)
    counts = [3 * 7, primes[0] * 2, 5]
    blinded = [modulus_proof._unit(smooth) * count % smooth for count in counts]
    assert [math.gcd(b, smooth) for b in blinded] == [math.gcd(c, smooth) for c in counts]
    assert (
        math.gcd(blinded[1], smooth) == primes[0]
    )  # this user's count shares the server's chosen prime
    forged = replace(PROOF, blum=cheating_blum_proof(primes, b"session"))
    with pytest.raises(ValueError, match="no fourth root"):
        verify_modulus(smooth, forged, SILO, context=b"session", parameters=SIZES)
    assert all(
        math.gcd(b, PUBLIC.n) == 1 for b in (pow(3, 5, PUBLIC.n) * c % PUBLIC.n for c in counts)
    )


def test_an_unbalanced_blum_modulus_passes_the_first_proof_and_fails_the_second():
    """Two primes p = 3 mod 4 make a Paillier-Blum modulus whatever their sizes; only the no-small-factor proof
    refuses a 160-bit factor (the honest prover's response z2 = beta + e q is then out of range)."""
    small, large = blum_primes(1, 160)[0], blum_primes(1, 864)[0]
    prove = prove_modulus(small, large, SILO, context=b"session", parameters=SIZES)
    verify_paillier_blum(small * large, prove.blum, context=b"session", parameters=SIZES)
    with pytest.raises(ValueError, match="z2 must be an integer in"):
        verify_modulus(small * large, prove, SILO, context=b"session", parameters=SIZES)


@pytest.mark.parametrize(
    "change, message",
    [
        (
            lambda p: replace(p, blum=replace(p.blum, a=(2, *p.blum.a[1:]))),
            "a and b must be 0 or 1",
        ),
        (lambda p: replace(p, blum=replace(p.blum, x=p.blum.x[:-1])), "must hold 16 values"),
        (
            lambda p: replace(p, blum=replace(p.blum, z=(1, *p.blum.z[1:]))),
            "challenge 0 has no n-th root",
        ),
        (lambda p: replace(p, blum=replace(p.blum, w=PUBLIC.n)), "w must be a unit"),
        (
            lambda p: replace(p, factors=replace(p.factors, v=p.factors.v * 2**10_000)),
            "v must be an integer in",
        ),
        (
            lambda p: replace(p, factors=replace(p.factors, P=p.factors.P * 2 % SILO.n)),
            "do not open",
        ),
        (lambda p: replace(p, factors=replace(p.factors, T=0)), "T must be a unit"),
    ],
)
def test_a_tampered_proof_is_refused_by_name(change, message):
    with pytest.raises(ValueError, match=message):
        verify_modulus(PUBLIC.n, change(PROOF), SILO, context=b"session", parameters=SIZES)


def test_bad_inputs_are_named():
    with pytest.raises(ValueError, match="at least 517 bits"):
        verify_modulus(PUBLIC.n % 2**500 | 1, PROOF, SILO, parameters=SIZES)
    with pytest.raises(
        ValueError, match="at least 1797 bits"
    ):  # CGGMP20's sizes bound nothing on a 1024-bit key
        verify_modulus(PUBLIC.n, PROOF, SILO)
    with pytest.raises(ValueError, match="p = q = 3 mod 4"):
        prove_paillier_blum(5, 7)
    with pytest.raises(ValueError, match="bits must be an even integer >= 64"):
        ring_pedersen(63)


@pytest.mark.parametrize("bits", [32, 33, 96, 512])
def test_safe_prime_is_a_safe_prime_of_exactly_the_bits_asked_with_its_top_two_bits_set(bits):
    for _ in range(3):
        p = primes.safe_prime(bits)
        assert p.bit_length() == bits and p >> (bits - 2) == 3
        assert gmpy2.is_prime(p, 50) and gmpy2.is_prime((p - 1) // 2, 50)


def test_safe_prime_sieve_keeps_every_safe_prime_of_its_window(monkeypatch):
    """The sieve drops only halves h where h or 2h + 1 has a factor below 2^16: from a fixed start of 39-bit halves
    (all above the sieve's primes), the safe prime it finds is the first that a slow search finds."""
    for raw in (12345, 987654321, 5):
        monkeypatch.setattr(primes.secrets, "randbits", lambda bits, raw=raw: raw)
        found = primes.safe_prime(40)
        half = raw | (3 << 37) | 1
        while not (gmpy2.is_prime(half, 50) and gmpy2.is_prime(2 * half + 1, 50)):
            half += 2
        assert found == 2 * half + 1


@pytest.mark.parametrize("bits", [31, 3.0, True])
def test_safe_prime_refuses_bad_sizes(bits):
    with pytest.raises(ValueError, match="bits must be an integer >= 32"):
        primes.safe_prime(bits)
