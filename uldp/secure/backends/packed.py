"""Packed Paillier (backend ``"packed-paillier"``; Protocol 1, steps 2(a)-(c), with the rescale of
:mod:`uldp.secure.packing`): fixed-point weights rescaled once per round with the server's help, K parameters per
ciphertext, exact within P (the packed analogue of Theorem 4, :func:`uldp.secure.packing.error_bound`).

Step 2(b): silo ``u mod |S|`` sends ``Enc(b_u C_LCM / N_u + rho_u)`` (the blind rho_u, from the seed R, hides N_u
from the server: :func:`uldp.secure.packing.rescale_blind_bits`); the server decrypts, rescales to
``y_u = floor(z_u 2^g / C_LCM)`` and answers every silo with a fresh ``Enc(y_u)`` (:meth:`PackedPaillierBackend.
encrypt_weights`; the lattice backend answers in BFV); each silo removes ``floor(rho_u 2^g / C_LCM)`` and weights
by ``n_su``, then packs K parameters per ciphertext.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import gmpy2
import numpy as np

from uldp.secure import fast, masks, packing
from uldp.secure.backends.paillier import PaillierBackend
from uldp.secure.messages import RescaledWeightsMessage, RescaleRequestMessage
from uldp.secure.roles import one_per_silo

if TYPE_CHECKING:
    from collections.abc import Sequence

    from uldp.secure.config import ProtocolConfig
    from uldp.secure.messages import EncryptedWeightsMessage, Message
    from uldp.secure.protocol import Server
    from uldp.secure.silo import Silo


class PackedPaillierBackend(PaillierBackend):
    """Rescaled fixed-point weights and K parameters per Paillier ciphertext."""

    name = "packed-paillier"

    @classmethod
    def check_config(cls, config: ProtocolConfig) -> None:
        """The slots and the rescale blind fit the key (:func:`uldp.secure.packing.layout_for`)."""
        cls.layout(config)

    @classmethod
    def resolution_bits(cls, config: ProtocolConfig) -> int:
        """f with half of P's budget (the fixed-point weights take the other half)."""
        return packing.resolution_bits(
            config.parameters.precision, n_users=config.n_users, n_silos=config.n_silos
        )

    @classmethod
    def weight_bits(cls, config: ProtocolConfig) -> int:
        """g of the rescaled fixed-point weights ``w_u ~ 2^g / N_u``."""
        return packing.weight_bits(
            config.parameters.precision,
            n_users=config.n_users,
            n_max=config.parameters.n_max,
            delta_bound=config.clip,
            resolution=cls.resolution_bits(config),
        )

    @classmethod
    def layout(cls, config: ProtocolConfig) -> Any:
        """f, g, b and K (:func:`uldp.secure.packing.layout_for`).

        Raises:
            ValueError: if the slots or the rescale blind do not fit the key.
        """
        return packing.layout_for(
            key_bits=config.parameters.key_bits,
            precision=config.parameters.precision,
            n_users=config.n_users,
            n_silos=config.n_silos,
            n_max=config.parameters.n_max,
            delta_bound=config.clip,
            noise_bound=config.effective_noise_bound,
        )

    # --- the server's half -----------------------------------------------------------------------------------------
    def answer_shares(
        self, server: Server, messages: Sequence[Message]
    ) -> dict[int, list[Message]]:
        """Step 2(b): the rescale (:meth:`rescale`), one answer for every silo."""
        answer = self.rescale(server, messages)
        return {s: [answer] for s in range(self.config.n_silos)}

    def rescale(self, server: Server, messages: Sequence[Message]) -> Message:
        """Decrypt every ``z_u = b_u C_LCM / N_u + rho_u`` (statistically independent of N_u) and encrypt
        ``floor(z_u 2^g / C_LCM)`` afresh for every user (:meth:`encrypt_weights`).

        Raises:
            ValueError: a message that is no rescale request, a silo missing or duplicated, a request of another
                round, or a wrong count or range of ciphertexts.
        """
        requests = [m for m in messages if isinstance(m, RescaleRequestMessage)]
        if len(requests) != len(messages):
            raise ValueError(
                f"the {self.name} backend's shares are rescale requests, got "
                f"{sorted({type(m).__name__ for m in messages})}"
            )
        ordered = one_per_silo(
            requests, self.config.n_silos, what="rescale request", silo_of=lambda m: m.silo
        )
        blinded: list[int] = [0] * self.config.n_users
        for message in ordered:
            if message.round_index != server.round_index:
                raise ValueError(
                    f"rescale request of silo {message.silo} is for round {message.round_index}, "
                    f"expected {server.round_index}"
                )
            users = range(message.silo, self.config.n_users, self.config.n_silos)
            server.check_ciphertexts(message, message.ciphertexts, len(users))
            for user, value in zip(users, server.decrypt(message.ciphertexts), strict=True):
                blinded[user] = value
        g, c_lcm = self.weight_bits(self.config), self.config.c_lcm
        weights = [packing.rescaled(z, c_lcm=c_lcm, weight=g) for z in blinded]
        return self.encrypt_weights(server, server.round_index or 0, weights)

    def encrypt_weights(self, server: Server, round_index: int, weights: list[int]) -> Message:
        """The rescaled weights ``y_u`` as the silos receive them: fresh Paillier ciphertexts."""
        return RescaledWeightsMessage(
            round_index=round_index, ciphertexts=tuple(server.encrypt(weights))
        )

    def ciphertexts_for(self, size: int) -> int:
        """ceil(size / K)."""
        return int(self.layout(self.config).ciphertexts_for(size))

    def decode(self, server: Server, plaintexts: list[int], size: int) -> np.ndarray:
        """Step 2(c): unpack K signed slots per plaintext and decode ``A_j / 2^(g + f)``."""
        layout = self.layout(self.config)
        n = server.modulus
        signed = [m - n if m > n // 2 else m for m in plaintexts]
        return np.array(
            [packing.decode(a, layout) for a in packing.unpack_integers(signed, size, layout)],
            dtype=np.float64,
        )

    # --- the silo's half -------------------------------------------------------------------------------------------
    def rescale_blinds(self, silo: Silo, round_index: int) -> list[int]:
        """The round's rescale blinds rho_u, uniform on [0, 2^h) (:func:`uldp.secure.packing.rescale_blind_bits`),
        the same in every silo (keyed by the seed R, which the server does not know)."""
        bits = packing.rescale_blind_bits(
            key_bits=self.config.parameters.key_bits, n_max=self.config.parameters.n_max
        )
        return silo.seed_elements(
            b"rescale", modulus=1 << bits, round_index=round_index, purpose=masks.PURPOSE_RESCALE
        )

    def corrections(self, silo: Silo, round_index: int) -> list[int]:
        """``c_u = floor(rho_u 2^g / C_LCM)``: what each silo removes from ``y_u`` to get ``w_u``."""
        g, c_lcm = self.weight_bits(self.config), self.config.c_lcm
        return [
            packing.rescaled(r, c_lcm=c_lcm, weight=g)
            for r in self.rescale_blinds(silo, round_index)
        ]

    def share(self, silo: Silo, message: EncryptedWeightsMessage) -> list[Message]:
        """Step 2(b): ``Enc(b_u C_LCM / N_u + rho_u)`` for the users ``silo mod |S|``, in one rescale request
        (adding a plaintext t multiplies by 1 + t n)."""
        n = silo.modulus
        n_square = n * n
        blinds = self.rescale_blinds(silo, message.round_index)
        request = tuple(
            int(p * (1 + n * blinds[u]) % n_square) for u, p in sorted(silo.own_powers.items())
        )
        return [
            RescaleRequestMessage(
                round_index=message.round_index, silo=silo.silo_id, ciphertexts=request
            )
        ]

    def rescaled_answer(
        self,
        silo: Silo,
        message: EncryptedWeightsMessage,
        shared: Sequence[Message],
        kind: type[Any],
    ) -> Any:
        """The server's one answer of type ``kind`` to the round's rescale, from what the relay delivered.

        Raises:
            ValueError: anything else, or another round's.
        """
        answers = [m for m in shared if isinstance(m, kind)]
        if len(answers) != 1 or len(shared) != 1 or answers[0].round_index != message.round_index:
            raise ValueError(
                f"silo {silo.silo_id}: expected the server's rescaled weights alone, of round "
                f"{message.round_index}, got {[type(m).__name__ for m in shared]}"
            )
        return answers[0]

    def weight_bases(
        self,
        silo: Silo,
        message: EncryptedWeightsMessage,
        shared: Sequence[Message],
        active: list[int],
    ) -> list[gmpy2.mpz]:
        """Per active user, ``Enc(n_su w_u)``: the rescaled weight minus the blinds' share, times n_su."""
        answer = self.rescaled_answer(silo, message, shared, RescaledWeightsMessage)
        n = silo.modulus
        n_square = n * n
        answer.check_elements(
            answer.ciphertexts, bound=n_square, count=self.config.n_users, what="rescaled weights"
        )
        corrections, counts = self.corrections(silo, message.round_index), silo.counts
        return [
            gmpy2.powmod(
                answer.ciphertexts[u] * (1 + n * (-corrections[u] % n)), counts[u], n_square
            )
            for u in active
        ]

    def weight_scale(self) -> int:
        """2^g: ``w_u`` is within 1 of ``2^g / N_u`` (:func:`uldp.secure.packing.unblinded_weight`)."""
        return 1 << self.weight_bits(self.config)

    def weight_slack(self) -> int:
        """N_max: ``|N_u w_u - 2^g| < N_u <= N_max``."""
        return self.config.parameters.n_max

    def broadcast(self, message: EncryptedWeightsMessage, shared: Sequence[Message]) -> bytes:
        """The encrypted weights and the server's rescaled weights (the same for every silo)."""
        return message.to_bytes() + b"".join(m.to_bytes() for m in shared)

    def with_noise(
        self, sums: list[gmpy2.mpz], encoded_noise: list[int], n_square: int
    ) -> tuple[list[gmpy2.mpz], list[int]]:
        """K parameters per ciphertext; the noise enters scaled by 2^g and packed likewise."""
        layout = self.layout(self.config)
        packed = fast.pack_ciphertexts(
            sums,
            slots=layout.slots,
            slot_bits=layout.slot_bits,
            n_square=n_square,
            processes=self.config.parameters.workers,
        )
        return packed, packing.pack_integers(
            [z << layout.weight_bits for z in encoded_noise], layout
        )
