"""Every method of :mod:`uldp.methods` on Flower's Message API: a server-side :class:`UldpStrategy` and
:func:`silo_client_app`.

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

import secrets
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from flwr.app import ArrayRecord, ConfigRecord, MetricRecord, RecordDict
from flwr.serverapp.strategy import Result, Strategy
from torch import nn

from uldp.accounting import sigma_for_epsilon
from uldp.common.atomic import check_writable
from uldp.common.checks import check_integer, check_number, check_positive
from uldp.federation import SERVER_AGGREGATIONS, ServerAggregation, aggregation_kind, update_bounds
from uldp.fitting import resolve_hyperparameters
from uldp.flower import psu
from uldp.flower.arrays import flat_model, trained_model
from uldp.flower.group import server_flags
from uldp.flower.guarantees import (
    check_combination,
    group_accounting,
    released_epsilon,
    server_view_epsilon,
)
from uldp.flower.messages import config_of, records, server_round_seed
from uldp.flower.recovery import SiloFault, ask_silos, discover_silos, run_rounds
from uldp.flower.report import (
    RoundReport,
    say,
    stage,
    strategy_repr,
)
from uldp.flower.secure import federation_trust, server_exchange
from uldp.method_names import PROTOCOL_1
from uldp.methods import make_method, parse_method, user_level
from uldp.methods.base import needed
from uldp.secure.config import ProtocolConfig, ProtocolParameters
from uldp.secure.psu import group_named

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping, Sequence
    from pathlib import Path

    from flwr.serverapp import Grid


class UldpStrategy(Strategy):
    """The server side of any method (Algorithms 1-4) as a Flower ``Strategy``.

    Args:
        method: A registry name (:data:`uldp.method_names.KNOWN_METHODS`): ``"ULDP-AVG-w"`` (enhanced weights,
            Eq. (3)), ``"ULDP-AVG"``, ``"ULDP-SGD(-w)"``, ``"ULDP-NAIVE"``, ``"ULDP-GROUP-<k>"`` (its flags B by two
            more set-up stages, :mod:`uldp.flower.group`) or ``"DEFAULT"`` (no noise: every silo refuses it unless
            its own node config sets ``uldp-allow-no-dp=true``).
        sigma: Noise multiplier; or give ``epsilon`` instead (neither for DEFAULT; sigma for ULDP-GROUP-k).
        epsilon: Target user-level epsilon (at ``delta``, by the RDP accountant, as :func:`uldp.fit`'s): sigma is
            the smallest that reaches it after :meth:`start`'s ``num_rounds`` (``uldp.accounting.sigma_for_epsilon``,
            Theorem 3 with Lemma 4 for q < 1). Exactly one of ``sigma`` and ``epsilon``.
        q: User-level Poisson sampling rate (Algorithm 4; 1 for the methods that sample no users).
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
            3072-bit key and N_max = 2000 by default); only for a method with per-user weights (ULDP-SGD-w,
            ULDP-AVG-w), whose secure aggregation is Protocol 1.
        silos: The names of the silos the run expects (their SuperNodes' ``silo`` node config); the run waits
            ``join_timeout`` for them and refuses to run short of them. None takes the silos connected at the
            start (and, after a fault, the same ones again). See :mod:`uldp.flower.recovery`.
        checkpoint: File of the strategy's state (model, round index, every release's record), written atomically
            before and after each round; a run started again with it resumes at the next round index.
        hidden_sample: Beyond the paper (issue 41 item 1), the silos draw each round's user sample themselves
            (their policy's ``uldp-policy-sampler=silos``, q from their policy; :mod:`uldp.secure.sampling`): the
            server sends every user as sampled, relays the masked sum's ``sum-sample`` stage and never learns the
            sample, so its view is amplified by sampling. Needs ``secure``.
        min_colluders: The collusion threshold the run needs: the set-up stops, naming them, if silos' policies
            (``uldp-policy-colluders``) hold against fewer colluding silos (their epsilons would not hold).
        join_timeout: Seconds to wait for the silos at the start and after a fault.
        psu_group: The private set union's group (:data:`uldp.secure.psu.NAMED_GROUPS`): ``"modp2048"`` (112-bit),
            ``"modp3072"`` (128-bit, as a 3072-bit key); each silo refuses the test group without its consent.
        max_aborted_rounds: Aborted rounds (each accounted as a release) after which the run stops instead of
            taking its silos back and going on.

    Attributes:
        epsilons: The user-level epsilon of the released model after each release (Theorem 3): one per round index
            asked, completed or aborted, a resumed run's earlier ones included.
        server_view_epsilons: The user-level epsilon of what the server sees after each release, the sample it
            draws included (with user sampling, the known-sample epsilon): ``epsilons`` without sampling under secure
            aggregation or uniform weights, :func:`uldp.accounting.epsilon_server_view` otherwise.
        insecure_reproducible_noise: Whether any silo reported drawing its noise from its INSECURE test seed.
        colluders: How many colluding silos every epsilon holds against (also in each round's metrics).
        against: Whom, in words (both as of the set-up: :func:`uldp.flower.secure.federation_trust`).
        round_seconds: Each round's seconds, from sending the model to the new model (Protocol 1's share
            exchange included).
        setup_seconds: The set-up's seconds (stages 1-2 and, with ``secure``, Protocol 1's set-up).

    Raises:
        ValueError: An unknown method, a setting the method's capabilities give no meaning (noise for DEFAULT, q
            below 1 or ``hidden_sample`` for a method that samples no users, ``protocol`` for one without per-user
            weights), bad hyperparameters or protocol parameters, a ``secure`` not a bool, silo names that are not
            distinct non-empty strings, a checkpoint path that cannot be written, or a bad timeout.
    """

    def __init__(
        self,
        *,
        method: str = "ULDP-AVG-w",
        sigma: float | None = None,
        epsilon: float | None = None,
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
        hidden_sample: bool = False,
        min_colluders: int = 0,
        psu_group: str = psu.DEFAULT_GROUP.name,
    ) -> None:
        spec = parse_method(method)
        self._spec_name = spec.name
        self.model = model
        check_combination(spec, sigma=sigma, epsilon=epsilon, q=q, protocol=protocol)
        self.epsilon = None if epsilon is None else check_positive("epsilon", epsilon)
        self._chosen: dict[str, Any] = {
            "global_lr": global_lr,
            "local_lr": local_lr,
            "clip": clip,
            "local_epochs": local_epochs,
            "batch_size": batch_size,
            "sigma": sigma if epsilon is None or not spec.private else 1.0,  # calibrated at start
            "delta": delta,
            "q": q,
        }
        self._resolve(
            1
        )  # checks every value now; the method's per-silo defaults are set once |S| is known
        self.seed = secrets.randbits(63) if seed is None else check_integer("seed", seed, minimum=0)
        self.insecure_reproducible_noise = False
        self.min_colluders = check_integer("min_colluders", min_colluders, minimum=0)
        self.psu_group = group_named(
            psu_group
        ).name  # each silo checks it against its own consent and policy
        self.colluders, self.against = 0, "no silo yet"  # as of the set-up
        if secure is None:
            secure = True
        if not isinstance(secure, bool):
            raise ValueError(
                f"secure must be True, False or None (the default: secure), got {secure!r}"
            )
        self.secure = secure
        if hidden_sample not in (True, False) or (hidden_sample and not (secure and spec.per_user)):
            raise ValueError(
                f"hidden_sample must be True or False, and True only with secure aggregation (the silos agree on "
                f"the sample under their pairwise keys) and a method that samples users (ULDP-SGD/AVG), got "
                f"{hidden_sample!r} with secure={secure} and {spec.name}"
            )
        self.hidden_sample = hidden_sample
        self.protocol = ProtocolParameters.for_user(protocol)  # backend "auto" unless named
        self._aggregation: ServerAggregation | None = None  # after the set-up
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
        self._group: dict[str, Any] = {}  # ULDP-GROUP-k's accountant arguments, after the set-up

    __repr__ = strategy_repr  # issue 42: its settings, not object at 0x...

    def _resolve(self, n_silos: int) -> None:
        """The hyperparameters (given, or the method's defaults for ``n_silos`` silos, as :func:`uldp.fit`)."""
        self.hp = resolve_hyperparameters(self._spec_name, n_silos, **self._chosen)
        self.method = make_method(self._spec_name, self.hp)

    @property
    def _protocol_1(self) -> bool:
        """Whether the rounds run Protocol 1 (secure ULDP-AVG-w); secure ULDP-AVG runs the masked sum instead."""
        return self.secure and self.method.spec.secure_aggregation == PROTOCOL_1

    @property
    def _shares_counts(self) -> bool:
        """Whether the silos share their exact n_su with each other: only plain ULDP-AVG-w needs them."""
        return not self.secure and self.method.spec.per_user_weights

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
            contents = {node: {"stage": "hello", "psu_group": self.psu_group} for node in nodes}
            return {
                node: config_of(reply)
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
        trust = federation_trust(
            {str(silos[node]["silo"]): silos[node] for node in self.nodes}, self.min_colluders
        )
        self.colluders, self.against = trust.colluders, trust.against
        if self.method.spec.per_user:  # the server's bounds allow the largest scaled noise share
            self.method = replace(user_level(self.method), colluders=trust.most)
        counts = [int(silos[node]["records"]) for node in self.nodes]
        offsets = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(int)
        names = [silos[n]["silo"] for n in self.nodes]

        def ask(contents: dict[int, dict]) -> dict[int, dict]:  # one query.uldp exchange, by silo
            replies = self._ask(
                grid, {self.nodes[s]: content for s, content in contents.items()}, timeout
            )
            return {s: config_of(replies[self.nodes[s]]) for s in contents}

        with stage(f"the private set union of {len(names)} silos' patients"):  # issue 42
            hellos = [silos[n]["psu"] for n in self.nodes]
            shares = psu.server_union(
                ask, names, hellos, share_counts=share_counts, group=self.psu_group
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
            (int(config_of(r)["n_users"]), config_of(r)["users_digest"]) for r in replies.values()
        }
        if len(agreed) != 1:
            raise RuntimeError("the silos disagree on the users (another key, or a tampered relay)")
        self.n_users, self.users_digest = agreed.pop()
        if self.method.spec.capabilities.group_privacy:  # Algorithm 2 line 8 (uldp.flower.group)
            with stage("ULDP-GROUP's flags B"):
                k, kept = server_flags(ask, len(self.nodes), self.method.spec.name)
            self._group = group_accounting(self.hp, k, kept)

        aggregation = SERVER_AGGREGATIONS[aggregation_kind(self.method.spec, secure=self.secure)]
        protocol = (
            ProtocolConfig.for_training(
                len(self.nodes),
                self.n_users,
                clip=needed(self.hp.clip, "clip"),
                sigma=needed(self.hp.sigma, "sigma"),
                parameters=self.protocol,
            )
            if aggregation.needs_protocol
            else None
        )
        self._aggregation = aggregation(
            len(self.nodes),
            server_exchange(ask, protocol),
            protocol=protocol,
            silo_names=names,
            hidden_sample=self.hidden_sample,
        )
        with stage(f"the {aggregation.kind} aggregation's set-up (keys, proofs)"):  # issue 42
            self._aggregation.setup()
        self.setup_seconds = time.perf_counter() - start

    def _ask(
        self, grid: Any, contents: dict[int, dict], timeout: float, *, answered_only: bool = False
    ) -> dict[int, Any]:
        """One set-up exchange (:func:`uldp.flower.recovery.ask_silos`; tests override it to play a server that
        deviates)."""
        return ask_silos(
            grid, contents, timeout=timeout, names=self.silo_names, answered_only=answered_only
        )

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
        if self.epsilon is not None:  # the noise that reaches the target after num_rounds releases
            self._chosen["sigma"] = sigma_for_epsilon(
                self._spec_name,
                epsilon=self.epsilon,
                rounds=check_integer("num_rounds", num_rounds),
                delta=self._chosen["delta"],
                q=self.hp.q,
            )
            self._resolve(1)
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
        sampled = (  # every user takes part in a method without user sampling
            user_level(self.method).sample_users(
                self.n_users, server_round_seed(self.seed, server_round)
            )
            if self.method.spec.per_user and not self.hidden_sample
            else np.ones(self.n_users, dtype=bool)  # with hidden_sample, the silos' own
        )
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
        settings = {  # a method's unused hyperparameters are None (ULDP-SGD has no local epochs)
            name: value for name, value in settings.items() if value is not None
        }
        self._params, self._sampled = arrays.to_numpy_ndarrays()[0], sampled
        self._tick = time.perf_counter()
        payloads = self._checked_aggregation().begin_round(server_round, sampled)
        extra = [
            {"payloads": list(payloads[s])} if payloads[s] else {} for s in range(len(self.nodes))
        ]
        return [
            grid.create_message(
                RecordDict(
                    {"arrays": ArrayRecord([self._params]), **records({**settings, **extra[s]})}
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
        updates = {
            s: (bytes(answers[node]["uldp"]["update"]),) for s, node in enumerate(self.nodes)
        }
        bounds = update_bounds(
            self.method, n_silos=len(self.nodes), sampled=self._sampled, size=self._params.size
        )
        try:  # Protocol 1's step 2(c), the masked sum's decoding or the plain sum, each checked against the bounds
            total = self._checked_aggregation().finish_round(
                server_round, updates, self._params, bounds=bounds
            )
        except ValueError as error:
            raise RuntimeError(f"round {server_round}: {error}") from error
        if any(bool(answers[node]["silo"]["insecure_reproducible_noise"]) for node in self.nodes):
            if not self.insecure_reproducible_noise:
                say(
                    30,
                    "INSECURE: silos draw their noise from their test seed (uldp-insecure-reproducible-noise)",
                )
            self.insecure_reproducible_noise = True
        params = self.method.server_step(
            torch.from_numpy(self._params),
            torch.from_numpy(total),
            n_users=self.n_users,
            n_silos=len(self.nodes),
        )
        epsilon = self.released_epsilon(server_round)
        view = self.server_view_epsilon(server_round)
        self.round_seconds.append(time.perf_counter() - self._tick)
        return ArrayRecord([params.numpy()]), MetricRecord(
            {"epsilon": epsilon, "server_view_epsilon": view, "colluders": self.colluders}
        )

    def released_epsilon(self, releases: int) -> float:
        """The user-level epsilon of the released model after ``releases`` releases
        (:func:`uldp.flower.guarantees.released_epsilon`)."""
        return released_epsilon(self.method.spec, self.hp, releases, group=self._group)

    def server_view_epsilon(self, releases: int) -> float:
        """The user-level epsilon of what the server has seen after ``releases`` releases
        (:func:`uldp.flower.guarantees.server_view_epsilon`)."""
        return server_view_epsilon(
            self.method.spec,
            self.hp,
            releases,
            group=self._group,
            shares_counts=self._shares_counts,
            hidden_sample=self.hidden_sample,
            n_silos=len(self.nodes),
        )

    def _checked_aggregation(self) -> ServerAggregation:
        if self._aggregation is None:
            raise RuntimeError("a round before the set-up (start() runs setup first)")
        return self._aggregation

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
