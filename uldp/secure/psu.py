"""Private set union of the silos' patient ids by commutative Diffie-Hellman blinding: the users' index space U.

Which protocol: the commutative-encryption set union of Meadows (1986) and Huberman, Franklin and Hogg (1999), as
in the DH-PSI family. Every silo ``s`` draws a fresh secret exponent ``a_s`` (``secrets``, uniform in
``[1, q - 1]``) for one run and never reuses it. A patient id ``x`` is hashed to the order-``q`` subgroup of
quadratic residues of a safe prime ``p = 2q + 1``: ``H(x) = (SHAKE-256(label | group | session | x) mod p)^2``
(a full-domain hash, squared). The steps, as :class:`UnionSilo`'s methods and the server's relay
(:func:`relay_union`):

0. ``hello``: each silo answers a fresh nonce and its number of distinct patients ``|X_s|``. The server sends every
   silo the roster (names in sorted order, their hellos); the session id is the SHA-256 of the roster.
1. ``start``: silo ``s`` shuffles its ids (OS CSPRNG) and sends ``[H(x)^{a_s}]`` to silo ``s + 1``.
2. ``hop`` ``k = 1 .. |S| - 1``: silo ``i`` receives silo ``i - k``'s list from ``i - 1``, raises every element to
   ``a_i`` *in place* (the order is the owner's shuffle) and sends it to ``i + 1``; after hop ``|S| - 1`` the list
   is back at its owner, every element ``F(x) = H(x)^{a_0 a_1 ... a_{|S|-1}}`` (exponentiation commutes).
3. ``share``: the owner now knows ``F(x)`` of each of its own ids and sends its set of ``F`` values, sorted, with
   its counts ``n_su`` where the method needs them in the clear (else 1), to every silo.
4. ``finish``: each silo takes the union of the ``|S|`` sets, sorted: user ``u`` of the federation is the ``u``-th
   ``F`` value, and a silo numbers its own patients by looking their ``F`` up.

The group and the messages (hello, roster, sealed relay message) and their checks are in
:mod:`uldp.secure.psu_messages`; this module re-exports them.

Every relayed list is sealed (ChaCha20-Poly1305, :mod:`uldp.secure.keys`) under a key derived from the silos'
relay key ``K`` (:mod:`uldp.flower.pseudonyms`: a file only the silos hold), with the session, step, sender,
recipient and owner as associated data. ``K`` only seals: no id ever goes through a keyed function of ``K``.

What each party learns (semi-honest parties, the server not colluding with a silo):

- The server: |S|, each silo's ``|X_s|`` (in the hellos and the ciphertexts' sizes) and |U| with a digest of the
  sorted ``F`` values (the silos' answers to the federation stage, so that it can check that they agree). Every
  list it relays is sealed, so it sees no blinded value, hence not which silo holds which user, nor any overlap.
  Sending, repeating, reordering or leaving out messages gains it nothing: each silo answers each step once, in
  order, for the one session it joined, and refuses anything else by name (:class:`RelayRefused`); a new session
  draws new exponents, and its lists are sealed again.
- A silo: the sets of ``F`` values of every other silo. ``F`` is a pseudorandom value under the decisional
  Diffie-Hellman assumption in the random-oracle model: a silo can raise ``H(guess)`` to its own exponent only, so
  it cannot test a guessed id against another silo's users (the dictionary attack on the shared HMAC key of the
  previous scheme; ``tests/test_psu.py`` runs it). Comparing sets it does learn |U|, every silo's ``|X_t|``, which
  of its *own* patients each other silo also holds, and the sizes of the overlaps between other silos' sets (which
  pseudorandom users two other silos share, not who they are); with counts shared (plain ULDP-AVG-w, the explicit
  opt-out of Protocol 1) also ``n_tu`` of every silo for each pseudorandom user. That is what the enhanced weights
  need: ``N_u`` is a sum over the silos holding ``u``, and Protocol 1 (Section 4 of the paper) assumes U is agreed
  on; a hospital learns that a patient it treats was also treated elsewhere, not anything about a patient it
  does not treat.
- A silo that departs from the protocol and enters guessed ids in its own set learns which guesses other silos
  hold; no set union protects against that (its output, |U|, moves with them); the silos' set sizes are public to
  the silos, which can refuse an implausible one.

Groups: :data:`DEFAULT_GROUP` is RFC 3526's 2048-bit MODP group 14 (about 112-bit security); ``"modp3072"`` (RFC
3526 group 15, about 128-bit, as the paper's 3072-bit Paillier key) costs about twice as much per exponentiation.
Groups under 2048 bits are refused unless ``insecure_test_group=True`` (tests only: :data:`TEST_GROUP`, 256 bits).
Cost: each element is raised once by every silo, so silo ``i`` computes ``sum_s |X_s|`` exponentiations (its own
hashing is a squaring), ``(|S| + 3)`` exchanges in all (``benchmarks/psu.py``).

Example (an in-process run, as the silos would run it through the server):

>>> results = private_set_union([["ann", "bob"], ["bob", "cy"]], group=TEST_GROUP, insecure_test_group=True)
>>> [r.n_users for r in results], int(results[0].index_of(["bob"])[0]) == int(results[1].index_of(["bob"])[0])
([3, 3], True)
"""

from __future__ import annotations

import hashlib
import itertools
import json
import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING

import gmpy2
import numpy as np

from uldp.secure.keys import derive_key, open_sealed, seal
from uldp.secure.psu_messages import (
    ALL_SILOS,
    DEFAULT_GROUP,
    GROUPS as GROUPS,
    MIN_GROUP_BITS as MIN_GROUP_BITS,
    MIN_RELAY_KEY_BYTES,
    NAMED_GROUPS as NAMED_GROUPS,
    NONCE_BYTES,
    TEST_GROUP as TEST_GROUP,
    Hello,
    PsuGroup,
    RelayMessage,
    RelayRefused,
    Roster,
    check_group,
    group_named,
    size_of,
)  # the names "as" themselves only re-exported: callers read them from psu as before

if TYPE_CHECKING:
    from collections.abc import Callable, Hashable, Iterable, Sequence


#: Bytes of each count n_su in a share (big-endian).
_COUNT = np.dtype(">u8")


def id_keys(patient_ids: Iterable[Hashable]) -> np.ndarray:
    """SHA-256 (hex) of each id's text (``str(id)``), in order: how a silo keeps its own patients (never sent)."""
    return np.array([hashlib.sha256(str(i).encode()).hexdigest() for i in patient_ids], dtype="U64")


def lookup(
    own_keys: np.ndarray, own_indices: np.ndarray, patient_ids: Iterable[Hashable]
) -> np.ndarray:
    """The user number of each id (one per record), from a silo's sorted :func:`id_keys` and their numbers.

    Raises:
        ValueError: An id that was not in this silo's set at the union (its files changed since).
    """
    keys = id_keys(patient_ids)
    where = np.searchsorted(own_keys, keys)
    known = where < own_keys.size
    if not known.all() or not np.array_equal(own_keys[where], keys):
        raise ValueError(
            "patients that were not in this silo's set at the union (its files changed since the "
            "federation stage?)"
        )
    return np.asarray(own_indices, dtype=np.int64)[where]


@dataclass(frozen=True)
class UnionResult:
    """What one silo holds after the union.

    Attributes:
        index: This silo's number (its name's place in sorted order).
        n_users: |U|.
        digest: SHA-256 (hex) of the sorted ``F`` values (the server checks that every silo has the same).
        own_keys: :func:`id_keys` of this silo's distinct patients, sorted.
        own_indices: Each of those patients' user number in ``[0, |U|)``.
        counts: int64 ``[|S|, |U|]``: this silo's row its ``n_su``; another silo's row its ``n_tu`` if the counts
            were shared, else 1 where it holds the user.
    """

    index: int
    n_users: int
    digest: str
    own_keys: np.ndarray
    own_indices: np.ndarray
    counts: np.ndarray

    def index_of(self, patient_ids: Iterable[Hashable]) -> np.ndarray:
        """The user number of each id (:func:`lookup`).

        Raises:
            ValueError: An id that was not in this silo's set at the union.
        """
        return lookup(self.own_keys, self.own_indices, patient_ids)


class UnionSilo:
    """One silo's side of the union: one session, each step once and in order.

    Args:
        name: The silo's name (its place in the roster's sorted names is its number).
        patient_ids: The raw patient id of each of its records (compared as text; repeats are its ``n_su``).
        relay_key: The silos' relay key (at least 32 bytes; it only seals, see the module docstring).
        group: The group (:data:`DEFAULT_GROUP`; others from :data:`GROUPS`).
        insecure_test_group: Accept :data:`TEST_GROUP` (tests only).

    Raises:
        ValueError: An empty name, a short relay key or a group not accepted.
    """

    def __init__(
        self,
        name: str,
        patient_ids: Iterable[Hashable],
        *,
        relay_key: bytes,
        group: PsuGroup = DEFAULT_GROUP,
        insecure_test_group: bool = False,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"a silo's name must be a non-empty string, got {name!r}")
        if not isinstance(relay_key, bytes) or len(relay_key) < MIN_RELAY_KEY_BYTES:
            raise ValueError(
                f"the relay key must have at least {MIN_RELAY_KEY_BYTES} bytes, got {size_of(relay_key)}"
            )
        self.name, self.group = name, check_group(group, insecure_test_group=insecure_test_group)
        self._seal_key = derive_key(relay_key, label=b"psu-relay")
        self._users, counts = np.unique([str(i) for i in patient_ids], return_counts=True)
        self._counts = counts.astype(np.int64)
        # per run, fresh, never reused: a new UnionSilo (a new session) draws new ones
        self._exponent = 1 + secrets.randbelow(group.q - 1)
        self._nonce = secrets.token_bytes(NONCE_BYTES)
        self._next = (
            0  # the step expected next: 0 start, 1 .. |S| relay messages, |S| + 1 finish, then done
        )
        self._roster: Roster | None = None
        self._index = -1
        self._share_counts = False
        self._order = np.zeros(0, dtype=np.int64)  # the order of self._users in this silo's list
        self._own_final = np.zeros(0, dtype=object)  # F of each of self._users, after step |S|
        self._sent_share = b""

    @property
    def hello(self) -> Hello:
        """Stage 0's answer: this run's nonce and |X_s|."""
        return Hello(self._nonce, int(self._users.size))

    # ------------------------------------------------------------------------------------------ the steps --
    def start(self, roster: Roster, *, share_counts: bool) -> RelayMessage:
        """Step 0: ``[H(x)^{a_s}]`` of this silo's ids in a fresh random order, sealed for the next silo.

        Args:
            roster: The session (its hello for this silo must be this silo's).
            share_counts: Put this silo's ``n_su`` in its share (plain ULDP-AVG-w only); else every count is 1.

        Raises:
            RelayRefused: A second start, another group, or a roster without this silo or with another hello.
        """
        self._expect(0, "start")
        if roster.group != self.group.name:
            raise RelayRefused(
                f"the roster's group is {roster.group!r}; this silo uses {self.group.name!r}"
            )
        if self.name not in roster.names:
            raise RelayRefused(
                f"the roster {list(roster.names)} does not name this silo ({self.name!r})"
            )
        index = roster.names.index(self.name)
        if roster.hellos[index] != self.hello:
            raise RelayRefused(
                f"the roster's hello for {self.name!r} is not the one this silo sent (another session)"
            )
        self._roster, self._index, self._share_counts = roster, index, bool(share_counts)
        order = list(range(self._users.size))
        secrets.SystemRandom().shuffle(order)
        self._order = np.array(order, dtype=np.int64)
        session = roster.session
        hashed = [self.group.hash_to_group(session, str(self._users[j])) for j in self._order]
        self._next = 1
        return self._seal(0, self._successor, index, self._raise(hashed))

    def relay(self, message: RelayMessage) -> RelayMessage:
        """Steps 1 .. |S|: raise the predecessor's list to this silo's exponent and pass it on; at step |S| the
        list is this silo's own, fully raised, and the answer is its share (sorted ``F`` values and counts).

        Raises:
            RelayRefused: Out of order or repeated, another session, sender, recipient or owner, a seal that
                does not open, or a list of the wrong size or outside the group.
        """
        roster = self._roster
        n = len(roster.names) if roster is not None else 0
        step = self._expect_message(message, lambda k: 1 <= k <= n, "relay")
        owner = (self._index - step) % n
        self._check_header(
            message, step - 1, sender=(self._index - 1) % n, recipient=self._index, owner=owner
        )
        elements = self._open_list(message, owner)
        if step < n:
            self._next = step + 1
            return self._seal(step, self._successor, owner, self._raise(elements))
        if len(set(elements)) != len(elements):
            raise RelayRefused(
                "this silo's own list came back with repeated values (altered by a silo)"
            )
        final = np.empty(self._users.size, dtype=object)
        final[self._order] = elements
        self._own_final, self._next = final, step + 1
        order = sorted(range(final.size), key=lambda j: final[j])
        counts = self._counts[order] if self._share_counts else np.ones(len(order), dtype=np.int64)
        share = self._encode([final[j] for j in order]) + counts.astype(_COUNT).tobytes()
        self._sent_share = hashlib.sha256(share).digest()
        return self._seal(n, ALL_SILOS, self._index, share)

    def finish(self, shares: Sequence[RelayMessage]) -> UnionResult:
        """The union of every silo's share (one each, this silo's own unchanged), sorted: the users' numbers.

        Raises:
            RelayRefused: Before the shares are due or after the union, a share missing, repeated or not as sent,
                another session, or a malformed list.
        """
        roster = self._roster
        n = len(roster.names) if roster is not None else 0
        if roster is None or self._next != n + 1:
            raise RelayRefused(
                f"silo {self.name!r} takes the shares once, after its own list came back "
                f"(step {self._next} is due)"
            )
        senders = sorted(m.sender for m in shares)
        if senders != list(range(n)):
            raise RelayRefused(
                f"the union needs one share from each of the {n} silos, got senders {senders}"
            )
        sets, rows = [], []
        for message in sorted(shares, key=lambda m: m.sender):
            self._check_header(
                message, n, sender=message.sender, recipient=ALL_SILOS, owner=message.sender
            )
            plain = self._open(message)
            if message.sender == self._index and hashlib.sha256(plain).digest() != self._sent_share:
                raise RelayRefused("this silo's own share came back changed")
            values, counts = self._decode_share(plain, message.sender)
            sets.append(values)
            rows.append(counts)
        self._next = n + 2
        union = sorted(set().union(*sets))
        number = {value: u for u, value in enumerate(union)}
        table = np.zeros((n, len(union)), dtype=np.int64)
        for s, (values, counts) in enumerate(zip(sets, rows, strict=True)):
            table[s, [number[v] for v in values]] = counts
        own = np.array([number[v] for v in self._own_final], dtype=np.int64)
        table[self._index] = 0
        table[self._index, own] = self._counts
        keys = id_keys(self._users)
        by_key = np.argsort(keys)
        digest = hashlib.sha256(self._encode(union)).hexdigest()
        return UnionResult(
            index=self._index,
            n_users=len(union),
            digest=digest,
            own_keys=keys[by_key],
            own_indices=own[by_key],
            counts=table,
        )

    # ---------------------------------------------------------------------------------------------- checks --
    @property
    def _successor(self) -> int:
        assert self._roster is not None
        return (self._index + 1) % len(self._roster.names)

    def _expect(self, step: int, what: str) -> None:
        if self._next != step:
            raise RelayRefused(
                f"silo {self.name!r} refuses {what} (step {step}): step {self._next} is due "
                "(a step is answered once, in order)"
            )

    def _expect_message(
        self, message: RelayMessage, valid: Callable[[int], bool], what: str
    ) -> int:
        if not isinstance(message, RelayMessage):
            raise RelayRefused(f"a union {what} takes a RelayMessage, got {type(message).__name__}")
        step = message.step + 1
        if self._roster is None or not valid(self._next) or step != self._next:
            raise RelayRefused(
                f"silo {self.name!r} refuses a {what} message of step {message.step}: step "
                f"{self._next} is due (a step is answered once, in order)"
            )
        return step

    def _check_header(
        self, message: RelayMessage, step: int, *, sender: int, recipient: int, owner: int
    ) -> None:
        assert self._roster is not None
        if message.session != self._roster.session:
            raise RelayRefused(
                f"a union message of another session (step {message.step}, sender {message.sender})"
            )
        got = (message.step, message.sender, message.recipient, message.owner)
        if got != (step, sender, recipient, owner):
            raise RelayRefused(
                f"silo {self.name!r} expected (step, sender, recipient, owner) = "
                f"{(step, sender, recipient, owner)}, got {got}"
            )

    def _open(self, message: RelayMessage) -> bytes:
        try:
            return open_sealed(
                self._seal_key, message.nonce, message.ciphertext, associated_data=message.header()
            )
        except ValueError as error:
            raise RelayRefused(
                f"the union message of step {message.step} from silo {message.sender} does not open "
                "(tampered, another key, or re-addressed)"
            ) from error

    def _open_list(self, message: RelayMessage, owner: int) -> list[int]:
        assert self._roster is not None
        plain = self._open(message)
        size, width = self._roster.hellos[owner].size, self.group.element_bytes
        if len(plain) != size * width:
            raise RelayRefused(
                f"the list of silo {owner} at step {message.step} has {len(plain)} bytes, not "
                f"{size} elements of {width}"
            )
        return [
            self.group.element(plain[i * width : (i + 1) * width], what=f"the list of silo {owner}")
            for i in range(size)
        ]

    def _decode_share(self, plain: bytes, sender: int) -> tuple[list[int], np.ndarray]:
        assert self._roster is not None
        size, width = self._roster.hellos[sender].size, self.group.element_bytes
        if len(plain) != size * (width + _COUNT.itemsize):
            raise RelayRefused(
                f"the share of silo {sender} has {len(plain)} bytes, not {size} elements and counts"
            )
        values = [
            self.group.element(
                plain[i * width : (i + 1) * width], what=f"the share of silo {sender}"
            )
            for i in range(size)
        ]
        counts = np.frombuffer(plain[size * width :], dtype=_COUNT).astype(np.int64)
        if (
            any(a >= b for a, b in itertools.pairwise(values))
            or (counts < 1).any()
            or (not self._share_counts and (counts != 1).any())
        ):
            raise RelayRefused(
                f"the share of silo {sender} is not strictly sorted with counts >= 1 "
                f"({'shared counts' if self._share_counts else 'every count 1'})"
            )
        return values, counts

    # ------------------------------------------------------------------------------------------ the maths --
    def _raise(self, elements: Sequence[int]) -> bytes:
        p, a = gmpy2.mpz(self.group.p), gmpy2.mpz(self._exponent)
        return self._encode([int(gmpy2.powmod(e, a, p)) for e in elements])

    def _encode(self, elements: Sequence[int]) -> bytes:
        width = self.group.element_bytes
        return b"".join(int(e).to_bytes(width, "big") for e in elements)

    def _seal(self, step: int, recipient: int, owner: int, plain: bytes) -> RelayMessage:
        assert self._roster is not None
        header = RelayMessage(self._roster.session, step, self._index, recipient, owner, b"", b"")
        nonce, ciphertext = seal(self._seal_key, plain, associated_data=header.header())
        return RelayMessage(header.session, step, self._index, recipient, owner, nonce, ciphertext)

    # ------------------------------------------------------------------------------------------- the state --
    def export_state(self) -> bytes:
        """This silo's secrets and progress as JSON bytes (no pickle), to keep between messages in its own memory
        (a Flower SuperNode's node-local context state); never send them."""
        return json.dumps(
            {
                "name": self.name,
                "group": self.group.name,
                "exponent": format(self._exponent, "x"),
                "nonce": self._nonce.hex(),
                "next": self._next,
                "index": self._index,
                "share_counts": self._share_counts,
                "roster": None if self._roster is None else self._roster.to_bytes().decode(),
                "order": [int(j) for j in self._order],
                "own_final": [format(int(v), "x") for v in self._own_final],
                "sent_share": self._sent_share.hex(),
                "users": hashlib.sha256("\n".join(self._users).encode()).hexdigest(),
            }
        ).encode()

    @classmethod
    def restore(
        cls,
        state: bytes,
        patient_ids: Iterable[Hashable],
        *,
        relay_key: bytes,
        insecure_test_group: bool = False,
    ) -> UnionSilo:
        """The silo of :meth:`export_state`, with the same patient ids as then.

        Raises:
            ValueError: Malformed state, or patient ids that changed since.
        """
        try:
            raw = json.loads(state)
            group = group_named(raw["group"])
            silo = cls(
                raw["name"],
                patient_ids,
                relay_key=relay_key,
                group=group,
                insecure_test_group=insecure_test_group,
            )
            if raw["users"] != hashlib.sha256("\n".join(silo._users).encode()).hexdigest():
                raise ValueError(
                    "this silo's patients changed since the union began (its files changed?)"
                )
            silo._exponent, silo._nonce = int(raw["exponent"], 16), bytes.fromhex(raw["nonce"])
            silo._next, silo._index, silo._share_counts = (
                int(raw["next"]),
                int(raw["index"]),
                bool(raw["share_counts"]),
            )
            silo._roster = (
                None if raw["roster"] is None else Roster.from_bytes(raw["roster"].encode())
            )
            silo._order = np.array(raw["order"], dtype=np.int64)
            silo._own_final = np.array([int(v, 16) for v in raw["own_final"]], dtype=object)
            silo._sent_share = bytes.fromhex(raw["sent_share"])
        except (KeyError, TypeError, json.JSONDecodeError) as error:
            raise ValueError(f"a union state that does not parse: {error!r}") from error
        if not 0 < silo._exponent < group.q or len(silo._nonce) != NONCE_BYTES:
            raise ValueError("a union state with an exponent or nonce out of range")
        return silo


def relay_union(
    ask: Callable[[str, dict[int, bytes]], dict[int, bytes]], roster: Roster
) -> tuple[bytes, ...]:
    """The server's part: send the roster, then route each silo's sealed list to its recipient, |S| times.

    Args:
        ask: ``(stage, {silo number: request}) -> {silo number: reply}``, the transport: stage ``"psu-start"``
            carries the roster's bytes, ``"psu-relay"`` a :class:`RelayMessage`'s bytes.
        roster: The silos' names (sorted) and hellos, as the silos answered them.

    Returns:
        The |S| share messages (bytes), in silo order, for every silo's :meth:`UnionSilo.finish`.

    Raises:
        RuntimeError: A silo's answer that is not a union message, or two for one recipient (the server reads
            the headers only to route; every check of substance is the silos').
    """
    n = len(roster.names)
    replies = ask("psu-start", dict.fromkeys(range(n), roster.to_bytes()))
    for step in range(1, n + 1):
        routed: dict[int, bytes] = {}
        for sender, reply in sorted(replies.items()):
            try:
                message = RelayMessage.from_bytes(reply)
            except RelayRefused as error:
                raise RuntimeError(
                    f"silo {roster.names[sender]!r} answered step {step - 1} with no union message: "
                    f"{error}"
                ) from error
            if (
                message.recipient in routed
                or not 0 <= message.recipient < n
                or message.step != step - 1
            ):
                raise RuntimeError(
                    f"silo {roster.names[sender]!r} addressed step {message.step} to silo "
                    f"{message.recipient}, which has a message already or does not exist"
                )
            routed[message.recipient] = reply
        replies = ask("psu-relay", routed)
    return tuple(replies[s] for s in range(n))


def private_set_union(
    patient_ids: Sequence[Iterable[Hashable]],
    *,
    names: Sequence[str] | None = None,
    relay_key: bytes | None = None,
    group: PsuGroup = DEFAULT_GROUP,
    insecure_test_group: bool = False,
    share_counts: bool = False,
) -> list[UnionResult]:
    """Every silo's side and the server's relay in this process (tests, benchmarks; a federation runs the same
    steps through its transport, e.g. :mod:`uldp.flower.psu`).

    Args:
        patient_ids: Per silo, the raw patient id of each of its records.
        names: The silos' names (default ``"silo 0"``, ...), numbered in sorted order.
        relay_key: The silos' relay key (default: fresh from ``secrets``).
        group: The group (:data:`DEFAULT_GROUP`).
        insecure_test_group: Accept :data:`TEST_GROUP` (tests only).
        share_counts: Put each silo's ``n_su`` in its share.

    Returns:
        Each silo's :class:`UnionResult`, in the order of ``patient_ids``.
    """
    names = [f"silo {s}" for s in range(len(patient_ids))] if names is None else list(names)
    key = secrets.token_bytes(MIN_RELAY_KEY_BYTES) if relay_key is None else relay_key
    silos = [
        UnionSilo(name, ids, relay_key=key, group=group, insecure_test_group=insecure_test_group)
        for name, ids in zip(names, patient_ids, strict=True)
    ]
    ordered = sorted(silos, key=lambda silo: silo.name)
    roster = Roster(group.name, tuple(s.name for s in ordered), tuple(s.hello for s in ordered))

    def ask(stage: str, requests: dict[int, bytes]) -> dict[int, bytes]:
        if stage == "psu-start":
            return {
                s: ordered[s].start(Roster.from_bytes(r), share_counts=share_counts).to_bytes()
                for s, r in requests.items()
            }
        return {
            s: ordered[s].relay(RelayMessage.from_bytes(r)).to_bytes() for s, r in requests.items()
        }

    shares = [RelayMessage.from_bytes(m) for m in relay_union(ask, roster)]
    return [silo.finish(shares) for silo in silos]
