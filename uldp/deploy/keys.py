"""Authentication of silos at the handshake: one master key at the server, one derived key per silo.

Flower's SuperNode authentication belongs to its SuperLink runtime, which this deployment does not use (see the
chapter), so the handshake carries its own: the server sends a fresh 32-byte nonce, the silo answers with
HMAC-SHA256 under its key of (nonce, silo id, configuration fingerprint), and the server recomputes it from the
master key. A silo without the right key, or claiming another silo's id, is refused. Keys come from the OS CSPRNG.
Confidentiality of the link is TLS's job (``--ssl-*`` options); this only proves who is on the other end.

>>> master = bytes(32)
>>> tag = authentication_tag(silo_key(master, 1), nonce=b"n", silo_id=1, config_fingerprint="f")
>>> tag == authentication_tag(silo_key(master, 2), nonce=b"n", silo_id=1, config_fingerprint="f")
False
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import struct
from pathlib import Path

from uldp.atomic import write_bytes_atomic
from uldp.checks import check_integer

MASTER_KEY_FILE = "master.key"


def silo_key(master_key: bytes, silo_id: int) -> bytes:
    """The authentication key of one silo, derived from the server's master key (HMAC-SHA256).

    The server keeps the master key and can derive every silo's key; each silo receives only its own.

    Raises:
        ValueError: if the master key is shorter than 16 bytes or the silo id is negative.
    """
    if len(master_key) < 16:
        raise ValueError(f"the master key must have at least 16 bytes, got {len(master_key)}")
    check_integer("silo id", silo_id, minimum=0)
    return hmac.new(master_key, b"uldp-silo-key" + struct.pack("<Q", silo_id), hashlib.sha256).digest()


def authentication_tag(key: bytes, *, nonce: bytes, silo_id: int, config_fingerprint: str) -> bytes:
    """HMAC-SHA256 proving a silo holds its key, bound to the server's fresh nonce, its id and the configuration."""
    message = nonce + struct.pack("<Q", silo_id) + config_fingerprint.encode()
    return hmac.new(key, message, hashlib.sha256).digest()


def write_keys(directory: str | Path, *, n_silos: int) -> list[Path]:
    """Draw a master key and write it with every silo's derived key as hex files readable by their owner only.

    Args:
        directory: Where to write ``master.key`` (for the server) and ``silo-<id>.key`` (one per silo).
        n_silos: Number of silos.

    Returns:
        The written paths, master first.

    Raises:
        ValueError: if ``n_silos`` < 1.
    """
    check_integer("--silos", n_silos)
    directory = Path(directory)
    master = secrets.token_bytes(32)
    paths = [directory / MASTER_KEY_FILE] + [directory / f"silo-{s}.key" for s in range(n_silos)]
    contents = [master] + [silo_key(master, s) for s in range(n_silos)]
    for path, key in zip(paths, contents):
        write_bytes_atomic(path, key.hex().encode() + b"\n", private=True)
    return paths
