"""Run one benchmark with ``--json`` and store its document under ``benchmarks/results/<name>.json`` with the
command, the git commit and the date (``uldp.common.provenance``), written atomically.

The committed result files are made by this script alone, so that no number in them is copied by hand.

Usage: ``python benchmarks/save.py NAME [--as RESULT] [--from FILE --commit REV --date ISO] [benchmark options]``,
e.g. ``python benchmarks/save.py threads --rounds 8 --repeats 2``; ``--as RESULT`` stores the document as
``benchmarks/results/<RESULT>.json`` instead (a second configuration of one benchmark beside its first, e.g.
``python benchmarks/save.py flower_loopback --as flower_loopback_lattice --backend lattice``).

``--from FILE --commit REV --date ISO`` stores a document the benchmark printed on another machine (a lent GPU
machine's ``$OUT``, which has no git history to read) instead of running it here: the options are the ones it ran
with, REV the commit whose tree it ran (checked to exist here), ISO when it ran; the document itself names the
machine (``gpu.py``'s ``device``, or its own ``provenance``).
"""

from __future__ import annotations

import datetime
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from uldp.paper.experiments import now, provenance, write_json_atomic

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__, file=sys.stderr)
        raise SystemExit(2)
    name, options = sys.argv[1], sys.argv[2:]
    result = name
    if options[:1] == ["--as"]:
        if len(options) < 2 or not re.fullmatch(r"[a-z][a-z0-9_]*", options[1]):
            raise SystemExit("--as takes a result name: lower-case letters, digits and underscores")
        result, options = options[1], options[2:]
    elsewhere, options = _elsewhere_options(options)
    script = HERE / f"{name}.py"
    known = sorted(path.stem for path in HERE.glob("*.py") if path.stem != "save")
    if not script.is_file() or name == "save":
        raise SystemExit(f"unknown benchmark {name!r}; known: {', '.join(known)}")
    command = ["python", f"benchmarks/{name}.py", *options, "--json"]
    if elsewhere:
        document = {
            "provenance": {
                "command": " ".join(command),
                "git_commit": elsewhere["commit"],
                "date": elsewhere["date"],
                "machine": "another machine, named in the results",
                "stored_from": elsewhere["from"],
            },
            "results": elsewhere["results"],
        }
    else:
        # the code that runs is the tree's as it starts (it may change while a long benchmark goes on)
        started = {**provenance(" ".join(command)), "date": now()}
        done = subprocess.run(
            [sys.executable, str(script), *options, "--json"],
            check=True,
            stdout=subprocess.PIPE,
            text=True,
        )
        document = {"provenance": started, "results": json.loads(done.stdout)}
    write_json_atomic(RESULTS / f"{result}.json", document)
    print(f"wrote benchmarks/results/{result}.json", file=sys.stderr)


def _elsewhere_options(options: list[str]) -> tuple[dict[str, Any] | None, list[str]]:
    """``--from FILE --commit REV --date ISO`` taken off the front of ``options``: the document read and checked,
    the commit resolved here, the date parsed (``None`` when none of the three is given)."""
    given: dict[str, str] = {}
    while options[:1] and options[0] in ("--from", "--commit", "--date"):
        if len(options) < 2:
            raise SystemExit(f"{options[0]} takes a value")
        given[options[0][2:]] = options[1]
        options = options[2:]
    if not given:
        return None, options
    if set(given) != {"from", "commit", "date"}:
        raise SystemExit(
            "--from, --commit and --date go together: the document, its commit and its date"
        )
    path = Path(given["from"])
    try:
        results = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise SystemExit(f"--from {path}: not a readable JSON document ({error})") from None
    if not isinstance(results, dict):
        raise SystemExit(
            f"--from {path}: a benchmark prints one JSON object, this holds a {type(results).__name__}"
        )
    commit = subprocess.run(
        [
            "git",
            "-C",
            str(HERE.parent),
            "rev-parse",
            "--verify",
            "--quiet",
            given["commit"] + "^{commit}",
        ],
        capture_output=True,
        text=True,
    )
    if commit.returncode != 0:
        raise SystemExit(f"--commit {given['commit']!r} names no commit of this repository")
    try:
        date = datetime.datetime.fromisoformat(given["date"])
    except ValueError:
        date = None
    if date is None or date.tzinfo is None:
        raise SystemExit(
            f"--date takes an ISO date and time with its zone, like 2026-11-28T16:12:18+00:00, got {given['date']!r}"
        )
    return {
        "from": path.name,
        "commit": commit.stdout.strip(),
        "date": date.isoformat(),
        "results": results,
    }, options


if __name__ == "__main__":
    main()
