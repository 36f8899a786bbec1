"""The lattice silo's round against its worker count (issue 43 item 6): wall and CPU seconds of one silo's round of
Protocol 1 with the lattice backend, per worker count, and the same for the library at an earlier revision (today's
path before the split by ciphertext), side by side.

One silo of |S| silos with |U| users at d parameters: the server encrypts the weights, each worker count gets a
warm-up round (its pool started, contexts built, on as many chunks as it has workers), then ``--repeat`` timed rounds
with the same weights (``held``: the same sample; a silo that keeps its expanded weights expands nothing) and
``--repeat`` with new weights each round (``new_sample``, key ``<count>_new_sample``; the server's encryption is made
before the clock starts), the fastest of each kept. CPU seconds count this process and its live pool workers (read
from ``/proc``, as ``benchmarks/secure_protocol.py`` does). ``--profile`` prints where one single-worker round spends
its time.

``--before REV`` runs this script on the library at REV (``git archive`` into a temporary directory; the silo's
worker keyword there is ``processes``) for ``--before-workers``, and prints the ratios: the goal is CPU time per round
growing by at most 1.5x from 1 to the most workers, and no slowdown against REV on 2 cores.

On a 16-core machine (one call; at 10^6 parameters about 60 s of CPU per round here, so one round per count after
and before, 1 + 1/2 + ... + 1/16 of it and two rounds of f44df92, stays under 8 minutes):

    python benchmarks/lattice_workers.py --parameters 1000000 --workers 1,2,4,8,16 --repeat 1 --before f44df92 --json

Usage: python benchmarks/lattice_workers.py [--parameters D] [--users U] [--workers 1,2] [--repeat R] [--profile]
       [--before REV] [--before-workers 1,2] [--json] [--write PATH]
"""

from __future__ import annotations

import argparse
import cProfile
import inspect
import io
import json
import os
import pstats
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from secure_protocol import cpu_seconds

from uldp.common.atomic import write_json_atomic
from uldp.common.provenance import now, provenance
from uldp.secure import encoding, fast

P, CLIP, SIGMA, N_MAX = 1e-10, 0.1, 5.0, 2000


def say(*parts: object) -> None:
    """Progress on stderr (stdout holds the JSON document under --json)."""
    print(*parts, file=sys.stderr, flush=True)


def silo_rounds(
    parameters: int, users: int, silos: int, workers: list[int], repeat: int, profile: bool
) -> dict:
    """Per worker count, the fastest of ``repeat`` rounds of silo 0 (wall and CPU seconds)."""
    from uldp.secure import lattice, lattice_silo

    layout = lattice.layout_for(
        precision=P,
        n_users=users,
        n_silos=silos,
        n_max=N_MAX,
        delta_bound=CLIP,
        noise_bound=encoding.noise_tail_bound(sigma=SIGMA, clip=CLIP, n_silos=silos),
    )
    server = lattice.LatticeServer(layout)
    rng = np.random.default_rng(0)
    weights = server.encrypt_weights([int(c) for c in rng.integers(0, 2**40, size=users)])
    deltas = rng.uniform(-CLIP, CLIP, size=(users, parameters))
    accepted = inspect.signature(lattice_silo.LatticeSilo).parameters
    keyword = "workers" if "workers" in accepted else "processes"  # this revision's name for it
    keys: dict[str, Any] = {"public_keys": server.public_keys()}
    if (
        "galois_keys" in accepted
    ):  # the packed weights (issue 43, second round) are expanded with them
        keys["galois_keys"] = server.galois_keys()

    def silo_with(count: int) -> Any:
        return lattice_silo.LatticeSilo(
            0,
            np.ones(users, dtype=np.int64),
            layout,
            mask_keys={p: os.urandom(32) for p in range(1, silos)},
            **{**keys, keyword: count},
        )

    primes = len(layout.plain_moduli)
    out: dict = {
        "plain_moduli": len(layout.plain_moduli),
        "coefficient_primes": len(layout.coefficient_bits),
    }
    for count in workers:
        silo = silo_with(count)
        warm = min(parameters, -(-count // primes) * lattice.RING_DEGREE)
        silo.masked_update(1, weights, [0] * users, deltas[:, :warm], np.zeros(warm))
        round_index = 1
        for case in (
            "held",
            "new_sample",
        ):  # the weights of the warm-up round, or new ones every round
            best = None
            for _ in range(repeat):
                round_index += 1
                if case == "new_sample":  # made before the clock starts: the server's work
                    weights = server.encrypt_weights(
                        [int(c) for c in rng.integers(0, 2**40, size=users)]
                    )
                wall, cpu = time.perf_counter(), cpu_seconds()
                silo.masked_update(round_index, weights, [0] * users, deltas, np.zeros(parameters))
                timing = (time.perf_counter() - wall, cpu_seconds() - cpu)
                best = timing if best is None or timing[0] < best[0] else best
            assert best is not None
            out[str(count) + ("" if case == "held" else "_new_sample")] = {
                "wall_s": best[0],
                "cpu_s": best[1],
            }
            say(f"{keyword}={count}, {case}: {best[0]:.2f} s wall, {best[1]:.2f} s CPU per round")
        fast.shutdown_pools()
    if profile:
        silo = silo_with(1)
        profiler = cProfile.Profile()
        profiler.runcall(silo.masked_update, 1, weights, [0] * users, deltas, np.zeros(parameters))
        stream = io.StringIO()
        stats = pstats.Stats(profiler, stream=stream).sort_stats("tottime")
        stats.print_stats(12)
        say(stream.getvalue())
        total = sum(v[2] for v in stats.stats.values())  # type: ignore[attr-defined]
        out["profile_tottime_share"] = {
            f"{name[2]} ({Path(name[0]).name}:{name[1]})": value[2] / total
            for name, value in sorted(
                stats.stats.items(),  # type: ignore[attr-defined]
                key=lambda item: -item[1][2],
            )[:12]
        }
    return out


def before(revision: str, argv: list[str]) -> dict:
    """This script run on the library at ``revision`` (its own copy, with that tree first on the path)."""
    root = Path(__file__).resolve().parent.parent
    with tempfile.TemporaryDirectory() as tree:
        archive = subprocess.run(
            ["git", "-C", str(root), "archive", revision, "uldp"], check=True, capture_output=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", tree], input=archive, check=True)
        os.makedirs(os.path.join(tree, "benchmarks"))
        for name in ("lattice_workers.py", "secure_protocol.py"):
            shutil.copy(Path(__file__).with_name(name), os.path.join(tree, "benchmarks", name))
        run = subprocess.run(
            [sys.executable, "benchmarks/lattice_workers.py", *argv, "--json"],
            cwd=tree,
            env={**os.environ, "PYTHONPATH": tree},
            check=True,
            stdout=subprocess.PIPE,
            text=True,
        )
    commit = subprocess.run(
        ["git", "-C", str(root), "rev-parse", revision], check=True, capture_output=True, text=True
    ).stdout.strip()
    return {"git_commit": commit, **json.loads(run.stdout)["results"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parameters", type=int, default=4 * 16384, help="d (default 65,536)")
    parser.add_argument("--users", type=int, default=100)
    parser.add_argument("--silos", type=int, default=5)
    parser.add_argument("--workers", default="1,2", help="worker counts, comma-separated")
    parser.add_argument(
        "--repeat", type=int, default=2, help="timed rounds per count (fastest kept)"
    )
    parser.add_argument("--profile", action="store_true", help="profile one single-worker round")
    parser.add_argument("--before", metavar="REV", help="also run the library at this revision")
    parser.add_argument("--before-workers", default="1,2", help="worker counts at --before")
    parser.add_argument("--json", action="store_true", help="one JSON document on stdout")
    parser.add_argument("--write", type=Path, help="also write the document to this path")
    args = parser.parse_args()
    workers = [int(w) for w in args.workers.split(",")]
    if any(w < 1 for w in workers) or args.parameters < 1 or args.repeat < 1:
        parser.error("worker counts, --parameters and --repeat must be positive")
    started = now()
    shape = [
        "--parameters",
        str(args.parameters),
        "--users",
        str(args.users),
        "--silos",
        str(args.silos),
    ]
    shape += ["--repeat", str(args.repeat)]
    results = silo_rounds(
        args.parameters, args.users, args.silos, workers, args.repeat, args.profile
    )
    document: dict = {
        "provenance": {
            **provenance("python benchmarks/lattice_workers.py " + " ".join(sys.argv[1:])),
            "date": started,
        },
        "shape": {
            "parameters": args.parameters,
            "users": args.users,
            "silos": args.silos,
            "cpu_count": os.cpu_count(),
        },
        "results": results,
    }
    most = str(max(workers))
    ratios = (
        {
            f"wall_1_over_{most}": results["1"]["wall_s"] / results[most]["wall_s"],
            f"cpu_{most}_over_1": results[most]["cpu_s"] / results["1"]["cpu_s"],
        }
        if "1" in results
        else {}
    )
    if args.before:
        say(f"before: the library at {args.before} ...")
        old = before(args.before, [*shape, "--workers", args.before_workers])
        document["before"] = old
        counts = args.before_workers.split(",")
        for count in [*counts, *(c + "_new_sample" for c in counts)]:
            if count in results and count in old:
                ratios[f"wall_before_over_after_{count}"] = (
                    old[count]["wall_s"] / results[count]["wall_s"]
                )
                ratios[f"cpu_before_over_after_{count}"] = (
                    old[count]["cpu_s"] / results[count]["cpu_s"]
                )
    document["ratios"] = ratios
    for name, value in ratios.items():
        say(f"{name}: {value:.2f}")
    if args.write:
        write_json_atomic(args.write, document)
    if args.json:
        print(json.dumps(document))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
