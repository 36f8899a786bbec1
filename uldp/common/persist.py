"""Bytes that outlive a process: the array encoding, configuration fingerprints and the resumable checkpoint.

It sits below both :mod:`uldp.simulation` (and :mod:`uldp.fitting`) and :mod:`uldp.flower` (which :mod:`uldp.deploy`
runs), which write the same checkpoints and fingerprints, and the federation sends its arrays in the same encoding
(:mod:`uldp.federation` and :mod:`uldp.flower.messages` carry them in Flower's messages).

Array encoding (:func:`array_to_bytes`): ``b"ULDA"`` | u8 dtype code (1 float32, 2 float64, 3 int64, 4 bool) | u8
number of dimensions | u64 per dimension | the little-endian data | SHA-256 of everything before it. The digest is
unkeyed on purpose: it detects corruption and truncation, not forgery. Whoever can change bytes on a link could
recompute any digest whose key both ends hold, and every party of a federation would hold it; authenticity is TLS's
and SuperNode authentication's (:mod:`uldp.deploy.credentials`). Readers check lengths and the digest and never
unpickle.

Checkpoint file: ``b"ULDPCKPT"`` | u32 length of a JSON header | the header (``rounds_done``,
``config_fingerprint``, ``history``) | the model as :func:`array_to_bytes` | SHA-256 of everything before it. A
checkpoint is written to a temporary file in the same directory, flushed and fsynced, then renamed over the old one
(``os.replace`` is atomic on POSIX and Windows), so a crash leaves either the old or the new checkpoint, never a torn
one; the temporary files a killed writer leaves are deleted when the checkpoint is next read.

>>> import tempfile, pathlib
>>> values = np.arange(6, dtype=np.float32).reshape(2, 3)
>>> restored = array_from_bytes(array_to_bytes(values))
>>> restored.dtype == values.dtype and bool((restored == values).all())
True
>>> path = pathlib.Path(tempfile.mkdtemp()) / "model.ckpt"
>>> rows = ({"round": 1, "loss": 0.7}, {"round": 2, "loss": 0.6})
>>> save_checkpoint(path, Checkpoint(rounds_done=2, params=np.ones(3, np.float32), config_fingerprint="ab",
...                                  history=rows))
>>> load_checkpoint(path, config_fingerprint="ab").rounds_done
2
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import struct
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from uldp.common.atomic import remove_leftovers, write_bytes_atomic
from uldp.common.checks import check_integer

if TYPE_CHECKING:
    from collections.abc import Mapping

ARRAY_MAGIC = b"ULDA"
_DTYPES: dict[str, int] = {"<f4": 1, "<f8": 2, "<i8": 3, "|b1": 4}
_CODES = {code: np.dtype(name) for name, code in _DTYPES.items()}
_BY_NAME = {
    np.dtype(name).name: name for name in _DTYPES
}  # "float32" -> "<f4", whatever the byte order
_HEADER = struct.Struct("<4sBB")  # magic, dtype code, number of dimensions
MAX_DIMENSIONS = 32  # NumPy's own limit is 64; no array of the deployment has more than 2
_DIGEST_BYTES = 32

MAGIC = b"ULDPCKPT"
_LENGTH = struct.Struct("<I")


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
        raise ValueError(
            f"cannot serialise dtype {array.dtype}; allowed: float32, float64, int64, bool"
        )
    if array.ndim > MAX_DIMENSIONS:
        raise ValueError(
            f"cannot serialise an array of {array.ndim} dimensions; at most {MAX_DIMENSIONS}"
        )
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
        raise ValueError(
            f"malformed array: {ndim} dimensions (at most {MAX_DIMENSIONS}) in {len(body)} bytes"
        )
    shape = struct.unpack_from(f"<{ndim}Q", body, _HEADER.size)
    dtype = _CODES[code]
    expected = math.prod(shape) * dtype.itemsize  # Python integers: no overflow for forged sizes
    if len(body) - shape_end != expected:
        raise ValueError(
            f"malformed array: {len(body) - shape_end} data bytes for shape {shape} of {dtype}"
        )
    return np.frombuffer(body, dtype=dtype, offset=shape_end).reshape(shape).copy()


def fingerprint(config: Mapping[str, Any]) -> str:
    """SHA-256 (hex) of a configuration's canonical JSON: equal exactly when every field is equal.

    >>> fingerprint({"b": 1, "a": [2]}) == fingerprint({"a": [2], "b": 1})
    True
    """
    text = json.dumps(dict(config), sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


#: The prefix of a :func:`fields_fingerprint` (a fingerprint that can name the fields in which two differ).
FIELDS_PREFIX = "fields:"


def fields_fingerprint(fields: Mapping[str, Any]) -> str:
    """A fingerprint that keeps one short digest per field, so that a mismatch can name the fields that differ.

    Each field's value is digested alone (its ``repr``, or the hex digest a caller computed for data); the result is
    ``"fields:"`` and the canonical JSON of ``{name: digest}``. A value of few possibilities (a learning rate) can be
    guessed from its digest: a secret (a seed) goes in together with something a guesser lacks (the data's digest).

    >>> a, b = fields_fingerprint({"sigma": 1.0, "q": 0.5}), fields_fingerprint({"sigma": 2.0, "q": 0.5})
    >>> differing_fields(a, b)
    ['sigma']
    """
    digests = {
        name: hashlib.sha256(repr(value).encode()).hexdigest()[:16]
        for name, value in fields.items()
    }
    return FIELDS_PREFIX + json.dumps(digests, sort_keys=True, separators=(",", ":"))


def differing_fields(saved: str, current: str) -> list[str] | None:
    """The names of the fields in which two :func:`fields_fingerprint` differ (``None``: not both of that kind)."""
    if not (saved.startswith(FIELDS_PREFIX) and current.startswith(FIELDS_PREFIX)):
        return None
    try:
        old, new = (
            json.loads(saved[len(FIELDS_PREFIX) :]),
            json.loads(current[len(FIELDS_PREFIX) :]),
        )
    except ValueError:
        return None
    if not isinstance(old, dict) or not isinstance(new, dict):
        return None
    return sorted(name for name in set(old) | set(new) if old.get(name) != new.get(name))


@dataclass(frozen=True)
class Checkpoint:
    """The global model after ``rounds_done`` completed rounds of one configuration.

    Attributes:
        rounds_done: Rounds accounted (the next round to run is ``rounds_done + 1``). In a federation
            (:class:`ReleaseLedger`, :mod:`uldp.flower.recovery`) every round index asked, completed or aborted:
            ``history`` says which, and ``params`` is the model after the last completed one.
        params: The flat global model.
        config_fingerprint: :func:`fingerprint` of the run configuration it belongs to.
        history: Per-round records (JSON-serialisable dicts), for reporting.
    """

    rounds_done: int
    params: np.ndarray
    config_fingerprint: str
    history: tuple[dict, ...] = field(default_factory=tuple)


def save_checkpoint(path: str | Path, checkpoint: Checkpoint) -> None:
    """Write ``checkpoint`` atomically (temporary file, fsync, rename, fsync of the directory).

    Args:
        path: Destination file; its directory is created if missing.
        checkpoint: What to write.
    """
    header = json.dumps(
        {
            "rounds_done": checkpoint.rounds_done,
            "config_fingerprint": checkpoint.config_fingerprint,
            "history": list(checkpoint.history),
        }
    ).encode()
    body = MAGIC + _LENGTH.pack(len(header)) + header + array_to_bytes(checkpoint.params)
    write_bytes_atomic(path, body + hashlib.sha256(body).digest())


def load_checkpoint(
    path: str | Path,
    *,
    config_fingerprint: str,
    like: np.ndarray | None = None,
    option: str = "--checkpoint",
) -> Checkpoint | None:
    """Read the checkpoint at ``path`` if there is one (and delete temporary files a killed writer left beside it).

    Args:
        path: The checkpoint file.
        config_fingerprint: The fingerprint of the configuration about to run; a checkpoint of another
            configuration is refused rather than silently continued.
        like: The model it must match (dtype and shape), e.g. the initial model; None checks neither.
        option: How the caller names the checkpoint's path in messages (``"--checkpoint"``, ``"checkpoint="``).

    Returns:
        The checkpoint, or ``None`` when the file does not exist.

    Raises:
        ValueError: if the file is corrupted, malformed (header, ``rounds_done``, ``history``, model not finite or
            not of ``like``'s dtype and shape) or belongs to another configuration.
    """
    path = Path(path)
    remove_leftovers(path)
    if not path.exists():
        return None
    data = path.read_bytes()
    body, digest = data[:-_DIGEST_BYTES], data[-_DIGEST_BYTES:]
    if not data.startswith(MAGIC) or not hmac.compare_digest(hashlib.sha256(body).digest(), digest):
        raise ValueError(
            f"checkpoint {path} is corrupted (bad magic or digest); delete it to start afresh"
        )
    try:
        (length,) = _LENGTH.unpack_from(body, len(MAGIC))
        start = len(MAGIC) + _LENGTH.size
        if start + length > len(body):
            raise ValueError(f"header length {length} exceeds the file")
        header = json.loads(body[start : start + length])
        params = array_from_bytes(body[start + length :])
        _check_header(header)
    except (
        ValueError,
        struct.error,
        RecursionError,
    ) as error:  # UnicodeDecodeError is a ValueError
        raise ValueError(
            f"checkpoint {path} is malformed ({error}); delete it to start afresh"
        ) from error
    if header["config_fingerprint"] != config_fingerprint:
        differing = differing_fields(header["config_fingerprint"], config_fingerprint)
        what = (
            f"fingerprint {header['config_fingerprint'][:12]}, this run {config_fingerprint[:12]}"
            if differing is None
            else f"these differ: {', '.join(differing)}"
        )
        raise ValueError(
            f"checkpoint {path} belongs to another configuration ({what}); use another {option} path "
            "or the original configuration"
        )
    if like is not None and (params.dtype != like.dtype or params.shape != like.shape):
        raise ValueError(
            f"checkpoint {path} holds a model of {params.dtype} {params.shape}, this run's is "
            f"{like.dtype} {like.shape}; delete it to start afresh"
        )
    if params.dtype.kind == "f" and not np.isfinite(params).all():
        raise ValueError(
            f"checkpoint {path} holds a model with NaN or infinite values; delete it to start afresh"
        )
    return Checkpoint(
        rounds_done=header["rounds_done"],
        params=params,
        config_fingerprint=header["config_fingerprint"],
        history=tuple(header["history"]),
    )


def _check_header(header: object) -> None:
    """A checkpoint header: exactly rounds_done (int >= 0), config_fingerprint (str) and one history dict per round."""
    if not isinstance(header, dict) or set(header) != {
        "rounds_done",
        "config_fingerprint",
        "history",
    }:
        raise ValueError(
            f"the header must hold rounds_done, config_fingerprint and history, got {str(header)[:80]}"
        )
    rounds = check_integer("rounds_done", header["rounds_done"], minimum=0)
    if not isinstance(header["config_fingerprint"], str):
        raise ValueError(
            f"config_fingerprint must be a string, got {header['config_fingerprint']!r:.40}"
        )
    history = header["history"]
    if (
        not isinstance(history, list)
        or len(history) != rounds
        or not all(isinstance(r, dict) for r in history)
    ):
        raise ValueError(
            f"history must be a list of {rounds} per-round objects, got {str(history)[:80]}"
        )


#: The reason a ledger records for a round before it is asked; replaced when the round completes or aborts.
IN_FLIGHT = (
    "in flight: the run stopped before the round completed (its answers may have been released)"
)


class CheckpointFailed(RuntimeError):
    """A checkpoint could not be written (a full disk, a removed folder); the message names the path."""


class ReleaseLedger:
    """Every round index a federation asked, each accounted *before* it is asked, with the last good model.

    The accounting of retried rounds (the Flower strategy, :mod:`uldp.flower.recovery`, which ``uldp deploy``
    runs): each round asked is one release of the method's Gaussian mechanism (Theorems 1-3;
    Lemma 4 for the sub-sampled Gaussian), and a round asked again after a fault, with fresh noise and a fresh user
    sample, is one more adaptive
    composition, never a free repeat. So a round index is never reused: :meth:`begin` records round t as in flight
    (:data:`IN_FLIGHT`) with the epsilon of t releases and writes the checkpoint before anything goes out; then
    :meth:`complete` replaces the record and the model, or :meth:`abort` says why and who answered. A crash, a
    network cut or a checkpoint write that fails after the silos answered leaves round t counted, and a run resumed
    from the checkpoint continues at :attr:`next_round`. A round asked but answered by no one is counted too: after
    a crash the server cannot know, and counting it is the safe side.

    The file is a :class:`Checkpoint` whose ``rounds_done`` is the last round index asked and whose history holds
    one record per index: a completed round (any JSON fields and ``epsilon``), or an aborted one (``aborted``: why,
    ``answered``: who had answered, when known, ``epsilon``). ``params`` is the model after the last completed round.

    Args:
        path: The checkpoint file, or None to keep the ledger in memory only.
        config_fingerprint: :func:`fingerprint` of the run; a checkpoint of another run is refused.
        initial: The initial model (a checkpoint must hold one of its dtype and shape).

    Raises:
        ValueError: the checkpoint belongs to another run, or is corrupted or malformed (see :func:`load_checkpoint`).
    """

    def __init__(
        self, path: str | Path | None, *, config_fingerprint: str, initial: np.ndarray
    ) -> None:
        self.path = None if path is None else Path(path)
        self.config_fingerprint = config_fingerprint
        loaded = (
            load_checkpoint(self.path, config_fingerprint=config_fingerprint, like=initial)
            if self.path is not None
            else None
        )
        self.params: np.ndarray = loaded.params if loaded else initial
        self.history: list[dict] = list(loaded.history) if loaded else []
        self.resumed_from = len(self.history)

    @property
    def next_round(self) -> int:
        """The next round index to ask (one more than every index asked so far)."""
        return len(self.history) + 1

    @property
    def completed(self) -> int:
        """Completed rounds (model updates)."""
        return sum("aborted" not in record for record in self.history)

    @property
    def in_round(self) -> bool:
        """Whether the last round asked has not completed (in flight or aborted)."""
        return bool(self.history) and "aborted" in self.history[-1]

    def begin(self, epsilon: float | None) -> int:
        """Account the next round as in flight, with ``epsilon`` after its release, and write the checkpoint.

        Returns:
            The round index, to be asked only now.

        Raises:
            CheckpointFailed: nothing is accounted, and the round must not be asked.
        """
        self.history.append({"round": self.next_round, "aborted": IN_FLIGHT, "epsilon": epsilon})
        try:
            self.save()
        except CheckpointFailed:
            self.history.pop()
            raise
        return len(self.history)

    def complete(self, params: np.ndarray, record: dict) -> None:
        """The round in flight completed: ``params`` is the new model, ``record`` its history record.

        Raises:
            CheckpointFailed: the file still counts the round as in flight (a resume continues after it).
        """
        self.params = params
        self.history[-1] = {
            "round": len(self.history),
            **record,
            "epsilon": self.history[-1]["epsilon"],
        }
        self.save()

    def abort(self, reason: str, answered: list) -> None:
        """The round in flight aborted: record why and who answered (best effort: the in-flight record already
        counts the release)."""
        self.history[-1] = {**self.history[-1], "aborted": reason, "answered": answered}
        with suppress(CheckpointFailed):
            self.save()

    def save(self) -> None:
        """Replace the checkpoint atomically (nothing without a path).

        Raises:
            CheckpointFailed: naming the path and the operating system's reason (a full disk, say).
        """
        if self.path is None:
            return
        checkpoint = Checkpoint(
            rounds_done=len(self.history),
            params=self.params,
            config_fingerprint=self.config_fingerprint,
            history=tuple(self.history),
        )
        try:
            save_checkpoint(self.path, checkpoint)
        except OSError as error:
            raise CheckpointFailed(
                f"cannot write the checkpoint {self.path}: {error.strerror or error}"
            ) from error
