"""Protocol 1 of the paper (private weighting) as explicit roles: a :class:`Server` and |S| :class:`Silo` objects.

Each stage is one method taking and returning typed messages (:mod:`uldp.secure.messages`); the driver
(:class:`uldp.secure.SecureSession`) passes every message through its byte form, as a network would. Stages:

Setup (once):
  1(a) ``Server.public_key_message`` -> ``Silo.receive_public_key`` -> X25519 public keys and (beyond the paper)
       each silo's ring-Pedersen parameters with a fresh nonce;
  1(b) ``Server.prove_modulus`` -> ``Silo.accept_modulus`` (beyond the paper: the silo checks CGGMP20's proofs that
       the modulus is well formed, :mod:`uldp.secure.modulus_proof`, before it uses it), then
       ``Server.relay_dh_keys`` -> ``Silo.receive_dh_directory`` (pairwise keys; silo 0 seals the seed R);
  1(c) ``Server.relay_sealed`` -> ``Silo.receive_seed``;
  1(d-e) ``Silo.blinded_histogram`` (B'(n_su) = r_u n_su + pairwise masks);
  1(f) ``Server.receive_histograms`` (B(N_u) = r_u N_u, its inverse B_inv(N_u)).
Every round t:
  2(a) ``Server.start_round`` (Enc(B_inv(N_u)) for sampled users, Enc(0) otherwise);
  2(b) ``Silo.share_weight_powers`` + ``Server.relay`` + ``Silo.masked_update`` (encrypted weighted sum of the
       encoded clipped deltas, plus encoded noise, plus pairwise masks);
  2(c) ``Server.finish_round`` (all silos or abort; multiply, CRT-decrypt, Decode).
Beyond the paper, with the Paillier backends, before any silo's update leaves: ``Silo.weight_check`` +
``Server.prove_weight_check`` + ``Silo.verify_weights``, the silos' joint check that the weights the server encrypted
are what the counts imply (against a malicious server; :mod:`uldp.secure.weight_check`).

The round's backend-specific parts (the extra keys of step 1(a), what the round's shares are and how the server
answers them, the masked update, its checks and its decoding, and the silo's backend state) are the session's backend
(:mod:`uldp.secure.backends`, ``ProtocolParameters(backend=...)``): ``"paillier"`` is the paper's; with
``"packed-paillier"`` ``share_weight_powers`` sends the server a blinded rescale request instead of sealed shares,
``Server.relay`` answers every silo with the rescaled fixed-point weights, the masked update packs K parameters per
ciphertext and ``finish_round`` unpacks them (:mod:`uldp.secure.packing`); ``"lattice"`` answers the same rescale with
BFV weights and runs the masked update in BFV (:mod:`uldp.secure.lattice`).

Work sharing in 2(b): ``Enc(B_inv(N_u))^(r_u C_LCM)`` is the same for every silo, so silo ``u mod |S|`` computes
it for user u and sends it to the other silos sealed with ChaCha20-Poly1305 under their pairwise key (the server
only relays ciphertexts it cannot open). Any silo could compute it itself, so silos learn nothing new, and each
silo does |U|/|S| full-size exponentiations per round instead of |U|.

The :class:`Silo` role lives in :mod:`uldp.secure.silo` (imported here). The roles keep their secrets in memory;
:meth:`Silo.export_state` and :meth:`Silo.restore` carry a silo's between processes (a Flower ClientApp may run each
message in a fresh one) as bytes of :class:`~uldp.secure.messages.SiloState`.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import gmpy2
import numpy as np

from uldp.secure import fast, keys, modulus_proof, weight_check
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
)
from uldp.secure.roles import NONCE_BYTES, modulus_proof_context, one_per_silo, verifier_of
from uldp.secure.silo import Silo

if TYPE_CHECKING:
    from collections.abc import Sequence

    from uldp.secure.config import ProtocolConfig

__all__ = ["Server", "Silo"]


class Server:
    """The aggregation server of Protocol 1: holds the Paillier secret key, sees only blinded or masked values.

    Attributes:
        backend: The server's half of the session's backend (:data:`uldp.secure.backends.BACKENDS`).
        sampled: The users of the round in progress (step 2(a)), or None between rounds.
    """

    def __init__(self, config: ProtocolConfig) -> None:
        self.config = config
        self.public_key, self._private_key = keys.generate_paillier_keypair(
            config.parameters.key_bits, insecure_test_key=config.parameters.insecure_test_key
        )
        self._n = int(self.public_key.n)
        self._blinded_totals: list[int] | None = None
        self._inverse_blinded: list[int | None] | None = None
        self._round: int | None = None
        self.sampled: np.ndarray | None = None
        self.backend = config.backend(config)

    @property
    def modulus(self) -> int:
        """The Paillier modulus n."""
        return self._n

    @property
    def round_index(self) -> int | None:
        """The round in progress (step 2(a) started it), or None."""
        return self._round

    def public_key_message(self) -> PublicKeyMessage:
        """Step 1(a): the public key for all silos."""
        return PublicKeyMessage(modulus=self._n)

    def backend_key_messages(self) -> tuple[Message, ...]:
        """Step 1(a): the backend's own public keys beside the Paillier key (the lattice backend's BFV keys)."""
        return self.backend.server_key_messages()

    def prove_modulus(self, request: RingPedersenMessage) -> ModulusProofMessage:
        """Beyond the paper, step 1(b): CGGMP20's proofs that the modulus is well formed, for the silo that sent
        ``request`` (against its ring-Pedersen parameters, bound to :func:`modulus_proof_context` with its nonce).

        Raises:
            ValueError: the silo's parameters fail their checks (an unknown silo, a nonce not of 32 bytes, a
                ring-Pedersen modulus of another size, or a ring-Pedersen proof that fails): proving against them
                could leak the key's factors.
        """
        if not 0 <= request.silo < self.config.n_silos:
            raise ValueError(
                f"ring-Pedersen parameters from unknown silo {request.silo} (silos are "
                f"0..{self.config.n_silos - 1})"
            )
        if len(request.nonce) != NONCE_BYTES:
            raise ValueError(
                f"the modulus proof's nonce has {NONCE_BYTES} bytes, got {len(request.nonce)}"
            )
        parameters = modulus_proof.proof_parameters(self.config.parameters.key_bits)
        verifier, verifier_proof = verifier_of(request)
        modulus_proof.verify_ring_pedersen(verifier, verifier_proof, parameters=parameters)
        proof = modulus_proof.prove_modulus(
            int(self._private_key.p),
            int(self._private_key.q),
            verifier,
            parameters=parameters,
            context=modulus_proof_context(self.config, request.silo, request.nonce),
        )
        blum, factors = proof.blum, proof.factors
        return ModulusProofMessage(
            silo=request.silo,
            modulus=self._n,
            w=blum.w,
            x=blum.x,
            a=blum.a,
            b=blum.b,
            z=blum.z,
            P=factors.P,
            Q=factors.Q,
            A=factors.A,
            B=factors.B,
            T=factors.T,
            sigma=factors.sigma,
            z1=factors.z1,
            z2=factors.z2,
            w1=factors.w1,
            w2=factors.w2,
            v=factors.v,
        )

    def relay_dh_keys(self, messages: Sequence[DhPublicKeyMessage]) -> DhDirectoryMessage:
        """Step 1(b): collect every silo's X25519 public key and broadcast the directory (with the silos'
        attestations, :mod:`uldp.secure.roster`, which only the silos can check)."""
        ordered = one_per_silo(
            messages, self.config.n_silos, what="DH public key", silo_of=lambda m: m.silo
        )
        signed = tuple(m.attestation for m in ordered)
        return DhDirectoryMessage(
            public_keys=tuple(m.public_key for m in ordered),
            attestations=signed if any(signed) else (),
        )

    def relay_sealed(self, messages: Sequence[Message]) -> dict[int, list[Message]]:
        """Forward sealed silo-to-silo messages (step 1(c) and the paper's round shares) by recipient, unopened.

        Raises:
            ValueError: a message is not sealed, or is mis-addressed.
        """
        inbox: dict[int, list[Message]] = {s: [] for s in range(self.config.n_silos)}
        for message in messages:
            if not isinstance(message, SealedMessage):
                raise ValueError(
                    f"the server relays sealed messages, got a {type(message).__name__}"
                )
            if (
                message.recipient not in inbox
                or message.sender not in inbox
                or message.sender == message.recipient
            ):
                raise ValueError(
                    f"cannot relay a sealed message from silo {message.sender} to {message.recipient}"
                )
            inbox[message.recipient].append(message)
        return inbox

    def relay(self, messages: Sequence[Message]) -> dict[int, list[Message]]:
        """Step 2(b): the server's answer to the round's shares, per silo, as the backend gives it (the paper's:
        the sealed weight powers relayed unopened; the packed backends': the rescaled weights for every silo).

        Raises:
            ValueError: shares that are not the backend's, from a missing or unknown silo, or of another round.
        """
        return self.backend.answer_shares(self, messages)

    def receive_histograms(self, messages: Sequence[BlindedHistogramMessage]) -> None:
        """Steps 1(e)-(f): sum the doubly blinded histograms (masks cancel) and invert B(N_u) = r_u N_u mod n.

        The server sees r_u N_u, uniform on Z_n^* for N_u > 0 (proof of Theorem 5). B(N_u) = 0 means N_u = 0:
        such a user cannot be weighted (start_round refuses to sample them).
        """
        ordered = one_per_silo(
            messages, self.config.n_silos, what="blinded histogram", silo_of=lambda m: m.silo
        )
        for message in ordered:
            self.check_histogram(message)
        totals = [
            sum(column) % self._n for column in zip(*(m.values for m in ordered), strict=True)
        ]
        inverses: list[int | None] = []
        for user, total in enumerate(totals):
            if total == 0:
                inverses.append(None)
            elif math.gcd(total, self._n) != 1:
                raise ValueError(
                    f"blinded count of user {user} is not invertible mod n; rerun the setup"
                )
            else:
                inverses.append(int(gmpy2.invert(total, self._n)))
        self._blinded_totals, self._inverse_blinded = totals, inverses

    def check_histogram(self, message: BlindedHistogramMessage) -> None:
        """Step 1(e)'s checks on one silo's histogram: |U| values, each in Z_n.

        Raises:
            ValueError: naming the problem.
        """
        message.check_elements(
            message.values, bound=self._n, count=self.config.n_users, what="blinded counts"
        )

    def check_ciphertexts(self, message: Message, ciphertexts: tuple[int, ...], count: int) -> None:
        """``count`` ciphertexts, each in Z*_{n^2} (0, n and any multiple of p or q are no Paillier ciphertext).

        Raises:
            ValueError: naming the message and the first bad ciphertext.
        """
        message.check_elements(
            ciphertexts, bound=self._n * self._n, count=count, what="ciphertexts"
        )
        for index, value in enumerate(ciphertexts):
            if value == 0 or gmpy2.gcd(value, self._n) != 1:
                raise ValueError(
                    f"{type(message).__name__}: ciphertexts #{index} is not in Z*_(n^2)"
                )

    def check_masked_update(self, message: Message, size: int) -> None:
        """Step 2(c)'s checks on one silo's masked update: this round's, for ``size`` model parameters, of the
        backend's message type and ciphertext count, each ciphertext in range (Paillier's in Z*_{n^2}).

        A value outside Z*_{n^2} (0, n, any multiple of p or q) is no Paillier ciphertext and would turn the product
        of the updates into garbage (ciphertext 0 decrypts to -1.4e53), so it is refused before anything is decrypted.

        Raises:
            ValueError: naming the problem.
        """
        silo = getattr(message, "silo", None)
        if getattr(message, "round_index", None) != self._round:
            raise ValueError(
                f"masked update of silo {silo} is for round {getattr(message, 'round_index', None)}, "
                f"expected {self._round}"
            )
        if getattr(message, "parameters", None) != size:
            raise ValueError(
                f"masked update of silo {silo} is for {getattr(message, 'parameters', None)} "
                f"parameters, expected {size}"
            )
        self.backend.check_update(self, message, size)

    def decrypt(self, ciphertexts: Sequence[int]) -> list[int]:
        """Paillier decryption with the server's secret key (CRT): what only the key holder can do.

        The protocol decrypts only the product of every silo's masked update (:meth:`finish_round`) and the
        backends' blinded rescale values; this is also for the key holder's own inspection, e.g. to see that one
        silo's update alone decrypts to a uniform value of Z_n (the masks hide it; Theorem 5).

        Raises:
            ValueError: a value outside [0, n^2).
        """
        square = self._n * self._n
        if any(not 0 <= int(c) < square for c in ciphertexts):
            raise ValueError("ciphertexts must lie in [0, n^2) of this server's key")
        return fast.crt_decrypt(
            self._private_key, list(ciphertexts), processes=self.config.parameters.workers
        )

    def encrypt(self, values: Sequence[int]) -> list[int]:
        """Fresh Paillier encryptions of ``values`` (CRT, with the secret key's factors)."""
        return fast.crt_encrypt(
            self._private_key, list(values), processes=self.config.parameters.workers
        )

    def decrypt_product(self, ciphertexts: Sequence[Sequence[int]]) -> list[int]:
        """Step 2(c): the plaintexts of the position-wise product of the silos' ciphertexts (masks cancel)."""
        modulus = gmpy2.mpz(self._n * self._n)
        totals = [gmpy2.mpz(c) for c in ciphertexts[0]]
        for row in ciphertexts[1:]:
            totals = [t * c % modulus for t, c in zip(totals, row, strict=True)]
        return self.decrypt(totals)

    @property
    def blinded_totals(self) -> list[int]:
        """B(N_u) = r_u N_u mod n for every user: all the server learns about the counts (for inspection)."""
        if self._blinded_totals is None:
            raise ValueError("the setup has not run: call receive_histograms first")
        return list(self._blinded_totals)

    def start_round(self, round_index: int, sampled: np.ndarray) -> EncryptedWeightsMessage:
        """Step 2(a): fresh Enc(B_inv(N_u)) for sampled users and Enc(0) for the others (Algorithm 4).

        Raises:
            ValueError: if the setup has not run, ``sampled`` has the wrong shape, or a sampled user has N_u = 0.
        """
        if self._inverse_blinded is None:
            raise ValueError("the setup has not run: call receive_histograms first")
        chosen = np.asarray(sampled)
        if chosen.dtype != bool or chosen.shape != (self.config.n_users,):
            raise ValueError(
                f"sampled must be a bool array of shape ({self.config.n_users},), got {chosen.dtype} {chosen.shape}"
            )
        weights: list[int] = []  # B_inv(N_u) for sampled users, 0 for the others
        empty: list[int] = []
        for u in range(self.config.n_users):
            inverse = self._inverse_blinded[u] if chosen[u] else 0
            if inverse is None:
                empty.append(u)
            else:
                weights.append(inverse)
        if empty:
            raise ValueError(
                f"user(s) {empty[:10]} are sampled but have N_u = 0 records; do not sample them"
            )
        ciphertexts = tuple(self.encrypt(weights))
        self._round, self.sampled = round_index, chosen.copy()
        return EncryptedWeightsMessage(round_index=round_index, ciphertexts=ciphertexts)

    def prove_weight_check(self, messages: Sequence[WeightCheckMessage]) -> WeightCheckProofMessage:
        """Beyond the paper, between steps 2(a) and 2(b): multiply every silo's weights-check ciphertext, decrypt the
        sum and prove the decryption with the product's randomness (:mod:`uldp.secure.weight_check`), for the
        silos to check against the round's sample.

        Raises:
            ValueError: no round started, a backend without the check, a silo missing or repeated, another round's
                contribution, or one outside Z*_(n^2).
        """
        if self._round is None or self.sampled is None:
            raise ValueError("no round was started")
        if not self.backend.checks_weights:
            raise ValueError(f"the {self.backend.name} backend has no weights check")
        ordered = one_per_silo(
            messages, self.config.n_silos, what="weights check", silo_of=lambda m: m.silo
        )
        for message in ordered:
            if message.round_index != self._round:
                raise ValueError(
                    f"weights check of silo {message.silo} is for round {message.round_index}, "
                    f"expected {self._round}"
                )
            self.check_ciphertexts(message, (message.contribution,), 1)
        contributions = tuple(m.contribution for m in ordered)
        total = weight_check.product(contributions, self._n)
        (plaintext,) = self.decrypt([total])
        return WeightCheckProofMessage(
            round_index=self._round,
            sampled=bytes(self.sampled.astype(np.uint8)),
            contributions=contributions,
            plaintext=plaintext,
            randomness=weight_check.prove_decryption(
                total, plaintext, p=int(self._private_key.p), q=int(self._private_key.q)
            ),
        )

    def finish_round(self, messages: Sequence[Message]) -> np.ndarray:
        """Step 2(c): with every silo's masked update, combine them (masks cancel), decrypt and decode, as the
        backend does it.

        Returns:
            sum_s (sum_u n_su / N_u * delta_su + z_s) for sampled users, as float64 (within P, Theorem 4).

        Raises:
            ValueError: if any silo is missing (nothing is decrypted), or a message is from another round or malformed
                (:meth:`check_masked_update`).
        """
        ordered = one_per_silo(
            messages,
            self.config.n_silos,
            what="masked update",
            silo_of=lambda m: int(getattr(m, "silo", -1)),
        )
        if self._round is None:
            raise ValueError("no round was started")
        size = int(getattr(ordered[0], "parameters", 0))
        for message in ordered:
            self.check_masked_update(message, size)
        result = self.backend.finish(self, ordered, size)
        self._round, self.sampled = None, None
        return result
