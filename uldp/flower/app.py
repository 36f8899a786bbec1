"""ULDP-AVG and ULDP-AVG-w on Flower's Message API: a server-side :class:`UldpStrategy` and :func:`silo_client_app`.

Stages (all messages of type ``query.uldp`` except the rounds, ``train``):

1. ``hello`` (server -> every SuperNode): each silo loads *its own* records and patient ids from its own files
   (``load(context)``), replaces the ids by keyed pseudonyms (:func:`uldp.flower.pseudonyms.pseudonymize`) and
   answers with its name, its record count and its ``(pseudonym, n_su)`` histogram sealed for the other silos.
2. ``federation`` (server -> every silo): silos are numbered in sorted order of their names; silo ``s``'s records
   get the ids ``offset_s + i`` (offsets: the record counts of the silos before it); the server relays every sealed
   histogram. Each silo opens them, numbers the users in sorted order of their pseudonyms (|U| of them), keeps
   ``n[s, u]`` in its context state (node-local) and answers |U| and a digest of the user list; the server checks
   that all silos agree.
3. Rounds ``t = 1..T`` (``train``): the server samples users (Poisson, rate ``q``, Algorithm 4 line 4) and sends
   the model and the sampled users; each silo answers ``sum_u w_su clip(Delta_su) + z_s`` (Algorithm 3 lines 8-19)
   with its noise ``z_s`` and record order drawn from its own CSPRNG-seeded stream; the server sums the answers
   and steps ``x + eta_g / (q |U| |S|) * sum`` (Algorithm 3 line 6). The epsilon of Theorem 3 (sub-sampled,
   Lemma 4) after each round is in the strategy's result.

So the run equals :func:`uldp.fit` on the concatenation of the silos' records (silos in sorted name order) with
the pseudonyms as user ids and the strategy's seed -- exactly when ``insecure_reproducible_noise`` makes the silos
draw from that seed too (tests and the book only: whoever knows the seed can subtract the noise).

With ``secure=True`` (ULDP-AVG-w) the enhanced weights go through Protocol 1 (:mod:`uldp.flower.secure`): stage 1
seals only each silo's pseudonyms (no counts), stage 2 keeps only the silo's own ``n_su``, Protocol 1's set-up runs
as three more ``query.uldp`` exchanges, and each round adds one (``p1-shares``) before ``train``, whose answers are
masked updates; the server decodes their sum, within P of the plain one (Theorem 4).
"""

from __future__ import annotations

import hashlib
import secrets
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from flwr.app import ArrayRecord, ConfigRecord, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from flwr.common.logger import log
from flwr.serverapp.strategy import Result, Strategy
from torch import nn

from uldp.checks import check_integer
from uldp.data.base import Allocation
from uldp.fitting import ROUNDS_STREAM, resolve_hyperparameters, resolve_records
from uldp.flower.arrays import flat_model, trained_model
from uldp.flower.pseudonyms import open_histogram, pseudonymize, read_key_file, seal_histogram
from uldp.flower.secure import ServerSide, silo_masked_update, silo_setup
from uldp.methods import Federation, Hyperparameters, make_method, parse_method
from uldp.methods.base import needed, seed_stream
from uldp.secure.config import ProtocolConfig, ProtocolParameters

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Mapping

    from flwr.serverapp import Grid

#: The message type of the setup stages (a ``ClientApp`` query action).
SETUP_ACTION = "uldp"
#: The node_config keys a SuperNode sets: ``--node-config 'silo="Hospital A" uldp-key-file="/secure/key"'``.
SILO_KEY, KEY_FILE_KEY = "silo", "uldp-key-file"
#: Optional node_config floor on sigma (a silo refuses rounds with less noise than its operator allows).
MIN_SIGMA_KEY = "uldp-min-sigma"
SUPPORTED = ("ULDP-AVG", "ULDP-AVG-w")


@dataclass(frozen=True)
class SiloData:
    """One silo's own records, as its ``load(context)`` returns them.

    Attributes:
        x: Records ``[n, ...]`` (tensor, array or DataFrame).
        y: Targets ``[n, ...]``.
        patient_ids: The raw patient id of each record (pseudonymized inside the silo, never sent).
    """

    x: Any
    y: Any
    patient_ids: Any


def _records(values: dict) -> Any:
    return RecordDict({"uldp": ConfigRecord(values)})


def _config(message: Any) -> dict:
    return dict(message.content["uldp"])


def _round_seed(seed: int, server_round: int) -> np.random.SeedSequence:
    return seed_stream(np.random.SeedSequence(seed), ROUNDS_STREAM, server_round - 1)


def _check_reply(reply: Any) -> None:
    """A silo's error reply as an exception: the silo names itself in it (:func:`_naming`); Flower's node id last."""
    if reply.has_error():
        raise RuntimeError(f"{reply.error.reason} (Flower node {reply.metadata.src_node_id})")


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
        seed: The seed of the server's user sampling (``None``: from the OS CSPRNG).
        secure: Compute the enhanced weights with Protocol 1 (ULDP-AVG-w only; :mod:`uldp.flower.secure`).
        protocol: Protocol 1's :class:`~uldp.secure.ProtocolParameters` (or a mapping of its fields; the paper's
            3072-bit key and N_max = 2000 by default).
        insecure_reproducible_noise: Tests and book only: send ``seed`` to the silos so that their noise and
            record order come from it, making the run equal :func:`uldp.fit`'s. Whoever knows the seed can remove
            the noise: never in a real federation.

    Attributes:
        epsilons: The user-level epsilon after each round (Theorem 3).
        round_seconds: Each round's seconds, from sending the model to the new model (Protocol 1's share
            exchange included).
        setup_seconds: The set-up's seconds (stages 1-2 and, with ``secure``, Protocol 1's set-up).

    Raises:
        ValueError: Another method, bad hyperparameters or protocol parameters, or ``secure`` with ULDP-AVG.
    """

    def __init__(self, *, method: str = "ULDP-AVG-w", sigma: float, q: float = 1.0, delta: float = 1e-5,
                 global_lr: float | None = None, local_lr: float | None = None, clip: float | None = None,
                 local_epochs: int | None = None, batch_size: int | None = None, seed: int | None = None,
                 secure: bool = False, protocol: ProtocolParameters | dict | None = None,
                 insecure_reproducible_noise: bool = False, model: nn.Module | None = None) -> None:
        spec = parse_method(method)
        if spec.name not in SUPPORTED:
            raise ValueError(f"UldpStrategy runs {' or '.join(SUPPORTED)}, not {spec.name}")
        self._spec_name = spec.name
        self.model = model
        self._chosen: dict[str, Any] = {"global_lr": global_lr, "local_lr": local_lr, "clip": clip,
                                        "local_epochs": local_epochs, "batch_size": batch_size, "sigma": sigma,
                                        "delta": delta, "q": q}
        self._resolve(1)  # checks every value now; the method's per-silo defaults are set once |S| is known
        self.seed = secrets.randbits(63) if seed is None else check_integer("seed", seed, minimum=0)
        self.insecure_reproducible_noise = bool(insecure_reproducible_noise)
        if not isinstance(secure, bool):
            raise ValueError(f"secure must be True or False, got {secure!r}")
        if secure and spec.name != "ULDP-AVG-w":
            raise ValueError(f"Protocol 1 computes the enhanced weights of ULDP-AVG-w; {spec.name} needs no counts")
        self.secure = secure
        self.protocol = ProtocolParameters.from_mapping(protocol or {})
        self._protocol: Any = None  # uldp.flower.secure.ServerSide of a secure run, after the set-up
        self.setup_seconds = 0.0
        self.nodes: list[int] = []
        self.names: dict[int, str] = {}  # node id -> the silo's own name (stage 1)
        self.n_users = 0
        self.epsilons: list[float] = []
        self.round_seconds: list[float] = []

    def _resolve(self, n_silos: int) -> None:
        """The hyperparameters (given, or the method's defaults for ``n_silos`` silos, as :func:`uldp.fit`)."""
        self.hp = resolve_hyperparameters(self._spec_name, n_silos, **self._chosen)
        self.method = make_method(self._spec_name, self.hp)

    # ---------------------------------------------------------------------------------------------- setup --
    def setup(self, grid: Any, *, timeout: float = 600.0) -> None:
        """Stages 1-2: learn the silos, relay the sealed histograms, agree on |U| (see the module docstring).

        Raises:
            RuntimeError: A silo failed, two silos share a name, or the silos disagree on the users.
        """
        start = time.perf_counter()
        nodes = list(grid.get_node_ids())
        replies = self._ask(grid, {node: {"stage": "hello", "secure": self.secure} for node in nodes}, timeout)
        silos = {node: _config(reply) for node, reply in replies.items()}
        names = [silos[node]["silo"] for node in nodes]
        if len(set(names)) != len(names):
            raise RuntimeError(f"two SuperNodes claim the same silo name: {sorted(names)}")
        self.nodes = sorted(nodes, key=lambda node: silos[node]["silo"])
        self.names = {node: str(silos[node]["silo"]) for node in nodes}
        self._resolve(len(self.nodes))
        counts = [int(silos[node]["records"]) for node in self.nodes]
        offsets = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(int)
        shared = {"stage": "federation", "secure": self.secure, "names": [silos[n]["silo"] for n in self.nodes],
                  "sealed": [silos[n]["sealed"] for n in self.nodes], "total_records": int(sum(counts))}
        replies = self._ask(grid, {node: {**shared, "index": s, "offset": int(offsets[s])}
                                   for s, node in enumerate(self.nodes)}, timeout)
        agreed = {(int(_config(r)["n_users"]), _config(r)["users_digest"]) for r in replies.values()}
        if len(agreed) != 1:
            raise RuntimeError("the silos disagree on the users (another key, or a tampered relay)")
        self.n_users = agreed.pop()[0]
        if self.secure:
            def ask(contents: dict[int, dict]) -> dict[int, dict]:
                replies = self._ask(grid, {self.nodes[s]: content for s, content in contents.items()}, timeout)
                return {s: _config(replies[self.nodes[s]]) for s in contents}

            config = ProtocolConfig.for_training(len(self.nodes), self.n_users, clip=needed(self.hp.clip, "clip"),
                                                 sigma=needed(self.hp.sigma, "sigma"),
                                                 parameters=self.protocol)
            self._protocol = ServerSide(config, ask)
            self._protocol.setup()
        self.setup_seconds = time.perf_counter() - start

    def _who(self, nodes: Iterable[int]) -> str:
        """The silos of ``nodes`` by their own names (Flower node ids only before the names are known)."""
        return ", ".join(f"silo {self.names[node]!r}" if node in self.names else f"Flower node {node}"
                         for node in sorted(nodes))

    def _ask(self, grid: Any, contents: dict[int, dict], timeout: float) -> dict[int, Any]:
        messages = [grid.create_message(_records(content), f"query.{SETUP_ACTION}", node, "setup")
                    for node, content in contents.items()]
        replies = {reply.metadata.src_node_id: reply for reply in grid.send_and_receive(messages, timeout=timeout)}
        for reply in replies.values():
            _check_reply(reply)
        if set(replies) != set(contents):
            raise RuntimeError(f"{self._who(set(contents) - set(replies))} did not answer in {timeout} s")
        return replies

    def start(self, grid: Grid, initial_arrays: ArrayRecord | nn.Module | Mapping[str, Any], num_rounds: int = 3,
              timeout: float = 3600, train_config: ConfigRecord | None = None,
              evaluate_config: ConfigRecord | None = None,
              evaluate_fn: Callable[[int, ArrayRecord], MetricRecord | None] | None = None) -> Result:
        """Set up the federation (stages 1-2), then Flower's round loop (stage 3); returns Flower's ``Result``
        with the final model in ``result.arrays`` (flat: :meth:`trained_model` loads it) and each round's epsilon
        in ``result.train_metrics_clientapp``.

        ``initial_arrays`` is the model (``nn.Module``), its ``state_dict`` (with the strategy's ``model``), an
        ``ArrayRecord`` of a state dict, or one of the flat vector (:func:`uldp.flower.arrays.flat_model`).
        """
        initial = flat_model(initial_arrays, self.model)
        self.setup(grid, timeout=timeout)
        return super().start(grid, initial, num_rounds, timeout, train_config=train_config,
                             evaluate_config=evaluate_config, evaluate_fn=evaluate_fn)

    def trained_model(self, result: Result) -> nn.Module:
        """A copy of the strategy's ``model`` holding ``result``'s parameters."""
        if self.model is None:
            raise ValueError("trained_model needs the architecture: UldpStrategy(model=...)")
        return trained_model(result.arrays, self.model)

    # --------------------------------------------------------------------------------------------- rounds --
    def configure_train(self, server_round: int, arrays: Any, config: Any, grid: Any) -> Iterable[Any]:
        """Sample users (Algorithm 4 line 4) and send the model, the sampled users and the settings to every silo."""
        sampled = self.method.sample_users(self.n_users, _round_seed(self.seed, server_round))
        settings = {"round": server_round, "sampled": np.packbits(sampled).tobytes(), "method": self.method.spec.name,
                    "local_lr": self.hp.local_lr, "local_epochs": self.hp.local_epochs,
                    "batch_size": self.hp.batch_size, "clip": self.hp.clip, "sigma": self.hp.sigma, "q": self.hp.q}
        if self.insecure_reproducible_noise:
            settings["insecure_seed"] = self.seed
        self._params = arrays.to_numpy_ndarrays()[0]
        self._tick = time.perf_counter()
        extra = (self._protocol.round_settings(server_round, sampled) if self.secure
                 else [{} for _ in self.nodes])
        return [grid.create_message(RecordDict({"arrays": ArrayRecord([self._params]),
                                                **_records({**settings, **extra[s]})}),
                                    "train", node, str(server_round)) for s, node in enumerate(self.nodes)]

    def aggregate_train(self, server_round: int, replies: Iterable[Any]) -> tuple[Any, Any]:
        """``x + eta_g / (q |U| |S|) * sum_s update_s`` in silo order (Algorithm 3 line 6); epsilon (Theorem 3)."""
        answers = {}
        for reply in replies:
            _check_reply(reply)
            answers[reply.metadata.src_node_id] = reply.content
        if set(answers) != set(self.nodes):
            raise RuntimeError(f"round {server_round}: no answer from {self._who(set(self.nodes) - set(answers))}")
        if self.secure:  # Protocol 1, step 2(c): every silo's masked update or nothing is decrypted
            total = torch.from_numpy(self._protocol.aggregate([bytes(answers[node]["uldp"]["update"])
                                                               for node in self.nodes]))
        else:
            total = torch.zeros(self._params.size, dtype=torch.float32)
            for node in self.nodes:
                update = answers[node]["arrays"].to_numpy_ndarrays()[0]
                if update.shape != self._params.shape or not np.isfinite(update).all():
                    raise RuntimeError(f"round {server_round}: {self._who([node])} sent a bad update {update.shape}")
                total += torch.from_numpy(update)
        params = self.method.server_step(torch.from_numpy(self._params), total, n_users=self.n_users,
                                         n_silos=len(self.nodes))
        epsilon = self.method.epsilon(None, server_round)
        self.epsilons.append(epsilon)
        self.round_seconds.append(time.perf_counter() - self._tick)
        return ArrayRecord([params.numpy()]), MetricRecord({"epsilon": epsilon})

    def configure_evaluate(self, server_round: int, arrays: Any, config: Any, grid: Any) -> Iterable[Any]:
        """No federated evaluation (a test set at the silos would be a release the budget does not cover)."""
        return []

    def aggregate_evaluate(self, server_round: int, replies: Iterable[Any]) -> Any:
        """Nothing to aggregate."""
        return None

    def summary(self) -> None:
        """Log the method and its settings."""
        log(20, "%s: sigma=%s q=%s delta=%s%s%s", self.method.spec.name, self.hp.sigma, self.hp.q, self.hp.delta,
            f" with Protocol 1 ({self.protocol.key_bits}-bit key)" if self.secure else "",
            " (INSECURE reproducible noise)" if self.insecure_reproducible_noise else "")


# ------------------------------------------------------------------------------------------------- the silo --
def _silo_view(load: Callable[[Any], SiloData], model: Callable[[], Any], loss: Any, context: Any) -> dict:
    """Load this silo's records, check them as :func:`uldp.fit` does, and pseudonymize its patient ids."""
    if SILO_KEY not in context.node_config or KEY_FILE_KEY not in context.node_config:
        raise ValueError(f"the SuperNode needs --node-config '{SILO_KEY}=\"<name>\" {KEY_FILE_KEY}=\"<path>\"'")
    data = load(context)
    if not isinstance(data, SiloData):
        raise ValueError(f"load(context) must return uldp.flower.SiloData, got {type(data).__name__}")
    net = model()
    records = resolve_records(net, loss, data.x, data.y)
    x, y, loss_fn = records.x, records.y, records.loss
    ids = list(data.patient_ids.tolist() if hasattr(data.patient_ids, "tolist") else data.patient_ids)
    if len(ids) != x.shape[0]:
        raise ValueError(f"patient_ids has {len(ids)} ids, x has {x.shape[0]} records")
    pseudonyms = np.array(pseudonymize(ids, read_key_file(context.node_config[KEY_FILE_KEY])))
    return {"name": str(context.node_config[SILO_KEY]), "model": net, "loss": loss_fn.trained, "x": x, "y": y,
            "pseudonyms": pseudonyms, "key": read_key_file(context.node_config[KEY_FILE_KEY])}


def _hello(view: dict, secure: bool) -> dict:
    """Stage 1: name, record count and the sealed histogram (with Protocol 1: the pseudonyms only, each count 1)."""
    names, counts = np.unique(view["pseudonyms"], return_counts=True)
    shown = np.ones_like(counts) if secure else counts
    return {"silo": view["name"], "records": int(view["x"].shape[0]),
            "sealed": seal_histogram(names, shown, view["key"], silo=view["name"])}


def _federation(view: dict, settings: dict, context: Any) -> dict:
    """Open every silo's histogram, number the users, keep ``n[s, u]`` in the node-local context state (with
    Protocol 1 only this silo's row: the others' histograms carry no counts)."""
    names = list(settings["names"])
    index = int(settings["index"])
    if names[index] != view["name"] or sorted(names) != names:
        raise ValueError(f"the server placed silo {view['name']!r} at {index} of {names}")
    histograms = [
        open_histogram(sealed, view["key"], silo=name) for name, sealed in zip(names, settings["sealed"], strict=True)
    ]
    users = np.array(sorted(set().union(*(set(h[0]) for h in histograms))))
    counts = np.zeros((len(names), users.size), dtype=np.int64)
    for s, (pseudonyms, n) in enumerate(histograms):
        counts[s, np.searchsorted(users, pseudonyms)] = n
    own = np.unique(view["pseudonyms"], return_counts=True)
    secure = bool(settings["secure"])
    if not np.array_equal(counts[index, np.searchsorted(users, own[0])], np.ones_like(own[1]) if secure else own[1]):
        raise ValueError("the relayed histogram of this silo is not the one it sent")
    if secure:
        row = counts[index].copy()
        row[np.searchsorted(users, own[0])] = own[1]
        counts = np.zeros_like(counts)
        counts[index] = row
    context.state["uldp"] = ConfigRecord({"index": index, "n_silos": len(names), "offset": int(settings["offset"]),
                                          "secure": secure,
                                          "total_records": int(settings["total_records"]), "n_users": int(users.size)})
    # the user list as raw bytes [U, 32] (a numpy "S" array would drop a digest's trailing zero bytes)
    digests = np.frombuffer(b"".join(bytes.fromhex(u) for u in users), dtype=np.uint8).reshape(users.size, -1)
    context.state["uldp_arrays"] = ArrayRecord([counts, digests])
    digest = hashlib.sha256(b"".join(bytes.fromhex(u) for u in users)).hexdigest()
    return {"n_users": int(users.size), "users_digest": digest}


def _train(view: dict, settings: dict, params: np.ndarray, context: Any) -> np.ndarray | bytes:
    """This silo's ``sum_u w_su clip(Delta_su) + z_s`` for the round (Algorithm 3 lines 8-19), or with Protocol 1
    its masked update (the bytes of a :class:`~uldp.secure.messages.MaskedUpdateMessage`)."""
    if "uldp" not in context.state:
        raise ValueError("a training round before the federation stage (the strategy runs setup first)")
    state = dict(context.state["uldp"])
    counts, digests = context.state["uldp_arrays"].to_numpy_ndarrays()
    users = np.array([row.tobytes().hex() for row in digests])
    codes = np.searchsorted(users, view["pseudonyms"])
    if not np.array_equal(users[np.minimum(codes, users.size - 1)], view["pseudonyms"]):
        raise ValueError("this silo's patients are not all in the federation's user list (its files changed since "
                         "the federation stage?)")
    floor = context.node_config.get(MIN_SIGMA_KEY)
    if floor is not None and float(settings["sigma"]) < float(floor):
        raise ValueError(f"sigma={settings['sigma']} is below this silo's floor {floor} ({MIN_SIGMA_KEY})")
    if settings["method"] not in SUPPORTED:
        raise ValueError(f"method {settings['method']!r} is not one of {SUPPORTED}")
    hp = Hyperparameters(global_lr=1.0, local_lr=settings["local_lr"], local_epochs=settings["local_epochs"],
                         batch_size=settings["batch_size"], clip=settings["clip"], sigma=settings["sigma"],
                         q=settings["q"])
    method = make_method(settings["method"], hp)
    n, index = int(view["x"].shape[0]), int(state["index"])
    allocation = Allocation(codes, np.full(n, index), int(state["n_users"]), int(state["n_silos"]), "flower", 0)
    federation = Federation(view["model"], view["loss"], view["x"], view["y"], allocation,
                            record_ids=state["offset"] + np.arange(n), n_ids=int(state["total_records"]))
    sampled = np.unpackbits(np.frombuffer(settings["sampled"], dtype=np.uint8))[: int(state["n_users"])].astype(bool)
    if "insecure_seed" in settings:  # tests and book only: noise the server can recompute
        round_seed = _round_seed(int(settings["insecure_seed"]), int(settings["round"]))
    else:  # the silo's own randomness: the server never learns what seeds the noise (see issue 25)
        round_seed = np.random.SeedSequence(secrets.randbits(128))
    view["model"].train()
    if bool(state.get("secure", False)) != ("weights" in settings):
        raise ValueError("a round without Protocol 1 in a federation set up with it, or the reverse")
    tensor = torch.from_numpy(params.copy())
    if "weights" in settings:  # Protocol 1: clipped per-user deltas and noise go into the masked update
        deltas = method.silo_user_deltas(tensor, federation, round_seed, sampled, index)
        noise = method.silo_noise(tensor.numel(), int(state["n_silos"]), round_seed, index)
        return silo_masked_update(settings, context, deltas.detach().numpy().astype(np.float64),
                                  noise.detach().numpy().astype(np.float64))
    update = method.silo_update(tensor, federation, round_seed, index, sampled=sampled, counts=counts)
    return update.detach().numpy().astype(params.dtype)


def _protocol_inputs(context: Any) -> dict:
    """What this silo's Protocol 1 stages need from the federation stage: its number, |U| and its own n_su."""
    if "uldp" not in context.state or not context.state["uldp"].get("secure", False):
        raise ValueError("a Protocol 1 stage before a federation stage set up for it (the strategy sends secure=True)")
    state = dict(context.state["uldp"])
    counts = context.state["uldp_arrays"].to_numpy_ndarrays()[0]
    return {"index": int(state["index"]), "n_users": int(state["n_users"]), "own_counts": counts[int(state["index"])]}


def silo_client_app(load: Callable[[Any], SiloData], model: Callable[[], Any], loss: Any) -> Any:
    """A Flower ``ClientApp`` for one silo of a ULDP-AVG(-w) federation (the partner of :class:`UldpStrategy`).

    The SuperNode of each silo runs with ``--node-config 'silo="<its name>" uldp-key-file="<path>"'`` (the key
    from :func:`uldp.flower.pseudonyms.write_key_file`, the same file content at every silo, never at the server)
    and optionally ``uldp-min-sigma=<floor>`` and, for tests only, ``uldp-insecure-test-keys=true`` (accept
    Protocol 1 keys under 2048 bits).

    Args:
        load: ``context -> SiloData``: this silo's own records and raw patient ids, from its own files (read
            ``context.node_config`` for the path).
        model: Builds the architecture (its weights come from the server each round).
        loss: As in :func:`uldp.fit`.

    Returns:
        The ``ClientApp``; its state (silo number, ``n[s, u]``, the user list, and with Protocol 1 the silo's
        secrets as :class:`~uldp.secure.messages.SiloState` bytes) lives in the node's context state.
    """
    app = ClientApp()

    @app.query(SETUP_ACTION)
    def setup(message: Any, context: Any) -> Any:
        with _naming(context):
            settings = _config(message)
            if settings["stage"] not in ("hello", "federation"):  # Protocol 1's stages need the state only
                return Message(_records(silo_setup(settings, context, **_protocol_inputs(context))), reply_to=message)
            view = _silo_view(load, model, loss, context)
            answer = (_hello(view, bool(settings["secure"])) if settings["stage"] == "hello"
                      else _federation(view, settings, context))
            return Message(_records(answer), reply_to=message)

    @app.train()
    def train(message: Any, context: Any) -> Any:
        with _naming(context):
            view = _silo_view(load, model, loss, context)
            params = message.content["arrays"].to_numpy_ndarrays()[0]
            update = _train(view, _config(message), params, context)
            if isinstance(update, bytes):  # Protocol 1's masked update
                return Message(_records({"update": update}), reply_to=message)
            return Message(RecordDict({"arrays": ArrayRecord([update])}), reply_to=message)

    return app
