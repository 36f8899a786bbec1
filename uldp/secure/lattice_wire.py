"""SEAL's serialisation for the lattice backend (:mod:`uldp.secure.lattice`): objects to and from bytes, and the
uncompressed bytes of a ciphertext built from its residues.

TenSEAL's bindings save and load through a path only, so through a file in ``/dev/shm`` (memory) where there is one.
"""

from __future__ import annotations

import os
import struct
import tempfile
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Sequence

    import numpy as np


def _scratch() -> str:
    """A RAM-backed directory for SEAL's path-based serialisation when there is one."""
    return (
        "/dev/shm"
        if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK)
        else tempfile.gettempdir()
    )


def to_bytes(sealed_object: Any) -> bytes:
    """SEAL's serialisation of a ciphertext, a seeded ciphertext or a key (its ``save(path)``) as bytes."""
    with tempfile.NamedTemporaryFile(dir=_scratch()) as handle:
        sealed_object.save(handle.name)
        return handle.read()


def _load(sealed_object: Any, context: Any, data: bytes) -> None:
    """SEAL's ``load(context, path)`` of ``data`` into ``sealed_object`` (SEAL checks sizes and residues)."""
    with tempfile.NamedTemporaryFile(dir=_scratch()) as handle:
        handle.write(data)
        handle.flush()
        sealed_object.load(context, handle.name)


_SEAL_VERSION = (4, 3)


def _header(total: int) -> bytes:
    """SEAL's 16-byte serialisation header (magic 0xA15E, no compression)."""
    return struct.pack("<HBBBBHQ", 0xA15E, 16, *_SEAL_VERSION, 0, 0, total)


def _raw_ciphertext_bytes(polys: np.ndarray, parms_id: Sequence[int]) -> bytes:
    """SEAL's uncompressed bytes of a coefficient-form ciphertext with the residues ``polys`` [size, #primes, N]."""
    size, primes, degree = polys.shape
    data = polys.astype("<u8").tobytes()
    array = _header(16 + 8 + len(data)) + struct.pack("<Q", polys.size) + data
    body = (
        struct.pack("<4Q", *parms_id)
        + struct.pack("<B", 0)
        + struct.pack("<3Q", size, degree, primes)
        + struct.pack("<d", 1.0)
        + struct.pack("<Q", 1)
        + array
    )
    return _header(16 + len(body)) + body
