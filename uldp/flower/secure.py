"""Protocol 1 (the paper's private weighting, Section 4) inside a Flower federation: ULDP-AVG-w without ``n_su``.

With ``UldpStrategy(secure=True)`` the enhanced weights ``w_su = n_su / N_u`` (Eq. (3)) are computed by Protocol 1,
so no party learns another silo's ``n_su`` nor any ``N_u``: the server holds the Paillier key and sees only blinded
counts and the decoded aggregate; the silos see only which pseudonyms exist (to agree on the users, see below) and
encrypted weights. What runs where:

- Set-up, after the federation stage (three ``query.uldp`` exchanges of :class:`~uldp.flower.UldpStrategy`):
  ``p1-key`` (1(a): the Paillier public key and the session's public parameters -> each silo's X25519 public key),
  ``p1-directory`` (1(b): the key directory -> silo 0's sealed seed R), ``p1-seed`` (1(c)-(e): the relayed seed ->
  each silo's blinded histogram B'(n_su)); the server then holds B(N_u) = r_u N_u (step 1(f)).
- Each round t: ``p1-shares`` (2(a)-(b): Enc(B_inv(N_u)) for the sampled users -> each silo's sealed weight powers),
  then the ``train`` message carries the encrypted weights and the relayed shares, and each silo answers its masked
  update (2(b)-(c)) instead of its update in the clear. The server multiplies them, decrypts and decodes
  sum_s (sum_u w_su clip(Delta_su) + z_s), within P of the plain sum (Theorem 4), and takes the server step.

A silo's secrets (its X25519 key, the pairwise keys, the seed R, its ``n_su`` and a round's weight powers) live
between messages in its node-local ``context.state`` as the bytes of :class:`uldp.secure.messages.SiloState`
(:meth:`uldp.secure.protocol.Silo.export_state`; no pickle): Flower may run each message in a fresh ClientApp
process, and the SuperNode keeps the context in its own memory, never sending it to the SuperLink. The server's
Paillier key lives in the ServerApp process (the strategy object) for the run.

What the silos still share: to agree on the user set U, each silo sends the other silos (sealed, through the
server) the list of pseudonyms it holds, without counts. So silos learn which pseudonyms the others hold (n_su > 0),
not how many records. Hiding membership too would need a private set union, which Protocol 1 does not provide (it
assumes a public U); in ``uldp deploy`` U and the allocation come from the shared seed, public to every party.

Keys under 2048 bits (tests, the book's smoke builds) are refused by a silo unless its SuperNode is started with
``--node-config 'uldp-insecure-test-keys=true'``.
"""

from __future__ import annotations

import time
from dataclasses import asdict
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
from flwr.app import ConfigRecord

from uldp.secure.config import ProtocolConfig, ProtocolParameters

if TYPE_CHECKING:
    from collections.abc import Callable

    from uldp.secure.messages import Message
    from uldp.secure.protocol import Silo

M = TypeVar("M", bound="Message")

#: node_config key that lets a silo accept keys under 2048 bits (tests and smoke builds only).
TEST_KEYS_KEY = "uldp-insecure-test-keys"
#: Where a silo keeps its Protocol 1 state in ``context.state``.
STATE_KEY = "uldp_protocol_1"
#: The set-up stages of Protocol 1, in order, and the stage of a round's weight powers.
SETUP_STAGES = ("p1-key", "p1-directory", "p1-seed")
SHARES_STAGE = "p1-shares"


def _public(config: ProtocolConfig) -> dict:
    """The session's public parameters as ConfigRecord values (what every silo builds its ProtocolConfig from)."""
    return {"n_silos": config.n_silos, "n_users": config.n_users, "clip": config.clip, "sigma": config.sigma,
            **{f"protocol.{name}": value for name, value in asdict(config.parameters).items()}}


def _config_from(values: dict) -> ProtocolConfig:
    parameters = ProtocolParameters(**{name[len("protocol."):]: value for name, value in values.items()
                                       if name.startswith("protocol.")})
    return ProtocolConfig(n_silos=int(values["n_silos"]), n_users=int(values["n_users"]), clip=float(values["clip"]),
                          sigma=float(values["sigma"]), parameters=parameters)


def _messages(values: Any, cls: type[M]) -> list[M]:
    return [cls.from_bytes(bytes(value)) for value in values]


class ServerSide:
    """The server's part of Protocol 1 in a Flower run (held by :class:`~uldp.flower.UldpStrategy`).

    Args:
        config: The session's public parameters (:meth:`~uldp.secure.ProtocolConfig.for_training`).
        ask: ``{silo index: settings} -> {silo index: answer}``, one ``query.uldp`` exchange with the silos.

    Attributes:
        timings: Seconds of the set-up's parts (``paillier_keygen`` and ``setup_messages``).
    """

    def __init__(self, config: ProtocolConfig, ask: Callable[[dict[int, dict]], dict[int, dict]]) -> None:
        from uldp.secure.protocol import Server

        self.config, self._ask = config, ask
        start = time.perf_counter()
        self.server = Server(config)
        self.timings = {"paillier_keygen": time.perf_counter() - start}

    def setup(self) -> None:
        """Steps 1(a)-(f) as three message exchanges (see the module docstring).

        Raises:
            ValueError: a silo's answer is missing, malformed or fails the protocol's checks.
        """
        from uldp.secure.messages import (
            BlindedHistogramMessage,
            DhPublicKeyMessage,
            SealedMessage,
        )

        start = time.perf_counter()
        silos = range(self.config.n_silos)
        public = {"stage": SETUP_STAGES[0], "public_key": self.server.public_key_message().to_bytes(),
                  **_public(self.config)}
        answers = self._ask(dict.fromkeys(silos, public))
        directory = self.server.relay_dh_keys(
            [DhPublicKeyMessage.from_bytes(bytes(answers[s]["message"])) for s in silos])
        answers = self._ask({s: {"stage": SETUP_STAGES[1], "directory": directory.to_bytes()} for s in silos})
        inbox = self.server.relay([m for s in silos for m in _messages(answers[s]["sealed"], SealedMessage)])
        answers = self._ask({s: {"stage": SETUP_STAGES[2], "sealed": [m.to_bytes() for m in inbox[s]]}
                             for s in silos})
        self.server.receive_histograms(
            [BlindedHistogramMessage.from_bytes(bytes(answers[s]["message"])) for s in silos])
        self.timings["setup_messages"] = time.perf_counter() - start

    def round_settings(self, round_index: int, sampled: np.ndarray) -> list[dict]:
        """Steps 2(a)-(b)'s first half: encrypt the weights, collect and relay the silos' sealed weight powers.

        Returns:
            Per silo, what its ``train`` message adds: the encrypted weights and the shares sealed for it.
        """
        from uldp.secure.messages import Message

        weights = self.server.start_round(round_index, np.asarray(sampled, dtype=bool)).to_bytes()
        silos = range(self.config.n_silos)
        answers = self._ask({s: {"stage": SHARES_STAGE, "weights": weights} for s in silos})
        # sealed shares, or the packed backend's rescale requests (answered by the relay)
        inbox = self.server.relay([m for s in silos for m in _messages(answers[s]["sealed"], Message)])
        return [{"weights": weights, "shares": [m.to_bytes() for m in inbox[s]]} for s in silos]

    def aggregate(self, updates: list[bytes]) -> np.ndarray:
        """Step 2(c): the decoded sum_s (sum_u w_su clip(Delta_su) + z_s), float64, from every silo's masked update.

        Raises:
            ValueError: a silo's update is missing or malformed (nothing is decrypted then).
        """
        from uldp.secure.messages import MaskedUpdateMessage

        return self.server.finish_round([MaskedUpdateMessage.from_bytes(bytes(u)) for u in updates])


def _silo(context: Any) -> Silo:
    from uldp.secure.protocol import Silo

    if STATE_KEY not in context.state:
        raise ValueError("a Protocol 1 message before its set-up (the strategy sends p1-key first)")
    state = dict(context.state[STATE_KEY])
    return Silo.restore(bytes(state["silo"]), _config_from(state))


def _keep(context: Any, silo: Silo, public: dict) -> None:
    context.state[STATE_KEY] = ConfigRecord({**public, "silo": silo.export_state()})


def silo_setup(settings: dict, context: Any, *, index: int, n_users: int, own_counts: np.ndarray) -> dict:
    """A silo's answer to one Protocol 1 set-up or share stage (``settings["stage"]``), its state kept in ``context``.

    Args:
        settings: The server's message (its ``uldp`` ConfigRecord).
        context: The ClientApp's context (node config, node-local state).
        index: This silo's number in the federation; n_users: |U|; own_counts: n_su of this silo, [|U|].

    Returns:
        The answer's ConfigRecord values.

    Raises:
        ValueError: public parameters that do not fit this silo's federation, test keys the node did not allow, or
            a message that fails the protocol's checks.
    """
    from uldp.secure.messages import (
        DhDirectoryMessage,
        EncryptedWeightsMessage,
        PublicKeyMessage,
        SealedMessage,
    )
    from uldp.secure.protocol import Silo

    stage = settings["stage"]
    if stage == SETUP_STAGES[0]:
        public = {name: value for name, value in settings.items() if name not in ("stage", "public_key")}
        config = _config_from(public)
        if (config.n_silos, config.n_users) != (int(context.state["uldp"]["n_silos"]), n_users):
            raise ValueError(f"Protocol 1's parameters name {config.n_silos} silos and {config.n_users} users, this "
                             f"federation has {context.state['uldp']['n_silos']} and {n_users}")
        allowed = str(context.node_config.get(TEST_KEYS_KEY, "false")).lower() == "true"
        if config.parameters.insecure_test_key and not allowed:
            raise ValueError(f"the server asks for an insecure test key ({config.parameters.key_bits} bits); this "
                             f"silo accepts one only with --node-config '{TEST_KEYS_KEY}=true' (tests only)")
        silo = Silo(index, own_counts, config)
        key_message = PublicKeyMessage.from_bytes(bytes(settings["public_key"]))
        answer: dict[str, bytes | list[bytes]] = {"message": silo.receive_public_key(key_message).to_bytes()}
        _keep(context, silo, public)
        return answer
    public = {name: value for name, value in dict(context.state[STATE_KEY]).items() if name != "silo"}
    silo = _silo(context)
    if stage == SETUP_STAGES[1]:
        sealed = silo.receive_dh_directory(DhDirectoryMessage.from_bytes(bytes(settings["directory"])))
        answer = {"sealed": [m.to_bytes() for m in sealed]}
    elif stage == SETUP_STAGES[2]:
        silo.receive_seed(_messages(settings["sealed"], SealedMessage))
        answer = {"message": silo.blinded_histogram().to_bytes()}
    elif stage == SHARES_STAGE:
        shares = silo.share_weight_powers(EncryptedWeightsMessage.from_bytes(bytes(settings["weights"])))
        answer = {"sealed": [m.to_bytes() for m in shares]}
    else:
        raise ValueError(f"unknown Protocol 1 stage {stage!r}")
    _keep(context, silo, public)
    return answer


def silo_masked_update(settings: dict, context: Any, deltas: np.ndarray, noise: np.ndarray) -> bytes:
    """Steps 2(b)-(c) in the silo: the masked update of its clipped per-user deltas ``[|U|, d]`` and noise ``[d]``.

    Raises:
        ValueError: see :meth:`uldp.secure.protocol.Silo.masked_update`.
    """
    from uldp.secure.messages import EncryptedWeightsMessage, Message

    public = {name: value for name, value in dict(context.state[STATE_KEY]).items() if name != "silo"}
    silo = _silo(context)
    update = silo.masked_update(EncryptedWeightsMessage.from_bytes(bytes(settings["weights"])),
                                _messages(settings["shares"], Message), deltas, noise)
    _keep(context, silo, public)
    return update.to_bytes()
