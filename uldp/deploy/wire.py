"""What travels between the server and the silos: explicit byte formats inside Flower's messages (no pickle).

Every exchange is one Flower ``FitIns`` (server to silo) answered by one ``FitRes`` (silo to server). The stage
name, round index and small values ride in Flower's typed config/metrics maps (protobuf scalars); bulk payloads
(model vectors, deltas, Protocol 1 messages) ride in ``Parameters.tensors`` as ``bytes``, each in one of two
self-describing formats: arrays as written by :func:`uldp.common.persist.array_to_bytes` (the checkpoints' encoding
too), and Protocol 1 messages as written by :meth:`uldp.secure.messages.Message.to_bytes`. Receivers parse with length
and digest checks and never unpickle.

The arrays' SHA-256 digest is unkeyed on purpose (:mod:`uldp.common.persist`): authenticity of the link is TLS's job
(``--ssl-*``), who is on the other end the handshake's (HMAC under the silo's own key, :mod:`uldp.deploy.keys`),
and silo-to-silo secrets travel inside Protocol 1's AEAD. The server checks every array it receives for exact
dtype, shape and finite values before using it. Flower is imported where a message is built, not here: the
server and the silo set ``FLWR_TELEMETRY_ENABLED`` before Flower reads it on import.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Mapping

#: Version of the deployment's wire protocol; a silo speaking another version is refused at the handshake.
WIRE_VERSION = 1

#: Stages of the deployment protocol (the ``stage`` entry of every instruction).
STAGE_HELLO = "hello"  # handshake: config fingerprint, silo id, authentication (get_properties)
STAGE_REFUSE = "refuse"  # the server refuses a silo and says why
STAGE_SECURE_KEYS = "secure-keys"  # Protocol 1 step 1(a)
STAGE_SECURE_DIRECTORY = "secure-directory"  # step 1(b)
STAGE_SECURE_SEED = "secure-seed"  # steps 1(c)-(e)
STAGE_TRAIN = (
    "train"  # one round: the model in, the silo's contribution (masked, or Protocol 1 shares) out
)
STAGE_SECURE_CHECK = "secure-check"  # beyond the paper: the silos' check of the server's weights
STAGE_SECURE_UPDATE = "secure-update"  # Protocol 1 step 2(b): relayed shares in, masked update out
STAGE_FINISH = "finish"  # the federation is over: the final model, for the silo's records
STAGE_SUM_KEYS = (
    "sum-keys"  # the masked sum of plain updates (uldp.secure.masked_sum), step 1: X25519 keys
)
STAGE_SUM_DIRECTORY = (
    "sum-directory"  # step 2: the directory of keys (each train answer is then masked)
)
STAGE_SUM_SAMPLE = "sum-sample"  # beyond the paper: the silos' sealed shares of their sampling seed


@dataclass(frozen=True)
class Instruction:
    """One server-to-silo instruction: a stage, a round, small scalars and byte payloads.

    Attributes:
        stage: One of the ``STAGE_*`` names.
        round_index: The round it belongs to (0 for setup stages).
        values: Small typed values (int, float, str, bytes, bool) carried in Flower's config map.
        payloads: Byte payloads carried in Flower's ``Parameters.tensors``.
    """

    stage: str
    round_index: int = 0
    values: Mapping[str, Any] = field(default_factory=dict)
    payloads: tuple[bytes, ...] = ()

    def to_flower(self) -> Any:
        """Return the Flower ``FitIns`` carrying this instruction."""
        from flwr.common import FitIns, Parameters

        config = {"stage": self.stage, "round": self.round_index, **self.values}
        return FitIns(Parameters(tensors=list(self.payloads), tensor_type="uldp"), config)

    @classmethod
    def from_flower(cls, ins: Any) -> Instruction:
        """Parse a Flower ``FitIns``.

        Raises:
            ValueError: if it carries no stage.
        """
        config = dict(ins.config)
        stage, round_index = config.pop("stage", None), config.pop("round", 0)
        if not isinstance(stage, str):
            raise ValueError(f"instruction without a stage (config keys: {sorted(ins.config)})")
        return cls(stage, int(round_index), config, tuple(ins.parameters.tensors))


@dataclass(frozen=True)
class Reply:
    """One silo-to-server reply: small typed values, byte payloads, or an error message.

    Attributes:
        values: Small typed values (Flower metrics map).
        payloads: Byte payloads.
        error: Non-empty when the silo could not carry out the instruction (the server aborts with it).
    """

    values: Mapping[str, Any] = field(default_factory=dict)
    payloads: tuple[bytes, ...] = ()
    error: str = ""

    def to_flower(self, n_records: int = 0) -> Any:
        """Return the Flower ``FitRes`` carrying this reply."""
        from flwr.common import Code, FitRes, Parameters, Status

        metrics = dict(self.values)
        if self.error:
            metrics["error"] = self.error
        parameters = Parameters(tensors=list(self.payloads), tensor_type="uldp")
        return FitRes(Status(Code.OK, ""), parameters, n_records, metrics)

    @classmethod
    def from_flower(cls, res: Any) -> Reply:
        """Parse a Flower ``FitRes``."""
        metrics = dict(res.metrics)
        error = str(metrics.pop("error", ""))
        return cls(metrics, tuple(res.parameters.tensors), error)
