"""Keys of Protocol 1, step 1(a)-(c): Paillier (server), X25519 + HKDF pairwise keys (silos), AEAD for the seed R.

- Paillier via ``phe`` (with gmpy2), 3072-bit by default (about 128-bit security), its primes Blum (``p = q = 3 mod
  4``) so that the server can prove the modulus well formed (:mod:`uldp.secure.modulus_proof`). Keys under 2048 bits
  are refused unless ``insecure_test_key=True`` is passed, which only the test-suite does.
- Each silo has an X25519 key pair; the public keys travel through the server (step 1(b)). The shared secret of a
  pair goes through HKDF-SHA256 bound to the session and the (ordered) pair of silo ids, giving independent keys
  for the AEAD channel and for the additive-mask stream.
- ChaCha20-Poly1305 protects what one silo sends another through the server (the seed R, shared weight powers):
  the relaying server can neither read nor alter it.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from uldp.secure.config import DEFAULT_KEY_BITS, MIN_KEY_BITS, check_key_bits
from uldp.secure.modulus_proof import blum_paillier_keypair

if TYPE_CHECKING:
    from phe import paillier

__all__ = [
    "DEFAULT_KEY_BITS",
    "MIN_KEY_BITS",
    "check_key_bits",
]  # re-exported: the key-size rule lives in config

AEAD_NONCE_BYTES = 12
X25519_PUBLIC_BYTES = 32


def generate_paillier_keypair(
    key_bits: int = DEFAULT_KEY_BITS, *, insecure_test_key: bool = False
) -> tuple[paillier.PaillierPublicKey, paillier.PaillierPrivateKey]:
    """Protocol 1, step 1(a): the server's Paillier key pair, ``n = p q`` of exactly ``key_bits`` bits (Theorem 4's
    bounds assume the full length) with Blum primes ``p = q = 3 mod 4`` from the OS CSPRNG, as the modulus proof
    needs (:func:`uldp.secure.modulus_proof.blum_paillier_keypair`).

    Args:
        key_bits: bit length of n (3072 by default).
        insecure_test_key: allow keys under 2048 bits (tests only).

    Returns:
        (public key, private key) of phe; the private key's p and q enable CRT decryption and the modulus proof.

    Raises:
        ValueError: see :func:`check_key_bits`.
    """
    return blum_paillier_keypair(key_bits, insecure_test_key=insecure_test_key)


def session_id(modulus: int) -> bytes:
    """A 32-byte identifier of the protocol session: SHA-256 of the Paillier modulus (binds derived keys to it)."""
    return hashlib.sha256(
        b"uldp/session/" + int(modulus).to_bytes((modulus.bit_length() + 7) // 8, "big")
    ).digest()


@dataclass(frozen=True)
class PairwiseKeys:
    """Keys one silo shares with another (Protocol 1, step 1(b)): an AEAD key and a mask-stream key."""

    aead: bytes
    masks: bytes


def new_dh_private_key() -> X25519PrivateKey:
    """A fresh X25519 private key (OS CSPRNG)."""
    return X25519PrivateKey.generate()


def dh_public_bytes(private_key: X25519PrivateKey) -> bytes:
    """The 32-byte raw public key to send to the server."""
    return private_key.public_key().public_bytes_raw()


def derive_pairwise_keys(
    private_key: X25519PrivateKey, peer_public: bytes, *, own_id: int, peer_id: int, session: bytes
) -> PairwiseKeys:
    """Protocol 1, step 1(b): X25519 shared secret -> HKDF-SHA256 -> independent AEAD and mask keys.

    Both silos of a pair get the same keys (the info string uses the ordered pair of ids).

    Raises:
        ValueError: if the peer's public key is malformed or the two ids are equal.
    """
    if own_id == peer_id:
        raise ValueError(f"a silo has no pairwise key with itself (id {own_id})")
    if len(peer_public) != X25519_PUBLIC_BYTES:
        raise ValueError(f"an X25519 public key has 32 bytes, got {len(peer_public)}")
    secret = private_key.exchange(X25519PublicKey.from_public_bytes(peer_public))
    low, high = sorted((own_id, peer_id))
    material = HKDF(
        algorithm=hashes.SHA256(),
        length=64,
        salt=session,
        info=b"uldp/pairwise/" + low.to_bytes(4, "big") + high.to_bytes(4, "big"),
    ).derive(secret)
    return PairwiseKeys(aead=material[:32], masks=material[32:])


def derive_key(secret: bytes, *, label: bytes) -> bytes:
    """HKDF-SHA256 of a shared secret (e.g. the seed R) to a 32-byte key for one purpose ``label``."""
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=b"uldp/" + label).derive(
        secret
    )


def seal(key: bytes, plaintext: bytes, *, associated_data: bytes) -> tuple[bytes, bytes]:
    """ChaCha20-Poly1305 encryption with a random 96-bit nonce. Returns (nonce, ciphertext with tag)."""
    nonce = os.urandom(AEAD_NONCE_BYTES)
    return nonce, ChaCha20Poly1305(key).encrypt(nonce, plaintext, associated_data)


def open_sealed(key: bytes, nonce: bytes, ciphertext: bytes, *, associated_data: bytes) -> bytes:
    """Decrypt and authenticate a sealed payload.

    Raises:
        ValueError: if the payload, nonce or header was tampered with (or the wrong key is used).
    """
    if len(nonce) != AEAD_NONCE_BYTES:
        raise ValueError(f"an AEAD nonce has {AEAD_NONCE_BYTES} bytes, got {len(nonce)}")
    try:
        return ChaCha20Poly1305(key).decrypt(nonce, ciphertext, associated_data)
    except InvalidTag as error:
        raise ValueError(
            "sealed message failed authentication (tampered, mis-routed or wrong key)"
        ) from error
