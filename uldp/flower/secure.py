"""Protocol 1 (the paper's private weighting, Section 4) inside a Flower federation: ULDP-AVG-w without ``n_su``.

With ``UldpStrategy(secure=True)`` the enhanced weights ``w_su = n_su / N_u`` (Eq. (3)) are computed by Protocol 1,
so no party learns another silo's ``n_su`` nor any ``N_u``: the server holds the Paillier key and sees only blinded
counts and the decoded aggregate; the silos see only the union's blinded users (to agree on them, see below) and
encrypted weights. What runs where:

Protocol 1's stages, their order and their checks are :mod:`uldp.secure.driver`'s (one driver for every transport);
here each stage is one Flower message:

- Set-up, after the federation stage: three ``query.uldp`` exchanges of :class:`~uldp.flower.UldpStrategy`,
  ``p1-key`` (1(a), with the session's public parameters), ``p1-directory`` (1(b)) and ``p1-seed`` (1(c)-(e)); the
  server then holds B(N_u) = r_u N_u (step 1(f)).
- Each round t: ``p1-shares`` (2(a)-(b)) as a ``query.uldp`` exchange, then the ``train`` message carries the update
  stage's payloads (the encrypted weights and the relayed shares), and each silo answers its masked update
  (2(b)-(c)) instead of its update in the clear. The server multiplies them, decrypts and decodes
  sum_s (sum_u w_su clip(Delta_su) + z_s), within P of the plain sum (Theorem 4), and takes the server step.

A silo's secrets (its X25519 key, the pairwise keys, the seed R, its ``n_su`` and a round's weight powers) live
between messages in its node-local ``context.state`` as the bytes of :class:`uldp.secure.messages.SiloState`
(:meth:`uldp.secure.protocol.Silo.export_state`; no pickle): Flower may run each message in a fresh ClientApp
process, and the SuperNode keeps the context in its own memory, never sending it to the SuperLink. The server's
Paillier key lives in the ServerApp process (the strategy object) for the run.

Every backend of :class:`~uldp.secure.ProtocolParameters` runs here, ``protocol={"backend": "lattice"}``
(:mod:`uldp.secure.lattice`) included: its messages are the driver's, and the silo's state then also holds the server's
BFV public keys (one per plaintext prime, 1.57 MB each at six 60-bit primes) and its last answered lattice round. Its
``train`` message is large: each silo receives |U| seeded BFV ciphertexts per plaintext prime (131 MB at 100 users
and two primes, ``benchmarks/results/secure_protocol.json``) and answers ceil(d / 16384) per prime (5.2 MB for the
MNIST CNN, 163 MB for 10^6 parameters). Flower 1.41 sends a ConfigRecord as one object of at most
``flwr.common.GRPC_MAX_MESSAGE_LENGTH`` (2 GiB - 1) bytes (only ArrayRecords are chunked), so a round fits up to about
1,600 users at two primes.

What the silos still share: to agree on the user set U they run a private set union (:mod:`uldp.flower.psu`,
:mod:`uldp.secure.psu`) whose shares carry no counts here. So a silo learns which of its own patients the others also
hold (n_su > 0), not how many records, and cannot test a guessed id against another silo's patients; the server
sees only sealed lists and their sizes. In ``uldp deploy`` U and the allocation come from the shared seed, public to
every party.

Keys under 2048 bits (tests, the book's smoke builds) are refused by a silo unless its SuperNode is started with
``--node-config 'uldp-insecure-test-keys=true'``.

ULDP-AVG (uniform weights, no counts) is secure-aggregated with Protocol 1's pairwise masks alone
(:mod:`uldp.secure.masked_sum`): two more ``query.uldp`` exchanges after the federation stage (``sum-key``,
``sum-directory``), and each ``train`` answer is the silo's update encoded and masked; the server decodes only the
sum (:func:`masked_sum_server`, :func:`silo_masked_sum`).
"""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Any

import numpy as np
from flwr.app import ConfigRecord

from uldp.secure.config import ProtocolConfig, ProtocolParameters

if TYPE_CHECKING:
    from collections.abc import Callable

    from uldp.secure.driver import Payloads, ServerDriver, SiloDriver
    from uldp.secure.masked_sum import MaskedSumServer, MaskedSumSilo

#: node_config key that lets a silo accept keys under 2048 bits (tests and smoke builds only).
TEST_KEYS_KEY = "uldp-insecure-test-keys"
#: Where a silo keeps its Protocol 1 state in ``context.state``.
STATE_KEY = "uldp_protocol_1"
#: Where a silo keeps its masked-sum state (:class:`~uldp.secure.messages.MaskedSumState` bytes).
MASKED_SUM_KEY = "uldp_masked_sum"
_PROGRESS = ("setup_done", "shares_round", "answered_round", "checked_round")


def _public(config: ProtocolConfig) -> dict:
    """The session's public parameters as ConfigRecord values (what every silo builds its ProtocolConfig from)."""
    return {
        "n_silos": config.n_silos,
        "n_users": config.n_users,
        "clip": config.clip,
        "sigma": config.sigma,
        **{f"protocol.{name}": value for name, value in asdict(config.parameters).items()},
    }


def _config_from(values: dict) -> ProtocolConfig:
    parameters = ProtocolParameters(
        **{
            name[len("protocol.") :]: value
            for name, value in values.items()
            if name.startswith("protocol.")
        }
    )
    return ProtocolConfig(
        n_silos=int(values["n_silos"]),
        n_users=int(values["n_users"]),
        clip=float(values["clip"]),
        sigma=float(values["sigma"]),
        parameters=parameters,
    )


def server_driver(
    config: ProtocolConfig, ask: Callable[[dict[int, dict]], dict[int, dict]]
) -> ServerDriver:
    """The server's Protocol 1 driver (:class:`~uldp.secure.driver.ServerDriver`) over ``query.uldp`` exchanges.

    Args:
        config: The session's public parameters (:meth:`~uldp.secure.ProtocolConfig.for_training`).
        ask: ``{silo index: settings} -> {silo index: answer}``, one ``query.uldp`` exchange with the silos.

    Returns:
        The driver; its ``setup()`` runs steps 1(a)-(f), and each round's ``begin_round`` the shares stage (the
        ``train`` message then carries the update stage's payloads, see :func:`round_settings`).
    """
    from uldp.secure.driver import STAGE_KEY, ServerDriver

    def exchange(
        stage: str, round_index: int, payloads: dict[int, Payloads]
    ) -> dict[int, Payloads]:
        extra = _public(config) if stage == STAGE_KEY else {}
        answers = ask(
            {
                s: {"stage": stage, "round": round_index, "payloads": list(p), **extra}
                for s, p in payloads.items()
            }
        )
        return {
            s: tuple(bytes(p) for p in answer.get("payloads", [])) for s, answer in answers.items()
        }

    return ServerDriver(config, exchange)


def masked_sum_server(
    n_silos: int, ask: Callable[[dict[int, dict]], dict[int, dict]]
) -> MaskedSumServer:
    """The server's masked sum (:class:`~uldp.secure.masked_sum.MaskedSumServer`) over ``query.uldp`` exchanges.

    Args:
        n_silos: |S|.
        ask: ``{silo index: settings} -> {silo index: answer}``, one ``query.uldp`` exchange with the silos.
    """
    from uldp.secure.masked_sum import MaskedSumServer

    def exchange(
        stage: str, round_index: int, payloads: dict[int, Payloads]
    ) -> dict[int, Payloads]:
        answers = ask(
            {
                s: {"stage": stage, "round": round_index, "payloads": list(p)}
                for s, p in payloads.items()
            }
        )
        return {
            s: tuple(bytes(p) for p in answer.get("payloads", [])) for s, answer in answers.items()
        }

    return MaskedSumServer(n_silos, exchange)


def _masked_silo(context: Any) -> MaskedSumSilo:
    from uldp.secure.masked_sum import MaskedSumSilo

    if MASKED_SUM_KEY not in context.state:
        raise ValueError(
            "a masked update before the masked sum's set-up: a secure silo never sends its update "
            "unmasked (the strategy sends sum-key first)"
        )
    return MaskedSumSilo.restore(bytes(context.state[MASKED_SUM_KEY]["silo"]))


def _masked_answer(silo: MaskedSumSilo, settings: dict, context: Any, **options: Any) -> dict:
    try:
        payloads = silo.answer(
            str(settings["stage"]),
            int(settings["round"]),
            tuple(bytes(p) for p in settings.get("payloads", [])),
            **options,
        )
    finally:  # a refused or failed stage still keeps what it spent (a round index is answered at most once)
        context.state[MASKED_SUM_KEY] = ConfigRecord({"silo": silo.export_state()})
    return {"payloads": list(payloads)}


def silo_masked_sum(settings: dict, context: Any, update: Callable[[], np.ndarray]) -> bytes:
    """A silo's masked update of round ``settings["round"]`` (the bytes of a
    :class:`~uldp.secure.messages.MaskedSumMessage`); ``update`` is called only when the round may be answered.

    Raises:
        ValueError: before the set-up, a round answered already, or see
            :meth:`uldp.secure.masked_sum.MaskedSumSilo.masked_update`.
    """
    from uldp.secure.masked_sum import STAGE_UPDATE

    answer = _masked_answer(
        _masked_silo(context), {**settings, "stage": STAGE_UPDATE}, context, update=update
    )
    return bytes(answer["payloads"][0])


def round_settings(payloads: Payloads) -> dict:
    """What a ``train`` message adds for Protocol 1's update stage (2(b)-(c)): the weights and relayed shares."""
    return {"p1": list(payloads)}


def _load(context: Any) -> SiloDriver:
    from uldp.secure.driver import SiloDriver, SiloProgress
    from uldp.secure.protocol import Silo

    if STATE_KEY not in context.state:
        raise ValueError("a Protocol 1 message before its set-up (the strategy sends p1-key first)")
    state = dict(context.state[STATE_KEY])
    config = _config_from(state)
    role = Silo.restore(bytes(state["silo"]), config)
    progress = SiloProgress(**{name: int(state[name]) for name in _PROGRESS})
    return SiloDriver(role.silo_id, np.zeros(config.n_users), config, role=role, progress=progress)


def _keep(context: Any, driver: SiloDriver, public: dict) -> None:
    context.state[STATE_KEY] = ConfigRecord(
        {**public, "silo": driver.role.export_state(), **asdict(driver.progress)}
    )


def _answer(driver: SiloDriver, settings: dict, context: Any, public: dict, **options: Any) -> dict:
    try:
        payloads = driver.answer(
            str(settings["stage"]),
            int(settings["round"]),
            tuple(bytes(p) for p in settings.get("payloads", settings.get("p1", []))),
            **options,
        )
    finally:  # a refused or failed stage still keeps what it spent (a round index is answered at most once)
        _keep(context, driver, public)
    return {"payloads": list(payloads)}


def silo_setup(
    settings: dict, context: Any, *, index: int, n_users: int, own_counts: np.ndarray
) -> dict:
    """A silo's answer to one Protocol 1 set-up or share stage, or a set-up stage of the masked sum (ULDP-AVG's
    ``sum-key``, ``sum-directory``; :mod:`uldp.secure.masked_sum`), its state kept in ``context``.

    The stage order, and one answer per round index, are :class:`~uldp.secure.driver.SiloDriver`'s; a new set-up
    (``p1-key`` again) keeps the last answered round, so no round is answered twice under fresh keys either.

    Args:
        settings: The server's message (its ``uldp`` ConfigRecord).
        context: The ClientApp's context (node config, node-local state).
        index: This silo's number in the federation; n_users: |U|; own_counts: n_su of this silo, [|U|].

    Returns:
        The answer's ConfigRecord values.

    Raises:
        ValueError: public parameters that do not fit this silo's federation, test keys the node did not allow, a
            stage out of order or a round answered already, or a message that fails the protocol's checks.
    """
    from uldp.secure.driver import STAGE_KEY, SiloDriver, SiloProgress
    from uldp.secure.masked_sum import SETUP_STAGES as MASKED_SUM_STAGES, MaskedSumSilo

    if settings["stage"] in MASKED_SUM_STAGES:  # the masked sum of plain updates (ULDP-AVG)
        if (
            settings["stage"] == MASKED_SUM_STAGES[0]
        ):  # a new session; the rounds it answered stay answered
            answered = (
                _masked_silo(context).answered_round if MASKED_SUM_KEY in context.state else 0
            )
            silo = MaskedSumSilo(
                index, int(context.state["uldp"]["n_silos"]), answered_round=answered
            )
        else:
            silo = _masked_silo(context)
        return _masked_answer(silo, settings, context)
    if settings["stage"] != STAGE_KEY:
        driver = _load(context)
        public = {
            name: value
            for name, value in dict(context.state[STATE_KEY]).items()
            if name != "silo" and name not in _PROGRESS
        }
        return _answer(driver, settings, context, public)
    public = {
        name: value
        for name, value in settings.items()
        if name not in ("stage", "round", "payloads")
    }
    config = _config_from(public)
    if (config.n_silos, config.n_users) != (int(context.state["uldp"]["n_silos"]), n_users):
        raise ValueError(
            f"Protocol 1's parameters name {config.n_silos} silos and {config.n_users} users, this "
            f"federation has {context.state['uldp']['n_silos']} and {n_users}"
        )
    allowed = str(context.node_config.get(TEST_KEYS_KEY, "false")).lower() == "true"
    if config.parameters.insecure_test_key and not allowed:
        raise ValueError(
            f"the server asks for an insecure test key ({config.parameters.key_bits} bits); this "
            f"silo accepts one only with --node-config '{TEST_KEYS_KEY}=true' (tests only)"
        )
    earlier = (
        _load(context) if STATE_KEY in context.state else None
    )  # its answered rounds and its verifier stay
    driver = SiloDriver(
        index,
        own_counts,
        config,
        verifier=earlier.role.verifier if earlier else None,
        progress=SiloProgress(answered_round=earlier.progress.answered_round if earlier else 0),
    )
    return _answer(driver, settings, context, public)


def silo_masked_update(
    settings: dict, context: Any, inputs: Callable[[], tuple[np.ndarray, np.ndarray]]
) -> bytes:
    """Steps 2(b)-(c) in the silo: the masked update of its clipped per-user deltas ``[|U|, d]`` and noise ``[d]``.

    Args:
        settings: The ``train`` message's settings (``round`` and ``p1``, :func:`round_settings`).
        context: The ClientApp's context.
        inputs: ``() -> (deltas, noise)``, called only when the round may be answered.

    Raises:
        ValueError: a round not announced by its shares stage, answered already, or see
            :meth:`uldp.secure.protocol.Silo.masked_update`.
    """
    from uldp.secure.driver import STAGE_UPDATE

    driver = _load(context)
    public = {
        name: value
        for name, value in dict(context.state[STATE_KEY]).items()
        if name != "silo" and name not in _PROGRESS
    }
    answer = _answer(driver, {**settings, "stage": STAGE_UPDATE}, context, public, inputs=inputs)
    return bytes(answer["payloads"][0])
