"""Set-up cost of the silos' private set union (``uldp.secure.psu``) against the shared-key HMAC pseudonyms it
replaces, at |U| = 2000 patients and 4 silos by default.

Each patient is held by a random non-empty subset of the silos (each silo with probability 0.4, seeded layout),
so sum_s |X_s| is about 1.7 |U|. One in-process run of every silo's steps and the server's relay; the seconds
each silo spends in its own steps are summed per silo (in a federation the silos work in parallel, so the set-up
takes about the slowest silo's seconds times the steps it waits for, plus the network). Every element is raised
once by every silo: silo i computes sum_s |X_s| exponentiations. The naive way, for the ratio: HMAC-SHA256 of
every id under a shared key (no protection against a silo guessing ids). The machine may be shared: compare the
ratios of one run. Under ``--json`` one JSON document goes to stdout (``benchmarks/save.py`` adds provenance).

Usage: python benchmarks/psu.py [--users 2000] [--silos 4] [--group modp2048] [--json]
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import os
import secrets
import sys
import time
from collections import defaultdict

import numpy as np

from uldp.secure import psu


def layout(users: int, silos: int, seed: int = 0) -> list[list[str]]:
    """Per silo, its patients' ids: each patient at each silo with probability 0.4, at least one silo each."""
    rng = np.random.default_rng(seed)
    held = rng.random((users, silos)) < 0.4
    held[~held.any(axis=1), rng.integers(0, silos, users)[~held.any(axis=1)]] = True
    return [[f"patient-{u:06d}" for u in np.flatnonzero(held[:, s])] for s in range(silos)]


def run_union(id_sets: list[list[str]], group: psu.PsuGroup) -> dict:
    """One union with every silo's seconds per step; checks |U| against the true union."""
    key = secrets.token_bytes(32)
    names = [f"silo {s}" for s in range(len(id_sets))]
    seconds: dict[int, float] = defaultdict(float)
    start = time.perf_counter()
    silos = []
    for s, ids in enumerate(id_sets):
        tick = time.perf_counter()
        silos.append(psu.UnionSilo(names[s], ids, relay_key=key, group=group))
        seconds[s] += time.perf_counter() - tick
    roster = psu.Roster(group.name, tuple(names), tuple(silo.hello for silo in silos))

    def ask(stage: str, requests: dict[int, bytes]) -> dict[int, bytes]:
        replies = {}
        for s, request in requests.items():
            tick = time.perf_counter()
            message = (
                silos[s].start(psu.Roster.from_bytes(request), share_counts=False)
                if stage == "psu-start"
                else silos[s].relay(psu.RelayMessage.from_bytes(request))
            )
            replies[s] = message.to_bytes()
            seconds[s] += time.perf_counter() - tick
        return replies

    shares = [psu.RelayMessage.from_bytes(m) for m in psu.relay_union(ask, roster)]
    results = []
    for s, silo in enumerate(silos):
        tick = time.perf_counter()
        results.append(silo.finish(shares))
        seconds[s] += time.perf_counter() - tick
    total = time.perf_counter() - start
    true_union = len(set().union(*map(set, id_sets)))
    if {r.n_users for r in results} != {true_union}:
        raise AssertionError(
            f"the union has {[r.n_users for r in results]} users, the truth {true_union}"
        )
    return {
        "seconds_all_silos_in_one_process": total,
        "seconds_per_silo": [seconds[s] for s in range(len(silos))],
        "n_users": true_union,
    }


def exponentiation_seconds(group: psu.PsuGroup, repeats: int = 200) -> float:
    """Seconds of one exponentiation by a full-size secret exponent (gmpy2)."""
    import gmpy2

    base, exponent, p = (
        gmpy2.mpz(group.hash_to_group(b"s", "x")),
        gmpy2.mpz(secrets.randbelow(group.q)),
        group.p,
    )
    tick = time.perf_counter()
    for _ in range(repeats):
        gmpy2.powmod(base, exponent, p)
    return (time.perf_counter() - tick) / repeats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=2000)
    parser.add_argument("--silos", type=int, default=4)
    parser.add_argument("--group", default=psu.DEFAULT_GROUP.name, choices=sorted(psu.GROUPS))
    parser.add_argument(
        "--json", action="store_true", help="write one JSON document of the results to stdout"
    )
    args = parser.parse_args()
    group = psu.GROUPS[args.group]
    id_sets = layout(args.users, args.silos)
    load_before = os.getloadavg()[0]
    one_exponentiation = exponentiation_seconds(group)
    union = run_union(id_sets, group)
    key = secrets.token_bytes(32)
    tick = time.perf_counter()
    for ids in id_sets:
        [hmac.new(key, i.encode(), hashlib.sha256).hexdigest() for i in ids]
    hmac_seconds = time.perf_counter() - tick
    elements = sum(len(ids) for ids in id_sets)
    report = {
        "group": group.name,
        "group_bits": group.p.bit_length(),
        "silos": args.silos,
        "users": union["n_users"],
        "set_sizes": [len(ids) for ids in id_sets],
        "exponentiations_per_silo": elements,
        "exponentiations_in_all": elements * args.silos,
        "seconds_per_exponentiation": one_exponentiation,
        **union,
        "slowest_silo_seconds": max(union["seconds_per_silo"]),
        "slowest_silo_seconds_per_element": max(union["seconds_per_silo"]) / elements,
        "hmac_pseudonyms_seconds": hmac_seconds,
        "ratio_union_to_hmac_pseudonyms": union["seconds_all_silos_in_one_process"] / hmac_seconds,
        "exchanges": args.silos + 3,
        "cores": os.cpu_count(),
        "load_average": {"before": load_before, "after": os.getloadavg()[0]},
    }
    if args.json:
        print(json.dumps(report))
        return
    print(json.dumps(report, indent=1), file=sys.stderr)


if __name__ == "__main__":
    main()
