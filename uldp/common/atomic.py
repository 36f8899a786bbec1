"""Atomic file writes: a reader sees the old file or the new one, never a half-written one."""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path
from typing import Any


def write_bytes_atomic(path: str | Path, data: bytes, *, private: bool = False) -> None:
    """Write ``data`` to ``path`` atomically: temporary file in the same directory, fsync, rename, fsync of the
    directory.

    Args:
        path: Destination; its directory is created if missing.
        data: The bytes.
        private: Make the file readable by its owner only (keys).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # Named before it exists (not mkstemp): a signal that stops the process while the file is being created still
    # finds its name in the cleanup below.
    temporary = path.parent / f".{path.name}.{secrets.token_hex(8)}.tmp"
    try:
        handle = os.open(
            temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o600
        )
        if not private and hasattr(
            os, "fchmod"
        ):  # created owner-only; others may read checkpoints and results
            os.fchmod(handle, 0o644)
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    if hasattr(os, "O_DIRECTORY"):  # make the rename itself durable (POSIX)
        directory = os.open(path.parent, os.O_DIRECTORY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)


def remove_leftovers(path: str | Path) -> list[Path]:
    """Delete the temporary files that :func:`write_bytes_atomic` left next to ``path`` when a process was killed.

    Call it when a program starts that owns ``path`` (a checkpoint's resume): nothing else writes those names.

    Returns:
        The deleted files.
    """
    path = Path(path)
    if not path.parent.is_dir():
        return []
    leftovers = [p for p in path.parent.glob(f".{path.name}.*.tmp") if p.is_file()]
    for leftover in leftovers:
        leftover.unlink(missing_ok=True)
    return leftovers


def check_writable(path: str | Path, what: str) -> Path:
    """Refuse a destination that cannot be written, before any work is done for it.

    Creates the missing parent directories (as :func:`write_bytes_atomic` would) and probes the directory with an
    empty temporary file of the writer's own pattern, so a read-only file system or a pseudo file system is caught,
    whatever the permissions say.

    Args:
        path: The file to be written later with :func:`write_bytes_atomic`.
        what: Its name for the message (``"--checkpoint"``).

    Returns:
        ``path`` as a Path.

    Raises:
        ValueError: ``path`` is a directory, or a file cannot be created beside it.
    """
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{what} {path} is a directory; give a file path")
    probe = path.parent / f".{path.name}.{secrets.token_hex(8)}.tmp"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        probe.unlink()
    except OSError as error:
        raise ValueError(f"{what} {path} cannot be written ({error.strerror or error})") from error
    return path


def write_json_atomic(path: Path, payload: Any) -> None:
    """Write ``payload`` as JSON to ``path`` atomically: a temporary file in the same folder, then ``os.replace``.

    A reader never sees a half-written file, and a crash leaves either the old file or none (the temporary file
    is removed on any error).

    Raises:
        ValueError: ``payload`` is not JSON-serialisable (nothing is written).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        text = json.dumps(payload, indent=1, allow_nan=False)
    except TypeError as error:
        raise ValueError(f"cannot store {path.name}: {error}") from error
    write_bytes_atomic(path, text.encode("utf-8"))


def read_complete_json(path: str | Path, *, schema: int) -> dict[str, Any] | None:
    """The JSON object stored at ``path`` by :func:`write_json_atomic` if it is a complete result of ``schema``: an
    object whose ``schema`` is ``schema`` and that holds a ``result``; ``None`` for a missing, unreadable, older or
    incomplete file (a run to do again). The caller checks the content.
    """
    try:
        payload = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(payload, dict) or payload.get("schema") != schema or "result" not in payload:
        return None
    return payload
