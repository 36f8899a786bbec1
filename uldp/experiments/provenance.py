"""Provenance of a stored run: the command, the git commit (and whether the code had local changes), the package
versions, the machine and the date."""

from __future__ import annotations

import datetime
import os
import platform
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

#: The repository root (results/ and _build/ live here).
REPO_ROOT = Path(__file__).resolve().parent.parent.parent
#: Packages whose versions each result records.
PROVENANCE_PACKAGES: tuple[str, ...] = ("uldp", "torch", "numpy", "scipy", "opacus", "phe")


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(REPO_ROOT), *args], capture_output=True, text=True, timeout=10)
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
    status = _git("status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)results",
                  ":(exclude)benchmarks/results")
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
