"""Layers that only point down: every import inside ``uldp`` (at module level, in a function or under
``TYPE_CHECKING``) goes to a module of the same layer or a lower one.

The import graph is read from the source with :mod:`ast`, without importing anything. Look-ups of a module by a
name computed at run time (``importlib.import_module``: the package's lazy exports, the CLI's ``COMMAND_MODULES``,
the dataset registry) are not edges. The package itself (``uldp/__init__.py``, the public names it exports lazily)
sits at the top beside the command line: no module of the package imports names from it, only its submodules.
CONTRIBUTING.md's layout table ("Interfaces between modules") is generated from :data:`LAYERS` (``python
tests/test_layers.py`` prints it) and checked against it.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "uldp"

#: Low to high. A module belongs to the entry that is its own name or its longest package prefix; command-line
#: modules (``uldp.cli``, any ``*.cli`` or ``*_cli``) and the package ``uldp`` itself form the top layer.
LAYERS: tuple[tuple[str, ...], ...] = (
    # foundations (validation, files, threads, the byte formats, provenance, logs), method names
    ("uldp.common", "uldp.method_names"),
    # the datasets (one registry entry each: loader, model, defaults, files), accounting, models, the silo's policy
    ("uldp.data", "uldp.defaults", "uldp.accounting", "uldp.models", "uldp.policy"),
    ("uldp.training",),
    ("uldp.methods",),
    ("uldp.secure",),
    ("uldp.federation",),
    ("uldp.fitting",),
    ("uldp.simulation", "uldp.run_config"),
    ("uldp.audit",),
    ("uldp.deploy", "uldp.flower"),
    # the paper's reproduction, above the whole library: its settings and numbered items, then the experiments and
    # what reads their results
    ("uldp.paper", "uldp.paper.settings", "uldp.paper.items"),
    (
        "uldp.paper.experiments",
        "uldp.paper.verdicts",
        "uldp.paper.plots",
        "uldp.paper.scorecard",
        "uldp.paper.scorecard_runtime",
        "uldp.paper.scorecard_utility",
        "uldp.paper.scorecard_figures",
        "uldp.paper.forest",
        "uldp.paper.findings",
        "uldp.paper.overview",
        "uldp.paper.beyond",
        "uldp.paper.errata",
        "uldp.paper.chapters",
    ),
)
#: The first layer of the reproduction (:mod:`uldp.paper`): no module below it imports it.
PAPER_LAYER = next(index for index, entries in enumerate(LAYERS) if "uldp.paper" in entries)
TOP_LAYER = len(LAYERS)


def module_name(path: Path, root: Path = ROOT) -> str:
    """``uldp/deploy/superlink.py`` -> ``uldp.deploy.superlink``; a package's ``__init__.py`` is the package."""
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(source: str, module: str, is_package: bool, known: set[str]) -> set[str]:
    """The ``uldp`` modules that ``source`` imports anywhere (module level, functions, ``TYPE_CHECKING`` blocks).

    ``from package import name`` is an import of ``package.name`` when that is a module, else of ``package``.
    """
    package = module if is_package else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                found.add(f"{target}.{alias.name}" if f"{target}.{alias.name}" in known else target)
    return {name for name in found if name == "uldp" or name.startswith("uldp.")}


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """Every module of the package and the ``uldp`` modules it imports."""
    paths = {module_name(path, root): path for path in sorted(root.rglob("*.py"))}
    known = set(paths)
    return {
        name: imported_modules(
            path.read_text(encoding="utf-8"), name, path.name == "__init__.py", known
        )
        for name, path in paths.items()
    }


def layer_of(module: str) -> int:
    """The index of ``module``'s layer in :data:`LAYERS` (:data:`TOP_LAYER` for the CLI and the package itself).

    Raises:
        ValueError: for a module no layer names (add it to :data:`LAYERS` and regenerate CONTRIBUTING.md's table).
    """
    last = module.rpartition(".")[2]
    if module in ("uldp", "uldp.cli") or last == "cli" or last.endswith("_cli"):
        return TOP_LAYER
    matches = [
        (len(entry), index)
        for index, entries in enumerate(LAYERS)
        for entry in entries
        if module == entry or module.startswith(entry + ".")
    ]
    if not matches:
        raise ValueError(
            f"module {module} belongs to no layer; add it to tests/test_layers.py LAYERS"
        )
    return max(matches)[1]


def violations(graph: dict[str, set[str]]) -> list[str]:
    """Every import from a lower layer to a higher one, as ``"importer (layer) -> imported (layer)"``."""
    return [
        f"{module} (layer {layer_of(module)}) -> {target} (layer {layer_of(target)})"
        for module, targets in sorted(graph.items())
        for target in sorted(targets)
        if layer_of(target) > layer_of(module)
    ]


def test_every_module_has_a_layer() -> None:
    graph = import_graph()
    assert len(graph) > 50  # the whole package was read
    unplaced = []
    for module in graph:
        try:
            layer_of(module)
        except ValueError:
            unplaced.append(module)
    assert unplaced == []


def test_no_import_points_up() -> None:
    assert violations(import_graph()) == []


def test_the_simulation_and_fitting_import_nothing_from_deploy_flower_or_experiments() -> None:
    """The issue's own goal, spelled out (the layers imply it), for every module of the two layers (``fit`` lives in
    ``uldp.fitting.api``)."""
    graph = import_graph()
    above = ("uldp.deploy", "uldp.flower", "uldp.paper.experiments")
    for module in (
        name
        for name in graph
        if layer_of(name) in (layer_of("uldp.simulation"), layer_of("uldp.fitting"))
    ):
        assert not {
            target
            for target in graph[module]
            if target.startswith(above) or layer_of(target) == TOP_LAYER
        }


def test_the_library_never_imports_the_reproduction() -> None:
    """Every module below :mod:`uldp.paper` (the library a silo imports) imports nothing of it, and the package's lazy
    exports name none of it: the reproduction can be left out of an installation without breaking the library."""
    graph = import_graph()
    library = [module for module in graph if layer_of(module) < PAPER_LAYER]
    assert len(library) > 40
    assert {
        module: sorted(target for target in graph[module] if target.startswith("uldp.paper"))
        for module in library
    } == {module: [] for module in library}
    assert "uldp.paper" not in (ROOT / "__init__.py").read_text(encoding="utf-8")


def test_the_graph_sees_imports_in_functions_type_checking_blocks_and_relative_ones() -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "import numpy\n"
        "from . import superlink\n"
        "if TYPE_CHECKING:\n    from uldp.simulation import RunConfig\n"
        "def f():\n    import uldp.flower.client\n    from uldp.deploy.app import serve\n"
    )
    known = {"uldp.deploy.superlink", "uldp.deploy.app", "uldp.simulation", "uldp.flower.client"}
    assert imported_modules(source, "uldp.deploy.credentials", False, known) == known


def test_an_upward_import_is_reported(tmp_path: Path) -> None:
    """A small package where the simulation imports deploy and a method imports the simulation in a function."""
    package = tmp_path / "uldp"
    (package / "deploy").mkdir(parents=True)
    (package / "methods").mkdir()
    (package / "common").mkdir()
    for path, text in {
        "__init__.py": "",
        "simulation.py": "from uldp.deploy import superlink\n",
        "deploy/__init__.py": "",
        "deploy/superlink.py": "from uldp.simulation import run\n",
        "methods/__init__.py": "",
        "methods/base.py": "def f():\n    from .. import simulation\n",
        "common/__init__.py": "",
        "common/checks.py": "import uldp.data\n",
        "data.py": "",
    }.items():
        (package / path).write_text(text)
    assert violations(import_graph(package)) == [
        "uldp.common.checks (layer 0) -> uldp.data (layer 1)",
        "uldp.methods.base (layer 3) -> uldp.simulation (layer 7)",
        "uldp.simulation (layer 7) -> uldp.deploy.superlink (layer 9)",
    ]


@pytest.mark.parametrize(
    ("module", "layer"),
    [
        ("uldp", TOP_LAYER),
        ("uldp.common.persist", 0),
        ("uldp.data.allocation", 1),
        ("uldp.methods.base", 3),
        ("uldp.federation.aggregation", 5),
        ("uldp.paper.experiments.store", 11),
        ("uldp.deploy.superlink", 9),
        ("uldp.audit.jobs", 8),
        ("uldp.paper.settings", 10),
        ("uldp.deploy.cli", TOP_LAYER),
        ("uldp.simulation_cli", TOP_LAYER),
        ("uldp.flower.cli", TOP_LAYER),
        ("uldp.cli", TOP_LAYER),
    ],
)
def test_modules_fall_in_their_layer(module: str, layer: int) -> None:
    assert layer_of(module) == layer


def test_a_module_of_no_layer_is_refused() -> None:
    with pytest.raises(ValueError, match=r"uldp\.unplaced belongs to no layer"):
        layer_of("uldp.unplaced")


#: The markers around the layout table in CONTRIBUTING.md (``python tests/test_layers.py`` prints the table).
TABLE_START = (
    "<!-- layout table: generated from LAYERS by `python tests/test_layers.py`; do not edit -->"
)
TABLE_END = "<!-- end of layout table -->"


def layout_table() -> str:
    """CONTRIBUTING.md's layout table: one row per package of :data:`LAYERS`, its layer and who may import it."""
    top = f"{TOP_LAYER} (top)"
    rows = [
        "| Package | Layer | Who may import it |",
        "| --- | --- | --- |",
        *(
            f"| `{package}` | {index} | {_importers(index)} |"
            for index, entries in enumerate(LAYERS)
            for package in entries
        ),
        (
            f"| `uldp.cli`, `*.cli`, `*_cli` (command modules), `uldp` (its lazy exports) | {top} | "
            "the command line and the package's users only |"
        ),
    ]
    return "\n".join(rows)


def _importers(index: int) -> str:
    """Who may import a module of layer ``index``: a module of that layer or a higher one, or a command module."""
    if index == TOP_LAYER - 1:
        return f"layer {index} and the command modules"
    return f"layers {index}-{TOP_LAYER - 1} and the command modules"


def test_contributing_shows_the_layout_table_of_layers() -> None:
    """CONTRIBUTING.md's layout table is :func:`layout_table` (regenerate it with ``python tests/test_layers.py``)."""
    text = (ROOT.parent / "CONTRIBUTING.md").read_text(encoding="utf-8")
    assert TABLE_START in text and TABLE_END in text, (
        "CONTRIBUTING.md lost its layout table's markers"
    )
    written = text[text.index(TABLE_START) + len(TABLE_START) : text.index(TABLE_END)].strip()
    assert written == layout_table()


def test_the_layout_table_has_every_package_once_in_layer_order() -> None:
    packages = re.findall(r"^\| `([a-z_.]+)` \| (\d+) \|", layout_table(), flags=re.MULTILINE)
    assert packages == [(p, str(i)) for i, entries in enumerate(LAYERS) for p in entries]


if __name__ == "__main__":
    print(layout_table())
