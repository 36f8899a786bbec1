"""Figure 11's artificial scan of the private weighting protocol at the paper's settings: parameters 16 to 107, users
10 to 40, silos 3 to 9 around the default (16 parameters, 20 users, 3 silos), 3072-bit keys, N_max = 2000
(:func:`uldp.secure.scan.protocol_scan`). Each setting runs ``--repeats`` fresh sessions, interleaved.

The Scorecard's Figure 11 rows (``uldp.paper.scorecard_runtime``) read the committed result,
``benchmarks/results/protocol_scan.json`` (written by ``python benchmarks/save.py protocol_scan``).

Usage: ``python benchmarks/protocol_scan.py [--repeats 3] [--key-bits 3072] [--json]``
"""

from __future__ import annotations

import argparse
import json
import os

from uldp.secure.config import ProtocolParameters
from uldp.secure.scan import SCAN_AXES, SCAN_DEFAULT, protocol_scan


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--repeats", type=int, default=3, help="fresh sessions per setting (interleaved)"
    )
    parser.add_argument(
        "--key-bits", type=int, default=3072, help="Paillier modulus size (the paper's 3072)"
    )
    parser.add_argument("--seed", type=int, default=0, help="draws the counts, deltas and noise")
    parser.add_argument(
        "--json", action="store_true", help="write one JSON document of the results to stdout"
    )
    args = parser.parse_args()
    protocol = ProtocolParameters(
        key_bits=args.key_bits, n_max=2000, insecure_test_key=args.key_bits < 2048
    )
    points = protocol_scan(protocol=protocol, repeats=args.repeats, seed=args.seed)
    report = {
        "key_bits": args.key_bits,
        "n_max": protocol.n_max,
        "repeats": args.repeats,
        "default": SCAN_DEFAULT,
        "axes": {axis: list(values) for axis, values in SCAN_AXES.items()},
        "load_average": list(os.getloadavg()),
        "rows": [point.as_row() for point in points],
    }
    if args.json:
        print(json.dumps(report))
        return
    for point in points:
        print(
            point.axis,
            point.value,
            point.repeat,
            {k: round(v, 3) for k, v in point.seconds.items()},
        )


if __name__ == "__main__":
    main()
