"""Execute the book's chapters with papermill and build the HTML book with Jupyter Book.

Used by `make test` (``--profile smoke``) and `make book` (``--profile default``).

Every chapter listed in ``_toc.yml`` is a jupytext percent-format ``.py`` file with a cell tagged
``parameters`` that sets ``profile``. Each one is converted to a notebook, executed once by papermill
with the requested profile (any cell error fails the run and names the chapter), and the executed
notebooks are staged with ``_config.yml`` and ``_toc.yml`` into ``_build/book_src``. Jupyter Book then
renders that tree with execution turned off and warnings as errors, and the HTML lands in ``_build/html``.

It prints each chapter as it finishes, with an estimate of the time left (from the chapters' times in the last
build at the same profile, kept in ``_build/chapter_seconds.json``; :func:`time_left`), and, at the end, the one path
of the HTML book; Jupyter Book's own output goes to ``_build/jupyter-book.log`` (shown when it fails).

Every page carries a banner naming the profile it was built at, code cells are folded (``hide-input``) unless a
chapter tags a cell ``show-input``, and the finished HTML is checked to load no script or stylesheet from outside
the book (the maths is MathJax served from ``_static``; see ``external_assets``).
"""

from __future__ import annotations

import argparse
import html.parser
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import jupytext
import nbformat
import papermill
import yaml
from jupyter_client.manager import KernelManager

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "_build"
PROFILES = ("smoke", "default", "paper")
PROFILE_BANNERS = {
    "smoke": "Built at the smoke profile: tiny runs that check the code, not the paper's results; "
    "figures stored at the paper profile are shown as stored.",
    "default": "Built at the default profile: reduced runs on a CPU; figures stored at the paper profile "
    "are shown as stored.",
    "paper": "Built at the paper profile: the paper's settings.",
}


#: The seconds each chapter took in the last build, per profile: what :func:`time_left` estimates from.
TIMES = BUILD / "chapter_seconds.json"
#: The seconds assumed for a chapter never timed at a profile, before any chapter of this build has finished.
UNTIMED_CHAPTER_S = 60.0


def time_left(remaining: list[str], last: dict[str, float], this_build: list[float]) -> float:
    """Seconds the chapters ``remaining`` will take: each its time in the last build (``last``), or, never timed,
    the mean of this build's chapters so far (``this_build``; :data:`UNTIMED_CHAPTER_S` before the first).

    Example:
        >>> time_left(["a", "b", "c"], {"a": 100.0}, [20.0, 40.0])
        160.0
    """
    mean = sum(this_build) / len(this_build) if this_build else UNTIMED_CHAPTER_S
    return float(sum(last.get(entry, mean) for entry in remaining))


def minutes(seconds: float) -> str:
    """A duration for the progress lines: seconds under a minute, else minutes.

    >>> minutes(42.4), minutes(754)
    ('42 s', '12.6 min')
    """
    return f"{seconds:.0f} s" if seconds < 60 else f"{seconds / 60:.1f} min"


def read_times(profile: str) -> dict[str, float]:
    """The chapters' seconds at ``profile`` in the last build (:data:`TIMES`), or none."""
    try:
        return dict(json.loads(TIMES.read_text())[profile])
    except (FileNotFoundError, KeyError, ValueError, TypeError):
        return {}


def write_times(profile: str, seconds: dict[str, float]) -> None:
    """Keep ``seconds`` as the chapters' times at ``profile`` (:data:`TIMES`), beside those of other profiles."""
    try:
        kept = json.loads(TIMES.read_text())
    except (FileNotFoundError, ValueError):
        kept = {}
    kept = kept if isinstance(kept, dict) else {}
    kept[profile] = {**kept.get(profile, {}), **seconds}
    TIMES.parent.mkdir(parents=True, exist_ok=True)
    TIMES.write_text(json.dumps(kept, indent=1, sort_keys=True))


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


def partial_toc(toc: dict, only: list[str]) -> dict:
    """The table of contents ``toc`` cut down to the pages ``only``, in its parts and order.

    The book's root stays the opening page when ``only`` names it, else the first page of ``only`` in the book's
    order takes its place; parts (and their captions) left without a page are dropped, and so is an empty
    ``chapters`` list, which Jupyter Book refuses (a book of one page is its root alone).

    Raises:
        ValueError: ``only`` names a page that ``toc`` does not list, or no page at all.

    Example:
        >>> partial_toc({"format": "jb-book", "root": "intro",
        ...              "parts": [{"caption": "A", "chapters": [{"file": "a"}, {"file": "b"}]}]}, ["b"])
        {'format': 'jb-book', 'root': 'b'}
    """
    unknown = sorted(set(only) - set(toc_entries(toc)))
    if unknown or not only:
        raise ValueError(f"a partial book needs pages of _toc.yml, got {only}; unknown: {unknown}")
    keep = set(only)
    root = (
        toc["root"]
        if toc["root"] in keep
        else next(entry for entry in toc_entries(toc) if entry in keep)
    )

    def cut(entries: list) -> list:
        kept = []
        for entry in entries:
            inner = {
                key: cut(value) for key, value in entry.items() if key in ("sections", "chapters")
            }
            inner = {key: value for key, value in inner.items() if value}
            if entry.get("file") in keep and entry["file"] != root:
                kept.append(
                    {
                        key: value
                        for key, value in entry.items()
                        if key not in ("sections", "chapters")
                    }
                    | inner
                )
            else:  # a page left out (or made the root) takes its kept sub-pages' place
                kept += [page for value in inner.values() for page in value]
        return kept

    partial = {key: value for key, value in toc.items() if key not in ("root", "parts", "chapters")}
    partial["root"] = root
    if "parts" in toc:
        parts = [
            {key: value for key, value in part.items() if key != "chapters"}
            | {"chapters": chapters}
            for part in toc["parts"]
            if (chapters := cut(part.get("chapters", [])))
        ]
        if parts:
            partial["parts"] = parts
    elif chapters := cut(toc.get("chapters", [])):
        partial["chapters"] = chapters
    return partial


class IpcKernelManager(KernelManager):
    """A chapter's kernel talking over Unix sockets in a private temporary directory (removed with the manager), not
    TCP ports: a kernel manager chooses five free ports and the kernel binds them later, and in between a test of
    ``make test`` running beside the chapters took one (a CI run hung, its kernel's heartbeat "Address already in
    use", papermill waiting)."""

    def __init__(self, **kwargs: Any) -> None:
        self.sockets = tempfile.TemporaryDirectory(prefix="uldp-kernel-")
        kwargs.setdefault("transport", "ipc")
        kwargs.setdefault("ip", os.path.join(self.sockets.name, "kernel"))
        super().__init__(**kwargs)


def execute_chapter(entry: str, profile: str, staged: Path) -> float:
    """Convert ``entry``.py to a notebook and execute it with papermill; return the seconds taken."""
    source = ROOT / f"{entry}.py"
    if not source.exists():
        raise SystemExit(f"_toc.yml names {entry!r} but {source} does not exist")
    raw = BUILD / "notebooks" / f"{entry}.ipynb"
    raw.parent.mkdir(parents=True, exist_ok=True)
    notebook = jupytext.read(source)
    notebook.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    notebook.metadata["language_info"] = {"name": "python"}
    jupytext.write(notebook, raw)
    executed = staged / f"{entry}.ipynb"
    executed.parent.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    try:
        papermill.execute_notebook(
            raw,
            executed,
            parameters={"profile": profile},
            cwd=str(ROOT),
            kernel_name="python3",
            progress_bar=False,
            kernel_manager_class=IpcKernelManager,
        )
    except papermill.PapermillExecutionError as error:
        print(error, file=sys.stderr)
        raise SystemExit(
            f"chapter {entry} failed at profile {profile!r} (see the cell error above)"
        ) from None
    tag_cells_for_the_book(executed)
    return time.perf_counter() - start


def tag_cells_for_the_book(path: Path) -> None:
    """Tag an executed chapter's cells for the rendered book, leaving the ``.py`` chapters untouched.

    The chapter's default ``parameters`` cell is removed (papermill's injected cell shows the profile used, and the
    banner of every page names it); every other code cell is folded (``hide-input``: the reader sees the output
    and opens the code on a click) unless the chapter tags it ``show-input`` because the code is the point.
    """
    notebook = nbformat.read(path, as_version=4)
    for cell in notebook.cells:
        tags = list(cell.metadata.get("tags", []))
        if "parameters" in tags:
            tags.append("remove-cell")
        elif cell.cell_type == "code" and not {
            "show-input",
            "remove-cell",
            "remove-input",
            "hide-input",
        } & set(tags):
            tags.append("hide-input")
        cell.metadata["tags"] = tags
    nbformat.write(notebook, path)


def repository_url() -> str | None:
    """The checkout's ``origin`` as an https address, or None (then the book shows no repository button)."""
    found = subprocess.run(
        ["git", "remote", "get-url", "origin"], cwd=ROOT, capture_output=True, text=True
    )
    url = found.stdout.strip()
    if found.returncode != 0 or not url:
        return None
    if url.startswith("git@"):
        host, _, path = url.removeprefix("git@").partition(":")
        url = f"https://{host}/{path}"
    return url.removesuffix(".git") if url.startswith("https://") else None


class _AssetFinder(html.parser.HTMLParser):
    """Collect the addresses of the scripts and stylesheets an HTML page loads."""

    def __init__(self) -> None:
        super().__init__()
        self.addresses: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        src, href = values.get("src"), values.get("href")
        if tag == "script" and src:
            self.addresses.append(src)
        elif tag == "link" and href:
            rel = (values.get("rel") or "").lower().split()
            if {"stylesheet", "preload", "modulepreload"} & set(rel):
                self.addresses.append(href)


def external_assets(page: str) -> list[str]:
    """Return the scripts and stylesheets that the HTML text ``page`` loads from outside the book.

    An address is outside the book when it names a scheme (``https:``, ``http:``, ``data:`` is allowed) or starts
    with ``//`` (protocol-relative); relative addresses are the book's own ``_static`` files.

    Example:
        >>> external_assets('<script src="_static/a.js"></script><script src="https://cdn.x/m.js"></script>')
        ['https://cdn.x/m.js']
    """
    finder = _AssetFinder()
    finder.feed(page)
    finder.close()
    return [
        address
        for address in finder.addresses
        if address.strip().lower().startswith(("http:", "https:", "//", "ftp:"))
    ]


def check_offline(html_dir: Path) -> None:
    """Fail the build when a page of ``html_dir`` loads a script or stylesheet from outside the book."""
    offending = {
        str(page.relative_to(html_dir)): found
        for page in sorted(html_dir.rglob("*.html"))
        if (found := external_assets(page.read_text(encoding="utf-8", errors="replace")))
    }
    if offending:
        lines = "\n".join(f"  {page}: {', '.join(found)}" for page, found in offending.items())
        raise SystemExit(
            f"pages load scripts or stylesheets from outside the book (they fail offline):\n{lines}"
        )


def stage_config(staged: Path, profile: str, only: list[str] | None = None) -> None:
    """Copy the book's configuration, switching execution off (papermill has run the chapters).

    Every page gets a banner naming ``profile``, and the repository button the checkout's own address. With
    ``only``, the table of contents lists those pages alone, in the book's parts (:func:`partial_toc`; a partial build
    for checking them), and links to pages outside it (``{ref}``, ``{doc}``) are not warnings.
    """
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    config.setdefault("execute", {})["execute_notebooks"] = "off"
    html_options = config.setdefault("html", {})
    html_options["announcement"] = PROFILE_BANNERS[profile]
    url = repository_url()
    if url is None:
        html_options["use_repository_button"] = False
    else:
        config.setdefault("repository", {})["url"] = url
    sphinx_config = config.setdefault("sphinx", {}).setdefault("config", {})
    sphinx_config.pop("nb_custom_formats", None)
    if (
        only is not None
    ):  # links to the pages (and citations to the bibliography) a partial book leaves out cannot
        # resolve; the full build checks them
        sphinx_config["suppress_warnings"] = [
            *sphinx_config.get("suppress_warnings", []),
            "ref.ref",
            "ref.doc",
            "bibtex.key_not_found",
        ]
    (staged / "_config.yml").write_text(yaml.safe_dump(config, sort_keys=False))
    if only is None:
        shutil.copy(ROOT / "_toc.yml", staged / "_toc.yml")
    else:
        toc = partial_toc(yaml.safe_load((ROOT / "_toc.yml").read_text()), only)
        (staged / "_toc.yml").write_text(yaml.safe_dump(toc, sort_keys=False))
    for extra in ("references.bib",):
        if (ROOT / extra).exists():
            shutil.copy(ROOT / extra, staged / extra)
    for asset_dir in ("book/images", "_static"):
        if (ROOT / asset_dir).exists():
            shutil.copytree(ROOT / asset_dir, staged / asset_dir, dirs_exist_ok=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", choices=PROFILES, default="default")
    parser.add_argument("--only", nargs="*", help="execute only these toc entries (no book build)")
    parser.add_argument(
        "--html",
        action="store_true",
        help="with --only: also build an HTML book of those pages alone (into _build/html)",
    )
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

    last, took = read_times(args.profile), {}
    print(
        f"[book] {len(entries)} chapter(s) at profile {args.profile!r}, about "
        f"{minutes(time_left(entries, last, []))} (each chapter as long as in the last build, "
        f"{UNTIMED_CHAPTER_S:.0f} s if never timed)",
        flush=True,
    )
    for index, entry in enumerate(entries, start=1):
        took[entry] = execute_chapter(entry, args.profile, staged)
        write_times(args.profile, {entry: took[entry]})
        left = time_left(entries[index:], last, list(took.values()))
        print(
            f"[book] {index}/{len(entries)} {entry}: {minutes(took[entry])}"
            + (f"; about {minutes(left)} left" if index < len(entries) else "; all executed"),
            flush=True,
        )
    if args.only and not args.html:
        return 0
    if args.only:
        for stale in staged.rglob(
            "*.ipynb"
        ):  # earlier runs' notebooks would be rendered as orphan pages
            if str(stale.relative_to(staged).with_suffix("")) not in entries:
                stale.unlink()

    stage_config(staged, args.profile, entries if args.only else None)
    output = BUILD / "jupyter-book"
    shutil.rmtree(
        output, ignore_errors=True
    )  # an earlier (partial) build's pages, or its index.html, must not stay
    log = BUILD / "jupyter-book.log"
    print(f"[book] rendering the HTML (Jupyter Book's output: {log.relative_to(ROOT)})", flush=True)
    with open(log, "w", encoding="utf-8") as handle:
        rendered = subprocess.run(
            # jupyter-book's own entry point, run by this interpreter (a copied venv's script would name another)
            [
                sys.executable,
                "-c",
                "from jupyter_book.cli.main import main; main()",
                "build",
                str(staged),
                "--path-output",
                str(output),
                "-W",
                "-n",
                "--keep-going",
            ],
            cwd=ROOT,
            stdout=handle,
            stderr=subprocess.STDOUT,
        )
    if rendered.returncode != 0:
        print(log.read_text(encoding="utf-8")[-6000:], file=sys.stderr)
        raise SystemExit(f"Jupyter Book failed (exit {rendered.returncode}); its output: {log}")
    html = BUILD / "html"
    shutil.rmtree(html, ignore_errors=True)
    shutil.copytree(output / "_build" / "html", html)
    check_offline(html)
    print(f"[book] HTML book at {html / 'index.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
