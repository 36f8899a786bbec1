"""How silos agree on users without telling the server who they are: keyed pseudonyms and sealed histograms.

Matching users across silos: every silo replaces each patient id by ``HMAC-SHA256(K, id)`` under a key ``K`` that
the silos share and the server never gets (:func:`new_silo_key` makes one from the OS CSPRNG; hand it to every
silo out of band, as a file only the silo's SuperNode reads, mode 0600). Equal patient ids give equal pseudonyms
in every silo; without ``K`` a pseudonym says nothing about the id (HMAC is a PRF), so the server cannot test a
guessed patient id against it.

The users' ``n[s, u]`` (each silo's records per pseudonym, which the enhanced weights ``w_su = n_su / N_u`` of Eq. (3)
need) travel to the other silos *through* the server sealed with AES-256-GCM under a key derived from ``K``
(:func:`seal_histogram`): the server relays them and learns only their sizes (the number of distinct users of each
silo) and the number of users |U| that the silos report back. This relay does not hide ``n_su`` from the other
silos; with Protocol 1 (:mod:`uldp.flower.secure`) the sealed histograms carry only the pseudonyms (every count 1)
and the weights come from the protocol, so no silo learns another's ``n_su``.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from uldp.atomic import write_bytes_atomic

if TYPE_CHECKING:
    from collections.abc import Hashable, Iterable

#: Bytes of a silo key (256 bits) and of a pseudonym (SHA-256).
KEY_BYTES, PSEUDONYM_BYTES = 32, 32
_NONCE_BYTES = 12
_SEAL_LABEL = b"uldp.flower histogram seal v1"


def new_silo_key() -> bytes:
    """A fresh 256-bit key for the silos (``secrets.token_bytes``, the OS CSPRNG); never give it to the server."""
    return secrets.token_bytes(KEY_BYTES)


def check_key(key: object) -> bytes:
    """Return ``key`` if it is bytes of at least 32 bytes; else raise ``ValueError`` saying what is needed."""
    if not isinstance(key, (bytes, bytearray)) or len(key) < KEY_BYTES:
        size = len(key) if isinstance(key, (bytes, bytearray)) else type(key).__name__
        raise ValueError(f"a silo key must be at least {KEY_BYTES} random bytes (uldp.flower.new_silo_key()), "
                         f"got {size}")
    return bytes(key)


def pseudonymize(ids: Iterable[Hashable], key: bytes) -> list[str]:
    """The keyed pseudonym ``HMAC-SHA256(key, str(id))`` (hex) of every id, in order.

    Ids are compared as text (``str(id)``, UTF-8), so patient ``12`` and ``"12"`` are the same patient.

    Args:
        ids: Raw patient ids (any values with a stable ``str``).
        key: The silos' shared key (:func:`new_silo_key`).

    Returns:
        One 64-character hex pseudonym per id.

    Raises:
        ValueError: A key shorter than 32 bytes.

    Example:
        >>> a, b, c = pseudonymize(["P-1", "P-2", "P-1"], bytes(32))
        >>> a == c != b, len(a)
        (True, 64)
    """
    key = check_key(key)
    return [hmac.new(key, str(i).encode(), hashlib.sha256).hexdigest() for i in ids]


def _seal_key(key: bytes) -> bytes:
    return hmac.new(check_key(key), _SEAL_LABEL, hashlib.sha256).digest()


def seal_histogram(pseudonyms: np.ndarray, counts: np.ndarray, key: bytes, *, silo: str) -> bytes:
    """Seal a silo's ``(pseudonym, n_su)`` pairs for the other silos: AES-256-GCM, the silo name as associated data.

    Args:
        pseudonyms: ``[k]`` hex pseudonyms (distinct).
        counts: ``[k]`` record counts.
        key: The silos' shared key.
        silo: The sender's name (bound to the ciphertext: the server cannot pass one silo's off as another's).

    Returns:
        nonce | ciphertext (nonces from ``os.urandom``).
    """
    body = b"".join(bytes.fromhex(p) for p in pseudonyms) + np.asarray(counts, dtype="<i8").tobytes()
    nonce = os.urandom(_NONCE_BYTES)
    return nonce + AESGCM(_seal_key(key)).encrypt(nonce, body, silo.encode())


def open_histogram(sealed: bytes, key: bytes, *, silo: str) -> tuple[list[str], np.ndarray]:
    """Open :func:`seal_histogram`'s output: ``(pseudonyms, counts)``.

    Raises:
        ValueError: Tampered, sealed under another key or for another silo name, or malformed.
    """
    try:
        body = AESGCM(_seal_key(key)).decrypt(sealed[:_NONCE_BYTES], sealed[_NONCE_BYTES:], silo.encode())
    except (InvalidTag, ValueError) as error:
        raise ValueError(f"the histogram of silo {silo!r} does not open under this key (tampered, another key, or "
                         "another silo's)") from error
    entry = PSEUDONYM_BYTES + 8
    if len(body) % entry:
        raise ValueError(f"the histogram of silo {silo!r} has {len(body)} bytes, not a multiple of {entry}")
    k = len(body) // entry
    names = [body[i * PSEUDONYM_BYTES:(i + 1) * PSEUDONYM_BYTES].hex() for i in range(k)]
    counts = np.frombuffer(body[k * PSEUDONYM_BYTES:], dtype="<i8").astype(np.int64)
    if (counts < 1).any():
        raise ValueError(f"the histogram of silo {silo!r} has a count below 1")
    return names, counts


def write_key_file(path: str | os.PathLike) -> bytes:
    """Create a new silo key (:func:`new_silo_key`) in ``path`` as hex text, mode 0600, atomically; return it.

    Raises:
        ValueError: ``path`` exists already (a key is never overwritten).
    """
    path = Path(path)
    if path.exists():
        raise ValueError(f"key file {path} exists already; a key is never overwritten")
    key = new_silo_key()
    write_bytes_atomic(path, key.hex().encode() + b"\n", private=True)
    return key


def read_key_file(path: str | os.PathLike) -> bytes:
    """The silo key in ``path`` (hex text, as :func:`write_key_file` writes it).

    Raises:
        ValueError: Not hex, or shorter than 32 bytes.
    """
    text = Path(path).read_text().strip()
    try:
        key = bytes.fromhex(text)
    except ValueError as error:
        raise ValueError(f"key file {path} must hold the key as hex text") from error
    return check_key(key)
