"""The registered datasets: one entry per dataset brings its loader, model, default settings and known files.

A dataset is one :class:`DatasetSpec` in :data:`DATASETS` (as FLamby keeps a dataset in one folder): its loader
(``load(data_dir)``, or ``load(data_dir, *, test_scoring)`` for fixed silos), its model (a zero-argument callable
returning a :class:`uldp.models.ModelSpec`), its settings (the paper's values of ``settings.md``, a :class:`Hyper`
per method family) and the data files it reads (:class:`KnownFile`, checked by :func:`uldp.data.paths.data_file`).
The per-field tables read from it: :data:`uldp.defaults.DATASET_DEFAULTS`, :data:`uldp.models.MODELS` and
:data:`uldp.data.paths.KNOWN_FILES` are live views of :data:`DATASETS`, so a dataset registered by
:func:`register_dataset` (a hospital's own, a test's toy) is known to all of them, to :func:`uldp.data.load` and to
:class:`uldp.simulation.RunConfig`.

No torch and no I/O here: the built-in datasets' loaders and models are imported on first use (``uldp --help`` and
``uldp epsilon`` import no torch).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from uldp.method_names import FAMILY_CAPABILITIES

if TYPE_CHECKING:
    from uldp.data.base import FederatedDataset
    from uldp.models import ModelSpec

V = TypeVar("V")


@dataclass(frozen=True)
class Hyper:
    """One method family's hyperparameters in one figure (a row of settings.md).

    Attributes:
        global_lr: Server learning rate eta_g.
        clip: Clipping bound C (``None`` for DEFAULT).
        local_lr: Local learning rate eta_l (``None`` for ULDP-SGD, one gradient step).
        local_epochs: Local epochs Q (``None`` for ULDP-SGD).
        global_lr_by_users: ``global_lr`` of the user counts whose row gives another one (settings.md: MNIST's
            ULDP-AVG, "10.0 (100 users), 100.0 (10000 users)"); every other count takes ``global_lr``.
    """

    global_lr: float
    clip: float | None
    local_lr: float | None
    local_epochs: int | None
    global_lr_by_users: tuple[tuple[int, float], ...] = ()

    def params(self, n_users: int) -> dict[str, Any]:
        """The run arguments this row fixes for a setting with ``n_users`` users."""
        return {
            "global_lr": dict(self.global_lr_by_users).get(n_users, self.global_lr),
            "clip": self.clip,
            "local_lr": self.local_lr,
            "local_epochs": self.local_epochs,
        }


@dataclass(frozen=True)
class DatasetSettings:
    """A dataset's settings (settings.md, "Shared by all runs" and "Privacy-utility figures").

    Attributes:
        dataset: Registry name (:data:`DATASETS`).
        users: The user counts |U| of its privacy-utility figure.
        n_silos: Silos |S| (fixed by FLamby for the medical datasets).
        rounds: Rounds T.
        batch_size: Local batch size.
        distributions: Allocation schemes (the users/silos pairs of the paper).
        families: Hyperparameters keyed by method family (:data:`uldp.method_names.FAMILIES`); a family no row
            names has no default here (:meth:`hyper` says so). Adding a family is one entry per dataset.
    """

    dataset: str
    users: tuple[int, ...]
    n_silos: int
    rounds: int
    batch_size: int
    distributions: tuple[str, ...]
    families: Mapping[str, Hyper]

    def hyper(self, family: str) -> Hyper:
        """The row of a method family.

        Raises:
            ValueError: Unknown family (the message lists the known ones).
        """
        if family not in self.families:
            raise ValueError(
                f"no {self.dataset} defaults for method family {family!r}; families with defaults: "
                f"{', '.join(self.families)}"
            )
        return self.families[family]

    def __post_init__(self) -> None:
        unknown = sorted(set(self.families) - set(FAMILY_CAPABILITIES))
        if unknown:
            raise ValueError(
                f"{self.dataset}: unknown method families {unknown}; known families: {', '.join(FAMILY_CAPABILITIES)}"
            )


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


@dataclass(frozen=True)
class DatasetSpec:
    """A registered dataset: everything the library knows of it, in one entry.

    Attributes:
        name: Registry name.
        description: One line for listings.
        load: Its loader, ``load(data_dir)`` returning a :class:`~uldp.data.base.FederatedDataset` (with
            ``fixed_silos``, ``load(data_dir, *, test_scoring)``).
        model: A zero-argument callable returning its :class:`uldp.models.ModelSpec` (model, loss, task).
        settings: Its default settings (users, silos, rounds, batch size, a :class:`Hyper` per method family).
        known_files: The data files its loader reads whose content is known (:func:`uldp.data.paths.data_file`).
        fixed_silos: Whether the silo of every record is fixed by the data (FLamby's centres), so that the
            allocation only draws users; such a loader takes ``test_scoring`` (:data:`uldp.data.TEST_SCORINGS`).
        scoring_changes_test_set: Whether the ``test_scoring`` variants give different test sets (HeartDisease's
            standardisation); where they do not (TcgaBrca, unscaled), a run's result cannot depend on it.
    """

    name: str
    description: str
    load: Callable[..., FederatedDataset]
    model: Callable[[], ModelSpec]
    settings: DatasetSettings
    known_files: tuple[KnownFile, ...] = ()
    fixed_silos: bool = False
    scoring_changes_test_set: bool = False

    @property
    def default_silos(self) -> int:
        """Number of silos the paper uses (its settings' ``n_silos``; fixed by FLamby for the medical datasets)."""
        return self.settings.n_silos


def _lazy(module: str, attribute: str) -> Callable[..., Any]:
    """A callable that imports ``module`` on first call and calls its ``attribute`` (keeps torch out of start-up)."""

    def call(*args: Any, **kwargs: Any) -> Any:
        return getattr(importlib.import_module(module), attribute)(*args, **kwargs)

    call.__qualname__ = call.__name__ = f"{module}.{attribute}"
    return call


class RegistryView(Mapping[str, V]):
    """A read-only, live view of one field of every registered dataset, keyed by dataset name (the old tables)."""

    def __init__(self, read: Callable[[DatasetSpec], V]) -> None:
        self._read = read

    def __getitem__(self, name: str) -> V:
        return self._read(DATASETS[name])

    def __iter__(self) -> Iterator[str]:
        return iter(DATASETS)

    def __len__(self) -> int:
        return len(DATASETS)


_UCI_HEART = "UCI ML Repository 'Heart Disease' (CC BY 4.0), the 'processed.*.data' files FLamby's download.py fetches"
_FLAMBY_TCGA = "FLamby (github.com/owkin/FLamby, MIT), folder flamby/datasets/fed_tcga_brca/"
_MNIST = "the MNIST IDX files (yann.lecun.com/exdb/mnist or any mirror), gzip-compressed"

_SGD = Hyper(10.0, 0.1, None, None)

#: Every registered dataset by name. The four of the paper's privacy-utility figures are
#: :data:`uldp.paper.settings.PRIVACY_UTILITY`; the synthetic dataset has no such figure: its settings are the defaults
#: of its runs (the protocol-runtime figure's 20 users and 3 silos, T = 3, and the medical datasets' hyperparameters).
DATASETS: dict[str, DatasetSpec] = {}


def register_dataset(spec: DatasetSpec) -> DatasetSpec:
    """Add a dataset to :data:`DATASETS` (and so to every view of it); returns ``spec``.

    Raises:
        ValueError: A name already registered, settings of another dataset, or a known file another dataset
            already lists.
    """
    if spec.name in DATASETS:
        raise ValueError(f"dataset {spec.name!r} is already registered; choose another name")
    if spec.settings.dataset != spec.name:
        raise ValueError(
            f"dataset {spec.name!r} has the settings of {spec.settings.dataset!r}; they must name it"
        )
    taken = {known.relative_path for other in DATASETS.values() for known in other.known_files}
    clashes = sorted(taken & {known.relative_path for known in spec.known_files})
    if clashes:
        raise ValueError(
            f"dataset {spec.name!r}: files {clashes} are another dataset's known files"
        )
    DATASETS[spec.name] = spec
    return spec


for _spec in (
    DatasetSpec(
        "creditcard",
        "Credit Card Fraud (Kaggle), 30 features, 2 classes",
        load=_lazy("uldp.data.creditcard", "load"),
        model=_lazy("uldp.data.creditcard", "model"),
        settings=DatasetSettings(
            "creditcard",
            (100, 1000),
            5,
            100,
            64,
            ("uniform", "zipf"),
            {
                "DEFAULT": Hyper(1.0, None, 0.01, 50),
                "ULDP-NAIVE": Hyper(1.0, 0.1, 0.01, 50),
                "ULDP-GROUP": Hyper(1.0, 0.1, 0.01, 50),
                "ULDP-SGD": _SGD,
                "ULDP-AVG": Hyper(10.0, 0.1, 0.01, 30),
            },
        ),
        known_files=(
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
        ),
    ),
    DatasetSpec(
        "mnist",
        "MNIST digits, 28x28, 10 classes",
        load=_lazy("uldp.data.mnist", "load"),
        model=_lazy("uldp.data.mnist", "model"),
        # ULDP-NAIVE was not run by the authors on MNIST; settings.md: the Creditcard row's shape with C = 1.0.
        settings=DatasetSettings(
            "mnist",
            (100, 10000),
            5,
            200,
            64,
            ("uniform", "zipf", "zipf-noniid"),
            {
                "DEFAULT": Hyper(1.0, None, 0.01, 50),
                "ULDP-NAIVE": Hyper(1.0, 1.0, 0.01, 50),
                "ULDP-GROUP": Hyper(1.0, 1.0, 0.01, 50),
                "ULDP-SGD": _SGD,
                "ULDP-AVG": Hyper(10.0, 0.1, 0.01, 50, global_lr_by_users=((10000, 100.0),)),
            },
        ),
        known_files=(
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
        ),
    ),
    DatasetSpec(
        "heart_disease",
        "FLamby Fed-Heart-Disease, 13 features, 4 centres",
        load=_lazy("uldp.data.heart_disease", "load"),
        model=_lazy("uldp.data.heart_disease", "model"),
        settings=DatasetSettings(
            "heart_disease",
            (50, 200),
            4,
            50,
            4,
            ("uniform", "zipf"),
            {
                "DEFAULT": Hyper(1.0, None, 0.001, 50),
                "ULDP-NAIVE": Hyper(1.0, 0.1, 0.001, 50),
                "ULDP-GROUP": Hyper(1.0, 0.1, 0.001, 50),
                "ULDP-SGD": _SGD,
                "ULDP-AVG": Hyper(10.0, 0.1, 0.001, 50),
            },
        ),
        known_files=(
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
        ),
        fixed_silos=True,
        scoring_changes_test_set=True,
    ),
    DatasetSpec(
        "tcga_brca",
        "FLamby Fed-TCGA-BRCA survival, 39 features, 6 regions",
        load=_lazy("uldp.data.tcga_brca", "load"),
        model=_lazy("uldp.data.tcga_brca", "model"),
        settings=DatasetSettings(
            "tcga_brca",
            (50, 200),
            6,
            50,
            8,
            ("uniform", "zipf"),
            {
                "DEFAULT": Hyper(1.0, None, 0.001, 50),
                "ULDP-NAIVE": Hyper(1.0, 0.1, 0.001, 50),
                "ULDP-GROUP": Hyper(0.1, 100.0, 0.001, 50),
                "ULDP-SGD": _SGD,
                "ULDP-AVG": Hyper(10.0, 0.1, 0.001, 50),
            },
        ),
        known_files=(
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
        ),
        fixed_silos=True,
    ),
    DatasetSpec(
        "synthetic",
        "make_classification, 10,000 records, 15 features",
        load=_lazy("uldp.data.synthetic", "load"),
        model=_lazy("uldp.data.synthetic", "model"),
        settings=DatasetSettings(
            "synthetic",
            (20,),
            3,
            3,
            64,
            ("uniform",),
            {
                "DEFAULT": Hyper(1.0, None, 0.001, 50),
                "ULDP-NAIVE": Hyper(1.0, 0.1, 0.001, 50),
                "ULDP-GROUP": Hyper(1.0, 0.1, 0.001, 50),
                "ULDP-SGD": _SGD,
                "ULDP-AVG": Hyper(10.0, 0.1, 0.001, 50),
            },
        ),
    ),
):
    register_dataset(_spec)
