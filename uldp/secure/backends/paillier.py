"""Protocol 1's round as the paper writes it (backend ``"paillier"``; Section 4, Protocol 1, steps 2(a)-(c); Theorem 4).

One Paillier ciphertext per parameter; silo s weights user u by ``Enc(B_inv(N_u))^(r_u C_LCM n_su)`` =
``Enc(n_su C_LCM / N_u)``; the powers ``Enc(B_inv(N_u))^(r_u C_LCM)`` are computed once, by silo ``u mod |S|``, and
sealed to the other silos (the server relays them unopened); the server decodes ``C_LCM``-scaled fixed point.
:class:`PaillierBackend` also holds the Paillier ciphertext arithmetic of the masked update that the packed backend
(:mod:`uldp.secure.backends.packed`) reuses with its own weights and packing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import gmpy2
import numpy as np

from uldp.secure import encoding, fast, masks
from uldp.secure.backends.base import Backend
from uldp.secure.messages import MaskedUpdateMessage, SealedMessage, pack_ints, unpack_ints
from uldp.secure.roles import SEALED_WEIGHT_POWERS

if TYPE_CHECKING:
    from collections.abc import Sequence

    from uldp.secure.config import ProtocolConfig
    from uldp.secure.messages import EncryptedWeightsMessage, Message
    from uldp.secure.protocol import Server
    from uldp.secure.silo import Silo


class PaillierBackend(Backend):
    """The paper's backend: sealed weight powers, one ciphertext per parameter, ``C_LCM``-scaled decoding."""

    name = "paillier"
    checks_weights = True

    @classmethod
    def check_config(cls, config: ProtocolConfig) -> None:
        """Theorem 4's condition 2 for ``C_LCM``-scaled plaintexts (``encoding.check_no_wraparound``)."""
        encoding.check_no_wraparound(
            key_bits=config.parameters.key_bits,
            n_max=config.parameters.n_max,
            resolution_bits=config.resolution_bits,
            delta_bound=config.clip,
            noise_bound=config.effective_noise_bound,
            n_users=config.n_users,
            n_silos=config.n_silos,
        )

    def answer_shares(
        self, server: Server, messages: Sequence[Message]
    ) -> dict[int, list[Message]]:
        """Step 2(b): relay the sealed weight powers, unopened."""
        return server.relay_sealed(messages)

    def decode(self, server: Server, plaintexts: list[int], size: int) -> np.ndarray:
        """Step 2(c): Decode each ``C_LCM 2^f``-scaled plaintext (Theorem 4)."""
        return np.array(
            [
                encoding.decode(
                    m,
                    resolution_bits=self.config.resolution_bits,
                    c_lcm=self.config.c_lcm,
                    modulus=server.modulus,
                )
                for m in plaintexts
            ]
        )

    def share(self, silo: Silo, message: EncryptedWeightsMessage) -> list[Message]:
        """Step 2(b), work sharing: this silo's weight powers, sealed to every peer."""
        payload = pack_ints([silo.own_powers[u] for u in silo.users_of(silo.silo_id)])
        return [
            silo.seal(peer, message.round_index, SEALED_WEIGHT_POWERS, payload)
            for peer in silo.pair_keys
        ]

    def weight_bases(
        self,
        silo: Silo,
        message: EncryptedWeightsMessage,
        shared: Sequence[Message],
        active: list[int],
    ) -> list[gmpy2.mpz]:
        """Per active user, ``Enc(n_su C_LCM / N_u)`` from this silo's and the peers' weight powers.

        Raises:
            ValueError: a peer's share missing, repeated, of the wrong length or failing authentication.
        """
        powers = dict(silo.own_powers)
        peers = sorted(silo.pair_keys)
        sealed_shares = [
            m for m in shared if isinstance(m, SealedMessage) and m.purpose == SEALED_WEIGHT_POWERS
        ]
        by_sender = {m.sender: m for m in sealed_shares}
        missing = [peer for peer in peers if peer not in by_sender]
        if missing or len(by_sender) != len(sealed_shares):
            raise ValueError(
                f"silo {silo.silo_id}: weight-power shares missing from silo(s) {missing} or duplicated"
            )
        for sealed in (by_sender[peer] for peer in peers):
            values = unpack_ints(
                silo.open_sealed(
                    sealed, round_index=message.round_index, purpose=SEALED_WEIGHT_POWERS
                )
            )
            users = silo.users_of(sealed.sender)
            if len(values) != len(users):
                raise ValueError(
                    f"share of silo {sealed.sender} has {len(values)} values, expected {len(users)}"
                )
            powers.update(zip(users, (gmpy2.mpz(v) for v in values), strict=True))
        n_square = silo.modulus**2
        counts = silo.counts
        return [gmpy2.powmod(powers[u], counts[u], n_square) for u in active]

    def weight_scale(self) -> int:
        """``N_u * C_LCM / N_u``: exactly C_LCM."""
        return self.config.c_lcm

    def with_noise(
        self, sums: list[gmpy2.mpz], encoded_noise: list[int], n_square: int
    ) -> tuple[list[gmpy2.mpz], list[int]]:
        """The update's ciphertexts and the plaintexts added to them: the noise, ``C_LCM``-scaled like the sums."""
        return sums, [z * self.config.c_lcm for z in encoded_noise]

    def masked_update(
        self,
        silo: Silo,
        message: EncryptedWeightsMessage,
        shared: Sequence[Message],
        deltas: np.ndarray,
        noise: np.ndarray,
        active: list[int],
    ) -> Message:
        """Steps 2(b)-(c): ``prod_u base_u^Encode(delta_u)`` per parameter, plus the encoded noise and the round's
        pairwise masks (added as plaintexts: multiplying by ``g^t = 1 + t n`` mod n^2, g = n + 1)."""
        n = silo.modulus
        n_square = n * n
        bases = self.weight_bases(silo, message, shared, active)
        bits = self.config.resolution_bits
        exponents = (
            encoding.encode(deltas[active], resolution_bits=bits)
            if active
            else np.zeros((0, deltas.shape[1]), np.int64)
        )
        sums = fast.weighted_ciphertext_sum(
            bases, exponents, n_square, processes=self.config.parameters.workers
        )
        ciphertexts, plaintexts = self.with_noise(
            sums, encoding.encode(noise, resolution_bits=bits).tolist(), n_square
        )
        net_masks = silo.net_masks(
            len(plaintexts),
            modulus=n,
            round_index=message.round_index,
            purpose=masks.PURPOSE_UPDATE,
        )
        return MaskedUpdateMessage(
            round_index=message.round_index,
            silo=silo.silo_id,
            parameters=deltas.shape[1],
            ciphertexts=tuple(
                int(s * (1 + n * ((z + m) % n)) % n_square)
                for s, z, m in zip(ciphertexts, plaintexts, net_masks, strict=True)
            ),
        )
