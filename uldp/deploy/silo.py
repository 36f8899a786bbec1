"""The silo process of a deployed federation: a Flower client that holds one silo's records and secrets.

The silo connects to the server (``flwr.client.start_client``, gRPC), proves it
runs the same configuration (and, with a key, that it is who it claims to be), then answers each stage of
:mod:`uldp.deploy.wire`: local training on its own partition only, and its part of Protocol 1 (its X25519 key,
pairwise keys, blinds and masks never leave the process). Every answer says how many seconds the silo computed
(``seconds``), so the server can tell computation from transport. A failure inside a stage is answered as an
error, which makes the server abort the round; the silo keeps running.

The silo enforces differential privacy itself (:mod:`uldp.policy`): before joining it checks the run against its own
:class:`~uldp.policy.SiloPolicy` (its policy file, never the server's), each round it refuses a user sample past the
policy and any round index it has answered (its :class:`~uldp.policy.SiloLedger`, on disk before the answer leaves),
and it keeps the user-level epsilon of what the server sees within its target. Protocol 1's stages run through
:class:`uldp.secure.driver.SiloDriver`, which refuses them out of order. In a secure run its contribution never
leaves in the clear: Protocol 1's masked update, or (the methods Protocol 1 does not run) its contribution masked
with Protocol 1's pairwise masks (:class:`uldp.secure.masked_sum.MaskedSumSilo`).

Waiting for the server: a silo started before its server, or one whose server went away before the federation
finished (an aborted round, a crash, a network cut), keeps trying to connect for ``max_wait`` seconds, with an
exponential backoff (1 s doubling to at most :data:`MAX_BACKOFF`), saying each time how long it has waited. A
restarted server admits it again and continues at its next round index; answering that round is this silo's
decision (its own record of answered rounds), the server never asks a round index twice.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from uldp.common.checks import check_number
from uldp.common.persist import array_from_bytes
from uldp.deploy import keys, quiet_flower_deprecation, wire
from uldp.deploy.settings import MAX_TIMEOUT
from uldp.federation import (
    PLAIN,
    SILO_SESSIONS,
    PlainSilo,
    RoundWork,
    SiloAggregation,
)
from uldp.method_names import MASKED_SUM, PROTOCOL_1
from uldp.policy import PolicyRefusal, SiloLedger, SiloPolicy
from uldp.secure.driver import STAGE_CHECK, STAGE_DIRECTORY, STAGE_KEY, STAGE_SEED
from uldp.secure.masked_sum import (
    STAGE_DIRECTORY as STAGE_SUM_DIRECTORY,
    STAGE_KEY as STAGE_SUM_KEY,
    STAGE_SAMPLE as STAGE_SUM_SAMPLE,
)

if TYPE_CHECKING:
    from pathlib import Path

    import numpy as np

    from uldp.deploy.roles import SiloRole
    from uldp.secure.roster import Credentials

# Flower (and grpc) are imported inside the functions that use them: run_silo() sets FLWR_TELEMETRY_ENABLED first.

LOGGER = logging.getLogger("uldp.deploy")
#: The deployment's wire stages of the secure aggregations' set-up (:mod:`uldp.federation`; the drivers keep their
#: order and checks).
SETUP_STAGES = {
    wire.STAGE_SECURE_KEYS: STAGE_KEY,
    wire.STAGE_SECURE_DIRECTORY: STAGE_DIRECTORY,
    wire.STAGE_SECURE_SEED: STAGE_SEED,
    wire.STAGE_SUM_KEYS: STAGE_SUM_KEY,
    wire.STAGE_SUM_DIRECTORY: STAGE_SUM_DIRECTORY,
    wire.STAGE_SUM_SAMPLE: STAGE_SUM_SAMPLE,
}
#: The first set-up stage of each secure aggregation: it starts a new session.
NEW_SESSION = {STAGE_KEY: PROTOCOL_1, STAGE_SUM_KEY: MASKED_SUM}
#: The longest pause (seconds) between two attempts to reach the server.
MAX_BACKOFF = 10.0


class SiloRefused(RuntimeError):
    """The server refused this silo (wrong configuration, id or key); the message says why."""


class FederationIncomplete(RuntimeError):
    """The server ended the connection before the federation finished (see the server's log for why)."""


@dataclass(frozen=True)
class SiloSettings:
    """How a silo process connects.

    Attributes:
        server_address: ``host:port`` of the server.
        key: This silo's authentication key (from ``uldp deploy keys``), or None when the server uses none.
        root_certificates: PEM bytes of the CA that signed the server's certificate (TLS), or None for insecure.
        max_wait: Seconds to keep trying to reach the server, at the start and after losing it.
        policy: This silo's own privacy policy (:class:`uldp.policy.SiloPolicy`; its policy file), never the
            server's. With sampler ``"silos"`` it trains on the sample of its secure session at its q, and refuses
            a run whose configuration does not set ``hidden_sample``.
        ledger: This silo's ledger file (:class:`uldp.policy.SiloLedger`: the rounds it answered and the noise it
            released, across restarts), or None to keep it in memory.
        credentials: This silo's identity and its copy of the federation's roster
            (:class:`uldp.secure.roster.Credentials`; ``--identity`` and ``--roster``): every secure session signs its
            DH key and refuses a relayed key the roster does not vouch for, naming the silo. None: unauthenticated
            keys (a semi-honest server), refused when the policy asks for ``malicious_server``.

    Raises:
        ValueError: ``max_wait`` not a finite number of seconds in (0, a week], or a key shorter than 16 bytes.
    """

    server_address: str = "127.0.0.1:8080"
    key: bytes | None = None
    root_certificates: bytes | None = None
    max_wait: float = 120.0
    policy: SiloPolicy = field(default_factory=SiloPolicy)
    ledger: Path | None = None
    credentials: Credentials | None = None

    def __post_init__(self) -> None:
        check_number("--max-wait", self.max_wait, above=0, at_most=MAX_TIMEOUT)
        if self.key is not None:
            keys.check_master_key(self.key, "the silo key")


def _make_client(role: SiloRole, settings: SiloSettings) -> Any:
    """Build the Flower client (a subclass of ``flwr.client.Client``) for this silo."""
    from flwr.client import Client
    from flwr.common import Code, GetPropertiesRes, Status

    own_sample = settings.policy.sampler == "silos"
    if own_sample != role.hidden_sample:  # never charged amplified for a sample the server draws
        raise PolicyRefusal(
            f"this silo's policy says sampler {settings.policy.sampler!r}, the run's configuration "
            f"{'sets' if role.hidden_sample else 'does not set'} hidden_sample: a silo trains on the "
            f"sample its policy says is drawn"
        )
    ledger = SiloLedger(settings.policy, settings.ledger)
    role.check_policy(settings.policy)

    class SiloClient(Client):
        """Answers the server's stages for one silo (state kept in this long-lived process)."""

        def __init__(self) -> None:
            self.refused = ""
            self.handshakes = 0
            self.final_params: np.ndarray | None = None
            self.rounds_seen: list[int] = []
            # the aggregation's silo side (uldp.federation): a secure one once its set-up starts
            self._aggregation: SiloAggregation | None = (
                PlainSilo() if role.aggregation == PLAIN else None
            )
            self._pending: RoundWork | None = None  # Protocol 1's round between its two stages

        def get_properties(self, ins: Any) -> Any:
            self.handshakes += 1
            nonce = ins.config.get("nonce", b"")
            answer: dict[str, Any] = {
                "silo_id": role.silo_id,
                "fingerprint": role.fingerprint,
                "wire_version": wire.WIRE_VERSION,
            }
            if settings.key is not None:
                answer["tag"] = keys.authentication_tag(
                    settings.key,
                    nonce=nonce,
                    silo_id=role.silo_id,
                    config_fingerprint=role.fingerprint,
                )
            return GetPropertiesRes(Status(Code.OK, ""), answer)

        def fit(self, ins: Any) -> Any:
            try:
                instruction = wire.Instruction.from_flower(ins)
                start = time.perf_counter()
                reply = self._handle(instruction)
                reply = replace(
                    reply, values={**reply.values, "seconds": time.perf_counter() - start}
                )
            except Exception as error:
                LOGGER.exception("silo %d failed", role.silo_id)
                reply = wire.Reply(error=f"{type(error).__name__}: {error}")
            return reply.to_flower(role.n_records)

        def _handle(self, instruction: wire.Instruction) -> wire.Reply:
            stage, payloads = instruction.stage, instruction.payloads
            if stage == wire.STAGE_REFUSE:
                self.refused = str(instruction.values.get("reason", "no reason given"))
                return wire.Reply()
            if stage in SETUP_STAGES:
                name = SETUP_STAGES[stage]
                if name in NEW_SESSION:  # a new session; the rounds it answered stay answered
                    self._aggregation = self._new_session(name)
                return wire.Reply(payloads=self._side().answer(name, 0, payloads))
            if stage == wire.STAGE_TRAIN:
                round_index = instruction.round_index
                self.rounds_seen.append(round_index)
                params, sampled = array_from_bytes(payloads[0]), array_from_bytes(payloads[1])
                side = self._side()
                if own_sample:  # the silos' own sample, never the server's
                    sampled = side.sample(round_index, role.n_users)
                role.check_policy(settings.policy, sampled)
                work = role.work(params, round_index, sampled, lambda: self._admit(round_index))
                # Protocol 1's shares stage first (its update stage follows), else the update itself
                self._pending = work if len(side.round_stages) > 1 else None
                return wire.Reply(
                    payloads=side.answer(side.round_stages[0], round_index, payloads[2:], work=work)
                )
            if (
                stage == wire.STAGE_SECURE_CHECK
            ):  # beyond the paper: the silos check the server's weights
                return wire.Reply(
                    payloads=self._side().answer(STAGE_CHECK, instruction.round_index, payloads)
                )
            if stage == wire.STAGE_SECURE_UPDATE:
                if self._pending is None:
                    raise ValueError(
                        f"round {instruction.round_index}: an update stage before the round's model"
                    )
                work, self._pending = self._pending, None
                side = self._side()
                return wire.Reply(
                    payloads=side.answer(
                        side.round_stages[-1], instruction.round_index, payloads, work=work
                    )
                )
            if stage == wire.STAGE_FINISH:
                self.final_params = array_from_bytes(payloads[0])
                return wire.Reply()
            raise ValueError(f"unknown stage {stage!r}")

        def _admit(self, round_index: int) -> None:
            """Into the ledger (on disk) before anything of the round is computed, or a PolicyRefusal."""
            multiplier, _ = role.release()  # charged at the policy's rate, not the run's
            ledger.admit(role.fingerprint, round_index, multiplier=multiplier)

        def _new_session(self, stage: str) -> SiloAggregation:
            kind = NEW_SESSION[stage]
            if kind != role.aggregation:
                raise ValueError(
                    f"a {kind} set-up in a run aggregated by {role.aggregation}: this silo never "
                    f"sends its contribution otherwise"
                )
            return SILO_SESSIONS[kind].start(
                self._aggregation,
                silo_id=role.silo_id,
                n_silos=role.n_silos,
                counts=role.counts_row,
                protocol=role.protocol_config,
                credentials=settings.credentials,
                malicious_server=settings.policy.malicious_server,
                sample_rate=settings.policy.q if own_sample else None,
            )

        def _side(self) -> SiloAggregation:
            if self._aggregation is None:
                raise ValueError(
                    "a round or stage before the secure aggregation's set-up: this silo never sends its "
                    "contribution unmasked in a secure run"
                )
            return self._aggregation

    return SiloClient()


def run_silo(role: SiloRole, settings: SiloSettings) -> np.ndarray:
    """Connect to the server and take part in the federation until it finishes, reconnecting while it is away.

    Args:
        role: This silo's side of the method (its partition only).
        settings: Server address, key, TLS root certificate, how long to wait for the server.

    Returns:
        The final global model sent by the server.

    Raises:
        SiloRefused: if the server refused this silo (the reason is the message).
        FederationIncomplete: if no server answered for ``max_wait`` seconds, at the start or after the server
            ended the connection before the last round (the message says which, and the last round seen).
    """
    os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")
    import grpc
    from flwr.client import start_client

    from uldp.flower.report import (
        connection_failure,
    )  # with Flower, which it needs: imported on use as above

    quiet_flower_deprecation()
    client = _make_client(role, settings)
    since, delay, cause = time.monotonic(), 1.0, ""
    while True:
        handshakes = client.handshakes
        try:
            start_client(
                server_address=settings.server_address,
                client=client,
                insecure=settings.root_certificates is None,
                root_certificates=settings.root_certificates,
                max_wait_time=settings.max_wait,
            )
            cause = "the server ended the connection"
        except grpc.RpcError as error:  # unreachable, or gone: one line, not gRPC's traceback
            cause = connection_failure(error)  # issue 42: a TLS failure named as such
        if client.refused:
            raise SiloRefused(f"silo {role.silo_id} was refused by the server: {client.refused}")
        if client.final_params is not None:
            return client.final_params
        if (
            client.handshakes > handshakes
        ):  # it was admitted, then lost the server: wait for it afresh
            since, delay = time.monotonic(), 1.0
        waited = time.monotonic() - since
        last = (
            f"last round seen: {client.rounds_seen[-1]}"
            if client.rounds_seen
            else "no round seen yet"
        )
        if waited >= settings.max_wait:
            raise FederationIncomplete(
                f"silo {role.silo_id}: {_no_connection(cause)} {settings.server_address} for {waited:.0f} s "
                f"(--max-wait {settings.max_wait:g} s; {cause}; {last}); check the address, that the server runs, "
                f"and the server's log"
            )
        pause = min(delay, settings.max_wait - waited)
        LOGGER.warning(
            "silo %d: %s %s (%s; %s); retrying in %.1f s, %.0f s waited of --max-wait %g s",
            role.silo_id,
            _no_connection(cause),
            settings.server_address,
            cause,
            last,
            pause,
            waited,
            settings.max_wait,
        )
        time.sleep(pause)
        delay = min(2 * delay, MAX_BACKOFF)


def _no_connection(cause: str) -> str:
    """The words before the server's address: a TLS failure is not a missing server."""
    return "no TLS connection to" if cause.startswith("TLS failed") else "no server at"
