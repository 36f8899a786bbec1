"""The lattice backend (``"lattice"``; Protocol 1, steps 1(a) and 2(a)-(c)): the packed backend's rescale
(Paillier), answered in BFV, and the weighted sum in BFV, one user's weight times 16384 parameters per operation.

The engine (keys, encryption, the masked and flooded update, decryption) and its security argument are
:mod:`uldp.secure.lattice`; this module plugs it into the roles: the BFV public keys travel beside the Paillier key
in step 1(a) with the Galois keys (and stay in the silo's state), the server answers the rescale with every user's
``y_u`` packed in one seeded BFV ciphertext per plaintext prime (:mod:`uldp.secure.lattice_expand`), and the
update is a :class:`~uldp.secure.messages.LatticeUpdateMessage` (prime-major ciphertexts). It needs the ``lattice``
extra (tenseal), imported on first use.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from uldp.secure import lattice_expand
from uldp.secure.backends.packed import PackedPaillierBackend
from uldp.secure.messages import (
    LatticeHeldMessage,
    LatticeKeysMessage,
    LatticeUpdateMessage,
    LatticeWeightsMessage,
)
from uldp.secure.roles import one_per_silo

if TYPE_CHECKING:
    from collections.abc import Sequence

    from uldp.secure.config import ProtocolConfig
    from uldp.secure.messages import EncryptedWeightsMessage, Message
    from uldp.secure.protocol import Server
    from uldp.secure.silo import Silo


def _engine() -> Any:
    # the engine needs tenseal (the lattice extra), which the Paillier backends do not
    from uldp.secure import lattice

    return lattice


def _silo_engine() -> Any:
    # the silo's side of the engine, which needs tenseal as well
    from uldp.secure import lattice_silo

    return lattice_silo


class LatticeBackend(PackedPaillierBackend):
    """BFV weights and updates after the packed backend's Paillier rescale.

    It does not check the server's weights (:attr:`checks_weights` is false): the weights the silos use are BFV
    ciphertexts of ``y_u`` the server made, and the check of :mod:`uldp.secure.weight_check` needs the key holder
    to prove a decryption, which Paillier allows (revealing the randomness r) and BFV does not (revealing the
    decryption noise would leak the secret key; a lattice zero-knowledge proof of a short decryption error is not
    available in SEAL). So a silo whose policy asks for a guarantee against a malicious server refuses this backend
    (:class:`uldp.secure.driver.SiloDriver`'s ``malicious_server``), and under a semi-honest server it runs as before.
    """

    name = "lattice"
    key_messages = 1
    update_message = LatticeUpdateMessage
    checks_weights = False

    def __init__(self, config: ProtocolConfig) -> None:
        super().__init__(config)
        self._server: Any = None  # the key holder's engine, made on the server's first use
        self._silo: Any = None  # a silo's engine, made at its first update
        self._keys: tuple[bytes, ...] = ()
        self._galois: tuple[bytes, ...] = ()
        self._answered = (
            0  # the last round a lattice update was computed for, until the engine exists
        )
        self._made: tuple[bytes, int, tuple[bytes, ...]] | None = (
            None  # server: sample, round, BFV weights
        )
        self._held: tuple[int, tuple[bytes, ...]] | None = (
            None  # silo: the weights' round and ciphertexts
        )

    @classmethod
    def check_config(cls, config: ProtocolConfig) -> None:
        """The rescale blind fits the Paillier key and the flooded noise fits 128-bit BFV parameters."""
        from uldp.secure import packing

        packing.rescale_blind_bits(
            key_bits=config.parameters.key_bits, n_max=config.parameters.n_max
        )
        cls.layout(config)

    @classmethod
    def layout(cls, config: ProtocolConfig) -> Any:
        """The lattice sizes (:func:`uldp.secure.lattice.layout_for`, a ``LatticeLayout``).

        Raises:
            ValueError: if the flooded noise does not fit 128-bit parameters; ImportError without tenseal.
        """
        return _engine().layout_for(
            precision=config.parameters.precision,
            n_users=config.n_users,
            n_silos=config.n_silos,
            n_max=config.parameters.n_max,
            delta_bound=config.clip,
            noise_bound=config.effective_noise_bound,
        )

    # --- the server's half -----------------------------------------------------------------------------------------
    def _key_holder(self) -> Any:
        if self._server is None:
            self._server = _engine().LatticeServer(self.layout(self.config))
        return self._server

    def server_key_messages(self) -> tuple[Message, ...]:
        """Step 1(a): the BFV public keys and Galois keys, one of each per plaintext prime."""
        holder = self._key_holder()
        return (
            LatticeKeysMessage(public_keys=holder.public_keys(), galois_keys=holder.galois_keys()),
        )

    def answer_shares(
        self, server: Server, messages: Sequence[Message]
    ) -> dict[int, list[Message]]:
        """Step 2(b): the rescale, answered in BFV (:meth:`encrypt_weights`); a silo that holds the answer's weights
        (its :class:`~uldp.secure.messages.LatticeHeldMessage`) gets them without the ciphertexts.

        Raises:
            ValueError: shares that are no rescale request and held message per silo, or of another round.
        """
        held = [m for m in messages if isinstance(m, LatticeHeldMessage)]
        ordered = one_per_silo(
            held, self.config.n_silos, what="held-weights message", silo_of=lambda m: m.silo
        )
        if any(m.round_index != server.round_index for m in ordered):
            raise ValueError(f"a held-weights message is not of round {server.round_index}")
        answer = self.rescale(
            server, [m for m in messages if not isinstance(m, LatticeHeldMessage)]
        )
        assert isinstance(answer, LatticeWeightsMessage)
        light = replace(answer, ciphertexts=())
        return {
            m.silo: [light if m.weights_round == answer.weights_round else answer] for m in ordered
        }

    def encrypt_weights(self, server: Server, round_index: int, weights: list[int]) -> Message:
        """The rescale's answer in BFV: the packed ``y_u``, seeded, per plaintext prime (prime-major), made afresh
        only when the round's sample differs from the one of the last weights made.

        The weights ``w_u = y_u - c_u`` depend on the round only through the sample b_u (N_u is the session's), so
        when the sample repeats (every round with q = 1, or with the silos' hidden sample, where the server's sample
        is every user: :mod:`uldp.secure.sampling`) the weights of that earlier round r serve again, with the
        corrections of r's blinds; this round's rescale is then not used. The silos need no re-randomisation of the
        reused ciphertexts: they are the server's encryptions, which it could decrypt anyway, and what a silo sends is
        re-randomised, flooded and masked afresh every round, so the server learns nothing from the reuse. What the
        silos learn from it is only that the server's sample equals round r's, which under the hidden sample and at
        q = 1 is known beforehand (every user, every round); under a server-drawn sample at q < 1 two samples of |U|
        users coincide with probability at most ``max(q, 1 - q)^|U|``.
        """
        chosen = np.asarray(server.sampled, dtype=bool).tobytes()
        if self._made is None or self._made[0] != chosen:
            made = self._key_holder().encrypt_weights(weights)
            self._made = (chosen, round_index, tuple(c for prime in made for c in prime))
        return LatticeWeightsMessage(
            round_index=round_index, weights_round=self._made[1], ciphertexts=self._made[2]
        )

    def check_update(self, server: Server, message: Message, size: int) -> None:
        """A :class:`~uldp.secure.messages.LatticeUpdateMessage` of ``ceil(d / N)`` ciphertexts per prime (SEAL
        parses them at :meth:`finish`, naming the silo)."""
        layout = self._key_holder().layout
        count = len(layout.plain_moduli) * layout.chunks_for(size)
        if not isinstance(message, LatticeUpdateMessage) or len(message.ciphertexts) != count:
            raise ValueError(
                f"masked update of silo {getattr(message, 'silo', '?')} must be a lattice update of "
                f"{count} ciphertexts for {size} parameters"
            )

    def finish(self, server: Server, updates: Sequence[Any], size: int) -> np.ndarray:
        """Step 2(c): add the BFV updates (masks cancel), decrypt, CRT-combine and decode."""
        engine = self._key_holder()
        primes = len(engine.layout.plain_moduli)
        chunks = len(updates[0].ciphertexts) // primes
        return np.asarray(
            engine.finish(
                [
                    [u.ciphertexts[i * chunks : (i + 1) * chunks] for i in range(primes)]
                    for u in updates
                ],
                size,
            )
        )

    # --- the silo's half -------------------------------------------------------------------------------------------
    def receive_key_messages(self, silo: Silo, messages: Sequence[Message]) -> None:
        """Step 1(a): the server's BFV public keys, each a public key of the session
        (:func:`uldp.secure.lattice_silo.load_public_keys`), and its Galois keys
        (:func:`uldp.secure.lattice_silo.check_galois_keys`).

        Raises:
            ValueError: not one :class:`~uldp.secure.messages.LatticeKeysMessage`, or keys that are not the
                session's (wrong count, size or format).
        """
        if len(messages) != 1 or not isinstance(messages[0], LatticeKeysMessage):
            raise ValueError(
                f"silo {silo.silo_id}: the lattice backend's step 1(a) carries one LatticeKeysMessage, got "
                f"{[type(m).__name__ for m in messages]}"
            )
        self._set_keys(silo, messages[0].public_keys, messages[0].galois_keys)

    def _set_keys(
        self, silo: Silo, public_keys: Sequence[bytes], galois_keys: Sequence[bytes]
    ) -> None:
        layout, engine = self.layout(self.config), _silo_engine()
        engine.load_public_keys(layout, public_keys, silo_id=silo.silo_id)
        self._galois = engine.check_galois_keys(layout, galois_keys, silo_id=silo.silo_id)
        self._keys = tuple(public_keys)

    def masked_update(
        self,
        silo: Silo,
        message: EncryptedWeightsMessage,
        shared: Sequence[Message],
        deltas: np.ndarray,
        noise: np.ndarray,
        active: list[int],
    ) -> Message:
        """Steps 2(b)-(c): the server's BFV weights, the rescale corrections c_u = floor(rho_u 2^g / C_LCM) from the
        seed R, and :meth:`uldp.secure.lattice_silo.LatticeSilo.masked_update`.

        Raises:
            ValueError: weights that are not the server's BFV weights of this round, no BFV keys yet, or the
                engine's checks.
        """
        round_index = message.round_index
        answer = self.rescaled_answer(silo, message, shared, LatticeWeightsMessage)
        if self._silo is None:
            if not self._keys:
                raise ValueError(
                    f"silo {silo.silo_id} has no BFV public keys: step 1(a) of the lattice backend"
                )
            self._silo = _silo_engine().LatticeSilo(
                silo.silo_id,
                np.array(silo.counts, dtype=np.int64),
                self.layout(self.config),
                public_keys=self._keys,
                galois_keys=self._galois,
                mask_keys={p: k.masks for p, k in silo.pair_keys.items()},
                workers=self.config.parameters.workers,
                answered_round=self._answered,
            )
        groups = lattice_expand.groups(self.config.n_users)
        primes = len(self._silo.layout.plain_moduli)
        if answer.ciphertexts:
            if len(answer.ciphertexts) != groups * primes:
                raise ValueError(
                    f"silo {silo.silo_id}: {len(answer.ciphertexts)} BFV weights, expected "
                    f"ceil(|U| / N) = {groups} x {primes} primes"
                )
            if not 0 < answer.weights_round <= round_index:
                raise ValueError(
                    f"silo {silo.silo_id}: BFV weights of round {answer.weights_round} in round "
                    f"{round_index}"
                )
            self._held = (answer.weights_round, answer.ciphertexts)
        elif self._held is None or self._held[0] != answer.weights_round:
            raise ValueError(
                f"silo {silo.silo_id}: the server reuses the BFV weights of round "
                f"{answer.weights_round}, which this silo does not hold"
            )
        weights_round, ciphertexts = self._held
        update = self._silo.masked_update(
            round_index,
            [ciphertexts[i * groups : (i + 1) * groups] for i in range(primes)],
            self.corrections(silo, weights_round),
            deltas,
            noise,
        )
        return LatticeUpdateMessage(
            round_index=round_index,
            silo=silo.silo_id,
            parameters=deltas.shape[1],
            ciphertexts=tuple(c for prime in update for c in prime),
        )

    def share(self, silo: Silo, message: EncryptedWeightsMessage) -> list[Message]:
        """Step 2(b): the packed backend's rescale request, and the round of the BFV weights this silo holds."""
        return [
            *super().share(silo, message),
            LatticeHeldMessage(
                round_index=message.round_index,
                silo=silo.silo_id,
                weights_round=self._held[0] if self._held else 0,
            ),
        ]

    def export_state(self) -> tuple[tuple[bytes, ...], int]:
        """The server's BFV public keys and Galois keys, then the packed weights this silo holds (their round as 4
        bytes, then the ciphertexts; nothing when it holds none), and the last round a lattice update was computed
        for. All of it is public or the server's own; keeping the weights lets a silo rebuilt from this state (a
        Flower ClientApp, every message) say it holds them, so the server sends them only when the sample changes."""
        held = (self._held[0].to_bytes(4, "big"), *self._held[1]) if self._held else ()
        answered = self._silo.answered_round if self._silo is not None else self._answered
        return (*self._keys, *self._galois, *held), answered

    def restore_state(self, silo: Silo, keys: tuple[bytes, ...], answered_round: int) -> None:
        """The keys checked as step 1(a) checks them, the held weights by count (SEAL checks them at their use), and
        the last answered round.

        Raises:
            ValueError: a state of another layout (naming the silo).
        """
        primes = len(self.layout(self.config).plain_moduli)
        if keys:
            self._set_keys(silo, keys[:primes], keys[primes : 2 * primes])
        held = keys[2 * primes :]
        if held:
            count = lattice_expand.groups(self.config.n_users) * primes
            if len(held) != 1 + count or len(held[0]) != 4:
                raise ValueError(
                    f"silo {silo.silo_id}: a lattice state holds {len(held) - 1} weights, expected {count}"
                )
            self._held = (int.from_bytes(held[0], "big"), held[1:])
        self._answered = answered_round
