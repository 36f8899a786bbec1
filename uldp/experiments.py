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
this module applies: the smaller profiles evaluate MNIST on a fixed part of its test set). Its file is
``<root>/<grid>/<key>.json`` where ``key`` is :func:`config_hash` of that mapping; the file holds the arguments, the
resolved configuration, the per-round results and provenance (command, git commit, package versions, the dataset
variant that ran, date, wall time). Files are written atomically (temporary file + ``os.replace``), and a run whose
file exists is skipped, so an interrupted grid resumes where it stopped. Paper-profile results go to ``results/``
and short-profile ones to ``results/short/`` (both committed); smoke and default ones to ``_build/results/``
(git-ignored).

>>> [spec.series for spec in expand("heart_disease", "paper") if spec.seed == 0][:3]
['DEFAULT', 'ULDP-NAIVE', 'ULDP-GROUP-max']
>>> len(expand("heart_disease", "paper"))  # 4 settings x 9 methods x 5 seeds
180
"""

from __future__ import annotations

import datetime as _datetime
import functools
import hashlib
import json
import math
import multiprocessing
import os
import platform
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from uldp.atomic import write_bytes_atomic
from uldp.checks import check_integer, check_positive

#: The repository root (results/ and _build/ live here).
REPO_ROOT = Path(__file__).resolve().parent.parent
#: Profiles, smallest first. ``paper`` is the authors' settings with 5 seeds; ``short`` is the paper's federation
#: with fewer rounds and local epochs, for the grids that have it (:attr:`Grid.reductions`).
PROFILES: tuple[str, ...] = ("smoke", "default", "short", "paper")
#: Seeds of the paper profile (the paper averages 5 runs).
PAPER_SEEDS: tuple[int, ...] = (0, 1, 2, 3, 4)
#: Noise multiplier and delta of every run of the paper.
SIGMA, DELTA = 5.0, 1e-5
#: Version of the result-file layout; bumped when the layout changes.
SCHEMA_VERSION = 1
#: The utility metric of each dataset in the paper's figures (accuracy; the C-index for the survival task).
UTILITY_METRIC: dict[str, str] = {"creditcard": "accuracy", "mnist": "accuracy", "heart_disease": "accuracy",
                                  "tcga_brca": "c_index", "synthetic": "accuracy"}
#: Packages whose versions each result records.
PROVENANCE_PACKAGES: tuple[str, ...] = ("uldp", "torch", "numpy", "scipy", "opacus", "phe")

# ------------------------------------------------------------------------------------------------ grid definitions


@dataclass(frozen=True)
class Hyper:
    """One method's hyperparameters in one figure (a row of settings.md).

    Attributes:
        global_lr: Server learning rate eta_g.
        clip: Clipping bound C (``None`` for DEFAULT).
        local_lr: Local learning rate eta_l (``None`` for ULDP-SGD, one gradient step).
        local_epochs: Local epochs Q (``None`` for ULDP-SGD).
        global_lr_by_users: Overrides of ``global_lr`` for some user counts (MNIST's ULDP-AVG with 10000 users).
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


GROUP_METHODS: tuple[str, ...] = ("ULDP-GROUP-max", "ULDP-GROUP-median", "ULDP-GROUP-2", "ULDP-GROUP-8")
#: The methods of the privacy-utility figures, in the paper's legend order.
PRIVACY_UTILITY_METHODS: tuple[str, ...] = (
    ("DEFAULT", "ULDP-NAIVE") + GROUP_METHODS + ("ULDP-SGD", "ULDP-AVG", "ULDP-AVG-w")
)


def _rows(default: Hyper, naive: Hyper, group: Hyper, sgd: Hyper, avg: Hyper) -> dict[str, Hyper]:
    rows = {"DEFAULT": default, "ULDP-NAIVE": naive}
    rows.update({method: group for method in GROUP_METHODS})
    rows.update({"ULDP-SGD": sgd, "ULDP-AVG": avg, "ULDP-AVG-w": avg})
    return rows


@dataclass(frozen=True)
class DatasetSettings:
    """A dataset's privacy-utility settings (settings.md, "Privacy-utility figures").

    Attributes:
        dataset: Registry name.
        users: The user counts |U| of the figure.
        n_silos: Silos |S|.
        rounds: Rounds T.
        batch_size: Local batch size.
        distributions: Allocation schemes (users/silos pairs of the paper).
        methods: Hyperparameters per method.
    """

    dataset: str
    users: tuple[int, ...]
    n_silos: int
    rounds: int
    batch_size: int
    distributions: tuple[str, ...]
    methods: Mapping[str, Hyper]


_SGD = Hyper(10.0, 0.1, None, None)
PRIVACY_UTILITY: dict[str, DatasetSettings] = {
    "creditcard": DatasetSettings(
        "creditcard", (100, 1000), 5, 100, 64, ("uniform", "zipf"),
        _rows(Hyper(1.0, None, 0.01, 50), Hyper(1.0, 0.1, 0.01, 50), Hyper(1.0, 0.1, 0.01, 50), _SGD,
              Hyper(10.0, 0.1, 0.01, 30)),
    ),
    "mnist": DatasetSettings(
        "mnist", (100, 10000), 5, 200, 64, ("uniform", "zipf", "zipf-noniid"),
        # ULDP-NAIVE was not run by the authors on MNIST; settings.md: the Creditcard row's shape with C = 1.0.
        _rows(Hyper(1.0, None, 0.01, 50), Hyper(1.0, 1.0, 0.01, 50), Hyper(1.0, 1.0, 0.01, 50), _SGD,
              Hyper(10.0, 0.1, 0.01, 50, global_lr_by_users=((10000, 100.0),))),
    ),
    "heart_disease": DatasetSettings(
        "heart_disease", (50, 200), 4, 50, 4, ("uniform", "zipf"),
        _rows(Hyper(1.0, None, 0.001, 50), Hyper(1.0, 0.1, 0.001, 50), Hyper(1.0, 0.1, 0.001, 50), _SGD,
              Hyper(10.0, 0.1, 0.001, 50)),
    ),
    "tcga_brca": DatasetSettings(
        "tcga_brca", (50, 200), 6, 50, 8, ("uniform", "zipf"),
        _rows(Hyper(1.0, None, 0.001, 50), Hyper(1.0, 0.1, 0.001, 50), Hyper(0.1, 100.0, 0.001, 50), _SGD,
              Hyper(10.0, 0.1, 0.001, 50)),
    ),
}


@dataclass(frozen=True)
class Entry:
    """One run of a grid before seeds are attached: the run arguments (everything but ``seed``)."""

    params: tuple[tuple[str, Any], ...]

    @classmethod
    def of(cls, **params: Any) -> Entry:
        """Build an entry from keyword arguments (stored sorted, so equal arguments give equal entries)."""
        return cls(tuple(sorted(params.items())))

    @property
    def kwargs(self) -> dict[str, Any]:
        """The run arguments as a dict."""
        return dict(self.params)


def _common(dataset: str, *, n_users: int, n_silos: int, distribution: str, rounds: int, batch_size: int,
            method: str, hyper: Hyper, q: float = 1.0) -> Entry:
    from uldp.data import DATASETS

    # The medical datasets are scored as the authors scored them, and their runs say so (issue 19).
    scoring = {"test_scoring": "pooled"} if DATASETS[dataset].fixed_silos else {}
    return Entry.of(dataset=dataset, method=method, n_users=n_users, n_silos=n_silos, distribution=distribution,
                    rounds=rounds, batch_size=batch_size, sigma=None if method == "DEFAULT" else SIGMA, delta=DELTA,
                    q=q, **scoring, **hyper.params(n_users))


def _privacy_utility_entries(dataset: str) -> list[Entry]:
    settings = PRIVACY_UTILITY[dataset]
    return [
        _common(dataset, n_users=n_users, n_silos=settings.n_silos, distribution=distribution,
                rounds=settings.rounds, batch_size=settings.batch_size, method=method, hyper=settings.methods[method])
        for n_users in settings.users
        for distribution in settings.distributions
        for method in PRIVACY_UTILITY_METHODS
    ]


def _weighting_entries() -> list[Entry]:
    creditcard, tcga = Hyper(10.0, 1.0, 0.01, 30), Hyper(10.0, 0.1, 0.001, 50)
    entries = [
        _common("creditcard", n_users=1000, n_silos=n_silos, distribution=distribution, rounds=100, batch_size=64,
                method=method, hyper=creditcard)
        for n_silos in (5, 20, 50) for distribution in ("uniform", "zipf") for method in ("ULDP-AVG", "ULDP-AVG-w")
    ]
    entries += [
        _common("tcga_brca", n_users=200, n_silos=6, distribution=distribution, rounds=50, batch_size=8,
                method=method, hyper=tcga)
        for distribution in ("uniform", "zipf") for method in ("ULDP-AVG", "ULDP-AVG-w")
    ]
    return entries


def _user_sampling_entries() -> list[Entry]:
    entries = [
        _common("creditcard", n_users=1000, n_silos=5, distribution="zipf", rounds=100, batch_size=64,
                method="ULDP-AVG-w", hyper=Hyper(10.0, 1.0, 0.01, 30), q=q)
        for q in (0.1, 0.3, 0.5, 0.7, 1.0)
    ]
    entries += [
        _common("mnist", n_users=10000, n_silos=5, distribution="zipf", rounds=200, batch_size=64,
                method="ULDP-AVG-w", hyper=Hyper(100.0, 0.1, 0.01, 50), q=q)
        for q in (0.1, 0.3, 0.5, 1.0)
    ]
    return entries


def _protocol_runtime_entries() -> list[Entry]:
    fixed = {"heart_disease": (4, 4), "tcga_brca": (6, 8)}
    return [
        Entry(_common(dataset, n_users=n_users, n_silos=fixed[dataset][0], distribution="zipf", rounds=3,
                      batch_size=fixed[dataset][1], method="ULDP-AVG-w", hyper=Hyper(10.0, 0.1, 0.001, 50)).params
              + (("secure", True),))
        for dataset in ("heart_disease", "tcga_brca") for n_users in (10, 100)
    ]


@dataclass(frozen=True)
class Reduction:
    """How a smaller profile shrinks a paper grid (every field ``None`` keeps the paper's value).

    Attributes:
        seeds: Seeds to run.
        rounds: Upper bound on the rounds T.
        local_epochs: Upper bound on the local epochs Q.
        users: Paper user count -> the profile's user count.
        methods: Methods kept (in the paper's order).
        keep: Other run arguments restricted to listed values, e.g. ``(("q", (0.1, 1.0)),)``.
        max_train_records: Bound on the training records used (a stratified subset; see RunConfig).
        max_test_records: Bound on the test records evaluated each round (a fixed random subset).
    """

    seeds: tuple[int, ...] = (0,)
    rounds: int | None = None
    local_epochs: int | None = None
    users: tuple[tuple[int, int], ...] = ()
    methods: tuple[str, ...] | None = None
    keep: tuple[tuple[str, tuple[Any, ...]], ...] = ()
    max_train_records: int | None = None
    max_test_records: int | None = None

    def apply(self, entry: Entry) -> Entry | None:
        """Return the shrunken entry, or ``None`` when this profile drops it."""
        params = entry.kwargs
        if self.methods is not None and params["method"] not in self.methods:
            return None
        if any(params.get(name) not in allowed for name, allowed in self.keep):
            return None
        if self.rounds is not None:
            params["rounds"] = min(params["rounds"], self.rounds)
        if self.local_epochs is not None and params.get("local_epochs") is not None:
            params["local_epochs"] = min(params["local_epochs"], self.local_epochs)
        params["n_users"] = dict(self.users).get(params["n_users"], params["n_users"])
        for name in ("max_train_records", "max_test_records"):
            if getattr(self, name) is not None:
                params[name] = getattr(self, name)
        return Entry.of(**params)


@dataclass(frozen=True)
class Grid:
    """A named grid: one figure of the paper.

    Attributes:
        name: Registry name (``uldp grid NAME``).
        title: What the figure shows.
        figure: The paper's figure it reproduces.
        kind: ``"privacy_utility"``, ``"weighting"``, ``"user_sampling"`` or ``"protocol_runtime"``.
        entries: Builds the paper-profile runs (without seeds).
        panel_fields: Run arguments that identify one panel (setting) of the figure.
        series_fields: Run arguments that identify one line of a panel.
        reductions: ``smoke`` and ``default`` reductions of the paper grid, and ``short`` where it has one.
    """

    name: str
    title: str
    figure: str
    kind: str
    entries: Callable[[], list[Entry]]
    panel_fields: tuple[str, ...]
    series_fields: tuple[str, ...]
    reductions: Mapping[str, Reduction] = field(default_factory=dict)

    def panel_label(self, params: Mapping[str, Any]) -> str:
        """Readable label of the panel a run belongs to, e.g. ``"|U|=100, zipf"``."""
        return ", ".join(_format_field(name, params[name]) for name in self.panel_fields)

    def series_label(self, params: Mapping[str, Any]) -> str:
        """Readable label of the line a run belongs to, e.g. ``"ULDP-AVG"`` or ``"q=0.5"``."""
        return ", ".join(_format_field(name, params[name]) for name in self.series_fields)


_FIELD_LABELS = {"n_users": "|U|", "n_silos": "|S|", "q": "q"}


def _format_field(name: str, value: Any) -> str:
    if name in _FIELD_LABELS:
        return f"{_FIELD_LABELS[name]}={value:g}" if isinstance(value, float) else f"{_FIELD_LABELS[name]}={value}"
    return str(value)


def _privacy_utility_grid(dataset: str, title: str, figure: str, smoke: Reduction, default: Reduction,
                          short: Reduction | None = None) -> Grid:
    reductions = {"smoke": smoke, "default": default} | ({"short": short} if short is not None else {})
    return Grid(dataset, title, figure, "privacy_utility", lambda: _privacy_utility_entries(dataset),
                ("n_users", "distribution"), ("method",), reductions)


_SMOKE_METHODS = ("DEFAULT", "ULDP-NAIVE", "ULDP-GROUP-2", "ULDP-SGD", "ULDP-AVG", "ULDP-AVG-w")

#: Every named grid. The ``smoke`` reductions keep every code path (each method family, each allocation scheme)
#: at two rounds; the ``default`` ones keep the paper's hyperparameters but fewer rounds, local epochs, settings,
#: users or records, so that each chapter runs in about three minutes on 2 CPU cores (their silo-level methods,
#: DEFAULT, ULDP-NAIVE and ULDP-GROUP-k, cost the most: Q epochs over every record of every silo each round).
GRIDS: dict[str, Grid] = {
    grid.name: grid
    for grid in (
        _privacy_utility_grid(
            "creditcard", "Privacy-utility trade-offs on Creditcard", "Figure 4",
            smoke=Reduction(rounds=2, local_epochs=1, users=((100, 20),), methods=_SMOKE_METHODS,
                            keep=(("n_users", (100,)),), max_train_records=500),
            default=Reduction(rounds=8, local_epochs=1, keep=(("n_users", (100,)),), max_train_records=1500,
                              methods=tuple(m for m in PRIVACY_UTILITY_METHODS if m != "ULDP-GROUP-median")),
        ),
        _privacy_utility_grid(
            "mnist", "Privacy-utility trade-offs on MNIST", "Figure 5",
            smoke=Reduction(rounds=2, local_epochs=1, users=((100, 10),),
                            methods=tuple(m for m in _SMOKE_METHODS if m != "ULDP-NAIVE"),
                            keep=(("n_users", (100,)), ("distribution", ("zipf-noniid",))),
                            max_train_records=300, max_test_records=500),
            # ULDP-SGD is left out here (its per-user gradients are the slowest path on MNIST); the other
            # datasets' chapters compare it with ULDP-AVG.
            default=Reduction(rounds=4, local_epochs=1, users=((10000, 200),), max_train_records=1000,
                              max_test_records=1000, methods=("DEFAULT", "ULDP-GROUP-2", "ULDP-AVG", "ULDP-AVG-w"),
                              keep=(("distribution", ("zipf", "zipf-noniid")),)),
            # The paper's federations of the non-iid claim (ULDP-AVG, zipf iid and non-iid, 100 and 10000 users,
            # every record) at T = 20 and Q = 5 instead of 200 and 50: a run alone on 2 CPU cores takes 7 (100 users)
            # to 12 minutes (10000), where the paper's scale takes about 100 times longer.
            short=Reduction(seeds=(0, 1, 2), rounds=20, local_epochs=5, methods=("ULDP-AVG",),
                            keep=(("distribution", ("zipf", "zipf-noniid")),)),
        ),
        _privacy_utility_grid(
            "heart_disease", "Privacy-utility trade-offs on HeartDisease", "Figure 6",
            smoke=Reduction(rounds=2, local_epochs=1, methods=_SMOKE_METHODS, keep=(("n_users", (50,)),)),
            default=Reduction(rounds=15, local_epochs=1),
        ),
        _privacy_utility_grid(
            "tcga_brca", "Privacy-utility trade-offs on TcgaBrca", "Figure 7",
            smoke=Reduction(rounds=2, local_epochs=1, methods=_SMOKE_METHODS, keep=(("n_users", (50,)),)),
            default=Reduction(rounds=15, local_epochs=1),
        ),
        Grid("weighting", "Enhanced weighting: ULDP-AVG vs ULDP-AVG-w (test loss)", "Figure 8", "weighting",
             _weighting_entries, ("dataset", "n_silos"), ("method", "distribution"),
             {"smoke": Reduction(rounds=2, local_epochs=1, users=((1000, 40), (200, 50)),
                                 keep=(("n_silos", (5, 6)),), max_train_records=500),
              # 100 users on 2,000 Creditcard records: 20 records per user (the paper: 25).
              "default": Reduction(rounds=10, local_epochs=1, users=((1000, 100), (200, 100)),
                                   max_train_records=2000)}),
        Grid("user_sampling", "User-level sub-sampling with ULDP-AVG-w", "Figure 9", "user_sampling",
             _user_sampling_entries, ("dataset",), ("q",),
             {"smoke": Reduction(rounds=2, local_epochs=1, users=((1000, 20), (10000, 20)),
                                 keep=(("q", (0.1, 1.0)),), max_train_records=300, max_test_records=500),
              # 20 records per user on Creditcard (the paper: 25) and 10 on MNIST (the paper: 6).
              "default": Reduction(rounds=10, local_epochs=1, users=((1000, 100), (10000, 200)),
                                   max_train_records=2000, max_test_records=1000)}),
        Grid("protocol_runtime", "Private weighting protocol runtime on the medical datasets", "Figure 10",
             "protocol_runtime", _protocol_runtime_entries, ("dataset",), ("n_users",),
             {"smoke": Reduction(rounds=1, local_epochs=1, keep=(("n_users", (10,)),)),
              "default": Reduction(rounds=1, local_epochs=10)}),
    )
}

# ------------------------------------------------------------------------------------------------------ run specs


@dataclass(frozen=True)
class RunSpec:
    """One run of a grid at a profile: its run arguments (``RunConfig`` keyword arguments, seed included).

    Attributes:
        grid: Grid name.
        panel: Panel label (see :meth:`Grid.panel_label`).
        series: Line label (see :meth:`Grid.series_label`).
        seed: The run's seed.
        params: ``RunConfig`` keyword arguments, sorted by name.
    """

    grid: str
    panel: str
    series: str
    seed: int
    params: tuple[tuple[str, Any], ...]

    @property
    def kwargs(self) -> dict[str, Any]:
        """The run arguments as a dict."""
        return dict(self.params)

    @property
    def key(self) -> str:
        """The run's storage key, :func:`config_hash` of its :func:`effective_arguments`."""
        return config_hash(effective_arguments(self.kwargs))


#: Run arguments that only say how records are allocated to users (and, without fixed silos, to silos).
ALLOCATION_ARGUMENTS: tuple[str, ...] = ("n_users", "distribution", "n_labels")


def effective_arguments(params: Mapping[str, Any]) -> dict[str, Any]:
    """The run arguments that can change a run's result: those that identify its stored file.

    A user-blind method (DEFAULT, ULDP-NAIVE: :attr:`~uldp.methods.MethodSpec.reads_users` is false) trains on every
    record of each silo alike, so only the silos of the records matter:

    - on a dataset whose silos are fixed (HeartDisease, TcgaBrca) the allocation draws only users, and the run is the
      same whatever the number of users or the distribution;
    - under the ``uniform`` allocation of the other datasets the silos are a balanced permutation drawn after the
      users' one, which takes the same draws whatever the number of users, so the run is the same for every ``|U|``.

    Both are checked bit for bit in ``tests/test_experiments.py``; those arguments are dropped, and one stored run
    serves every panel it appears in. Likewise ``test_scoring`` is dropped on a dataset whose scorings give the
    same test set (:attr:`~uldp.data.DatasetSpec.scoring_changes_test_set` false: TcgaBrca, also checked bit for
    bit), so its runs made before the scoring was a run argument keep their keys.

    >>> effective_arguments({"dataset": "tcga_brca", "method": "DEFAULT", "n_users": 50, "distribution": "zipf"})
    {'dataset': 'tcga_brca', 'method': 'DEFAULT'}
    >>> effective_arguments({"dataset": "creditcard", "method": "ULDP-NAIVE", "n_users": 10, "distribution": "uniform"})
    {'dataset': 'creditcard', 'method': 'ULDP-NAIVE', 'distribution': 'uniform'}
    """
    from uldp.data import DATASETS
    from uldp.methods import parse_method

    dataset = DATASETS.get(params.get("dataset"))
    if dataset is not None and not dataset.scoring_changes_test_set:
        params = {name: value for name, value in params.items() if name != "test_scoring"}
    try:
        user_blind = not parse_method(params["method"]).reads_users
    except ValueError:  # an unknown method fails when it runs, with the registry's message
        user_blind = False
    if dataset is None or not user_blind:
        return dict(params)
    if dataset.fixed_silos:
        return {name: value for name, value in params.items() if name not in ALLOCATION_ARGUMENTS}
    if params.get("distribution", "uniform") == "uniform":
        return {name: value for name, value in params.items() if name != "n_users"}
    return dict(params)


def get_grid(name: str) -> Grid:
    """Return the grid called ``name``.

    Raises:
        ValueError: Unknown name (the message lists the known ones).
    """
    if name not in GRIDS:
        raise ValueError(f"unknown grid {name!r}; known grids: {', '.join(GRIDS)}")
    return GRIDS[name]


def check_profile(profile: str) -> str:
    """Return ``profile`` if it is one of :data:`PROFILES`.

    Raises:
        ValueError: Unknown profile (the message lists the known ones).
    """
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}; known profiles: {', '.join(PROFILES)}")
    return profile


def expand(grid_name: str, profile: str, *, seeds: Sequence[int] | None = None,
           methods: Sequence[str] | None = None, datasets: Sequence[str] | None = None, accountant: str = "rdp",
           target_epsilon: float | None = None) -> list[RunSpec]:
    """Every run of a grid at a profile, seeds innermost.

    ``accountant`` and ``target_epsilon`` enter a private run's arguments only when they differ from the paper's
    (RDP, sigma 5), so the paper's runs keep their keys and a run trained to a budget gets its own.

    Args:
        grid_name: A key of :data:`GRIDS`.
        profile: One of :data:`PROFILES`.
        seeds: Seeds to run instead of the profile's (paper: 0-4; smaller profiles: their reduction's).
        methods: Only the runs of these methods (default: all of the grid's).
        datasets: Only the runs on these datasets (default: all of the grid's; the weighting and user-sampling
            figures have a panel per dataset).
        accountant: The accountant of the private runs (``"rdp"``, the paper's, or ``"pld"``).
        target_epsilon: Train every private run to this budget (sigma calibrated by ``accountant``; see
            :class:`uldp.simulation.RunConfig`) instead of the paper's sigma. DEFAULT runs are unchanged.

    Returns:
        The runs, in the order of the paper's grid (settings, then methods, then seeds).

    Raises:
        ValueError: Unknown grid or profile, a negative or repeated seed, or a method or dataset the grid does not
            run.
    """
    grid = get_grid(grid_name)
    check_profile(profile)
    entries = grid.entries()
    if profile == "paper":
        profile_seeds = PAPER_SEEDS
    else:
        if profile not in grid.reductions:
            having = [name for name, other in GRIDS.items() if profile in other.reductions]
            raise ValueError(f"grid {grid_name!r} has no {profile} profile; grids with one: {', '.join(having)}")
        reduction = grid.reductions[profile]
        entries = [shrunk for shrunk in (reduction.apply(entry) for entry in entries) if shrunk is not None]
        profile_seeds = reduction.seeds
    entries = _only(entries, "method", methods, grid_name)
    entries = _only(entries, "dataset", datasets, grid_name)
    entries = [_with_privacy(entry, accountant, target_epsilon) for entry in entries]
    chosen = tuple(check_integer("seed", seed, minimum=0) for seed in (profile_seeds if seeds is None else seeds))
    if not chosen or len(set(chosen)) != len(chosen):
        raise ValueError(f"seeds must be distinct and at least one, got {list(chosen)!r}")
    specs = []
    for entry in entries:
        params = entry.kwargs
        for seed in chosen:
            specs.append(RunSpec(grid.name, grid.panel_label(params), grid.series_label(params), seed,
                                 tuple(sorted({**params, "seed": seed}.items()))))
    return specs


def _with_privacy(entry: Entry, accountant: str, target_epsilon: float | None) -> Entry:
    """``entry`` with a non-default accountant or a budget (sigma then calibrated) when its method is private."""
    from uldp.accounting import check_accountant

    check_accountant(accountant)
    params = entry.kwargs
    if params.get("sigma") is None:  # DEFAULT: no guarantee, nothing to account
        return entry
    if accountant != "rdp":
        params["accountant"] = accountant
    if target_epsilon is not None:
        params.update(target_epsilon=check_positive("target_epsilon", target_epsilon), sigma=None)
    return Entry.of(**params)


def _only(entries: list[Entry], field: str, wanted: Sequence[str] | None, grid_name: str) -> list[Entry]:
    """The entries whose ``field`` is one of ``wanted`` (all when ``None``).

    Raises:
        ValueError: ``wanted`` is empty or names a value no entry of the grid has (the error lists those it has).
    """
    if wanted is None:
        return entries
    known = list(dict.fromkeys(entry.kwargs[field] for entry in entries))
    if not wanted or any(value not in known for value in wanted):
        raise ValueError(f"{field}s {list(wanted)!r} not all in grid {grid_name!r}; its {field}s: {', '.join(known)}")
    return [entry for entry in entries if entry.kwargs[field] in wanted]


# -------------------------------------------------------------------------------------------------------- storage


def _canonical(value: Any) -> Any:
    """A JSON-ready copy with dict keys sorted and tuples as lists (so equal configs serialise equally)."""
    if isinstance(value, Mapping):
        return {str(key): _canonical(value[key]) for key in sorted(value, key=str)}
    if isinstance(value, (list, tuple)):
        return [_canonical(item) for item in value]
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"config values must be finite, got {value!r}")
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise ValueError(f"config values must be JSON scalars, lists or mappings, got {type(value).__name__} {value!r}")


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
    text = json.dumps(_canonical(config), sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def results_root(profile: str) -> Path:
    """Where a profile's results live: ``results/`` for paper and ``results/short/`` for short (committed),
    ``_build/results/`` otherwise."""
    check_profile(profile)
    if profile == "paper":
        return REPO_ROOT / "results"
    if profile == "short":
        return REPO_ROOT / "results" / "short"
    return REPO_ROOT / "_build" / "results"


def result_path(root: Path, spec: RunSpec) -> Path:
    """The file of one run: ``<root>/<grid>/<key>.json``."""
    return Path(root) / spec.grid / f"{spec.key}.json"


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


def read_result(path: Path) -> dict | None:
    """The stored result at ``path``, or ``None`` if there is none or it is not a complete result file.

    Raises:
        ValueError: A result file (this schema, with a ``result``) whose fields are malformed or whose run
            arguments do not match its key and file name; the message names the file.
    """
    try:
        payload = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(payload, dict) or payload.get("schema") != SCHEMA_VERSION or "result" not in payload:
        return None
    problem = _result_problem(payload, Path(path).stem)
    if problem:
        raise ValueError(f"stored result {path} is malformed: {problem}; delete it to run it again")
    return payload


def _result_problem(payload: dict, stem: str) -> str:
    """What is wrong with a stored result's fields, or "" (see :func:`read_result`)."""
    result, provenance, params, seed = (payload.get(name) for name in ("result", "provenance", "params", "seed"))
    if not isinstance(result, dict) or not result:
        return f"result must be a non-empty object, got {str(result)[:60]}"
    if not isinstance(provenance, dict):
        return f"provenance must be an object, got {str(provenance)[:60]}"
    wall = provenance.get("wall_seconds")
    if isinstance(wall, bool) or not isinstance(wall, (int, float)) or not 0 <= wall < math.inf:
        return f"provenance.wall_seconds must be a number >= 0, got {wall!r:.40}"
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        return f"seed must be an integer >= 0, got {seed!r:.40}"
    if not isinstance(params, dict) or not isinstance(payload.get("config"), dict):
        return "params and config must be objects"
    if params.get("seed", seed) != seed:
        return f"seed {seed} differs from the run arguments' {params.get('seed')!r:.40}"
    try:
        key = config_hash(effective_arguments(params))
    except (ValueError, TypeError, KeyError, AttributeError) as error:
        return f"run arguments cannot be keyed ({error})"
    if not payload.get("key") == stem == key:
        return f"its key {str(payload.get('key'))[:20]!r}, file name {stem!r} and run arguments (key {key}) disagree"
    return ""


def stored_result(root: Path, spec: RunSpec) -> dict | None:
    """The stored result of ``spec``: its grid's file, else the same run stored by another grid under ``root``.

    Grids share runs (the weighting figure's TcgaBrca runs are TcgaBrca privacy-utility runs): a key identifies
    the run's arguments, so a file of that key in any grid's folder is that run, and it is not run again.
    """
    own = read_result(result_path(root, spec))
    if own is not None:
        return own
    for path in sorted(Path(root).glob(f"*/{spec.key}.json")):
        stored = read_result(path)
        if stored is not None:
            return stored
    return None


# ----------------------------------------------------------------------------------------------------- provenance


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
    packages = {}
    for name in PROVENANCE_PACKAGES:
        try:
            packages[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            packages[name] = None
    # stored results are not code: a grid that is writing results/ does not make the code "locally changed"
    status = _git("status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)results")
    return {
        "command": command,
        "git_commit": _git("rev-parse", "HEAD"),
        "git_dirty": None if status is None else bool(status),
        "packages": packages,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
    }


# ------------------------------------------------------------------------------------------------------- backends


@dataclass(frozen=True)
class Backend:
    """What runs a run: ``resolve`` validates the arguments into the full configuration (a JSON-ready dict) and
    ``execute(params, checkpoint)`` runs that configuration and returns the per-round results (a JSON-ready dict),
    resuming from and saving its progress to the file ``checkpoint`` where it can (the grid deletes the file once
    the result is stored). Both must be module-level functions so that worker processes (spawned) can unpickle
    them."""

    resolve: Callable[[Mapping[str, Any]], dict]
    execute: Callable[[Mapping[str, Any], str], dict]


#: Run arguments handled here rather than by ``RunConfig``: ``max_test_records`` evaluates on a fixed random
#: subset of the test set (the smaller profiles; the paper profile always uses the whole test set).
WRAPPER_ARGUMENTS = ("max_test_records",)


def _split_arguments(params: Mapping[str, Any]) -> tuple[dict, dict]:
    config = {k: v for k, v in params.items() if k not in WRAPPER_ARGUMENTS}
    extra = {k: params[k] for k in WRAPPER_ARGUMENTS if k in params}
    limit = extra.get("max_test_records")
    if limit is not None:
        check_integer("max_test_records", limit)
    return config, extra


@functools.lru_cache(maxsize=2)
def _dataset(name: str, max_test_records: int | None, test_scoring: str) -> Any:
    """A loaded dataset, cached per process (a grid runs many configurations on one dataset)."""
    from dataclasses import replace

    import numpy as np

    from uldp.data import load

    data = load(name, test_scoring=test_scoring)
    if max_test_records is None or max_test_records >= data.x_test.shape[0]:
        return data
    # The same subset for every run (seed 0), so that methods and seeds are compared on equal terms.
    keep = np.sort(np.random.default_rng(0).permutation(data.x_test.shape[0])[:max_test_records])
    return replace(data, x_test=data.x_test[keep], y_test=data.y_test[keep])


def _simulation_resolve(params: Mapping[str, Any]) -> dict:
    from dataclasses import asdict

    from uldp.simulation import RunConfig

    config, extra = _split_arguments(params)
    return _canonical({**asdict(RunConfig(**config)), **extra})


def _simulation_execute(params: Mapping[str, Any], checkpoint: str) -> dict:
    from dataclasses import asdict

    from uldp.simulation import RunConfig, run

    config, extra = _split_arguments(params)
    config = RunConfig(**config)
    # a secure run's protocol state lives in its process: it restarts (protocol_runtime's runs are 3 rounds)
    data = _dataset(config.dataset, extra.get("max_test_records"), config.test_scoring)
    result = asdict(run(config, dataset=data, checkpoint=None if config.secure else checkpoint))
    del result["config"]  # stored once, resolved, beside the result
    return _canonical(_finite_floats(result))


def _finite_floats(value: Any) -> Any:
    """Replace non-finite floats (DEFAULT's epsilon is infinite) by ``None`` for strict JSON."""
    if isinstance(value, Mapping):
        return {key: _finite_floats(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite_floats(item) for item in value]
    if hasattr(value, "tolist"):
        return _finite_floats(value.tolist())
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


#: The in-process simulation of :mod:`uldp.simulation`.
SIMULATION = Backend(resolve=_simulation_resolve, execute=_simulation_execute)

# ------------------------------------------------------------------------------------------------------ execution


@dataclass(frozen=True)
class GridReport:
    """What :func:`run_grid` did.

    Attributes:
        grid: Grid name.
        profile: Profile.
        root: Results root.
        total: Runs in the grid.
        skipped: Runs already stored.
        executed: Runs executed now.
        failed: ``(key, error)`` of runs that raised.
        wall_seconds: Time spent.
    """

    grid: str
    profile: str
    root: str
    total: int
    skipped: int
    executed: int
    failed: tuple[tuple[str, str], ...]
    wall_seconds: float


def _now() -> str:
    """The UTC date and time of a stored run, to the second."""
    return _datetime.datetime.now(_datetime.timezone.utc).isoformat(timespec="seconds")


def _execute_one(backend: Backend, spec: RunSpec, path: str, base_provenance: dict) -> float:
    """Run one spec and store its file; return its wall time (runs in a worker process with ``--jobs``).

    The run saves its progress to ``<key>.ckpt`` beside its result (at most every minute), so a grid interrupted in
    the middle of a long run resumes that run from its last saved round; the file goes once the result is stored.
    The stored wall time includes the rounds run before an interruption (``info["resumed_seconds"]``).
    """
    params = spec.kwargs
    config = backend.resolve(params)
    checkpoint = Path(path).with_suffix(".ckpt")
    started = time.perf_counter()
    result = backend.execute(params, str(checkpoint))
    info = result.get("info") or {}
    wall = time.perf_counter() - started + info.get("resumed_seconds", 0.0)
    # what the data was (for example the Creditcard subset rather than the full file) belongs to provenance
    variant = {"dataset_variant": info.pop("dataset_variant")} if "dataset_variant" in info else {}
    payload = {
        "schema": SCHEMA_VERSION,
        "key": spec.key,
        "grid": spec.grid,
        "panel": spec.panel,
        "series": spec.series,
        "seed": spec.seed,
        "params": _canonical(params),
        "config": config,
        "result": result,
        "provenance": {
            **base_provenance,
            **variant,
            "date": _now(),
            "wall_seconds": round(wall, 3),
        },
    }
    write_json_atomic(Path(path), payload)
    checkpoint.unlink(missing_ok=True)
    return wall


def _interrupt(signum: int, frame: object) -> None:
    """Signal handler: turn a termination request into ``KeyboardInterrupt``, so ``finally`` blocks run (an atomic
    write in progress removes its temporary file) before the process goes."""
    raise KeyboardInterrupt(f"stopped by {signal.Signals(signum).name}")


@contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """While the block runs, SIGTERM (``kill``, a scheduler's stop) stops the grid the way Ctrl-C does (only the
    main thread may set handlers; elsewhere nothing changes)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _start_worker(threads: int) -> None:
    """Worker initializer: share the CPU cores between the worker processes (torch reads the variables when the
    backend first imports it), and let SIGTERM stop the worker cleanly (see :func:`_stop_workers`)."""
    os.environ["OMP_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = str(threads)
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(threads)
    signal.signal(signal.SIGTERM, _interrupt)


def _execute_in_worker(backend: Backend, spec: RunSpec, path: str, base_provenance: dict) -> float:
    """:func:`_execute_one` in a worker process; an interrupt ends the process once the run's cleanup has run (the
    pool would otherwise hand the worker its next run; the parent is stopping the grid)."""
    try:
        return _execute_one(backend, spec, path, base_provenance)
    except KeyboardInterrupt:
        os._exit(128 + signal.SIGINT)


def _stop_workers(pool: ProcessPoolExecutor, *, grace_seconds: float = 10.0) -> None:
    """Stop a grid's pool now: cancel the runs not started, send each worker SIGTERM (its run stops where it is,
    its last checkpoint kept, no temporary file left), and SIGKILL one still alive after ``grace_seconds``."""
    workers = list((pool._processes or {}).values())  # no public handle before Python 3.14's terminate_workers()
    pool.shutdown(wait=False, cancel_futures=True)
    for worker in workers:
        if worker.is_alive():
            worker.terminate()
    deadline = time.monotonic() + grace_seconds
    for worker in workers:
        worker.join(max(0.0, deadline - time.monotonic()))
        if worker.is_alive():
            worker.kill()
            worker.join()


def pending_runs(specs: Iterable[RunSpec], root: Path) -> list[RunSpec]:
    """The runs of ``specs`` that have no stored result under ``root`` (each distinct key once)."""
    seen: set[str] = set()
    pending = []
    for spec in specs:
        if spec.key in seen:
            continue
        seen.add(spec.key)
        if stored_result(root, spec) is None:
            pending.append(spec)
    return pending


def expected_seconds(specs: Iterable[RunSpec], root: Path | str) -> dict[str, float]:
    """Per run, the mean stored wall time of the same run at other seeds under ``root`` (any grid's folder).

    Returns:
        ``{key: seconds}`` for the runs of ``specs`` that have such a stored sibling; the others are left out.
    """
    def without_seed(params: Mapping[str, Any]) -> str:
        return config_hash({name: value for name, value in effective_arguments(params).items() if name != "seed"})

    walls: dict[str, list[float]] = {}
    for path in Path(root).glob("*/*.json"):
        stored = read_result(path)
        if stored is not None and "params" in stored:
            walls.setdefault(without_seed(stored["params"]), []).append(stored["provenance"]["wall_seconds"])
    found = {spec.key: walls.get(without_seed(spec.kwargs)) for spec in specs}
    return {key: sum(seconds) / len(seconds) for key, seconds in found.items() if seconds}


def run_grid(
    grid_name: str,
    profile: str,
    *,
    seeds: Sequence[int] | None = None,
    methods: Sequence[str] | None = None,
    datasets: Sequence[str] | None = None,
    jobs: int = 1,
    root: Path | str | None = None,
    backend: Backend = SIMULATION,
    progress: bool = True,
    command: str | None = None,
    accountant: str = "rdp",
    target_epsilon: float | None = None,
) -> GridReport:
    """Run every run of a grid that is not stored yet, storing each as it finishes.

    Already stored runs are skipped, so calling this again after an interruption resumes the grid, and several
    processes may work on one grid (each skips what another stored while it ran; nothing claims a run while it runs,
    so processes started together do the same runs twice, harmlessly: use ``jobs`` to split one grid). A run that
    raises an ``Exception`` is reported in :attr:`GridReport.failed` and the others go on. Ctrl-C
    (``KeyboardInterrupt``) or SIGTERM stops the grid and, with ``jobs > 1``, its worker processes (each run in
    progress stops at its last checkpoint; the finished runs stay stored; no temporary file is left). Only SIGKILL of
    this process leaves workers behind: each ends with its current run.

    Args:
        grid_name: A key of :data:`GRIDS`.
        profile: One of :data:`PROFILES`.
        seeds: Seeds instead of the profile's.
        methods: Only the runs of these methods.
        datasets: Only the runs on these datasets.
        jobs: Runs at once (``> 1``: worker processes started with ``spawn``, CPU threads shared between them).
        root: Results root (default :func:`results_root` of the profile).
        backend: What executes a run (default the simulation).
        progress: Show a tqdm bar with the remaining-time estimate (on stderr).
        command: Recorded in the provenance (default: this call).
        accountant, target_epsilon: As in :func:`expand` (the paper's runs when left at their defaults).

    Returns:
        A :class:`GridReport`.

    Raises:
        ValueError: Unknown grid or profile, bad seeds or ``jobs < 1``.
        KeyboardInterrupt: Ctrl-C or SIGTERM (the message names the signal).
    """
    check_integer("jobs", jobs)
    specs = expand(grid_name, profile, seeds=seeds, methods=methods, datasets=datasets, accountant=accountant,
                   target_epsilon=target_epsilon)
    root = Path(root) if root is not None else results_root(profile)
    started = time.perf_counter()
    # Seed-major order: an interrupted paper grid has whole figures with fewer seeds rather than half a figure.
    # Within a seed, longest first (by the same run's time at other seeds; unknown counts as longest): the last runs
    # are then the short ones, so with several jobs no worker waits long on another at the end.
    todo = pending_runs(specs, root)
    expected = expected_seconds(todo, root)
    todo.sort(key=lambda spec: (spec.seed, -expected.get(spec.key, math.inf)))
    n_distinct = len({spec.key for spec in specs})
    base = provenance(command or f"uldp.experiments.run_grid({grid_name!r}, {profile!r}, seeds={seeds!r}, jobs={jobs})")
    failed: list[tuple[str, str]] = []
    raced = 0
    from tqdm import tqdm

    bar = tqdm(total=len(todo), desc=f"{grid_name} [{profile}]", unit="run", disable=not progress or not todo,
               file=sys.stderr, dynamic_ncols=True)
    unfinished = {spec.key for spec in todo}

    def show_time_left() -> None:
        """With stored times of other seeds, show the time left by them (runs differ in length by 100x, so the
        bar's own estimate, per run, is far off; a run without one counts as the mean of those known)."""
        if expected:
            typical = sum(expected.values()) / len(expected)
            seconds = sum(expected.get(key, typical) for key in unfinished) / max(1, min(jobs, len(unfinished)))
            bar.set_postfix_str(f"about {_duration(seconds)} left by other seeds' times" if unfinished else "",
                                refresh=False)

    def advance(spec: RunSpec) -> None:
        unfinished.discard(spec.key)
        show_time_left()
        bar.update(1)

    show_time_left()
    bar.refresh()
    with bar, _sigterm_interrupts():
        if jobs == 1 or len(todo) <= 1:
            for spec in todo:
                if stored_result(root, spec) is not None:  # stored meanwhile by another process on this folder
                    raced += 1
                    advance(spec)
                    continue
                try:
                    _execute_one(backend, spec, str(result_path(root, spec)), base)
                except Exception as error:  # noqa: BLE001 - one bad run must not lose the others
                    failed.append((spec.key, f"{spec.panel} / {spec.series} / seed {spec.seed}: {error!r}"))
                advance(spec)
        else:
            threads = max(1, (os.cpu_count() or 1) // jobs)
            pool = ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn"),
                                       initializer=_start_worker, initargs=(threads,))
            try:
                waiting: dict[Future, RunSpec] = {}
                queue = list(todo)
                while queue or waiting:
                    while queue and len(waiting) < jobs:
                        spec = queue.pop(0)
                        if stored_result(root, spec) is not None:  # stored meanwhile by another process
                            raced += 1
                            advance(spec)
                            continue
                        waiting[pool.submit(_execute_in_worker, backend, spec, str(result_path(root, spec)),
                                            base)] = spec
                    done, _ = wait(waiting, return_when=FIRST_COMPLETED)
                    for future in done:
                        spec = waiting.pop(future)
                        if future.exception() is not None:
                            failed.append((spec.key, f"{spec.panel} / {spec.series} / seed {spec.seed}: "
                                                     f"{future.exception()!r}"))
                        advance(spec)
            except BaseException:  # Ctrl-C or SIGTERM: the workers stop too, not only this process
                _stop_workers(pool)
                raise
            pool.shutdown()
    return GridReport(grid_name, profile, str(root), n_distinct, n_distinct - len(todo) + raced,
                      len(todo) - len(failed) - raced, tuple(failed), time.perf_counter() - started)


# -------------------------------------------------------------------------------------------------------- loading


@dataclass(frozen=True)
class ResultSet:
    """The stored results of a grid at a profile.

    Attributes:
        grid: Grid name.
        profile: The profile the runs belong to.
        runs: Stored result files (dicts, see :func:`run_grid`) in grid order.
        missing: Specs with no stored result.
        root: Where they were read from.
    """

    grid: str
    profile: str
    runs: tuple[dict, ...]
    missing: tuple[RunSpec, ...]
    root: str

    @property
    def complete(self) -> bool:
        """Whether every run of the grid is stored."""
        return not self.missing

    @property
    def covers_every_line(self) -> bool:
        """Whether every line of every panel has at least one stored run (a whole figure, maybe with fewer seeds)."""
        stored = {(run["panel"], run["series"]) for run in self.runs}
        return bool(self.runs) and all((spec.panel, spec.series) in stored for spec in self.missing)

    def covered_panels(self) -> tuple[str, ...]:
        """The panels every line of which has at least one stored run, in grid order."""
        stored = {(run["panel"], run["series"]) for run in self.runs}
        uncovered = {spec.panel for spec in self.missing if (spec.panel, spec.series) not in stored}
        return tuple(dict.fromkeys(run["panel"] for run in self.runs if run["panel"] not in uncovered))

    def only_panels(self, panels: Iterable[str]) -> ResultSet:
        """The same results restricted to ``panels``.

        Raises:
            ValueError: A panel this grid does not have (the message lists the grid's panels).
        """
        keep = set(panels)
        known = dict.fromkeys([run["panel"] for run in self.runs] + [spec.panel for spec in self.missing])
        if keep - set(known):
            raise ValueError(f"panels {sorted(keep - set(known))!r} are not panels of grid {self.grid!r}; "
                             f"its panels: {'; '.join(known)}")
        return ResultSet(self.grid, self.profile, tuple(run for run in self.runs if run["panel"] in keep),
                         tuple(spec for spec in self.missing if spec.panel in keep), self.root)

    def frame(self) -> Any:
        """A long pandas DataFrame, one row per run and round: ``panel, series, seed, round`` and every per-round
        series of the results (``test_loss``, ``epsilon``, ...), plus the run arguments as columns."""
        import pandas as pd

        pieces = []
        for run in self.runs:
            per_round = {name: values for name, values in run["result"].items()
                         if isinstance(values, list) and values and not isinstance(values[0], (list, dict))}
            length = max((len(values) for values in per_round.values()), default=0)
            piece = {name: values for name, values in per_round.items() if len(values) == length}
            piece.setdefault("round", list(range(1, length + 1)))
            labels = {"panel": run["panel"], "series": run["series"], "seed": run["seed"], **run["params"]}
            piece.update({name: [value] * length for name, value in labels.items()})
            pieces.append((length, piece))
        names = list(dict.fromkeys(name for _, piece in pieces for name in piece))
        # One DataFrame from whole columns (a missing column is None for that run): no per-run concatenation.
        return pd.DataFrame({name: [value for length, piece in pieces for value in piece.get(name, [None] * length)]
                             for name in names})

    def describe(self) -> str:
        """One paragraph saying what these results are: profile, coverage, when, how and by which commit."""
        n_total = len(self.runs) + len(self.missing)
        if not self.runs:
            return f"No stored {self.profile}-profile results for grid {self.grid!r} under {self.root}."
        dates = sorted(run["provenance"]["date"][:16].replace("T", " ") for run in self.runs)
        when = f"on {dates[0]} UTC" if dates[0] == dates[-1] else f"between {dates[0]} and {dates[-1]} UTC"
        commits = sorted({(run["provenance"].get("git_commit") or "unknown")[:10]
                          + ("+local changes" if run["provenance"].get("git_dirty") else "") for run in self.runs})
        commands = sorted({run["provenance"]["command"] for run in self.runs})
        distinct = {run["key"]: run for run in self.runs}.values()  # a shared run counts once
        seconds = sum(run["provenance"]["wall_seconds"] for run in distinct)
        seeds = sorted({run["seed"] for run in self.runs})
        machines = sorted({f"{run['provenance'].get('platform', '?')}, {run['provenance'].get('cpu_count', '?')} CPUs"
                           for run in self.runs})
        shared = (f" ({len(distinct)} distinct: a run shown in more than one panel counts once)"
                  if len(distinct) < len(self.runs) else "")
        what = "epsilons from accounting alone, nothing trained, for " if self.root == ACCOUNTING_ROOT else ""
        return (
            f"{what}{len(self.runs)} of {n_total} runs{shared} of grid {self.grid!r} at the {self.profile} profile "
            f"(seeds {', '.join(map(str, seeds))}), made {when} by `{'`, `'.join(commands)}` at commit "
            f"{', '.join(commits)} on {'; '.join(machines)}; {_duration(seconds)} of run time in all."
        )


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min" if seconds < 7200 else \
        f"{seconds / 3600:.1f} h"


def load_results(grid_name: str, profile: str, *, seeds: Sequence[int] | None = None,
                 root: Path | str | None = None, accountant: str = "rdp",
                 target_epsilon: float | None = None) -> ResultSet:
    """Read the stored results of a grid at a profile (nothing runs).

    Args:
        grid_name: A key of :data:`GRIDS`.
        profile: One of :data:`PROFILES`.
        seeds: Seeds instead of the profile's.
        root: Results root (default :func:`results_root` of the profile).
        accountant, target_epsilon: The runs made with these (see :func:`expand`; default: the paper's runs).

    Returns:
        The stored runs and the missing ones.

    Raises:
        ValueError: Unknown grid or profile, or bad seeds.
    """
    root = Path(root) if root is not None else results_root(profile)
    runs, missing, seen = [], [], set()
    for spec in expand(grid_name, profile, seeds=seeds, accountant=accountant, target_epsilon=target_epsilon):
        place = (spec.panel, spec.series, spec.seed)
        if place in seen:
            continue
        seen.add(place)
        stored = stored_result(root, spec)
        if stored is None:
            missing.append(spec)
        else:  # a run shared by several panels (see effective_arguments) is shown in each, labelled as there
            runs.append({**stored, "panel": spec.panel, "series": spec.series, "params": spec.kwargs})
    return ResultSet(grid_name, profile, tuple(runs), tuple(missing), str(root))


#: The ``root`` of a :class:`ResultSet` made by :func:`accounted_results` (nothing stored, nothing trained).
ACCOUNTING_ROOT = "accounting (nothing trained)"


def accounted_results(grid_name: str, *, seeds: Sequence[int] = (0,), methods: Sequence[str] | None = None,
                      accountant: str = "rdp") -> ResultSet:
    """The privacy half of a grid's paper profile, without training: per run, the user-level epsilon after the last
    round from :func:`uldp.simulation.accounted_epsilon` (exactly what the trained run would report).

    With ``accountant="pld"`` it re-accounts the paper's runs (their keys, their sigma) by the tighter accountant:
    the accountant never changes the training, so the stored utilities stand beside the smaller epsilons.

    Args:
        grid_name: A key of :data:`GRIDS`.
        seeds: The allocation seeds (GROUP-k's filtering and silo sizes depend on them).
        methods: Only the runs of these methods (default: all).
        accountant: ``"rdp"`` (what the runs report) or ``"pld"``.

    Returns:
        A paper-profile :class:`ResultSet` (root :data:`ACCOUNTING_ROOT`) whose results hold only ``epsilon``: one
        value, the last round's (``None`` for DEFAULT); runs of other methods are left out, not counted missing.

    Raises:
        ValueError: Unknown grid, bad seeds, or a method name the grid does not run.
    """
    from uldp.simulation import RunConfig, accounted_epsilon

    specs = expand(grid_name, "paper", seeds=seeds)
    if methods is not None:
        known = {spec.kwargs["method"] for spec in specs}
        if set(methods) - known:
            raise ValueError(f"methods {sorted(set(methods) - known)!r} are not run by grid {grid_name!r}; "
                             f"its methods: {', '.join(sorted(known))}")
        specs = [spec for spec in specs if spec.kwargs["method"] in methods]
    base = provenance(f"uldp.experiments.accounted_results({grid_name!r}, accountant={accountant!r})")
    accounted: dict[str, tuple[float | None, dict]] = {}  # a run shared by several panels is accounted once
    runs = []
    for spec in specs:
        config, extra = _split_arguments(spec.kwargs)
        if spec.key not in accounted:
            start = time.perf_counter()
            resolved = RunConfig(**config)
            epsilon = accounted_epsilon(resolved, accountant=accountant,
                                        dataset=_dataset(resolved.dataset, extra.get("max_test_records"),
                                                         resolved.test_scoring))
            wall = round(time.perf_counter() - start, 3)
            accounted[spec.key] = epsilon, {**base, "date": _now(), "wall_seconds": wall}
        epsilon, made = accounted[spec.key]
        runs.append({"key": spec.key, "panel": spec.panel, "series": spec.series, "seed": spec.seed,
                     "params": spec.kwargs, "result": {"epsilon": [epsilon]}, "provenance": made})
    return ResultSet(grid_name, "paper", tuple(runs), (), ACCOUNTING_ROOT)


@dataclass(frozen=True)
class ChapterResults:
    """What a chapter shows: the results, a sentence saying where they come from, and the panels of the figure
    that paper-profile results cover when they do not cover all of it (``None`` otherwise)."""

    results: ResultSet
    note: str
    paper_panels: ResultSet | None = None


def chapter_results(grid_name: str, profile: str, *, backend: Backend = SIMULATION,
                    paper_root: Path | str | None = None, root: Path | str | None = None) -> ChapterResults:
    """The results an experiment chapter shows: the committed paper-profile ones when they cover every line of the
    figure (at least one seed each), else run the grid at the chapter's profile (resuming from what is stored), and
    the panels that paper-profile results cover whole beside it.

    At the ``smoke`` profile the smoke grid runs even when paper results exist, so that CI exercises the
    simulation path of every chapter; at the ``paper`` profile the paper grid itself runs (resuming).

    Args:
        grid_name: A key of :data:`GRIDS`.
        profile: The chapter's profile (papermill parameter).
        backend: What executes runs.
        paper_root: Where committed paper results live (default ``results/``).
        root: Where smoke/default results go (default ``_build/results/``).

    Returns:
        The results and a note for the reader.
    """
    check_profile(profile)
    paper = load_results(grid_name, "paper", root=paper_root)
    if profile != "paper" and paper.covers_every_line:
        if profile == "smoke":
            check = run_grid(grid_name, "smoke", root=root, backend=backend, progress=False,
                             command=f"book chapter, profile smoke ({grid_name})")
            if check.failed:
                raise RuntimeError(f"smoke runs of {grid_name!r} failed: {check.failed}")
        return ChapterResults(paper, "These are the committed paper-profile results. " + paper.describe())
    own_root = paper_root if profile == "paper" else root
    report = run_grid(grid_name, profile, root=own_root, backend=backend, progress=False,
                      command=f"book chapter, profile {profile} ({grid_name})")
    if report.failed:
        raise RuntimeError(f"runs of {grid_name!r} at profile {profile!r} failed: {report.failed}")
    results = load_results(grid_name, profile, root=own_root)
    done = (f"({report.executed} runs now, {report.skipped} already stored; {_duration(report.wall_seconds)}). ")
    if profile == "paper":
        return ChapterResults(results, f"This chapter ran the paper-profile grid {done}" + results.describe())
    if paper.runs:
        why = (f"Paper-profile results are stored only in part ({len(paper.runs)} of "
               f"{len(paper.runs) + len(paper.missing)} runs, not every line of the figure), so they are not shown; ")
    else:
        why = "No paper-profile results are committed for this grid, so "
    note = (why + f"this chapter ran the grid at the **{profile}** profile {done}These runs are far smaller than "
            "the paper's: read shapes, not numbers. " + results.describe())
    covered = paper.covered_panels()
    if not covered:
        return ChapterResults(results, note)
    paper_panels = paper.only_panels(covered)
    note += (f" The committed paper-profile results do cover every line of {len(covered)} panel(s) "
             f"({'; '.join(covered)}); they are shown after the {profile}-profile figure. " + paper_panels.describe())
    return ChapterResults(results, note, paper_panels)


def summarise(frame: Any, value: str) -> Any:
    """Mean, standard deviation and number of seeds of one per-round column, per panel, series and round.

    Args:
        frame: A :meth:`ResultSet.frame`.
        value: The column, e.g. ``"test_loss"`` or ``"epsilon"``.

    Returns:
        A DataFrame with columns ``panel, series, round, mean, std, n`` (``std`` is 0 for a single seed; rounds
        where the value is missing, such as DEFAULT's epsilon, are dropped).

    Raises:
        ValueError: ``value`` is not a column of ``frame``.
    """
    if value not in frame:
        raise ValueError(f"no column {value!r} in the results; columns: {', '.join(map(str, frame.columns))}")
    present = frame.dropna(subset=[value])
    grouped = present.groupby(["panel", "series", "round"], sort=False)[value]
    summary = grouped.agg(mean="mean", std="std", n="count").reset_index()
    summary["std"] = summary["std"].fillna(0.0)
    return summary


def grid_table(grid_name: str, profile: str) -> Any:
    """The run arguments of each line (series) of a grid at a profile, for the chapters.

    Arguments that are equal for every run go to ``table.attrs["constant"]``, the panels (settings) to
    ``table.attrs["panels"]`` and the seeds to ``table.attrs["seeds"]``. Where a series' argument differs between
    panels (MNIST's ULDP-AVG learning rate depends on the users), the cell lists the values, panel order, "a / b".

    Raises:
        ValueError: Unknown grid or profile.
    """
    import pandas as pd

    grid = get_grid(grid_name)
    specs = expand(grid_name, profile)
    table = pd.DataFrame([{"series": spec.series, **spec.kwargs} for spec in specs]).drop(columns="seed")
    constant = {name: table[name].tolist()[0] for name in table.columns if table[name].astype(str).nunique() == 1}
    shown_elsewhere = [f for f in (*grid.panel_fields, *grid.series_fields) if f not in constant]
    table = table.drop(columns=list(constant) + shown_elsewhere)
    result = table.groupby("series", sort=False).agg(
        lambda column: " / ".join(dict.fromkeys("-" if pd.isna(v) else f"{v:g}" if isinstance(v, float) else str(v)
                                                for v in column)))
    result.attrs.update(constant=constant, panels=list(dict.fromkeys(spec.panel for spec in specs)),
                        seeds=sorted({spec.seed for spec in specs}))
    return result
