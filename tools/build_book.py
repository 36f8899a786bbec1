"""Execute the book's chapters with papermill and build the HTML book with Jupyter Book.

Used by `make test` (``--profile smoke``) and `make book` (``--profile default``).

Every chapter listed in ``_toc.yml`` is a jupytext percent-format ``.py`` file with a cell tagged
``parameters`` that sets ``profile``. Each one is converted to a notebook, executed once by papermill
with the requested profile (any cell error fails the run and names the chapter), and the executed
notebooks are staged with ``_config.yml`` and ``_toc.yml`` into ``_build/book_src``. Jupyter Book then
renders that tree with execution turned off and warnings as errors, and the HTML lands in ``_build/html``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import jupytext
import nbformat
import yaml

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "_build"
PROFILES = ("smoke", "default", "paper")


def toc_entries(toc: dict) -> list[str]:
    """Return every ``file`` named by a Jupyter Book ``_toc.yml``, root first."""
    found = [toc["root"]]

    def walk(node: object) -> None:
        if isinstance(node, dict):
            if "file" in node:
                found.append(node["file"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk({key: value for key, value in toc.items() if key != "root"})
    return found


def execute_chapter(entry: str, profile: str, staged: Path) -> float:
    """Convert ``entry``.py to a notebook and execute it with papermill; return the seconds taken."""
    source = ROOT / f"{entry}.py"
    if not source.exists():
        raise SystemExit(f"_toc.yml names {entry!r} but {source} does not exist")
    raw = BUILD / "notebooks" / f"{entry}.ipynb"
    raw.parent.mkdir(parents=True, exist_ok=True)
    notebook = jupytext.read(source)
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    notebook.metadata["language_info"] = {"name": "python"}
    jupytext.write(notebook, raw)
    executed = staged / f"{entry}.ipynb"
    executed.parent.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "papermill", str(raw), str(executed), "-p", "profile", profile,
         "--cwd", str(ROOT), "--kernel", "python3", "--no-progress-bar"],
        cwd=ROOT,
    )
    if result.returncode != 0:
        raise SystemExit(f"chapter {entry} failed at profile {profile!r} (see the cell error above)")
    hide_default_parameters(executed)
    return time.perf_counter() - start


def hide_default_parameters(path: Path) -> None:
    """Hide the chapter's default ``parameters`` cell in the book: papermill's injected cell shows the profile used."""
    notebook = nbformat.read(path, as_version=4)
    for cell in notebook.cells:
        if "parameters" in cell.metadata.get("tags", []):
            cell.metadata["tags"] = [*cell.metadata["tags"], "remove-cell"]
    nbformat.write(notebook, path)


def stage_config(staged: Path) -> None:
    """Copy the book's configuration, switching execution off (papermill has run the chapters)."""
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    config.setdefault("execute", {})["execute_notebooks"] = "off"
    config.get("sphinx", {}).get("config", {}).pop("nb_custom_formats", None)
    (staged / "_config.yml").write_text(yaml.safe_dump(config, sort_keys=False))
    shutil.copy(ROOT / "_toc.yml", staged / "_toc.yml")
    for extra in ("references.bib",):
        if (ROOT / extra).exists():
            shutil.copy(ROOT / extra, staged / extra)
    for asset_dir in ("book/images",):
        if (ROOT / asset_dir).exists():
            shutil.copytree(ROOT / asset_dir, staged / asset_dir, dirs_exist_ok=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", choices=PROFILES, default="default")
    parser.add_argument("--only", nargs="*", help="execute only these toc entries (no book build)")
    args = parser.parse_args(argv)

    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    entries = toc_entries(toc)
    staged = BUILD / "book_src"
    if args.only:
        unknown = sorted(set(args.only) - set(entries))
        if unknown:
            raise SystemExit(f"--only names {unknown}, not in _toc.yml; known: {entries}")
        entries = args.only
    else:
        shutil.rmtree(staged, ignore_errors=True)
    staged.mkdir(parents=True, exist_ok=True)
    # The kernel must use matplotlib's inline backend (a non-interactive MPLBACKEND would drop every figure).
    os.environ.pop("MPLBACKEND", None)

    for entry in entries:
        seconds = execute_chapter(entry, args.profile, staged)
        print(f"[book] executed {entry} at profile {args.profile!r} in {seconds:.1f} s", flush=True)
    if args.only:
        return 0

    stage_config(staged)
    output = BUILD / "jupyter-book"
    subprocess.run(
        [str(Path(sys.executable).parent / "jupyter-book"), "build", str(staged), "--path-output", str(output),
         "-W", "-n", "--keep-going"],
        cwd=ROOT, check=True,
    )
    html = BUILD / "html"
    shutil.rmtree(html, ignore_errors=True)
    shutil.copytree(output / "_build" / "html", html)
    print(f"[book] HTML book at {html / 'index.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
