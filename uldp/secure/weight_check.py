"""Beyond the paper: weights the server cannot inflate, a check the silos run jointly every round (Protocol 1 of
Section "Private weighting protocol", between step 2(a), the encrypted weights ``Enc(B_inv(N_u))``, and step 2(b)-(c),
the masked update that uses them).

Adversary. The paper's server is semi-honest (Section "Trust model and Assumptions"); this check is against a
*malicious* server, one that deviates from step 2(a): encrypting ``lambda B_inv(N_u)`` for one target user u makes
every silo weight u's delta by ``lambda n_su / N_u``, so u's clipped delta stands ``lambda`` times above the DP noise
in the decrypted aggregate (recovered to 3.6e-6 at lambda = 2^20 before this check). With the packed backend the
server can inflate the rescaled weight ``y_u`` the same way. The silos and the roles of the key directory are honest
here (the coefficients below are keyed by the seed R of step 1(c), sealed under the pairwise keys of step 1(b): the
check is as strong as that directory's authentication).

The check, after each silo holds the weight ciphertexts ``Enc(n_su w_u)`` it will use and before its update leaves:

1. each silo derives coefficients ``c_u`` uniform on ``[0, 2^128)`` from the seed R (which the server never sees),
   the round and the SHA-256 digest of the weights the server broadcast to it (:func:`coefficients`), and sends
   ``Enc(sum_u c_u n_su w_u + M_s)``, computed from the very ciphertexts its update will use, M_s its net pairwise
   mask (the masks cancel over the silos, so the server learns no silo's value; :func:`contribution`);
2. the server multiplies the |S| contributions, decrypts ``V = sum_u c_u N_u w_u`` and proves the decryption: it
   reveals the randomness r with ``c = (1 + n)^V r^n mod n^2`` (:func:`prove_decryption`), which fixes V since
   Paillier encryption is a bijection of ``Z_n x Z_n^*`` onto ``Z*_(n^2)``;
3. each silo finds its own contribution in the server's list, recomputes the product, checks the proof
   (:func:`verify_decryption`) and checks V against ``scale * sum_{u in T} c_u`` (T the round's sample; scale
   ``C_LCM`` for the paper's weights ``C_LCM / N_u``, exactly, mod n; ``2^g`` for the packed weights, within
   ``N_max sum_T c_u`` since each ``w_u`` is within 1 of ``2^g / N_u``: :func:`check_sum`). A failure aborts the
   round before any update is sent (:class:`uldp.secure.driver.ProtocolAbort` naming the check).

Soundness: let ``e_u = N_u w_u - scale b_u`` be the server's deviation, fixed before the silos draw c. The check
passes only if ``|sum_u c_u e_u| <= slack sum_T c_u``. Given the other coefficients, that leaves ``c_t`` of a target
with ``e_t != 0`` at most ``2 slack |U| 2^128 / |e_t| + 1`` of its ``2^128`` values: a pass probability of at most
``2^-128`` for the paper's weights (slack 0: ``c_t e_t`` must hit one residue mod n) and of at most
``2 N_max |U| / |e_t| + 2^-128`` for the packed ones, so a weight inflated by lambda (``e_t = (lambda - 1) 2^g``)
passes with probability at most ``2 N_max |U| / ((lambda - 1) 2^g)``: 2^-31 at lambda = 2 with N_max = 2000,
|U| = 100 and g = 50, and an inflation that passes surely is below ``N_max / 2^g`` relative, far below the noise.
A server that sends different weights to different silos makes their coefficients independent (the digest differs), and
their sum misses the expected value with the same probability. What the server learns: ``V``, a function of the fresh
c's and the sample only (nothing of the counts); the randomness r it reveals is a function of its own encryptions'
randomness.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

import gmpy2

if TYPE_CHECKING:
    from collections.abc import Sequence

    from uldp.secure.messages import EncryptedWeightsMessage, Message, WeightCheckProofMessage
    from uldp.secure.silo import Silo

#: Bits of the check's coefficients c_u: a deviation passes with probability about 2^-127.
COEFFICIENT_BITS = 128
#: The key-stream purpose of the coefficients and of the contributions' pairwise masks (apart from masks.PURPOSE_*).
PURPOSE_WEIGHT_CHECK = 16
#: The HKDF label of the coefficients' key (with the digest of the server's weights and the session appended).
LABEL = b"weight-check"


def weights_label(broadcast: bytes) -> bytes:
    """The coefficients' key label for the server's broadcast weights of the round (their SHA-256 digest)."""
    return LABEL + hashlib.sha256(broadcast).digest()


def contribution(bases: Sequence[int], coefficients: Sequence[int], mask: int, modulus: int) -> int:
    """``prod_u bases_u^(c_u) (1 + mask n) mod n^2``: ``Enc(sum_u c_u m_u + mask)`` for ``bases_u = Enc(m_u)``."""
    n_square = gmpy2.mpz(modulus) ** 2
    total = gmpy2.mpz(1)
    for base, coefficient in zip(bases, coefficients, strict=True):
        total = total * gmpy2.powmod(base, coefficient, n_square) % n_square
    return int(total * (1 + modulus * (mask % modulus)) % n_square)


def product(ciphertexts: Sequence[int], modulus: int) -> int:
    """The product of Paillier ciphertexts mod n^2 (the sum of their plaintexts)."""
    n_square = gmpy2.mpz(modulus) ** 2
    total = gmpy2.mpz(1)
    for ciphertext in ciphertexts:
        total = total * ciphertext % n_square
    return int(total)


def prove_decryption(ciphertext: int, plaintext: int, *, p: int, q: int) -> int:
    """The randomness r of ``ciphertext = (1 + n)^plaintext r^n mod n^2`` (n = p q), which the key holder alone can
    compute: ``r = (c (1 + n)^-m mod n)^(n^-1 mod phi(n)) mod n``."""
    n = p * q
    residue = ciphertext * (1 - plaintext * n) % (n * n) % n  # (1 + n)^-m = 1 - m n mod n^2
    return int(gmpy2.powmod(residue, gmpy2.invert(n, (p - 1) * (q - 1)), n))


def verify_decryption(ciphertext: int, plaintext: int, randomness: int, modulus: int) -> None:
    """Check a proof of correct decryption: ``(1 + n)^m r^n = c mod n^2`` with m in Z_n and r in Z_n^*.

    Raises:
        ValueError: naming the failed part of the proof.
    """
    if not 0 <= plaintext < modulus or not 0 < randomness < modulus:
        raise ValueError("the decryption proof's plaintext or randomness is outside Z_n")
    if gmpy2.gcd(randomness, modulus) != 1:
        raise ValueError("the decryption proof's randomness is not a unit mod n")
    n_square = modulus * modulus
    if (1 + plaintext * modulus) * gmpy2.powmod(
        randomness, modulus, n_square
    ) % n_square != ciphertext:
        raise ValueError(
            "the decryption proof fails: (1 + n)^m r^n is not the product of the contributions"
        )


def check_sum(
    plaintext: int, *, modulus: int, scale: int, slack: int, coefficient_sum: int
) -> None:
    """Check ``V = scale * sum_T c_u`` within ``slack * sum_T c_u`` (as signed residues mod n).

    Raises:
        ValueError: the weights are not what the counts imply, naming by how much.
    """
    difference = (plaintext - scale * coefficient_sum) % modulus
    if difference > modulus // 2:
        difference -= modulus
    if abs(difference) > slack * coefficient_sum:
        raise ValueError(
            f"the encrypted weights are not what the counts imply: sum_u c_u N_u w_u is off "
            f"scale * sum_u c_u by {abs(difference) / max(coefficient_sum, 1):.3g} per unit of c "
            f"(at most {slack} allowed); the server inflated or changed a weight"
        )


def silo_contribution(
    silo: Silo, message: EncryptedWeightsMessage, shared: Sequence[Message]
) -> tuple[int, list[int]]:
    """Step 1 of the check at one silo: its contribution ``Enc(sum_u c_u n_su w_u + M_s)`` from the weight
    ciphertexts its update will use (its backend's :meth:`~uldp.secure.backends.Backend.weight_bases`), and the
    round's coefficients c_u.

    Raises:
        ValueError: a backend without the check, another round's weights, or shares that fail their checks.
    """
    if not silo.backend.checks_weights:
        raise ValueError(f"the {silo.backend.name} backend has no weights check")
    silo.check_round(message)
    n, round_index = silo.modulus, message.round_index
    active = [u for u, c in enumerate(silo.counts) if c > 0]
    coefficients = silo.seed_elements(
        weights_label(silo.backend.broadcast(message, shared)),
        modulus=1 << COEFFICIENT_BITS,
        round_index=round_index,
        purpose=PURPOSE_WEIGHT_CHECK,
    )
    (mask,) = silo.net_masks(1, modulus=n, round_index=round_index, purpose=PURPOSE_WEIGHT_CHECK)
    value = contribution(
        silo.backend.weight_bases(silo, message, shared, active),
        [coefficients[u] for u in active],
        mask,
        n,
    )
    return value, coefficients


def verify(
    silo: Silo,
    message: EncryptedWeightsMessage,
    shared: Sequence[Message],
    proof: WeightCheckProofMessage,
) -> None:
    """Step 3 of the check at one silo: its own contribution in the server's list, the decryption proof of their
    product, and the sum against the round's sample.

    Raises:
        ValueError: naming the failed check.
    """
    own, coefficients = silo_contribution(silo, message, shared)
    n, config = silo.modulus, silo.config
    if proof.round_index != message.round_index:
        raise ValueError(
            f"weights check: the proof is for round {proof.round_index}, not {message.round_index}"
        )
    if len(proof.contributions) != config.n_silos or proof.contributions[silo.silo_id] != own:
        raise ValueError(
            f"weights check: the server's list of contributions does not hold silo {silo.silo_id}'s "
            f"at its place"
        )
    if len(proof.sampled) != config.n_users or set(proof.sampled) - {0, 1}:
        raise ValueError(f"weights check: the sample must be {config.n_users} bytes of 0 or 1")
    verify_decryption(product(proof.contributions, n), proof.plaintext, proof.randomness, n)
    check_sum(
        proof.plaintext,
        modulus=n,
        scale=silo.backend.weight_scale(),
        slack=silo.backend.weight_slack(),
        coefficient_sum=sum(c for c, b in zip(coefficients, proof.sampled, strict=True) if b),
    )
