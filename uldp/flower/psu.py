"""The private set union (:mod:`uldp.secure.psu`) as Flower messages: how the silos agree on the users' numbers.

Stages of :class:`~uldp.flower.UldpStrategy`'s set-up (all ``query.uldp``), between ``hello`` and ``federation``:

- ``hello``: each silo starts a :class:`~uldp.secure.psu.UnionSilo` over its raw patient ids (fresh exponent and
  nonce from ``secrets``) and answers its :class:`~uldp.secure.psu.Hello` (a nonce and its number of patients).
- ``psu-start`` (the roster: the silos' names and hellos) and |S| times ``psu-relay`` (one sealed list each): the
  server routes each silo's answer to the silo it names (:func:`uldp.secure.psu.relay_union`).
- ``federation``: the server hands every silo the |S| sealed shares; each silo takes their union and numbers its own
  patients (:func:`finish`).

Between messages the silo's exponent and progress live in its node-local ``context.state`` (JSON bytes,
:meth:`~uldp.secure.psu.UnionSilo.export_state`; Flower may run each message in a fresh ClientApp process, and the
SuperNode never sends its context to the SuperLink). A second ``hello`` starts a new session with new secrets;
within one, each step is answered once and in order, anything else is refused by name
(:class:`~uldp.secure.psu.RelayRefused`). What each party learns is in :mod:`uldp.secure.psu`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from flwr.app import ConfigRecord

from uldp.flower.secure import TEST_KEYS_KEY, consents_to_test_keys, node_policy
from uldp.secure.psu import (
    DEFAULT_GROUP,
    TEST_GROUP,
    Hello,
    RelayMessage,
    Roster,
    UnionSilo,
    group_named,
    relay_union,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Hashable, Sequence

    from uldp.policy import SiloPolicy
    from uldp.secure.psu import PsuGroup, UnionResult

#: Where a silo keeps its union state in ``context.state``.
STATE_KEY = "uldp_psu"
#: The stages :func:`step` answers.
STAGES = ("psu-start", "psu-relay")


def _keep(context: Any, silo: UnionSilo) -> None:
    context.state[STATE_KEY] = ConfigRecord({"state": silo.export_state()})


def _silo(context: Any, patient_ids: Sequence[Hashable], relay_key: bytes) -> UnionSilo:
    if STATE_KEY not in context.state:
        raise ValueError("a union step before this silo's hello (the strategy sends hello first)")
    return UnionSilo.restore(
        bytes(context.state[STATE_KEY]["state"]),
        patient_ids,
        relay_key=relay_key,
        insecure_test_group=consents_to_test_keys(context.node_config),
    )


def union_group(name: object, *, insecure_test_group: bool, policy: SiloPolicy) -> PsuGroup:
    """The group the server names for the union in its ``hello`` (the union's stage 0, :mod:`uldp.secure.psu`), if
    this silo accepts it: one of :data:`~uldp.secure.psu.GROUPS` of at least the silo's ``min_union_bits``
    (:class:`uldp.policy.SiloPolicy`, 2048 by default), or the test group with the silo's own consent. A server
    cannot weaken the union below 2048 bits without every silo's consent, nor below a silo's policy.

    Raises:
        ValueError: A name outside :data:`~uldp.secure.psu.NAMED_GROUPS`, or the test group without
            ``insecure_test_group``.
        PolicyRefusal: A group smaller than the policy's ``min_union_bits``.
    """
    group = group_named(name)
    if group is TEST_GROUP and not insecure_test_group:
        raise ValueError(
            f"the server asks for the insecure test group {name!r} for the private set union; this silo "
            f"accepts it only with --node-config '{TEST_KEYS_KEY}=true' (tests only)"
        )
    if group is not TEST_GROUP:
        policy.check(union_bits=group.p.bit_length())
    return group


def hello(
    context: Any,
    name: str,
    patient_ids: Sequence[Hashable],
    relay_key: bytes,
    *,
    group: object = DEFAULT_GROUP.name,
) -> bytes:
    """The silo's ``hello``: a new union session in the group the server named (:func:`union_group`: at least its
    policy's ``min_union_bits``, the test group only with this silo's consent; fresh secrets, any earlier session
    forgotten); its hello's bytes.

    Raises:
        ValueError: A group this silo does not accept (:class:`~uldp.policy.PolicyRefusal` below its policy).
    """
    consent = consents_to_test_keys(context.node_config)
    chosen = union_group(
        group, insecure_test_group=consent, policy=node_policy(context.node_config)
    )
    silo = UnionSilo(
        name, patient_ids, relay_key=relay_key, group=chosen, insecure_test_group=consent
    )
    _keep(context, silo)
    return silo.hello.to_bytes()


def step(settings: dict, context: Any, patient_ids: Sequence[Hashable], relay_key: bytes) -> dict:
    """The silo's answer to ``psu-start`` (``settings["psu"]``: the roster, ``settings["counts"]``: share its
    ``n_su``) or ``psu-relay`` (a sealed list): ``{"psu": the sealed list it sends on}``.

    Raises:
        RelayRefused: Anything out of order, repeated, of another session or malformed.
    """
    silo = _silo(context, patient_ids, relay_key)
    if settings["stage"] == "psu-start":
        message = silo.start(
            Roster.from_bytes(bytes(settings["psu"])), share_counts=bool(settings["counts"])
        )
    else:
        message = silo.relay(RelayMessage.from_bytes(bytes(settings["psu"])))
    _keep(context, silo)
    return {"psu": message.to_bytes()}


def finish(
    shares: Sequence[bytes], context: Any, patient_ids: Sequence[Hashable], relay_key: bytes
) -> UnionResult:
    """The silo's union of the |S| shares (the ``federation`` stage).

    Raises:
        RelayRefused: A share missing, repeated, changed or of another session, or a second union.
    """
    silo = _silo(context, patient_ids, relay_key)
    result = silo.finish([RelayMessage.from_bytes(bytes(share)) for share in shares])
    _keep(context, silo)
    return result


def server_union(
    ask: Callable[[dict[int, dict]], dict[int, dict]],
    names: Sequence[str],
    hellos: Sequence[bytes],
    *,
    share_counts: bool,
    group: str = DEFAULT_GROUP.name,
) -> list[bytes]:
    """The server's relay: the roster out, |S| routings, the shares back (:func:`uldp.secure.psu.relay_union`).

    Args:
        ask: ``{silo number: message content} -> {silo number: reply content}`` (one ``query.uldp`` exchange).
        names: The silos' names in sorted order.
        hellos: Their hellos' bytes, in that order.
        share_counts: Whether the silos put their ``n_su`` in their shares (plain ULDP-AVG-w only).
        group: The name of the group the silos' hellos were made in (the roster names it; each silo checks it).

    Returns:
        The |S| shares' bytes, for the ``federation`` stage.
    """
    roster = Roster(group, tuple(names), tuple(Hello.from_bytes(bytes(h)) for h in hellos))

    def exchange(stage: str, requests: dict[int, bytes]) -> dict[int, bytes]:
        replies = ask(
            {
                s: {"stage": stage, "psu": request, "counts": share_counts}
                for s, request in requests.items()
            }
        )
        return {s: bytes(reply["psu"]) for s, reply in replies.items()}

    return list(relay_union(exchange, roster))
