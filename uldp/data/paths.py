"""Where the dataset files live, and checks that they are the files we expect.

The data directory comes from the ``data_dir`` argument, else from the environment variable ``ULDP_DATA_DIR``.
Nothing is ever downloaded: a missing file raises :class:`FileNotFoundError` naming the path that was expected and
where to obtain the file. Files whose content is known are checked against their sha256 (once per process).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator, Mapping
from pathlib import Path

from uldp.data.registry import DATASETS, KnownFile

ENV_VAR = "ULDP_DATA_DIR"


class _KnownFiles(Mapping[str, KnownFile]):
    """Every registered dataset's known files by relative path: a live view of :data:`uldp.data.registry.DATASETS`."""

    def _files(self) -> dict[str, KnownFile]:
        return {
            known.relative_path: known for spec in DATASETS.values() for known in spec.known_files
        }

    def __getitem__(self, relative_path: str) -> KnownFile:
        return self._files()[relative_path]

    def __iter__(self) -> Iterator[str]:
        return iter(self._files())

    def __len__(self) -> int:
        return len(self._files())


#: The data files the loaders read whose content is known, by path below the data directory (each dataset lists
#: its own in its registry entry, :attr:`uldp.data.registry.DatasetSpec.known_files`).
KNOWN_FILES: Mapping[str, KnownFile] = _KnownFiles()

_VERIFIED: dict[tuple[str, int, int], str] = {}


def resolve_data_dir(data_dir: str | Path | None = None) -> Path:
    """Return the data directory: ``data_dir`` if given, else ``$ULDP_DATA_DIR``.

    Args:
        data_dir: An explicit directory, or ``None`` to use the environment variable.

    Returns:
        The directory as a :class:`~pathlib.Path`.

    Raises:
        FileNotFoundError: Neither is set, or the directory does not exist.
    """
    if data_dir is None:
        from_env = os.environ.get(ENV_VAR)
        if not from_env:
            raise FileNotFoundError(
                f"no data directory: pass data_dir or set {ENV_VAR} to the folder that holds "
                "mnist/, heart_disease/, tcga_brca/ and creditcard/"
            )
        data_dir = from_env
    path = Path(data_dir).expanduser()
    if not path.is_dir():
        raise FileNotFoundError(
            f"data directory {str(path)!r} does not exist (set {ENV_VAR} or pass data_dir)"
        )
    return path


def sha256_of(path: Path) -> str:
    """Return the hex sha256 of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def data_file(
    relative_path: str, data_dir: str | Path | None = None, *, verify: bool = True
) -> Path:
    """Return the path of a dataset file, checking that it exists and, if known, its sha256.

    Args:
        relative_path: Path below the data directory (a key of :data:`KNOWN_FILES` or any other file).
        data_dir: The data directory (see :func:`resolve_data_dir`).
        verify: Check the sha256 of a known file (cached per path, size and modification time).

    Returns:
        The absolute path of the file.

    Raises:
        FileNotFoundError: The file is missing; the message names the expected path and where to get it.
        ValueError: The file's sha256 differs from the known one.
    """
    path = resolve_data_dir(data_dir) / relative_path
    known = KNOWN_FILES.get(relative_path)
    if not path.is_file():
        where = f"; obtain it from {known.source}" if known else ""
        raise FileNotFoundError(f"expected dataset file {str(path)!r} is missing{where}")
    if verify and known is not None and known.sha256:
        stat = path.stat()
        key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
        if key not in _VERIFIED:
            _VERIFIED[key] = sha256_of(path)
        if _VERIFIED[key] != known.sha256:
            raise ValueError(
                f"dataset file {str(path)!r} has sha256 {_VERIFIED[key]}, expected {known.sha256} "
                f"(the file from {known.source})"
            )
    return path
