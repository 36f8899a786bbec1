"""Run one benchmark with ``--json`` and store its document under ``benchmarks/results/<name>.json`` with the
command, the git commit and the date (``uldp.common.provenance``), written atomically.

The committed result files are made by this script alone, so that no number in them is copied by hand.

Usage: ``python benchmarks/save.py NAME [--as RESULT] [benchmark options]``, e.g.
``python benchmarks/save.py threads --rounds 8 --repeats 2``; ``--as RESULT`` stores the document as
``benchmarks/results/<RESULT>.json`` instead (a second configuration of one benchmark beside its first, e.g.
``python benchmarks/save.py flower_loopback --as flower_loopback_lattice --backend lattice``).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from uldp.paper.experiments import now, provenance, write_json_atomic

HERE = Path(__file__).resolve().parent


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
    script = HERE / f"{name}.py"
    known = sorted(path.stem for path in HERE.glob("*.py") if path.stem != "save")
    if not script.is_file() or name == "save":
        raise SystemExit(f"unknown benchmark {name!r}; known: {', '.join(known)}")
    command = ["python", f"benchmarks/{name}.py", *options, "--json"]
    # the code that runs is the tree's as it starts (it may change while a long benchmark goes on)
    started = {**provenance(" ".join(command)), "date": now()}
    done = subprocess.run(
        [sys.executable, str(script), *options, "--json"],
        check=True,
        stdout=subprocess.PIPE,
        text=True,
    )
    document = {"provenance": started, "results": json.loads(done.stdout)}
    write_json_atomic(HERE / "results" / f"{result}.json", document)
    print(f"wrote benchmarks/results/{result}.json", file=sys.stderr)


if __name__ == "__main__":
    main()
