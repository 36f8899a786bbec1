"""Run keys: the arguments that identify a run (:func:`effective_arguments`), their hash (:func:`config_hash`), and
the runs of a grid at a profile (:func:`expand`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from uldp.accounting import check_accountant
from uldp.common.checks import check_integer, check_positive, renamed_keyword
from uldp.common.provenance import config_hash
from uldp.data import DATASETS
from uldp.data.allocation import WITH_REPLACEMENT
from uldp.methods import parse_method
from uldp.paper.experiments.grids import GRIDS, Entry, check_profile, get_grid
from uldp.paper.settings import paper_seeds
from uldp.run_config import STORED_NAMES

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence


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


#: How stored runs name the budget ``RunConfig(epsilon=)`` (their keys hash it).
STORED_EPSILON = next(stored for stored, name in STORED_NAMES.items() if name == "epsilon")
#: The two readings of the paper's uniform allocation: balanced users, and the authors' independent draws.
UNIFORM_SCHEMES: tuple[str, ...] = ("uniform", WITH_REPLACEMENT)
#: Run arguments that only say how records are allocated to users (and, without fixed silos, to silos).
ALLOCATION_ARGUMENTS: tuple[str, ...] = ("n_users", "distribution", "n_labels")


def effective_arguments(params: Mapping[str, Any]) -> dict[str, Any]:
    """The run arguments that can change a run's result: those that identify its stored file.

    A user-blind method (DEFAULT, ULDP-NAIVE: :attr:`~uldp.methods.MethodSpec.reads_users` is false) trains on every
    record of each silo alike, so only the silos of the records matter:

    - on a dataset whose silos are fixed (HeartDisease, TcgaBrca) the allocation draws only users, and the run is the
      same whatever the number of users or the distribution;
    - under the ``uniform`` allocation of the other datasets the silos are a balanced permutation drawn after the
      users' one, which takes the same draws whatever the number of users, so the run is the same for every ``|U|``;
      under ``uniform-with-replacement`` the silos are drawn first, with the same effect.

    Both are checked bit for bit in ``tests/test_experiments_keys.py``; those arguments are dropped, and one stored run
    serves every panel it appears in. Likewise ``test_scoring`` is dropped on a dataset whose scorings give the
    same test set (:attr:`~uldp.data.DatasetSpec.scoring_changes_test_set` false: TcgaBrca, also checked bit for
    bit), so its runs made before the scoring was a run argument keep their keys.

    >>> effective_arguments({"dataset": "tcga_brca", "method": "DEFAULT", "n_users": 50, "distribution": "zipf"})
    {'dataset': 'tcga_brca', 'method': 'DEFAULT'}
    >>> effective_arguments({"dataset": "creditcard", "method": "ULDP-NAIVE", "n_users": 10, "distribution": "uniform"})
    {'dataset': 'creditcard', 'method': 'ULDP-NAIVE', 'distribution': 'uniform'}
    """
    dataset_name = params.get("dataset")
    dataset = DATASETS.get(dataset_name) if isinstance(dataset_name, str) else None
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
    if params.get("distribution", "uniform") in UNIFORM_SCHEMES:  # silos drawn alike whatever |U|
        return {name: value for name, value in params.items() if name != "n_users"}
    return dict(params)


@renamed_keyword("target_epsilon", "epsilon")
def expand(
    grid_name: str,
    profile: str,
    *,
    seeds: Sequence[int] | None = None,
    methods: Sequence[str] | None = None,
    datasets: Sequence[str] | None = None,
    where: Mapping[str, Sequence[str]] | None = None,
    accountant: str = "rdp",
    epsilon: float | None = None,
    uniform_allocation: str | None = None,
) -> list[RunSpec]:
    """Every run of a grid at a profile, seeds innermost.

    ``accountant`` and ``epsilon`` enter a private run's arguments only when they differ from the paper's (RDP,
    sigma 5), so the paper's runs keep their keys and a run trained to a budget gets its own; the budget enters under
    its stored name ``target_epsilon`` (:data:`uldp.run_config.STORED_NAMES`), so those runs keep theirs too.

    Args:
        grid_name: A key of :data:`GRIDS`.
        profile: One of :data:`PROFILES`.
        seeds: Seeds to run instead of the profile's (paper: :func:`uldp.paper.settings.paper_seeds`; smaller
            profiles: their reduction's).
        methods: Only the runs of these methods (default: all of the grid's).
        datasets: Only the runs on these datasets (default: all of the grid's; the weighting and user-sampling
            figures have a panel per dataset).
        where: Only the runs whose parameter ``field`` is one of ``where[field]``, values written as ``str`` writes
            them (``{"n_users": ["100"], "distribution": ["zipf"]}``: one panel of the MNIST grid).
        accountant: The accountant of the private runs (``"rdp"``, the paper's, or ``"pld"``).
        epsilon: Train every private run to this budget (sigma calibrated by ``accountant``; see
            :class:`uldp.simulation.RunConfig`) instead of the paper's sigma. DEFAULT runs are unchanged. Its old
            name ``target_epsilon`` is accepted for one release, with a ``DeprecationWarning``.
        uniform_allocation: The scheme of the panels the paper calls uniform on the datasets of
            :data:`~uldp.paper.settings.AUTHORS_UNIFORM_DATASETS` (default theirs, ``uniform-with-replacement``;
            ``"uniform"`` gives the balanced runs, the paper profile's before issue 32, to compare the two).

    Returns:
        The runs, in the order of the paper's grid (settings, then methods, then seeds).

    Raises:
        ValueError: Unknown grid or profile, a negative or repeated seed, a method, dataset or ``where`` parameter
            or value the grid does not run, or a ``uniform_allocation`` other than the two uniform schemes.
    """
    grid = get_grid(grid_name)
    check_profile(profile)
    entries = grid.entries()
    if profile == "paper":
        profile_seeds = paper_seeds(grid_name)
    else:
        if profile not in grid.reductions:
            having = [name for name, other in GRIDS.items() if profile in other.reductions]
            raise ValueError(
                f"grid {grid_name!r} has no {profile} profile; grids with one: {', '.join(having)}"
            )
        reduction = grid.reductions[profile]
        entries = [
            shrunk for shrunk in (reduction.apply(entry) for entry in entries) if shrunk is not None
        ]
        profile_seeds = reduction.seeds
    entries = _only(entries, "method", methods, grid_name)
    entries = _only(entries, "dataset", datasets, grid_name)
    for field, values in (where or {}).items():
        fields = sorted({name for entry in entries for name in entry.kwargs})
        if field not in fields:
            raise ValueError(
                f"grid {grid_name!r} has no parameter {field!r} to select by; its parameters: "
                f"{', '.join(fields)}"
            )
        entries = _only(entries, field, values, grid_name, label=f"values of {field}")
    entries = [_with_privacy(entry, accountant, epsilon) for entry in entries]
    if uniform_allocation is not None:
        entries = [_with_uniform(entry, uniform_allocation) for entry in entries]
    chosen = tuple(
        check_integer("seed", seed, minimum=0)
        for seed in (profile_seeds if seeds is None else seeds)
    )
    if not chosen or len(set(chosen)) != len(chosen):
        raise ValueError(f"seeds must be distinct and at least one, got {list(chosen)!r}")
    specs = []
    for entry in entries:
        params = entry.kwargs
        for seed in chosen:
            specs.append(
                RunSpec(
                    grid.name,
                    grid.panel_label(params),
                    grid.series_label(params),
                    seed,
                    tuple(sorted({**params, "seed": seed}.items())),
                )
            )
    return specs


def _with_privacy(entry: Entry, accountant: str, epsilon: float | None) -> Entry:
    """``entry`` with a non-default accountant or a budget (sigma then calibrated) when its method is private."""
    check_accountant(accountant)
    params = entry.kwargs
    if params.get("sigma") is None:  # DEFAULT: no guarantee, nothing to account
        return entry
    if accountant != "rdp":
        params["accountant"] = accountant
    if epsilon is not None:  # under the name stored runs give it, which their keys hash
        params.update({STORED_EPSILON: check_positive("epsilon", epsilon), "sigma": None})
    return Entry.of(**params)


def _with_uniform(entry: Entry, scheme: str) -> Entry:
    """``entry`` with ``scheme`` for the authors' uniform draws (``uniform-with-replacement``), unchanged otherwise."""
    if scheme not in UNIFORM_SCHEMES:
        raise ValueError(
            f"uniform_allocation must be one of {', '.join(UNIFORM_SCHEMES)}, got {scheme!r}"
        )
    params = entry.kwargs
    if params.get("distribution") != WITH_REPLACEMENT:
        return entry
    return Entry.of(**{**params, "distribution": scheme})


def _only(
    entries: list[Entry],
    field: str,
    wanted: Sequence[str] | None,
    grid_name: str,
    *,
    label: str | None = None,
) -> list[Entry]:
    """The entries whose ``field``, written as ``str`` writes it, is one of ``wanted`` (all when ``None``).

    Raises:
        ValueError: ``wanted`` is empty or names a value no entry of the grid has (the error lists those it has,
            as ``label``, default the field's plural).
    """
    if wanted is None:
        return entries
    label = label or f"{field}s"
    known = list(dict.fromkeys(str(entry.kwargs.get(field)) for entry in entries))
    if not wanted or any(str(value) not in known for value in wanted):
        raise ValueError(
            f"{label} {list(wanted)!r} not all in grid {grid_name!r}; its {label}: {', '.join(known)}"
        )
    chosen = {str(value) for value in wanted}
    return [entry for entry in entries if str(entry.kwargs.get(field)) in chosen]
