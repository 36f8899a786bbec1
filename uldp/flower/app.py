"""ULDP-AVG and ULDP-AVG-w on Flower's Message API: a server-side :class:`UldpStrategy` and :func:`silo_client_app`.

Stages (all messages of type ``query.uldp`` except the rounds, ``train``):

1. ``hello`` (server -> every SuperNode): each silo loads *its own* records and patient ids from its own files
   (``load(context)``), starts a private set union of the ids (:mod:`uldp.flower.psu`, fresh secrets) and answers
   with its name, its record count and its union hello (a nonce, its number of patients).
   Then ``psu-start`` and |S| ``psu-relay`` exchanges: the server relays the silos' sealed, blinded lists.
2. ``federation`` (server -> every silo): silos are numbered in sorted order of their names; silo ``s``'s records
   get the ids ``offset_s + i`` (offsets: the record counts of the silos before it); the server relays every sealed
   share of the union. Each silo takes the union (|U| users, numbered in sorted order of their blinded values),
   keeps ``n[s, u]`` and its own patients' numbers in its context state (node-local) and answers |U| and a digest
   of the union; the server checks that all silos agree.
3. Rounds ``t = 1..T`` (``train``): the server samples users (Poisson, rate ``q``, Algorithm 4 line 4) and sends
   the model and the sampled users; each silo answers ``sum_u w_su clip(Delta_su) + z_s`` (Algorithm 3 lines 8-19)
   with its noise ``z_s`` and record order drawn from its own CSPRNG-seeded stream; the server sums the answers
   and steps ``x + eta_g / (q |U| |S|) * sum`` (Algorithm 3 line 6). The epsilon of Theorem 3 (sub-sampled,
   Lemma 4) after each round is in the strategy's result.

Faults (:mod:`uldp.flower.recovery`): silos are known by their names, not their node ids; the run waits for the
silos it declares (``silos=``) and refuses to run short of them; every round index is accounted as a release before
it is asked, and never asked again; after a failed round the strategy takes its silos back by name and goes on at
the next index; with ``checkpoint=`` a run started again resumes there.

So the run equals :func:`uldp.fit` on the concatenation of the silos' records (silos in sorted name order) with
the union's user numbers as user ids (:func:`user_numbers`) and the strategy's seed -- exactly when every silo's
own node config sets ``uldp-insecure-reproducible-noise`` to that seed (tests and the book only: whoever knows the
seed can subtract the noise; the server never sends a seed, and a silo ignores anything it sends about its
randomness).

Each silo enforces its own privacy policy (:mod:`uldp.policy`, from its node config): it refuses a request past it
(sigma, local epochs, records, the user sample), answers each round index once, and keeps the user-level epsilon of
everything it released, as the server sees it, within its target.

Secure aggregation is the default (``secure=True``; :mod:`uldp.flower.secure`), so the server sees only the sum of
the silos' updates. ULDP-AVG-w's enhanced weights go through Protocol 1: stage 1 shares carry no counts, stage 2
keeps only the silo's own ``n_su``, Protocol 1's set-up runs as three more ``query.uldp`` exchanges, and each round
adds one (``p1-shares``) before ``train``, whose answers are masked updates; the server decodes their sum, within P of
the plain one (Theorem 4). ULDP-AVG's updates go through Protocol 1's pairwise masks alone
(:mod:`uldp.secure.masked_sum`: two more set-up exchanges, and each ``train`` answer is masked), decoded within
``|S| 2^-37`` of the plain sum.
"""

from __future__ import annotations

import json
import logging
import secrets
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from flwr.app import ArrayRecord, ConfigRecord, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp.strategy import Result, Strategy
from torch import nn

from uldp.accounting import epsilon_server_view
from uldp.common.atomic import check_writable
from uldp.common.checks import check_integer, check_number
from uldp.data.base import Allocation
from uldp.fitting import resolve_hyperparameters, resolve_records, round_seed
from uldp.flower import psu
from uldp.flower.arrays import flat_model, trained_model
from uldp.flower.pseudonyms import read_key_file
from uldp.flower.recovery import SiloFault, discover_silos, run_rounds
from uldp.flower.report import (
    RoundReport,
    fail_on_named_failure,
    say,
    silo_data_repr,
    stage,
    strategy_repr,
)
from uldp.flower.secure import (
    masked_sum_server,
    round_settings,
    server_driver,
    silo_masked_sum,
    silo_masked_update,
    silo_setup,
)
from uldp.flower.silo_views import SiloViews
from uldp.methods import Federation, Hyperparameters, make_method, parse_method, user_level
from uldp.methods.base import needed
from uldp.policy import SiloLedger, SiloPolicy, release_multiplier, update_norm_bound
from uldp.secure.config import ProtocolConfig, ProtocolParameters
from uldp.secure.psu import lookup

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
    from pathlib import Path

    from flwr.serverapp import Grid

#: The message type of the setup stages (a ``ClientApp`` query action).
SETUP_ACTION = "uldp"
#: The node_config keys a SuperNode sets: ``--node-config 'silo="Hospital A" uldp-key-file="/secure/key"'``.
SILO_KEY, KEY_FILE_KEY = "silo", "uldp-key-file"
#: The node_config key of the silo's ledger file (:class:`uldp.policy.SiloLedger`; without it, the SuperNode's memory).
LEDGER_KEY = "uldp-ledger"
#: INSECURE, tests and the book only: the node_config key whose value seeds this silo's noise and record order, so
#: that the run equals :func:`uldp.fit` with that seed (whoever knows it can remove the noise). Only the silo's own
#: configuration sets it; whatever the server sends is ignored.
INSECURE_NOISE_KEY = "uldp-insecure-reproducible-noise"
SUPPORTED = ("ULDP-AVG", "ULDP-AVG-w")
LOGGER = logging.getLogger("uldp.flower")
_LEDGER_STATE = "uldp_ledger"


@dataclass(frozen=True)
class SiloData:
    """One silo's own records, as its ``load(context)`` returns them.

    Attributes:
        x: Records ``[n, ...]`` (tensor, array or DataFrame).
        y: Targets ``[n, ...]``.
        patient_ids: The raw patient id of each record (blinded inside the silo for the union, never sent).
    """

    x: Any
    y: Any
    patient_ids: Any

    __repr__ = silo_data_repr  # issue 42: counts, never a patient id


def _records(values: dict) -> Any:
    return RecordDict({"uldp": ConfigRecord(values)})


def _config(message: Any) -> dict:
    return dict(message.content["uldp"])


def _round_seed(seed: int, server_round: int) -> np.random.SeedSequence:
    return round_seed(np.random.SeedSequence(seed), server_round - 1)


def _check_reply(reply: Any, names: dict[int, str]) -> None:
    if reply.has_error():
        node = reply.metadata.src_node_id
        raise SiloFault(f"silo {names.get(node, '?')!r} (node {node}) failed: {reply.error.reason}")


class SiloFailure(RuntimeError):
    """A silo's ClientApp failed; the message starts with the silo's own name (its node config's ``silo``)."""


@contextmanager
def _naming(context: Any) -> Iterator[None]:
    """Re-raise anything a silo's handler raises with the silo's own name, so the server's error names it."""
    try:
        yield
    except Exception as error:
        name = context.node_config.get(SILO_KEY, "<no silo name in the node config>")
        raise SiloFailure(f"silo {name!r} failed: {type(error).__name__}: {error}") from error


class UldpStrategy(Strategy):
    """The server side of ULDP-AVG / ULDP-AVG-w (Algorithms 3-4) as a Flower ``Strategy``.

    Args:
        method: ``"ULDP-AVG-w"`` (enhanced weights, Eq. (3)) or ``"ULDP-AVG"`` (uniform weights).
        sigma: Noise multiplier (``uldp.accounting.sigma_for_epsilon`` turns a target epsilon into one).
        q: User-level Poisson sampling rate (Algorithm 4).
        delta: Target delta of the reported epsilon.
        global_lr, local_lr, clip, local_epochs, batch_size: As in :func:`uldp.fit` (the same defaults).
        model: The architecture (optional): with it, :meth:`start` takes the initial model as a ``state_dict`` too
            and checks its size before any message, and :meth:`trained_model` loads the result into a copy.
        seed: The seed of the server's user sampling (``None``: from the OS CSPRNG). It never reaches the silos:
            their noise comes from their own CSPRNG (or, tests only, from their own node config's
            ``uldp-insecure-reproducible-noise``).
        secure: Secure aggregation, the default (None or True): Protocol 1 for ULDP-AVG-w, Protocol 1's pairwise
            masks alone for ULDP-AVG (:mod:`uldp.flower.secure`); the server never holds one silo's update.
            ``secure=False`` is the explicit option to run without it: each silo's update is then seen with noise
            ``sigma C / sqrt(|S|)``; under ULDP-AVG-w against a weight up to 1 (and the silos share their exact
            ``n_su`` with each other), so ``server_view_epsilons`` reports the larger epsilon that view spends, and
            each silo's policy accounts for it; under ULDP-AVG (uniform weights ``1 / |S|``, no counts) the silos'
            views together spend what the released model spends.
        protocol: Protocol 1's :class:`~uldp.secure.ProtocolParameters` (or a mapping of its fields; the paper's
            3072-bit key and N_max = 2000 by default).
        silos: The names of the silos the run expects (their SuperNodes' ``silo`` node config); the run waits
            ``join_timeout`` for them and refuses to run short of them. None takes the silos connected at the
            start (and, after a fault, the same ones again). See :mod:`uldp.flower.recovery`.
        checkpoint: File of the strategy's state (model, round index, every release's record), written atomically
            before and after each round; a run started again with it resumes at the next round index.
        join_timeout: Seconds to wait for the silos at the start and after a fault.
        max_aborted_rounds: Aborted rounds (each accounted as a release) after which the run stops instead of
            taking its silos back and going on.

    Attributes:
        epsilons: The user-level epsilon of the released model after each release (Theorem 3): one per round index
            asked, completed or aborted, a resumed run's earlier ones included.
        server_view_epsilons: The user-level epsilon of what the server sees after each release: ``epsilons`` with
            secure aggregation or uniform weights, :func:`uldp.accounting.epsilon_server_view` otherwise.
        insecure_reproducible_noise: Whether any silo reported drawing its noise from its INSECURE test seed.
        round_seconds: Each round's seconds, from sending the model to the new model (Protocol 1's share
            exchange included).
        setup_seconds: The set-up's seconds (stages 1-2 and, with ``secure``, Protocol 1's set-up).

    Raises:
        ValueError: Another method, bad hyperparameters or protocol parameters, a ``secure`` not a bool, silo names
            that are not distinct non-empty strings, a checkpoint path that cannot be written, or a bad timeout.
    """

    def __init__(
        self,
        *,
        method: str = "ULDP-AVG-w",
        sigma: float,
        q: float = 1.0,
        delta: float = 1e-5,
        global_lr: float | None = None,
        local_lr: float | None = None,
        clip: float | None = None,
        local_epochs: int | None = None,
        batch_size: int | None = None,
        seed: int | None = None,
        secure: bool | None = None,
        protocol: ProtocolParameters | dict | None = None,
        silos: Sequence[str] | None = None,
        checkpoint: str | Path | None = None,
        join_timeout: float = 120.0,
        max_aborted_rounds: int = 3,
        model: nn.Module | None = None,
    ) -> None:
        spec = parse_method(method)
        if spec.name not in SUPPORTED:
            raise ValueError(f"UldpStrategy runs {' or '.join(SUPPORTED)}, not {spec.name}")
        self._spec_name = spec.name
        self.model = model
        self._chosen: dict[str, Any] = {
            "global_lr": global_lr,
            "local_lr": local_lr,
            "clip": clip,
            "local_epochs": local_epochs,
            "batch_size": batch_size,
            "sigma": sigma,
            "delta": delta,
            "q": q,
        }
        self._resolve(
            1
        )  # checks every value now; the method's per-silo defaults are set once |S| is known
        self.seed = secrets.randbits(63) if seed is None else check_integer("seed", seed, minimum=0)
        self.insecure_reproducible_noise = False
        if secure is None:
            secure = True
        if not isinstance(secure, bool):
            raise ValueError(
                f"secure must be True, False or None (the default: secure), got {secure!r}"
            )
        self.secure = secure
        self.protocol = ProtocolParameters.from_mapping(protocol or {})
        self._protocol: Any = (
            None  # Protocol 1's ServerDriver or the MaskedSumServer of a secure run, after set-up
        )
        self.setup_seconds = 0.0
        self.nodes: list[int] = []
        self.n_users = 0
        self.epsilons: list[float] = []
        self.server_view_epsilons: list[float] = []
        self.round_seconds: list[float] = []
        self.report: RoundReport | None = None  # the last run's rounds (uldp.flower.report)
        if silos is not None and (
            isinstance(silos, str)
            or len(set(silos)) != len(silos)
            or not all(isinstance(name, str) and name for name in silos)
        ):
            raise ValueError(f"silos must be distinct non-empty names, got {silos!r}")
        self.silos = None if silos is None else tuple(silos)
        self.checkpoint = None if checkpoint is None else check_writable(checkpoint, "checkpoint")
        self.join_timeout = check_number("join_timeout", join_timeout, above=0)
        self.max_aborted_rounds = check_integer("max_aborted_rounds", max_aborted_rounds, minimum=0)
        self.silo_names: dict[int, str] = {}  # node id -> silo name, as of the last set-up
        self.users_digest = ""

    __repr__ = strategy_repr  # issue 42: its settings, not object at 0x...

    def _resolve(self, n_silos: int) -> None:
        """The hyperparameters (given, or the method's defaults for ``n_silos`` silos, as :func:`uldp.fit`)."""
        self.hp = resolve_hyperparameters(self._spec_name, n_silos, **self._chosen)
        self.method = user_level(make_method(self._spec_name, self.hp))

    @property
    def _protocol_1(self) -> bool:
        """Whether the rounds run Protocol 1 (secure ULDP-AVG-w); secure ULDP-AVG runs the masked sum instead."""
        return self.secure and self.method.spec.enhanced_weights

    @property
    def _shares_counts(self) -> bool:
        """Whether the silos share their exact n_su with each other: only plain ULDP-AVG-w needs them."""
        return not self.secure and self.method.spec.enhanced_weights

    # ---------------------------------------------------------------------------------------------- setup --
    def setup(self, grid: Any, *, timeout: float = 600.0) -> None:
        """Stages 1-2: learn the silos, relay the sealed histograms, agree on |U| (see the module docstring).

        Raises:
            RuntimeError: A silo failed, two silos share a name, the silos disagree on the users, or the expected
                silos (``silos``, or after a fault those of the first set-up) did not all answer within
                ``join_timeout`` (:func:`uldp.flower.recovery.discover_silos`).
        """
        start = time.perf_counter()
        share_counts = self._shares_counts

        def hello(nodes: list[int]) -> dict[int, dict]:
            contents = {node: {"stage": "hello"} for node in nodes}
            return {
                node: _config(reply)
                for node, reply in self._ask(grid, contents, timeout, answered_only=True).items()
            }

        expected = (
            self.silos
            if self.silos is not None or not self.silo_names
            else list(self.silo_names.values())
        )
        silos = discover_silos(
            hello, grid.get_node_ids, expected=expected, join_timeout=self.join_timeout
        )
        self.silo_names = {node: str(answer["silo"]) for node, answer in silos.items()}
        self.nodes = sorted(silos, key=lambda node: silos[node]["silo"])
        self._resolve(len(self.nodes))
        counts = [int(silos[node]["records"]) for node in self.nodes]
        offsets = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(int)
        names = [silos[n]["silo"] for n in self.nodes]

        def ask_silos(contents: dict[int, dict]) -> dict[int, dict]:
            replies = self._ask(
                grid, {self.nodes[s]: content for s, content in contents.items()}, timeout
            )
            return {s: _config(replies[self.nodes[s]]) for s in contents}

        with stage(f"the private set union of {len(names)} silos' patients"):  # issue 42
            shares = psu.server_union(
                ask_silos, names, [silos[n]["psu"] for n in self.nodes], share_counts=share_counts
            )
        shared = {
            "stage": "federation",
            "secure": self.secure,
            "counts": share_counts,
            "names": names,
            "shares": shares,
            "total_records": int(sum(counts)),
        }
        replies = self._ask(
            grid,
            {
                node: {**shared, "index": s, "offset": int(offsets[s])}
                for s, node in enumerate(self.nodes)
            },
            timeout,
        )
        agreed = {
            (int(_config(r)["n_users"]), _config(r)["users_digest"]) for r in replies.values()
        }
        if len(agreed) != 1:
            raise RuntimeError("the silos disagree on the users (another key, or a tampered relay)")
        self.n_users, self.users_digest = agreed.pop()

        def ask(
            contents: dict[int, dict],
        ) -> dict[int, dict]:  # one query.uldp exchange, by silo index
            replies = self._ask(
                grid, {self.nodes[s]: content for s, content in contents.items()}, timeout
            )
            return {s: _config(replies[self.nodes[s]]) for s in contents}

        if self.secure and not self._protocol_1:
            self._protocol = masked_sum_server(len(self.nodes), ask)
            self._protocol.setup()
        elif self.secure:
            config = ProtocolConfig.for_training(
                len(self.nodes),
                self.n_users,
                clip=needed(self.hp.clip, "clip"),
                sigma=needed(self.hp.sigma, "sigma"),
                parameters=self.protocol,
            )
            self._protocol = server_driver(config, ask_silos)
            with stage(
                f"Protocol 1's {self.protocol.key_bits}-bit keys and their proofs"
            ):  # issue 42
                self._protocol.setup()
        self.setup_seconds = time.perf_counter() - start

    def _ask(
        self, grid: Any, contents: dict[int, dict], timeout: float, *, answered_only: bool = False
    ) -> dict[int, Any]:
        """Every node's reply; with ``answered_only`` those that answered without error (the others are logged)."""
        messages = [
            grid.create_message(_records(content), f"query.{SETUP_ACTION}", node, "setup")
            for node, content in contents.items()
        ]
        replies = {
            reply.metadata.src_node_id: reply
            for reply in grid.send_and_receive(messages, timeout=timeout)
        }
        if answered_only:
            fail_on_named_failure(
                replies.values()
            )  # issue 42: a silo that joins and then fails stops the run
            for node in sorted(
                set(contents) - {n for n, r in replies.items() if not r.has_error()}
            ):
                reason = (
                    replies[node].error.reason
                    if node in replies
                    else f"no answer within {timeout:g} s"
                )
                LOGGER.warning("node %d left out of the set-up: %s", node, reason)
            return {node: reply for node, reply in replies.items() if not reply.has_error()}
        for reply in replies.values():
            _check_reply(reply, self.silo_names)
        if set(replies) != set(contents):
            raise RuntimeError(
                f"silo nodes {sorted(set(contents) - set(replies))} did not answer in {timeout} s"
            )
        return replies

    def start(
        self,
        grid: Grid,
        initial_arrays: ArrayRecord | nn.Module | Mapping[str, Any],
        num_rounds: int = 3,
        timeout: float = 3600,
        train_config: ConfigRecord | None = None,
        evaluate_config: ConfigRecord | None = None,
        evaluate_fn: Callable[[int, ArrayRecord], MetricRecord | None] | None = None,
    ) -> Result:
        """Set up the federation (stages 1-2), resume from the checkpoint and run rounds (stage 3) until
        ``num_rounds`` have completed, each accounted before it is asked (:func:`uldp.flower.recovery.run_rounds`);
        returns Flower's ``Result`` with the final model in ``result.arrays`` and each completed round's epsilon in
        ``result.train_metrics_clientapp``. ``evaluate_config`` is unused (no federated evaluation).

        ``initial_arrays`` is the model (``nn.Module``), its ``state_dict`` (with the strategy's ``model``), an
        ``ArrayRecord`` of a state dict, or one of the flat vector (:func:`uldp.flower.arrays.flat_model`);
        :meth:`trained_model` loads the result.
        """
        initial = flat_model(initial_arrays, self.model)
        return run_rounds(
            self,
            grid,
            initial.to_numpy_ndarrays()[0],
            num_rounds=num_rounds,
            timeout=timeout,
            train_config=train_config,
            evaluate_fn=evaluate_fn,
        )

    def trained_model(self, result: Result) -> nn.Module:
        """A copy of the strategy's ``model`` holding ``result``'s parameters."""
        if self.model is None:
            raise ValueError("trained_model needs the architecture: UldpStrategy(model=...)")
        return trained_model(result.arrays, self.model)

    # --------------------------------------------------------------------------------------------- rounds --
    def configure_train(
        self, server_round: int, arrays: Any, config: Any, grid: Any
    ) -> Iterable[Any]:
        """Sample users (Algorithm 4 line 4) and send the model, the sampled users and the settings to every silo."""
        sampled = self.method.sample_users(self.n_users, _round_seed(self.seed, server_round))
        settings = {
            "round": server_round,
            "sampled": np.packbits(sampled).tobytes(),
            "method": self.method.spec.name,
            "local_lr": self.hp.local_lr,
            "local_epochs": self.hp.local_epochs,
            "batch_size": self.hp.batch_size,
            "clip": self.hp.clip,
            "sigma": self.hp.sigma,
            "q": self.hp.q,
        }
        self._params, self._sampled = arrays.to_numpy_ndarrays()[0], sampled
        self._tick = time.perf_counter()
        if self._protocol_1:
            payloads = self._protocol.begin_round(server_round, sampled)
            extra = [round_settings(payloads[s]) for s in range(len(self.nodes))]
        else:
            extra = [{} for _ in self.nodes]
        return [
            grid.create_message(
                RecordDict(
                    {"arrays": ArrayRecord([self._params]), **_records({**settings, **extra[s]})}
                ),
                "train",
                node,
                str(server_round),
            )
            for s, node in enumerate(self.nodes)
        ]

    def aggregate_train(self, server_round: int, replies: Iterable[Any]) -> tuple[Any, Any]:
        """``x + eta_g / (q |U| |S|) * sum_s update_s`` in silo order (Algorithm 3 line 6); epsilon (Theorem 3)."""
        answers, failed = {}, []
        replies = list(replies)
        for reply in replies:
            node = reply.metadata.src_node_id
            if reply.has_error():
                failed.append(f"{self.silo_names.get(node, '?')!r} failed: {reply.error.reason}")
            else:
                answers[node] = reply.content
        silent = [
            f"{self.silo_names[node]!r} did not answer"
            for node in self.nodes
            if node not in answers
            and not any(reply.metadata.src_node_id == node for reply in replies)
        ]
        if failed or silent:
            raise SiloFault(
                f"round {server_round}: silo {'; silo '.join(failed + silent)}",
                answered=[self.silo_names[node] for node in answers],
            )
        if self.secure:  # Protocol 1's step 2(c) or the masked sum: every silo's masked update or nothing is decoded
            updates = {
                s: (bytes(answers[node]["uldp"]["update"]),) for s, node in enumerate(self.nodes)
            }
            total = torch.from_numpy(
                self._protocol.finish_round(updates, self._params.size)
                if self._protocol_1
                else self._protocol.finish_round(server_round, updates, self._params.size)
            )
            bound = len(self.nodes) * self._update_bound()
            if not float(total.norm()) <= bound:
                raise RuntimeError(
                    f"round {server_round}: the securely aggregated sum has norm "
                    f"{float(total.norm()):.3g}, past the bound {bound:.3g} of the silos' clipped, "
                    f"noised updates: a silo sent more (the masks hide which); nothing is applied"
                )
        else:
            total = torch.zeros(self._params.size, dtype=torch.float32)
            for node in self.nodes:
                update = answers[node]["arrays"].to_numpy_ndarrays()[0]
                if update.shape != self._params.shape or not np.isfinite(update).all():
                    raise RuntimeError(
                        f"round {server_round}: silo node {node} sent a bad update {update.shape}"
                    )
                norm = float(np.linalg.norm(update.astype(np.float64)))
                if not norm <= self._update_bound():
                    raise RuntimeError(
                        f"round {server_round}: silo node {node} sent an update of norm {norm:.3g}, "
                        f"past the bound {self._update_bound():.3g} its method implies; nothing is "
                        f"applied"
                    )
                total += torch.from_numpy(update)
        if any(bool(answers[node]["silo"]["insecure_reproducible_noise"]) for node in self.nodes):
            if not self.insecure_reproducible_noise:
                say(
                    30,
                    "INSECURE: silos draw their noise from their test seed (uldp-insecure-reproducible-noise)",
                )
            self.insecure_reproducible_noise = True
        params = self.method.server_step(
            torch.from_numpy(self._params), total, n_users=self.n_users, n_silos=len(self.nodes)
        )
        epsilon = self.method.epsilon(None, server_round)
        view = self.server_view_epsilon(server_round)
        self.round_seconds.append(time.perf_counter() - self._tick)
        return ArrayRecord([params.numpy()]), MetricRecord(
            {"epsilon": epsilon, "server_view_epsilon": view}
        )

    def server_view_epsilon(self, releases: int) -> float:
        """The user-level epsilon of what the server has seen after ``releases`` releases: the released model's with
        secure aggregation or uniform weights, :func:`uldp.accounting.epsilon_server_view` (each silo's own
        release, Theorem 3 per silo) when plain silos share their counts for ULDP-AVG-w."""
        epsilon = needed(self.method.epsilon(None, releases), "epsilon")
        if not self._shares_counts:
            return epsilon
        return epsilon_server_view(
            sigma=needed(self.hp.sigma, "sigma"),
            rounds=releases,
            delta=self.hp.delta,
            n_silos=len(self.nodes),
            q=self.hp.q,
        ).epsilon

    def _update_bound(self) -> float:
        """The largest norm of one silo's honest update this round (:func:`uldp.policy.update_norm_bound`), its
        weights' sum bounded by the number of sampled users (enhanced weights) or that over |S| (uniform)."""
        sampled = float(self._sampled.sum())
        weight_sum = sampled if self.method.spec.enhanced_weights else sampled / len(self.nodes)
        return update_norm_bound(
            clip=needed(self.hp.clip, "clip"),
            weight_sum=weight_sum,
            noise_std=self.method.noise_std(len(self.nodes)),
            size=int(self._params.size),
        )

    def configure_evaluate(
        self, server_round: int, arrays: Any, config: Any, grid: Any
    ) -> Iterable[Any]:
        """No federated evaluation (a test set at the silos would be a release the budget does not cover)."""
        return []

    def aggregate_evaluate(self, server_round: int, replies: Iterable[Any]) -> Any:
        """Nothing to aggregate."""
        return None

    def summary(self) -> None:
        """Log the method and its settings."""
        say(
            20,
            "%s: sigma=%s q=%s delta=%s%s",
            self.method.spec.name,
            self.hp.sigma,
            self.hp.q,
            self.hp.delta,
            f" with Protocol 1 ({self.protocol.key_bits}-bit key)"
            if self._protocol_1
            else " with the masked sum (Protocol 1's pairwise masks)"
            if self.secure
            else " WITHOUT secure aggregation (see server_view_epsilons)"
            if self._shares_counts
            else "",
        )


# ------------------------------------------------------------------------------------------------- the silo --
def _silo_view(
    load: Callable[[Any], SiloData], model: Callable[[], Any], loss: Any, context: Any
) -> dict:
    """Load this silo's records and patient ids (as text), check them as :func:`uldp.fit` does."""
    if SILO_KEY not in context.node_config or KEY_FILE_KEY not in context.node_config:
        raise ValueError(
            f'the SuperNode needs --node-config \'{SILO_KEY}="<name>" {KEY_FILE_KEY}="<path>"\''
        )
    data = load(context)
    if not isinstance(data, SiloData):
        raise ValueError(
            f"load(context) must return uldp.flower.SiloData, got {type(data).__name__}"
        )
    net = model()
    records = resolve_records(net, loss, data.x, data.y)
    x, y, loss_fn = records.x, records.y, records.loss
    ids = list(
        data.patient_ids.tolist() if hasattr(data.patient_ids, "tolist") else data.patient_ids
    )
    if len(ids) != x.shape[0]:
        raise ValueError(f"patient_ids has {len(ids)} ids, x has {x.shape[0]} records")
    return {
        "name": str(context.node_config[SILO_KEY]),
        "model": net,
        "loss": loss_fn.trained,
        "x": x,
        "y": y,
        "ids": [str(i) for i in ids],
        "key": read_key_file(context.node_config[KEY_FILE_KEY]),
    }


def _hello(view: dict, context: Any) -> dict:
    """Stage 1: name, record count and the hello of a new union session (:func:`uldp.flower.psu.hello`)."""
    return {
        "silo": view["name"],
        "records": int(view["x"].shape[0]),
        "psu": psu.hello(context, view["name"], view["ids"], view["key"]),
    }


def _federation(view: dict, settings: dict, context: Any) -> dict:
    """The union of every silo's share: keep ``n[s, u]`` (only this silo's row unless counts were shared) and this
    silo's patients' user numbers in the node-local context state."""
    SiloPolicy.from_node_config(context.node_config).check(records=settings["total_records"])
    names = list(settings["names"])
    index = int(settings["index"])
    if names[index] != view["name"] or sorted(names) != names:
        raise ValueError(f"the server placed silo {view['name']!r} at {index} of {names}")
    union = psu.finish(list(settings["shares"]), context, view["ids"], view["key"])
    if union.index != index:
        raise ValueError(
            f"the union numbers silo {view['name']!r} {union.index}, the server {index}"
        )
    counts = union.counts
    if not bool(settings["counts"]):
        counts = np.zeros_like(counts)
        counts[index] = union.counts[index]
    context.state["uldp"] = ConfigRecord(
        {
            "index": index,
            "n_silos": len(names),
            "offset": int(settings["offset"]),
            "secure": bool(settings["secure"]),
            "total_records": int(settings["total_records"]),
            "n_users": union.n_users,
        }
    )
    # this silo's patients as raw SHA-256 bytes [k, 32] (a numpy "S" array would drop trailing zero bytes)
    keys = np.frombuffer(
        b"".join(bytes.fromhex(k) for k in union.own_keys), dtype=np.uint8
    ).reshape(-1, 32)
    context.state["uldp_arrays"] = ArrayRecord([counts, keys, union.own_indices])
    return {"n_users": union.n_users, "users_digest": union.digest}


def user_numbers(context: Any, patient_ids: Any) -> np.ndarray:
    """The federation's user number of each of this silo's patient ids (one per record), after the federation
    stage: the user ids under which :func:`uldp.fit` on the pooled records equals the Flower run (tests, the book).

    Raises:
        ValueError: Before the federation stage, or an id this silo did not hold then.
    """
    if "uldp_arrays" not in context.state:
        raise ValueError("no user numbers before the federation stage")
    _, keys, indices = context.state["uldp_arrays"].to_numpy_ndarrays()
    ids = patient_ids.tolist() if hasattr(patient_ids, "tolist") else list(patient_ids)
    return lookup(np.array([row.tobytes().hex() for row in keys], dtype="U64"), indices, ids)


def _train(view: dict, settings: dict, params: np.ndarray, context: Any) -> np.ndarray | bytes:
    """This silo's ``sum_u w_su clip(Delta_su) + z_s`` for the round (Algorithm 3 lines 8-19); in a secure federation
    only masked: Protocol 1's masked update (ULDP-AVG-w, :class:`~uldp.secure.messages.MaskedUpdateMessage` bytes)
    or the masked sum's (ULDP-AVG, :class:`~uldp.secure.messages.MaskedSumMessage` bytes)."""
    if "uldp" not in context.state:
        raise ValueError(
            "a training round before the federation stage (the strategy runs setup first)"
        )
    state = dict(context.state["uldp"])
    counts = context.state["uldp_arrays"].to_numpy_ndarrays()[0]
    codes = user_numbers(context, view["ids"])
    if settings["method"] not in SUPPORTED:
        raise ValueError(f"method {settings['method']!r} is not one of {SUPPORTED}")
    sampled = np.unpackbits(np.frombuffer(settings["sampled"], dtype=np.uint8))[
        : int(state["n_users"])
    ].astype(bool)
    policy = SiloPolicy.from_node_config(context.node_config)
    policy.check(
        sigma=settings["sigma"],
        local_epochs=settings["local_epochs"],
        sampled_users=int(sampled.sum()),
        n_users=int(state["n_users"]),
        q=float(settings["q"]),
    )
    secure = bool(state.get("secure", False))
    protocol_1 = secure and settings["method"] == "ULDP-AVG-w"
    if protocol_1 != ("p1" in settings):
        raise ValueError(
            "a round without Protocol 1 in a federation set up with it, or the reverse"
        )
    multiplier = release_multiplier(
        float(settings["sigma"]),
        n_silos=int(state["n_silos"]),
        secure=secure,
        uniform_weights=settings["method"] == "ULDP-AVG",
    )
    hp = Hyperparameters(
        global_lr=1.0,
        local_lr=settings["local_lr"],
        local_epochs=settings["local_epochs"],
        batch_size=settings["batch_size"],
        clip=settings["clip"],
        sigma=settings["sigma"],
        q=settings["q"],
    )
    method = user_level(make_method(settings["method"], hp))
    n, index = int(view["x"].shape[0]), int(state["index"])
    allocation = Allocation(
        codes, np.full(n, index), int(state["n_users"]), int(state["n_silos"]), "flower", 0
    )
    federation = Federation(
        view["model"],
        view["loss"],
        view["x"],
        view["y"],
        allocation,
        record_ids=state["offset"] + np.arange(n),
        n_ids=int(state["total_records"]),
    )
    round_index = int(settings["round"])
    round_seed = _silo_round_seed(context, round_index)
    view["model"].train()
    tensor = torch.from_numpy(params.copy())

    def admit() -> (
        None
    ):  # the round goes into the silo's ledger (on disk) before anything is computed
        ledger = _ledger(context, policy)
        ledger.admit(
            str(context.run_id), round_index, multiplier=multiplier, q=float(settings["q"])
        )
        _keep_ledger(context, ledger)

    if protocol_1:  # Protocol 1: clipped per-user deltas and noise go into the masked update

        def inputs() -> tuple[np.ndarray, np.ndarray]:
            admit()
            deltas = method.silo_user_deltas(tensor, federation, round_seed, sampled, index)
            noise = method.silo_noise(tensor.numel(), int(state["n_silos"]), round_seed, index)
            return deltas.detach().numpy().astype(np.float64), noise.detach().numpy().astype(
                np.float64
            )

        return silo_masked_update(settings, context, inputs)

    def update() -> np.ndarray:
        admit()
        plain = method.silo_update(
            tensor, federation, round_seed, index, sampled=sampled, counts=counts
        )
        return plain.detach().numpy().astype(params.dtype)

    return (
        silo_masked_sum(settings, context, update) if secure else update()
    )  # secure: only masked leaves


def _silo_round_seed(context: Any, round_index: int) -> np.random.SeedSequence:
    """The seed of this silo's noise and record order in a round: its own CSPRNG, whatever the server sends; with
    the silo's own INSECURE test option (:data:`INSECURE_NOISE_KEY`) the stream of :func:`uldp.fit`'s round."""
    insecure = context.node_config.get(INSECURE_NOISE_KEY)
    if insecure is None:  # the server never learns what seeds the noise (issues 25 and 30)
        return np.random.SeedSequence(secrets.randbits(128))
    LOGGER.warning(
        "INSECURE: silo %s draws its noise from its test seed (%s): whoever knows the seed can remove "
        "it; for tests only",
        context.node_config.get(SILO_KEY),
        INSECURE_NOISE_KEY,
    )
    return _round_seed(check_integer(INSECURE_NOISE_KEY, int(insecure), minimum=0), round_index)


def _ledger(context: Any, policy: SiloPolicy) -> SiloLedger:
    """The silo's ledger: the file its node config names (:data:`LEDGER_KEY`), else the SuperNode's memory."""
    path = context.node_config.get(LEDGER_KEY)
    ledger = SiloLedger(policy, path)
    if path is None and _LEDGER_STATE in context.state:
        ledger.load(json.loads(str(context.state[_LEDGER_STATE]["json"])))
    return ledger


def _keep_ledger(context: Any, ledger: SiloLedger) -> None:
    if ledger.path is None:
        context.state[_LEDGER_STATE] = ConfigRecord({"json": json.dumps(ledger.state())})


def _protocol_inputs(context: Any) -> dict:
    """What this silo's Protocol 1 stages need from the federation stage: its number, |U| and its own n_su."""
    if "uldp" not in context.state or not context.state["uldp"].get("secure", False):
        raise ValueError(
            "a Protocol 1 stage before a federation stage set up for it (the strategy sends secure=True)"
        )
    state = dict(context.state["uldp"])
    counts = context.state["uldp_arrays"].to_numpy_ndarrays()[0]
    return {
        "index": int(state["index"]),
        "n_users": int(state["n_users"]),
        "own_counts": counts[int(state["index"])],
    }


def silo_client_app(load: Callable[[Any], SiloData], model: Callable[[], Any], loss: Any) -> Any:
    """A Flower ``ClientApp`` for one silo of a ULDP-AVG(-w) federation (the partner of :class:`UldpStrategy`).

    The SuperNode of each silo runs with ``--node-config 'silo="<its name>" uldp-key-file="<path>"'`` (the relay
    key from :func:`uldp.flower.pseudonyms.write_key_file`, the same file content at every silo, never at the
    server: it seals what the silos send each other through the server, :mod:`uldp.flower.psu`)
    and optionally its privacy policy (:class:`uldp.policy.SiloPolicy`, ``uldp-policy-<field>=<value>``, e.g.
    ``uldp-policy-epsilon=4 uldp-policy-min-sigma=1``; the defaults otherwise) and its ledger file
    (``uldp-ledger=<path>``: the rounds it answered and the noise it released, kept across restarts; without it,
    in the SuperNode's memory). Nothing the server sends changes the policy, the ledger or the silo's randomness;
    a request past the policy is refused, logged at the silo and returned to the server as the error. For tests
    only: ``uldp-insecure-test-keys=true`` (accept Protocol 1 keys under 2048 bits) and
    ``uldp-insecure-reproducible-noise=<seed>`` (noise from that seed, as :func:`uldp.fit` with it).

    Args:
        load: ``context -> SiloData``: this silo's own records and raw patient ids, from its own files (read
            ``context.node_config`` for the path).
        model: Builds the architecture (its weights come from the server each round).
        loss: As in :func:`uldp.fit`.

    The records, pseudonyms and model are read once per run and node and kept while the ClientApp's process lives
    (:class:`uldp.flower.silo_views.SiloViews`; a long-lived process: :mod:`uldp.flower.worker`).

    Returns:
        The ``ClientApp``; its state (silo number, ``n[s, u]``, the user list, and with Protocol 1 the silo's
        secrets as :class:`~uldp.secure.messages.SiloState` bytes) lives in the node's context state.
    """
    app = ClientApp()
    views = SiloViews(
        lambda context: _silo_view(load, model, loss, context)
    )  # kept while this process lives

    @app.query(SETUP_ACTION)
    def setup(message: Any, context: Any) -> Any:
        with _naming(context):
            settings = _config(message)
            if settings["stage"] not in (
                "hello",
                "federation",
                *psu.STAGES,
            ):  # Protocol 1's need the state only
                return Message(
                    _records(silo_setup(settings, context, **_protocol_inputs(context))),
                    reply_to=message,
                )
            view = views.get(context)
            answer = (
                _hello(view, context)
                if settings["stage"] == "hello"
                else psu.step(settings, context, view["ids"], view["key"])
                if settings["stage"] in psu.STAGES
                else _federation(view, settings, context)
            )
            return Message(_records(answer), reply_to=message)

    @app.train()
    def train(message: Any, context: Any) -> Any:
        with _naming(context):
            view = views.get(context)
        params = message.content["arrays"].to_numpy_ndarrays()[0]
        try:
            with _naming(context):
                update = _train(view, _config(message), params, context)
        except (
            SiloFailure
        ) as error:  # a refusal (the policy, the ledger, Protocol 1's order): the operator sees it
            LOGGER.warning("%s", error)
            raise
        silo = ConfigRecord(
            {"insecure_reproducible_noise": INSECURE_NOISE_KEY in context.node_config}
        )
        if isinstance(update, bytes):  # Protocol 1's masked update
            return Message(
                RecordDict({"uldp": ConfigRecord({"update": update}), "silo": silo}),
                reply_to=message,
            )
        return Message(
            RecordDict({"arrays": ArrayRecord([update]), "silo": silo}), reply_to=message
        )

    return app
