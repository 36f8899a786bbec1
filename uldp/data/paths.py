"""Where the dataset files live, and checks that they are the files we expect.

The data directory comes from the ``data_dir`` argument, else from the environment variable ``ULDP_DATA_DIR``.
Nothing is ever downloaded: a missing file raises :class:`FileNotFoundError` naming the path that was expected and
where to obtain the file. Files whose content is known are checked against their sha256 (once per process).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

ENV_VAR = "ULDP_DATA_DIR"


@dataclass(frozen=True)
class KnownFile:
    """A data file the loaders read.

    Attributes:
        relative_path: Path below the data directory.
        sha256: Hex sha256 of the file as stored, or ``""`` when any copy is accepted (the full Creditcard file,
            whose loader checks its shape instead).
        source: Where to obtain the file.
    """

    relative_path: str
    sha256: str
    source: str


_UCI_HEART = "UCI ML Repository 'Heart Disease' (CC BY 4.0), the 'processed.*.data' files FLamby's download.py fetches"
_FLAMBY_TCGA = "FLamby (github.com/owkin/FLamby, MIT), folder flamby/datasets/fed_tcga_brca/"
_MNIST = "the MNIST IDX files (yann.lecun.com/exdb/mnist or any mirror), gzip-compressed"

KNOWN_FILES: dict[str, KnownFile] = {
    known.relative_path: known
    for known in (
        KnownFile(
            "mnist/train-images-idx3-ubyte.gz",
            "0b367032e93c5d0cea0925647cfdb18614af8ee15f83e6f2fc2ad904a6835971",
            _MNIST,
        ),
        KnownFile(
            "mnist/train-labels-idx1-ubyte.gz",
            "3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c",
            _MNIST,
        ),
        KnownFile(
            "mnist/t10k-images-idx3-ubyte.gz",
            "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6",
            _MNIST,
        ),
        KnownFile(
            "mnist/t10k-labels-idx1-ubyte.gz",
            "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6",
            _MNIST,
        ),
        KnownFile(
            "heart_disease/processed.cleveland.data",
            "a74b7efa387bc9d108d7d0115d831fe9b414b29ae7124f331b622b4efa0427c8",
            _UCI_HEART,
        ),
        KnownFile(
            "heart_disease/processed.hungarian.data",
            "d1ad108f785768cd3d7e82dc522e6f5a61eea93cccfb3a46ee8076f73fc3d796",
            _UCI_HEART,
        ),
        KnownFile(
            "heart_disease/processed.switzerland.data",
            "834a405ccf5b66ab4056bb77794adc8df0b7125186454c0a1d002d33c6c3b314",
            _UCI_HEART,
        ),
        KnownFile(
            "heart_disease/processed.va.data",
            "e7c93d8d0d2acdadfa4c5e8de768e2191e7f618b952e29623f1f0d5949ff6b8f",
            _UCI_HEART,
        ),
        KnownFile(
            "tcga_brca/brca.csv",
            "07cb53423f7d579d33cfdbf2cba57b2aee75318b85866c68ce39a75b1f1ba020",
            _FLAMBY_TCGA + "brca.csv",
        ),
        KnownFile(
            "tcga_brca/train_test_split.csv",
            "1249c6543a4060ff0fdaf8510fc37017755836db6c9fc5e6af96057c36510990",
            _FLAMBY_TCGA + "dataset_creation_scripts/train_test_split.csv",
        ),
        KnownFile(
            "creditcard/creditcard_sample.csv.gz",
            "8e9c3acb0cf540a9affd970b6a6f09372ca95cf9ddca4dd098de1c2a600cc1ff",
            "the 5,412-row subset of Kaggle mlg-ulb/creditcardfraud (all frauds + 4,920 normal rows), "
            "see the data README",
        ),
        KnownFile(
            "creditcard/creditcard.csv",
            "",
            "Kaggle dataset mlg-ulb/creditcardfraud (DbCL v1.0), file creditcard.csv (284,807 rows)",
        ),
    )
}

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
