"""SEAL's serialisation for the lattice backend (:mod:`uldp.secure.lattice`): objects to and from bytes, and the
uncompressed bytes of a ciphertext or plaintext built from its coefficients, and a ciphertext's coefficients read back.

TenSEAL's bindings save and load through a path only, so through a file in ``/dev/shm`` (memory) where there is one.
"""

from __future__ import annotations

import math
import os
import struct
import tempfile
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from collections.abc import Sequence


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


def _raw_ciphertext_bytes(
    polys: np.ndarray, parms_id: Sequence[int], *, ntt_form: bool = False
) -> bytes:
    """SEAL's uncompressed bytes of a ciphertext with the residues ``polys`` [size, #primes, N], in coefficient form
    or (``ntt_form``) in NTT form."""
    size, primes, degree = polys.shape
    data = polys.astype("<u8").tobytes()
    array = _header(16 + 8 + len(data)) + struct.pack("<Q", polys.size) + data
    body = (
        struct.pack("<4Q", *parms_id)
        + struct.pack("<B", int(ntt_form))
        + struct.pack("<3Q", size, degree, primes)
        + struct.pack("<d", 1.0)
        + struct.pack("<Q", 1)
        + array
    )
    return _header(16 + len(body)) + body


def _raw_plaintext_bytes(coefficients: np.ndarray) -> bytes:
    """SEAL's uncompressed bytes of a coefficient-form plaintext with these N coefficients (each below t)."""
    data = coefficients.astype("<u8").tobytes()
    array = _header(16 + 8 + len(data)) + struct.pack("<Q", coefficients.size) + data
    body = (
        struct.pack("<4Q", 0, 0, 0, 0)
        + struct.pack("<Q", coefficients.size)
        + struct.pack("<d", 1.0)
    )
    return _header(16 + len(body) + len(array)) + body + array


def _zstd_raw_content(frame: bytes) -> bytes | None:
    """The content of a zstd frame made only of raw and RLE blocks (what zstd writes for uniform data), else None."""
    if frame[:4] != b"\x28\xb5\x2f\xfd":
        return None
    descriptor, position = frame[4], 5
    single = (descriptor >> 5) & 1
    position += (0 if single else 1) + (0, 1, 2, 4)[descriptor & 3]
    position += ((1 if single else 0), 2, 4, 8)[descriptor >> 6]
    parts = []
    while True:
        header = int.from_bytes(frame[position : position + 3], "little")
        position += 3
        kind, size = (header >> 1) & 3, header >> 3
        if kind == 0:
            parts.append(frame[position : position + size])
            position += size
        elif kind == 1:
            parts.append(frame[position : position + 1] * size)
            position += 1
        else:
            return None
        if header & 1:
            return b"".join(parts)


def ciphertext_residues(ciphertext: Any, data: bytes) -> np.ndarray:
    """A coefficient-form ciphertext's residues, uint64 [size, #primes, N], from its SEAL bytes ``data``.

    SEAL saves through zstd, which stores uniform coefficients as raw blocks: read them from the frame; a frame with
    compressed blocks (never seen for ciphertexts) is read coefficient by coefficient instead.
    """
    shape = (ciphertext.size(), ciphertext.coeff_modulus_size(), ciphertext.poly_modulus_degree())
    count = math.prod(shape)
    mode = data[5] if len(data) > 5 else -1
    content = data[16:] if mode == 0 else _zstd_raw_content(data[16:]) if mode == 2 else None
    if content is not None and len(content) >= 8 * count:
        return np.frombuffer(content[len(content) - 8 * count :], dtype="<u8").reshape(shape)
    array = ciphertext.dyn_array()  # pragma: no cover - zstd compressed a ciphertext
    return np.fromiter(map(array.at, range(count)), dtype=np.uint64, count=count).reshape(shape)
