"""The paper's experiments (Section 5) as named grids of runs, stored one JSON file per run, resumable.

A *grid* is one figure of the paper: the privacy-utility trade-offs of each dataset (Figures 4-7), the enhanced
weighting figure (Figure 8), user-level sub-sampling (Figure 9) and the private weighting protocol's runtime on the
medical datasets (Figure 10). Its paper-profile runs are exactly the settings of ``settings.md`` (the authors'
hyperparameters, 5 seeds). The ``default`` and ``smoke`` profiles shrink a grid (fewer rounds, epochs, users, seeds
or methods) for the book and for CI; what each profile keeps is written in :data:`GRIDS`. The ``short`` profile,
defined only where the paper profile is out of a CPU's reach (MNIST), keeps the paper's federation whole (every
record, user and silo, the paper's allocations and hyperparameters) and cuts only the rounds and local epochs, so that
a claim comparing settings of that federation can be checked at a known, smaller scale.

Every run is a plain mapping of :class:`uldp.simulation.RunConfig` arguments (plus ``max_test_records``, which
this package applies: the smaller profiles evaluate MNIST on a fixed part of its test set). Its file is
``<root>/<grid>/<key>.json`` where ``key`` is :func:`config_hash` of that mapping; the file, a :class:`StoredRun`,
holds the arguments, the resolved configuration, the per-round results and provenance (command, git commit, package
versions, the dataset variant that ran, date, wall time). Files are written atomically (temporary file +
``os.replace``), and a run whose file exists is skipped, so an interrupted grid resumes where it stopped.
Paper-profile results go to ``results/`` and short-profile ones to ``results/short/`` (both committed); smoke and
default ones to ``_build/results/`` (git-ignored).

The package's modules, each one job: :mod:`~uldp.paper.experiments.grids` (the catalogue :data:`GRIDS` and the
profiles' reductions, built from :mod:`uldp.paper.settings`), :mod:`~uldp.paper.experiments.keys` (run keys,
:func:`expand`), :mod:`~uldp.paper.experiments.store` (:class:`StoredRun` files), :mod:`~uldp.common.provenance`,
:mod:`~uldp.paper.experiments.executor` (what executes a run), :mod:`~uldp.paper.experiments.runner` (:func:`run_grid`),
:mod:`~uldp.paper.experiments.results` (:class:`ResultSet`, stored or computed by accounting),
:mod:`~uldp.paper.experiments.precision` (runs at another precision against float32's) and
:mod:`~uldp.paper.experiments.chapter` (what the chapters show).

>>> [spec.series for spec in expand("heart_disease", "paper") if spec.seed == 0][:3]
['DEFAULT', 'ULDP-NAIVE', 'ULDP-GROUP-max']
>>> len(expand("heart_disease", "paper"))  # 4 settings x 9 methods x 20 seeds
720
"""

from uldp.common.atomic import write_json_atomic
from uldp.common.provenance import (
    PROVENANCE_PACKAGES,
    REPO_ROOT,
    canonical,
    config_hash,
    now,
    provenance,
)
from uldp.defaults import DELTA, SIGMA, DatasetSettings, Hyper
from uldp.paper.experiments.chapter import (
    ChapterResults,
    chapter_results,
    grid_table,
    stored_runs_table,
)
from uldp.paper.experiments.executor import (
    SIMULATION,
    WRAPPER_ARGUMENTS,
    Executor,
    loaded_dataset,
    split_arguments,
)
from uldp.paper.experiments.grids import (
    GRIDS,
    PROFILES,
    TAILED_METRICS,
    UTILITY_METRIC,
    Entry,
    Grid,
    Reduction,
    check_profile,
    get_grid,
)
from uldp.paper.experiments.keys import ALLOCATION_ARGUMENTS, RunSpec, effective_arguments, expand
from uldp.paper.experiments.precision import PrecisionComparison, compare_precisions
from uldp.paper.experiments.results import (
    RESULT_SOURCES,
    ResultSet,
    ResultSource,
    accounted_results,
    duration,
    load_results,
    summarise,
    trained_on,
)
from uldp.paper.experiments.runner import GridReport, run_grid
from uldp.paper.experiments.store import (
    SCHEMA_VERSION,
    StoredRun,
    expected_seconds,
    pending_runs,
    read_result,
    result_path,
    results_root,
    stored_result,
)
from uldp.paper.settings import (
    GROUP_METHODS,
    PAPER_SEEDS,
    PRIVACY_UTILITY,
    PRIVACY_UTILITY_METHODS,
)

__all__ = [
    "ALLOCATION_ARGUMENTS",
    "DELTA",
    "GRIDS",
    "GROUP_METHODS",
    "PAPER_SEEDS",
    "PRIVACY_UTILITY",
    "PRIVACY_UTILITY_METHODS",
    "PROFILES",
    "PROVENANCE_PACKAGES",
    "REPO_ROOT",
    "RESULT_SOURCES",
    "SCHEMA_VERSION",
    "SIGMA",
    "SIMULATION",
    "TAILED_METRICS",
    "UTILITY_METRIC",
    "WRAPPER_ARGUMENTS",
    "ChapterResults",
    "DatasetSettings",
    "Entry",
    "Executor",
    "Grid",
    "GridReport",
    "Hyper",
    "PrecisionComparison",
    "Reduction",
    "ResultSet",
    "ResultSource",
    "RunSpec",
    "StoredRun",
    "accounted_results",
    "canonical",
    "chapter_results",
    "check_profile",
    "compare_precisions",
    "config_hash",
    "duration",
    "effective_arguments",
    "expand",
    "expected_seconds",
    "get_grid",
    "grid_table",
    "load_results",
    "loaded_dataset",
    "now",
    "pending_runs",
    "provenance",
    "read_result",
    "result_path",
    "results_root",
    "run_grid",
    "split_arguments",
    "stored_result",
    "stored_runs_table",
    "summarise",
    "trained_on",
    "write_json_atomic",
]


def __getattr__(name: str) -> object:
    """``Backend``, the old name of :class:`Executor`, for one release (with a ``DeprecationWarning``)."""
    if name == "Backend":
        import warnings

        warnings.warn(
            "uldp.paper.experiments.Backend is deprecated and will be removed in the next release; use Executor",
            DeprecationWarning,
            stacklevel=2,
        )
        return Executor
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
