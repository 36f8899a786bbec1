"""Typed messages of Protocol 1 with an explicit byte format (no pickle) and validation.

Wire format of every message: ``b"ULDP"`` | version (1 byte) | type tag (1 byte) | fields | SHA-256 digest of
everything before it (32 bytes). A field's kind is its annotation: ``U32`` (4 bytes big-endian), ``bytes`` (u32
length + data), ``BigInt`` (u32 length + big-endian magnitude), ``Ints`` (u32 count + that many ``BigInt``),
``ByteList`` (u32 count + that many ``bytes``), ``SignedInt`` (a sign byte, 0 for >= 0 and 1 for < 0, then a
``BigInt`` of the magnitude; a negative zero is refused). Parsing checks the magic, version, tag, every length, the
digest and that nothing trails.
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
from collections.abc import Collection
from dataclasses import dataclass, fields
from typing import Any, ClassVar, Self, SupportsInt

MAGIC = b"ULDP"
VERSION = 1
_DIGEST_BYTES = 32
_U32 = struct.Struct(">I")

#: Field annotations and their wire kinds (the aliases say how an ``int`` or a tuple travels).
U32 = int
BigInt = int
SignedInt = int
Ints = tuple[int, ...]
ByteList = tuple[bytes, ...]
_KIND_OF = {
    "U32": "u32",
    "bytes": "bytes",
    "BigInt": "int",
    "Ints": "ints",
    "ByteList": "bytes_list",
    "SignedInt": "signed",
}

#: Every message class by its type tag (filled as the classes are defined).
MESSAGE_TYPES: dict[int, type[Message]] = {}


#: The wire kinds of each message class's fields, computed on first use.
_KINDS: dict[type[Message], tuple[str, ...]] = {}


def _kinds(cls: type[Message]) -> tuple[str, ...]:
    if cls not in _KINDS:
        _KINDS[cls] = tuple(_KIND_OF[str(f.type)] for f in fields(cls))
    return _KINDS[cls]


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
            raise ValueError(
                f"malformed message: {len(self._data) - self._offset} unexpected trailing bytes"
            )


def _write(kind: str, value: object) -> bytes:
    if kind == "u32":
        if not isinstance(value, int) or not 0 <= value < 2**32:
            raise ValueError(f"u32 field out of range: {value!r}")
        return _U32.pack(value)
    if kind == "bytes":
        if not isinstance(value, bytes | bytearray | memoryview):
            raise ValueError(f"bytes field must hold bytes, got {type(value).__name__}")
        return _U32.pack(len(value)) + bytes(value)
    if kind == "int":
        if not isinstance(value, SupportsInt):
            raise ValueError(f"int field must hold an integer, got {type(value).__name__}")
        number = int(value)
        if number < 0:
            raise ValueError("int fields carry non-negative integers")
        raw = number.to_bytes((number.bit_length() + 7) // 8, "big")
        return _U32.pack(len(raw)) + raw
    if kind == "signed":
        if not isinstance(value, SupportsInt):
            raise ValueError(f"signed field must hold an integer, got {type(value).__name__}")
        return bytes([int(value) < 0]) + _write("int", abs(int(value)))
    if kind in ("ints", "bytes_list"):
        if not isinstance(value, Collection):
            raise ValueError(f"{kind} field must hold a sequence, got {type(value).__name__}")
        item = "int" if kind == "ints" else "bytes"
        return _U32.pack(len(value)) + b"".join(_write(item, v) for v in value)
    raise AssertionError(kind)


def _read(kind: str, reader: _Reader) -> object:
    if kind == "u32":
        return reader.u32()
    if kind == "bytes":
        return reader.take(reader.u32())
    if kind == "int":
        return int.from_bytes(reader.take(reader.u32()), "big")
    if kind == "signed":
        sign, magnitude = reader.take(1)[0], _read("int", reader)
        if sign > 1 or (sign and not magnitude):
            raise ValueError(
                f"malformed message: a signed field's sign byte must be 0, or 1 for a non-zero "
                f"magnitude, got {sign}"
            )
        return -magnitude if sign else magnitude  # type: ignore[operator]
    if kind in ("ints", "bytes_list"):
        count = reader.u32()
        item = "int" if kind == "ints" else "bytes"
        return tuple(_read(item, reader) for _ in range(count))
    raise AssertionError(kind)


@dataclass(frozen=True)
class Message:
    """Base of all protocol messages: serialisation from the field annotations (see the module docstring).

    A subclass names its type tag, ``class PublicKeyMessage(Message, tag=1)``, and is registered under it.
    """

    TAG: ClassVar[int] = 0

    def __init_subclass__(cls, *, tag: int, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if tag in MESSAGE_TYPES:
            raise ValueError(f"message tag {tag} is taken by {MESSAGE_TYPES[tag].__name__}")
        cls.TAG = tag
        MESSAGE_TYPES[tag] = cls

    @classmethod
    def kinds(cls) -> tuple[str, ...]:
        """The wire kind of each field, in order."""
        return _kinds(cls)

    def to_bytes(self) -> bytes:
        """Serialise to the wire format (header, fields, digest)."""
        body = MAGIC + bytes([VERSION, self.TAG])
        pairs = zip(self.kinds(), fields(self), strict=True)
        body += b"".join(_write(kind, getattr(self, f.name)) for kind, f in pairs)
        return body + hashlib.sha256(body).digest()

    @classmethod
    def from_bytes(cls, data: bytes) -> Self:
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
                raise ValueError(
                    f"{type(self).__name__}: {what} #{index} is out of range [0, {bound.bit_length()}-bit bound)"
                )


@dataclass(frozen=True)
class PublicKeyMessage(Message, tag=1):
    """Step 1(a), server -> silos: the Paillier public modulus n (g = n + 1 as in phe).

    Attributes:
        modulus: n, of ``key_bits`` bits (the silos check its size).
    """

    modulus: BigInt


@dataclass(frozen=True)
class DhPublicKeyMessage(Message, tag=2):
    """Step 1(a), silo -> server: the silo's X25519 public key.

    Attributes:
        silo: The sending silo's id.
        public_key: Its 32 raw bytes.
        attestation: Beyond the paper, a :class:`KeyAttestation`'s bytes: the key signed by the silo's roster
            identity (:func:`uldp.secure.roster.attest`); empty from a silo without a roster.
    """

    silo: U32
    public_key: bytes
    attestation: bytes = b""


@dataclass(frozen=True)
class DhDirectoryMessage(Message, tag=3):
    """Step 1(b), server -> silos: every silo's X25519 public key, indexed by silo id, and the silos' attestations
    in the same order (empty without a roster; a silo with a roster refuses a directory that lacks them)."""

    public_keys: ByteList
    attestations: ByteList = ()


@dataclass(frozen=True)
class SealedMessage(Message, tag=4):
    """Silo -> silo through the server, ChaCha20-Poly1305 under their pairwise key (step 1(c) and round shares).

    The header fields are authenticated as associated data, so re-routing or replaying into another round fails.
    """

    sender: U32
    recipient: U32
    round_index: U32
    purpose: U32
    nonce: bytes
    ciphertext: bytes

    def associated_data(self) -> bytes:
        """The authenticated header: sender, recipient, round and purpose."""
        header = (self.sender, self.recipient, self.round_index, self.purpose)
        return b"".join(_U32.pack(value) for value in header)


@dataclass(frozen=True)
class BlindedHistogramMessage(Message, tag=5):
    """Step 1(e), silo -> server: doubly blinded counts B'(n_su) in Z_n, one per user.

    Attributes:
        silo: The sending silo's id s.
        values: B'(n_su) = r_u n_su + the silo's net pairwise masks mod n, for u = 0..|U|-1.
    """

    silo: U32
    values: Ints


@dataclass(frozen=True)
class EncryptedWeightsMessage(Message, tag=6):
    """Step 2(a), server -> silos: Enc(B_inv(N_u)) for sampled users, Enc(0) for the others.

    Attributes:
        round_index: t, from 1.
        ciphertexts: One Paillier ciphertext (below n^2) per user.
    """

    round_index: U32
    ciphertexts: Ints


@dataclass(frozen=True)
class MaskedUpdateMessage(Message, tag=7):
    """Step 2(c), silo -> server: Enc(Delta_s + pairwise masks), one ciphertext per model parameter.

    Attributes:
        round_index: t, the round of the encrypted weights it answers.
        silo: The sending silo's id.
        parameters: d, the number of model parameters.
        ciphertexts: In Z*_(n^2), one per model parameter (backend ``"paillier"``) or one per K parameters
            (``"packed-paillier"``); only their product over all silos is decrypted.
    """

    round_index: U32
    silo: U32
    parameters: U32
    ciphertexts: Ints


@dataclass(frozen=True)
class RescaleRequestMessage(Message, tag=9):
    """Packed backend, step 2(b), silo -> server: ``Enc(b_u C_LCM / N_u + rho_u)`` for the users u = silo mod |S|
    (:mod:`uldp.secure.packing`, step 1; the blind rho_u hides N_u from the server).

    Attributes:
        round_index: t.
        silo: The sending silo's id.
        ciphertexts: One per user u = silo, silo + |S|, ... (below n^2).
    """

    round_index: U32
    silo: U32
    ciphertexts: Ints


@dataclass(frozen=True)
class RescaledWeightsMessage(Message, tag=10):
    """Packed backend, step 2(b), server -> every silo: fresh ``Enc(floor(z_u 2^g / C_LCM))`` for every user
    (:mod:`uldp.secure.packing`, step 2).

    Attributes:
        round_index: t.
        ciphertexts: One per user (below n^2).
    """

    round_index: U32
    ciphertexts: Ints


@dataclass(frozen=True)
class LatticeKeysMessage(Message, tag=11):
    """Lattice backend, step 1(a), server -> silos: the BFV public keys and Galois keys, one of each per plaintext
    prime, in SEAL's format (:mod:`uldp.secure.lattice`; the silos re-randomise their updates with the public keys
    and expand the packed weights with the Galois keys, :mod:`uldp.secure.lattice_expand`).

    Attributes:
        public_keys: SEAL's bytes of each public key.
        galois_keys: SEAL's seeded bytes of each set of Galois keys (empty bytes for a single user).
    """

    public_keys: ByteList
    galois_keys: ByteList


@dataclass(frozen=True)
class LatticeWeightsMessage(Message, tag=12):
    """Lattice backend, step 2(b), server -> each silo: the rescale's answer, every user's ``y_u`` packed in seeded
    BFV ciphertexts, ``ceil(|U| / N)`` per plaintext prime (prime-major;
    :meth:`uldp.secure.lattice.LatticeServer.encrypt_weights`), made at round
    ``weights_round`` (t, or an earlier round whose sample was the same: :class:`uldp.secure.backends.lattice.
    LatticeBackend`); empty when the silo said it holds them (:class:`LatticeHeldMessage`).

    Attributes:
        round_index: t.
        weights_round: the round whose rescale the weights answered (its blinds give the corrections c_u).
        ciphertexts: SEAL's bytes, ``ceil(|U| / N)`` per plaintext prime, or none.
    """

    round_index: U32
    weights_round: U32
    ciphertexts: ByteList


@dataclass(frozen=True)
class LatticeHeldMessage(Message, tag=18):
    """Lattice backend, step 2(b), silo -> server, beside its rescale request: the round of the BFV weights it holds
    (0: none), so that the server sends them only to silos without them.

    Attributes:
        round_index: t.
        silo: The sending silo's id.
        weights_round: the ``weights_round`` of the last :class:`LatticeWeightsMessage` with ciphertexts it kept.
    """

    round_index: U32
    silo: U32
    weights_round: U32


@dataclass(frozen=True)
class LatticeUpdateMessage(Message, tag=13):
    """Lattice backend, step 2(c), silo -> server: the masked, flooded BFV update (prime-major, ceil(d / N)
    ciphertexts per plaintext prime; :meth:`uldp.secure.lattice_silo.LatticeSilo.masked_update`).

    Attributes:
        round_index: t.
        silo: The sending silo's id.
        parameters: d.
        ciphertexts: SEAL's bytes; only their sum over all silos is decrypted.
    """

    round_index: U32
    silo: U32
    parameters: U32
    ciphertexts: ByteList


@dataclass(frozen=True)
class RingPedersenMessage(Message, tag=16):
    """Step 1(a), silo -> server (beyond the paper): the silo's own ring-Pedersen parameters with their proof
    (CGGMP20 Figure 17) and a fresh nonce; the server proves its modulus against them, bound to the nonce
    (:mod:`uldp.secure.modulus_proof`).

    Attributes:
        silo: The sending silo's id.
        nonce: 32 bytes from the silo's OS CSPRNG, fresh for the session (empty where a silo keeps its parameters).
        modulus, s, t: The ring-Pedersen parameters (N^, s, t).
        commitments, responses: The ring-Pedersen proof (A_i, z_i).
    """

    silo: U32
    nonce: bytes
    modulus: BigInt
    s: BigInt
    t: BigInt
    commitments: Ints
    responses: Ints


@dataclass(frozen=True)
class ModulusProofMessage(Message, tag=17):
    """Step 1(b), server -> one silo (beyond the paper): the Paillier modulus and the proof that it is well formed,
    CGGMP20's Paillier-Blum proof (``w``, ``x``, ``a``, ``b``, ``z``; CGGMP20 Figure 16) and no-small-factor proof
    against that silo's ring-Pedersen parameters (``P`` .. ``v``; CGGMP20 Figure 28), bound to the silo's id and
    nonce.

    The silo checks it (:func:`uldp.secure.modulus_proof.verify_modulus`) before it uses the modulus.
    """

    silo: U32
    modulus: BigInt
    w: BigInt
    x: Ints
    a: Ints
    b: Ints
    z: Ints
    P: BigInt
    Q: BigInt
    A: BigInt
    B: BigInt
    T: BigInt
    sigma: SignedInt
    z1: SignedInt
    z2: SignedInt
    w1: SignedInt
    w2: SignedInt
    v: SignedInt


@dataclass(frozen=True)
class WeightCheckMessage(Message, tag=40):
    """Beyond the paper, between steps 2(a) and 2(b), silo -> server: ``Enc(sum_u c_u n_su w_u + M_s)`` computed from
    the weight ciphertexts the silo's update will use (:mod:`uldp.secure.weight_check`).

    Attributes:
        round_index: t.
        silo: The sending silo's id.
        contribution: The Paillier ciphertext, in Z*_(n^2).
    """

    round_index: U32
    silo: U32
    contribution: BigInt


@dataclass(frozen=True)
class WeightCheckProofMessage(Message, tag=41):
    """Beyond the paper, server -> every silo with the round's update stage: every silo's check contribution, the
    decrypted sum V of their product and the randomness r proving it (``(1 + n)^V r^n``), and the round's sample T
    against which the silos check V (:mod:`uldp.secure.weight_check`).

    Attributes:
        round_index: t.
        sampled: One byte per user, 1 if sampled in round t, else 0.
        contributions: Per silo, in silo order, its :class:`WeightCheckMessage`'s ciphertext.
        plaintext: V in Z_n.
        randomness: r in Z_n^*.
    """

    round_index: U32
    sampled: bytes
    contributions: Ints
    plaintext: BigInt
    randomness: BigInt


@dataclass(frozen=True)
class SiloState(Message, tag=8):
    """Not sent: one silo's secrets and progress between two messages, where it keeps them (for example a Flower
    ClientApp's node-local context state; see :meth:`uldp.secure.protocol.Silo.export_state`).

    Empty bytes, 0 or an empty tuple mean "not yet": no modulus before its proof passed (step 1(b)), no pairwise keys
    before step 1(b), no seed before 1(c), no round (0) outside step 2(b). ``proof_request`` is the
    :class:`RingPedersenMessage` the silo sent at step 1(a) (its own ring-Pedersen parameters and nonce).
    ``aead_keys`` and ``mask_keys`` are per peer, in the order of the peers' ids; ``own_powers`` are the round's
    shared weight powers of the users ``silo mod |S|``. ``backend_keys`` and ``backend_round`` are the backend's
    state (:meth:`uldp.secure.backends.Backend.export_state`): with the lattice backend (:mod:`uldp.secure.lattice`)
    the server's BFV public and Galois keys of step 1(a) and the packed weights it holds, if any (public; see
    ``LatticeBackend.export_state``), and the last round whose BFV update the silo computed (0: none); empty and 0 with
    the Paillier backends. (They were named ``lattice_keys`` and ``lattice_round``; the bytes are the same.)
    """

    silo: U32
    counts: Ints
    dh_private: bytes
    modulus: BigInt
    aead_keys: ByteList
    mask_keys: ByteList
    seed: bytes
    round_index: U32
    own_powers: Ints
    proof_request: bytes
    backend_keys: ByteList
    backend_round: U32


@dataclass(frozen=True)
class MaskedSumMessage(Message, tag=14):
    """Silo -> server, the masked sum of plain updates (:mod:`uldp.secure.masked_sum`, step 3): the silo's encoded
    update plus its net pairwise masks in Z_(2^64).

    Attributes:
        round_index: t.
        silo: The sending silo's id.
        parameters: d.
        values: d little-endian 64-bit ring elements (8 d bytes); uniform on the ring, whatever the update.
    """

    round_index: U32
    silo: U32
    parameters: U32
    values: bytes


@dataclass(frozen=True)
class MaskedSumState(Message, tag=15):
    """Not sent: one silo's secrets and progress in the masked sum (:class:`uldp.secure.masked_sum.MaskedSumSilo`),
    where it keeps them between messages (a Flower ClientApp's node-local context state).

    ``session``, ``peers`` and ``mask_keys`` are empty before the set-up's directory; the keys are in the peers'
    order. ``contribution`` (this silo's, to the sampling seed) and ``sampling_seed`` are empty without a hidden
    sample (:mod:`uldp.secure.sampling`) and before the stages that set them.
    """

    silo: U32
    n_silos: U32
    dh_private: bytes
    session: bytes
    peers: Ints
    mask_keys: ByteList
    answered_round: U32
    contribution: bytes = b""
    sampling_seed: bytes = b""


@dataclass(frozen=True)
class KeyAttestation(Message, tag=31):
    """Beyond the paper: a silo's session DH public key signed by its long-term identity (:mod:`uldp.secure.roster`).

    Attributes:
        name: The silo's name in the federation roster (UTF-8).
        identity_key: Its Ed25519 public key (32 bytes); its fingerprint must be the roster's for ``name``.
        signature: Ed25519 over the roster digest, the session context, the silo's number, name and DH key.
    """

    name: bytes
    identity_key: bytes
    signature: bytes


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
    values = [_read(kind, reader) for kind in cls.kinds()]
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
