"""The private set union's group and messages: what a silo checks of what it receives (:mod:`uldp.secure.psu`).

The group (a safe prime ``p = 2q + 1`` and its hash to the quadratic residues, step 0's hash ``H`` of the union's
protocol), the silo's hello, the roster whose SHA-256 is the session id, and the sealed relay message with its
header as associated data (steps 1-3). Every parser refuses a malformed message by name (:class:`RelayRefused`), and
:meth:`PsuGroup.element` refuses a value outside the quadratic residues, so a silo never exponentiates an element
of a small subgroup. The protocol's steps and what each party learns are in :mod:`uldp.secure.psu`.
"""

from __future__ import annotations

import hashlib
import json
import struct
from dataclasses import dataclass

import gmpy2

from uldp.secure.keys import AEAD_NONCE_BYTES

#: Smallest group accepted outside tests (bits of p).
MIN_GROUP_BITS = 2048
#: The recipient of a ``share`` message: every silo.
ALL_SILOS = 0xFFFFFFFF
#: Bytes of a silo's hello nonce, and the shortest relay key.
NONCE_BYTES, MIN_RELAY_KEY_BYTES = 16, 32
_LABEL = b"uldp/psu/v1"
_HEADER = struct.Struct(">32sIIII")  # session, step, sender, recipient, owner
_HELLO = struct.Struct(">16sI")


class RelayRefused(ValueError):
    """A union message a silo refuses; the reason names the step and what is wrong with it."""


@dataclass(frozen=True)
class PsuGroup:
    """A safe prime ``p = 2q + 1``; the union works in its order-``q`` subgroup of quadratic residues.

    Attributes:
        name: The group's name (every silo checks that the roster names its own group).
        p: The safe prime.
    """

    name: str
    p: int

    @property
    def q(self) -> int:
        """The prime order of the subgroup of quadratic residues."""
        return (self.p - 1) // 2

    @property
    def element_bytes(self) -> int:
        """Bytes of one element on the wire (big-endian, fixed width)."""
        return (self.p.bit_length() + 7) // 8

    def hash_to_group(self, session: bytes, user: str) -> int:
        """``H(user)``: SHAKE-256 of (label, group, session, user) to 128 bits more than ``p``, mod ``p``, squared.

        Raises:
            ValueError: The id hashes to 1 (probability about 2/p).
        """
        digest = hashlib.shake_256(b"|".join((_LABEL, self.name.encode(), session, user.encode())))
        value = pow(
            int.from_bytes(digest.digest(self.element_bytes + 16), "big") % self.p, 2, self.p
        )
        if value <= 1:
            raise ValueError(f"patient id {user!r} hashes to a trivial group element; rename it")
        return value

    def element(self, data: bytes, *, what: str) -> int:
        """The element encoded in ``data``, if it is a quadratic residue other than 1.

        Raises:
            RelayRefused: Out of ``[2, p - 1)``, or not a quadratic residue (naming ``what``).
        """
        value = int.from_bytes(data, "big")
        if not 1 < value < self.p - 1 or gmpy2.jacobi(value, self.p) != 1:
            raise RelayRefused(
                f"{what} holds a value outside the quadratic residues of group {self.name}"
            )
        return value


#: RFC 3526's MODP groups 14 (2048-bit) and 15 (3072-bit): the safe primes
#: ``2^b - 2^(b-64) - 1 + 2^64 (floor(2^(b-130) pi) + c)`` (``tests/test_psu.py`` recomputes them).
GROUPS = {
    "modp2048": PsuGroup(
        "modp2048",
        int(
            "FFFFFFFFFFFFFFFFC90FDAA22168C234C4C6628B80DC1CD129024E088A67CC74020BBEA63B139B22514A08798E3404DD"
            "EF9519B3CD3A431B302B0A6DF25F14374FE1356D6D51C245E485B576625E7EC6F44C42E9A637ED6B0BFF5CB6F406B7ED"
            "EE386BFB5A899FA5AE9F24117C4B1FE649286651ECE45B3DC2007CB8A163BF0598DA48361C55D39A69163FA8FD24CF5F"
            "83655D23DCA3AD961C62F356208552BB9ED529077096966D670C354E4ABC9804F1746C08CA18217C32905E462E36CE3B"
            "E39E772C180E86039B2783A2EC07A28FB5C55DF06F4C52C9DE2BCBF6955817183995497CEA956AE515D2261898FA0510"
            "15728E5A8AACAA68FFFFFFFFFFFFFFFF",
            16,
        ),
    ),
    "modp3072": PsuGroup(
        "modp3072",
        int(
            "FFFFFFFFFFFFFFFFC90FDAA22168C234C4C6628B80DC1CD129024E088A67CC74020BBEA63B139B22514A08798E3404DD"
            "EF9519B3CD3A431B302B0A6DF25F14374FE1356D6D51C245E485B576625E7EC6F44C42E9A637ED6B0BFF5CB6F406B7ED"
            "EE386BFB5A899FA5AE9F24117C4B1FE649286651ECE45B3DC2007CB8A163BF0598DA48361C55D39A69163FA8FD24CF5F"
            "83655D23DCA3AD961C62F356208552BB9ED529077096966D670C354E4ABC9804F1746C08CA18217C32905E462E36CE3B"
            "E39E772C180E86039B2783A2EC07A28FB5C55DF06F4C52C9DE2BCBF6955817183995497CEA956AE515D2261898FA0510"
            "15728E5A8AAAC42DAD33170D04507A33A85521ABDF1CBA64ECFB850458DBEF0A8AEA71575D060C7DB3970F85A6E1E4C7"
            "ABF5AE8CDB0933D71E8C94E04A25619DCEE3D2261AD2EE6BF12FFA06D98A0864D87602733EC86A64521F2B18177B200C"
            "BBE117577A615D6C770988C0BAD946E208E24FA074E5AB3143DB5BFCE0FD108E4B82D120A93AD2CAFFFFFFFFFFFFFFFF",
            16,
        ),
    ),
}
DEFAULT_GROUP = GROUPS["modp2048"]
#: INSECURE, tests only: a 256-bit safe prime (accepted only with ``insecure_test_group=True``).
TEST_GROUP = PsuGroup(
    "insecure-test-256", 0xC6B0FE3ED09553E8C04BCE462529F646A52C8893562FBC08E99B5C86E1CEF52F
)


#: Every group by its name: those a server may name for the union (:data:`GROUPS`) and the insecure test group, which a
#: silo accepts only with its consent.
NAMED_GROUPS = {**GROUPS, TEST_GROUP.name: TEST_GROUP}


def group_named(name: object) -> PsuGroup:
    """The group of :data:`NAMED_GROUPS` called ``name`` (a server's or a settings file's choice, or a stored state's).

    Raises:
        ValueError: Another name, naming the allowed ones.
    """
    if not isinstance(name, str) or name not in NAMED_GROUPS:
        raise ValueError(
            f"the union group must be one of {sorted(NAMED_GROUPS)}, got {str(name)[:40]!r}"
        )
    return NAMED_GROUPS[name]


def check_group(group: PsuGroup, *, insecure_test_group: bool = False) -> PsuGroup:
    """Return ``group`` if it is one of :data:`GROUPS` (or :data:`TEST_GROUP` with ``insecure_test_group``).

    Raises:
        ValueError: Another group, naming the accepted ones.
    """
    allowed = {**GROUPS, **({TEST_GROUP.name: TEST_GROUP} if insecure_test_group else {})}
    if allowed.get(group.name) != group:
        raise ValueError(
            f"the union's group must be one of {sorted(allowed)} (at least {MIN_GROUP_BITS} bits "
            f"outside tests), got {group.name!r} of {group.p.bit_length()} bits"
        )
    return group


def size_of(data: object) -> str:
    return f"{len(data)} bytes" if isinstance(data, bytes) else type(data).__name__


@dataclass(frozen=True)
class Hello:
    """A silo's answer to the first stage: a fresh nonce (binds the session to this run of the silo) and |X_s|."""

    nonce: bytes
    size: int

    def to_bytes(self) -> bytes:
        """nonce (16 bytes) | size (u32)."""
        return _HELLO.pack(self.nonce, self.size)

    @classmethod
    def from_bytes(cls, data: bytes) -> Hello:
        """Parse :meth:`to_bytes`'s output.

        Raises:
            RelayRefused: Not 20 bytes.
        """
        if not isinstance(data, bytes) or len(data) != _HELLO.size:
            raise RelayRefused(f"a union hello has {_HELLO.size} bytes, got {size_of(data)}")
        nonce, size = _HELLO.unpack(data)
        return cls(nonce, size)


@dataclass(frozen=True)
class Roster:
    """The session every silo joins: the group, the silos' names in sorted order and their hellos.

    Its SHA-256 is the session id, bound to every relayed message: a message of another session is refused.
    """

    group: str
    names: tuple[str, ...]
    hellos: tuple[Hello, ...]

    def to_bytes(self) -> bytes:
        """Canonical JSON (sorted keys, hellos in hex)."""
        return json.dumps(
            {
                "group": self.group,
                "names": list(self.names),
                "hellos": [h.to_bytes().hex() for h in self.hellos],
            },
            sort_keys=True,
        ).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> Roster:
        """Parse :meth:`to_bytes`'s output.

        Raises:
            RelayRefused: Not that JSON, or names that are not distinct strings in sorted order with one hello each.
        """
        try:
            raw = json.loads(data)
            roster = cls(
                str(raw["group"]),
                tuple(raw["names"]),
                tuple(Hello.from_bytes(bytes.fromhex(h)) for h in raw["hellos"]),
            )
        except (ValueError, KeyError, TypeError) as error:
            raise RelayRefused(f"the union's roster is malformed: {error}") from error
        names = roster.names
        if (
            not names
            or len(names) != len(roster.hellos)
            or not all(isinstance(n, str) and n for n in names)
            or list(names) != sorted(set(names))
        ):
            raise RelayRefused(
                f"the union's roster needs distinct names in sorted order and one hello each; got "
                f"{len(names)} names and {len(roster.hellos)} hellos"
            )
        return roster

    @property
    def session(self) -> bytes:
        """The session id: SHA-256 of the label and the roster."""
        return hashlib.sha256(_LABEL + self.to_bytes()).digest()


@dataclass(frozen=True)
class RelayMessage:
    """One sealed list on its way through the server; the header travels in the clear, as associated data.

    Attributes:
        session: The roster's session id.
        step: 0 (start), 1 .. |S| - 1 (hops), |S| (share).
        sender: The silo that sealed it.
        recipient: The silo it is for (:data:`ALL_SILOS` for a share).
        owner: The silo whose patients the list holds.
        nonce: The seal's nonce.
        ciphertext: ChaCha20-Poly1305 of the list.
    """

    session: bytes
    step: int
    sender: int
    recipient: int
    owner: int
    nonce: bytes
    ciphertext: bytes

    def header(self) -> bytes:
        """The associated data of the seal."""
        return _HEADER.pack(self.session, self.step, self.sender, self.recipient, self.owner)

    def to_bytes(self) -> bytes:
        """header | nonce | ciphertext."""
        return self.header() + self.nonce + self.ciphertext

    @classmethod
    def from_bytes(cls, data: bytes) -> RelayMessage:
        """Parse :meth:`to_bytes`'s output.

        Raises:
            RelayRefused: Not bytes, or shorter than a header, a nonce and a tag.
        """
        least = _HEADER.size + AEAD_NONCE_BYTES + 16
        if not isinstance(data, bytes) or len(data) < least:
            raise RelayRefused(f"a union message has at least {least} bytes, got {size_of(data)}")
        session, step, sender, recipient, owner = _HEADER.unpack(data[: _HEADER.size])
        body = data[_HEADER.size :]
        return cls(
            session,
            step,
            sender,
            recipient,
            owner,
            body[:AEAD_NONCE_BYTES],
            body[AEAD_NONCE_BYTES:],
        )
