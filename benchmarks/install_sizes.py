"""What each extra of uldp installs, measured offline in this environment: the distributions an install pulls in
(uldp's own requirements and each extra, followed through every package's metadata) and the bytes of their
installed files (each distribution's RECORD), against the bare install.

The environment's torch is the CPU wheel (``make setup``), so the sizes are those of a hospital server that
installed torch from PyTorch's CPU index first; the CUDA wheel alone adds several GB. Counted once per package
however many extras ask for it.

Usage: python benchmarks/install_sizes.py [--json]
"""

from __future__ import annotations

import argparse
import json
import re
import tomllib
from importlib import metadata
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
EXTRAS = (
    "",
    "secure",
    "lattice",
    "deploy",
    "silo",
    "server",
    "survival",
    "paper",
    "book",
    "lab",
    "all",
)


def _name(text: str) -> str:
    return re.sub(r"[-_.]+", "-", text).lower()


def requirements(extra: str) -> list[Requirement]:
    """uldp's own requirements with ``extra`` (from pyproject.toml: the checkout's, not an installed copy)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    found = [Requirement(text) for text in project["dependencies"]]
    pending = [extra] if extra else []
    while pending:
        for requirement in map(Requirement, project["optional-dependencies"][pending.pop()]):
            if requirement.name == "uldp":
                pending.extend(requirement.extras)
            else:
                found.append(requirement)
    return found


def closure(roots: list[Requirement]) -> set[str]:
    """Every installed distribution the requirements pull in (markers evaluated here, extras followed)."""
    seen: set[str] = set()
    pending = [(requirement, set(requirement.extras)) for requirement in roots]
    while pending:
        requirement, extras = pending.pop()
        name = _name(requirement.name)
        if name in seen:
            continue
        try:
            dist = metadata.distribution(requirement.name)
        except metadata.PackageNotFoundError:
            continue  # an optional dependency of a dependency, not installed here
        seen.add(name)
        for text in dist.requires or []:
            nested = Requirement(text)
            markers = [{"extra": e} for e in extras or {""}]
            if nested.marker is None or any(nested.marker.evaluate(m) for m in markers):
                pending.append((nested, set(nested.extras)))
    return seen


def installed_bytes(name: str) -> int:
    """The bytes of a distribution's installed files."""
    dist = metadata.distribution(name)
    total = 0
    for file in dist.files or []:
        path = Path(str(dist.locate_file(file)))
        if path.is_file():
            total += path.stat().st_size
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--json", action="store_true", help="one JSON document on stdout instead of text"
    )
    args = parser.parse_args()
    sizes: dict[str, int] = {}
    rows: list[dict[str, Any]] = []
    for extra in EXTRAS:
        names = closure(requirements(extra))
        for name in names - set(sizes):
            sizes[name] = installed_bytes(name)
        rows.append(
            {
                "extra": extra or "(none)",
                "distributions": len(names),
                "megabytes": round(sum(sizes[n] for n in names) / 1e6, 1),
                "has_jupyter": any(
                    n.startswith(("jupyter", "notebook", "ipykernel")) for n in names
                ),
                "torch": metadata.version("torch"),
                "not_installed_here": sorted(
                    {_name(r.name) for r in requirements(extra)} - names
                ),  # counted as zero: this environment lacks them
            }
        )
    if args.json:
        print(json.dumps({"rows": rows}))
        return
    for row in rows:
        print(
            f"{row['extra']:10s} {row['distributions']:4d} distributions {row['megabytes']:9.1f} MB"
            f"{'  (Jupyter)' if row['has_jupyter'] else ''}"
            f"{'  not installed here: ' + ', '.join(row['not_installed_here']) if row['not_installed_here'] else ''}"
        )


if __name__ == "__main__":
    main()
