"""Protocol 1 of the paper (private weighting) as explicit roles: a :class:`Server` and |S| :class:`Silo` objects.

Each stage is one method taking and returning typed messages (:mod:`uldp.secure.messages`); the driver
(:class:`SecureSession`) passes every message through its byte form, as a network would. Stages:

Setup (once):
  1(a) ``Server.public_key_message`` -> ``Silo.receive_public_key`` -> X25519 public keys;
  1(b) ``Server.relay_dh_keys`` -> ``Silo.receive_dh_directory`` (pairwise keys; silo 0 seals the seed R);
  1(c) ``Server.relay`` -> ``Silo.receive_seed``;
  1(d-e) ``Silo.blinded_histogram`` (B'(n_su) = r_u n_su + pairwise masks);
  1(f) ``Server.receive_histograms`` (B(N_u) = r_u N_u, its inverse B_inv(N_u)).
Every round t:
  2(a) ``Server.start_round`` (Enc(B_inv(N_u)) for sampled users, Enc(0) otherwise);
  2(b) ``Silo.share_weight_powers`` + ``Server.relay`` + ``Silo.masked_update`` (encrypted weighted sum of the
       encoded clipped deltas, plus encoded noise, plus pairwise masks);
  2(c) ``Server.finish_round`` (all silos or abort; multiply, CRT-decrypt, Decode).

Work sharing in 2(b): ``Enc(B_inv(N_u))^(r_u C_LCM)`` is the same for every silo, so silo ``u mod |S|`` computes
it for user u and sends it to the other silos sealed with ChaCha20-Poly1305 under their pairwise key (the server
only relays ciphertexts it cannot open). Any silo could compute it itself, so silos learn nothing new, and each
silo does |U|/|S| full-size exponentiations per round instead of |U|.

>>> import numpy as np
>>> counts = np.array([[2, 0, 1], [1, 3, 0]])
>>> deltas = np.array([[[0.1], [0.0], [-0.2]], [[0.4], [0.3], [0.0]]])
>>> noise = np.array([[0.01], [-0.02]])
>>> sampled = np.array([True, True, False])
>>> result = run_secure_round(counts, deltas, noise, sampled, key_bits=512, n_max=6, clip=1.0, sigma=1.0,
...                           insecure_test_key=True)
>>> expected = (2/3 * 0.1 + 1/3 * 0.4) + 0.3 + 0.01 - 0.02
>>> bool(abs(result[0] - expected) <= 1e-10)
True
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass
from typing import Callable, Sequence, TypeVar

import gmpy2
import numpy as np

from uldp.checks import check_integer, check_number
from uldp.secure import encoding, fast, keys, masks
from uldp.secure.messages import (
    BlindedHistogramMessage,
    DhDirectoryMessage,
    DhPublicKeyMessage,
    EncryptedWeightsMessage,
    MaskedUpdateMessage,
    Message,
    PublicKeyMessage,
    SealedMessage,
    pack_ints,
    unpack_ints,
)

#: Purposes of sealed silo-to-silo payloads (authenticated in the AEAD header).
SEALED_SEED = 1
SEALED_WEIGHT_POWERS = 2

M = TypeVar("M", bound=Message)


@dataclass(frozen=True)
class ProtocolConfig:
    """Public parameters of Protocol 1 (known to the server and all silos).

    Attributes:
        n_silos: |S|.
        n_users: |U|.
        clip: C, the clipping bound; every coordinate of a clipped delta is at most C in magnitude.
        sigma: noise multiplier; each silo adds N(0, sigma^2 C^2 / |S|) noise (Algorithm 3).
        key_bits: Paillier modulus size (3072 by default).
        precision: P of Theorem 4: the decoded aggregate is within P of the plain computation.
        n_max: N_max, the largest number of records of one user over all silos.
        noise_bound: bound on |noise coordinate|; None derives it from sigma, C and a 2^-128 Gaussian tail.
        insecure_test_key: allow keys under 2048 bits (tests only).
        processes: worker processes for the silo's weighted sum and the server's decryption.
    """

    n_silos: int
    n_users: int
    clip: float
    sigma: float = 0.0
    key_bits: int = keys.DEFAULT_KEY_BITS
    precision: float = 1e-10
    n_max: int = 2000
    noise_bound: float | None = None
    insecure_test_key: bool = False
    processes: int = 1

    @property
    def resolution_bits(self) -> int:
        """Fractional bits f of the encoding: (|U| + |S|) 2^-f / 2 <= P."""
        return encoding.resolution_bits_for(self.precision, self.n_users + self.n_silos)

    @property
    def c_lcm(self) -> int:
        """C_LCM = lcm(1, ..., N_max)."""
        return encoding.lcm_up_to(self.n_max)

    @property
    def effective_noise_bound(self) -> float:
        """Bound on any noise coordinate used by the no-wrap-around check."""
        if self.noise_bound is not None:
            return self.noise_bound
        return encoding.noise_tail_bound(sigma=self.sigma, clip=self.clip, n_silos=self.n_silos)

    def validate(self) -> None:
        """All checks that can be made before any message is sent (key size, sizes, Theorem 4's condition 2).

        Raises:
            ValueError: naming the bad parameter and what to change.
        """
        keys.check_key_bits(self.key_bits, insecure_test_key=self.insecure_test_key)
        check_integer("n_silos", self.n_silos)
        check_integer("n_users", self.n_users)
        check_number("clip", self.clip, at_least=0, finite=True)
        check_number("sigma", self.sigma, at_least=0, finite=True)
        if self.noise_bound is not None:
            check_number("noise_bound", self.noise_bound, at_least=0, finite=True)
        check_integer("processes", self.processes)
        encoding.check_no_wraparound(
            key_bits=self.key_bits,
            n_max=self.n_max,
            resolution_bits=self.resolution_bits,
            delta_bound=self.clip,
            noise_bound=self.effective_noise_bound,
            n_users=self.n_users,
            n_silos=self.n_silos,
        )


def _one_per_silo(messages: Sequence[M], n_silos: int, *, what: str, silo_of: Callable[[M], int]) -> list[M]:
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
        config.validate()
        self.config = config
        self.public_key, self._private_key = keys.generate_paillier_keypair(
            config.key_bits, insecure_test_key=config.insecure_test_key
        )
        self._n = int(self.public_key.n)
        self._blinded_totals: list[int] | None = None
        self._inverse_blinded: list[int | None] | None = None
        self._round: int | None = None
        self._n_parameters: int | None = None

    def public_key_message(self) -> PublicKeyMessage:
        """Step 1(a): the public key for all silos."""
        return PublicKeyMessage(modulus=self._n)

    def relay_dh_keys(self, messages: Sequence[DhPublicKeyMessage]) -> DhDirectoryMessage:
        """Step 1(b): collect every silo's X25519 public key and broadcast the directory."""
        ordered = _one_per_silo(messages, self.config.n_silos, what="DH public key", silo_of=lambda m: m.silo)
        return DhDirectoryMessage(public_keys=tuple(m.public_key for m in ordered))

    def relay(self, messages: Sequence[SealedMessage]) -> dict[int, list[SealedMessage]]:
        """Forward sealed silo-to-silo messages (step 1(c) and the round's shares) by recipient, unopened."""
        inbox: dict[int, list[SealedMessage]] = {s: [] for s in range(self.config.n_silos)}
        for message in messages:
            if message.recipient not in inbox or message.sender not in inbox or message.sender == message.recipient:
                raise ValueError(f"cannot relay a sealed message from silo {message.sender} to {message.recipient}")
            inbox[message.recipient].append(message)
        return inbox

    def receive_histograms(self, messages: Sequence[BlindedHistogramMessage]) -> None:
        """Steps 1(e)-(f): sum the doubly blinded histograms (masks cancel) and invert B(N_u) = r_u N_u mod n.

        The server sees r_u N_u, uniform on Z_n^* for N_u > 0 (proof of Theorem 5). B(N_u) = 0 means N_u = 0:
        such a user cannot be weighted (start_round refuses to sample them).
        """
        ordered = _one_per_silo(messages, self.config.n_silos, what="blinded histogram", silo_of=lambda m: m.silo)
        for message in ordered:
            self.check_histogram(message)
        totals = [sum(column) % self._n for column in zip(*(m.values for m in ordered))]
        inverses: list[int | None] = []
        for user, total in enumerate(totals):
            if total == 0:
                inverses.append(None)
            elif math.gcd(total, self._n) != 1:
                raise ValueError(f"blinded count of user {user} is not invertible mod n; rerun the setup")
            else:
                inverses.append(int(gmpy2.invert(total, self._n)))
        self._blinded_totals, self._inverse_blinded = totals, inverses

    def check_histogram(self, message: BlindedHistogramMessage) -> None:
        """Step 1(e)'s checks on one silo's histogram: |U| values, each in Z_n.

        Raises:
            ValueError: naming the problem.
        """
        message.check_elements(message.values, bound=self._n, count=self.config.n_users, what="blinded counts")

    def check_masked_update(self, message: MaskedUpdateMessage, size: int) -> None:
        """Step 2(c)'s checks on one silo's masked update: this round's, ``size`` ciphertexts, each in Z*_{n^2}.

        A value outside Z*_{n^2} (0, n, any multiple of p or q) is no Paillier ciphertext and would turn the product
        of the updates into garbage (ciphertext 0 decrypts to -1.4e53), so it is refused before anything is decrypted.

        Raises:
            ValueError: naming the problem.
        """
        if message.round_index != self._round:
            raise ValueError(f"masked update of silo {message.silo} is for round {message.round_index}, expected {self._round}")
        message.check_elements(message.ciphertexts, bound=self._n * self._n, count=size, what="ciphertexts")
        for index, value in enumerate(message.ciphertexts):
            if value == 0 or gmpy2.gcd(value, self._n) != 1:
                raise ValueError(f"{type(message).__name__}: ciphertexts #{index} is not in Z*_(n^2)")

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
            raise ValueError(f"sampled must be a bool array of shape ({self.config.n_users},), got {chosen.dtype} {chosen.shape}")
        empty = [int(u) for u in np.flatnonzero(chosen) if self._inverse_blinded[u] is None]
        if empty:
            raise ValueError(f"user(s) {empty[:10]} are sampled but have N_u = 0 records; do not sample them")
        ciphertexts = tuple(fast.crt_encrypt(
            self._private_key, [self._inverse_blinded[u] if chosen[u] else 0 for u in range(self.config.n_users)]
        ))
        self._round = round_index
        return EncryptedWeightsMessage(round_index=round_index, ciphertexts=ciphertexts)

    def finish_round(self, messages: Sequence[MaskedUpdateMessage]) -> np.ndarray:
        """Step 2(c): with every silo's masked update, multiply (masks cancel), CRT-decrypt and Decode.

        Returns:
            sum_s (sum_u n_su / N_u * delta_su + z_s) for sampled users, as float64 (within P, Theorem 4).

        Raises:
            ValueError: if any silo is missing (nothing is decrypted), or a message is from another round or malformed
                (:meth:`check_masked_update`).
        """
        ordered = _one_per_silo(messages, self.config.n_silos, what="masked update", silo_of=lambda m: m.silo)
        if self._round is None:
            raise ValueError("no round was started")
        size = len(ordered[0].ciphertexts)
        for message in ordered:
            self.check_masked_update(message, size)
        modulus = gmpy2.mpz(self._n * self._n)
        totals = [gmpy2.mpz(c) for c in ordered[0].ciphertexts]
        for message in ordered[1:]:
            totals = [t * c % modulus for t, c in zip(totals, message.ciphertexts)]
        plaintexts = fast.crt_decrypt(self._private_key, totals, processes=self.config.processes)
        self._round = None
        return np.array(
            [
                encoding.decode(m, resolution_bits=self.config.resolution_bits, c_lcm=self.config.c_lcm, modulus=self._n)
                for m in plaintexts
            ]
        )


class Silo:
    """One silo of Protocol 1: knows its own counts n_su and, after setup, the shared blinds r_u."""

    def __init__(self, silo_id: int, counts: np.ndarray, config: ProtocolConfig) -> None:
        config.validate()
        row = np.asarray(counts)
        if row.shape != (config.n_users,):
            raise ValueError(f"silo {silo_id}: counts must have shape ({config.n_users},), got {row.shape}")
        encoding.check_counts(row[None, :], n_max=config.n_max)  # own part of condition (1)
        if not 0 <= silo_id < config.n_silos:
            raise ValueError(f"silo id {silo_id} outside 0..{config.n_silos - 1}")
        self.silo_id, self.config = silo_id, config
        self._counts = [int(c) for c in row]
        self._dh_key = keys.new_dh_private_key()
        self._n: int | None = None
        self._pair_keys: dict[int, keys.PairwiseKeys] = {}
        self._seed: bytes | None = None
        self._blinds: list[int] | None = None
        self._own_powers: dict[int, gmpy2.mpz] = {}
        self._round: int | None = None

    @property
    def _modulus(self) -> int:
        if self._n is None:
            raise ValueError(f"silo {self.silo_id} has no public key yet: call receive_public_key first")
        return self._n

    def receive_public_key(self, message: PublicKeyMessage) -> DhPublicKeyMessage:
        """Step 1(a): store the Paillier modulus (checking its size) and answer with an X25519 public key."""
        bits = int(message.modulus).bit_length()
        keys.check_key_bits(bits, insecure_test_key=self.config.insecure_test_key)
        if bits != self.config.key_bits or message.modulus % 2 == 0:
            raise ValueError(f"silo {self.silo_id}: expected an odd {self.config.key_bits}-bit modulus, got {bits} bits")
        self._n = int(message.modulus)
        self._session = keys.session_id(self._n)
        return DhPublicKeyMessage(silo=self.silo_id, public_key=keys.dh_public_bytes(self._dh_key))

    def receive_dh_directory(self, message: DhDirectoryMessage) -> list[SealedMessage]:
        """Step 1(b)-(c): derive the pairwise keys; silo 0 draws the seed R and seals it for every other silo."""
        if len(message.public_keys) != self.config.n_silos:
            raise ValueError(f"DH directory lists {len(message.public_keys)} keys, expected {self.config.n_silos}")
        if message.public_keys[self.silo_id] != keys.dh_public_bytes(self._dh_key):
            raise ValueError(f"silo {self.silo_id}: the DH directory does not carry this silo's public key")
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

    def receive_seed(self, messages: Sequence[SealedMessage]) -> None:
        """Step 1(c): open the seed R sealed by silo 0 (silo 0 already has it)."""
        if self.silo_id == 0:
            if messages:
                raise ValueError("silo 0 draws the seed and expects no seed message")
            return
        seeds = [m for m in messages if m.purpose == SEALED_SEED and m.sender == 0]
        if len(seeds) != 1:
            raise ValueError(f"silo {self.silo_id} expected exactly one seed message from silo 0, got {len(seeds)}")
        seed = self._open(seeds[0], round_index=0, purpose=SEALED_SEED)
        if len(seed) != 32:
            raise ValueError(f"the seed R has 32 bytes, got {len(seed)}")
        self._set_seed(seed)

    def _set_seed(self, seed: bytes) -> None:
        self._seed = seed
        # Step 1(d): r_u uniform on Z_n^*, the same in every silo (keyed by R).
        self._blinds = masks.unit_blinds(
            keys.derive_key(seed, label=b"blinds" + self._session), modulus=self._modulus, count=self.config.n_users
        )

    def _seal(self, peer: int, round_index: int, purpose: int, payload: bytes) -> SealedMessage:
        header = SealedMessage(self.silo_id, peer, round_index, purpose, b"", b"")
        nonce, ciphertext = keys.seal(self._pair_keys[peer].aead, payload, associated_data=header.associated_data())
        return SealedMessage(self.silo_id, peer, round_index, purpose, nonce, ciphertext)

    def _open(self, message: SealedMessage, *, round_index: int, purpose: int) -> bytes:
        if message.recipient != self.silo_id or message.sender not in self._pair_keys:
            raise ValueError(f"silo {self.silo_id} got a sealed message for {message.recipient} from {message.sender}")
        if message.round_index != round_index or message.purpose != purpose:
            raise ValueError(
                f"sealed message is for round {message.round_index} purpose {message.purpose}, expected {round_index}/{purpose}"
            )
        return keys.open_sealed(
            self._pair_keys[message.sender].aead, message.nonce, message.ciphertext,
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
            {peer: k.masks for peer, k in self._pair_keys.items()}, own_id=self.silo_id, modulus=n,
            count=self.config.n_users, round_index=0, purpose=masks.PURPOSE_HISTOGRAM,
        )
        values = tuple((r * c + m) % n for r, c, m in zip(self._blind_values, self._counts, net_masks))
        return BlindedHistogramMessage(silo=self.silo_id, values=values)

    def _check_weights(self, message: EncryptedWeightsMessage) -> None:
        n = self._modulus
        message.check_elements(message.ciphertexts, bound=n * n, count=self.config.n_users, what="encrypted weights")

    def share_weight_powers(self, message: EncryptedWeightsMessage) -> list[SealedMessage]:
        """Step 2(b), shared part: Enc(B_inv(N_u))^(r_u C_LCM) for the users u = silo_id mod |S|, sealed to peers."""
        self._check_weights(message)
        n = self._modulus
        n_square = n * n
        mine = range(self.silo_id, self.config.n_users, self.config.n_silos)
        powers = fast.raise_each(
            [message.ciphertexts[u] for u in mine], [self._blind_values[u] * self.config.c_lcm % n for u in mine],
            n_square, processes=self.config.processes,
        )
        self._own_powers = dict(zip(mine, powers))
        self._round = message.round_index
        payload = pack_ints([self._own_powers[u] for u in mine])
        return [self._seal(peer, message.round_index, SEALED_WEIGHT_POWERS, payload) for peer in self._pair_keys]

    def masked_update(
        self,
        message: EncryptedWeightsMessage,
        shared: Sequence[SealedMessage],
        deltas: np.ndarray,
        noise: np.ndarray,
    ) -> MaskedUpdateMessage:
        """Steps 2(b)-(c) in the silo: Enc(sum_u Encode(delta_u) n_su r_u C_LCM B_inv(N_u) + Encode(z) C_LCM + masks).

        Args:
            message: the round's encrypted weights (the same message given to share_weight_powers).
            shared: the sealed weight powers from every other silo.
            deltas: clipped deltas of this silo's users, shape (|U|, d) (rows of users without records are ignored).
            noise: this silo's Gaussian noise, shape (d,).

        Returns:
            One ciphertext per parameter, masked with the round's pairwise masks.

        Raises:
            ValueError: if shapes are wrong, a value exceeds the bounds the no-wrap-around check assumed, shares are
                missing or fail authentication.
        """
        self._check_weights(message)
        if self._round != message.round_index:
            raise ValueError(f"silo {self.silo_id}: call share_weight_powers for round {message.round_index} first")
        n = self._modulus
        n_square = n * n
        deltas, noise = np.asarray(deltas, dtype=np.float64), np.asarray(noise, dtype=np.float64)
        if deltas.ndim != 2 or deltas.shape[0] != self.config.n_users or noise.shape != (deltas.shape[1],):
            raise ValueError(f"silo {self.silo_id}: deltas must be (|U|, d) and noise (d,), got {deltas.shape}, {noise.shape}")
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
        powers = dict(self._own_powers)
        peers = sorted(self._pair_keys)
        by_sender = {m.sender: m for m in shared if m.purpose == SEALED_WEIGHT_POWERS}
        missing = [peer for peer in peers if peer not in by_sender]
        if missing or len(by_sender) != len([m for m in shared if m.purpose == SEALED_WEIGHT_POWERS]):
            raise ValueError(f"silo {self.silo_id}: weight-power shares missing from silo(s) {missing} or duplicated")
        for sealed in (by_sender[peer] for peer in peers):
            values = unpack_ints(self._open(sealed, round_index=message.round_index, purpose=SEALED_WEIGHT_POWERS))
            users = range(sealed.sender, self.config.n_users, self.config.n_silos)
            if len(values) != len(users):
                raise ValueError(f"share of silo {sealed.sender} has {len(values)} values, expected {len(users)}")
            powers.update(zip(users, (gmpy2.mpz(v) for v in values)))
        bits = self.config.resolution_bits
        bases = [gmpy2.powmod(powers[u], self._counts[u], n_square) for u in active]  # Enc(n_su C_LCM / N_u)
        exponents = encoding.encode(deltas[active], resolution_bits=bits) if active else np.zeros((0, deltas.shape[1]), np.int64)
        sums = fast.weighted_ciphertext_sum(bases, exponents, n_square, processes=self.config.processes)
        encoded_noise = encoding.encode(noise, resolution_bits=bits).tolist()
        net_masks = masks.signed_mask_sum(
            {peer: k.masks for peer, k in self._pair_keys.items()}, own_id=self.silo_id, modulus=n,
            count=len(encoded_noise), round_index=message.round_index, purpose=masks.PURPOSE_UPDATE,
        )
        c_lcm = self.config.c_lcm
        # Adding a plaintext t is multiplying by g^t = 1 + t n (mod n^2) since g = n + 1.
        ciphertexts = tuple(
            int(s * (1 + n * ((z * c_lcm + m) % n)) % n_square) for s, z, m in zip(sums, encoded_noise, net_masks)
        )
        self._round = None
        return MaskedUpdateMessage(round_index=message.round_index, silo=self.silo_id, ciphertexts=ciphertexts)


def _wire(message: M) -> M:
    """Send a message through its byte form (what a network transport would carry)."""
    return type(message).from_bytes(message.to_bytes())  # type: ignore[return-value]


class SecureSession:
    """Runs the server and all silos in-process: setup once, then one :meth:`aggregate` call per round.

    Args:
        counts: n[s, u], shape (|S|, |U|).
        clip: C (bound on every delta coordinate).
        sigma: noise multiplier (the noise bound is derived from it), or give ``noise_bound``.
        noise_bound: explicit bound on any noise coordinate (overrides sigma).
        key_bits, precision, n_max, insecure_test_key, processes: see :class:`ProtocolConfig`.

    Raises:
        ValueError: before anything is sent, on N_u > N_max, a possible wrap-around, or a bad key size.
    """

    def __init__(
        self,
        counts: np.ndarray,
        *,
        clip: float,
        sigma: float = 0.0,
        noise_bound: float | None = None,
        key_bits: int = keys.DEFAULT_KEY_BITS,
        precision: float = 1e-10,
        n_max: int = 2000,
        insecure_test_key: bool = False,
        processes: int = 1,
    ) -> None:
        table = np.asarray(counts)
        self.totals = encoding.check_counts(table, n_max=n_max)
        self.config = ProtocolConfig(
            n_silos=table.shape[0], n_users=table.shape[1], clip=clip, sigma=sigma, key_bits=key_bits,
            precision=precision, n_max=n_max, noise_bound=noise_bound, insecure_test_key=insecure_test_key,
            processes=processes,
        )
        self.config.validate()
        self.timings: dict[str, float] = {}
        self._round = 0
        start = time.perf_counter()
        self.server = Server(self.config)
        self.silos = [Silo(s, table[s], self.config) for s in range(self.config.n_silos)]
        self._tick("paillier_keygen", start)
        start = time.perf_counter()
        public = _wire(self.server.public_key_message())
        directory = _wire(self.server.relay_dh_keys([_wire(s.receive_public_key(public)) for s in self.silos]))
        sealed = [_wire(m) for silo in self.silos for m in silo.receive_dh_directory(directory)]
        inbox = self.server.relay(sealed)
        for silo in self.silos:
            silo.receive_seed(inbox[silo.silo_id])
        self._tick("key_exchange", start)
        start = time.perf_counter()
        self.server.receive_histograms([_wire(s.blinded_histogram()) for s in self.silos])
        self._tick("blinded_histogram", start)

    def _tick(self, name: str, start: float) -> None:
        self.timings[name] = self.timings.get(name, 0.0) + time.perf_counter() - start

    def aggregate(self, deltas: np.ndarray, noise: np.ndarray, sampled: np.ndarray) -> np.ndarray:
        """One round (steps 2(a)-(c)): the decoded sum_s (sum_u w_su delta_su + z_s), w_su = n_su / N_u if sampled.

        Args:
            deltas: clipped deltas, shape (|S|, |U|, d).
            noise: per-silo noise, shape (|S|, d).
            sampled: bool (|U|,), the users sampled this round.

        Returns:
            float64 array (d,), within P of the plain computation (Theorem 4).

        Raises:
            ValueError: on a sampled user with N_u = 0, bad shapes, or values beyond the configured bounds.
        """
        deltas, noise = np.asarray(deltas, dtype=np.float64), np.asarray(noise, dtype=np.float64)
        shape = (self.config.n_silos, self.config.n_users)
        if deltas.ndim != 3 or deltas.shape[:2] != shape or noise.shape != (shape[0], deltas.shape[2]):
            raise ValueError(f"deltas must be {shape + ('d',)} and noise ({shape[0]}, d); got {deltas.shape}, {noise.shape}")
        chosen = np.asarray(sampled, dtype=bool)
        empty = np.flatnonzero(chosen & (self.totals == 0))
        if empty.size:
            raise ValueError(f"user(s) {empty[:10].tolist()} are sampled but have N_u = 0 records; their weight n_su/N_u is undefined")
        self._round += 1
        timings: dict[str, float] = {}
        start = time.perf_counter()
        weights = _wire(self.server.start_round(self._round, chosen))
        timings["encrypt_weights"] = time.perf_counter() - start
        start = time.perf_counter()
        shares = self.server.relay([_wire(m) for silo in self.silos for m in silo.share_weight_powers(weights)])
        updates = [
            _wire(silo.masked_update(weights, shares[silo.silo_id], deltas[silo.silo_id], noise[silo.silo_id]))
            for silo in self.silos
        ]
        timings["silo_weighting"] = time.perf_counter() - start
        start = time.perf_counter()
        result = self.server.finish_round(updates)
        timings["aggregation"] = time.perf_counter() - start
        self.last_round_timings = timings
        return result


def run_secure_round(
    counts: np.ndarray,
    deltas: np.ndarray,
    noise: np.ndarray,
    sampled: np.ndarray,
    *,
    clip: float,
    sigma: float = 0.0,
    noise_bound: float | None = None,
    key_bits: int = keys.DEFAULT_KEY_BITS,
    precision: float = 1e-10,
    n_max: int = 2000,
    insecure_test_key: bool = False,
    processes: int = 1,
) -> np.ndarray:
    """Set up Protocol 1 and run one round in-process; the entry point for ``uldp run --secure``.

    Args:
        counts: n[s, u], shape (|S|, |U|).
        deltas: clipped per-user deltas per silo, shape (|S|, |U|, d).
        noise: per-silo Gaussian noise, shape (|S|, d).
        sampled: bool (|U|,), users sampled this round.
        clip, sigma, noise_bound, key_bits, precision, n_max, insecure_test_key, processes: see
            :class:`SecureSession`.

    Returns:
        The decoded aggregate sum_s (sum_u n_su / N_u * delta_su + z_s) over sampled users, float64 (d,).

    Raises:
        ValueError: see :class:`SecureSession` and :meth:`SecureSession.aggregate`.
    """
    session = SecureSession(
        counts, clip=clip, sigma=sigma, noise_bound=noise_bound, key_bits=key_bits, precision=precision,
        n_max=n_max, insecure_test_key=insecure_test_key, processes=processes,
    )
    return session.aggregate(deltas, noise, sampled)
