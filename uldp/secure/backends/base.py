"""The interface of Protocol 1's backends (Section 4, Protocol 1, steps 1(a) and 2(a)-(c); Theorems 4 and 5).

A backend is how one round's weighted sum is encrypted, shared and decoded; the roles of
:mod:`uldp.secure.protocol` run the set-up (steps 1(a)-(f)) and the stage order, and call their backend for:

- the key payloads of step 1(a) beside the Paillier key (:meth:`Backend.server_key_messages`,
  :meth:`Backend.receive_key_messages`; :attr:`Backend.key_messages` of them);
- the round's shares, step 2(b)'s first half (:meth:`Backend.share` in each silo, :meth:`Backend.answer_shares` at
  the server: relayed weight powers, or a rescale);
- the masked update, step 2(b)-(c) (:meth:`Backend.masked_update`; its message type :attr:`Backend.update_message`,
  checked by :meth:`Backend.check_update`);
- the decoding of step 2(c) (:meth:`Backend.finish`);
- beyond the paper, the silos' check of the server's weights (:mod:`uldp.secure.weight_check`;
  :attr:`Backend.checks_weights`, :meth:`Backend.weight_bases`, :meth:`Backend.weight_scale`,
  :meth:`Backend.weight_slack`, :meth:`Backend.broadcast`);
- the silo's backend state between messages (:meth:`Backend.export_state`, :meth:`Backend.restore_state`), stored
  in :class:`~uldp.secure.messages.SiloState`'s ``backend_keys`` and ``backend_round``;
- the session's sizes and their checks (:meth:`Backend.check_config`, :meth:`Backend.resolution_bits`,
  :meth:`Backend.layout`), read through :class:`~uldp.secure.config.ProtocolConfig`.

Each role makes its own instance (``config.backend(config)``), so a backend keeps one role's state. Adding a backend
is one module with a subclass and one line in :data:`uldp.secure.backends.BACKENDS`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from uldp.secure import encoding
from uldp.secure.messages import MaskedUpdateMessage, Message

if TYPE_CHECKING:
    from collections.abc import Sequence

    import numpy as np

    from uldp.secure.config import ProtocolConfig
    from uldp.secure.messages import EncryptedWeightsMessage
    from uldp.secure.protocol import Server
    from uldp.secure.silo import Silo


class Backend:
    """One backend of Protocol 1's round; a subclass implements what its docstring's module lists.

    Args:
        config: The session's public parameters.

    Attributes:
        name: The backend's name in :data:`uldp.secure.backends.BACKENDS` (``ProtocolParameters(backend=name)``).
        key_messages: How many messages the backend adds to step 1(a) beside the Paillier key.
        update_message: The message class of a silo's masked update (step 2(c)).
        checks_weights: Whether the silos check the server's weights before they use them (against a malicious
            server, :mod:`uldp.secure.weight_check`); a silo whose policy asks for that guarantee refuses a backend
            without it (:class:`uldp.secure.driver.SiloDriver`'s ``malicious_server``).
    """

    name: ClassVar[str] = ""
    key_messages: ClassVar[int] = 0
    update_message: ClassVar[type[Message]] = MaskedUpdateMessage
    checks_weights: ClassVar[bool] = False

    def __init__(self, config: ProtocolConfig) -> None:
        self.config = config

    # --- the session's sizes (public) ------------------------------------------------------------------------------
    @classmethod
    def check_config(cls, config: ProtocolConfig) -> None:
        """Refuse, before any message is sent, a session whose aggregate could wrap around (Theorem 4, condition 2).

        Raises:
            ValueError: naming what to change.
        """
        raise NotImplementedError

    @classmethod
    def resolution_bits(cls, config: ProtocolConfig) -> int:
        """f, the fractional bits of the fixed-point encoding of deltas and noise (Theorem 4)."""
        return encoding.resolution_bits_for(
            config.parameters.precision, config.n_users + config.n_silos
        )

    @classmethod
    def layout(cls, config: ProtocolConfig) -> Any:
        """The backend's own sizes (packing, lattice parameters), or None when it has none."""
        return None

    # --- the server's half -----------------------------------------------------------------------------------------
    def server_key_messages(self) -> tuple[Message, ...]:
        """Step 1(a): the backend's public keys beside the Paillier key (:attr:`key_messages` of them)."""
        return ()

    def answer_shares(
        self, server: Server, messages: Sequence[Message]
    ) -> dict[int, list[Message]]:
        """Step 2(b), at the server: per silo, what it gets back for the round's shares.

        Raises:
            ValueError: shares that are not this backend's, or from a missing, unknown or repeated silo.
        """
        raise NotImplementedError

    def check_update(self, server: Server, message: Message, size: int) -> None:
        """Step 2(c)'s checks of one silo's update (its round and size are checked already): its type and
        ciphertexts; by default a :class:`~uldp.secure.messages.MaskedUpdateMessage` of :meth:`ciphertexts_for`
        ciphertexts in Z*_(n^2).

        Raises:
            ValueError: naming the silo and the problem.
        """
        if not isinstance(message, MaskedUpdateMessage):
            raise ValueError(
                f"masked update of silo {getattr(message, 'silo', '?')} is a {type(message).__name__}, "
                f"not the {self.name} backend's"
            )
        server.check_ciphertexts(message, message.ciphertexts, self.ciphertexts_for(size))

    def ciphertexts_for(self, size: int) -> int:
        """Ciphertexts in one silo's update of ``size`` parameters."""
        return size

    def finish(self, server: Server, updates: Sequence[Any], size: int) -> np.ndarray:
        """Step 2(c): every silo's checked update, in silo order -> the decoded aggregate, float64 [size]."""
        return self.decode(server, server.decrypt_product([u.ciphertexts for u in updates]), size)

    def decode(self, server: Server, plaintexts: list[int], size: int) -> np.ndarray:
        """Step 2(c)'s Decode of the product's plaintexts (Paillier backends)."""
        raise NotImplementedError

    # --- the silo's half -------------------------------------------------------------------------------------------
    def receive_key_messages(self, silo: Silo, messages: Sequence[Message]) -> None:
        """Step 1(a) at a silo: check and keep the backend's public keys.

        Raises:
            ValueError: keys this backend does not use, or that are not the session's.
        """
        if messages:
            raise ValueError(
                f"silo {silo.silo_id}: the {self.name} backend has no keys beside the Paillier key, got "
                f"{[type(m).__name__ for m in messages]}"
            )

    def share(self, silo: Silo, message: EncryptedWeightsMessage) -> list[Message]:
        """Step 2(b), first half: the silo's shares, from its weight powers ``silo.own_powers``."""
        raise NotImplementedError

    def masked_update(
        self,
        silo: Silo,
        message: EncryptedWeightsMessage,
        shared: Sequence[Message],
        deltas: np.ndarray,
        noise: np.ndarray,
        active: list[int],
    ) -> Message:
        """Steps 2(b)-(c) at a silo, its inputs checked (``active``: the users with records)."""
        raise NotImplementedError

    def weight_bases(
        self,
        silo: Silo,
        message: EncryptedWeightsMessage,
        shared: Sequence[Message],
        active: list[int],
    ) -> list[Any]:
        """Per active user, the Paillier ciphertext ``Enc(n_su w_u)`` the update weights u's delta by (the weights
        check reads these very ciphertexts)."""
        raise NotImplementedError

    def weight_scale(self) -> int:
        """``N_u w_u`` of a sampled user when the server is honest (``C_LCM`` for the paper's weights)."""
        raise NotImplementedError

    def weight_slack(self) -> int:
        """How far ``N_u w_u`` may be from :meth:`weight_scale` by rounding (0: exact)."""
        return 0

    def broadcast(self, message: EncryptedWeightsMessage, shared: Sequence[Message]) -> bytes:
        """What the server sent every silo alike this round (the weights check's coefficients are keyed by it)."""
        return message.to_bytes()

    def export_state(self) -> tuple[tuple[bytes, ...], int]:
        """The silo's backend state: (public keys of step 1(a), the last round the backend answered)."""
        return (), 0

    def restore_state(self, silo: Silo, keys: tuple[bytes, ...], answered_round: int) -> None:
        """Take back what :meth:`export_state` gave, checked as step 1(a) checks it.

        Raises:
            ValueError: a state this backend does not keep, or keys that are not the session's.
        """
        if keys or answered_round:
            raise ValueError(
                f"silo state holds backend keys or a backend round, but this session's backend is "
                f"{self.name!r}, which keeps none"
            )
