"""Protocol 1's one driver: a transport-independent state machine per role, the stage order and its checks.

Every transport (the in-process :class:`~uldp.secure.SecureSession`, the Flower strategy and ClientApp of
:mod:`uldp.flower`, the deployed server and silo of :mod:`uldp.deploy`, the protocol chapter) runs Protocol 1
through these two classes; they differ only in how bytes travel:

- :class:`ServerDriver` takes an ``exchange(stage, round_index, {silo: payloads}) -> {silo: payloads}`` callable
  (one message per silo out, one answer per silo back) and drives the stages in order, parsing and checking every
  answer against the silo that sent it (:class:`ProtocolAbort` names that silo).
- :class:`SiloDriver` answers one stage at a time (:meth:`SiloDriver.answer`) and refuses a stage out of order by
  name: before its set-up step, a set-up step twice, a round's update before its shares, a round index it has
  answered already or an older one (Protocol 1's pairwise masks are a function of the round index, so two masked
  updates of one round would let the key holder subtract the masks: one answer per round index, ever).

Stages, each one exchange (server -> every silo -> server):

- :data:`STAGE_KEY` (1(a)): the Paillier public key (and the backend's own keys, the lattice backend's BFV keys) ->
  each silo's X25519 public key and (beyond the paper) its ring-Pedersen parameters with a fresh nonce;
- :data:`STAGE_DIRECTORY` (1(b)): the directory of X25519 keys and the proof, for that silo, that the modulus is
  well formed (:mod:`uldp.secure.modulus_proof`) -> silo 0's sealed seed R; a silo checks the proof before it uses
  the modulus and refuses the key with a :class:`ProtocolAbort` that names the failed check; a silo with a roster
  (beyond the paper, :mod:`uldp.secure.roster`) signed its X25519 key at 1(a), bound to the session id (the
  SHA-256 of the modulus), and now checks every relayed key against its roster, refusing a swapped one with a
  :class:`ProtocolAbort` that names the silo whose key failed;
- :data:`STAGE_SEED` (1(c)-(e)): the relayed sealed seed -> each silo's blinded histogram;
- :data:`STAGE_SHARES` (2(a)-(b), shared part): the round's Enc(B_inv(N_u)) -> each silo's shares (sealed weight
  powers, or the packed backends' rescale request);
- :data:`STAGE_CHECK` (beyond the paper, with a backend that checks the server's weights): the round's weights and
  the server's answer to the shares -> each silo's weights-check ciphertext (:mod:`uldp.secure.weight_check`);
- :data:`STAGE_UPDATE` (2(b)-(c)): the round's Enc(B_inv(N_u)), the answer to the shares and (with the check) the
  server's proved decryption of the check -> each silo's masked update, once the silo has verified the check
  (a failed check is a :class:`ProtocolAbort` naming it, and no update leaves).

The server then multiplies the masked updates, decrypts and decodes (step 2(c); Theorem 4).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, TypeVar

import numpy as np

from uldp.common.checks import check_rate
from uldp.secure import keys
from uldp.secure.messages import (
    BlindedHistogramMessage,
    DhDirectoryMessage,
    DhPublicKeyMessage,
    EncryptedWeightsMessage,
    Message,
    ModulusProofMessage,
    PublicKeyMessage,
    RingPedersenMessage,
    SealedMessage,
    WeightCheckMessage,
    WeightCheckProofMessage,
    parse_message,
)
from uldp.secure.protocol import Server, Silo
from uldp.secure.roster import Credentials, RosterMismatch
from uldp.secure.sampling import sample_users

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from uldp.secure.config import ProtocolConfig
    from uldp.secure.modulus_proof import Verifier

STAGE_KEY = "p1-key"
STAGE_DIRECTORY = "p1-directory"
STAGE_SEED = "p1-seed"
STAGE_SHARES = "p1-shares"
STAGE_CHECK = "p1-check"
STAGE_UPDATE = "p1-update"
#: The set-up stages in order (steps 1(a)-(f)), then a round's stages (steps 2(a)-(c); the check only with a backend
#: that checks the server's weights).
SETUP_STAGES = (STAGE_KEY, STAGE_DIRECTORY, STAGE_SEED)
ROUND_STAGES = (STAGE_SHARES, STAGE_CHECK, STAGE_UPDATE)
STAGES = SETUP_STAGES + ROUND_STAGES

Payloads = tuple[bytes, ...]

M = TypeVar("M", bound=Message)


class ProtocolAbort(ValueError):
    """Protocol 1 stopped: a silo sent something malformed, or a stage came out of order (nothing is decrypted).

    Attributes:
        silo: The silo that sent the bad answer, or None when no one silo is to blame.
    """

    def __init__(self, message: str, *, silo: int | None = None) -> None:
        super().__init__(message)
        self.silo = silo


class ServerDriver:
    """The server's Protocol 1 (steps 1(a)-(f) and 2(a)-(c)) over any transport.

    Args:
        config: The session's public parameters (:meth:`~uldp.secure.ProtocolConfig.for_training`).
        exchange: ``(stage, round_index, {silo: payloads}) -> {silo: payloads}``; a transport failure is the
            transport's own exception.

    Attributes:
        server: The :class:`~uldp.secure.protocol.Server` role (the Paillier key holder).
    """

    def __init__(
        self,
        config: ProtocolConfig,
        exchange: Callable[[str, int, dict[int, Payloads]], Mapping[int, Payloads]],
    ) -> None:
        self.config = config
        self._exchange = exchange
        self.server = Server(config)
        self._ready = False
        self._round: int | None = None
        self._weights = b""

    @property
    def silos(self) -> range:
        """The silo numbers 0 .. |S| - 1."""
        return range(self.config.n_silos)

    def _ask(
        self, stage: str, round_index: int, payloads: dict[int, Payloads]
    ) -> dict[int, Payloads]:
        answers = self._exchange(stage, round_index, payloads)
        missing = sorted(set(payloads) - set(answers))
        if missing:
            raise ProtocolAbort(
                f"{stage}: no answer from silo(s) {missing}; every silo takes part or nothing is "
                f"decrypted",
                silo=missing[0],
            )
        return {s: tuple(answers[s]) for s in self.silos}

    def setup(self) -> None:
        """Steps 1(a)-(f): keys, pairwise keys, the seed R, the blinded histograms; once per session.

        Raises:
            ProtocolAbort: a silo's answer is missing, malformed or fails the protocol's checks (the silo named).
        """
        if self._ready:
            raise ProtocolAbort(
                "Protocol 1's set-up has run already; start a new session for new keys"
            )
        public: Payloads = (
            self.server.public_key_message().to_bytes(),
            *_to_bytes(self.server.backend_key_messages()),
        )
        answers = self._ask(STAGE_KEY, 0, dict.fromkeys(self.silos, public))
        for silo, payloads in answers.items():
            if len(payloads) != 2:
                raise ProtocolAbort(
                    f"{STAGE_KEY}: silo {silo} sent {len(payloads)} payloads instead of its DH key and "
                    f"its ring-Pedersen parameters",
                    silo=silo,
                )
        dh_keys = self._parse(
            {s: p[:1] for s, p in answers.items()}, DhPublicKeyMessage, STAGE_KEY, one=True
        )
        requests = self._parse(
            {s: p[1:] for s, p in answers.items()}, RingPedersenMessage, STAGE_KEY, one=True
        )
        directory = self.server.relay_dh_keys(dh_keys).to_bytes()
        proofs = {request.silo: self._prove(request) for request in requests}
        answers = self._ask(STAGE_DIRECTORY, 0, {s: (directory, proofs[s]) for s in self.silos})
        inbox = self.server.relay_sealed(self._parse(answers, SealedMessage, STAGE_DIRECTORY))
        answers = self._ask(STAGE_SEED, 0, {s: _to_bytes(inbox[s]) for s in self.silos})
        histograms = self._parse(answers, BlindedHistogramMessage, STAGE_SEED, one=True)
        self.server.receive_histograms(
            histograms
        )  # a non-invertible sum of valid histograms: no silo to blame
        self._ready = True

    def _prove(self, request: RingPedersenMessage) -> bytes:
        """The modulus proof for the silo that sent ``request`` (beyond the paper), or a ProtocolAbort naming it."""
        try:
            return self.server.prove_modulus(request).to_bytes()
        except ValueError as error:
            raise ProtocolAbort(
                f"{STAGE_KEY}: silo {request.silo} sent ring-Pedersen parameters the server cannot "
                f"prove against: {error}",
                silo=request.silo,
            ) from error

    def begin_round(self, round_index: int, sampled: np.ndarray) -> dict[int, Payloads]:
        """Steps 2(a)-(b)'s first half: encrypt the weights, collect the silos' shares and answer them (relay the
        sealed weight powers, or rescale); with a backend that checks the server's weights, collect the silos' check
        and prove its decryption (:data:`STAGE_CHECK`, :mod:`uldp.secure.weight_check`).

        Args:
            round_index: The round t (1, 2, ...; each at most once per session).
            sampled: bool [|U|], the round's users; users with N_u = 0 (B(N_u) = 0) are left out.

        Returns:
            Per silo, the payloads of its :data:`STAGE_UPDATE` message (the weights, the answer to its shares and
            the weights check's proof).

        Raises:
            ProtocolAbort: before the set-up, a round index not above the last one, or a silo's bad answer.
        """
        if not self._ready:
            raise ProtocolAbort(
                f"round {round_index} before Protocol 1's set-up: call setup() first"
            )
        if self._round is not None and round_index <= self._round:
            raise ProtocolAbort(
                f"round {round_index} after round {self._round}: each round index is used once, "
                f"in increasing order"
            )
        chosen = np.asarray(sampled, dtype=bool) & (
            np.array(self.server.blinded_totals, dtype=object) != 0
        )
        self._weights = self.server.start_round(round_index, chosen).to_bytes()
        self._round = round_index
        answers = self._ask(STAGE_SHARES, round_index, dict.fromkeys(self.silos, (self._weights,)))
        # the backend's shares: sealed weight powers, or the packed backends' rescale requests
        try:
            inbox = self.server.relay(self._parse(answers, Message, STAGE_SHARES))
        except ValueError as error:
            raise ProtocolAbort(f"{STAGE_SHARES}: {error}") from error
        payloads = {s: (self._weights, *_to_bytes(inbox[s])) for s in self.silos}
        if not self.server.backend.checks_weights:
            return payloads
        answers = self._ask(STAGE_CHECK, round_index, payloads)
        checks = self._parse(answers, WeightCheckMessage, STAGE_CHECK, one=True)
        try:
            proof = self.server.prove_weight_check(checks).to_bytes()
        except ValueError as error:
            raise ProtocolAbort(f"{STAGE_CHECK}: {error}") from error
        return {s: (*payloads[s], proof) for s in self.silos}

    def finish_round(self, answers: Mapping[int, Payloads], size: int) -> np.ndarray:
        """Step 2(c): every silo's masked update (one payload each) -> the decoded sum_s (sum_u w_su delta_su + z_s).

        Args:
            answers: Per silo, its answer to :data:`STAGE_UPDATE`.
            size: d, the number of parameters (the ciphertexts each update must hold).

        Raises:
            ProtocolAbort: a missing or malformed update (the silo named); nothing is decrypted then.
        """
        if self._round is None:
            raise ProtocolAbort("no round was started: call begin_round first")
        missing = sorted(set(self.silos) - set(answers))
        if missing:
            raise ProtocolAbort(
                f"{STAGE_UPDATE}: no masked update from silo(s) {missing}; nothing is decrypted",
                silo=missing[0],
            )
        updates = self._parse(
            {s: tuple(answers[s]) for s in self.silos},
            self.server.backend.update_message,
            STAGE_UPDATE,
            one=True,
            size=size,
        )
        return self.server.finish_round(updates)

    def round(self, round_index: int, sampled: np.ndarray, size: int) -> np.ndarray:
        """One whole round (steps 2(a)-(c)) through the exchange: the decoded aggregate, float64 [size]."""
        payloads = self.begin_round(round_index, sampled)
        return self.finish_round(self._ask(STAGE_UPDATE, round_index, payloads), size)

    def _parse(
        self,
        answers: Mapping[int, Payloads],
        kind: type[M],
        stage: str,
        *,
        one: bool = False,
        size: int = 0,
    ) -> list[M]:
        """Every silo's messages of type ``kind``, each checked against the silo that sent it.

        Raises:
            ProtocolAbort: naming the silo and what it sent (malformed, claiming another silo, addressed to no
                other silo, values out of range, or not exactly one message when ``one``).
        """
        messages: list[M] = []
        for silo in sorted(answers):
            payloads = answers[silo]
            try:
                if one and len(payloads) != 1:
                    raise ValueError(f"{len(payloads)} payloads instead of one")
                for payload in payloads:
                    message = kind.from_bytes(payload)
                    self._check_sender(message, silo, size)
                    messages.append(message)
            except ValueError as error:
                raise ProtocolAbort(
                    f"{stage}: silo {silo} sent a bad {kind.__name__}: {error}", silo=silo
                ) from error
        return messages

    def _check_sender(self, message: Message, silo: int, size: int) -> None:
        claimed = (
            message.sender if isinstance(message, SealedMessage) else getattr(message, "silo", silo)
        )
        if claimed != silo:
            raise ValueError(f"it claims to come from silo {claimed}")
        if isinstance(message, SealedMessage) and not (
            0 <= message.recipient < self.config.n_silos and message.recipient != silo
        ):
            raise ValueError(
                f"it is addressed to silo {message.recipient} (another silo in "
                f"0..{self.config.n_silos - 1})"
            )
        if isinstance(message, BlindedHistogramMessage):
            self.server.check_histogram(message)
        if isinstance(message, self.server.backend.update_message):
            self.server.check_masked_update(message, size)


@dataclass(frozen=True)
class SiloProgress:
    """Where a silo's Protocol 1 stands: what its driver needs, besides the role's secrets, to go on.

    Attributes:
        setup_done: How many set-up stages it answered (0-3, in :data:`SETUP_STAGES` order).
        shares_round: The round whose shares it sent and whose update it has not sent (0: none).
        answered_round: The last round whose masked update it sent (0: none); it answers only later rounds.
        checked_round: The last round whose weights check it answered (0: none): once per round, since two checks
            of one round under the same pairwise mask would let the key holder subtract the mask.
    """

    setup_done: int = 0
    shares_round: int = 0
    answered_round: int = 0
    checked_round: int = 0


class SiloDriver:
    """One silo's Protocol 1 (steps 1(a)-(e) and 2(b)-(c)): answers one stage at a time, in order, once per round.

    Args:
        silo_id: This silo's number.
        counts: n_su of this silo, [|U|].
        config: The session's public parameters (checked by the caller against the silo's own facts).
        role: A restored :class:`~uldp.secure.protocol.Silo` (with ``progress``), to continue a session.
        progress: Where that session stood.
        verifier: For a new role: this silo's ring-Pedersen parameters from an earlier session (``role.verifier``),
            against which the server proves its modulus; None draws new ones.
        malicious_server: The silo's policy asks for a guarantee against a malicious server: a backend that does not
            check the server's weights (the lattice backend, :attr:`uldp.secure.backends.Backend.checks_weights`)
            is refused.
        credentials: This silo's identity and the roster it holds (:class:`~uldp.secure.roster.Credentials`): its
            X25519 key is signed at 1(a) and every relayed key checked at 1(b). None: the keys are as the server
            relays them (a semi-honest server only).
        sample_rate: Beyond the paper, q of this silo's policy for a user sample the server cannot see
            (:mod:`uldp.secure.sampling`, keyed by the seed R): each round the silo zeroes the clipped deltas of the
            users outside :meth:`sample` before its weighted sum; the server encrypts every user's weight. None:
            the sample is the server's (it encrypts zero for the users it did not sample).

    Raises:
        ProtocolAbort: ``malicious_server`` with a backend that does not check the server's weights.
    """

    def __init__(
        self,
        silo_id: int,
        counts: np.ndarray,
        config: ProtocolConfig,
        *,
        role: Silo | None = None,
        progress: SiloProgress | None = None,
        verifier: Verifier | None = None,
        malicious_server: bool = False,
        credentials: Credentials | None = None,
        sample_rate: float | None = None,
    ) -> None:
        self.silo_id, self.config = silo_id, config
        if malicious_server and not config.backend.checks_weights:
            raise ProtocolAbort(
                f"silo {silo_id} refuses the {config.parameters.backend} backend: its policy asks for a guarantee "
                f"against a malicious server, and this backend cannot check the weights the server encrypts "
                f"(use a Paillier backend, whose weights the silos check)",
                silo=silo_id,
            )
        self.sample_rate = None if sample_rate is None else check_rate("sample_rate", sample_rate)
        if credentials is not None:
            credentials.check_silo(silo_id, config.n_silos)
        self.credentials = credentials
        self.role = role if role is not None else Silo(silo_id, counts, config, verifier=verifier)
        self.progress = progress or SiloProgress()

    def sample(self, round_index: int) -> np.ndarray:
        """Round ``round_index``'s user sample (bool [|U|]), the same in every silo, unknown to the server.

        Raises:
            ValueError: no ``sample_rate``, or before step 1(c).
        """
        if self.sample_rate is None:
            raise ValueError(f"silo {self.silo_id} has no sample_rate: the sample is the server's")
        return sample_users(
            self.role.sampling_key(),
            round_index=round_index,
            n_users=self.config.n_users,
            q=self.sample_rate,
        )

    def expected(self) -> str:
        """The stage(s) this silo answers next, in words."""
        done = self.progress.setup_done
        if done < len(SETUP_STAGES):
            return SETUP_STAGES[done]
        later = f"{STAGE_SHARES} of a round after {self.progress.answered_round}"
        if not self.progress.shares_round:
            return later
        checked = self.progress.checked_round == self.progress.shares_round
        stage = STAGE_CHECK if self.role.backend.checks_weights and not checked else STAGE_UPDATE
        return f"{stage} of round {self.progress.shares_round} or {later}"

    def _refuse(self, stage: str, round_index: int) -> ProtocolAbort:
        return ProtocolAbort(
            f"silo {self.silo_id} refuses {stage} of round {round_index}: it expects "
            f"{self.expected()} (Protocol 1's stages run in order, each round index at most once)",
            silo=self.silo_id,
        )

    def answer(
        self,
        stage: str,
        round_index: int,
        payloads: Payloads,
        *,
        inputs: Callable[[], tuple[np.ndarray, np.ndarray]] | None = None,
    ) -> Payloads:
        """This silo's answer to one stage's message.

        Args:
            stage: One of :data:`STAGES`.
            round_index: The round (0 for the set-up stages).
            payloads: The server's message for this silo.
            inputs: For :data:`STAGE_UPDATE`: ``() -> (clipped deltas [|U|, d], noise [d])``, called only once the
                stage is allowed (so a refused round trains nothing and draws no noise).

        Returns:
            The answer's payloads.

        Raises:
            ProtocolAbort: a stage out of order, a repeated or older round, an unknown stage.
            ValueError: a message that fails the protocol's checks.
        """
        progress = self.progress
        if stage in SETUP_STAGES:
            if SETUP_STAGES.index(stage) != progress.setup_done:
                raise self._refuse(stage, round_index)
            answer = self._setup(stage, payloads)
            self.progress = replace(progress, setup_done=progress.setup_done + 1)
            return answer
        if stage not in ROUND_STAGES:
            raise ProtocolAbort(
                f"unknown Protocol 1 stage {stage!r}; the stages are {STAGES}", silo=self.silo_id
            )
        if progress.setup_done < len(SETUP_STAGES):
            raise self._refuse(stage, round_index)
        if stage == STAGE_SHARES:
            if round_index <= progress.answered_round:
                raise self._refuse(stage, round_index)
            shares = self.role.share_weight_powers(
                _one(payloads, EncryptedWeightsMessage, round_index)
            )
            self.progress = replace(progress, shares_round=round_index)
            return _to_bytes(shares)
        checks = self.role.backend.checks_weights
        if (
            round_index != progress.shares_round
            or not progress.shares_round
            or (stage == STAGE_CHECK and (not checks or progress.checked_round == round_index))
            or (stage == STAGE_UPDATE and checks and progress.checked_round != round_index)
        ):
            raise self._refuse(stage, round_index)
        if not payloads:
            raise ValueError(
                f"{stage} carries the round's encrypted weights and the answer to the shares"
            )
        weights = _one(payloads[:1], EncryptedWeightsMessage, round_index)
        if stage == STAGE_CHECK:
            # spent before the check is computed: one check per round
            self.progress = replace(progress, checked_round=round_index)
            shared = [parse_message(p) for p in payloads[1:]]
            return (self.role.weight_check(weights, shared).to_bytes(),)
        if inputs is None:
            raise ValueError(f"{STAGE_UPDATE} needs the silo's clipped deltas and noise (inputs)")
        # Spent before the update is computed: whatever happens next, this round index is never answered again.
        self.progress = replace(progress, shares_round=0, answered_round=round_index)
        if checks:  # beyond the paper: the server's weights are used only once their check passed
            shared = [parse_message(p) for p in payloads[1:-1]]
            try:
                self.role.verify_weights(
                    weights, shared, _one(payloads[-1:], WeightCheckProofMessage, round_index)
                )
            except ValueError as error:
                raise ProtocolAbort(
                    f"silo {self.silo_id} refuses the server's weights of round {round_index}: {error}",
                    silo=self.silo_id,
                ) from error
        else:
            shared = [parse_message(p) for p in payloads[1:]]
        deltas, noise = inputs()
        if self.sample_rate is not None:  # unsampled users add zero; the server cannot tell which
            deltas = np.where(self.sample(round_index)[:, None], deltas, 0.0)
        return (self.role.masked_update(weights, shared, deltas, noise).to_bytes(),)

    def _setup(self, stage: str, payloads: Payloads) -> Payloads:
        if stage == STAGE_KEY:  # the Paillier key, then the backend's own keys
            extra = self.role.backend.key_messages
            if len(payloads) != 1 + extra:
                raise ValueError(
                    f"{STAGE_KEY} of the {self.config.parameters.backend} backend carries the Paillier key "
                    f"and {extra} key message(s) of the backend, got {len(payloads)} payloads"
                )
            self.role.receive_backend_keys([parse_message(p) for p in payloads[1:]])
            public = _one(payloads[:1], PublicKeyMessage)
            dh_key, request = self.role.receive_public_key(public)
            if self.credentials is not None:
                dh_key = self.credentials.signed(dh_key, context=_session_context(public.modulus))
            return _to_bytes((dh_key, request))
        if stage == STAGE_DIRECTORY:
            if len(payloads) != 2:
                raise ValueError(
                    f"{STAGE_DIRECTORY} carries the DH directory and the modulus proof, got "
                    f"{len(payloads)} payloads"
                )
            try:  # beyond the paper: the modulus is used only once its proof passed
                proof = ModulusProofMessage.from_bytes(payloads[1])
                self.role.accept_modulus(proof)
            except ValueError as error:
                raise ProtocolAbort(
                    f"silo {self.silo_id} refuses the server's Paillier key: {error}",
                    silo=self.silo_id,
                ) from error
            directory = _one(payloads[:1], DhDirectoryMessage)
            if self.credentials is not None:
                try:  # beyond the paper: no pairwise key from a key the roster does not vouch for
                    self.credentials.check(directory, context=_session_context(proof.modulus))
                except RosterMismatch as error:
                    raise ProtocolAbort(
                        f"silo {self.silo_id} refuses the DH directory: {error}", silo=error.silo
                    ) from error
            return _to_bytes(self.role.receive_dh_directory(directory))
        self.role.receive_seed([SealedMessage.from_bytes(p) for p in payloads])
        return (self.role.blinded_histogram().to_bytes(),)


def _session_context(modulus: int) -> bytes:
    """What a silo's attestation of its X25519 key binds it to: Protocol 1's step 1(a) of the session of
    ``modulus`` (:func:`uldp.secure.keys.session_id`)."""
    return b"uldp/p1/" + STAGE_KEY.encode() + keys.session_id(modulus)


def _one(payloads: Payloads, kind: type[M], round_index: int | None = None) -> M:
    """The one message of ``kind`` in ``payloads`` (of round ``round_index`` when given)."""
    if len(payloads) != 1:
        raise ValueError(f"expected one {kind.__name__}, got {len(payloads)} payloads")
    message = kind.from_bytes(payloads[0])
    claimed = getattr(message, "round_index", round_index)
    if round_index is not None and claimed != round_index:
        raise ValueError(
            f"{kind.__name__} is for round {claimed}, the message's round is {round_index}"
        )
    return message


def _to_bytes(messages: list[M] | tuple[M, ...]) -> Payloads:
    return tuple(message.to_bytes() for message in messages)
