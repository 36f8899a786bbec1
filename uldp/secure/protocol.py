"""Protocol 1 of the paper (private weighting) as explicit roles: a :class:`Server` and |S| :class:`Silo` objects.

Each stage is one method taking and returning typed messages (:mod:`uldp.secure.messages`); the driver
(:class:`uldp.secure.SecureSession`) passes every message through its byte form, as a network would. Stages:

Setup (once):
  1(a) ``Server.public_key_message`` -> ``Silo.receive_public_key`` -> X25519 public keys and (beyond the paper)
       each silo's ring-Pedersen parameters with a fresh nonce;
  1(b) ``Server.prove_modulus`` -> ``Silo.accept_modulus`` (beyond the paper: the silo checks CGGMP20's proofs that
       the modulus is well formed, :mod:`uldp.secure.modulus_proof`, before it uses it), then
       ``Server.relay_dh_keys`` -> ``Silo.receive_dh_directory`` (pairwise keys; silo 0 seals the seed R);
  1(c) ``Server.relay`` -> ``Silo.receive_seed``;
  1(d-e) ``Silo.blinded_histogram`` (B'(n_su) = r_u n_su + pairwise masks);
  1(f) ``Server.receive_histograms`` (B(N_u) = r_u N_u, its inverse B_inv(N_u)).
Every round t:
  2(a) ``Server.start_round`` (Enc(B_inv(N_u)) for sampled users, Enc(0) otherwise);
  2(b) ``Silo.share_weight_powers`` + ``Server.relay`` + ``Silo.masked_update`` (encrypted weighted sum of the
       encoded clipped deltas, plus encoded noise, plus pairwise masks);
  2(c) ``Server.finish_round`` (all silos or abort; multiply, CRT-decrypt, Decode).

With ``ProtocolParameters(backend="packed-paillier")`` the same stages carry the packed backend
(:mod:`uldp.secure.packing`): ``share_weight_powers`` sends the server a blinded rescale request instead of sealed
shares, ``Server.relay`` answers every silo with the rescaled fixed-point weights, ``masked_update`` packs K
parameters per ciphertext and ``finish_round`` unpacks them. With ``backend="lattice"`` the rescale is the same, its
answer is the BFV ``Enc(y_u)`` of :mod:`uldp.secure.lattice` (the BFV public keys travel beside the Paillier key in
step 1(a)), and the masked update is the lattice one (a silo's exported state carries the BFV public keys and its
last answered lattice round).

Work sharing in 2(b): ``Enc(B_inv(N_u))^(r_u C_LCM)`` is the same for every silo, so silo ``u mod |S|`` computes
it for user u and sends it to the other silos sealed with ChaCha20-Poly1305 under their pairwise key (the server
only relays ciphertexts it cannot open). Any silo could compute it itself, so silos learn nothing new, and each
silo does |U|/|S| full-size exponentiations per round instead of |U|.

The roles keep their secrets in memory; :meth:`Silo.export_state` and :meth:`Silo.restore` carry a silo's between
processes (a Flower ClientApp may run each message in a fresh one) as bytes of :class:`~uldp.secure.messages.SiloState`.
"""

from __future__ import annotations

import math
import os
from typing import TYPE_CHECKING, Any, TypeVar

import gmpy2
import numpy as np
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from uldp.secure import encoding, fast, keys, masks, modulus_proof, packing
from uldp.secure.messages import (
    BlindedHistogramMessage,
    DhDirectoryMessage,
    DhPublicKeyMessage,
    EncryptedWeightsMessage,
    LatticeKeysMessage,
    LatticeUpdateMessage,
    LatticeWeightsMessage,
    MaskedUpdateMessage,
    Message,
    ModulusProofMessage,
    PublicKeyMessage,
    RescaledWeightsMessage,
    RescaleRequestMessage,
    RingPedersenMessage,
    SealedMessage,
    SiloState,
    pack_ints,
    unpack_ints,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from uldp.secure.config import ProtocolConfig

#: Purposes of sealed silo-to-silo payloads (authenticated in the AEAD header).
SEALED_SEED = 1
SEALED_WEIGHT_POWERS = 2

M = TypeVar("M", bound=Message)
#: Bytes of the nonce a silo draws for the modulus proof of one session.
NONCE_BYTES = 32


def modulus_proof_context(config: ProtocolConfig, silo_id: int, nonce: bytes) -> bytes:
    """What the server's modulus proof for one silo is bound to (its Fiat-Shamir hashes): the silo's id, the
    session's shape and key size, and the silo's fresh nonce, so a proof made for another silo or another session is
    refused."""
    shape = (silo_id, config.n_silos, config.n_users, config.parameters.key_bits)
    return (
        b"uldp/protocol-1/modulus/" + b"".join(value.to_bytes(4, "big") for value in shape) + nonce
    )


def _verifier_of(request: RingPedersenMessage) -> modulus_proof.Verifier:
    return (
        modulus_proof.RingPedersen(n=request.modulus, s=request.s, t=request.t),
        modulus_proof.RingPedersenProof(
            commitments=request.commitments, responses=request.responses
        ),
    )


def _proof_of(message: ModulusProofMessage) -> modulus_proof.ModulusProof:
    return modulus_proof.ModulusProof(
        blum=modulus_proof.PaillierBlumProof(
            w=message.w, x=message.x, a=message.a, b=message.b, z=message.z
        ),
        factors=modulus_proof.NoSmallFactorProof(
            P=message.P,
            Q=message.Q,
            A=message.A,
            B=message.B,
            T=message.T,
            sigma=message.sigma,
            z1=message.z1,
            z2=message.z2,
            w1=message.w1,
            w2=message.w2,
            v=message.v,
        ),
    )


def _one_per_silo(
    messages: Sequence[M], n_silos: int, *, what: str, silo_of: Callable[[M], int]
) -> list[M]:
    """Messages ordered by silo id; aborts with a clear error when a silo is missing, unknown or duplicated."""
    by_silo: dict[int, M] = {}
    for message in messages:
        silo = silo_of(message)
        if not 0 <= silo < n_silos:
            raise ValueError(f"{what} from unknown silo {silo} (silos are 0..{n_silos - 1})")
        if silo in by_silo:
            raise ValueError(f"duplicate {what} from silo {silo}")
        by_silo[silo] = message
    missing = sorted(set(range(n_silos)) - set(by_silo))
    if missing:
        raise ValueError(
            f"aborted: no {what} from silo(s) {missing}; every silo must take part in every round, and the server "
            f"decrypts nothing from a partial set"
        )
    return [by_silo[s] for s in range(n_silos)]


class Server:
    """The aggregation server of Protocol 1: holds the Paillier secret key, sees only blinded or masked values."""

    def __init__(self, config: ProtocolConfig) -> None:
        self.config = config
        self.public_key, self._private_key = keys.generate_paillier_keypair(
            config.parameters.key_bits, insecure_test_key=config.parameters.insecure_test_key
        )
        self._n = int(self.public_key.n)
        self._blinded_totals: list[int] | None = None
        self._inverse_blinded: list[int | None] | None = None
        self._round: int | None = None
        self._n_parameters: int | None = None
        self._lattice: Any = None
        if config.lattice:
            from uldp.secure import lattice

            self._lattice = lattice.LatticeServer(
                config.lattice_layout, processes=config.parameters.processes
            )

    def lattice_keys_message(self) -> LatticeKeysMessage:
        """Step 1(a), lattice backend: the BFV public keys for all silos.

        Raises:
            ValueError: not the lattice backend.
        """
        if self._lattice is None:
            raise ValueError(
                f"BFV keys belong to the lattice backend, this session is "
                f"{self.config.parameters.backend!r}"
            )
        return LatticeKeysMessage(public_keys=self._lattice.public_keys())

    def public_key_message(self) -> PublicKeyMessage:
        """Step 1(a): the public key for all silos."""
        return PublicKeyMessage(modulus=self._n)

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
        verifier, verifier_proof = _verifier_of(request)
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
        ordered = _one_per_silo(
            messages, self.config.n_silos, what="DH public key", silo_of=lambda m: m.silo
        )
        signed = tuple(m.attestation for m in ordered)
        return DhDirectoryMessage(
            public_keys=tuple(m.public_key for m in ordered),
            attestations=signed if any(signed) else (),
        )

    def relay(self, messages: Sequence[Message]) -> dict[int, list[Message]]:
        """Forward sealed silo-to-silo messages (step 1(c) and the round's shares) by recipient, unopened; with the
        packed backend, answer the round's rescale requests (:meth:`rescale`) with one message for every silo.

        Raises:
            ValueError: a message is neither sealed nor a rescale request, sealed messages and rescale requests are
                mixed, or a sealed message is mis-addressed.
        """
        inbox: dict[int, list[Message]] = {s: [] for s in range(self.config.n_silos)}
        requests = [m for m in messages if isinstance(m, RescaleRequestMessage)]
        if requests:
            if len(requests) != len(messages):
                raise ValueError(
                    "a relay carries either sealed messages or the round's rescale requests, not both"
                )
            answer = self.rescale(requests)
            return {s: [answer] for s in inbox}
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

    def receive_histograms(self, messages: Sequence[BlindedHistogramMessage]) -> None:
        """Steps 1(e)-(f): sum the doubly blinded histograms (masks cancel) and invert B(N_u) = r_u N_u mod n.

        The server sees r_u N_u, uniform on Z_n^* for N_u > 0 (proof of Theorem 5). B(N_u) = 0 means N_u = 0:
        such a user cannot be weighted (start_round refuses to sample them).
        """
        ordered = _one_per_silo(
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

    def rescale(
        self, messages: Sequence[RescaleRequestMessage]
    ) -> RescaledWeightsMessage | LatticeWeightsMessage:
        """Packed backend, step 2 (:mod:`uldp.secure.packing`): decrypt every ``z_u = b_u C_LCM / N_u + rho_u``
        (statistically independent of N_u), and encrypt ``floor(z_u 2^g / C_LCM)`` afresh for every user (in BFV
        with the lattice backend: the same ciphertexts for every silo).

        Raises:
            ValueError: not the packed backend, a silo missing or duplicated, a request of another round, or a wrong
                count or range of ciphertexts.
        """
        if not self.config.rescales:
            raise ValueError(
                "rescale requests belong to the packed-paillier backend (and the lattice one), this "
                "session is 'paillier'"
            )
        ordered = _one_per_silo(
            messages, self.config.n_silos, what="rescale request", silo_of=lambda m: m.silo
        )
        blinded: list[int] = [0] * self.config.n_users
        for message in ordered:
            if message.round_index != self._round:
                raise ValueError(
                    f"rescale request of silo {message.silo} is for round {message.round_index}, expected {self._round}"
                )
            users = range(message.silo, self.config.n_users, self.config.n_silos)
            self._check_ciphertexts(message, message.ciphertexts, len(users))
            for user, value in zip(users, self.decrypt(message.ciphertexts), strict=True):
                blinded[user] = value
        g, c_lcm = self.config.weight_bits, self.config.c_lcm
        weights = [packing.rescaled(z, c_lcm=c_lcm, weight=g) for z in blinded]
        if self._lattice is not None:
            return LatticeWeightsMessage(
                round_index=self._round or 0,
                ciphertexts=tuple(
                    c for prime in self._lattice.encrypt_weights(weights) for c in prime
                ),
            )
        return RescaledWeightsMessage(
            round_index=self._round or 0,
            ciphertexts=tuple(
                fast.crt_encrypt(
                    self._private_key, weights, processes=self.config.parameters.processes
                )
            ),
        )

    def _check_ciphertexts(
        self, message: Message, ciphertexts: tuple[int, ...], count: int
    ) -> None:
        """``count`` ciphertexts, each in Z*_{n^2} (0, n and any multiple of p or q are no Paillier ciphertext)."""
        message.check_elements(
            ciphertexts, bound=self._n * self._n, count=count, what="ciphertexts"
        )
        for index, value in enumerate(ciphertexts):
            if value == 0 or gmpy2.gcd(value, self._n) != 1:
                raise ValueError(
                    f"{type(message).__name__}: ciphertexts #{index} is not in Z*_(n^2)"
                )

    def check_masked_update(
        self, message: MaskedUpdateMessage | LatticeUpdateMessage, size: int
    ) -> None:
        """Step 2(c)'s checks on one silo's masked update: this round's, for ``size`` model parameters, with one
        ciphertext per parameter (per K parameters with the packed backend), each in Z*_{n^2}.

        A value outside Z*_{n^2} (0, n, any multiple of p or q) is no Paillier ciphertext and would turn the product
        of the updates into garbage (ciphertext 0 decrypts to -1.4e53), so it is refused before anything is decrypted.

        Raises:
            ValueError: naming the problem.
        """
        if message.round_index != self._round:
            raise ValueError(
                f"masked update of silo {message.silo} is for round {message.round_index}, expected {self._round}"
            )
        if message.parameters != size:
            raise ValueError(
                f"masked update of silo {message.silo} is for {message.parameters} parameters, "
                f"expected {size}"
            )
        if self._lattice is not None:
            layout = self._lattice.layout
            count = len(layout.plain_moduli) * layout.chunks_for(size)
            if not isinstance(message, LatticeUpdateMessage) or len(message.ciphertexts) != count:
                raise ValueError(
                    f"masked update of silo {message.silo} must be a lattice update of {count} "
                    f"ciphertexts for {size} parameters"
                )
            return
        if not isinstance(message, MaskedUpdateMessage):
            raise ValueError(
                f"masked update of silo {message.silo} is a {type(message).__name__}, not Paillier's"
            )
        count = self.config.packed_layout.ciphertexts_for(size) if self.config.packed else size
        self._check_ciphertexts(message, message.ciphertexts, count)

    def decrypt(self, ciphertexts: Sequence[int]) -> list[int]:
        """Paillier decryption with the server's secret key (CRT): what only the key holder can do.

        The protocol decrypts only the product of every silo's masked update (:meth:`finish_round`); this is for
        the key holder's own inspection, e.g. to see that one silo's update alone decrypts to a uniform value of
        Z_n (the masks hide it; Theorem 5).

        Raises:
            ValueError: a value outside [0, n^2).
        """
        square = self._n * self._n
        if any(not 0 <= int(c) < square for c in ciphertexts):
            raise ValueError("ciphertexts must lie in [0, n^2) of this server's key")
        return fast.crt_decrypt(
            self._private_key, list(ciphertexts), processes=self.config.parameters.processes
        )

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
        ciphertexts = tuple(
            fast.crt_encrypt(self._private_key, weights, processes=self.config.parameters.processes)
        )
        self._round = round_index
        return EncryptedWeightsMessage(round_index=round_index, ciphertexts=ciphertexts)

    def finish_round(
        self, messages: Sequence[MaskedUpdateMessage | LatticeUpdateMessage]
    ) -> np.ndarray:
        """Step 2(c): with every silo's masked update, multiply (masks cancel), CRT-decrypt and Decode.

        Returns:
            sum_s (sum_u n_su / N_u * delta_su + z_s) for sampled users, as float64 (within P, Theorem 4).

        Raises:
            ValueError: if any silo is missing (nothing is decrypted), or a message is from another round or malformed
                (:meth:`check_masked_update`).
        """
        ordered = _one_per_silo(
            messages, self.config.n_silos, what="masked update", silo_of=lambda m: m.silo
        )
        if self._round is None:
            raise ValueError("no round was started")
        size = ordered[0].parameters
        for message in ordered:
            self.check_masked_update(message, size)
        if self._lattice is not None:
            self._round = None
            primes = len(self._lattice.layout.plain_moduli)
            chunks = len(ordered[0].ciphertexts) // primes
            return self._lattice.finish(
                [
                    [m.ciphertexts[i * chunks : (i + 1) * chunks] for i in range(primes)]
                    for m in ordered
                ],
                size,
            )
        modulus = gmpy2.mpz(self._n * self._n)
        totals = [gmpy2.mpz(c) for c in ordered[0].ciphertexts]
        for message in ordered[1:]:
            totals = [t * c % modulus for t, c in zip(totals, message.ciphertexts, strict=True)]
        plaintexts = fast.crt_decrypt(
            self._private_key, totals, processes=self.config.parameters.processes
        )
        self._round = None
        if self.config.packed:
            layout = self.config.packed_layout
            signed = [m - self._n if m > self._n // 2 else m for m in plaintexts]
            return np.array(
                [packing.decode(a, layout) for a in packing.unpack_integers(signed, size, layout)],
                dtype=np.float64,
            )
        return np.array(
            [
                encoding.decode(
                    m,
                    resolution_bits=self.config.resolution_bits,
                    c_lcm=self.config.c_lcm,
                    modulus=self._n,
                )
                for m in plaintexts
            ]
        )


#: The length of a silo's symmetric secrets: the pairwise AEAD and mask keys (step 1(b)) and the seed R (step 1(c)).
SECRET_BYTES = 32


class Silo:
    """One silo of Protocol 1: knows its own counts n_su and, after setup, the shared blinds r_u.

    Args:
        silo_id: This silo's number.
        counts: n_su of this silo, [|U|].
        config: The session's public parameters.
        verifier: This silo's ring-Pedersen parameters with their proof (:func:`uldp.secure.modulus_proof.
            ring_pedersen`), kept from an earlier session; None draws new ones at step 1(a) (2048-bit safe primes
            take about a minute at the default key sizes).
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
        self._own_powers: dict[int, gmpy2.mpz] = {}
        self._round: int | None = None
        self._lattice_keys: tuple[bytes, ...] = ()
        self._lattice: Any = None
        self._lattice_round = (
            0  # the last round a lattice update was computed for, until self._lattice exists
        )
        self._verifier = verifier
        self._proof_request: RingPedersenMessage | None = None

    @property
    def verifier(self) -> modulus_proof.Verifier | None:
        """This silo's ring-Pedersen parameters with their proof (public; None before step 1(a)), to keep for the
        next session."""
        return self._verifier

    @property
    def _modulus(self) -> int:
        if self._n is None:
            raise ValueError(
                f"silo {self.silo_id} has no public key yet: call receive_public_key first"
            )
        return self._n

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
            _proof_of(message),
            self._verifier[0],
            context=modulus_proof_context(self.config, self.silo_id, request.nonce),
            parameters=modulus_proof.proof_parameters(self.config.parameters.key_bits),
        )
        self._n = modulus
        self._session = keys.session_id(modulus)

    def receive_lattice_keys(self, message: LatticeKeysMessage) -> None:
        """Step 1(a), lattice backend: check the server's BFV public keys (one per plaintext prime, each a public key
        of the session, :func:`uldp.secure.lattice.load_public_keys`) and keep their bytes.

        Raises:
            ValueError: not the lattice backend, or keys that are not the session's (wrong count, size or format).
        """
        self._check_lattice_keys(message.public_keys)
        self._lattice_keys = tuple(message.public_keys)

    def _check_lattice_keys(self, public_keys: Sequence[bytes]) -> None:
        """Step 1(a)'s checks on the BFV public keys (also run on a restored state's)."""
        from uldp.secure import lattice

        if not self.config.lattice:
            raise ValueError(
                f"silo {self.silo_id}: BFV keys belong to the lattice backend, this session is "
                f"{self.config.parameters.backend!r}"
            )
        lattice.load_public_keys(self.config.lattice_layout, public_keys, silo_id=self.silo_id)

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
        self._set_seed(os.urandom(32))
        return [self._seal(peer, 0, SEALED_SEED, self._seed) for peer in self._pair_keys]  # type: ignore[arg-type]

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
        seed = self._open(seeds[0], round_index=0, purpose=SEALED_SEED)
        if len(seed) != SECRET_BYTES:
            raise ValueError(f"the seed R has {SECRET_BYTES} bytes, got {len(seed)}")
        self._set_seed(seed)

    def _set_seed(self, seed: bytes) -> None:
        self._seed = seed
        # Step 1(d): r_u uniform on Z_n^*, the same in every silo (keyed by R).
        self._blinds = masks.unit_blinds(
            keys.derive_key(seed, label=b"blinds" + self._session),
            modulus=self._modulus,
            count=self.config.n_users,
        )

    def sampling_key(self) -> bytes:
        """Beyond the paper: the key of the silos' user sample (:mod:`uldp.secure.sampling`), derived from the seed R
        of step 1(c), which the server never sees; the same in every silo."""
        if self._seed is None:
            raise ValueError(f"silo {self.silo_id} has no seed R yet (step 1(c))")
        return keys.derive_key(self._seed, label=b"user-sampling" + self._session)

    def _users_of(self, silo: int) -> range:
        """The users whose shared weight power silo ``silo`` computes in step 2(b): u = silo mod |S|."""
        return range(silo, self.config.n_users, self.config.n_silos)

    def export_state(self) -> bytes:
        """This silo's secrets and progress as bytes (:class:`~uldp.secure.messages.SiloState`; no pickle).

        For a silo whose process may end between two messages: keep the bytes where the silo lives (a Flower
        ClientApp's node-local context state) and :meth:`restore` them for the next message. They hold the pairwise
        keys, the seed R and n_su: keep them as private as the silo's records, never send them. With the lattice
        backend they also hold the server's BFV public keys (about 1.6 MB each) and the last answered lattice round.
        """
        peers = sorted(self._pair_keys)
        return SiloState(
            silo=self.silo_id,
            counts=tuple(self._counts),
            dh_private=self._dh_key.private_bytes_raw(),
            modulus=self._n or 0,
            aead_keys=tuple(self._pair_keys[p].aead for p in peers),
            mask_keys=tuple(self._pair_keys[p].masks for p in peers),
            seed=self._seed or b"",
            round_index=self._round or 0,
            own_powers=tuple(int(self._own_powers[u]) for u in self._users_of(self.silo_id))
            if self._round
            else (),
            proof_request=self._proof_request.to_bytes() if self._proof_request else b"",
            lattice_keys=self._lattice_keys,
            lattice_round=self._lattice.answered_round
            if self._lattice is not None
            else self._lattice_round,
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
        powers in Z_(n^2), and BFV public keys (lattice backend only: one per plaintext prime, each within the
        session's key size and loaded by SEAL against the session's context, as at step 1(a)).

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
            0 < power < silo._modulus**2 for power in record.own_powers
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
        if (record.lattice_keys or record.lattice_round) and not config.lattice:
            raise ValueError(
                f"silo state holds BFV keys or a lattice round, but this session's backend is "
                f"{config.parameters.backend!r}"
            )
        if record.lattice_keys:
            silo._check_lattice_keys(record.lattice_keys)
            silo._lattice_keys = tuple(record.lattice_keys)
        silo._lattice_round = record.lattice_round
        if record.round_index:
            users = silo._users_of(record.silo)
            if len(record.own_powers) != len(users):
                raise ValueError(
                    f"silo state has {len(record.own_powers)} weight powers, expected {len(users)}"
                )
            silo._round = record.round_index
            silo._own_powers = dict(
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
        self._proof_request, self._verifier = request, _verifier_of(request)

    def _seal(self, peer: int, round_index: int, purpose: int, payload: bytes) -> SealedMessage:
        header = SealedMessage(self.silo_id, peer, round_index, purpose, b"", b"")
        nonce, ciphertext = keys.seal(
            self._pair_keys[peer].aead, payload, associated_data=header.associated_data()
        )
        return SealedMessage(self.silo_id, peer, round_index, purpose, nonce, ciphertext)

    def _open(self, message: SealedMessage, *, round_index: int, purpose: int) -> bytes:
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

    @property
    def _blind_values(self) -> list[int]:
        if self._blinds is None:
            raise ValueError(f"silo {self.silo_id} has no seed R yet: finish steps 1(b)-(c) first")
        return self._blinds

    def blinded_histogram(self) -> BlindedHistogramMessage:
        """Steps 1(d)-(e): B'(n_su) = r_u n_su + sum_{s<s'} r^u_{s,s'} - sum_{s>s'} r^u_{s,s'} mod n."""
        n = self._modulus
        net_masks = masks.signed_mask_sum(
            {peer: k.masks for peer, k in self._pair_keys.items()},
            own_id=self.silo_id,
            modulus=n,
            count=self.config.n_users,
            round_index=0,
            purpose=masks.PURPOSE_HISTOGRAM,
        )
        values = tuple(
            (r * c + m) % n
            for r, c, m in zip(self._blind_values, self._counts, net_masks, strict=True)
        )
        return BlindedHistogramMessage(silo=self.silo_id, values=values)

    def _check_weights(self, message: EncryptedWeightsMessage) -> None:
        n = self._modulus
        message.check_elements(
            message.ciphertexts, bound=n * n, count=self.config.n_users, what="encrypted weights"
        )

    def share_weight_powers(self, message: EncryptedWeightsMessage) -> list[Message]:
        """Step 2(b), shared part: Enc(B_inv(N_u))^(r_u C_LCM) for the users u = silo_id mod |S|, sealed to peers
        (with the packed backend: blinded by rho_u, in one rescale request to the server, :mod:`uldp.secure.packing`).
        """
        self._check_weights(message)
        n = self._modulus
        n_square = n * n
        mine = self._users_of(self.silo_id)
        powers = fast.raise_each(
            [message.ciphertexts[u] for u in mine],
            [self._blind_values[u] * self.config.c_lcm % n for u in mine],
            n_square,
            processes=self.config.parameters.processes,
        )
        self._own_powers = dict(zip(mine, powers, strict=True))
        self._round = message.round_index
        if (
            self.config.rescales
        ):  # Enc(b_u C_LCM / N_u + rho_u): adding a plaintext t multiplies by 1 + t n
            blinds = self._rescale_blinds(message.round_index)
            request = tuple(
                int(p * (1 + n * blinds[u]) % n_square) for u, p in zip(mine, powers, strict=True)
            )
            return [
                RescaleRequestMessage(
                    round_index=message.round_index, silo=self.silo_id, ciphertexts=request
                )
            ]
        payload = pack_ints([self._own_powers[u] for u in mine])
        return [
            self._seal(peer, message.round_index, SEALED_WEIGHT_POWERS, payload)
            for peer in self._pair_keys
        ]

    def _rescale_blinds(self, round_index: int) -> list[int]:
        """The round's rescale blinds rho_u, uniform on [0, 2^h) (:func:`uldp.secure.packing.rescale_blind_bits`),
        the same in every silo (keyed by the seed R, which the server does not know)."""
        if self._seed is None:
            raise ValueError(f"silo {self.silo_id} has no seed R yet: finish steps 1(b)-(c) first")
        bits = packing.rescale_blind_bits(
            key_bits=self.config.parameters.key_bits, n_max=self.config.parameters.n_max
        )
        return masks.uniform_elements(
            keys.derive_key(self._seed, label=b"rescale" + self._session),
            modulus=1 << bits,
            count=self.config.n_users,
            round_index=round_index,
            purpose=masks.PURPOSE_RESCALE,
        )

    def _weight_bases(
        self, message: EncryptedWeightsMessage, shared: Sequence[Message], active: list[int]
    ) -> list[gmpy2.mpz]:
        """Per active user, ``Enc(n_su C_LCM / N_u)`` (Protocol 1, from the shared weight powers) or, with the packed
        backend, ``Enc(n_su w_u)`` (the rescaled weights minus the blinds' share, :mod:`uldp.secure.packing`)."""
        n = self._modulus
        n_square = n * n
        if self.config.packed:
            answers = [m for m in shared if isinstance(m, RescaledWeightsMessage)]
            if len(answers) != 1 or len(shared) != 1:
                raise ValueError(
                    f"silo {self.silo_id}: expected the server's rescaled weights alone, got "
                    f"{[type(m).__name__ for m in shared]}"
                )
            answer = answers[0]
            if answer.round_index != message.round_index:
                raise ValueError(
                    f"silo {self.silo_id}: rescaled weights of round {answer.round_index}, expected "
                    f"{message.round_index}"
                )
            answer.check_elements(
                answer.ciphertexts,
                bound=n_square,
                count=self.config.n_users,
                what="rescaled weights",
            )
            blinds = self._rescale_blinds(message.round_index)
            g, c_lcm = self.config.weight_bits, self.config.c_lcm
            return [
                gmpy2.powmod(
                    answer.ciphertexts[u]
                    * (1 + n * (-packing.rescaled(blinds[u], c_lcm=c_lcm, weight=g) % n)),
                    self._counts[u],
                    n_square,
                )
                for u in active
            ]
        powers = dict(self._own_powers)
        peers = sorted(self._pair_keys)
        sealed_shares = [
            m for m in shared if isinstance(m, SealedMessage) and m.purpose == SEALED_WEIGHT_POWERS
        ]
        by_sender = {m.sender: m for m in sealed_shares}
        missing = [peer for peer in peers if peer not in by_sender]
        if missing or len(by_sender) != len(sealed_shares):
            raise ValueError(
                f"silo {self.silo_id}: weight-power shares missing from silo(s) {missing} or duplicated"
            )
        for sealed in (by_sender[peer] for peer in peers):
            values = unpack_ints(
                self._open(sealed, round_index=message.round_index, purpose=SEALED_WEIGHT_POWERS)
            )
            users = self._users_of(sealed.sender)
            if len(values) != len(users):
                raise ValueError(
                    f"share of silo {sealed.sender} has {len(values)} values, expected {len(users)}"
                )
            powers.update(zip(users, (gmpy2.mpz(v) for v in values), strict=True))
        return [
            gmpy2.powmod(powers[u], self._counts[u], n_square) for u in active
        ]  # Enc(n_su C_LCM / N_u)

    def _round_inputs(
        self, message: EncryptedWeightsMessage, deltas: np.ndarray, noise: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, list[int]]:
        """Step 2(b)'s checks on the round and the silo's inputs: float64 deltas, noise and the users with records.

        Raises:
            ValueError: another round's weights, wrong shapes or values beyond the bounds the session assumed.
        """
        self._check_weights(message)
        if self._round != message.round_index:
            raise ValueError(
                f"silo {self.silo_id}: call share_weight_powers for round {message.round_index} first"
            )
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

    def lattice_update(
        self,
        message: EncryptedWeightsMessage,
        shared: Sequence[Message],
        deltas: np.ndarray,
        noise: np.ndarray,
    ) -> LatticeUpdateMessage:
        """Lattice backend, steps 2(b)-(c) in the silo (:meth:`masked_update`'s counterpart): the server's BFV
        weights (``shared``), the rescale corrections c_u = floor(rho_u 2^g / C_LCM) from the seed R, and
        :meth:`uldp.secure.lattice.LatticeSilo.masked_update`.

        Raises:
            ValueError: not the lattice backend, the checks of :meth:`masked_update`, or weights that are not the
                server's BFV weights of this round.
        """
        from uldp.secure import lattice

        if not self.config.lattice:
            raise ValueError(
                f"silo {self.silo_id}: lattice updates belong to the lattice backend, this session is "
                f"{self.config.parameters.backend!r}"
            )
        deltas, noise, _ = self._round_inputs(message, deltas, noise)
        round_index = message.round_index

        answers = [m for m in shared if isinstance(m, LatticeWeightsMessage)]
        if len(answers) != 1 or len(shared) != 1 or answers[0].round_index != round_index:
            raise ValueError(
                f"silo {self.silo_id}: expected the server's BFV weights of round {round_index} alone, "
                f"got {[type(m).__name__ for m in shared]}"
            )
        if self._lattice is None:
            if not self._lattice_keys:
                raise ValueError(
                    f"silo {self.silo_id} has no BFV public keys: step 1(a) of the lattice backend"
                )
            self._lattice = lattice.LatticeSilo(
                self.silo_id,
                np.array(self._counts, dtype=np.int64),
                self.config.lattice_layout,
                public_keys=self._lattice_keys,
                mask_keys={p: k.masks for p, k in self._pair_keys.items()},
                processes=self.config.parameters.processes,
                answered_round=self._lattice_round,
            )
        ciphertexts = answers[0].ciphertexts
        users, primes = self.config.n_users, len(self._lattice.layout.plain_moduli)
        if len(ciphertexts) != users * primes:
            raise ValueError(
                f"silo {self.silo_id}: {len(ciphertexts)} BFV weights, expected |U| x {primes} primes"
            )
        g, c_lcm = self.config.weight_bits, self.config.c_lcm
        corrections = [
            packing.rescaled(r, c_lcm=c_lcm, weight=g) for r in self._rescale_blinds(round_index)
        ]
        update = self._lattice.masked_update(
            round_index,
            [ciphertexts[i * users : (i + 1) * users] for i in range(primes)],
            corrections,
            deltas,
            noise,
        )
        self._round = None
        return LatticeUpdateMessage(
            round_index=round_index,
            silo=self.silo_id,
            parameters=deltas.shape[1],
            ciphertexts=tuple(c for prime in update for c in prime),
        )

    def masked_update(
        self,
        message: EncryptedWeightsMessage,
        shared: Sequence[Message],
        deltas: np.ndarray,
        noise: np.ndarray,
    ) -> MaskedUpdateMessage:
        """Steps 2(b)-(c) in the silo: Enc(sum_u Encode(delta_u) n_su r_u C_LCM B_inv(N_u) + Encode(z) C_LCM + masks).

        Args:
            message: the round's encrypted weights (the same message given to share_weight_powers).
            shared: the sealed weight powers from every other silo (backend ``"paillier"``), or the server's
                rescaled weights (``"packed-paillier"``), as :meth:`Server.relay` delivered them.
            deltas: clipped deltas of this silo's users, shape (|U|, d) (rows of users without records are ignored).
            noise: this silo's Gaussian noise, shape (d,).

        Returns:
            One ciphertext per parameter (per K parameters with the packed backend), masked with the round's
            pairwise masks.

        Raises:
            ValueError: if shapes are wrong, a value exceeds the bounds the no-wrap-around check assumed, shares are
                missing or fail authentication.
        """
        deltas, noise, active = self._round_inputs(message, deltas, noise)
        n = self._modulus
        n_square = n * n
        bases = self._weight_bases(message, shared, active)
        bits = self.config.resolution_bits
        exponents = (
            encoding.encode(deltas[active], resolution_bits=bits)
            if active
            else np.zeros((0, deltas.shape[1]), np.int64)
        )
        processes = self.config.parameters.processes
        sums = fast.weighted_ciphertext_sum(bases, exponents, n_square, processes=processes)
        encoded_noise = encoding.encode(noise, resolution_bits=bits).tolist()
        scale = self.config.c_lcm
        if (
            self.config.packed
        ):  # K parameters per ciphertext; the noise enters scaled by 2^g and packed likewise
            layout = self.config.packed_layout
            sums = fast.pack_ciphertexts(
                sums,
                slots=layout.slots,
                slot_bits=layout.slot_bits,
                n_square=n_square,
                processes=processes,
            )
            encoded_noise = packing.pack_integers(
                [z << layout.weight_bits for z in encoded_noise], layout
            )
            scale = 1
        net_masks = masks.signed_mask_sum(
            {peer: k.masks for peer, k in self._pair_keys.items()},
            own_id=self.silo_id,
            modulus=n,
            count=len(encoded_noise),
            round_index=message.round_index,
            purpose=masks.PURPOSE_UPDATE,
        )
        # Adding a plaintext t is multiplying by g^t = 1 + t n (mod n^2) since g = n + 1.
        ciphertexts = tuple(
            int(s * (1 + n * ((z * scale + m) % n)) % n_square)
            for s, z, m in zip(sums, encoded_noise, net_masks, strict=True)
        )
        self._round = None
        return MaskedUpdateMessage(
            round_index=message.round_index,
            silo=self.silo_id,
            parameters=deltas.shape[1],
            ciphertexts=ciphertexts,
        )
