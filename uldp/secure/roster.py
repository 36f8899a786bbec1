"""Silo identities and the federation roster: DH keys the server cannot swap (beyond the paper; issue 41 item 3).

Protocol 1's steps 1(a)-(b) send every silo's X25519 public key through the server, and the paper's semi-honest
server relays them as they are. A server that deviates could put keys of its own in the other slots of the directory
and sit in the middle of every pair: it would then know every pairwise mask and read each silo's update. Here the
keys are authenticated by the silos themselves, as SSH's ``known_hosts`` authenticates a host:

- **Identity** (:class:`Identity`): each silo has a long-term Ed25519 key pair (``cryptography``, OS CSPRNG), made
  by the silo's operator with ``uldp roster identity`` and kept in a file only the silo reads (mode 0600; a file
  that others may read is refused on load). Its public *fingerprint* (:func:`fingerprint`, SHA-256 of the public
  key) is what the operator gives the other silos, out of band (a signed e-mail, a meeting, a phone call).
- **Roster** (:class:`Roster`): the federation's silos in order (silo ``s`` is entry ``s``), each a name and a
  fingerprint, with a SHA-256 digest; every silo holds its own copy (``uldp roster add``), made from the
  fingerprints it received out of band, never from the server. The server needs no roster and can neither read
  nor change one.
- **Attestation** (:func:`attest`, :class:`~uldp.secure.messages.KeyAttestation`): at step 1(a) a silo signs its
  fresh DH public key together with the roster's digest, the session's context (Protocol 1: the stage and the
  session id, the SHA-256 of the Paillier modulus; the masked sum: its stage), its number and its name; the
  signature travels with the key and the server relays both.
- **Check** (:func:`check_directory`): at step 1(b) every silo checks every relayed key's signature against the
  identity its roster lists for that slot and aborts, naming the silo (:class:`RosterMismatch`), before it derives a
  single pairwise key. A server that swaps a key, relays one from another session, another silo or another roster,
  or drops a signature is refused; all it can do is stop the run.

Rotation. A silo's identity is rotated by making a new one (``uldp roster identity --force`` writes a new file),
sending its fingerprint out of band and having every silo replace the entry (``uldp roster add --replace``); each
silo's roster digest changes and sessions made under the old roster are refused. The session DH keys are fresh
every session (they never outlive it). The silos' relay key of the Flower private set union
(:mod:`uldp.flower.pseudonyms`) is made by one silo operator (``uldp.flower.write_key_file``) and handed to every
other silo out of band, like the fingerprints; it is rotated by writing a new one and handing it out again before
the next run's union.

>>> identities = [Identity.generate(name) for name in ("north", "south")]
>>> roster = Roster.of(identities)
>>> dh_keys = [bytes([s]) * 32 for s in range(2)]
>>> signed = [attest(i, roster, silo=s, context=b"demo", dh_public=dh_keys[s]) for s, i in enumerate(identities)]
>>> check_directory(roster, dh_keys, signed, context=b"demo")
>>> check_directory(roster, [dh_keys[0], bytes(32)], signed, context=b"demo")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
uldp.secure.roster.RosterMismatch: silo 1 (south): its relayed DH key is not signed by its roster identity (a key...
"""

from __future__ import annotations

import hashlib
import json
import re
import stat
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from uldp.common.atomic import write_bytes_atomic
from uldp.secure.messages import DhDirectoryMessage, DhPublicKeyMessage, KeyAttestation

if TYPE_CHECKING:
    import os
    from collections.abc import Iterable, Sequence

#: The version of the identity and roster files.
SCHEMA = 1
#: The most silos a roster lists (a loaded roster is refused past it: no loop is driven by an unbounded field).
MAX_SILOS = 4096
#: A silo's name: a letter or digit, then up to 63 letters, digits, '.', '_' or '-'.
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_FINGERPRINT = re.compile(r"[0-9a-f]{64}")
_IDENTITY_KIND = "uldp-silo-identity"
_ROSTER_KIND = "uldp-federation-roster"
#: Bytes of a file the loaders read at most (a roster of MAX_SILOS entries is about 0.5 MB).
_MAX_FILE_BYTES = 1 << 20


class RosterMismatch(ValueError):
    """A relayed DH key that the roster does not vouch for; ``silo`` names the slot whose key failed."""

    def __init__(self, message: str, *, silo: int) -> None:
        super().__init__(message)
        self.silo = silo


def check_name(name: object) -> str:
    """``name`` if it is a silo name (:data:`NAME_PATTERN`), else ``ValueError`` naming it and what is allowed."""
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise ValueError(
            f"a silo name is 1-64 letters, digits, '.', '_' or '-' starting with a letter or digit, "
            f"got {name!r}"
        )
    return name


def check_fingerprint(value: object) -> str:
    """``value`` if it is a fingerprint (64 lowercase hex digits), else ``ValueError``."""
    if not isinstance(value, str) or not _FINGERPRINT.fullmatch(value):
        raise ValueError(
            f"an identity fingerprint is 64 lowercase hex digits (uldp roster identity prints it), "
            f"got {value!r}"
        )
    return value


def fingerprint(public_key: bytes) -> str:
    """The fingerprint of an Ed25519 public key: SHA-256 of a label and its 32 raw bytes, in hex."""
    return hashlib.sha256(b"uldp/identity/ed25519/" + bytes(public_key)).hexdigest()


@dataclass(frozen=True)
class Identity:
    """A silo's long-term identity: its roster name and Ed25519 private key (never leaves the silo).

    Args:
        name: The silo's name in the roster.
        private_key: Its Ed25519 private key.
    """

    name: str
    private_key: Ed25519PrivateKey = field(repr=False)

    def __post_init__(self) -> None:
        check_name(self.name)

    @classmethod
    def generate(cls, name: str) -> Identity:
        """A new identity for ``name`` (Ed25519 from the OS CSPRNG)."""
        return cls(name, Ed25519PrivateKey.generate())

    @property
    def public_key(self) -> bytes:
        """The 32-byte Ed25519 public key."""
        return self.private_key.public_key().public_bytes_raw()

    @property
    def fingerprint(self) -> str:
        """The fingerprint the other silos put in their roster (:func:`fingerprint`)."""
        return fingerprint(self.public_key)


def write_identity(path: str | os.PathLike, name: str, *, force: bool = False) -> Identity:
    """Create a new identity for ``name`` in ``path`` (JSON, mode 0600, written atomically) and return it.

    Raises:
        ValueError: a bad name, or ``path`` exists and ``force`` is not set (an identity is replaced only on purpose:
            the other silos must then replace its fingerprint).
    """
    target = Path(path)
    if target.exists() and not force:
        raise ValueError(
            f"identity file {target} exists already; rotate it with force=True (uldp roster identity "
            f"--force), then every silo replaces its fingerprint"
        )
    identity = Identity.generate(name)
    document = {
        "kind": _IDENTITY_KIND,
        "schema": SCHEMA,
        "name": name,
        "private_key": identity.private_key.private_bytes_raw().hex(),
    }
    write_bytes_atomic(target, (json.dumps(document, indent=1) + "\n").encode(), private=True)
    return identity


def _read_document(path: str | os.PathLike, kind: str) -> dict[str, Any]:
    """The JSON object of ``kind`` and :data:`SCHEMA` in ``path`` (at most :data:`_MAX_FILE_BYTES`)."""
    target = Path(path)
    size = target.stat().st_size
    if size > _MAX_FILE_BYTES:
        raise ValueError(f"{target}: {size} bytes, more than a {kind} file holds")
    try:
        document = json.loads(target.read_bytes())
    except (ValueError, RecursionError) as error:
        raise ValueError(f"{target} is not a {kind} file: {error}") from error
    if (
        not isinstance(document, dict)
        or document.get("kind") != kind
        or document.get("schema") != SCHEMA
    ):
        raise ValueError(f"{target} is not a {kind} file of schema {SCHEMA}")
    return document


def read_identity(path: str | os.PathLike) -> Identity:
    """The identity :func:`write_identity` wrote.

    Raises:
        ValueError: a file that others may read or write (as ssh refuses such a key), not an identity file, or a
            field of the wrong type or size.
    """
    target = Path(path)
    mode = stat.S_IMODE(target.stat().st_mode)
    if mode & 0o077:
        raise ValueError(
            f"identity file {target} has mode {mode:o}; it must be readable by its owner only (chmod 600)"
        )
    document = _read_document(target, _IDENTITY_KIND)
    key = document.get("private_key")
    if set(document) != {"kind", "schema", "name", "private_key"} or not (
        isinstance(key, str) and re.fullmatch(r"[0-9a-f]{64}", key)
    ):
        raise ValueError(
            f"identity file {target} must hold kind, schema, name and a 32-byte hex private key"
        )
    return Identity(document["name"], Ed25519PrivateKey.from_private_bytes(bytes.fromhex(key)))


@dataclass(frozen=True)
class RosterEntry:
    """One silo of the roster: its name and its identity's fingerprint."""

    name: str
    fingerprint: str

    def __post_init__(self) -> None:
        check_name(self.name)
        check_fingerprint(self.fingerprint)


@dataclass(frozen=True)
class Roster:
    """The federation's silos in order, as one silo holds them (silo ``s`` is ``silos[s]``).

    Raises:
        ValueError: no silo, more than :data:`MAX_SILOS`, or a name or fingerprint listed twice.
    """

    silos: tuple[RosterEntry, ...]

    def __post_init__(self) -> None:
        if not 1 <= len(self.silos) <= MAX_SILOS:
            raise ValueError(f"a roster lists 1 to {MAX_SILOS} silos, got {len(self.silos)}")
        for what in ("name", "fingerprint"):
            values = [getattr(entry, what) for entry in self.silos]
            repeated = sorted({value for value in values if values.count(value) > 1})
            if repeated:
                raise ValueError(f"a roster lists each {what} once, got {repeated} twice or more")

    @classmethod
    def of(cls, identities: Iterable[Identity]) -> Roster:
        """The roster of these identities in order (tests and in-process federations)."""
        return cls(tuple(RosterEntry(i.name, i.fingerprint) for i in identities))

    @property
    def digest(self) -> bytes:
        """SHA-256 of the entries (what every attestation signs, so silos with different rosters never agree)."""
        return hashlib.sha256(_canonical(self.silos)).digest()

    def index(self, name: str) -> int:
        """The silo number of ``name``.

        Raises:
            ValueError: ``name`` is not in the roster.
        """
        for number, entry in enumerate(self.silos):
            if entry.name == name:
                return number
        raise ValueError(
            f"silo {name!r} is not in the roster; it lists {[e.name for e in self.silos]}"
        )

    def with_entry(self, name: str, fingerprint: str, *, replace: bool = False) -> Roster:
        """This roster with ``name`` appended, or its fingerprint replaced (``replace``: a rotated identity).

        Raises:
            ValueError: ``name`` listed already without ``replace``, or missing with it.
        """
        entry = RosterEntry(name, fingerprint)
        names = [e.name for e in self.silos]
        if replace != (name in names):
            raise ValueError(
                f"silo {name!r} is {'not ' if replace else ''}in the roster; "
                f"{'add it without' if replace else 'pass'} --replace to "
                f"{'add' if replace else 'rotate'} it"
            )
        if replace:
            return Roster(tuple(entry if e.name == name else e for e in self.silos))
        return Roster((*self.silos, entry))

    def check_identity(self, identity: Identity, silo: int) -> None:
        """Refuse an identity that is not the roster's silo ``silo`` (a silo's own configuration error)."""
        if not 0 <= silo < len(self.silos) or self.silos[silo] != RosterEntry(
            identity.name, identity.fingerprint
        ):
            raise ValueError(
                f"identity {identity.name!r} ({identity.fingerprint[:16]}...) is not silo {silo} of the "
                f"roster, which lists {[e.name for e in self.silos]}"
            )


def _canonical(entries: Sequence[RosterEntry]) -> bytes:
    rows = [[entry.name, entry.fingerprint] for entry in entries]
    return json.dumps(rows, separators=(",", ":")).encode()


def write_roster(path: str | os.PathLike, roster: Roster) -> None:
    """Write ``roster`` to ``path`` as JSON with its digest, atomically (public: it holds no secret)."""
    document = {
        "kind": _ROSTER_KIND,
        "schema": SCHEMA,
        "silos": [{"name": e.name, "fingerprint": e.fingerprint} for e in roster.silos],
        "digest": roster.digest.hex(),
    }
    write_bytes_atomic(Path(path), (json.dumps(document, indent=1) + "\n").encode())


def read_roster(path: str | os.PathLike) -> Roster:
    """The roster :func:`write_roster` wrote, every field checked and the digest recomputed.

    Raises:
        ValueError: not a roster file, more than :data:`MAX_SILOS` entries, a bad name or fingerprint, a name or
            fingerprint listed twice, or a digest that is not the entries' (a corrupted or edited file).
    """
    document = _read_document(path, _ROSTER_KIND)
    silos = document.get("silos")
    if set(document) != {"kind", "schema", "silos", "digest"} or not isinstance(silos, list):
        raise ValueError(f"roster file {path} must hold kind, schema, silos and digest")
    if len(silos) > MAX_SILOS:
        raise ValueError(f"roster file {path} lists {len(silos)} silos, at most {MAX_SILOS}")
    if not all(isinstance(s, dict) and set(s) == {"name", "fingerprint"} for s in silos):
        raise ValueError(f"roster file {path}: each silo is an object of name and fingerprint")
    roster = Roster(tuple(RosterEntry(s["name"], s["fingerprint"]) for s in silos))
    if document["digest"] != roster.digest.hex():
        raise ValueError(
            f"roster file {path}: its digest is not its entries' (corrupted or edited by hand); "
            f"make it again with uldp roster add"
        )
    return roster


def _signed_bytes(
    roster: Roster, *, context: bytes, silo: int, name: str, dh_public: bytes
) -> bytes:
    """What an attestation signs: a label, the roster digest, the context, the silo's number, name and DH key,
    each field length-prefixed so no two tuples give the same bytes."""
    parts = (b"uldp/roster/dh-key/v1", roster.digest, context, name.encode(), dh_public)
    return struct.pack(">I", silo) + b"".join(struct.pack(">I", len(p)) + p for p in parts)


def attest(
    identity: Identity, roster: Roster, *, silo: int, context: bytes, dh_public: bytes
) -> bytes:
    """Step 1(a), beyond the paper: this silo's DH public key signed by its identity, as
    :class:`~uldp.secure.messages.KeyAttestation` bytes to send with the key.

    Args:
        identity: This silo's identity.
        roster: The roster this silo holds (its digest is signed).
        silo: This silo's number.
        context: The session's binding (Protocol 1: stage and session id; the masked sum: its stage).
        dh_public: The 32-byte X25519 public key of this session.

    Raises:
        ValueError: ``identity`` is not the roster's silo ``silo``.
    """
    roster.check_identity(identity, silo)
    signed = _signed_bytes(
        roster, context=context, silo=silo, name=identity.name, dh_public=dh_public
    )
    return KeyAttestation(
        name=identity.name.encode(),
        identity_key=identity.public_key,
        signature=identity.private_key.sign(signed),
    ).to_bytes()


def check_directory(
    roster: Roster,
    public_keys: Sequence[bytes],
    attestations: Sequence[bytes],
    *,
    context: bytes,
) -> None:
    """Step 1(b), beyond the paper: every relayed DH key is signed by the identity the roster lists for its slot.

    Raises:
        RosterMismatch: a directory of another size than the roster, or a slot whose attestation is missing,
            malformed, of another name or identity, or whose signature fails; ``silo`` names the first such slot.
    """
    if len(public_keys) != len(roster.silos):
        raise RosterMismatch(
            f"the directory lists {len(public_keys)} DH keys, the roster {len(roster.silos)} silos",
            silo=min(len(public_keys), len(roster.silos)),
        )
    for silo, (entry, dh_public) in enumerate(zip(roster.silos, public_keys, strict=True)):
        failure = (
            f"silo {silo} ({entry.name}): its relayed DH key is not signed by its roster identity"
        )
        if silo >= len(attestations):
            raise RosterMismatch(f"{failure} (no attestation relayed)", silo=silo)
        try:
            attestation = KeyAttestation.from_bytes(attestations[silo])
        except ValueError as error:
            raise RosterMismatch(f"{failure} ({error})", silo=silo) from error
        if (
            attestation.name != entry.name.encode()
            or fingerprint(attestation.identity_key) != entry.fingerprint
        ):
            raise RosterMismatch(
                f"{failure} (signed as another silo or by another identity)", silo=silo
            )
        signed = _signed_bytes(
            roster, context=context, silo=silo, name=entry.name, dh_public=dh_public
        )
        try:
            public = Ed25519PublicKey.from_public_bytes(attestation.identity_key)
            public.verify(attestation.signature, signed)
        except (ValueError, InvalidSignature) as error:
            raise RosterMismatch(
                f"{failure} (a key swapped by the relay, or one of another session); nothing is "
                f"derived from this directory",
                silo=silo,
            ) from error


@dataclass(frozen=True)
class Credentials:
    """A silo's identity with the roster it holds: what a silo needs to sign its DH key and check the others'.

    Args:
        identity: This silo's identity (:func:`read_identity`).
        roster: The federation's roster, this silo's copy (:func:`read_roster`).
    """

    identity: Identity
    roster: Roster

    def check_silo(self, silo: int, n_silos: int) -> None:
        """Refuse a roster of another size than the federation's, or an identity that is not its silo ``silo``.

        Raises:
            ValueError: naming the two sizes, or the identity and the roster's names.
        """
        if len(self.roster.silos) != n_silos:
            raise ValueError(
                f"silo {silo}: the roster lists {len(self.roster.silos)} silos, the federation has "
                f"{n_silos}"
            )
        self.roster.check_identity(self.identity, silo)

    def signed(self, message: DhPublicKeyMessage, *, context: bytes) -> DhPublicKeyMessage:
        """``message`` (this silo's DH key) with its attestation (:func:`attest`)."""
        attestation = attest(
            self.identity,
            self.roster,
            silo=message.silo,
            context=context,
            dh_public=message.public_key,
        )
        return DhPublicKeyMessage(message.silo, message.public_key, attestation)

    def check(self, directory: DhDirectoryMessage, *, context: bytes) -> None:
        """:func:`check_directory` on a relayed directory.

        Raises:
            RosterMismatch: see :func:`check_directory`.
        """
        check_directory(self.roster, directory.public_keys, directory.attestations, context=context)


def read_credentials(
    identity: str | os.PathLike | None, roster: str | os.PathLike | None
) -> Credentials | None:
    """A silo's :class:`Credentials` from its identity file and roster file (both or neither: None).

    Raises:
        ValueError: one file without the other, or see :func:`read_identity` and :func:`read_roster`.
    """
    if identity is None and roster is None:
        return None
    if identity is None or roster is None:
        raise ValueError(
            f"a roster file ({roster}) without an identity file ({identity}), or the reverse: a silo "
            f"authenticates keys with both"
        )
    return Credentials(read_identity(identity), read_roster(roster))
