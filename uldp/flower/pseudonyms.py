"""The silos' relay key: what the silos send each other through the server is sealed under it.

Every silo holds the same key ``K`` (:func:`new_silo_key` makes one from the OS CSPRNG; hand it to every silo out
of band, as a file only the silo's SuperNode reads, mode 0600, :func:`write_key_file`); the server never gets it.
The private set union that numbers the users (:mod:`uldp.secure.psu`, :mod:`uldp.flower.psu`) seals its relayed
lists with a key derived from ``K``, so the server relaying them learns only their sizes.

``K`` only seals. No patient id ever goes through a function keyed by ``K``: the earlier scheme, ``HMAC(K, id)`` as a
shared pseudonym, let any silo test guessed ids against another silo's pseudonyms (issue 30); the union's blinded
values need every silo's own secret exponent instead.
"""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import TYPE_CHECKING

from uldp.common.atomic import write_bytes_atomic

if TYPE_CHECKING:
    import os

#: Bytes of a silo key (256 bits).
KEY_BYTES = 32


def new_silo_key() -> bytes:
    """A fresh 256-bit key for the silos (``secrets.token_bytes``, the OS CSPRNG); never give it to the server."""
    return secrets.token_bytes(KEY_BYTES)


def check_key(key: object) -> bytes:
    """Return ``key`` if it is bytes of at least 32 bytes; else raise ``ValueError`` saying what is needed."""
    if not isinstance(key, (bytes, bytearray)) or len(key) < KEY_BYTES:
        size = len(key) if isinstance(key, (bytes, bytearray)) else type(key).__name__
        raise ValueError(
            f"a silo key must be at least {KEY_BYTES} random bytes (uldp.flower.new_silo_key()), "
            f"got {size}"
        )
    return bytes(key)


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
