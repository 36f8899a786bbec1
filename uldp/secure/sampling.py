"""A user sample the server cannot see: the silos agree on a secret seed and draw each round's sample from it
(beyond the paper; issue 41 item 1).

Lemma 4's amplification by sub-sampling (ULDP-AVG/SGD with user sampling at rate q) holds against an adversary who
does not know which users a round sampled. In the paper's Protocol 1 the server draws the sample and sends it, so the
amplified epsilon is not the epsilon against the server (its paragraph "Private user-level sub-sampling" says so and
sketches a fix with verifiable sampling and oblivious transfer). Here the silos draw it among themselves:

1. **A seed the silos agree on.** With the masked sum (:mod:`uldp.secure.masked_sum`) each silo draws 32 bytes from
   the OS CSPRNG and sends them to every other silo sealed with ChaCha20-Poly1305 under a key derived from the
   pair's mask key (:func:`sealing_key`; the pairwise keys authenticated by the roster, :mod:`uldp.secure.roster`);
   the seed is SHA-256 of every silo's contribution in silo order and the session id (:func:`agreed_seed`). Every
   silo sends its contribution before it receives the others' (one exchange), so no silo chooses the seed alone;
   the server relays only ciphertexts of fixed length. In Protocol 1 the silos already share a secret the server
   never sees, the seed R of step 1(c) (drawn by silo 0, sealed under the pairwise keys), and the sampling key is
   derived from it (:meth:`uldp.secure.protocol.Silo.sampling_key`).
2. **The same sample in every silo.** User u is in round t's sample iff ``PRF(seed, t, u) < q`` (:func:`sample_users`:
   the ChaCha20 keystream of the seed with the round in the nonce, 8 bytes per user read as an integer below 2^64,
   compared with ``floor(q 2^64)``): independent Bernoulli(q) draws for every user and round (to 2^-64), computed
   alike by every silo from q of its own policy, never from the server.
3. **Unsampled users add zero.** A silo leaves them out of its update: with Protocol 1 the driver zeroes their
   clipped deltas before the weighted sum (:class:`uldp.secure.driver.SiloDriver` with ``sample_rate``) and the
   server encrypts the weights of every user (it is not told the sample), so the decrypted sum is
   ``sum_s (sum_u 1[u sampled] w_su delta_su + noise_s)`` within P, exactly the plain round on the silos' sample.

What the server learns. Everything it receives is: the silos' DH keys and attestations, the sealed contributions
(ciphertexts of fixed length under keys it does not have), and each round's masked (or encrypted and masked)
updates, uniform whatever the updates; then the decoded sum. None of it depends on the sample except through the
decoded sum, which is the noisy aggregate that Lemma 4's amplified epsilon is about. It is not told the sample's
size either (nothing sends it). It cannot recompute the sample: that needs the seed, a hash of secrets it never
sees. A malicious server can still stop the run, or (Protocol 1) encrypt a zero weight for a user, which only
removes that user from every sample.

>>> seed = agreed_seed([bytes(32), bytes([1]) * 32], session=bytes(32))
>>> first = sample_users(seed, round_index=1, n_users=10_000, q=0.25)
>>> bool(abs(first.mean() - 0.25) < 0.02), bool((first == sample_users(seed, round_index=2, n_users=10_000,
...                                                                      q=0.25)).all())
(True, False)
"""

from __future__ import annotations

import hashlib
import os
from typing import TYPE_CHECKING

import numpy as np

from uldp.common.checks import check_integer, check_rate
from uldp.secure import keys
from uldp.secure.masks import PURPOSE_SAMPLE, KeyStream
from uldp.secure.messages import SealedMessage

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

#: Bytes of a silo's contribution to the seed, and of the seed.
SEED_BYTES = 32
#: The purpose of a sealed contribution (the AEAD header; Protocol 1's sealed payloads use 1 and 2).
SEALED_CONTRIBUTION = 3
_SCALE = 2.0**64


def new_contribution() -> bytes:
    """A silo's contribution to the seed: 32 bytes from the OS CSPRNG."""
    return os.urandom(SEED_BYTES)


def sealing_key(pair_key: bytes) -> bytes:
    """The AEAD key of the contributions between a pair, derived (HKDF) from the pair's mask key."""
    return keys.derive_key(pair_key, label=b"sampling-seed")


def seal_contribution(
    pair_key: bytes, contribution: bytes, *, sender: int, recipient: int
) -> SealedMessage:
    """Step 1: ``contribution`` sealed for ``recipient`` (the header, sender and recipient, authenticated)."""
    header = SealedMessage(sender, recipient, 0, SEALED_CONTRIBUTION, b"", b"")
    nonce, ciphertext = keys.seal(
        sealing_key(pair_key), contribution, associated_data=header.associated_data()
    )
    return SealedMessage(sender, recipient, 0, SEALED_CONTRIBUTION, nonce, ciphertext)


def open_contributions(
    messages: Sequence[SealedMessage], *, own_id: int, pair_keys: Mapping[int, bytes]
) -> dict[int, bytes]:
    """Step 1: the contribution of every other silo, one sealed message from each.

    Raises:
        ValueError: a message for another silo or of another purpose, a peer missing or repeated, a contribution of
            the wrong length, or one that fails authentication (tampered, or sealed under another key).
    """
    opened: dict[int, bytes] = {}
    for message in messages:
        if (
            message.recipient != own_id
            or message.purpose != SEALED_CONTRIBUTION
            or message.round_index != 0
            or message.sender not in pair_keys
            or message.sender in opened
        ):
            raise ValueError(
                f"silo {own_id}: a sealed contribution from {message.sender} to {message.recipient} "
                f"(purpose {message.purpose}) is not one it expects"
            )
        contribution = keys.open_sealed(
            sealing_key(pair_keys[message.sender]),
            message.nonce,
            message.ciphertext,
            associated_data=message.associated_data(),
        )
        if len(contribution) != SEED_BYTES:
            raise ValueError(
                f"silo {message.sender}'s contribution has {len(contribution)} bytes, not {SEED_BYTES}"
            )
        opened[message.sender] = contribution
    missing = sorted(set(pair_keys) - set(opened))
    if missing:
        raise ValueError(f"silo {own_id}: no sampling contribution from silo(s) {missing}")
    return opened


def agreed_seed(contributions: Sequence[bytes], *, session: bytes) -> bytes:
    """The seed: SHA-256 of a label, the session id and every silo's contribution in silo order."""
    if any(len(c) != SEED_BYTES for c in contributions):
        raise ValueError(f"each contribution has {SEED_BYTES} bytes")
    return hashlib.sha256(b"uldp/user-sampling/v1" + session + b"".join(contributions)).digest()


def sample_users(seed: bytes, *, round_index: int, n_users: int, q: float) -> np.ndarray:
    """Round ``round_index``'s user sample (Lemma 4's Poisson sampling at rate q), the same in every silo.

    Args:
        seed: The silos' 32-byte secret (:func:`agreed_seed`, or Protocol 1's sampling key).
        round_index: The round t (1-based, as the server numbers them).
        n_users: |U|.
        q: The silos' sampling rate (from their policy).

    Returns:
        Bool [n_users]: ``PRF(seed, t, u) < floor(q 2^64)``.

    Raises:
        ValueError: a seed that is not 32 bytes, a round or |U| out of range, or q outside (0, 1].
    """
    check_integer("round_index", round_index, minimum=1, maximum=2**64 - 1)
    check_integer("n_users", n_users, minimum=1, maximum=2**31)
    rate = check_rate("q", q)
    if len(seed) != SEED_BYTES:
        raise ValueError(f"a sampling seed has {SEED_BYTES} bytes, got {len(seed)}")
    if rate == 1:
        return np.ones(n_users, dtype=bool)
    stream = KeyStream(seed, round_index=round_index, purpose=PURPOSE_SAMPLE)
    draws = np.frombuffer(stream.read(8 * n_users), dtype="<u8")
    return draws < np.uint64(int(rate * _SCALE))  # rate < 1: the threshold fits 64 bits
