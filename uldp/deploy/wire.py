"""What travels between the server and the silos: explicit byte formats inside Flower's messages (no pickle).

Every exchange is one Flower ``FitIns`` (server to silo) answered by one ``FitRes`` (silo to server). The stage
name, round index and small values ride in Flower's typed config/metrics maps (protobuf scalars); bulk payloads
(model vectors, deltas, Protocol 1 messages) ride in ``Parameters.tensors`` as ``bytes``, each in one of two
self-describing formats: arrays as written by :func:`array_to_bytes`, and Protocol 1 messages as written by
:meth:`uldp.secure.messages.Message.to_bytes`. Receivers parse with length and digest checks and never unpickle.

The arrays' SHA-256 digest is unkeyed on purpose: it detects corruption and truncation, not forgery. Whoever can
change bytes on the link could recompute any digest whose key both ends hold, and every party of a federation would
hold it; authenticity of the link is TLS's job (``--ssl-*``), who is on the other end the handshake's (HMAC under the
silo's own key, :mod:`uldp.deploy.keys`), and silo-to-silo secrets travel inside Protocol 1's AEAD. The server
checks every array it receives for exact dtype, shape and finite values before using it.

>>> import numpy as np
>>> values = np.arange(6, dtype=np.float32).reshape(2, 3)
>>> restored = array_from_bytes(array_to_bytes(values))
>>> restored.dtype == values.dtype and bool((restored == values).all())
True
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import struct
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

ARRAY_MAGIC = b"ULDA"
#: Version of the deployment's wire protocol; a silo speaking another version is refused at the handshake.
WIRE_VERSION = 1
_DTYPES: dict[str, int] = {"<f4": 1, "<f8": 2, "<i8": 3, "|b1": 4}
_CODES = {code: np.dtype(name) for name, code in _DTYPES.items()}
_BY_NAME = {np.dtype(name).name: name for name in _DTYPES}  # "float32" -> "<f4", whatever the byte order
_HEADER = struct.Struct("<4sBB")  # magic, dtype code, number of dimensions
MAX_DIMENSIONS = 32  # NumPy's own limit is 64; no array of the deployment has more than 2
_DIGEST_BYTES = 32

#: Stages of the deployment protocol (the ``stage`` entry of every instruction).
STAGE_HELLO = "hello"  # handshake: config fingerprint, silo id, authentication (get_properties)
STAGE_REFUSE = "refuse"  # the server refuses a silo and says why
STAGE_SECURE_KEYS = "secure-keys"  # Protocol 1 step 1(a)
STAGE_SECURE_DIRECTORY = "secure-directory"  # step 1(b)
STAGE_SECURE_SEED = "secure-seed"  # steps 1(c)-(e)
STAGE_TRAIN = "train"  # one round: the global model in, the silo's contribution (or Protocol 1 shares) out
STAGE_SECURE_UPDATE = "secure-update"  # Protocol 1 step 2(b): relayed shares in, masked update out
STAGE_FINISH = "finish"  # the federation is over: the final model, for the silo's records


def array_to_bytes(values: np.ndarray) -> bytes:
    """Serialise a numeric array: magic, dtype code, shape, little-endian data, SHA-256 of all before it.

    Args:
        values: float32, float64, int64 or bool array (any shape).

    Returns:
        The bytes.

    Raises:
        ValueError: for another dtype.
    """
    array = np.asarray(values)
    name = _BY_NAME.get(array.dtype.name)
    if name is None:
        raise ValueError(f"cannot serialise dtype {array.dtype}; allowed: float32, float64, int64, bool")
    if array.ndim > MAX_DIMENSIONS:
        raise ValueError(f"cannot serialise an array of {array.ndim} dimensions; at most {MAX_DIMENSIONS}")
    body = _HEADER.pack(ARRAY_MAGIC, _DTYPES[name], array.ndim)
    body += struct.pack(f"<{array.ndim}Q", *array.shape)
    body += np.ascontiguousarray(array, dtype=np.dtype(name)).tobytes()
    return body + hashlib.sha256(body).digest()


def array_from_bytes(data: bytes) -> np.ndarray:
    """Parse bytes written by :func:`array_to_bytes`, checking magic, dtype, lengths and digest.

    Raises:
        ValueError: if the bytes are not a well-formed array.
    """
    if len(data) < _HEADER.size + _DIGEST_BYTES:
        raise ValueError(f"malformed array: {len(data)} bytes is shorter than a header")
    body, digest = data[:-_DIGEST_BYTES], data[-_DIGEST_BYTES:]
    if not hmac.compare_digest(hashlib.sha256(body).digest(), digest):
        raise ValueError("malformed array: digest mismatch (corrupted or truncated)")
    magic, code, ndim = _HEADER.unpack_from(body)
    if magic != ARRAY_MAGIC or code not in _CODES:
        raise ValueError(f"malformed array: bad magic {magic!r} or dtype code {code}")
    shape_end = _HEADER.size + 8 * ndim
    if ndim > MAX_DIMENSIONS or shape_end > len(body):
        raise ValueError(f"malformed array: {ndim} dimensions (at most {MAX_DIMENSIONS}) in {len(body)} bytes")
    shape = struct.unpack_from(f"<{ndim}Q", body, _HEADER.size)
    dtype = _CODES[code]
    expected = math.prod(shape) * dtype.itemsize  # Python integers: no overflow for forged sizes
    if len(body) - shape_end != expected:
        raise ValueError(f"malformed array: {len(body) - shape_end} data bytes for shape {shape} of {dtype}")
    return np.frombuffer(body, dtype=dtype, offset=shape_end).reshape(shape).copy()


def fingerprint(config: Mapping[str, Any]) -> str:
    """SHA-256 (hex) of a configuration's canonical JSON: equal exactly when every field is equal.

    >>> fingerprint({"b": 1, "a": [2]}) == fingerprint({"a": [2], "b": 1})
    True
    """
    text = json.dumps(dict(config), sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


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
        return FitRes(Status(Code.OK, ""), Parameters(tensors=list(self.payloads), tensor_type="uldp"), n_records, metrics)

    @classmethod
    def from_flower(cls, res: Any) -> Reply:
        """Parse a Flower ``FitRes``."""
        metrics = dict(res.metrics)
        error = str(metrics.pop("error", ""))
        return cls(metrics, tuple(res.parameters.tensors), error)
