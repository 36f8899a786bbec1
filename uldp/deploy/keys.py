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

from uldp.common.atomic import write_bytes_atomic
from uldp.common.checks import check_integer

MASTER_KEY_FILE = "master.key"


#: Shortest accepted key (bytes); ``write_keys`` draws 32.
MIN_KEY_BYTES = 16


def check_master_key(key: object, what: str = "the master key") -> bytes:
    """Return ``key`` if it is bytes of at least :data:`MIN_KEY_BYTES` (checked when the server starts).

    Raises:
        ValueError: naming the length found.
    """
    if not isinstance(key, bytes) or len(key) < MIN_KEY_BYTES:
        found = f"{len(key)} bytes" if isinstance(key, bytes) else type(key).__name__
        raise ValueError(
            f"{what} must have at least {MIN_KEY_BYTES} bytes (from `uldp deploy keys`), got {found}"
        )
    return key


def silo_key(master_key: bytes, silo_id: int) -> bytes:
    """The authentication key of one silo, derived from the server's master key (HMAC-SHA256).

    The server keeps the master key and can derive every silo's key; each silo receives only its own.

    Raises:
        ValueError: if the master key is shorter than 16 bytes or the silo id is not an integer >= 0 (bools too).
    """
    check_master_key(master_key)
    check_integer("silo id", silo_id, minimum=0, maximum=2**64 - 1)
    return hmac.new(
        master_key, b"uldp-silo-key" + struct.pack("<Q", silo_id), hashlib.sha256
    ).digest()


def authentication_tag(key: bytes, *, nonce: bytes, silo_id: int, config_fingerprint: str) -> bytes:
    """HMAC-SHA256 proving a silo holds its key, bound to the server's fresh nonce, its id and the configuration."""
    message = nonce + struct.pack("<Q", silo_id) + config_fingerprint.encode()
    return hmac.new(key, message, hashlib.sha256).digest()


#: Most silos ``write_keys`` makes keys for.
MAX_SILOS = 10_000


def write_keys(directory: str | Path, *, n_silos: int, force: bool = False) -> list[Path]:
    """Draw a master key and write it with every silo's derived key as hex files readable by their owner only.

    Args:
        directory: Where to write ``master.key`` (for the server) and ``silo-<id>.key`` (one per silo).
        n_silos: Number of silos.
        force: Replace existing key files (a new master key invalidates every silo key made from the old one).

    Returns:
        The written paths, master first.

    Raises:
        ValueError: if ``n_silos`` is not in 1..:data:`MAX_SILOS`, or a key file exists and ``force`` is false.
    """
    check_integer("--silos", n_silos, maximum=MAX_SILOS)
    directory = Path(directory)
    paths = [directory / MASTER_KEY_FILE] + [directory / f"silo-{s}.key" for s in range(n_silos)]
    existing = [path for path in paths if path.exists()]
    if existing and not force:
        raise ValueError(
            f"{existing[0]} exists ({len(existing)} key file(s) in {directory}); replacing the master "
            f"key invalidates every silo key made from it: pass --force to replace them, or choose "
            f"another --out"
        )
    master = secrets.token_bytes(32)
    contents = [master] + [silo_key(master, s) for s in range(n_silos)]
    for path, key in zip(paths, contents, strict=True):
        write_bytes_atomic(path, key.hex().encode() + b"\n", private=True)
    return paths
