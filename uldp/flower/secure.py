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
BFV public keys and Galois keys and the packed weights of the last sample. The keys come once per session, in one
ConfigRecord (39.3 MB at the MNIST setting, ``benchmarks/results/protocol_traffic.json``; 58.2 MB for the hospitals
example over real processes, ``benchmarks/results/flower_loopback_lattice.json``); a ``train`` message carries the
packed weights, one seeded ciphertext per plaintext prime, only when the sample changed (1.2 MB at 100 users), and a
silo answers ceil(d / 16384) switched ciphertexts per prime (0.82 MB for the MNIST CNN, 30 MB for 10^6 parameters,
``benchmarks/results/secure_protocol.json``). Flower 1.41 moves each object of a message in a request of its own over
HTTP, a ConfigRecord whole and arrays in 5 MiB chunks; its routes set no size limit, and its gRPC one
(``flwr.common.GRPC_MAX_MESSAGE_LENGTH``, 2 GiB - 1) binds only its gRPC servers.

What the silos still share: to agree on the user set U they run a private set union (:mod:`uldp.flower.psu`,
:mod:`uldp.secure.psu`) whose shares carry no counts here. So a silo learns which of its own patients the others also
hold (n_su > 0), not how many records, and cannot test a guessed id against another silo's patients; the server
sees only sealed lists and their sizes. In ``uldp deploy`` U and the allocation come from the shared seed, public to
every party.

Beyond the paper (issue 41 item 3), a silo authenticates the DH keys the server relays: its SuperNode names its
identity and its copy of the federation's roster (:mod:`uldp.secure.roster`, made with ``uldp roster identity`` and
``uldp roster add``) with ``--node-config 'uldp-identity="<path>" uldp-roster="<path>"'``; the roster lists the
silos in the federation's order (sorted by their node config's ``silo``; a silo whose identity is not the roster's
entry at its number starts no session). Every
masked-sum and Protocol 1 session then signs its key and checks every relayed key, refusing a swapped one naming the
silo. Without them the keys are unauthenticated (the paper's semi-honest server); a silo whose policy asks for a
malicious server's guarantee (:func:`node_policy`: by default when it names its identity and roster,
``uldp-policy-malicious-server=true`` otherwise) starts no secure session without them and refuses the lattice
backend.

Keys under 2048 bits (tests, the book's smoke builds), and the private set union's 256-bit test group
(:data:`uldp.secure.psu.NAMED_GROUPS`, the strategy's ``psu_group``), are refused by a silo unless its SuperNode is
started with ``--node-config 'uldp-insecure-test-keys=true'``.

ULDP-AVG (uniform weights, no counts) is secure-aggregated with Protocol 1's pairwise masks alone
(:mod:`uldp.secure.masked_sum`): two more ``query.uldp`` exchanges after the federation stage (``sum-key``,
``sum-directory``), and each ``train`` answer is the silo's update encoded and masked; the server decodes only the
sum. Both, and the plain aggregation, are :mod:`uldp.federation`'s: :func:`server_exchange` carries their stages as
``query.uldp`` exchanges, :func:`silo_setup` and :func:`silo_round` answer them from the silo's context state.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from flwr.app import ConfigRecord

from uldp.federation import (
    PLAIN,
    MaskedSumSide,
    PlainSilo,
    Protocol1Side,
    SiloAggregation,
)
from uldp.flower.report import say
from uldp.method_names import MASKED_SUM, PROTOCOL_1
from uldp.policy import SiloPolicy, adversary_words, collusion_thresholds
from uldp.secure.config import ProtocolConfig, ProtocolParameters

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from uldp.federation import Payloads, RoundWork
    from uldp.secure.roster import Credentials

#: node_config key that lets a silo accept keys under 2048 bits (tests and smoke builds only).
TEST_KEYS_KEY = "uldp-insecure-test-keys"
#: node_config keys naming the silo's identity file and its copy of the federation's roster (:mod:`uldp.secure.roster`).
IDENTITY_KEY, ROSTER_KEY = "uldp-identity", "uldp-roster"
#: Where a silo keeps its Protocol 1 state in ``context.state``.
STATE_KEY = "uldp_protocol_1"
#: Where a silo keeps its masked-sum state (:class:`~uldp.secure.messages.MaskedSumState` bytes).
MASKED_SUM_KEY = "uldp_masked_sum"
_PROGRESS = ("setup_done", "shares_round", "answered_round", "checked_round")
#: Protocol 1's first set-up stage: the one whose message carries the session's public parameters.
_P1_KEY = "p1-key"


def consents_to_test_keys(node_config: Any) -> bool:
    """Whether the silo's node config sets ``uldp-insecure-test-keys=true``: it accepts Protocol 1 keys under 2048 bits
    and the private set union's insecure test group (tests only)."""
    return str(node_config.get(TEST_KEYS_KEY, "false")).lower() == "true"


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


def server_exchange(
    ask: Callable[[dict[int, dict]], dict[int, dict]], protocol: ProtocolConfig | None
) -> Callable[[str, int, dict[int, Payloads]], Mapping[int, Payloads]]:
    """The exchange of a :class:`uldp.federation.ServerAggregation` over ``query.uldp`` messages.

    Args:
        ask: ``{silo index: settings} -> {silo index: answer}``, one ``query.uldp`` exchange with the silos.
        protocol: Protocol 1's session parameters, sent with its first set-up stage (None for the masked sum).
    """

    def exchange(
        stage: str, round_index: int, payloads: dict[int, Payloads]
    ) -> dict[int, Payloads]:
        extra = _public(protocol) if protocol is not None and stage == _P1_KEY else {}
        answers = ask(
            {
                s: {"stage": stage, "round": round_index, "payloads": list(p), **extra}
                for s, p in payloads.items()
            }
        )
        return {
            s: tuple(bytes(p) for p in answer.get("payloads", [])) for s, answer in answers.items()
        }

    return exchange


def silo_credentials(node_config: Mapping[str, Any]) -> Credentials | None:
    """The silo's identity and roster its node config names (:data:`IDENTITY_KEY`, :data:`ROSTER_KEY`), or None.

    Raises:
        ValueError: one key without the other, or see :func:`uldp.secure.roster.read_credentials`.
    """
    from uldp.secure.roster import read_credentials

    try:
        return read_credentials(node_config.get(IDENTITY_KEY), node_config.get(ROSTER_KEY))
    except ValueError as error:
        raise ValueError(f"{IDENTITY_KEY} and {ROSTER_KEY}: {error}") from error


def node_policy(node_config: Mapping[str, Any]) -> SiloPolicy:
    """The silo's policy from its node config (:meth:`uldp.policy.SiloPolicy.from_node_config`): a silo that names
    its identity and roster asks for a malicious server's guarantee unless ``uldp-policy-malicious-server=false``
    says otherwise (issue 41: a hospital that set up a roster relies on it)."""
    return SiloPolicy.from_node_config(
        node_config, has_roster=IDENTITY_KEY in node_config and ROSTER_KEY in node_config
    )


@dataclass(frozen=True)
class FederationTrust:
    """Whom a run's epsilons hold against, from its silos' hellos (their own policies).

    Attributes:
        colluders: The smallest collusion threshold of the silos (each scales its noise share for its own, so every
            epsilon holds against that many colluding silos: :func:`uldp.policy.collusion_thresholds`).
        most: The largest, which the server's norm bounds allow for.
        against: Whom every epsilon holds against, in words: a malicious server only when every silo asks for that
            guarantee (:func:`node_policy`), colluding with up to ``colluders`` silos.
    """

    colluders: int
    most: int
    against: str


def federation_trust(
    hellos: Mapping[str, Mapping[str, Any]], min_colluders: int
) -> FederationTrust:
    """The run's :class:`FederationTrust` from each silo's hello (by name: its ``colluders`` and
    ``malicious_server``), logged once (issue 41).

    Raises:
        RuntimeError: silos whose threshold is below the run's ``min_colluders``, named.
        ValueError: a threshold out of range (:func:`uldp.policy.collusion_thresholds`), naming the silo.
    """
    colluders, most = collusion_thresholds(
        {name: hello.get("colluders", 0) for name, hello in hellos.items()}
    )
    short = [name for name, hello in hellos.items() if hello.get("colluders", 0) < min_colluders]
    if short:
        raise RuntimeError(
            f"silo(s) {', '.join(short)} hold against fewer than the run's min_colluders "
            f"{min_colluders} colluding silos (their uldp-policy-colluders)"
        )
    malicious = all(bool(hello.get("malicious_server")) for hello in hellos.values())
    against = adversary_words(malicious_server=malicious, colluders=colluders)
    say(20, "every epsilon of this run holds against %s (the silos' own policies)", against)
    return FederationTrust(colluders, most, against)


def _trust(context: Any) -> dict[str, Any]:
    """The ``credentials``, ``malicious_server`` and ``sample_rate`` a silo side is started or restored with (its
    own node config; a sample rate only when its policy's sampler is the silos)."""
    policy = node_policy(context.node_config)
    return {
        "credentials": silo_credentials(context.node_config),
        "malicious_server": policy.malicious_server,
        "sample_rate": policy.q if policy.sampler == "silos" else None,
    }


def silo_sample(settings: dict, context: Any, kind: str, n_users: int) -> np.ndarray:
    """Beyond the paper, the round's user sample the silos drew (policy ``sampler="silos"``, q from the policy;
    :mod:`uldp.secure.sampling`), from the seed of this silo's secure session, never the server's.

    Raises:
        ValueError: before the set-up, or an aggregation without the silos' sample (plain, or a session the server
            set up without the sampling stage).
    """
    return _LOADERS[kind](context).sample(int(settings["round"]), n_users)


def _public_state(context: Any) -> dict:
    return {
        name: value
        for name, value in dict(context.state[STATE_KEY]).items()
        if name != "silo" and name not in _PROGRESS
    }


def _load_plain(context: Any) -> PlainSilo:
    return PlainSilo()


def _load_masked(context: Any) -> MaskedSumSide:
    from uldp.secure.masked_sum import MaskedSumSilo

    if MASKED_SUM_KEY not in context.state:
        raise ValueError(
            "a masked update before the masked sum's set-up: a secure silo never sends its update "
            "unmasked (the strategy sends sum-key first)"
        )
    trust = _trust(context)
    return MaskedSumSide(
        MaskedSumSilo.restore(
            bytes(context.state[MASKED_SUM_KEY]["silo"]),
            credentials=trust["credentials"],
            sample_rate=trust["sample_rate"],
        )
    )


def _load_protocol_1(context: Any) -> Protocol1Side:
    from uldp.secure.driver import SiloDriver, SiloProgress
    from uldp.secure.protocol import Silo

    if STATE_KEY not in context.state:
        raise ValueError("a Protocol 1 message before its set-up (the strategy sends p1-key first)")
    state = dict(context.state[STATE_KEY])
    config = _config_from(state)
    role = Silo.restore(bytes(state["silo"]), config)
    progress = SiloProgress(**{name: int(state[name]) for name in _PROGRESS})
    return Protocol1Side(
        SiloDriver(
            role.silo_id,
            np.zeros(config.n_users),
            config,
            role=role,
            progress=progress,
            **_trust(context),
        )
    )


def _keep(context: Any, side: SiloAggregation, public: dict | None = None) -> None:
    """The silo's state after a stage (a refused or failed stage still keeps what it spent: a round index is
    answered at most once)."""
    if isinstance(side, MaskedSumSide):
        context.state[MASKED_SUM_KEY] = ConfigRecord({"silo": side.silo.export_state()})
    elif isinstance(side, Protocol1Side):
        driver = side.driver
        context.state[STATE_KEY] = ConfigRecord(
            {
                **(public if public is not None else _public_state(context)),
                "silo": driver.role.export_state(),
                **asdict(driver.progress),
            }
        )


#: How a silo restores each aggregation's side from its context state.
_LOADERS: dict[str, Callable[[Any], SiloAggregation]] = {
    PLAIN: _load_plain,
    MASKED_SUM: _load_masked,
    PROTOCOL_1: _load_protocol_1,
}


def _answer(
    side: SiloAggregation,
    stage: str,
    settings: dict,
    context: Any,
    *,
    work: RoundWork | None = None,
    public: dict | None = None,
) -> Payloads:
    try:
        return side.answer(
            stage,
            int(settings["round"]),
            tuple(bytes(p) for p in settings.get("payloads", [])),
            work=work,
        )
    finally:
        _keep(context, side, public)


def silo_round(settings: dict, context: Any, kind: str, work: RoundWork) -> bytes:
    """This silo's answer to a round's update stage (its update, plain or masked) under aggregation ``kind``;
    ``work`` runs only when the round may be answered.

    Raises:
        ValueError: before the set-up, a round answered already, or see the aggregation's checks.
    """
    side = _LOADERS[kind](context)
    return _answer(side, side.round_stages[-1], settings, context, work=work)[0]


def silo_setup(
    settings: dict, context: Any, *, index: int, n_users: int, own_counts: np.ndarray
) -> dict:
    """A silo's answer to one set-up stage of the masked sum or Protocol 1, or Protocol 1's shares stage, its state
    kept in ``context``. The first set-up stage starts a new session; the rounds answered stay answered.

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
    from uldp.secure.masked_sum import SETUP_STAGES, STAGE_SAMPLE

    masked_sum_stages = (*SETUP_STAGES, STAGE_SAMPLE)
    stage = str(settings["stage"])
    if stage in masked_sum_stages:
        kind = MASKED_SUM
        previous = _load_masked(context) if MASKED_SUM_KEY in context.state else None
        side: SiloAggregation = (
            MaskedSumSide.start(
                previous,
                silo_id=index,
                n_silos=int(context.state["uldp"]["n_silos"]),
                counts=own_counts,
                protocol=lambda: _config_from({}),
                **_trust(context),
            )
            if stage == masked_sum_stages[0]
            else _LOADERS[kind](context)
        )
        return {"payloads": list(_answer(side, stage, settings, context))}
    if stage != _P1_KEY:
        return {"payloads": list(_answer(_load_protocol_1(context), stage, settings, context))}
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
    if config.parameters.insecure_test_key and not consents_to_test_keys(context.node_config):
        raise ValueError(
            f"the server asks for an insecure test key ({config.parameters.key_bits} bits); this "
            f"silo accepts one only with --node-config '{TEST_KEYS_KEY}=true' (tests only)"
        )
    earlier = _load_protocol_1(context) if STATE_KEY in context.state else None
    side = Protocol1Side.start(
        earlier,
        silo_id=index,
        n_silos=config.n_silos,
        counts=own_counts,
        protocol=lambda: config,
        **_trust(context),
    )
    return {"payloads": list(_answer(side, stage, settings, context, public=public))}
