"""The silo's side on Flower: :func:`silo_client_app`, the ``ClientApp`` partner of
:class:`uldp.flower.strategy.UldpStrategy` (the stages are that module's), and :func:`user_numbers`.

Each silo loads its own records and patient ids (``load(context)``, a :class:`SiloData`), answers the private set
union and the federation stage, and each round computes its update through :class:`uldp.federation.MethodSilo`
and its aggregation (:mod:`uldp.flower.secure`), after checking the request against its own policy
(:mod:`uldp.policy`, from its node config) and writing the round into its ledger.
"""

from __future__ import annotations

import logging
import secrets
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, Message, RecordDict
from flwr.clientapp import ClientApp

from uldp.common.checks import check_integer
from uldp.data.base import Allocation
from uldp.federation import MethodSilo, aggregation_kind
from uldp.fitting import resolve_records
from uldp.flower import group, psu
from uldp.flower.messages import (
    ALLOW_NO_DP_KEY,
    INSECURE_NOISE_KEY,
    KEY_FILE_KEY,
    LEDGER_KEY,
    SETUP_ACTION,
    SILO_KEY,
    config_of,
    records,
    server_round_seed,
)
from uldp.flower.pseudonyms import read_key_file
from uldp.flower.report import say, silo_data_repr
from uldp.flower.secure import (
    IDENTITY_KEY,
    ROSTER_KEY,
    node_policy,
    silo_round,
    silo_sample,
    silo_setup,
)
from uldp.flower.silo_views import SiloViews
from uldp.methods import Federation, Hyperparameters, make_method, parse_method, user_level
from uldp.policy import SiloLedger, SiloPolicy, collusion_scale, node_ledger_path
from uldp.secure.psu import lookup
from uldp.training.device import device_settings, resolve_device

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

LOGGER = logging.getLogger("uldp.flower")
#: The node config key of the device a silo trains on (``cpu``, the default, ``cuda`` or ``cuda:<index>``): the
#: silo's own choice, like its policy; its records and model are moved there once, when loaded.
DEVICE_KEY = "uldp-device"


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


def silo_view(
    load: Callable[[Any], SiloData], model: Callable[[], Any], loss: Any, context: Any
) -> dict:
    """Load this silo's records and patient ids (as text), check them as :func:`uldp.fit` does: what
    :func:`views_client_app` reads once per run and node."""
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
    resolved = resolve_records(net, loss, data.x, data.y)
    device = resolve_device(context.node_config.get(DEVICE_KEY, "cpu"))
    x, y, loss_fn = resolved.x.to(device), resolved.y.to(device), resolved.loss
    net.to(device)
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


def _hello(view: dict, settings: dict, context: Any) -> dict:
    """Stage 1: name, record count and the hello of a new union session (:func:`uldp.flower.psu.hello`) in the group
    the server names (the insecure test group only where the silo consents to test keys); the silo logs whom its
    epsilons hold against (its policy's adversary, :attr:`uldp.policy.SiloPolicy.against`)."""
    policy = node_policy(context.node_config)
    say(  # the SuperNode's log (a ClientApp's warning would reach stderr where no handler is set)
        logging.INFO,
        "silo %s: every epsilon it reports holds against %s%s",
        view["name"],
        policy.against,
        ""
        if policy.malicious_server
        else f" (without its identity and roster, {IDENTITY_KEY}/{ROSTER_KEY}, the server may swap the "
        f"keys it relays)",
    )
    return {
        "silo": view["name"],
        "records": int(view["x"].shape[0]),
        "psu": psu.hello(
            context,
            view["name"],
            view["ids"],
            view["key"],
            group=settings.get("psu_group", psu.DEFAULT_GROUP.name),
        ),
        # its policy's collusion threshold: the server's bounds allow for its scaled noise share (issue 41 item 6)
        "colluders": policy.colluders,
        "malicious_server": policy.malicious_server,
    }


def _federation(view: dict, settings: dict, context: Any) -> dict:
    """The union of every silo's share: keep ``n[s, u]`` (only this silo's row unless counts were shared) and this
    silo's patients' user numbers in the node-local context state."""
    policy = node_policy(context.node_config)
    policy.check(records=settings["total_records"])
    names = list(settings["names"])
    collusion_scale(n_silos=len(names), colluders=policy.colluders)  # refused now, not in round 1
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
            "users_digest": union.digest,
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


def _train(view: dict, settings: dict, params: np.ndarray, context: Any) -> bytes:
    """This silo's ``sum_u w_su clip(Delta_su) + z_s`` for the round (Algorithm 3 lines 8-19) as its aggregation's
    answer (:mod:`uldp.federation`): plain, or in a secure federation only masked, Protocol 1's masked update
    (ULDP-SGD/AVG-w, :class:`~uldp.secure.messages.MaskedUpdateMessage` bytes) or the masked sum's
    (:class:`~uldp.secure.messages.MaskedSumMessage` bytes)."""
    if "uldp" not in context.state:
        raise ValueError(
            "a training round before the federation stage (the strategy runs setup first)"
        )
    state = dict(context.state["uldp"])
    counts = context.state["uldp_arrays"].to_numpy_ndarrays()[0]
    codes = user_numbers(context, view["ids"])
    spec = parse_method(settings["method"])
    n_users, n_silos, index = int(state["n_users"]), int(state["n_silos"]), int(state["index"])
    policy, secure = node_policy(context.node_config), bool(state["secure"])
    keep, group_size = (
        group.own_flags(context)
        if spec.capabilities.group_privacy
        else (np.ones(codes.size, dtype=bool), 0)
    )
    kind = aggregation_kind(spec, secure=secure)
    if (
        policy.sampler == "silos" and spec.per_user
    ):  # the silos' own sample and q, never the server's
        sampled = silo_sample(settings, context, kind, n_users)
    else:
        sampled = np.unpackbits(np.frombuffer(settings["sampled"], dtype=np.uint8))[
            :n_users
        ].astype(bool)
    hp = Hyperparameters(
        global_lr=1.0,
        local_lr=settings.get("local_lr"),
        local_epochs=settings.get("local_epochs"),
        batch_size=settings["batch_size"],
        clip=settings.get("clip"),
        sigma=settings.get("sigma"),
        q=policy.q if policy.sampler == "silos" else settings["q"],
    )
    n = int(view["x"].shape[0])
    allocation = Allocation(codes, np.full(n, index), n_users, n_silos, "flower", 0)
    federation = Federation(
        view["model"],
        view["loss"],
        view["x"],
        view["y"],
        allocation,
        record_ids=state["offset"] + np.arange(n),
        n_ids=int(state["total_records"]),
    ).keep(keep)  # ULDP-GROUP-k's flags B (uldp.flower.group); every record otherwise
    method = make_method(spec.name, hp)
    if (
        spec.per_user
    ):  # its noise share scaled for its own policy's t colluders, whatever the server asks
        method = replace(user_level(method), colluders=policy.colluders)
    silo = MethodSilo(
        method,
        federation,
        silo_id=index,
        n_silos=n_silos,
        counts=counts,
        secure=secure,
        group_size=group_size,
    )
    private = spec.private or not _allows_no_dp(context)
    if (
        private
    ):  # a method without noise only where this silo's own config says so (ALLOW_NO_DP_KEY)
        silo.check_policy(policy)
        silo.check_policy(policy, sampled)
    round_index = int(settings["round"])
    view["model"].train()

    def admit() -> (
        None
    ):  # the round goes into the silo's ledger (on disk) before anything is computed
        if not private:  # no DP release to charge: a silo that allows DEFAULT has no budget for it
            return
        multiplier, _ = silo.release()  # charged at the policy's rate, not the run's
        _ledger(context, policy).admit(str(context.run_id), round_index, multiplier=multiplier)

    work = silo.work(params, _silo_round_seed(context, round_index), sampled, admit)
    with device_settings(federation.device):
        return silo_round(settings, context, kind, work)


def _allows_no_dp(context: Any) -> bool:
    """Whether this silo's own node config lets it answer a method without noise (DEFAULT): ``ALLOW_NO_DP_KEY``."""
    value = str(context.node_config.get(ALLOW_NO_DP_KEY, "false")).lower()
    if value not in ("true", "false"):
        raise ValueError(f"{ALLOW_NO_DP_KEY} must be true or false, got {value!r}")
    return value == "true"


def _insecure_seed(context: Any) -> int | None:
    """The silo's own INSECURE test seed (:data:`INSECURE_NOISE_KEY`), or None."""
    insecure = context.node_config.get(INSECURE_NOISE_KEY)
    return None if insecure is None else check_integer(INSECURE_NOISE_KEY, int(insecure), minimum=0)


def _silo_round_seed(context: Any, round_index: int) -> np.random.SeedSequence:
    """The seed of this silo's noise and record order in a round: its own CSPRNG, whatever the server sends; with
    the silo's own INSECURE test option (:data:`INSECURE_NOISE_KEY`) the stream of :func:`uldp.fit`'s round."""
    insecure = _insecure_seed(context)
    if insecure is None:  # the server never learns what seeds the noise (issues 25 and 30)
        return np.random.SeedSequence(secrets.randbits(128))
    LOGGER.warning(
        "INSECURE: silo %s draws its noise from its test seed (%s): whoever knows the seed can remove "
        "it; for tests only",
        context.node_config.get(SILO_KEY),
        INSECURE_NOISE_KEY,
    )
    return server_round_seed(insecure, round_index)


def _ledger(context: Any, policy: SiloPolicy) -> SiloLedger:
    """The silo's ledger: the file its node config names (:data:`LEDGER_KEY`), else beside its key file
    (:func:`uldp.policy.node_ledger_path`); never the SuperNode's memory, which a restart resets."""
    config = context.node_config
    return SiloLedger(
        policy,
        node_ledger_path(
            silo=str(config[SILO_KEY]), key_file=config[KEY_FILE_KEY], ledger=config.get(LEDGER_KEY)
        ),
    )


def _group_stage(view: dict, settings: dict, context: Any) -> dict:
    """ULDP-GROUP-k's ``group-users`` or ``group-flags`` stage (:mod:`uldp.flower.group`)."""
    if "uldp" not in context.state:
        raise ValueError(f"a {settings['stage']} stage before the federation stage")
    codes = user_numbers(context, view["ids"])
    if settings["stage"] == "group-users":
        state = context.state["uldp"]
        return group.users_message(
            codes,
            silo=int(state["index"]),
            digest=str(state["users_digest"]),
            relay_key=view["key"],
        )
    spec = parse_method(str(settings["method"]))
    if spec.group_size is None:
        raise ValueError(f"group-flags for {spec.name}, which has no group size k")
    return group.flags(
        settings,
        context,
        codes,
        group_size=spec.group_size,
        relay_key=view["key"],
        insecure_seed=_insecure_seed(context),
    )


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
    """A Flower ``ClientApp`` for one silo of a federation of any method (the partner of :class:`UldpStrategy`).

    The SuperNode of each silo runs with ``--node-config 'silo="<its name>" uldp-key-file="<path>"'`` (the relay
    key from :func:`uldp.flower.pseudonyms.write_key_file`, the same file content at every silo, never at the
    server: it seals what the silos send each other through the server, :mod:`uldp.flower.psu`)
    and optionally its privacy policy (:class:`uldp.policy.SiloPolicy`, ``uldp-policy-<field>=<value>``, e.g.
    ``uldp-policy-epsilon=4 uldp-policy-min-sigma=1``; the defaults otherwise) and its ledger file
    (``uldp-ledger=<path>``: the rounds it answered and the noise it released, kept across restarts; without it,
    ``<silo>.uldp-ledger.json`` beside its key file; once it has answered it refuses to answer without it).
    To authenticate the DH keys the server relays (beyond the paper, issue 41 item 3), it also names its identity and
    its copy of the federation's roster (``uldp-identity=<path> uldp-roster=<path>``, from ``uldp roster identity``
    and ``uldp roster add``; :mod:`uldp.flower.secure`): a swapped key then stops the run naming the silo. A silo
    that names them asks for a malicious server's guarantee by default (``uldp-policy-malicious-server=false`` says
    otherwise): it then requires them and refuses the lattice backend; without them it holds against a semi-honest
    server and says so when the run starts. ``uldp-policy-colluders=t`` scales its noise share so that its epsilon
    holds against t silos colluding with the server. With
    ``uldp-policy-sampler=silos`` (and ``uldp-policy-q``) a silo trains on the user sample the silos draw from their
    secure session's seed, at its policy's q, never the server's (the strategy's ``hidden_sample``).
    A silo answers DEFAULT (no noise) only with ``uldp-allow-no-dp=true`` in its own node config (its ledger then
    charges nothing: there is no DP release to charge); otherwise it refuses it by name.
    Nothing the server sends changes the policy, the ledger or the silo's randomness; a request past the policy is
    refused, logged at the silo and returned to the server as the error. ``uldp-device=cuda`` trains this silo on
    its GPU (:data:`DEVICE_KEY`; the noise is drawn as on the CPU). For tests only:
    ``uldp-insecure-test-keys=true`` (accept Protocol 1 keys under 2048 bits) and
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
    return views_client_app(lambda context: silo_view(load, model, loss, context))


def views_client_app(view: Callable[[Any], dict]) -> Any:
    """The ``ClientApp`` of :func:`silo_client_app` over ``view(context)`` (a :func:`silo_view`): for an app whose
    records, architecture and loss come from the run's config (:mod:`uldp.deploy.app`)."""
    app = ClientApp()
    views = SiloViews(view)  # kept while this process lives

    @app.query(SETUP_ACTION)
    def setup(message: Any, context: Any) -> Any:
        with _naming(context):
            settings = config_of(message)
            if settings["stage"] not in (
                "hello",
                "federation",
                *psu.STAGES,
                *group.STAGES,
            ):  # Protocol 1's need the state only
                return Message(
                    records(silo_setup(settings, context, **_protocol_inputs(context))),
                    reply_to=message,
                )
            view = views.get(context)
            answer = (
                _hello(view, settings, context)
                if settings["stage"] == "hello"
                else psu.step(settings, context, view["ids"], view["key"])
                if settings["stage"] in psu.STAGES
                else _group_stage(view, settings, context)
                if settings["stage"] in group.STAGES
                else _federation(view, settings, context)
            )
            return Message(records(answer), reply_to=message)

    @app.train()
    def train(message: Any, context: Any) -> Any:
        with _naming(context):
            view = views.get(context)
        params = message.content["arrays"].to_numpy_ndarrays()[0]
        try:
            with _naming(context):
                update = _train(view, config_of(message), params, context)
        except (
            SiloFailure
        ) as error:  # a refusal (the policy, the ledger, Protocol 1's order): the operator sees it
            LOGGER.warning("%s", error)
            raise
        silo = ConfigRecord(
            {"insecure_reproducible_noise": INSECURE_NOISE_KEY in context.node_config}
        )
        return Message(
            RecordDict({"uldp": ConfigRecord({"update": update}), "silo": silo}),
            reply_to=message,
        )

    return app
