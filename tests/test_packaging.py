"""Packaging: compatible ranges that admit the exact pins, extras, environment.yml = requirements.txt's pins,
LICENSE = metadata, py.typed, and a C extension that carries no path of the build machine."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
#: Used only by the tests, the book build or other tools: never a runtime dependency.
NOT_RUNTIME = {
    "pytest",
    "hypothesis",
    "ruff",
    "pyyaml",
    "jupyter-book",
    "jupytext",
    "papermill",
    "ipykernel",
    "jupyterlab",
    "sphinx-mathjax-offline",
}


def pins(*files: str) -> dict[str, Requirement]:
    """The exact pins of requirements files (default: requirements.txt, what `make setup` installs)."""
    lines = [
        line.strip()
        for name in files or ("requirements.txt",)
        for line in (ROOT / name).read_text().splitlines()
    ]
    return {
        Requirement(line).name.lower(): Requirement(line)
        for line in lines
        if line and not line.startswith("#")
    }


def declared() -> dict[str, list[Requirement]]:
    """Every requirement of the metadata by name: the runtime ones and those of each extra."""
    found: dict[str, list[Requirement]] = {}
    groups = [PYPROJECT["dependencies"], *PYPROJECT["optional-dependencies"].values()]
    for requirement in (Requirement(text) for group in groups for text in group):
        if requirement.name != "uldp":
            found.setdefault(requirement.name.lower(), []).append(requirement)
    return found


def test_environment_yml_is_python_311_and_exactly_the_pins_of_requirements_txt():
    environment = yaml.safe_load((ROOT / "environment.yml").read_text())
    dependencies = environment["dependencies"]
    assert "python=3.11" in dependencies and "pip" in dependencies
    pip_sections = [item["pip"] for item in dependencies if isinstance(item, dict)]
    assert len(pip_sections) == 1
    assert sorted(pip_sections[0]) == sorted(str(r) for r in pins().values())


def test_metadata_gives_ranges_that_admit_every_pin_torch_included():
    exact, ranges = pins("requirements.txt", "requirements-lab.txt"), declared()
    assert set(exact) == set(ranges), (
        "every pinned package is declared (runtime or an extra) and nothing else"
    )
    for name, requirements in ranges.items():
        pinned = next(iter(exact[name].specifier)).version
        for requirement in requirements:
            assert requirement.specifier.contains(pinned, prereleases=True), (
                f"{requirement} excludes {pinned}"
            )
            operators = {spec.operator for spec in requirement.specifier}
            assert "==" not in operators, f"{requirement}: a range, not a pin"
    assert (
        exact["torch"].specifier == Requirement("torch==2.13.0").specifier
    )  # make setup's CPU wheel


def test_test_and_tool_dependencies_are_not_runtime_and_the_extras_exist():
    runtime = {Requirement(text).name.lower() for text in PYPROJECT["dependencies"]}
    assert not runtime & NOT_RUNTIME
    assert {"flwr", "phe", "gmpy2"}.isdisjoint(runtime)
    extras = PYPROJECT["optional-dependencies"]
    assert set(extras) == {
        *("secure", "lattice", "deploy", "book", "test", "lab", "all"),
        *("silo", "server", "survival", "paper"),
    }
    assert closure("all") == {
        name for extra in set(extras) - {"test"} for name in closure(extra)
    }  # everything a user installs, not the test tools


def closure(extra: str) -> set[str]:
    """The distributions an extra installs beyond the runtime ones, its nested uldp[...] extras followed."""
    names: set[str] = set()
    for requirement in map(Requirement, PYPROJECT["optional-dependencies"][extra]):
        if requirement.name == "uldp":
            names |= {name for nested in requirement.extras for name in closure(nested)}
        else:
            names.add(requirement.name.lower())
    return names


@pytest.mark.parametrize("role", ["silo", "server"])
def test_a_silo_or_server_install_has_the_federation_and_no_jupyter_book_or_plotting(role):
    runtime = {Requirement(text).name.lower() for text in PYPROJECT["dependencies"]}
    installed = runtime | closure(role)
    assert {"flwr", "phe", "gmpy2", "cryptography", "tenseal"} <= installed
    assert not installed & (NOT_RUNTIME | {"matplotlib", "lifelines", "jupyterlab"}), installed


def test_every_optional_module_is_installed_by_the_extra_its_message_names():
    from uldp.common.extras import EXTRA_OF_MODULE

    # distributions by module name, where they differ (grpc comes with flwr)
    distribution = {"jupyter_book": "jupyter-book", "grpc": "flwr", "PIL": "pillow"}
    for module, extra in EXTRA_OF_MODULE.items():
        assert distribution.get(module, module) in closure(extra), (module, extra)


def test_license_file_matches_the_metadata_and_the_package_is_typed():
    assert PYPROJECT["license"] == "MIT" and PYPROJECT["license-files"] == ["LICENSE"]
    assert (ROOT / "LICENSE").read_text().startswith("MIT License")
    assert (ROOT / "uldp" / "py.typed").is_file()
    package_data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-data"
    ]
    assert "py.typed" in package_data["uldp"]


@pytest.mark.skipif(
    not list((ROOT / "uldp" / "secure").glob("_comb*.so")), reason="C extension not built"
)
def test_the_built_extension_carries_no_path_of_the_build_machine():
    (library,) = (ROOT / "uldp" / "secure").glob("_comb*.so")
    content = library.read_bytes()
    for path in {str(ROOT), sys.prefix, sys.base_prefix, str(Path.home())}:
        assert path.encode() not in content, f"{library.name} contains {path}"
    if shutil.which("readelf"):
        dynamic = subprocess.run(
            ["readelf", "-d", str(library)], capture_output=True, text=True, check=True
        ).stdout
        assert "RPATH" not in dynamic and "RUNPATH" not in dynamic
    from uldp.secure import fast

    assert fast.c_comb_available()  # still loads: gmpy2 has loaded the bundled GMP's soname
