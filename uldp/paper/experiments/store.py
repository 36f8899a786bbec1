"""Storage of runs: one JSON file per run, ``<root>/<grid>/<key>.json``, read and written as a :class:`StoredRun`
(atomically: a temporary file, then ``os.replace``), and the roots of each profile."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from uldp.common.atomic import read_complete_json
from uldp.common.provenance import REPO_ROOT, config_hash
from uldp.paper.experiments.grids import check_profile
from uldp.paper.experiments.keys import effective_arguments

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from uldp.paper.experiments.keys import RunSpec

#: Version of the result-file layout; bumped when the layout changes.
SCHEMA_VERSION = 1
#: The fields of a result file, in the order every stored file has them (:meth:`StoredRun.to_json`).
FIELDS = (
    "schema",
    "key",
    "grid",
    "panel",
    "series",
    "seed",
    "params",
    "config",
    "result",
    "provenance",
)


@dataclass(frozen=True)
class StoredRun:
    """One stored run: the JSON file ``<root>/<grid>/<key>.json``, field for field and in the file's order.

    Attributes:
        key: :func:`~uldp.common.provenance.config_hash` of the run's effective arguments (the file's name).
        grid: The grid that ran it (another grid may show it: runs are shared by key).
        panel: Its panel label in that grid.
        series: Its line label in that grid.
        seed: Its seed.
        params: The run arguments (``RunConfig`` keyword arguments plus ``max_test_records``), seed included.
        config: The resolved configuration (every default filled in).
        result: Per-round results (``test_loss``, ``epsilon``, ...) and ``info``.
        provenance: Command, git commit, packages, machine, date, ``wall_seconds`` (and ``dataset_variant``).
        schema: The layout's version, :data:`SCHEMA_VERSION`.
    """

    key: str
    grid: str
    panel: str
    series: str
    seed: int
    params: dict[str, Any]
    config: dict[str, Any]
    result: dict[str, Any]
    provenance: dict[str, Any]
    schema: int = SCHEMA_VERSION

    @classmethod
    def from_json(cls, payload: Mapping[str, Any], *, stem: str | None = None) -> StoredRun:
        """Read a stored run from its parsed JSON.

        Args:
            payload: The parsed file.
            stem: The file's name without ``.json`` (default: the payload's own key).

        Raises:
            ValueError: Not a complete result of this schema, or malformed fields, or run arguments that do not
                match the key and the file name (the message says which).
        """
        if payload.get("schema") != SCHEMA_VERSION or "result" not in payload:
            raise ValueError(
                f"not a result of schema {SCHEMA_VERSION} (schema {str(payload.get('schema'))[:20]}, "
                f"{'with' if 'result' in payload else 'no'} result)"
            )
        problem = _result_problem(payload, str(payload.get("key")) if stem is None else stem)
        if problem:
            raise ValueError(problem)
        return cls(
            payload["key"],
            payload["grid"],
            payload["panel"],
            payload["series"],
            payload["seed"],
            payload["params"],
            payload["config"],
            payload["result"],
            payload["provenance"],
        )

    def to_json(self) -> dict[str, Any]:
        """The file's JSON object (keys in the order every stored file has them)."""
        return {
            "schema": self.schema,
            "key": self.key,
            "grid": self.grid,
            "panel": self.panel,
            "series": self.series,
            "seed": self.seed,
            "params": self.params,
            "config": self.config,
            "result": self.result,
            "provenance": self.provenance,
        }


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


def read_result(path: Path) -> StoredRun | None:
    """The stored run at ``path``, or ``None`` if there is none or it is not a complete result file.

    Raises:
        ValueError: A result file (this schema, with a ``result``) whose fields are malformed or whose run
            arguments do not match its key and file name; the message names the file.
    """
    payload = read_complete_json(path, schema=SCHEMA_VERSION)
    if payload is None:
        return None
    try:
        return StoredRun.from_json(payload, stem=Path(path).stem)
    except ValueError as error:
        raise ValueError(
            f"stored result {path} is malformed: {error}; delete it to run it again"
        ) from None


def _result_problem(payload: Mapping[str, Any], stem: str) -> str:
    """What is wrong with a stored result's fields, or "" (see :func:`read_result`)."""
    if set(payload) != set(FIELDS):
        return f"the file must hold exactly {', '.join(FIELDS)}; got {', '.join(sorted(map(str, payload)))[:120]}"
    for name in ("key", "grid", "panel", "series"):
        if not isinstance(payload[name], str) or not payload[name]:
            return f"{name} must be a non-empty string, got {payload[name]!r:.40}"
    result, provenance, params, seed = (
        payload.get(name) for name in ("result", "provenance", "params", "seed")
    )
    if not isinstance(result, dict) or not result:
        return f"result must be a non-empty object, got {str(result)[:60]}"
    problem = _curves_problem(result)
    if problem:
        return problem
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


def _curves_problem(result: Mapping[str, Any]) -> str:
    """What is wrong with a result's per-round curves, or "": each entry but ``info`` (an object) is a list of
    numbers or nulls, all of one length or empty (a metric the dataset has not), and ``round``, if there, counts
    1, 2, ... ."""
    if not isinstance(result.get("info", {}), dict):
        return f"result.info must be an object, got {str(result['info'])[:40]}"
    curves = {name: values for name, values in result.items() if name != "info"}
    for name, values in curves.items():
        if not isinstance(values, list) or not all(
            value is None or (isinstance(value, (int, float)) and not isinstance(value, bool))
            for value in values
        ):
            return f"result.{str(name)[:40]} must be a list of numbers or nulls, got {str(values)[:60]}"
    lengths = {len(values) for values in curves.values()} - {0}
    if len(lengths) > 1:
        return f"result's curves must have one length (or none), got lengths {sorted(lengths)[:8]}"
    rounds = curves.get("round")
    if rounds is not None and rounds != list(range(1, len(rounds) + 1)):
        return f"result.round must count 1, 2, ..., got {str(rounds)[:60]}"
    return ""


def stored_result(root: Path, spec: RunSpec) -> StoredRun | None:
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
        return config_hash(
            {name: value for name, value in effective_arguments(params).items() if name != "seed"}
        )

    walls: dict[str, list[float]] = {}
    for path in Path(root).glob("*/*.json"):
        stored = read_result(path)
        if stored is not None:
            walls.setdefault(without_seed(stored.params), []).append(
                stored.provenance["wall_seconds"]
            )
    found = {spec.key: walls.get(without_seed(spec.kwargs)) for spec in specs}
    return {key: sum(seconds) / len(seconds) for key, seconds in found.items() if seconds}
