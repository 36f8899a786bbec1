"""A longer fuzzing run of the deployment's parsers than ``make test`` does (targets in ``tests/fuzz_targets.py``).

    nice -n 19 python tools/fuzz.py --examples 20000            # every parser
    nice -n 19 python tools/fuzz.py --examples 5000 --only checkpoint --json

Each parser gets up to ``--examples`` generated inputs (hypothesis, a fresh random seed, no example database, no
shrinking); the report gives per parser the inputs fuzzed and the seconds. The first input that breaks a parser's
contract (an exception other than ValueError, or a result that does not write back to its bytes) stops that parser
and is reported; the exit status is then 1.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from fuzz_targets import TARGETS
from hypothesis import HealthCheck, Phase, given, settings


def fuzz(name: str, examples: int) -> dict:
    """Run one target for up to ``examples`` inputs; return its counts, seconds and the failure (or "")."""
    strategy, check = TARGETS[name]
    counts = {"inputs": 0}

    def counted(value: object) -> None:
        counts["inputs"] += 1
        check(value)

    run = settings(
        max_examples=examples,
        deadline=None,
        database=None,
        derandomize=False,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )(given(strategy)(counted))
    start, failure = time.perf_counter(), ""
    try:
        run()
    except Exception as error:  # any failure is reported, and the other parsers go on
        failure = f"{type(error).__name__}: {error}"
    return {
        "parser": name,
        "inputs": counts["inputs"],
        "seconds": round(time.perf_counter() - start, 1),
        "failure": failure,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--examples", type=int, default=20000, help="inputs per parser (default 20000)"
    )
    parser.add_argument(
        "--only",
        nargs="+",
        choices=sorted(TARGETS),
        default=sorted(TARGETS),
        help="parsers to fuzz",
    )
    parser.add_argument("--json", action="store_true", help="print the report as one JSON document")
    args = parser.parse_args(argv)
    if not 1 <= args.examples <= 10**7:
        parser.error(f"--examples must be in 1..10000000, got {args.examples}")
    report = []
    for name in args.only:
        row = fuzz(name, args.examples)
        report.append(row)
        if not args.json:
            print(
                f"{name:26} {row['inputs']:8d} inputs in {row['seconds']:7.1f} s  "
                f"{'FAILED: ' + row['failure'][:300] if row['failure'] else 'ok'}",
                flush=True,
            )
    if args.json:
        print(json.dumps(report))
    elif len(report) > 1:
        print(f"{'total':26} {sum(r['inputs'] for r in report):8d} inputs")
    return 1 if any(row["failure"] for row in report) else 0


if __name__ == "__main__":
    sys.exit(main())
