"""The server process of a deployed federation: admits the silos, runs the rounds over Flower, checkpoints.

Transport: Flower's gRPC server (``flwr.server.start_server``, bidirectional streaming; see the chapter "Deploying
across silos" for why this and not the SuperLink/SuperNode runtime). Each silo holds one long-lived stream; the
server drives every stage as a ``FitIns`` to each silo in parallel and waits for all ``FitRes`` answers. What the
stages carry is in :mod:`uldp.deploy.wire`.

Lifecycle (:class:`Coordinator`):

1. Admission: every connecting silo answers a ``get_properties`` handshake with its silo id, the fingerprint of its
   run configuration, the wire version and, when the server has a master key, an HMAC of a fresh nonce under its
   own key. Handshakes run concurrently, each bounded by ``handshake_timeout`` (a connection that never answers
   blocks no one). A silo with another configuration, an unknown, duplicate or non-integer id or a bad tag is
   refused (it is told why and disconnected) and the server keeps waiting for the right one until ``join_timeout``.
2. Resume: the checkpoint of the same configuration, if any, gives the last good model, the epsilon history of
   every round index asked so far (completed or aborted) and the next round index.
3. Secure setup (secure aggregation, the default): Protocol 1 steps 1(a)-(f) for ULDP-AVG-w and ULDP-SGD-w, the
   masked sum's key agreement (:mod:`uldp.secure.masked_sum`) for the other methods; once per server start.
4. Rounds: the global model (and the round's sampled users) go out; each silo answers with its contribution
   (masked in a secure run: the server decodes only the sum), or with Protocol 1 shares and then its masked update.
   The server applies the update and evaluates the model.
   A silo that disconnects, times out, reports an error or sends anything malformed (a message claiming another
   silo, a value out of range, a contribution of another dtype or shape, or not finite) aborts the round
   (:class:`RoundAborted`, naming the silo and what it sent, or which timeout ran out or how long after the
   connection was lost): nothing of that round is applied and the server exits; the checkpoint keeps the last good
   model.

Accounting of releases (every release is one more adaptive composition of the method's mechanism, Theorems 1-3
and Lemma 4, the sub-sampled Gaussian's RDP, by the composition theorem of RDP): a round index counts as a release
from the moment
it is asked, whether or not the round completes (:class:`uldp.common.persist.ReleaseLedger`). Before the first
instruction of round t goes out, the checkpoint records round t as in flight with the epsilon of t releases; a
completed round then replaces that record (with the new model), an aborted one records why and which silos
answered. So after a silo crash, a network cut, a server crash or a checkpoint write that fails after every silo
answered, the checkpoint still counts round t, and a resumed server continues at round t + 1: a round index is
never asked twice, and a retried round (fresh noise, fresh user sample) is one more composition in the epsilon
history, never a free repeat. The run goes on until ``rounds`` rounds have completed, so each abort costs one
release more than an undisturbed run (logged with the epsilon it reaches); the silo's own policy bounds what it
answers.

Every wait is bounded: admission by ``join_timeout``, each handshake by ``handshake_timeout``, each stage by
``round_timeout``, refusals and disconnections by a few seconds. While a stage waits, the server logs every
``stall_log_seconds`` which silos it is still waiting for and for how long.
"""

from __future__ import annotations

import logging
import math
import os
import secrets
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor, wait
from contextlib import suppress
from typing import TYPE_CHECKING, Any

import numpy as np

from uldp.common.persist import CheckpointFailed, ReleaseLedger, array_to_bytes
from uldp.deploy import keys, quiet_flower_deprecation, wire
from uldp.deploy.settings import (
    AdmissionFailed,
    FederationResult,
    RoundAborted,
    ServerSettings,
)
from uldp.federation import PLAIN_UPDATE, SERVER_AGGREGATIONS, ServerAggregation
from uldp.secure import masked_sum
from uldp.secure.driver import (
    STAGE_CHECK,
    STAGE_DIRECTORY,
    STAGE_KEY,
    STAGE_SEED,
    STAGE_SHARES,
    STAGE_UPDATE,
)

if TYPE_CHECKING:
    from flwr.common import Scalar

    from uldp.deploy.roles import ServerRole

#: The aggregations' stages (:mod:`uldp.federation`) as the deployment's wire stages: a round's first stage is the
#: ``train`` instruction (with the model and the sampled users), Protocol 1's update stage its own.
WIRE_STAGES = {
    STAGE_KEY: wire.STAGE_SECURE_KEYS,
    STAGE_DIRECTORY: wire.STAGE_SECURE_DIRECTORY,
    STAGE_SEED: wire.STAGE_SECURE_SEED,
    STAGE_SHARES: wire.STAGE_TRAIN,
    STAGE_CHECK: wire.STAGE_SECURE_CHECK,
    STAGE_UPDATE: wire.STAGE_SECURE_UPDATE,
    masked_sum.STAGE_KEY: wire.STAGE_SUM_KEYS,
    masked_sum.STAGE_DIRECTORY: wire.STAGE_SUM_DIRECTORY,
    masked_sum.STAGE_SAMPLE: wire.STAGE_SUM_SAMPLE,
    masked_sum.STAGE_UPDATE: wire.STAGE_TRAIN,
    PLAIN_UPDATE: wire.STAGE_TRAIN,
}
# Flower is imported inside the functions that use it: serve() sets FLWR_TELEMETRY_ENABLED before Flower reads it.

LOGGER = logging.getLogger("uldp.deploy")


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
        self._lock = (
            threading.Lock()
        )  # guards silos and refused (handshakes run in their own threads)
        self._aggregation: ServerAggregation | None = None  # once set up
        self._round_payloads: tuple[
            bytes, ...
        ] = ()  # the model and sampled users of the round being run
        self._exchange_seconds: list[tuple[float, float]] = []  # per exchange: wall, slowest silo
        self.answered: set[int] = set()  # the silos that answered an exchange of the current round

    # --- admission -------------------------------------------------------------------------------------------
    def admit(self) -> None:
        """Handshake with every connecting silo, concurrently, until all ``n_silos`` are admitted.

        Raises:
            AdmissionFailed: when ``join_timeout`` passes first (the message lists missing and refused silos).
        """
        start = said = time.monotonic()
        deadline = start + self.settings.join_timeout
        while True:
            with self._lock:
                if len(self.silos) == self.role.n_silos:
                    break
                missing = sorted(set(range(self.role.n_silos)) - set(self.silos))
            if time.monotonic() - said >= self.settings.stall_log_seconds:
                said = time.monotonic()
                LOGGER.warning(
                    "waiting for silo(s) %s to join: %.0f s of --join-timeout %g s",
                    missing,
                    said - start,
                    self.settings.join_timeout,
                )
            new = [
                (cid, proxy)
                for cid, proxy in self.client_manager.all().items()
                if cid not in self._seen
            ]
            for cid, proxy in new:
                self._seen.add(cid)
                timeout = max(
                    0.1, min(self.settings.handshake_timeout, deadline - time.monotonic())
                )
                threading.Thread(
                    target=self._handshake,
                    args=(proxy, timeout),
                    daemon=True,
                    name=f"uldp-handshake-{cid}",
                ).start()
            if time.monotonic() > deadline:
                with self._lock:
                    refused = "; ".join(self.refused) or "none"
                raise AdmissionFailed(
                    f"silo(s) {missing} did not join within {self.settings.join_timeout:.0f} s (refused: {refused})"
                )
            time.sleep(0.05)
        LOGGER.info("all %d silos admitted", self.role.n_silos)

    def _handshake(self, proxy: Any, timeout: float) -> None:
        """One connection's handshake (in its own thread): admit it, or refuse it and say why."""
        from flwr.common import GetPropertiesIns

        nonce = secrets.token_bytes(32)
        request: dict[str, Scalar] = {
            "stage": wire.STAGE_HELLO,
            "nonce": nonce,
            "wire_version": wire.WIRE_VERSION,
        }
        try:
            answer = dict(
                proxy.get_properties(
                    GetPropertiesIns(request), timeout=timeout, group_id=None
                ).properties
            )
        except Exception as error:
            with self._lock:
                self.refused.append(
                    f"a connection did not answer the handshake within {timeout:.0f} s "
                    f"({type(error).__name__})"
                )
            self._disconnect(proxy)
            return
        try:
            reason = self._check_hello(answer, nonce)
        except Exception as error:
            reason = f"a connection sent a malformed handshake ({type(error).__name__}: {error})"
        with self._lock:
            if not reason and answer["silo_id"] in self.silos:
                reason = f"silo {answer['silo_id']} is already connected (duplicate silo id)"
            if reason:
                self.refused.append(reason)
            else:
                self.silos[answer["silo_id"]] = proxy
                LOGGER.info(
                    "admitted silo %d (%d/%d)",
                    answer["silo_id"],
                    len(self.silos),
                    self.role.n_silos,
                )
        if reason:
            LOGGER.error("refused: %s", reason)
            self._send_quietly(
                proxy, wire.Instruction(wire.STAGE_REFUSE, values={"reason": reason})
            )
            self._disconnect(proxy)

    def _check_hello(self, answer: dict, nonce: bytes) -> str:
        """The reason to refuse a silo's handshake answer, or "" to admit it."""
        silo_id = answer.get("silo_id")
        who = f"silo {silo_id!r:.40}"
        if answer.get("wire_version") != wire.WIRE_VERSION:
            return f"{who} speaks wire version {answer.get('wire_version')!r:.40}, the server {wire.WIRE_VERSION}"
        if (
            isinstance(silo_id, bool)
            or not isinstance(silo_id, int)
            or not 0 <= silo_id < self.role.n_silos
        ):
            return f"{who}: silo id must be an integer in 0..{self.role.n_silos - 1}"
        if answer.get("fingerprint") != self.role.fingerprint:
            return (
                f"{who} runs another configuration (fingerprint {str(answer.get('fingerprint'))[:12]}, the server's "
                f"{self.role.fingerprint[:12]}); give every party the same config file"
            )
        if self.settings.master_key is not None:
            expected = keys.authentication_tag(
                keys.silo_key(self.settings.master_key, silo_id),
                nonce=nonce,
                silo_id=silo_id,
                config_fingerprint=self.role.fingerprint,
            )
            tag = answer.get("tag", b"")
            if not isinstance(tag, bytes) or not secrets.compare_digest(tag, expected):
                return f"{who} failed authentication (wrong or missing key for silo {silo_id})"
        return ""

    # --- exchanges -------------------------------------------------------------------------------------------
    def _send_quietly(self, proxy: Any, instruction: wire.Instruction) -> None:
        with suppress(Exception):
            proxy.fit(instruction.to_flower(), timeout=30.0, group_id=None)

    def _disconnect(self, proxy: Any) -> None:
        from flwr.common import ReconnectIns

        with suppress(Exception):
            proxy.reconnect(ReconnectIns(seconds=None), timeout=10.0, group_id=None)

    def exchange(
        self, instructions: dict[int, wire.Instruction], *, what: str
    ) -> dict[int, wire.Reply]:
        """Send one instruction to each silo in parallel and collect every reply.

        Raises:
            RoundAborted: if any silo disconnects, exceeds ``round_timeout`` or reports an error.
        """

        timeout = self.settings.round_timeout

        def ask(silo_id: int) -> wire.Reply:
            proxy = self.silos[silo_id]
            start = time.monotonic()
            try:
                res = proxy.fit(instructions[silo_id].to_flower(), timeout=timeout, group_id=None)
                reply = wire.Reply.from_flower(res)
            except Exception as error:
                waited = time.monotonic() - start
                detail = f"{type(error).__name__}: {error}".rstrip(": ")
                cause = (
                    f"no answer within --round-timeout {timeout:g} s"
                    if waited >= 0.99 * timeout
                    else f"connection lost after {waited:.1f} s"
                )
                raise RoundAborted(
                    f"{what}: silo {silo_id} dropped out ({cause}; {detail})"
                ) from error
            if reply.error:  # the silo released nothing
                raise RoundAborted(f"{what}: silo {silo_id} failed: {reply.error[:500]}")
            with self._lock:
                self.answered.add(silo_id)
            seconds = reply.values.get("seconds", 0.0)
            if (
                isinstance(seconds, bool)
                or not isinstance(seconds, (int, float))
                or not 0 <= seconds < math.inf
            ):
                raise RoundAborted(
                    f"{what}: silo {silo_id} sent seconds={seconds!r:.40}, not a finite number >= 0"
                )
            return reply

        with ThreadPoolExecutor(max_workers=len(instructions)) as pool:
            futures = {silo_id: pool.submit(ask, silo_id) for silo_id in sorted(instructions)}
            self._wait_logging_stalls(futures, what)
            replies, errors = {}, []
            for silo_id, future in futures.items():
                try:
                    replies[silo_id] = future.result()
                except RoundAborted as error:
                    errors.append(str(error))
        if errors:
            raise RoundAborted("; ".join(errors))
        return replies

    def _wait_logging_stalls(self, futures: dict[int, Future], what: str) -> None:
        """Wait for every answer; every ``stall_log_seconds`` log the silos still awaited and for how long."""
        start = time.monotonic()
        pending = set(futures.values())
        while pending:
            _, pending = wait(pending, timeout=self.settings.stall_log_seconds)
            if pending:
                waiting = sorted(
                    silo_id for silo_id, future in futures.items() if future in pending
                )
                LOGGER.warning(
                    "%s: still waiting for silo(s) %s after %.0f s (--round-timeout %g s)",
                    what,
                    waiting,
                    time.monotonic() - start,
                    self.settings.round_timeout,
                )

    def broadcast(self, instruction: wire.Instruction, *, what: str) -> dict[int, wire.Reply]:
        """:meth:`exchange` with the same instruction for every silo."""
        return self.exchange(dict.fromkeys(self.silos, instruction), what=what)

    # --- the aggregation and the rounds -----------------------------------------------------------------------
    def _stage_exchange(
        self, stage: str, round_index: int, payloads: dict[int, tuple[bytes, ...]]
    ) -> dict[int, tuple[bytes, ...]]:
        """One stage of the run's aggregation (:mod:`uldp.federation`) as wire instructions (:data:`WIRE_STAGES`);
        a round's first stage is its ``train`` instruction, with the model and the sampled users first."""
        stage_name = WIRE_STAGES[stage]
        first = self._round_payloads if stage_name == wire.STAGE_TRAIN else ()
        what = f"round {round_index}" if round_index else f"secure setup {stage}"
        start = time.perf_counter()
        replies = self.exchange(
            {
                s: wire.Instruction(stage_name, round_index, payloads=(*first, *p))
                for s, p in payloads.items()
            },
            what=what,
        )
        self._exchange_seconds.append((time.perf_counter() - start, _slowest(replies)))
        return {s: reply.payloads for s, reply in replies.items()}

    def aggregation_setup(self) -> ServerAggregation:
        """The aggregation's set-up with the admitted silos: Protocol 1's steps 1(a)-(f)
        (:class:`~uldp.secure.driver.ServerDriver`: keys, pairwise keys, seed R, blinded histograms), the masked sum's
        keys and directory, or nothing for a plain run.

        Returns:
            The set-up aggregation.

        Raises:
            RoundAborted: if a silo fails or sends anything malformed (named in the message).
        """
        aggregation = SERVER_AGGREGATIONS[self.role.aggregation]
        protocol = self.role.protocol_config() if aggregation.needs_protocol else None
        self._aggregation = aggregation(
            self.role.n_silos,
            self._stage_exchange,
            protocol=protocol,
            hidden_sample=self.role.hidden_sample,
        )
        try:
            self._aggregation.setup()
        except (
            ValueError
        ) as error:  # ProtocolAbort names the silo; a non-invertible sum blames no silo
            raise RoundAborted(str(error)) from error
        return self._aggregation

    def run_round(
        self, params: np.ndarray, round_index: int, timings: dict[str, float]
    ) -> np.ndarray:
        """One round: the model and sampled users out with the aggregation's payloads, the silos' answers in, their
        decoded sum checked against the silos' bounds and the update applied.

        Raises:
            RoundAborted: if any silo fails or sends anything malformed, or the new model is not finite; nothing of
                the round is applied.
        """
        sampled = self.role.sampled_users(round_index)
        what = f"round {round_index}"
        start = time.perf_counter()
        aggregation = self._aggregation or self.aggregation_setup()
        self._round_payloads = (array_to_bytes(params), array_to_bytes(sampled))
        self._exchange_seconds = []
        try:  # users without records (B(N_u) = 0) are never sampled by Protocol 1
            outgoing = aggregation.begin_round(round_index, sampled)
            answers = self._stage_exchange(aggregation.round_stages[-1], round_index, outgoing)
            aggregate = aggregation.finish_round(
                round_index,
                answers,
                params,
                bounds=self.role.contribution_bound(sampled, params.size),
            )
        except ValueError as error:
            raise RoundAborted(f"{what}: {error}") from error
        finally:
            self._round_payloads = ()
        timings["silos"] = sum(seconds for seconds, _ in self._exchange_seconds)
        timings["silo_compute"] = sum(compute for _, compute in self._exchange_seconds)
        timings["server"] = time.perf_counter() - start - timings["silos"]
        start = time.perf_counter()
        new = self.role.apply_aggregate(params, aggregate, round_index)
        return self._checked(new, params, what, timings, start)

    @staticmethod
    def _checked(
        new: np.ndarray, params: np.ndarray, what: str, timings: dict[str, float], start: float
    ) -> np.ndarray:
        """The new model if it is a finite array like ``params`` (the server step's time added to ``timings``).

        Raises:
            RoundAborted: otherwise; it is not applied.
        """
        if new.dtype != params.dtype or new.shape != params.shape or not np.isfinite(new).all():
            raise RoundAborted(
                f"{what}: the updated model is not a finite {params.dtype} {params.shape} array; "
                f"it is not applied"
            )
        timings["server"] = timings.get("server", 0.0) + time.perf_counter() - start
        return new

    # --- the run ---------------------------------------------------------------------------------------------
    def run(self) -> FederationResult:
        """Admit, resume, set up and run rounds until ``rounds`` have completed; never raises for a silo's failure.

        Every round index asked is accounted before it is asked (:class:`uldp.common.persist.ReleaseLedger`; the module
        docstring's "Accounting of releases").

        Returns:
            The result; ``error`` says why it stopped early (the checkpoint then holds the last good model and
            every round index asked, so a restarted server continues at the next one).

        Raises:
            ValueError: the checkpoint belongs to another run or is corrupted or malformed.
        """
        ledger = ReleaseLedger(
            self.settings.checkpoint,
            config_fingerprint=self.role.fingerprint,
            initial=self.role.initial_params(),
        )
        result = FederationResult(
            params=ledger.params,
            rounds_done=ledger.completed,
            resumed_from=ledger.resumed_from,
            history=ledger.history,
            insecure_reproducible_noise=self.role.insecure_reproducible_noise,
        )
        if ledger.completed > self.role.rounds:
            raise ValueError(
                f"checkpoint {self.settings.checkpoint} has {ledger.completed} rounds done, the run "
                f"only {self.role.rounds}"
            )
        if ledger.history:
            LOGGER.info(
                "resuming from checkpoint %s: %d round(s) completed, %d aborted; the next round is %d",
                self.settings.checkpoint,
                ledger.completed,
                len(ledger.history) - ledger.completed,
                ledger.next_round,
            )
        try:
            self.admit()
            if ledger.completed < self.role.rounds:
                start = time.perf_counter()
                self.aggregation_setup()
                result.setup_seconds = time.perf_counter() - start
            while ledger.completed < self.role.rounds:
                round_index = ledger.begin(
                    self.role.epsilon(ledger.next_round)
                )  # before anything goes out
                start = time.perf_counter()
                stages: dict[str, float] = {}
                self.answered = set()
                try:
                    params = self.run_round(ledger.params, round_index, stages)
                except RoundAborted as error:
                    ledger.abort(str(error), sorted(self.answered))
                    raise
                tick = time.perf_counter()
                metrics = self.role.evaluate(params, round_index)
                stages["evaluate"] = time.perf_counter() - tick
                seconds = time.perf_counter() - start
                result.params, result.rounds_done = params, ledger.completed + 1
                ledger.complete(params, {"seconds": seconds, "stages": stages, **metrics})
                if round_index > self.role.rounds:
                    LOGGER.warning(
                        "round %d done: %d releases for %d completed rounds after aborts; epsilon %s",
                        round_index,
                        round_index,
                        ledger.completed,
                        metrics.get("epsilon"),
                    )
                LOGGER.info("round %d done in %.2f s", round_index, seconds)
            self.broadcast(
                wire.Instruction(
                    wire.STAGE_FINISH,
                    len(ledger.history),
                    payloads=(array_to_bytes(ledger.params),),
                ),
                what="finish",
            )
        except Exception as error:
            kind = (
                "admission"
                if isinstance(error, AdmissionFailed)
                else f"round {len(ledger.history)} aborted"
                if ledger.in_round
                else f"after round {len(ledger.history)}"
            )
            detail = str(error)
            if not isinstance(error, (RoundAborted, AdmissionFailed, CheckpointFailed)):
                LOGGER.debug("unexpected failure", exc_info=True)
                detail = f"{type(error).__name__}: {error}"
            result.error = f"{kind}: {detail}"
            LOGGER.error(
                "%s; %d round index(es) are accounted, a restart continues at round %d from the last "
                "model the checkpoint holds",
                result.error,
                len(ledger.history),
                ledger.next_round,
            )
        finally:
            with self._lock:
                result.refused = list(self.refused)
                admitted = list(self.silos.values())
            for proxy in admitted:
                self._disconnect(proxy)
        return result


def _slowest(replies: dict[int, wire.Reply]) -> float:
    """The longest computation any silo reported for one exchange (the rest of the exchange's time is transport)."""
    return max(float(reply.values.get("seconds", 0.0)) for reply in replies.values())


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
