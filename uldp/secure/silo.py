"""One silo of Protocol 1 (Section 4, Protocol 1, steps 1(a)-(e) and 2(b)-(c)): :class:`Silo`.

The silo's part of the set-up is the paper's (and, beyond it, the check of the server's modulus proof); its part of a
round is its backend's (:mod:`uldp.secure.backends`): the silo computes the shared weight powers and checks its
inputs, the backend turns them into the round's shares and its masked update. See :mod:`uldp.secure.protocol` for
the stages.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import gmpy2
import numpy as np
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from uldp.secure import encoding, fast, keys, masks, modulus_proof, weight_check
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
    SiloState,
    WeightCheckMessage,
    WeightCheckProofMessage,
)
from uldp.secure.roles import (
    NONCE_BYTES,
    SEALED_SEED,
    SECRET_BYTES,
    modulus_proof_context,
    proof_of,
    verifier_of,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

    from uldp.secure.config import ProtocolConfig


class Silo:
    """One silo of Protocol 1: knows its own counts n_su and, after setup, the shared blinds r_u.

    Args:
        silo_id: This silo's number.
        counts: n_su of this silo, [|U|].
        config: The session's public parameters.
        verifier: This silo's ring-Pedersen parameters with their proof (:func:`uldp.secure.modulus_proof.
            ring_pedersen`), kept from an earlier session; None draws new ones at step 1(a) (2048-bit safe primes
            take about a minute at the default key sizes).

    Attributes:
        backend: The silo's half of the session's backend (:data:`uldp.secure.backends.BACKENDS`).
        own_powers: The round's shared weight powers ``Enc(B_inv(N_u))^(r_u C_LCM)`` of the users ``silo mod |S|``.
    """

    def __init__(
        self,
        silo_id: int,
        counts: np.ndarray,
        config: ProtocolConfig,
        *,
        verifier: modulus_proof.Verifier | None = None,
    ) -> None:
        row = np.asarray(counts)
        if row.shape != (config.n_users,):
            raise ValueError(
                f"silo {silo_id}: counts must have shape ({config.n_users},), got {row.shape}"
            )
        encoding.check_counts(
            row[None, :], n_max=config.parameters.n_max
        )  # own part of condition (1)
        if not 0 <= silo_id < config.n_silos:
            raise ValueError(f"silo id {silo_id} outside 0..{config.n_silos - 1}")
        self.silo_id, self.config = silo_id, config
        self._counts = [int(c) for c in row]
        self._dh_key: X25519PrivateKey = keys.new_dh_private_key()
        self._n: int | None = None
        self._pair_keys: dict[int, keys.PairwiseKeys] = {}
        self._seed: bytes | None = None
        self._blinds: list[int] | None = None
        self.own_powers: dict[int, gmpy2.mpz] = {}
        self._round: int | None = None
        self.backend = config.backend(config)
        self._verifier = verifier
        self._proof_request: RingPedersenMessage | None = None

    @property
    def verifier(self) -> modulus_proof.Verifier | None:
        """This silo's ring-Pedersen parameters with their proof (public; None before step 1(a)), to keep for the
        next session."""
        return self._verifier

    @property
    def counts(self) -> list[int]:
        """n_su of this silo, per user."""
        return list(self._counts)

    @property
    def modulus(self) -> int:
        """The server's Paillier modulus n, once its proof passed (step 1(b)).

        Raises:
            ValueError: before that.
        """
        if self._n is None:
            raise ValueError(
                f"silo {self.silo_id} has no public key yet: call receive_public_key first"
            )
        return self._n

    @property
    def pair_keys(self) -> dict[int, keys.PairwiseKeys]:
        """The pairwise keys with every other silo, by peer id (step 1(b))."""
        return dict(self._pair_keys)

    def receive_public_key(
        self, message: PublicKeyMessage
    ) -> tuple[DhPublicKeyMessage, RingPedersenMessage]:
        """Step 1(a): check the Paillier modulus's size and answer with an X25519 public key and (beyond the paper)
        this silo's ring-Pedersen parameters with a fresh nonce, against which the server proves the modulus well
        formed. The modulus is not kept: the silo takes the one whose proof passes (:meth:`accept_modulus`)."""
        self._checked_modulus(int(message.modulus))
        sizes = modulus_proof.proof_parameters(self.config.parameters.key_bits)
        if self._verifier is None or self._verifier[0].n.bit_length() != sizes.pedersen_bits:
            self._verifier = modulus_proof.ring_pedersen(
                sizes.pedersen_bits, rounds=sizes.blum_challenges
            )
        verifier, proof = self._verifier
        self._proof_request = RingPedersenMessage(
            silo=self.silo_id,
            nonce=os.urandom(NONCE_BYTES),
            modulus=verifier.n,
            s=verifier.s,
            t=verifier.t,
            commitments=proof.commitments,
            responses=proof.responses,
        )
        return DhPublicKeyMessage(
            silo=self.silo_id, public_key=keys.dh_public_bytes(self._dh_key)
        ), self._proof_request

    def receive_backend_keys(self, messages: Sequence[Message]) -> None:
        """Step 1(a): the backend's own public keys that travel beside the Paillier key (the lattice backend's BFV
        keys; none for the Paillier backends), checked and kept by the backend.

        Raises:
            ValueError: keys that are not the session's backend's.
        """
        self.backend.receive_key_messages(self, messages)

    def accept_modulus(self, message: ModulusProofMessage) -> None:
        """Beyond the paper, step 1(b), before anything uses the modulus: check the server's proofs that it is well
        formed (CGGMP20's Paillier-Blum and no-small-factor proofs, :func:`uldp.secure.modulus_proof.verify_modulus`)
        against this silo's own ring-Pedersen parameters and bound to this silo's nonce; only then keep it.

        Raises:
            ValueError: before step 1(a), a proof addressed to another silo, a modulus of the wrong size, or a proof
                that fails (the message names the check).
        """
        request = self._proof_request
        if request is None or self._verifier is None:
            raise ValueError(f"silo {self.silo_id} got a modulus proof before step 1(a)")
        if message.silo != self.silo_id:
            raise ValueError(
                f"modulus proof: it is for silo {message.silo}, this is silo {self.silo_id}"
            )
        modulus = self._checked_modulus(int(message.modulus))
        modulus_proof.verify_modulus(
            modulus,
            proof_of(message),
            self._verifier[0],
            context=modulus_proof_context(self.config, self.silo_id, request.nonce),
            parameters=modulus_proof.proof_parameters(self.config.parameters.key_bits),
        )
        self._n = modulus
        self._session = keys.session_id(modulus)

    def receive_dh_directory(self, message: DhDirectoryMessage) -> list[SealedMessage]:
        """Step 1(b)-(c): derive the pairwise keys; silo 0 draws the seed R and seals it for every other silo."""
        if len(message.public_keys) != self.config.n_silos:
            raise ValueError(
                f"DH directory lists {len(message.public_keys)} keys, expected {self.config.n_silos}"
            )
        if message.public_keys[self.silo_id] != keys.dh_public_bytes(self._dh_key):
            raise ValueError(
                f"silo {self.silo_id}: the DH directory does not carry this silo's public key"
            )
        self._pair_keys = {
            peer: keys.derive_pairwise_keys(
                self._dh_key, public, own_id=self.silo_id, peer_id=peer, session=self._session
            )
            for peer, public in enumerate(message.public_keys)
            if peer != self.silo_id
        }
        if self.silo_id != 0:
            return []
        seed = os.urandom(SECRET_BYTES)
        self._set_seed(seed)
        return [self.seal(peer, 0, SEALED_SEED, seed) for peer in self._pair_keys]

    def receive_seed(self, messages: Sequence[Message]) -> None:
        """Step 1(c): open the seed R sealed by silo 0 (silo 0 already has it)."""
        if self.silo_id == 0:
            if messages:
                raise ValueError("silo 0 draws the seed and expects no seed message")
            return
        seeds = [
            m
            for m in messages
            if isinstance(m, SealedMessage) and m.purpose == SEALED_SEED and m.sender == 0
        ]
        if len(seeds) != 1:
            raise ValueError(
                f"silo {self.silo_id} expected exactly one seed message from silo 0, got {len(seeds)}"
            )
        seed = self.open_sealed(seeds[0], round_index=0, purpose=SEALED_SEED)
        if len(seed) != SECRET_BYTES:
            raise ValueError(f"the seed R has {SECRET_BYTES} bytes, got {len(seed)}")
        self._set_seed(seed)

    def _set_seed(self, seed: bytes) -> None:
        self._seed = seed
        # Step 1(d): r_u uniform on Z_n^*, the same in every silo (keyed by R).
        self._blinds = masks.unit_blinds(
            keys.derive_key(seed, label=b"blinds" + self._session),
            modulus=self.modulus,
            count=self.config.n_users,
        )

    def seed_elements(
        self, label: bytes, *, modulus: int, round_index: int, purpose: int
    ) -> list[int]:
        """|U| elements uniform on [0, modulus), the same in every silo and unknown to the server: keyed by the
        seed R of step 1(c) under ``label`` and this session (the rescale blinds rho_u, the check's coefficients).

        Raises:
            ValueError: before step 1(c).
        """
        if self._seed is None:
            raise ValueError(f"silo {self.silo_id} has no seed R yet: finish steps 1(b)-(c) first")
        return masks.uniform_elements(
            keys.derive_key(self._seed, label=label + self._session),
            modulus=modulus,
            count=self.config.n_users,
            round_index=round_index,
            purpose=purpose,
        )

    def sampling_key(self) -> bytes:
        """Beyond the paper: the key of the silos' user sample (:mod:`uldp.secure.sampling`), derived from the seed R
        of step 1(c), which the server never sees; the same in every silo."""
        if self._seed is None:
            raise ValueError(f"silo {self.silo_id} has no seed R yet (step 1(c))")
        return keys.derive_key(self._seed, label=b"user-sampling" + self._session)

    def net_masks(self, count: int, *, modulus: int, round_index: int, purpose: int) -> list[int]:
        """This silo's net pairwise masks (Protocol 1 step 1(e) and 2(b)): they cancel in the sum over silos."""
        return masks.signed_mask_sum(
            {peer: k.masks for peer, k in self._pair_keys.items()},
            own_id=self.silo_id,
            modulus=modulus,
            count=count,
            round_index=round_index,
            purpose=purpose,
        )

    def users_of(self, silo: int) -> range:
        """The users whose shared weight power silo ``silo`` computes in step 2(b): u = silo mod |S|."""
        return range(silo, self.config.n_users, self.config.n_silos)

    @property
    def _blind_values(self) -> list[int]:
        if self._blinds is None:
            raise ValueError(f"silo {self.silo_id} has no seed R yet: finish steps 1(b)-(c) first")
        return self._blinds

    def blinded_histogram(self) -> BlindedHistogramMessage:
        """Steps 1(d)-(e): B'(n_su) = r_u n_su + sum_{s<s'} r^u_{s,s'} - sum_{s>s'} r^u_{s,s'} mod n."""
        n = self.modulus
        net_masks = self.net_masks(
            self.config.n_users, modulus=n, round_index=0, purpose=masks.PURPOSE_HISTOGRAM
        )
        values = tuple(
            (r * c + m) % n
            for r, c, m in zip(self._blind_values, self._counts, net_masks, strict=True)
        )
        return BlindedHistogramMessage(silo=self.silo_id, values=values)

    def _check_weights(self, message: EncryptedWeightsMessage) -> None:
        n = self.modulus
        message.check_elements(
            message.ciphertexts, bound=n * n, count=self.config.n_users, what="encrypted weights"
        )

    def share_weight_powers(self, message: EncryptedWeightsMessage) -> list[Message]:
        """Step 2(b), shared part: Enc(B_inv(N_u))^(r_u C_LCM) for the users u = silo_id mod |S|, turned into the
        round's shares by the backend (sealed to peers; with the packed backends, blinded by rho_u in one rescale
        request to the server, :mod:`uldp.secure.packing`)."""
        self._check_weights(message)
        n = self.modulus
        mine = self.users_of(self.silo_id)
        powers = fast.raise_each(
            [message.ciphertexts[u] for u in mine],
            [self._blind_values[u] * self.config.c_lcm % n for u in mine],
            n * n,
            processes=self.config.parameters.workers,
        )
        self.own_powers = dict(zip(mine, powers, strict=True))
        self._round = message.round_index
        return self.backend.share(self, message)

    def check_round(self, message: EncryptedWeightsMessage) -> None:
        """Step 2(b)'s checks of the round's weights: |U| ciphertexts below n^2, of the round whose shares this silo
        sent.

        Raises:
            ValueError: naming the problem.
        """
        self._check_weights(message)
        if self._round != message.round_index:
            raise ValueError(
                f"silo {self.silo_id}: call share_weight_powers for round {message.round_index} first"
            )

    def round_inputs(
        self, message: EncryptedWeightsMessage, deltas: np.ndarray, noise: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, list[int]]:
        """Step 2(b)'s checks on the round and the silo's inputs: float64 deltas, noise and the users with records.

        Raises:
            ValueError: another round's weights, wrong shapes or values beyond the bounds the session assumed.
        """
        self.check_round(message)
        deltas, noise = np.asarray(deltas, dtype=np.float64), np.asarray(noise, dtype=np.float64)
        if (
            deltas.ndim != 2
            or deltas.shape[0] != self.config.n_users
            or noise.shape != (deltas.shape[1],)
        ):
            raise ValueError(
                f"silo {self.silo_id}: deltas must be (|U|, d) and noise (d,), got {deltas.shape}, {noise.shape}"
            )
        active = [u for u, c in enumerate(self._counts) if c > 0]
        if active and np.abs(deltas[active]).max(initial=0.0) > self.config.clip:
            raise ValueError(
                f"silo {self.silo_id}: a delta coordinate {np.abs(deltas[active]).max():.3g} exceeds the clip bound "
                f"C={self.config.clip} assumed by the no-wrap-around check; clip the deltas"
            )
        if np.abs(noise).max(initial=0.0) > self.config.effective_noise_bound:
            raise ValueError(
                f"silo {self.silo_id}: a noise coordinate exceeds the bound {self.config.effective_noise_bound:.3g} "
                f"assumed by the no-wrap-around check"
            )
        return deltas, noise, active

    def weight_check(
        self, message: EncryptedWeightsMessage, shared: Sequence[Message]
    ) -> WeightCheckMessage:
        """Beyond the paper, before step 2(b)'s update: ``Enc(sum_u c_u n_su w_u + M_s)`` from the weight ciphertexts
        this silo's update will use (``message`` and ``shared`` as for :meth:`masked_update`; the check against a
        malicious server of :mod:`uldp.secure.weight_check`).

        Raises:
            ValueError: a backend without the check, another round's weights, or shares that fail their checks.
        """
        return WeightCheckMessage(
            round_index=message.round_index,
            silo=self.silo_id,
            contribution=weight_check.silo_contribution(self, message, shared)[0],
        )

    def verify_weights(
        self,
        message: EncryptedWeightsMessage,
        shared: Sequence[Message],
        proof: WeightCheckProofMessage,
    ) -> None:
        """Beyond the paper, before step 2(b)'s update: accept the server's weights only if the decrypted, proved sum
        of every silo's check is what the counts imply (:mod:`uldp.secure.weight_check`; adversary: a malicious
        server that encrypts weights other than ``B_inv(N_u)``).

        Raises:
            ValueError: naming the failed check: this silo's contribution missing from the server's list, a bad
                sample, a decryption proof that fails, or a sum off its expected value.
        """
        weight_check.verify(self, message, shared, proof)

    def masked_update(
        self,
        message: EncryptedWeightsMessage,
        shared: Sequence[Message],
        deltas: np.ndarray,
        noise: np.ndarray,
    ) -> Message:
        """Steps 2(b)-(c) in the silo: Enc(sum_u Encode(delta_u) n_su r_u C_LCM B_inv(N_u) + Encode(z) C_LCM + masks),
        as the session's backend computes it.

        Args:
            message: the round's encrypted weights (the same message given to share_weight_powers).
            shared: what :meth:`Server.relay <uldp.secure.protocol.Server.relay>` delivered for this silo: the
                sealed weight powers from every other silo (backend ``"paillier"``), or the server's rescaled weights
                (``"packed-paillier"``, ``"lattice"``).
            deltas: clipped deltas of this silo's users, shape (|U|, d) (rows of users without records are ignored).
            noise: this silo's Gaussian noise, shape (d,).

        Returns:
            The backend's update message (:attr:`uldp.secure.backends.Backend.update_message`), masked with the
            round's pairwise masks.

        Raises:
            ValueError: if shapes are wrong, a value exceeds the bounds the no-wrap-around check assumed, shares are
                missing or fail authentication.
        """
        deltas, noise, active = self.round_inputs(message, deltas, noise)
        update = self.backend.masked_update(self, message, shared, deltas, noise, active)
        self._round = None
        return update

    def export_state(self) -> bytes:
        """This silo's secrets and progress as bytes (:class:`~uldp.secure.messages.SiloState`; no pickle).

        For a silo whose process may end between two messages: keep the bytes where the silo lives (a Flower
        ClientApp's node-local context state) and :meth:`restore` them for the next message. They hold the pairwise
        keys, the seed R and n_su: keep them as private as the silo's records, never send them. They also hold the
        backend's state (the lattice backend's: the server's BFV public keys, about 1.6 MB each, and the last
        answered lattice round).
        """
        peers = sorted(self._pair_keys)
        backend_keys, backend_round = self.backend.export_state()
        return SiloState(
            silo=self.silo_id,
            counts=tuple(self._counts),
            dh_private=self._dh_key.private_bytes_raw(),
            modulus=self._n or 0,
            aead_keys=tuple(self._pair_keys[p].aead for p in peers),
            mask_keys=tuple(self._pair_keys[p].masks for p in peers),
            seed=self._seed or b"",
            round_index=self._round or 0,
            own_powers=tuple(int(self.own_powers[u]) for u in self.users_of(self.silo_id))
            if self._round
            else (),
            proof_request=self._proof_request.to_bytes() if self._proof_request else b"",
            backend_keys=backend_keys,
            backend_round=backend_round,
        ).to_bytes()

    def _checked_modulus(self, modulus: int) -> int:
        """``modulus`` if it is an odd number of exactly the session's key size (step 1(a)), else ``ValueError``."""
        bits = modulus.bit_length()
        if bits != self.config.parameters.key_bits or modulus % 2 == 0:
            raise ValueError(
                f"silo {self.silo_id}: expected an odd {self.config.parameters.key_bits}-bit modulus, got {bits} bits"
            )
        keys.check_key_bits(bits, insecure_test_key=self.config.parameters.insecure_test_key)
        return modulus

    @classmethod
    def restore(cls, state: bytes, config: ProtocolConfig) -> Silo:
        """The silo that :meth:`export_state` wrote, under the session's public ``config``.

        Every field is checked as the step that first set it checks it: the counts (length |U|, each at most
        N_max, before any array is made of them), the modulus (odd, of the session's key size: step 1(a); kept only
        once its proof passed), the ring-Pedersen parameters' sizes and nonce, 32-byte keys and seed, weight
        powers in Z_(n^2), and the backend's state (:meth:`uldp.secure.backends.Backend.restore_state`: the lattice
        backend's BFV public keys, one per plaintext prime, each within the session's key size and loaded by SEAL
        against the session's context, as at step 1(a); none for the Paillier backends).

        Raises:
            ValueError: the bytes are no silo state (or corrupted), or a field does not fit ``config``.
        """
        record = SiloState.from_bytes(state)
        n_max = config.parameters.n_max
        if len(record.counts) != config.n_users or any(count > n_max for count in record.counts):
            raise ValueError(
                f"silo state counts must be {config.n_users} counts in 0..{n_max} (N_max), got "
                f"{len(record.counts)} up to {max(record.counts, default=0)}"
            )
        silo = cls(record.silo, np.array(record.counts, dtype=np.int64), config)
        silo._dh_key = X25519PrivateKey.from_private_bytes(record.dh_private)
        if record.proof_request:
            silo._restore_proof_request(record.proof_request)
        if record.modulus:
            silo._n = silo._checked_modulus(record.modulus)
            silo._session = keys.session_id(silo._n)
        peers = [peer for peer in range(config.n_silos) if peer != record.silo]
        secrets = {
            "seed": [record.seed] if record.seed else [],
            "aead key": record.aead_keys,
            "mask key": record.mask_keys,
        }
        for name, values in secrets.items():
            if any(len(value) != SECRET_BYTES for value in values):
                raise ValueError(f"silo state holds a {name} that is not {SECRET_BYTES} bytes long")
        if record.own_powers and not all(
            0 < power < silo.modulus**2 for power in record.own_powers
        ):
            raise ValueError("silo state holds a weight power outside Z_(n^2)")
        if record.aead_keys or record.mask_keys:
            if not len(record.aead_keys) == len(record.mask_keys) == len(peers):
                raise ValueError(
                    f"silo state has keys for {len(record.aead_keys)} peers, expected {len(peers)}"
                )
            silo._pair_keys = {
                peer: keys.PairwiseKeys(aead=a, masks=m)
                for peer, a, m in zip(peers, record.aead_keys, record.mask_keys, strict=True)
            }
        if record.seed:
            silo._set_seed(record.seed)
        silo.backend.restore_state(silo, record.backend_keys, record.backend_round)
        if record.round_index:
            users = silo.users_of(record.silo)
            if len(record.own_powers) != len(users):
                raise ValueError(
                    f"silo state has {len(record.own_powers)} weight powers, expected {len(users)}"
                )
            silo._round = record.round_index
            silo.own_powers = dict(
                zip(users, (gmpy2.mpz(v) for v in record.own_powers), strict=True)
            )
        return silo

    def _restore_proof_request(self, data: bytes) -> None:
        """The ring-Pedersen parameters and nonce this silo sent at step 1(a), with their sizes checked (the proof
        was checked when the parameters were made; the server checks it again)."""
        request = RingPedersenMessage.from_bytes(data)
        sizes = modulus_proof.proof_parameters(self.config.parameters.key_bits)
        big_n = request.modulus
        if (
            request.silo != self.silo_id
            or len(request.nonce) != NONCE_BYTES
            or big_n.bit_length() != sizes.pedersen_bits
            or not 0 < request.s < big_n
            or not 0 < request.t < big_n
            or not len(request.commitments) == len(request.responses) == sizes.blum_challenges
        ):
            raise ValueError(
                f"silo state holds ring-Pedersen parameters that are not this silo's of "
                f"{sizes.pedersen_bits} bits with a {NONCE_BYTES}-byte nonce and "
                f"{sizes.blum_challenges} proof rounds"
            )
        self._proof_request, self._verifier = request, verifier_of(request)

    def seal(self, peer: int, round_index: int, purpose: int, payload: bytes) -> SealedMessage:
        """``payload`` for silo ``peer`` under their pairwise AEAD key, its header authenticated (step 1(c), 2(b))."""
        header = SealedMessage(self.silo_id, peer, round_index, purpose, b"", b"")
        nonce, ciphertext = keys.seal(
            self._pair_keys[peer].aead, payload, associated_data=header.associated_data()
        )
        return SealedMessage(self.silo_id, peer, round_index, purpose, nonce, ciphertext)

    def open_sealed(self, message: SealedMessage, *, round_index: int, purpose: int) -> bytes:
        """The payload a peer sealed for this silo, for round ``round_index`` and ``purpose``.

        Raises:
            ValueError: addressed elsewhere, another round or purpose, or failed authentication.
        """
        if message.recipient != self.silo_id or message.sender not in self._pair_keys:
            raise ValueError(
                f"silo {self.silo_id} got a sealed message for {message.recipient} from {message.sender}"
            )
        if message.round_index != round_index or message.purpose != purpose:
            raise ValueError(
                f"sealed message is for round {message.round_index} purpose {message.purpose}, "
                f"expected {round_index}/{purpose}"
            )
        return keys.open_sealed(
            self._pair_keys[message.sender].aead,
            message.nonce,
            message.ciphertext,
            associated_data=message.associated_data(),
        )
