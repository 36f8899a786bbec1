"""The server process of a deployed federation: admits the silos, runs the rounds over Flower, checkpoints.

Transport: Flower's gRPC server (``flwr.server.start_server``, bidirectional streaming; see the chapter "Deploying
across silos" for why this and not the SuperLink/SuperNode runtime). Each silo holds one long-lived stream; the
server drives every stage as a ``FitIns`` to each silo in parallel and waits for all ``FitRes`` answers. What the
stages carry is in :mod:`uldp.deploy.wire`.

Lifecycle (:class:`Coordinator`):

1. Admission: every connecting silo answers a ``get_properties`` handshake with its silo id, the fingerprint of its
   run configuration, the wire version and, when the server has a master key, an HMAC of a fresh nonce under its
   own key. A silo with another configuration, an unknown or duplicate id or a bad tag is refused (it is told why
   and disconnected) and the server keeps waiting for the right one until ``join_timeout``.
2. Resume: the last good checkpoint of the same configuration, if any, gives the model and the next round.
3. Secure setup (ULDP-AVG-w with ``secure=True``): Protocol 1 steps 1(a)-(f), once per server start.
4. Rounds: the global model (and the round's sampled users) go out; each silo answers with its contribution, or
   with Protocol 1 shares and then its masked update. The server applies the update and evaluates the model.
   A silo that disconnects, times out or reports an error aborts the round (:class:`RoundAborted`): nothing of
   that round is applied and the checkpoint stays the last good one.
   After every completed round the checkpoint is replaced atomically.
"""

from __future__ import annotations

import logging
import os
import secrets
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from uldp.deploy import keys, quiet_flower_deprecation, wire
from uldp.deploy.checkpoint import Checkpoint, load_checkpoint, save_checkpoint
from uldp.deploy.roles import ServerRole

LOGGER = logging.getLogger("uldp.deploy")


class RoundAborted(RuntimeError):
    """A round could not complete (a silo died, timed out or failed); the last good checkpoint is kept."""


class AdmissionFailed(RuntimeError):
    """Not every silo joined (or some were refused) before the join timeout."""


@dataclass(frozen=True)
class ServerSettings:
    """How the server process runs (what is not part of the run configuration).

    Attributes:
        address: ``host:port`` to listen on (``0.0.0.0:8080`` to accept silos from other machines).
        checkpoint: File of the last good model (resumed from when it exists).
        join_timeout: Seconds to wait for every silo to join.
        round_timeout: Seconds a silo may take for one stage before the round is aborted.
        master_key: Server's master authentication key (silo keys are derived from it), or None for none.
        certificates: ``(CA certificate, server certificate, server private key)`` PEM bytes for TLS, or None.
    """

    address: str = "0.0.0.0:8080"
    checkpoint: Path | None = None
    join_timeout: float = 120.0
    round_timeout: float = 3600.0
    master_key: bytes | None = None
    certificates: tuple[bytes, bytes, bytes] | None = None


@dataclass
class FederationResult:
    """What a finished (or aborted) server run reports.

    Attributes:
        params: The last good global model.
        rounds_done: Completed rounds (including those of a resumed checkpoint).
        resumed_from: Rounds already done in the checkpoint the run started from.
        history: Per-round records (round, seconds, per-stage seconds, the role's metrics and epsilon). Stage
            ``silos`` is the wall time of the round's exchanges with the silos, ``silo_compute`` the part the
            slowest silo spent computing in each; the difference is transport (serialisation, gRPC, Flower).
        setup_seconds: Seconds spent on Protocol 1's setup (0 without the secure protocol).
        error: Why the run stopped early, or "".
        refused: One line per refused silo.
        insecure_reproducible_noise: True when the run used the INSECURE shared-seed noise (tests only; the server
            could remove every silo's noise, see :mod:`uldp.deploy.method_roles`).
    """

    params: np.ndarray
    rounds_done: int
    resumed_from: int
    history: list[dict] = field(default_factory=list)
    setup_seconds: float = 0.0
    error: str = ""
    refused: list[str] = field(default_factory=list)
    insecure_reproducible_noise: bool = False


class Coordinator:
    """Drives one federation over a Flower client manager (admission, secure setup, rounds, checkpoints).

    Args:
        role: The method's server side (model, sampling, update rule, protocol parameters).
        settings: Process settings.
        client_manager: Flower's client manager the gRPC server registers silos in.
    """

    def __init__(self, role: ServerRole, settings: ServerSettings, client_manager: Any) -> None:
        self.role = role
        self.settings = settings
        self.client_manager = client_manager
        self.silos: dict[int, Any] = {}  # silo id -> Flower client proxy
        self.refused: list[str] = []
        self._seen: set[str] = set()
        self._protocol: Any = None  # the Protocol 1 server role once set up

    # --- admission -------------------------------------------------------------------------------------------
    def admit(self) -> None:
        """Handshake with every connecting silo until all ``n_silos`` are admitted.

        Raises:
            AdmissionFailed: when ``join_timeout`` passes first (the message lists missing and refused silos).
        """
        deadline = time.monotonic() + self.settings.join_timeout
        while len(self.silos) < self.role.n_silos:
            new = [(cid, proxy) for cid, proxy in self.client_manager.all().items() if cid not in self._seen]
            for cid, proxy in new:
                self._seen.add(cid)
                self._handshake(proxy)
            if len(self.silos) == self.role.n_silos:
                break
            if time.monotonic() > deadline:
                missing = sorted(set(range(self.role.n_silos)) - set(self.silos))
                refused = "; ".join(self.refused) or "none"
                raise AdmissionFailed(
                    f"silo(s) {missing} did not join within {self.settings.join_timeout:.0f} s (refused: {refused})"
                )
            time.sleep(0.05)
        LOGGER.info("all %d silos admitted", self.role.n_silos)

    def _handshake(self, proxy: Any) -> None:
        from flwr.common import GetPropertiesIns

        nonce = secrets.token_bytes(32)
        request = {"stage": wire.STAGE_HELLO, "nonce": nonce, "wire_version": wire.WIRE_VERSION}
        try:
            answer = dict(proxy.get_properties(GetPropertiesIns(request), timeout=30.0, group_id=None).properties)
        except Exception as error:  # noqa: BLE001 - a silo that vanishes during the handshake is simply not admitted
            self.refused.append(f"a silo disconnected during the handshake ({type(error).__name__})")
            return
        reason = self._check_hello(answer, nonce)
        if reason:
            self.refused.append(reason)
            LOGGER.error("refused: %s", reason)
            self._send_quietly(proxy, wire.Instruction(wire.STAGE_REFUSE, values={"reason": reason}))
            self._disconnect(proxy)
            return
        silo_id = int(answer["silo_id"])
        self.silos[silo_id] = proxy
        LOGGER.info("admitted silo %d (%d/%d)", silo_id, len(self.silos), self.role.n_silos)

    def _check_hello(self, answer: dict, nonce: bytes) -> str:
        """The reason to refuse a silo's handshake answer, or "" to admit it."""
        silo_id = answer.get("silo_id")
        who = f"silo {silo_id}"
        if answer.get("wire_version") != wire.WIRE_VERSION:
            return f"{who} speaks wire version {answer.get('wire_version')}, the server {wire.WIRE_VERSION}"
        if not isinstance(silo_id, int) or not 0 <= silo_id < self.role.n_silos:
            return f"{who}: silo id must be in 0..{self.role.n_silos - 1}"
        if silo_id in self.silos:
            return f"{who} is already connected (duplicate silo id)"
        if answer.get("fingerprint") != self.role.fingerprint:
            return (
                f"{who} runs another configuration (fingerprint {str(answer.get('fingerprint'))[:12]}, the server's "
                f"{self.role.fingerprint[:12]}); give every party the same config file"
            )
        if self.settings.master_key is not None:
            expected = keys.authentication_tag(
                keys.silo_key(self.settings.master_key, silo_id), nonce=nonce, silo_id=silo_id,
                config_fingerprint=self.role.fingerprint,
            )
            tag = answer.get("tag", b"")
            if not isinstance(tag, bytes) or not secrets.compare_digest(tag, expected):
                return f"{who} failed authentication (wrong or missing key for silo {silo_id})"
        return ""

    # --- exchanges -------------------------------------------------------------------------------------------
    def _send_quietly(self, proxy: Any, instruction: wire.Instruction) -> None:
        try:
            proxy.fit(instruction.to_flower(), timeout=30.0, group_id=None)
        except Exception:  # noqa: BLE001 - best effort: the silo may already be gone
            pass

    def _disconnect(self, proxy: Any) -> None:
        from flwr.common import ReconnectIns

        try:
            proxy.reconnect(ReconnectIns(seconds=None), timeout=10.0, group_id=None)
        except Exception:  # noqa: BLE001 - best effort
            pass

    def exchange(self, instructions: dict[int, wire.Instruction], *, what: str) -> dict[int, wire.Reply]:
        """Send one instruction to each silo in parallel and collect every reply.

        Raises:
            RoundAborted: if any silo disconnects, exceeds ``round_timeout`` or reports an error.
        """

        def ask(silo_id: int) -> wire.Reply:
            proxy = self.silos[silo_id]
            try:
                res = proxy.fit(instructions[silo_id].to_flower(), timeout=self.settings.round_timeout, group_id=None)
            except Exception as error:  # noqa: BLE001 - Flower raises its own types for a closed stream
                detail = f"{type(error).__name__}: {error}".rstrip(": ")
                raise RoundAborted(
                    f"{what}: silo {silo_id} dropped out (connection closed, or no answer within "
                    f"{self.settings.round_timeout:.0f} s; {detail})"
                ) from error
            reply = wire.Reply.from_flower(res)
            if reply.error:
                raise RoundAborted(f"{what}: silo {silo_id} failed: {reply.error}")
            return reply

        with ThreadPoolExecutor(max_workers=len(instructions)) as pool:
            futures = {silo_id: pool.submit(ask, silo_id) for silo_id in sorted(instructions)}
            replies, errors = {}, []
            for silo_id, future in futures.items():
                try:
                    replies[silo_id] = future.result()
                except RoundAborted as error:
                    errors.append(str(error))
        if errors:
            raise RoundAborted("; ".join(errors))
        return replies

    def broadcast(self, instruction: wire.Instruction, *, what: str) -> dict[int, wire.Reply]:
        """:meth:`exchange` with the same instruction for every silo."""
        return self.exchange({silo_id: instruction for silo_id in self.silos}, what=what)

    # --- Protocol 1 and the rounds ----------------------------------------------------------------------------
    def secure_setup(self) -> None:
        """Protocol 1 steps 1(a)-(f) with the admitted silos: keys, pairwise keys, seed R, blinded histograms."""
        from uldp.secure import Server as ProtocolServer
        from uldp.secure.messages import BlindedHistogramMessage, DhPublicKeyMessage, SealedMessage

        self._protocol = ProtocolServer(self.role.protocol_config())
        public = self._protocol.public_key_message().to_bytes()
        replies = self.broadcast(wire.Instruction(wire.STAGE_SECURE_KEYS, payloads=(public,)), what="secure setup 1(a)")
        directory = self._protocol.relay_dh_keys([_parse_one(r, DhPublicKeyMessage) for r in replies.values()])
        replies = self.broadcast(
            wire.Instruction(wire.STAGE_SECURE_DIRECTORY, payloads=(directory.to_bytes(),)), what="secure setup 1(b)"
        )
        inbox = self._protocol.relay([m for r in replies.values() for m in _parse_all(r, SealedMessage)])
        replies = self.exchange(
            {s: wire.Instruction(wire.STAGE_SECURE_SEED, payloads=_to_bytes(inbox[s])) for s in self.silos},
            what="secure setup 1(c)-(e)",
        )
        self._protocol.receive_histograms([_parse_one(r, BlindedHistogramMessage) for r in replies.values()])

    def run_round(self, params: np.ndarray, round_index: int, timings: dict[str, float]) -> np.ndarray:
        """One round: the model (and sampled users) out, contributions or Protocol 1 messages in, the update applied.

        Raises:
            RoundAborted: if any silo fails; nothing of the round is applied.
        """
        from uldp.secure.messages import MaskedUpdateMessage, SealedMessage

        sampled = self.role.sampled_users(round_index)
        if self._protocol is not None:  # users without records (B(N_u) = 0) have no weight n_su / N_u: never sampled
            sampled = sampled & np.array([total != 0 for total in self._protocol.blinded_totals])
        payloads = (wire.array_to_bytes(params), wire.array_to_bytes(sampled))
        what = f"round {round_index}"
        start = time.perf_counter()
        if self._protocol is None:
            replies = self.broadcast(wire.Instruction(wire.STAGE_TRAIN, round_index, payloads=payloads), what=what)
            timings["silos"] = time.perf_counter() - start
            timings["silo_compute"] = _slowest(replies)
            contributions = [wire.array_from_bytes(replies[s].payloads[0]) for s in sorted(replies)]
            start = time.perf_counter()
            params = self.role.combine(params, contributions, round_index)
        else:
            weights = self._protocol.start_round(round_index, sampled).to_bytes()
            timings["encrypt_weights"] = time.perf_counter() - start
            start = time.perf_counter()
            replies = self.broadcast(
                wire.Instruction(wire.STAGE_TRAIN, round_index, payloads=payloads + (weights,)), what=what
            )
            compute = _slowest(replies)
            inbox = self._protocol.relay([m for r in replies.values() for m in _parse_all(r, SealedMessage)])
            replies = self.exchange(
                {s: wire.Instruction(wire.STAGE_SECURE_UPDATE, round_index, payloads=_to_bytes(inbox[s])) for s in self.silos},
                what=what,
            )
            timings["silos"] = time.perf_counter() - start
            timings["silo_compute"] = compute + _slowest(replies)
            start = time.perf_counter()
            try:
                aggregate = self._protocol.finish_round([_parse_one(r, MaskedUpdateMessage) for r in replies.values()])
            except ValueError as error:
                raise RoundAborted(f"{what}: {error}") from error
            params = self.role.apply_aggregate(params, aggregate, round_index)
        timings["server"] = time.perf_counter() - start
        return params

    # --- the run ---------------------------------------------------------------------------------------------
    def run(self) -> FederationResult:
        """Admit, resume, set up and run the remaining rounds; never raises for a silo's failure.

        Returns:
            The result; ``error`` says why it stopped early (the checkpoint then holds the last good model).
        """
        fingerprint = self.role.fingerprint
        checkpoint = (
            load_checkpoint(self.settings.checkpoint, config_fingerprint=fingerprint) if self.settings.checkpoint else None
        )
        params = checkpoint.params if checkpoint else self.role.initial_params()
        done = checkpoint.rounds_done if checkpoint else 0
        history = list(checkpoint.history) if checkpoint else []
        result = FederationResult(params=params, rounds_done=done, resumed_from=done, history=history,
                                  insecure_reproducible_noise=self.role.insecure_reproducible_noise)
        if checkpoint:
            LOGGER.info("resuming from checkpoint %s after round %d", self.settings.checkpoint, done)
        try:
            self.admit()
            if done < self.role.rounds and self.role.secure:
                start = time.perf_counter()
                self.secure_setup()
                result.setup_seconds = time.perf_counter() - start
            for round_index in range(done + 1, self.role.rounds + 1):
                start = time.perf_counter()
                stages: dict[str, float] = {}
                params = self.run_round(params, round_index, stages)
                tick = time.perf_counter()
                metrics = self.role.evaluate(params, round_index)
                stages["evaluate"] = time.perf_counter() - tick
                record = {"round": round_index, "seconds": time.perf_counter() - start, "stages": stages, **metrics}
                history.append(record)
                if self.settings.checkpoint:
                    save_checkpoint(
                        self.settings.checkpoint,
                        Checkpoint(rounds_done=round_index, params=params, config_fingerprint=fingerprint,
                                   history=tuple(history)),
                    )
                result.params, result.rounds_done = params, round_index
                LOGGER.info("round %d done in %.2f s", round_index, record["seconds"])
            self.broadcast(
                wire.Instruction(wire.STAGE_FINISH, self.role.rounds, payloads=(wire.array_to_bytes(params),)),
                what="finish",
            )
        except (RoundAborted, AdmissionFailed) as error:
            round_index = result.rounds_done + 1
            kind = "admission" if isinstance(error, AdmissionFailed) else f"round {round_index} aborted"
            result.error = f"{kind}: {error}"
            LOGGER.error("%s; the last good model (after round %d) is kept", result.error, result.rounds_done)
        finally:
            result.refused = list(self.refused)
            for proxy in list(self.silos.values()):
                self._disconnect(proxy)
        return result


def _slowest(replies: dict[int, wire.Reply]) -> float:
    """The longest computation any silo reported for one exchange (the rest of the exchange's time is transport)."""
    return max(float(reply.values.get("seconds", 0.0)) for reply in replies.values())


def _parse_one(reply: wire.Reply, kind: type) -> Any:
    """The single Protocol 1 message of type ``kind`` a reply carries (parsed from bytes, checked)."""
    if len(reply.payloads) != 1:
        raise RoundAborted(f"expected one {kind.__name__}, got {len(reply.payloads)} payloads")
    return _parse_all(reply, kind)[0]


def _parse_all(reply: wire.Reply, kind: type) -> list[Any]:
    try:
        return [kind.from_bytes(payload) for payload in reply.payloads]
    except ValueError as error:
        raise RoundAborted(f"malformed {kind.__name__}: {error}") from error


def _to_bytes(messages: list[Any]) -> tuple[bytes, ...]:
    return tuple(message.to_bytes() for message in messages)


def serve(role: ServerRole, settings: ServerSettings) -> FederationResult:
    """Start Flower's gRPC server, run the federation and shut down.

    Args:
        role: The method's server side.
        settings: Address, checkpoint, timeouts, key and TLS certificates.

    Returns:
        The :class:`FederationResult`.
    """
    os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")
    from flwr.server import Server, ServerConfig, start_server
    from flwr.server.client_manager import SimpleClientManager
    from flwr.server.history import History

    outcome: dict[str, FederationResult] = {}

    class _FlowerServer(Server):
        """Flower's server with its round loop replaced by the :class:`Coordinator`."""

        def fit(self, num_rounds: int, timeout: float | None) -> tuple[History, float]:
            start = time.perf_counter()
            outcome["result"] = Coordinator(role, settings, self.client_manager()).run()
            return History(), time.perf_counter() - start

        def disconnect_all_clients(self, timeout: float | None) -> None:
            """Already done by the coordinator."""

    quiet_flower_deprecation()
    start_server(
        server_address=settings.address,
        server=_FlowerServer(client_manager=SimpleClientManager()),
        config=ServerConfig(num_rounds=role.rounds, round_timeout=settings.round_timeout),
        certificates=settings.certificates,
    )
    return outcome["result"]
