"""One aggregation interface, three implementations: plain, the masked sum and Protocol 1, server side and silo side.

Every transport (:mod:`uldp.flower`, :mod:`uldp.deploy`) drives a round the same way, whatever the aggregation:

- server: :meth:`ServerAggregation.setup` once per session; each round :meth:`~ServerAggregation.begin_round` (the
  payloads each silo's update stage carries: Protocol 1's encrypted weights and relayed shares, nothing otherwise),
  then the transport sends the model with them and collects one answer per silo, and
  :meth:`~ServerAggregation.finish_round` decodes the sum ``sum_s update_s`` and checks its norm against the silos'
  bounds (:func:`uldp.federation.bounds.update_bounds`; issue 30, attack 6) before anything is applied.
- silo: :meth:`SiloAggregation.answer` answers one stage at a time; the last of :attr:`~SiloAggregation.round_stages`
  is the round's update, computed from the silo's :class:`RoundWork` only once the round may be answered.

Which one a run uses is :func:`aggregation_kind`: :data:`PLAIN` without secure aggregation, else the method's own
(:attr:`uldp.method_names.MethodSpec.secure_aggregation`: :data:`~uldp.method_names.PROTOCOL_1` for per-user weights,
Section 4 and Theorem 4; :data:`~uldp.method_names.MASKED_SUM` otherwise, :mod:`uldp.secure.masked_sum`).
"""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING, ClassVar, Protocol

import numpy as np

from uldp.common.persist import array_from_bytes, array_to_bytes
from uldp.method_names import MASKED_SUM, PROTOCOL_1

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from uldp.method_names import MethodSpec
    from uldp.secure.config import ProtocolConfig
    from uldp.secure.driver import ServerDriver, SiloDriver
    from uldp.secure.masked_sum import MaskedSumServer, MaskedSumSilo
    from uldp.secure.roster import Credentials

#: Aggregation in the clear: the server sees each silo's update (the explicit opt-out of secure aggregation).
PLAIN = "plain"
#: The plain aggregation's one round stage: the update as array bytes (:func:`~uldp.common.persist.array_to_bytes`).
PLAIN_UPDATE = "plain-update"

Payloads = tuple[bytes, ...]


def aggregation_kind(spec: MethodSpec, *, secure: bool) -> str:
    """The aggregation of a run: :data:`PLAIN` without secure aggregation, else the method's own."""
    return spec.secure_aggregation if secure else PLAIN


class RoundWork(Protocol):
    """What a silo computes in a round, called by its aggregation only once the round may be answered."""

    def update(self) -> np.ndarray:
        """The silo's update ``sum_u w_su clip(Delta_su) + z_s`` (or its method's equivalent), in the model's dtype."""

    def secure_inputs(self) -> tuple[np.ndarray, np.ndarray]:
        """Protocol 1's inputs: the clipped per-user deltas ``[|U|, d]`` and the noise ``[d]``, float64."""


def _check_sum(aggregate: np.ndarray, bounds: Sequence[float] | None) -> None:
    norm = float(np.linalg.norm(aggregate))
    if bounds is not None and not norm <= sum(bounds):
        raise ValueError(
            f"the securely aggregated sum has norm {norm:.3g}, past the bound {sum(bounds):.3g} of the "
            f"silos' clipped, noised updates: a silo sent more (the masks hide which); nothing is applied"
        )


class ServerAggregation(abc.ABC):
    """The server's side of one aggregation.

    Args:
        n_silos: |S|.
        exchange: ``(stage, round_index, {silo: payloads}) -> {silo: payloads}`` over the transport.
        protocol: Protocol 1's session parameters (:meth:`uldp.secure.ProtocolConfig.for_training`); Protocol 1 only.
        silo_names: How messages name silo ``s`` (default ``silo s``).
        hidden_sample: Beyond the paper, the silos draw the user sample (:mod:`uldp.secure.sampling`): the masked
            sum relays their ``sum-sample`` stage; Protocol 1's server encrypts every user's weight (it is sent every
            user as sampled).

    Attributes:
        kind: :data:`PLAIN`, :data:`~uldp.method_names.MASKED_SUM` or :data:`~uldp.method_names.PROTOCOL_1`.
        round_stages: The stages of a round at a silo; the last one's answer is the silo's (masked) update.
        secure: Whether the server sees only the sum of the silos' updates.
        needs_protocol: Whether it needs Protocol 1's session parameters (``protocol``).
    """

    kind: ClassVar[str]
    secure: ClassVar[bool] = True
    needs_protocol: ClassVar[bool] = False

    def __init__(
        self,
        n_silos: int,
        exchange: Callable[[str, int, dict[int, Payloads]], Mapping[int, Payloads]],
        *,
        protocol: ProtocolConfig | None = None,
        silo_names: Sequence[str] | None = None,
        hidden_sample: bool = False,
    ) -> None:
        self.n_silos, self._exchange, self._protocol = n_silos, exchange, protocol
        self.hidden_sample = hidden_sample
        self._names = None if silo_names is None else list(silo_names)
        self.round_stages = self._round_stages()

    @staticmethod
    def _round_stages() -> tuple[str, ...]:
        return (PLAIN_UPDATE,)

    def silo_name(self, silo: int) -> str:
        """How messages name silo ``silo``."""
        return f"silo {silo}" if self._names is None else f"silo {self._names[silo]!r}"

    def setup(self) -> None:  # noqa: B027 (the plain aggregation has no set-up; the others override it)
        """The session's set-up (keys, directory; Protocol 1's seed and blinded histograms)."""

    def begin_round(self, round_index: int, sampled: np.ndarray) -> dict[int, Payloads]:
        """Per silo, what its update stage carries besides the model and the sampled users (nothing by default)."""
        return dict.fromkeys(range(self.n_silos), ())

    @abc.abstractmethod
    def finish_round(
        self,
        round_index: int,
        answers: Mapping[int, Payloads],
        like: np.ndarray,
        *,
        bounds: Sequence[float] | None,
    ) -> np.ndarray:
        """The silos' update-stage answers -> ``sum_s update_s`` as an array like ``like`` (the model).

        Args:
            round_index: The round.
            answers: Per silo, its answer to the last of :attr:`round_stages`.
            like: The round's model (the sum's dtype and size).
            bounds: Per silo, the largest norm of its honest update (None: no bound, e.g. DEFAULT).

        Raises:
            ValueError: a missing or malformed answer, or a norm past the bounds; nothing is applied.
        """


class PlainServer(ServerAggregation):
    """Each silo's update in the clear, checked one by one against its bound and summed in silo order."""

    kind, secure = PLAIN, False

    def finish_round(
        self,
        round_index: int,
        answers: Mapping[int, Payloads],
        like: np.ndarray,
        *,
        bounds: Sequence[float] | None,
    ) -> np.ndarray:
        total = np.zeros(like.shape, dtype=like.dtype)
        for silo in range(self.n_silos):
            try:
                payloads = answers[silo]
                if len(payloads) != 1:
                    raise ValueError(f"{len(payloads)} payloads instead of one")
                values = array_from_bytes(payloads[0])
                if values.dtype != like.dtype or values.shape != like.shape:
                    raise ValueError(
                        f"an array of {values.dtype} {values.shape}, the model is {like.dtype} {like.shape}"
                    )
                if not np.isfinite(values).all():
                    raise ValueError(f"{int((~np.isfinite(values)).sum())} NaN or infinite values")
            except (KeyError, ValueError) as error:
                raise ValueError(
                    f"{self.silo_name(silo)} sent a bad contribution: {error}"
                ) from error
            norm = float(np.linalg.norm(values.astype(np.float64)))
            if bounds is not None and not norm <= bounds[silo]:
                raise ValueError(
                    f"{self.silo_name(silo)} sent a contribution of norm {norm:.3g}, past the bound "
                    f"{bounds[silo]:.3g} its method implies (clip times its weights plus the noise's "
                    f"2^-40 tail); nothing is applied"
                )
            total += values
        return total


class MaskedSumAggregation(ServerAggregation):
    """Protocol 1's pairwise masks alone (:class:`uldp.secure.masked_sum.MaskedSumServer`): only the sum is decoded."""

    kind = MASKED_SUM

    @staticmethod
    def _round_stages() -> tuple[str, ...]:
        from uldp.secure.masked_sum import STAGE_UPDATE  # the secure extra, imported when used

        return (STAGE_UPDATE,)

    def setup(self) -> None:
        from uldp.secure.masked_sum import MaskedSumServer

        self._server: MaskedSumServer = MaskedSumServer(
            self.n_silos, self._exchange, hidden_sample=self.hidden_sample
        )
        self._server.setup()

    def finish_round(
        self,
        round_index: int,
        answers: Mapping[int, Payloads],
        like: np.ndarray,
        *,
        bounds: Sequence[float] | None,
    ) -> np.ndarray:
        if not hasattr(self, "_server"):
            raise ValueError(f"round {round_index} before the masked sum's set-up")
        aggregate = self._server.finish_round(round_index, answers, like.size)
        _check_sum(aggregate, bounds)
        return aggregate.astype(like.dtype)


class Protocol1Aggregation(ServerAggregation):
    """Protocol 1 (Section 4) through its one driver (:class:`uldp.secure.driver.ServerDriver`): the server decrypts
    only ``sum_s (sum_u w_su clip(Delta_su) + z_s)``, within P of the plain sum (Theorem 4)."""

    kind, needs_protocol = PROTOCOL_1, True

    @staticmethod
    def _round_stages() -> tuple[str, ...]:
        from uldp.secure.driver import ROUND_STAGES  # the secure extra, imported when used

        return ROUND_STAGES

    def setup(self) -> None:
        from uldp.secure.driver import ServerDriver

        if self._protocol is None:
            raise ValueError("Protocol 1 needs its session parameters (protocol=ProtocolConfig)")
        self.driver: ServerDriver = ServerDriver(self._protocol, self._exchange)
        self.driver.setup()

    def begin_round(self, round_index: int, sampled: np.ndarray) -> dict[int, Payloads]:
        return self.driver.begin_round(round_index, sampled)

    def finish_round(
        self,
        round_index: int,
        answers: Mapping[int, Payloads],
        like: np.ndarray,
        *,
        bounds: Sequence[float] | None,
    ) -> np.ndarray:
        aggregate = self.driver.finish_round(answers, like.size)
        _check_sum(aggregate, bounds)
        return aggregate.astype(like.dtype)


#: The server side of each aggregation, by :func:`aggregation_kind`.
SERVER_AGGREGATIONS: dict[str, type[ServerAggregation]] = {
    PLAIN: PlainServer,
    MASKED_SUM: MaskedSumAggregation,
    PROTOCOL_1: Protocol1Aggregation,
}


# ------------------------------------------------------------------------------------------------- the silo --
def trusted_keys(
    credentials: Credentials | None, *, silo_id: int, malicious_server: bool
) -> Credentials | None:
    """The credentials a secure session of silo ``silo_id`` authenticates its DH keys with (issue 41 item 3).

    Without them the keys are as the server relays them, which holds against the paper's semi-honest server only;
    a silo whose policy asks for a malicious server's guarantee (:attr:`uldp.policy.SiloPolicy.malicious_server`)
    therefore starts no session without them.

    Raises:
        ValueError: ``malicious_server`` without credentials, saying how to make them.
    """
    if malicious_server and credentials is None:
        raise ValueError(
            f"silo {silo_id} starts no secure session without its identity and roster: its policy asks for a "
            f"guarantee against a malicious server (malicious_server), which could swap the unauthenticated "
            f"DH keys it relays (make them with `uldp roster identity` and `uldp roster add`)"
        )
    return credentials


class SiloAggregation(abc.ABC):
    """One silo's side of one aggregation: answers one stage at a time (the order and the one answer per round index
    are the secure drivers' own).

    Attributes:
        kind: As :attr:`ServerAggregation.kind`.
        setup_stages: The set-up's stages, in order.
        round_stages: A round's stages; the last one's answer is the silo's (masked) update.
    """

    kind: ClassVar[str]
    setup_stages: tuple[str, ...] = ()
    round_stages: tuple[str, ...] = (PLAIN_UPDATE,)

    @abc.abstractmethod
    def answer(
        self, stage: str, round_index: int, payloads: Payloads, *, work: RoundWork | None = None
    ) -> Payloads:
        """This silo's answer to one stage; ``work`` is the round's computation (update stages only).

        Raises:
            ValueError: a stage out of order, a round answered already, or a message that fails the checks.
        """

    def sample(self, round_index: int, n_users: int) -> np.ndarray:
        """Beyond the paper, round ``round_index``'s user sample the silos drew (bool [|U|]; a session started with
        ``sample_rate``), unknown to the server (:mod:`uldp.secure.sampling`).

        Raises:
            ValueError: an aggregation without pairwise keys, or a session without the silos' sample.
        """
        raise ValueError(
            f"the {self.kind} aggregation has no sample the silos draw: they agree on one under the pairwise keys "
            f"of secure aggregation (the policy's sampler='silos' needs it)"
        )


class PlainSilo(SiloAggregation):
    """The update in the clear (the explicit opt-out of secure aggregation)."""

    kind = PLAIN

    @classmethod
    def start(
        cls,
        previous: SiloAggregation | None,
        *,
        silo_id: int,
        n_silos: int,
        counts: np.ndarray,
        protocol: Callable[[], ProtocolConfig],
        credentials: Credentials | None = None,
        malicious_server: bool = False,
        sample_rate: float | None = None,
    ) -> PlainSilo:
        """Nothing to set up: the plain side keeps no state (and no keys to authenticate)."""
        return cls()

    def answer(
        self, stage: str, round_index: int, payloads: Payloads, *, work: RoundWork | None = None
    ) -> Payloads:
        if stage != PLAIN_UPDATE or work is None:
            raise ValueError(
                f"a plain silo answers only {PLAIN_UPDATE!r} with its update, not {stage!r}: a run "
                f"without secure aggregation has no set-up"
            )
        return (array_to_bytes(work.update()),)


class MaskedSumSide(SiloAggregation):
    """The silo's masked sum (:class:`uldp.secure.masked_sum.MaskedSumSilo`)."""

    kind = MASKED_SUM

    def __init__(self, silo: MaskedSumSilo) -> None:
        from uldp.secure.masked_sum import SETUP_STAGES, STAGE_UPDATE

        self.silo = silo
        self.setup_stages, self.round_stages = SETUP_STAGES, (STAGE_UPDATE,)

    @classmethod
    def start(
        cls,
        previous: SiloAggregation | None,
        *,
        silo_id: int,
        n_silos: int,
        counts: np.ndarray,
        protocol: Callable[[], ProtocolConfig],
        credentials: Credentials | None = None,
        malicious_server: bool = False,
        sample_rate: float | None = None,
    ) -> MaskedSumSide:
        """A new session (fresh keys, signed and checked with ``credentials``, :func:`trusted_keys`); the rounds the
        previous one answered stay answered."""
        from uldp.secure.masked_sum import MaskedSumSilo

        answered = previous.silo.answered_round if isinstance(previous, MaskedSumSide) else 0
        return cls(
            MaskedSumSilo(
                silo_id,
                n_silos,
                answered_round=answered,
                sample_rate=sample_rate,
                credentials=trusted_keys(
                    credentials, silo_id=silo_id, malicious_server=malicious_server
                ),
            )
        )

    def answer(
        self, stage: str, round_index: int, payloads: Payloads, *, work: RoundWork | None = None
    ) -> Payloads:
        return self.silo.answer(
            stage, round_index, payloads, update=None if work is None else work.update
        )

    def sample(self, round_index: int, n_users: int) -> np.ndarray:
        return self.silo.sample(round_index, n_users)


class Protocol1Side(SiloAggregation):
    """The silo's Protocol 1 (:class:`uldp.secure.driver.SiloDriver`): steps 1(a)-(e) and 2(b)-(c)."""

    kind = PROTOCOL_1

    def __init__(self, driver: SiloDriver) -> None:
        from uldp.secure.driver import ROUND_STAGES, SETUP_STAGES

        self.driver = driver
        self.setup_stages, self.round_stages = SETUP_STAGES, ROUND_STAGES

    @classmethod
    def start(
        cls,
        previous: SiloAggregation | None,
        *,
        silo_id: int,
        n_silos: int,
        counts: np.ndarray,
        protocol: Callable[[], ProtocolConfig],
        credentials: Credentials | None = None,
        malicious_server: bool = False,
        sample_rate: float | None = None,
    ) -> Protocol1Side:
        """A new session (``p1-key`` again): its last answered round and its ring-Pedersen verifier stay, so no
        round is answered twice under fresh keys and the server proves its modulus against the same parameters.
        With ``credentials`` its key is signed at 1(a) and every relayed key checked at 1(b) (:func:`trusted_keys`);
        ``malicious_server`` also refuses a backend that cannot check the server's weights."""
        from uldp.secure.driver import SiloDriver, SiloProgress

        earlier = previous.driver if isinstance(previous, Protocol1Side) else None
        return cls(
            SiloDriver(
                silo_id,
                counts,
                protocol(),
                verifier=earlier.role.verifier if earlier else None,
                progress=SiloProgress(
                    answered_round=earlier.progress.answered_round if earlier else 0
                ),
                malicious_server=malicious_server,
                sample_rate=sample_rate,
                credentials=trusted_keys(
                    credentials, silo_id=silo_id, malicious_server=malicious_server
                ),
            )
        )

    def answer(
        self, stage: str, round_index: int, payloads: Payloads, *, work: RoundWork | None = None
    ) -> Payloads:
        return self.driver.answer(
            stage, round_index, payloads, inputs=None if work is None else work.secure_inputs
        )

    def sample(self, round_index: int, n_users: int) -> np.ndarray:
        return self.driver.sample(round_index)


#: The silo side of each aggregation, by kind: ``SILO_SESSIONS[kind].start(previous, ...)`` begins a session.
SILO_SESSIONS: dict[str, type[PlainSilo | MaskedSumSide | Protocol1Side]] = {
    PLAIN: PlainSilo,
    MASKED_SUM: MaskedSumSide,
    PROTOCOL_1: Protocol1Side,
}
