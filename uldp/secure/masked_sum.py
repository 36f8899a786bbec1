"""Secure aggregation of the silos' plain updates with Protocol 1's pairwise masks, without the encrypted weights.

The methods whose weights need no counts (ULDP-AVG, ULDP-SGD with uniform or fixed weights, ULDP-NAIVE,
ULDP-GROUP-k) have nothing for Protocol 1's Paillier part to compute, but the server must still see only the sum of
the silos' updates: each silo's own update carries noise ``sigma C / sqrt(|S|)`` only, and the paper assumes secure
aggregation throughout (Section 3.1; the end of the ULDP-NAIVE paragraph of Section 3.3). This module is Protocol 1's
masking alone (steps 1(a)-(b) and 2(c) of Section 4, the additive masks of Bonawitz et al. 2017 without dropout
recovery: every silo answers each round or nothing is decoded):

Set-up (once per session):
  1. :data:`STAGE_KEY`: each silo draws an X25519 key pair (OS CSPRNG) and sends its public key (step 1(a)).
  2. :data:`STAGE_DIRECTORY`: the server relays the directory of public keys; each silo checks its own key is in
     its place and derives with every other silo a pairwise mask key (X25519 + HKDF-SHA256, bound to this session:
     the SHA-256 of the directory; step 1(b), :func:`uldp.secure.keys.derive_pairwise_keys`).
     Beyond the paper, a silo given an identity and the federation's roster (:mod:`uldp.secure.roster`) signs its
     key at step 1 and, at step 2, checks every relayed key's signature against the roster before it derives
     anything: a server that puts keys of its own in the directory (and would otherwise know every pair's masks
     and read each silo's update) is refused by a :class:`~uldp.secure.roster.RosterMismatch` naming the silo whose
     key failed. Without a roster the keys are as the server relays them: private against a semi-honest server
     only.
Beyond the paper, a user sample the server cannot see (:mod:`uldp.secure.sampling`; a silo given ``sample_rate``, a
server given ``hidden_sample``): at step 2 each silo also answers with a 32-byte contribution sealed for every other
silo, and :data:`STAGE_SAMPLE` relays them; each silo's seed is the hash of all of them, and
:meth:`MaskedSumSilo.sample` is round t's sample, the same in every silo, which the silo's update is computed on.
Round t (:data:`STAGE_UPDATE`, one message per silo):
  3. silo s encodes its update x_s in fixed point, ``E_s = rint(x_s 2^f)`` (:func:`uldp.secure.encoding.encode`,
     f = :data:`RESOLUTION_BITS`), and sends ``E_s + sum_{s<s'} r_ss' - sum_{s>s'} r_ss'`` in the ring
     Z_(2^64), the masks ``r_ss'`` read from the ChaCha20 stream of the pair's key with the round in the nonce
     (:class:`uldp.secure.masks.KeyStream`, purpose :data:`~uldp.secure.masks.PURPOSE_SUM`): uniform on Z_(2^64),
     so one silo's message is independent of its update.
  4. the server adds every silo's message in Z_(2^64): the masks cancel exactly (proof of Theorem 4), and the sum,
     read as a signed integer and divided by 2^f (Algorithm 5's Decode with C_LCM = 1), is ``sum_s x_s`` within
     ``|S| 2^-(f+1)`` (each silo's rounding at most half a step).

Exactness: each silo refuses to send an encoding of magnitude at least :func:`value_limit` (``2^62 / |S|``, values
up to about ``2^26 / |S|``), so the true sum lies within +-2^62 and never wraps around the ring.

What can and cannot be attributed to one silo: a missing answer, a malformed message, one claiming another silo or
round, or of the wrong length names its sender (:class:`uldp.secure.driver.ProtocolAbort`). What a silo put inside
its masked values cannot: every message is uniform on the ring whatever the update, so a silo that sends more than
its method allows shows only in the decoded sum, which the server bounds by the sum of the silos' bounds (as with
Protocol 1) and then aborts the round without naming a silo.

The bound is on the sum, not on each silo (issue 41 item 6): the server checks ``|sum_s x_s| <= sum_s bound_s``,
so one silo may send up to |S| times its own bound (about ``(|S| - 1)`` honest silos' room besides its own) and
move the model that much more than an honest silo could; no silo is named. A range proof per silo (each encoding
within its bound, proved on the masked values) would close this slack, but none that is cheap on 2^64-ring
additive masks is known to us: Bulletproofs-style proofs need commitments in a prime-order group, at about a
millisecond of group work per coordinate and silo, i.e. minutes per round at MNIST size. The slack stays, stated.
Secure aggregation also spreads the noise: a silo's share is ``sigma C / sqrt(|S|)`` and the guarantee assumes every
other silo adds its share, so silos that collude and leave theirs out (or subtract what they know of their own)
leave the total with the honest silos' shares only (``sigma sqrt(h / |S|)`` with h honest silos); the collusion
threshold of :mod:`uldp.policy` scales each silo's noise for that.

Each silo answers each round index at most once (two masked answers of one round under the same masks would let the
server subtract them), and its secrets travel between processes only as :class:`MaskedSumState` bytes.

>>> silos = [MaskedSumSilo(s, 3) for s in range(3)]
>>> directory = DhDirectoryMessage(tuple(silo.public_key().public_key for silo in silos))
>>> for silo in silos:
...     silo.receive_directory(directory)
>>> updates = [np.array([0.5, -1.25]), np.array([2.0, 0.25]), np.array([-1.0, 1.0])]
>>> decode_sum([silo.masked_update(1, x) for silo, x in zip(silos, updates)], round_index=1, size=2,
...            n_silos=3).tolist()
[1.5, 0.0]
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from uldp.common.checks import check_integer, check_rate
from uldp.secure import encoding, keys, sampling
from uldp.secure.driver import ProtocolAbort
from uldp.secure.masks import PURPOSE_SUM, KeyStream
from uldp.secure.messages import (
    DhDirectoryMessage,
    DhPublicKeyMessage,
    MaskedSumMessage,
    MaskedSumState,
    SealedMessage,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from uldp.secure.roster import Credentials

STAGE_KEY = "sum-key"
STAGE_DIRECTORY = "sum-directory"
STAGE_UPDATE = "sum-update"
#: The set-up stages in order; then one :data:`STAGE_UPDATE` per round.
SETUP_STAGES = (STAGE_KEY, STAGE_DIRECTORY)
#: Beyond the paper: the set-up stage that relays the silos' sealed contributions to the sampling seed.
STAGE_SAMPLE = "sum-sample"
#: f: the fixed-point resolution 2^-f of the silos' updates (2^-36, about 1.5e-11, far below float32's steps).
RESOLUTION_BITS = 36
#: The ring Z_(2^64): numpy's uint64 arithmetic wraps exactly there.
RING_BITS = 64
_RING_BYTES = RING_BITS // 8
#: What a silo's attestation of its DH key binds it to (:func:`uldp.secure.roster.attest`): this protocol and stage.
ATTESTATION_CONTEXT = b"uldp/masked-sum/" + STAGE_KEY.encode()

Payloads = tuple[bytes, ...]


def value_limit(n_silos: int) -> int:
    """The bound on one silo's encoded values, ``2^62 // max(|S|, 2)``: the sum of |S| of them stays within
    +-2^62 (no wrap-around in Z_(2^64)), and each stays below :data:`uldp.secure.encoding.MAX_ENCODED_MAGNITUDE`."""
    return 2**62 // max(check_integer("n_silos", n_silos, minimum=1), 2)


def precision(n_silos: int) -> float:
    """The largest difference between the decoded sum and the exact sum of the silos' updates: |S| half-steps."""
    return n_silos * 2.0 ** -(RESOLUTION_BITS + 1)


def session_of(directory: DhDirectoryMessage) -> bytes:
    """The session's 32-byte id: SHA-256 of the directory (fresh X25519 keys make every session's masks new)."""
    return hashlib.sha256(b"uldp/masked-sum/" + b"".join(directory.public_keys)).digest()


def ring_masks(key: bytes, *, round_index: int, count: int) -> np.ndarray:
    """``count`` masks uniform on Z_(2^64) (uint64) from the stream (key, round, :data:`PURPOSE_SUM`)."""
    stream = KeyStream(key, round_index=round_index, purpose=PURPOSE_SUM)
    return np.frombuffer(stream.read(_RING_BYTES * count), dtype="<u8").astype(np.uint64)


@dataclass
class MaskedSumSilo:
    """One silo's side (steps 1-3 of the module docstring); its secrets from the OS CSPRNG.

    Args:
        silo_id: This silo's number, ``0 .. |S| - 1``.
        n_silos: |S|.
        answered_round: The last round it answered (a new session keeps it: no round index is answered twice).
        credentials: This silo's identity and the federation's roster it holds
            (:class:`~uldp.secure.roster.Credentials`): its key is signed and every relayed key checked against the
            roster (module docstring, step 2). None: keys unauthenticated (a semi-honest server only).
        sample_rate: Beyond the paper, q of this silo's policy for a user sample the server cannot see
            (:mod:`uldp.secure.sampling`): the silo takes part in :data:`STAGE_SAMPLE` and answers no round before
            it. None: no hidden sample.

    Raises:
        ValueError: a roster of another size, or an identity that is not the roster's silo ``silo_id``.
    """

    silo_id: int
    n_silos: int
    answered_round: int = 0
    credentials: Credentials | None = field(default=None, repr=False)
    sample_rate: float | None = None
    _dh_key: X25519PrivateKey = field(default_factory=keys.new_dh_private_key, repr=False)
    _mask_keys: dict[int, bytes] = field(default_factory=dict, repr=False)
    _session: bytes = field(default=b"", repr=False)
    _contribution: bytes = field(default=b"", repr=False)
    _sampling_seed: bytes = field(default=b"", repr=False)

    def __post_init__(self) -> None:
        check_integer("n_silos", self.n_silos, minimum=1)
        check_integer("silo_id", self.silo_id, minimum=0, maximum=self.n_silos - 1)
        if self.credentials is not None:
            self.credentials.check_silo(self.silo_id, self.n_silos)
        if self.sample_rate is not None:
            self.sample_rate = check_rate("sample_rate", self.sample_rate)

    @property
    def ready(self) -> bool:
        """Whether its pairwise mask keys are set (step 2 done)."""
        return bool(self._session)

    def public_key(self) -> DhPublicKeyMessage:
        """Step 1: this silo's X25519 public key, signed by its identity when it holds a roster."""
        message = DhPublicKeyMessage(
            silo=self.silo_id, public_key=keys.dh_public_bytes(self._dh_key)
        )
        if self.credentials is None:
            return message
        return self.credentials.signed(message, context=ATTESTATION_CONTEXT)

    def receive_directory(self, directory: DhDirectoryMessage) -> None:
        """Step 2: the pairwise mask keys with every other silo.

        Raises:
            ValueError: a directory of another size, without this silo's own key in its place, with a repeated key,
                or a set-up done already.
            RosterMismatch: with a roster, a relayed key its roster identity did not sign (the silo named).
        """
        if self.ready:
            raise ValueError(
                f"silo {self.silo_id}: the masked sum's set-up has run already; start a new session"
            )
        public = directory.public_keys
        if len(public) != self.n_silos or len(set(public)) != self.n_silos:
            raise ValueError(
                f"silo {self.silo_id}: the directory must hold {self.n_silos} distinct keys, got "
                f"{len(public)} ({len(set(public))} distinct)"
            )
        if public[self.silo_id] != keys.dh_public_bytes(self._dh_key):
            raise ValueError(
                f"silo {self.silo_id}: the directory does not hold this silo's key in its place"
            )
        if self.credentials is not None:
            self.credentials.check(directory, context=ATTESTATION_CONTEXT)
        self._session = session = session_of(directory)
        self._mask_keys = {
            peer: keys.derive_pairwise_keys(
                self._dh_key, public[peer], own_id=self.silo_id, peer_id=peer, session=session
            ).masks
            for peer in range(self.n_silos)
            if peer != self.silo_id
        }

    def net_mask(self, round_index: int, count: int) -> np.ndarray:
        """``sum_{s<s'} r_ss' - sum_{s>s'} r_ss'`` in Z_(2^64): summed over the silos these cancel exactly."""
        total = np.zeros(count, dtype=np.uint64)
        for peer, key in sorted(self._mask_keys.items()):
            masks = ring_masks(key, round_index=round_index, count=count)
            total = total + masks if self.silo_id < peer else total - masks
        return total

    def sealed_contributions(self) -> list[SealedMessage]:
        """Beyond the paper, step 2: a fresh contribution to the sampling seed, sealed for every other silo."""
        self._contribution = sampling.new_contribution()
        return [
            sampling.seal_contribution(key, self._contribution, sender=self.silo_id, recipient=peer)
            for peer, key in sorted(self._mask_keys.items())
        ]

    def receive_contributions(self, messages: Sequence[SealedMessage]) -> None:
        """Beyond the paper, :data:`STAGE_SAMPLE`: open every other silo's contribution; the seed is their hash.

        Raises:
            ValueError: before step 2, a seed set already, or see :func:`uldp.secure.sampling.open_contributions`.
        """
        if not self._contribution or self._sampling_seed:
            raise ValueError(
                f"silo {self.silo_id}: the sampling contributions come once, after {STAGE_DIRECTORY}"
            )
        opened = sampling.open_contributions(
            messages, own_id=self.silo_id, pair_keys=self._mask_keys
        )
        opened[self.silo_id] = self._contribution
        ordered = [opened[s] for s in range(self.n_silos)]
        self._sampling_seed = sampling.agreed_seed(ordered, session=self._session)

    def sample(self, round_index: int, n_users: int) -> np.ndarray:
        """Round ``round_index``'s user sample (bool [n_users]), the same in every silo; the server never sees it.

        Raises:
            ValueError: no ``sample_rate``, or before :data:`STAGE_SAMPLE`.
        """
        if self.sample_rate is None or not self._sampling_seed:
            raise ValueError(
                f"silo {self.silo_id}: no hidden sample (a sample_rate and the {STAGE_SAMPLE} stage)"
            )
        return sampling.sample_users(
            self._sampling_seed, round_index=round_index, n_users=n_users, q=self.sample_rate
        )

    def check_round(self, round_index: int) -> None:
        """Refuse a round before the set-up (a secure silo never sends its update unmasked) or one not after the
        last it answered (its masks would repeat).

        Raises:
            ValueError: naming the round and why.
        """
        if not self.ready or (self.sample_rate is not None and not self._sampling_seed):
            raise ValueError(
                f"silo {self.silo_id}: a masked update before the masked sum's set-up; a secure silo "
                f"never sends its update unmasked (nor, with a hidden sample, before its seed)"
            )
        if (
            isinstance(round_index, bool)
            or not isinstance(round_index, int)
            or round_index <= self.answered_round
        ):
            raise ValueError(
                f"silo {self.silo_id} refuses round {round_index!r}: it answered round "
                f"{self.answered_round} (each round index at most once, its masks never reused)"
            )

    def masked_update(self, round_index: int, update: np.ndarray) -> MaskedSumMessage:
        """Step 3: this silo's update, encoded and masked, for round ``round_index``; the round is spent first.

        Raises:
            ValueError: before the set-up, a round not after the last one answered, an update that is not a finite
                vector, or one whose encoding reaches :func:`value_limit` (it could wrap the sum around).
        """
        self.check_round(round_index)
        values = np.asarray(update, dtype=np.float64)
        if values.ndim != 1:
            raise ValueError(
                f"silo {self.silo_id}: the update must be a vector, got shape {values.shape}"
            )
        encoded = encoding.encode(values, resolution_bits=RESOLUTION_BITS)
        limit = value_limit(self.n_silos)
        if encoded.size and int(np.abs(encoded).max()) >= limit:
            raise ValueError(
                f"silo {self.silo_id}: an update coordinate of {float(np.abs(values).max()):.3g} is past "
                f"the masked sum's range {limit / 2.0**RESOLUTION_BITS:.3g} for {self.n_silos} silos"
            )
        self.answered_round = round_index
        masked = encoded.astype(np.uint64) + self.net_mask(
            round_index, values.size
        )  # two's complement in the ring
        return MaskedSumMessage(
            round_index=round_index,
            silo=self.silo_id,
            parameters=values.size,
            values=masked.astype("<u8").tobytes(),
        )

    def answer(
        self,
        stage: str,
        round_index: int,
        payloads: Payloads,
        *,
        update: Callable[[], np.ndarray] | None = None,
    ) -> Payloads:
        """This silo's answer to one stage: every transport's entry point (as Protocol 1's ``SiloDriver.answer``).

        Args:
            stage: :data:`STAGE_KEY`, :data:`STAGE_DIRECTORY`, :data:`STAGE_SAMPLE` or :data:`STAGE_UPDATE`.
            round_index: The round (0 for the set-up).
            payloads: The server's message (the directory for :data:`STAGE_DIRECTORY`, nothing otherwise).
            update: For :data:`STAGE_UPDATE`: ``() -> update``, called only once the round may be answered.

        Raises:
            ValueError: an unknown stage, a stage out of order, a repeated round, or see :meth:`masked_update`.
        """
        if stage == STAGE_KEY:
            return (self.public_key().to_bytes(),)
        if stage == STAGE_DIRECTORY:
            if len(payloads) != 1:
                raise ValueError(
                    f"{STAGE_DIRECTORY} carries one directory, got {len(payloads)} payloads"
                )
            self.receive_directory(DhDirectoryMessage.from_bytes(payloads[0]))
            if self.sample_rate is None:
                return ()
            return tuple(message.to_bytes() for message in self.sealed_contributions())
        if stage == STAGE_SAMPLE:
            self.receive_contributions([SealedMessage.from_bytes(p) for p in payloads])
            return ()
        if stage != STAGE_UPDATE:
            raise ValueError(
                f"unknown masked-sum stage {stage!r}; the stages are "
                f"{(*SETUP_STAGES, STAGE_SAMPLE, STAGE_UPDATE)}"
            )
        if update is None:
            raise ValueError(f"{STAGE_UPDATE} needs the silo's update")
        self.check_round(round_index)  # before anything is computed
        return (self.masked_update(round_index, update()).to_bytes(),)

    def export_state(self) -> bytes:
        """Its secrets and progress as :class:`MaskedSumState` bytes (kept where the silo keeps state, never sent)."""
        peers = sorted(self._mask_keys)
        return MaskedSumState(
            silo=self.silo_id,
            n_silos=self.n_silos,
            dh_private=self._dh_key.private_bytes_raw(),
            session=self._session,
            peers=tuple(peers),
            mask_keys=tuple(self._mask_keys[p] for p in peers),
            answered_round=self.answered_round,
            contribution=self._contribution,
            sampling_seed=self._sampling_seed,
        ).to_bytes()

    @classmethod
    def restore(
        cls,
        state: bytes,
        *,
        credentials: Credentials | None = None,
        sample_rate: float | None = None,
    ) -> MaskedSumSilo:
        """The silo :meth:`export_state` wrote, with its credentials and sampling rate (the silo's own files).

        Raises:
            ValueError: no masked-sum state, or keys of the wrong length or for the wrong peers.
        """
        record = MaskedSumState.from_bytes(state)
        silo = cls(
            record.silo,
            record.n_silos,
            answered_round=record.answered_round,
            credentials=credentials,
            sample_rate=sample_rate,
            _dh_key=X25519PrivateKey.from_private_bytes(record.dh_private),
        )
        others = tuple(p for p in range(record.n_silos) if p != record.silo)
        if record.peers and (
            tuple(record.peers) != others
            or len(record.mask_keys) != len(others)
            or any(len(key) != 32 for key in record.mask_keys)
        ):
            raise ValueError(
                f"masked-sum state of silo {record.silo} holds keys for peers {record.peers}, expected "
                f"32-byte keys for {others}"
            )
        if bool(record.session) != (len(record.peers) == len(others)) or len(
            record.session
        ) not in (0, 32):
            raise ValueError(
                f"masked-sum state of silo {record.silo}: a session id without its keys or the reverse"
            )
        if any(
            len(value) not in (0, sampling.SEED_BYTES)
            for value in (record.contribution, record.sampling_seed)
        ):
            raise ValueError(
                f"masked-sum state of silo {record.silo}: a sampling contribution or seed that is not "
                f"{sampling.SEED_BYTES} bytes"
            )
        silo._mask_keys = dict(zip(record.peers, record.mask_keys, strict=True))
        silo._session = record.session
        silo._contribution, silo._sampling_seed = record.contribution, record.sampling_seed
        return silo


def decode_sum(
    messages: Sequence[MaskedSumMessage], *, round_index: int, size: int, n_silos: int
) -> np.ndarray:
    """Step 4: every silo's masked update -> ``sum_s x_s`` (float64, within :func:`precision`).

    Raises:
        ProtocolAbort: a silo missing or repeated, or a message of another round, size or length (the silo named).
    """
    by_silo: dict[int, MaskedSumMessage] = {}
    for message in messages:
        if not 0 <= message.silo < n_silos or message.silo in by_silo:
            raise ProtocolAbort(
                f"{STAGE_UPDATE}: a masked update from silo {message.silo}, unknown or repeated",
                silo=message.silo if 0 <= message.silo < n_silos else None,
            )
        if (
            message.round_index != round_index
            or message.parameters != size
            or len(message.values) != 8 * size
        ):
            raise ProtocolAbort(
                f"{STAGE_UPDATE}: silo {message.silo} sent a masked update of round "
                f"{message.round_index} with {message.parameters} parameters in {len(message.values)} "
                f"bytes, expected round {round_index} and {size} parameters",
                silo=message.silo,
            )
        by_silo[message.silo] = message
    missing = sorted(set(range(n_silos)) - set(by_silo))
    if missing:
        raise ProtocolAbort(
            f"{STAGE_UPDATE}: no masked update from silo(s) {missing}; nothing is decoded",
            silo=missing[0],
        )
    total = np.zeros(size, dtype=np.uint64)
    for message in by_silo.values():
        total += np.frombuffer(message.values, dtype="<u8")
    return np.ldexp(total.view(np.int64).astype(np.float64), -RESOLUTION_BITS)


class MaskedSumServer:
    """The server's side over any transport (as :class:`uldp.secure.driver.ServerDriver`).

    Args:
        n_silos: |S|.
        exchange: ``(stage, round_index, {silo: payloads}) -> {silo: payloads}``, one message out and one answer
            back per silo.
        hidden_sample: Beyond the paper, relay the silos' sealed contributions to their sampling seed
            (:data:`STAGE_SAMPLE`, :mod:`uldp.secure.sampling`); the server then never knows the sample.
    """

    def __init__(
        self,
        n_silos: int,
        exchange: Callable[[str, int, dict[int, Payloads]], Mapping[int, Payloads]],
        *,
        hidden_sample: bool = False,
    ) -> None:
        self.n_silos = check_integer("n_silos", n_silos, minimum=1)
        self._exchange = exchange
        self._ready = False
        self.hidden_sample = hidden_sample

    def _ask(self, stage: str, payloads: dict[int, Payloads]) -> dict[int, Payloads]:
        answers = self._exchange(stage, 0, payloads)
        missing = sorted(set(payloads) - set(answers))
        if missing:
            raise ProtocolAbort(f"{stage}: no answer from silo(s) {missing}", silo=missing[0])
        return {s: tuple(answers[s]) for s in range(self.n_silos)}

    def setup(self) -> None:
        """Steps 1-2: collect the silos' X25519 public keys and relay the directory.

        Raises:
            ProtocolAbort: a missing or malformed key, or one that claims another silo (the silo named).
        """
        if self._ready:
            raise ProtocolAbort(
                "the masked sum's set-up has run already; start a new session for new keys"
            )
        public: list[bytes] = []
        signed: list[bytes] = []
        for silo, payloads in self._ask(STAGE_KEY, dict.fromkeys(range(self.n_silos), ())).items():
            try:
                if len(payloads) != 1:
                    raise ValueError(f"{len(payloads)} payloads instead of one")
                message = DhPublicKeyMessage.from_bytes(payloads[0])
                if message.silo != silo or len(message.public_key) != keys.X25519_PUBLIC_BYTES:
                    raise ValueError(
                        f"a key of {len(message.public_key)} bytes claiming silo {message.silo}"
                    )
            except ValueError as error:
                raise ProtocolAbort(
                    f"{STAGE_KEY}: silo {silo} sent a bad public key: {error}", silo=silo
                ) from error
            public.append(message.public_key)
            signed.append(message.attestation)
        directory = DhDirectoryMessage(
            public_keys=tuple(public), attestations=tuple(signed) if any(signed) else ()
        ).to_bytes()
        sealed = self._ask(STAGE_DIRECTORY, dict.fromkeys(range(self.n_silos), (directory,)))
        if self.hidden_sample:
            self._ask(STAGE_SAMPLE, self._route(sealed))
        self._ready = True

    def _route(self, answers: Mapping[int, Payloads]) -> dict[int, Payloads]:
        """Each silo's sealed contributions, to their recipients (one from each other silo, or an abort)."""
        inbox: dict[int, list[bytes]] = {s: [] for s in range(self.n_silos)}
        for silo, payloads in answers.items():
            try:
                messages = [SealedMessage.from_bytes(p) for p in payloads]
                recipients = sorted(m.recipient for m in messages)
                if any(m.sender != silo for m in messages) or recipients != [
                    s for s in range(self.n_silos) if s != silo
                ]:
                    raise ValueError(f"contributions from {silo} to {recipients}")
            except ValueError as error:
                raise ProtocolAbort(
                    f"{STAGE_DIRECTORY}: silo {silo} sent bad sampling contributions: {error}",
                    silo=silo,
                ) from error
            for message, data in zip(messages, payloads, strict=True):
                inbox[message.recipient].append(data)
        return {s: tuple(inbox[s]) for s in range(self.n_silos)}

    def finish_round(
        self, round_index: int, answers: Mapping[int, Payloads], size: int
    ) -> np.ndarray:
        """Step 4: every silo's answer (one :class:`MaskedSumMessage` each) -> the decoded sum, float64 [size].

        Raises:
            ProtocolAbort: before the set-up, or a missing or malformed answer (the silo named); nothing decoded.
        """
        if not self._ready:
            raise ProtocolAbort(
                f"round {round_index} before the masked sum's set-up: call setup() first"
            )
        messages = []
        for silo in sorted(answers):
            try:
                if len(answers[silo]) != 1:
                    raise ValueError(f"{len(answers[silo])} payloads instead of one")
                message = MaskedSumMessage.from_bytes(answers[silo][0])
            except ValueError as error:
                raise ProtocolAbort(
                    f"{STAGE_UPDATE}: silo {silo} sent a bad masked update: {error}", silo=silo
                ) from error
            if message.silo != silo:
                raise ProtocolAbort(
                    f"{STAGE_UPDATE}: silo {silo} sent a masked update claiming silo {message.silo}",
                    silo=silo,
                )
            messages.append(message)
        return decode_sum(messages, round_index=round_index, size=size, n_silos=self.n_silos)
