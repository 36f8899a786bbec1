"""Provenance of a stored result: the command, the git commit (and whether the code had local changes), the package
versions, the machine and the date; and the key of a stored result (:func:`config_hash` of its canonical JSON).

The experiment grids (:mod:`uldp.paper.experiments`), the audits (:mod:`uldp.audit.jobs`) and the benchmarks store
their results with these."""

from __future__ import annotations

import datetime
import hashlib
import json
import math
import os
import platform
import subprocess
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

#: The repository root (results/ and _build/ live here).
REPO_ROOT = Path(__file__).resolve().parents[2]
#: Packages whose versions each result records.
PROVENANCE_PACKAGES: tuple[str, ...] = ("uldp", "torch", "numpy", "scipy", "opacus", "phe")


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", "-C", str(REPO_ROOT), *args], capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def provenance(command: str) -> dict[str, Any]:
    """Where a run comes from: command, git commit (and whether tracked files outside results/ had local changes),
    packages, machine.

    Args:
        command: The command line (or call) that started the grid.

    Returns:
        A JSON-ready dict; the date and wall time are added per run.
    """
    packages: dict[str, str | None] = {}
    for name in PROVENANCE_PACKAGES:
        try:
            packages[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            packages[name] = None
    # stored results are not code: a grid writing results/ (or benchmarks/save.py writing benchmarks/results/) does
    # not make the code "locally changed"
    status = _git(
        "status",
        "--porcelain",
        "--untracked-files=no",
        "--",
        ".",
        ":(exclude)results",
        ":(exclude)benchmarks/results",
    )
    return {
        "command": command,
        "git_commit": _git("rev-parse", "HEAD"),
        "git_dirty": None if status is None else bool(status),
        "packages": packages,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
    }


def now() -> str:
    """The UTC date and time of a stored run, to the second."""
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def canonical(value: Any) -> Any:
    """A JSON-ready copy with dict keys sorted and tuples as lists (so equal configs serialise equally).

    Raises:
        ValueError: A value that JSON cannot represent exactly (a non-finite float, another object).

    >>> canonical({"b": (1, 2.5), "a": None})
    {'a': None, 'b': [1, 2.5]}
    """
    if isinstance(value, Mapping):
        return {str(key): canonical(value[key]) for key in sorted(value, key=str)}
    if isinstance(value, (list, tuple)):
        return [canonical(item) for item in value]
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"config values must be finite, got {value!r}")
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise ValueError(
        f"config values must be JSON scalars, lists or mappings, got {type(value).__name__} {value!r}"
    )


def config_hash(config: Mapping[str, Any]) -> str:
    """The storage key of a run: the first 16 hex digits of SHA-256 of its canonical JSON.

    The canonical JSON sorts keys and uses no spaces, so the key depends only on the values, not on their order,
    the Python process or ``PYTHONHASHSEED``. ``1`` and ``1.0`` are different values (JSON writes them differently).

    Args:
        config: Run arguments (JSON scalars, lists and mappings).

    Returns:
        16 lowercase hex digits.

    Raises:
        ValueError: A value that JSON cannot represent exactly (non-finite float, other object).

    >>> config_hash({"b": 2, "a": 1}) == config_hash({"a": 1, "b": 2})
    True
    """
    text = json.dumps(canonical(config), sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
