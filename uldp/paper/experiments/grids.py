"""The grid catalogue: each figure of the paper's Section 5 as a named grid of runs, and how the smaller profiles
shrink it.

The paper-profile runs are built from :mod:`uldp.paper.settings` (settings.md); the ``smoke``, ``default`` and
``short`` profiles are :class:`Reduction` s of them, written in :data:`GRIDS`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from uldp.data import DATASETS
from uldp.data.allocation import WITH_REPLACEMENT
from uldp.defaults import DELTA, SIGMA
from uldp.methods import parse_method
from uldp.paper.settings import (
    AUTHORS_UNIFORM_DATASETS,
    PRIVACY_UTILITY,
    PRIVACY_UTILITY_METHODS,
    PROTOCOL_RUNTIME,
    USER_SAMPLING,
    WEIGHTING,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from uldp.defaults import Hyper
    from uldp.paper.settings import FigureSetting

#: Profiles, smallest first. ``paper`` is the authors' settings with 5 seeds; ``short`` is the paper's federation
#: with fewer rounds and local epochs, for the grids that have it (:attr:`Grid.reductions`).
PROFILES: tuple[str, ...] = ("smoke", "default", "short", "paper")
#: The utility metric of each dataset in the paper's figures (accuracy; the C-index for the survival task).
UTILITY_METRIC: dict[str, str] = {
    "creditcard": "accuracy",
    "mnist": "accuracy",
    "heart_disease": "accuracy",
    "tcga_brca": "c_index",
    "synthetic": "accuracy",
}
#: Metrics with a tail over seeds (TcgaBrca's C-index collapses on some noise draws, in the authors' code as in
#: ``uldp``): the chapters give their median and interquartile range beside the mean, and draw medians with
#: interquartile bands (``uldp.paper.plots.small_multiples_figure``).
TAILED_METRICS: tuple[str, ...] = ("c_index",)


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


def _common(
    dataset: str,
    *,
    n_users: int,
    n_silos: int,
    distribution: str,
    rounds: int,
    batch_size: int,
    method: str,
    hyper: Hyper,
    q: float = 1.0,
) -> Entry:
    # The medical datasets are scored as the authors scored them, and their runs say so (issue 19).
    scoring = {"test_scoring": "pooled"} if DATASETS[dataset].fixed_silos else {}
    if distribution == "uniform" and dataset in AUTHORS_UNIFORM_DATASETS:
        distribution = WITH_REPLACEMENT
    return Entry.of(
        dataset=dataset,
        method=method,
        n_users=n_users,
        n_silos=n_silos,
        distribution=distribution,
        rounds=rounds,
        batch_size=batch_size,
        sigma=None if method == "DEFAULT" else SIGMA,
        delta=DELTA,
        q=q,
        **scoring,
        **hyper.params(n_users),
    )


def _privacy_utility_entries(dataset: str) -> list[Entry]:
    settings = PRIVACY_UTILITY[dataset]
    return [
        _common(
            dataset,
            n_users=n_users,
            n_silos=settings.n_silos,
            distribution=distribution,
            rounds=settings.rounds,
            batch_size=settings.batch_size,
            method=method,
            hyper=settings.hyper(parse_method(method).family),
        )
        for n_users in settings.users
        for distribution in settings.distributions
        for method in PRIVACY_UTILITY_METHODS
    ]


def _figure_entries(settings: FigureSetting) -> list[Entry]:
    """The runs of one row of a figure's table: users, silos, distributions, methods and q, in that order."""
    return [
        _common(
            settings.dataset,
            n_users=n_users,
            n_silos=n_silos,
            distribution=distribution,
            rounds=settings.rounds,
            batch_size=settings.batch_size,
            method=method,
            hyper=settings.hyper,
            q=q,
        )
        for n_users in settings.users
        for n_silos in settings.silos
        for distribution in settings.distributions
        for method in settings.methods
        for q in settings.q
    ]


def _weighting_entries() -> list[Entry]:
    return [entry for settings in WEIGHTING for entry in _figure_entries(settings)]


def _user_sampling_entries() -> list[Entry]:
    return [entry for settings in USER_SAMPLING for entry in _figure_entries(settings)]


def _protocol_runtime_entries() -> list[Entry]:
    return [
        Entry((*entry.params, ("secure", True)))
        for settings in PROTOCOL_RUNTIME
        for entry in _figure_entries(settings)
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
        protocol: Protocol 1's parameters for the secure runs (:class:`uldp.secure.ProtocolParameters` fields, e.g.
            test keys where a profile only checks the secure path); empty keeps the paper's.
    """

    seeds: tuple[int, ...] = (0,)
    rounds: int | None = None
    local_epochs: int | None = None
    users: tuple[tuple[int, int], ...] = ()
    methods: tuple[str, ...] | None = None
    keep: tuple[tuple[str, tuple[Any, ...]], ...] = ()
    max_train_records: int | None = None
    max_test_records: int | None = None
    protocol: tuple[tuple[str, Any], ...] = ()

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
        if self.protocol and params.get("secure"):
            params["protocol"] = dict(self.protocol)
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
        return (
            f"{_FIELD_LABELS[name]}={value:g}"
            if isinstance(value, float)
            else f"{_FIELD_LABELS[name]}={value}"
        )
    return str(value)


def _privacy_utility_grid(
    dataset: str,
    title: str,
    figure: str,
    smoke: Reduction,
    default: Reduction,
    short: Reduction | None = None,
) -> Grid:
    reductions = {"smoke": smoke, "default": default} | (
        {"short": short} if short is not None else {}
    )
    return Grid(
        dataset,
        title,
        figure,
        "privacy_utility",
        lambda: _privacy_utility_entries(dataset),
        ("n_users", "distribution"),
        ("method",),
        reductions,
    )


_SMOKE_METHODS = ("DEFAULT", "ULDP-NAIVE", "ULDP-GROUP-2", "ULDP-SGD", "ULDP-AVG", "ULDP-AVG-w")

#: Every named grid. The ``smoke`` reductions keep every code path (each method family, each allocation scheme)
#: at two rounds; the ``default`` ones keep the paper's hyperparameters but fewer rounds, local epochs, settings,
#: users or records, so that each chapter runs in about three minutes on 2 CPU cores (their silo-level methods,
#: DEFAULT, ULDP-NAIVE and ULDP-GROUP-k, cost the most: Q epochs over every record of every silo each round).
GRIDS: dict[str, Grid] = {
    grid.name: grid
    for grid in (
        _privacy_utility_grid(
            "creditcard",
            "Privacy-utility trade-offs on Creditcard",
            "Figure 4",
            smoke=Reduction(
                rounds=2,
                local_epochs=1,
                users=((100, 20),),
                methods=_SMOKE_METHODS,
                keep=(("n_users", (100,)),),
                max_train_records=500,
            ),
            default=Reduction(
                rounds=8,
                local_epochs=1,
                keep=(("n_users", (100,)),),
                max_train_records=1500,
                methods=tuple(m for m in PRIVACY_UTILITY_METHODS if m != "ULDP-GROUP-median"),
            ),
        ),
        _privacy_utility_grid(
            "mnist",
            "Privacy-utility trade-offs on MNIST",
            "Figure 5",
            smoke=Reduction(
                rounds=2,
                local_epochs=1,
                users=((100, 10),),
                methods=tuple(m for m in _SMOKE_METHODS if m != "ULDP-NAIVE"),
                keep=(("n_users", (100,)), ("distribution", ("zipf-noniid",))),
                max_train_records=300,
                max_test_records=500,
            ),
            # ULDP-SGD is left out here (its per-user gradients are the slowest path on MNIST); the other
            # datasets' chapters compare it with ULDP-AVG.
            default=Reduction(
                rounds=4,
                local_epochs=1,
                users=((10000, 200),),
                max_train_records=1000,
                max_test_records=1000,
                methods=("DEFAULT", "ULDP-GROUP-2", "ULDP-AVG", "ULDP-AVG-w"),
                keep=(("distribution", ("zipf", "zipf-noniid")),),
            ),
            # The paper's federations of the non-iid claim (ULDP-AVG, zipf iid and non-iid, 100 and 10000 users,
            # every record) at T = 20 and Q = 5 instead of 200 and 50: a run alone on 2 CPU cores takes 7 (100 users)
            # to 12 minutes (10000), where the paper's scale takes about 100 times longer.
            short=Reduction(
                seeds=(0, 1, 2),
                rounds=20,
                local_epochs=5,
                methods=("ULDP-AVG",),
                keep=(("distribution", ("zipf", "zipf-noniid")),),
            ),
        ),
        _privacy_utility_grid(
            "heart_disease",
            "Privacy-utility trade-offs on HeartDisease",
            "Figure 6",
            smoke=Reduction(
                rounds=2, local_epochs=1, methods=_SMOKE_METHODS, keep=(("n_users", (50,)),)
            ),
            default=Reduction(rounds=15, local_epochs=1),
        ),
        _privacy_utility_grid(
            "tcga_brca",
            "Privacy-utility trade-offs on TcgaBrca",
            "Figure 7",
            smoke=Reduction(
                rounds=2, local_epochs=1, methods=_SMOKE_METHODS, keep=(("n_users", (50,)),)
            ),
            default=Reduction(rounds=15, local_epochs=1),
        ),
        Grid(
            "weighting",
            "Enhanced weighting: ULDP-AVG vs ULDP-AVG-w (test loss)",
            "Figure 8",
            "weighting",
            _weighting_entries,
            ("dataset", "n_silos"),
            ("method", "distribution"),
            {
                "smoke": Reduction(
                    rounds=2,
                    local_epochs=1,
                    users=((1000, 40), (200, 50)),
                    keep=(("n_silos", (5, 6)),),
                    max_train_records=500,
                ),
                # 100 users on 2,000 Creditcard records: 20 records per user (the paper: 25).
                "default": Reduction(
                    rounds=10,
                    local_epochs=1,
                    users=((1000, 100), (200, 100)),
                    max_train_records=2000,
                ),
            },
        ),
        Grid(
            "user_sampling",
            "User-level sub-sampling with ULDP-AVG-w",
            "Figure 9",
            "user_sampling",
            _user_sampling_entries,
            ("dataset",),
            ("q",),
            {
                "smoke": Reduction(
                    rounds=2,
                    local_epochs=1,
                    users=((1000, 20), (10000, 20)),
                    keep=(("q", (0.1, 1.0)),),
                    max_train_records=300,
                    max_test_records=500,
                ),
                # 20 records per user on Creditcard (the paper: 25) and 10 on MNIST (the paper: 6).
                "default": Reduction(
                    rounds=10,
                    local_epochs=1,
                    users=((1000, 100), (10000, 200)),
                    max_train_records=2000,
                    max_test_records=1000,
                ),
            },
        ),
        Grid(
            "protocol_runtime",
            "Private weighting protocol runtime on the medical datasets",
            "Figure 10",
            "protocol_runtime",
            _protocol_runtime_entries,
            ("dataset",),
            ("n_users",),
            {
                # smoke only checks the secure path (the chapters show the committed paper-profile runs): test
                # keys, where the paper's 3072-bit keys and their proofs took 45 s of the smoke book
                "smoke": Reduction(
                    rounds=1,
                    local_epochs=1,
                    keep=(("n_users", (10,)),),
                    protocol=(("key_bits", 1024), ("n_max", 500), ("insecure_test_key", True)),
                ),
                "default": Reduction(rounds=1, local_epochs=10),
            },
        ),
    )
}


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
