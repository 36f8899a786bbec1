"""Typed messages of Protocol 1 with an explicit byte format (no pickle) and validation.

Wire format of every message: ``b"ULDP"`` | version (1 byte) | type tag (1 byte) | fields | SHA-256 digest of
everything before it (32 bytes). Fields are, by kind: ``u32`` (4 bytes big-endian), ``bytes`` (u32 length + data),
``int`` (u32 length + big-endian magnitude), ``ints`` (u32 count + that many ``int``), ``bytes_list`` (u32 count +
that many ``bytes``). Parsing checks the magic, version, tag, every length, the digest and that nothing trails.
The digest catches corruption and truncation; authenticity of the server links is the transport's job (TLS),
while silo-to-silo payloads relayed by the server are sealed with ChaCha20-Poly1305 (:mod:`uldp.secure.keys`).
Receivers further check ranges against the key (:meth:`Message.check_elements`).

>>> message = BlindedHistogramMessage(silo=1, values=(5, 0, 7))
>>> parse_message(message.to_bytes()) == message
True
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass, fields
from typing import ClassVar

MAGIC = b"ULDP"
VERSION = 1
_DIGEST_BYTES = 32
_U32 = struct.Struct(">I")


class _Reader:
    """Sequential reader over a message body that fails with a clear error on truncation."""

    def __init__(self, data: bytes) -> None:
        self._data = memoryview(data)
        self._offset = 0

    def take(self, size: int) -> bytes:
        if self._offset + size > len(self._data):
            raise ValueError("malformed message: truncated field")
        chunk = bytes(self._data[self._offset : self._offset + size])
        self._offset += size
        return chunk

    def u32(self) -> int:
        return _U32.unpack(self.take(4))[0]

    def done(self) -> None:
        if self._offset != len(self._data):
            raise ValueError(f"malformed message: {len(self._data) - self._offset} unexpected trailing bytes")


def _write(kind: str, value: object) -> bytes:
    if kind == "u32":
        if not isinstance(value, int) or not 0 <= value < 2**32:
            raise ValueError(f"u32 field out of range: {value!r}")
        return _U32.pack(value)
    if kind == "bytes":
        return _U32.pack(len(value)) + bytes(value)  # type: ignore[arg-type]
    if kind == "int":
        number = int(value)  # type: ignore[call-overload]
        if number < 0:
            raise ValueError("int fields carry non-negative integers")
        raw = number.to_bytes((number.bit_length() + 7) // 8, "big")
        return _U32.pack(len(raw)) + raw
    if kind == "ints":
        return _U32.pack(len(value)) + b"".join(_write("int", v) for v in value)  # type: ignore[arg-type]
    if kind == "bytes_list":
        return _U32.pack(len(value)) + b"".join(_write("bytes", v) for v in value)  # type: ignore[arg-type]
    raise AssertionError(kind)


def _read(kind: str, reader: _Reader) -> object:
    if kind == "u32":
        return reader.u32()
    if kind == "bytes":
        return reader.take(reader.u32())
    if kind == "int":
        return int.from_bytes(reader.take(reader.u32()), "big")
    if kind in ("ints", "bytes_list"):
        count = reader.u32()
        item = "int" if kind == "ints" else "bytes"
        return tuple(_read(item, reader) for _ in range(count))
    raise AssertionError(kind)


@dataclass(frozen=True)
class Message:
    """Base of all protocol messages: serialisation from the per-class field kinds ``KINDS``."""

    TAG: ClassVar[int] = 0
    KINDS: ClassVar[tuple[str, ...]] = ()

    def to_bytes(self) -> bytes:
        """Serialise to the wire format (header, fields, digest)."""
        body = MAGIC + bytes([VERSION, self.TAG])
        body += b"".join(_write(kind, getattr(self, f.name)) for kind, f in zip(self.KINDS, fields(self)))
        return body + hashlib.sha256(body).digest()

    @classmethod
    def from_bytes(cls, data: bytes) -> "Message":
        """Parse and check a message of this class.

        Raises:
            ValueError: on a wrong magic/version/type, a bad digest (tampering or corruption), truncation or
                trailing bytes.
        """
        message = parse_message(data)
        if not isinstance(message, cls):
            raise ValueError(f"expected a {cls.__name__}, got a {type(message).__name__}")
        return message

    def check_elements(self, values: tuple[int, ...], *, bound: int, count: int, what: str) -> None:
        """Check there are ``count`` values, each in [0, bound) (e.g. Z_n or ciphertexts below n^2).

        Raises:
            ValueError: naming the message, the field and the problem.
        """
        if len(values) != count:
            raise ValueError(f"{type(self).__name__}: expected {count} {what}, got {len(values)}")
        for index, value in enumerate(values):
            if not 0 <= value < bound:
                raise ValueError(f"{type(self).__name__}: {what} #{index} is out of range [0, {bound.bit_length()}-bit bound)")


@dataclass(frozen=True)
class PublicKeyMessage(Message):
    """Step 1(a), server -> silos: the Paillier public modulus n (g = n + 1 as in phe)."""

    TAG: ClassVar[int] = 1
    KINDS: ClassVar[tuple[str, ...]] = ("int",)
    modulus: int


@dataclass(frozen=True)
class DhPublicKeyMessage(Message):
    """Step 1(a), silo -> server: the silo's X25519 public key."""

    TAG: ClassVar[int] = 2
    KINDS: ClassVar[tuple[str, ...]] = ("u32", "bytes")
    silo: int
    public_key: bytes


@dataclass(frozen=True)
class DhDirectoryMessage(Message):
    """Step 1(b), server -> silos: every silo's X25519 public key, indexed by silo id."""

    TAG: ClassVar[int] = 3
    KINDS: ClassVar[tuple[str, ...]] = ("bytes_list",)
    public_keys: tuple[bytes, ...]


@dataclass(frozen=True)
class SealedMessage(Message):
    """Silo -> silo through the server, ChaCha20-Poly1305 under their pairwise key (step 1(c) and round shares).

    The header fields are authenticated as associated data, so re-routing or replaying into another round fails.
    """

    TAG: ClassVar[int] = 4
    KINDS: ClassVar[tuple[str, ...]] = ("u32", "u32", "u32", "u32", "bytes", "bytes")
    sender: int
    recipient: int
    round_index: int
    purpose: int
    nonce: bytes
    ciphertext: bytes

    def associated_data(self) -> bytes:
        """The authenticated header: sender, recipient, round and purpose."""
        return _U32.pack(self.sender) + _U32.pack(self.recipient) + _U32.pack(self.round_index) + _U32.pack(self.purpose)


@dataclass(frozen=True)
class BlindedHistogramMessage(Message):
    """Step 1(e), silo -> server: doubly blinded counts B'(n_su) in Z_n, one per user."""

    TAG: ClassVar[int] = 5
    KINDS: ClassVar[tuple[str, ...]] = ("u32", "ints")
    silo: int
    values: tuple[int, ...]


@dataclass(frozen=True)
class EncryptedWeightsMessage(Message):
    """Step 2(a), server -> silos: Enc(B_inv(N_u)) for sampled users, Enc(0) for the others."""

    TAG: ClassVar[int] = 6
    KINDS: ClassVar[tuple[str, ...]] = ("u32", "ints")
    round_index: int
    ciphertexts: tuple[int, ...]


@dataclass(frozen=True)
class MaskedUpdateMessage(Message):
    """Step 2(c), silo -> server: Enc(Delta_s + pairwise masks), one ciphertext per model parameter."""

    TAG: ClassVar[int] = 7
    KINDS: ClassVar[tuple[str, ...]] = ("u32", "u32", "ints")
    round_index: int
    silo: int
    ciphertexts: tuple[int, ...]


MESSAGE_TYPES: dict[int, type[Message]] = {
    cls.TAG: cls
    for cls in (
        PublicKeyMessage,
        DhPublicKeyMessage,
        DhDirectoryMessage,
        SealedMessage,
        BlindedHistogramMessage,
        EncryptedWeightsMessage,
        MaskedUpdateMessage,
    )
}


def parse_message(data: bytes) -> Message:
    """Parse any protocol message from its bytes.

    Raises:
        ValueError: on a wrong magic or version, an unknown type, a digest mismatch, truncation or trailing bytes.
    """
    if len(data) < len(MAGIC) + 2 + _DIGEST_BYTES or data[:4] != MAGIC:
        raise ValueError("malformed message: not a ULDP protocol message")
    if data[4] != VERSION:
        raise ValueError(f"malformed message: version {data[4]} (supported: {VERSION})")
    body, digest = data[:-_DIGEST_BYTES], data[-_DIGEST_BYTES:]
    if hashlib.sha256(body).digest() != digest:
        raise ValueError("message digest mismatch: the message was corrupted or tampered with")
    cls = MESSAGE_TYPES.get(data[5])
    if cls is None:
        raise ValueError(f"malformed message: unknown type tag {data[5]}")
    reader = _Reader(body[6:])
    values = [_read(kind, reader) for kind in cls.KINDS]
    reader.done()
    return cls(*values)


def pack_ints(values: tuple[int, ...] | list[int]) -> bytes:
    """Bytes of a list of non-negative integers in the ``ints`` field format (for sealed payloads)."""
    return _write("ints", tuple(int(v) for v in values))


def unpack_ints(data: bytes) -> tuple[int, ...]:
    """Inverse of :func:`pack_ints`.

    Raises:
        ValueError: on truncation or trailing bytes.
    """
    reader = _Reader(data)
    values = _read("ints", reader)
    reader.done()
    return values  # type: ignore[return-value]
