"""A Flower federation that survives its faults: silos taken by identity, rounds accounted before they are asked,
the strategy's state checkpointed so that a resubmitted run resumes.

- Silos are known by their identity, not their node id: each SuperNode's ClientApp answers the ``hello`` stage with
  the name its operator gave it (``--node-config 'silo="..."'``) and its hello to the private set union (nonce,
  size). :func:`discover_silos` waits (up to ``join_timeout``, saying every :data:`LOG_EVERY` seconds who is missing)
  until every expected silo answered, whatever node ids they now have (and while a round waits for answers,
  :func:`send_and_receive` says as often which silos it waits for); nodes that do not answer (a SuperNode that
  died and was restarted under a new id leaves its old id behind for a while) are passed over. A run refuses to
  start short of its silos: the noise of ULDP-AVG is split over the silos that take part, so a 2-silo round is a
  2-silo federation's guarantee, and a run that declared 3 does not silently become one. With no SuperNode
  connected at all, the error says so.
- :func:`run_rounds` is the strategy's round loop. Every round index is accounted before it is asked
  (:class:`uldp.common.persist.ReleaseLedger`: in flight with the epsilon of that many releases, then completed or
  aborted), so a round that a silo failed, or that the ServerApp did not live to finish, counts as a release
  (Theorem 3 and Lemma 4, the sub-sampled Gaussian's RDP, by composition: a retried round, with fresh noise and a
  fresh user sample, is one more
  adaptive composition) and is never asked again. After an aborted round the strategy runs the set-up again (the
  silos taken back by name; a silo with another key fails the union, and another number of users is
  refused; the union draws fresh secrets, so the users' numbers differ from the last set-up's) and continues at
  the next index, at most ``max_aborted_rounds`` times.
- The checkpoint (``UldpStrategy(checkpoint=path)``, written atomically after every change) holds the model, the
  round index and every release's record (the accountant's history). A ServerApp started again with the same
  strategy settings and silos resumes from it at the next round index. Protocol 1's state is not kept: its keys
  and the silos' seed R live in the ServerApp's and the SuperNodes' memory, which a restart loses, so every start
  (and every recovery) runs Protocol 1's set-up afresh, with fresh keys.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from flwr.app import ArrayRecord, ConfigRecord, MetricRecord
from flwr.serverapp.strategy import Result

from uldp.common.checks import check_integer
from uldp.common.persist import ReleaseLedger, fingerprint
from uldp.flower.messages import SETUP_ACTION, records
from uldp.flower.report import RoundReport, fail_on_named_failure

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    import numpy as np

LOGGER = logging.getLogger("uldp.flower")
#: While waiting for silos (to connect, or to answer), say every this many seconds who is still missing.
LOG_EVERY = 10.0
#: Seconds before the first query for replies, and the most between two (each empty query doubles the wait).
FIRST_POLL, POLL = 0.02, 1.0


class SiloFault(RuntimeError):
    """A silo failed or did not answer: the round aborts (and stays accounted).

    Attributes:
        answered: The names of the silos whose answers had arrived.
    """

    def __init__(self, message: str, *, answered: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.answered = sorted(answered)


def discover_silos(
    ask_hello: Callable[[list[int]], dict[int, dict]],
    node_ids: Callable[[], list[int]],
    *,
    expected: Sequence[str] | None,
    join_timeout: float,
) -> dict[int, dict]:
    """Wait until every expected silo answers ``hello``, and map the node ids they have now to their answers.

    Args:
        ask_hello: Sends ``hello`` to the given nodes; returns the answers of those that answered without error.
        node_ids: The nodes connected now.
        expected: The silos' names; None takes the silos connected at the first answer (at least one).
        join_timeout: Seconds to wait for them (each ``hello`` may take its own timeout on top).

    Returns:
        node id -> its ``hello`` answer, for the expected silos only (a node answering another name is left out,
        and logged).

    Raises:
        RuntimeError: no SuperNode connected, expected silos missing after ``join_timeout`` (named, with those
            connected), or two nodes answering the same name.
    """
    start = time.monotonic()
    said = start
    while True:
        nodes = list(node_ids())
        answers = ask_hello(nodes)
        names = [answer["silo"] for answer in answers.values()]
        if len(set(names)) != len(names):
            raise RuntimeError(f"two SuperNodes claim the same silo name: {sorted(names)}")
        missing = (
            sorted(set(expected) - set(names))
            if expected is not None
            else ([] if names else ["any silo"])
        )
        waited = time.monotonic() - start
        if not missing:
            strangers = sorted(set(names) - set(expected or names))
            if strangers:
                LOGGER.warning(
                    "SuperNode(s) of silo(s) %s are not in this run's silos %s: left out",
                    strangers,
                    sorted(expected or ()),
                )
            return {
                node: answer for node, answer in answers.items() if answer["silo"] not in strangers
            }
        if waited >= join_timeout:
            if not nodes:
                raise RuntimeError(
                    f"no SuperNode is connected to the SuperLink (waited {waited:.0f} s, "
                    f"join_timeout {join_timeout:g} s); expected silos: {expected or 'any'}"
                )
            if not names:
                raise RuntimeError(
                    f"{len(nodes)} SuperNode(s) connected, none answered the hello stage (waited "
                    f"{waited:.0f} s, join_timeout {join_timeout:g} s; their ClientApps failed, see "
                    f"the SuperNodes' logs); expected silos: {expected or 'any'}"
                )
            raise RuntimeError(
                f"silo(s) {missing} did not join within join_timeout {join_timeout:g} s "
                f"(connected: {sorted(names)}); the run refuses to go on short of its silos"
            )
        if time.monotonic() - said >= LOG_EVERY:
            said = time.monotonic()
            LOGGER.warning(
                "waiting for silo(s) %s to connect: %.0f s of join_timeout %g s (connected: %s)",
                missing,
                waited,
                join_timeout,
                sorted(names),
            )
        time.sleep(min(1.0, max(0.0, join_timeout - waited)))


def _pushed(grid: Any, messages: list) -> list[str] | None:
    """The ids of ``messages`` pushed to the SuperLink, or None where the grid delivers at once and is asked
    directly (:class:`~uldp.flower.LocalGrid` has no ``push_messages``)."""
    try:
        return list(grid.push_messages(messages))
    except NotImplementedError:
        return None


def _collect_replies(
    grid: Any, messages: list, ids: list[str], *, timeout: float, names: dict[int, str], what: str
) -> tuple[list, dict[str, int], dict[str, int]]:
    """Pull the replies to ``messages`` (pushed as ``ids``) until all came or ``timeout`` passed, saying every
    :data:`LOG_EVERY` seconds which silos it still waits for. The first pull waits :data:`FIRST_POLL` seconds and
    each empty one doubles the wait, up to :data:`POLL`: Flower's own ``send_and_receive`` waits 3 s between pulls,
    which a set-up of about ten exchanges paid about ten times over.

    Returns:
        The replies, each message id's node, and the message ids without a reply (their nodes).
    """
    node_of = {
        message_id: message.metadata.dst_node_id
        for message_id, message in zip(ids, messages, strict=True)
    }
    awaited = dict(node_of)
    replies: list = []
    start = said = time.monotonic()
    wait = FIRST_POLL
    while awaited:
        pulled = list(grid.pull_messages(list(awaited)))
        for reply in pulled:
            awaited.pop(reply.metadata.reply_to_message_id, None)
            replies.append(reply)
        waited = time.monotonic() - start
        if not awaited or waited >= timeout:
            break
        if time.monotonic() - said >= LOG_EVERY:
            said = time.monotonic()
            LOGGER.warning(
                "%s: still waiting for silo(s) %s after %.0f s (timeout %g s)",
                what,
                sorted(names.get(node, str(node)) for node in awaited.values()),
                waited,
                timeout,
            )
        wait = FIRST_POLL if pulled else wait  # some replies came: the others may be near
        time.sleep(min(wait, max(0.0, timeout - waited)))
        wait = min(2 * wait, POLL)
    return replies, node_of, awaited


def send_and_receive(
    grid: Any, messages: list, *, timeout: float, names: dict[int, str], what: str
) -> list:
    """Flower's ``send_and_receive``, saying every :data:`LOG_EVERY` seconds which silos it still waits for, and
    pulling sooner (:func:`_collect_replies`).

    A grid that delivers at once (:class:`~uldp.flower.LocalGrid` has no ``push_messages``) is asked directly.

    Raises:
        SiloFault: some silos answered with an error (a SuperNode that missed its heartbeats is answered for by the
            SuperLink, under no node id of its own) or did not answer within ``timeout``; each named.
    """
    ids = _pushed(grid, messages)
    if ids is None:
        return list(grid.send_and_receive(messages, timeout=timeout))
    replies, node_of, awaited = _collect_replies(
        grid, messages, ids, timeout=timeout, names=names, what=what
    )

    def name(node: int) -> str:
        return names.get(node, f"node {node}")

    failed = [
        f"{name(node_of[r.metadata.reply_to_message_id])!r} failed: {r.error.reason}"
        for r in replies
        if r.has_error()
    ]
    if awaited:
        failed.append(
            f"{sorted(name(node) for node in awaited.values())} did not answer within timeout {timeout:g} s"
        )
    if failed:
        answered = [
            name(node_of[r.metadata.reply_to_message_id]) for r in replies if not r.has_error()
        ]
        raise SiloFault(f"{what}: silo {'; silo '.join(failed)}", answered=answered)
    return replies


def ask_silos(
    grid: Any,
    contents: dict[int, dict],
    *,
    timeout: float,
    names: dict[int, str],
    answered_only: bool = False,
) -> dict[int, Any]:
    """One set-up exchange (a ``query.uldp`` message to each node, :func:`uldp.flower.messages.records`): every
    node's reply; with ``answered_only`` (the ``hello``) those that answered without error, the others logged.

    Raises:
        RuntimeError: with ``answered_only``, a silo's own failure (:func:`uldp.flower.report.fail_on_named_failure`:
            a silo that joins and fails stops the run, issue 42).
        SiloFault: otherwise, a silo that failed (named).
        RuntimeError: otherwise, nodes that did not answer within ``timeout``.
    """
    messages = [
        grid.create_message(records(content), f"query.{SETUP_ACTION}", node, "setup")
        for node, content in contents.items()
    ]
    ids = _pushed(grid, messages)
    if ids is None:
        pulled = list(grid.send_and_receive(messages, timeout=timeout))
    else:
        pulled, _, _ = _collect_replies(
            grid, messages, ids, timeout=timeout, names=names, what="the set-up"
        )
    replies = {reply.metadata.src_node_id: reply for reply in pulled}
    if answered_only:
        fail_on_named_failure(replies.values())
        for node in sorted(set(contents) - {n for n, r in replies.items() if not r.has_error()}):
            reason = (
                replies[node].error.reason if node in replies else f"no answer within {timeout:g} s"
            )
            LOGGER.warning("node %d left out of the set-up: %s", node, reason)
        return {node: reply for node, reply in replies.items() if not reply.has_error()}
    for node, reply in replies.items():
        if reply.has_error():
            raise SiloFault(
                f"silo {names.get(node, '?')!r} (node {node}) failed: {reply.error.reason}"
            )
    if set(replies) != set(contents):
        raise RuntimeError(
            f"silo nodes {sorted(set(contents) - set(replies))} did not answer in {timeout} s"
        )
    return replies


def strategy_fingerprint(strategy: Any) -> str:
    """What a checkpoint must belong to: the method and its hyperparameters, Protocol 1's parameters, the silos'
    names and |U| (each set-up's private set union numbers the users afresh, so its digest is not kept)."""
    return fingerprint(
        {
            "method": strategy.method.spec.name,
            "hyperparameters": asdict(strategy.hp),
            "secure": strategy.secure,
            "protocol": asdict(strategy.protocol),
            "silos": sorted(strategy.silo_names.values()),
            "users": strategy.n_users,
        }
    )


def run_rounds(
    strategy: Any,
    grid: Any,
    initial: np.ndarray,
    *,
    num_rounds: int,
    timeout: float,
    train_config: ConfigRecord | None = None,
    evaluate_fn: Callable[[int, ArrayRecord], MetricRecord | None] | None = None,
) -> Result:
    """Set up, resume from the strategy's checkpoint and run rounds until ``num_rounds`` have completed.

    Args:
        strategy: The :class:`~uldp.flower.UldpStrategy` (its ``setup``, ``configure_train``, ``aggregate_train``,
            ``checkpoint``, ``max_aborted_rounds``).
        grid: Flower's grid.
        initial: The initial flat model (a fresh run's; a resumed run takes the checkpoint's).
        num_rounds: Completed rounds wanted (aborted rounds do not count towards it, but count as releases).
        timeout: Seconds each exchange may take.
        train_config: Passed to ``configure_train``.
        evaluate_fn: Centralized evaluation after each completed round (as Flower's ``Strategy.start``).

    Returns:
        Flower's ``Result``: the final model, each completed round's epsilon in ``train_metrics_clientapp``.

    Raises:
        RuntimeError: the set-up failed (missing silos, named), the federation changed since the checkpoint, or
            more than ``max_aborted_rounds`` rounds aborted (the checkpoint keeps every release: resubmit to
            resume).
        ValueError: the checkpoint belongs to another run or is corrupted.
    """
    check_integer(
        "num_rounds", num_rounds
    )  # issue 42: refused before the set-up, not a run of no round
    strategy.summary()
    strategy.setup(grid, timeout=timeout)
    ledger = ReleaseLedger(
        strategy.checkpoint, config_fingerprint=strategy_fingerprint(strategy), initial=initial
    )
    if ledger.history:
        LOGGER.info(
            "resuming from %s: %d round(s) completed, %d aborted; the next round is %d",
            strategy.checkpoint,
            ledger.completed,
            len(ledger.history) - ledger.completed,
            ledger.next_round,
        )
    strategy.epsilons = [record["epsilon"] for record in ledger.history]
    strategy.server_view_epsilons = [
        strategy.server_view_epsilon(releases) for releases in range(1, len(ledger.history) + 1)
    ]
    result = Result()
    result.arrays = ArrayRecord([ledger.params])
    report = strategy.report = RoundReport(num_rounds)
    report.estimate(strategy, int(initial.size))  # issue 42: the cost known before round 1
    aborted = 0
    while ledger.completed < num_rounds:
        round_index = ledger.begin(
            strategy.released_epsilon(ledger.next_round)
        )  # before anything goes out
        strategy.epsilons.append(ledger.history[-1]["epsilon"])
        strategy.server_view_epsilons.append(strategy.server_view_epsilon(round_index))
        start = time.perf_counter()
        try:
            messages = strategy.configure_train(
                round_index, result.arrays, train_config or ConfigRecord(), grid
            )
            replies = send_and_receive(
                grid,
                list(messages),
                timeout=timeout,
                names=strategy.silo_names,
                what=f"round {round_index}",
            )
            arrays, metrics = strategy.aggregate_train(round_index, replies)
        except SiloFault as error:
            ledger.abort(str(error), error.answered)
            aborted += 1
            LOGGER.error(
                "round %d aborted (%s); it counts as a release: epsilon %s",
                round_index,
                error,
                ledger.history[-1]["epsilon"],
            )
            if aborted > strategy.max_aborted_rounds:
                raise RuntimeError(
                    f"{aborted} rounds aborted (max_aborted_rounds {strategy.max_aborted_rounds}); "
                    f"the last: {error}. The checkpoint keeps every release: run again to resume at "
                    f"round {ledger.next_round}"
                ) from error
            strategy.setup(
                grid, timeout=timeout
            )  # the silos again, by name, under whatever node ids they have now
            if strategy_fingerprint(strategy) != ledger.config_fingerprint:
                raise RuntimeError(
                    "the federation changed while recovering (silos, keys or records); the run stops "
                    "rather than mix two federations"
                ) from error
            continue
        seconds = time.perf_counter() - start
        ledger.complete(arrays.to_numpy_ndarrays()[0], {"seconds": seconds})
        result.arrays = arrays
        result.train_metrics_clientapp[round_index] = metrics
        evaluation = None
        if evaluate_fn is not None and (evaluation := evaluate_fn(round_index, arrays)) is not None:
            result.evaluate_metrics_serverapp[round_index] = evaluation
        report.round(  # issue 42: one line per round (uldp.flower.report)
            round_index,
            epsilon=ledger.history[-1]["epsilon"],
            seconds=seconds,
            silos=list(strategy.silo_names.values()),
            evaluation=evaluation,
        )
    report.summary()
    return result
