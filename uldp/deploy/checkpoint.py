"""The server's last good model, written atomically after every completed round, so a federation can resume.

The in-process simulation uses the same format (:func:`uldp.simulation.run` with ``checkpoint=``): an interrupted
run, or an experiment grid stopped in the middle of a long run, resumes from its last saved round.

File format: ``b"ULDPCKPT"`` | u32 length of a JSON header | the header (``rounds_done``, ``config_fingerprint``,
``history``) | the model as :func:`uldp.deploy.wire.array_to_bytes` (which ends with its own SHA-256) | SHA-256 of
everything before it. A checkpoint is written to a temporary file in the same directory, flushed and fsynced, then
renamed over the old one (``os.replace`` is atomic on POSIX and Windows), so a crash leaves either the old or the new
checkpoint, never a torn one; the temporary files a killed writer leaves are deleted when the checkpoint is next read.

>>> import tempfile, numpy as np, pathlib
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
import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from uldp.atomic import remove_leftovers, write_bytes_atomic

from uldp.deploy.wire import array_from_bytes, array_to_bytes

MAGIC = b"ULDPCKPT"
_LENGTH = struct.Struct("<I")
_DIGEST_BYTES = 32


@dataclass(frozen=True)
class Checkpoint:
    """The global model after ``rounds_done`` completed rounds of one configuration.

    Attributes:
        rounds_done: Completed rounds (the next round to run is ``rounds_done + 1``).
        params: The flat global model.
        config_fingerprint: :func:`uldp.deploy.wire.fingerprint` of the run configuration it belongs to.
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


def load_checkpoint(path: str | Path, *, config_fingerprint: str, like: np.ndarray | None = None) -> Checkpoint | None:
    """Read the checkpoint at ``path`` if there is one (and delete temporary files a killed writer left beside it).

    Args:
        path: The checkpoint file.
        config_fingerprint: The fingerprint of the configuration about to run; a checkpoint of another
            configuration is refused rather than silently continued.
        like: The model it must match (dtype and shape), e.g. the initial model; None checks neither.

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
        raise ValueError(f"checkpoint {path} is corrupted (bad magic or digest); delete it to start afresh")
    try:
        (length,) = _LENGTH.unpack_from(body, len(MAGIC))
        start = len(MAGIC) + _LENGTH.size
        if start + length > len(body):
            raise ValueError(f"header length {length} exceeds the file")
        header = json.loads(body[start : start + length])
        params = array_from_bytes(body[start + length :])
        _check_header(header)
    except (ValueError, struct.error, RecursionError) as error:  # UnicodeDecodeError is a ValueError
        raise ValueError(f"checkpoint {path} is malformed ({error}); delete it to start afresh") from error
    if header["config_fingerprint"] != config_fingerprint:
        raise ValueError(
            f"checkpoint {path} belongs to another configuration (fingerprint {header['config_fingerprint'][:12]}, "
            f"this run {config_fingerprint[:12]}); use another --checkpoint path or the original configuration"
        )
    if like is not None and (params.dtype != like.dtype or params.shape != like.shape):
        raise ValueError(f"checkpoint {path} holds a model of {params.dtype} {params.shape}, this run's is "
                         f"{like.dtype} {like.shape}; delete it to start afresh")
    if params.dtype.kind == "f" and not np.isfinite(params).all():
        raise ValueError(f"checkpoint {path} holds a model with NaN or infinite values; delete it to start afresh")
    return Checkpoint(rounds_done=header["rounds_done"], params=params, config_fingerprint=header["config_fingerprint"],
                      history=tuple(header["history"]))


def _check_header(header: object) -> None:
    """A checkpoint header: exactly rounds_done (int >= 0), config_fingerprint (str) and one history dict per round."""
    from uldp.checks import check_integer

    if not isinstance(header, dict) or set(header) != {"rounds_done", "config_fingerprint", "history"}:
        raise ValueError(f"the header must hold rounds_done, config_fingerprint and history, got {str(header)[:80]}")
    rounds = check_integer("rounds_done", header["rounds_done"], minimum=0)
    if not isinstance(header["config_fingerprint"], str):
        raise ValueError(f"config_fingerprint must be a string, got {header['config_fingerprint']!r:.40}")
    history = header["history"]
    if not isinstance(history, list) or len(history) != rounds or not all(isinstance(r, dict) for r in history):
        raise ValueError(f"history must be a list of {rounds} per-round objects, got {str(history)[:80]}")
