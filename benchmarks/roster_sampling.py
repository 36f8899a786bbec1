"""Added cost of the roster (keys the server cannot swap) and of the hidden user sample, at MNIST size by default
(21840 parameters, 100 users, 5 silos, as benchmarks/secure_protocol.py), side by side with the run without them.

- Per session: every silo signs its DH key once (Ed25519) and checks |S| signatures (:mod:`uldp.secure.roster`);
  the masked sum's set-up with and without the roster and the hidden sample's sealed contributions, all silos in
  one process (in a federation they work in parallel: divide by |S| for one silo's share).
- Per round: the masked sum's round (every silo's masked update of a given vector and the server's decoding) with
  and without the hidden sample (each silo also draws the round's sample, :func:`uldp.secure.sampling.sample_users`;
  training only the sampled users then saves work, not counted), and one draw of the sample at |U| = 10000 (MNIST's
  largest federation).
Medians of ``--repeats`` runs, in milliseconds; compare the ratios of one run (the machine may be shared). Under
``--json`` one JSON document goes to stdout (``benchmarks/save.py`` adds provenance).

Usage: python benchmarks/roster_sampling.py [--parameters 21840] [--users 100] [--silos 5] [--repeats 20] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

from uldp.secure.masked_sum import MaskedSumServer, MaskedSumSilo
from uldp.secure.roster import Credentials, Identity, Roster
from uldp.secure.sampling import sample_users


def federation(silos: int, *, roster: bool, q: float | None) -> tuple[MaskedSumServer, list, float]:
    """A masked sum set up in process; its set-up's seconds."""
    identities = [Identity.generate(f"silo-{s}") for s in range(silos)]
    listed = Roster.of(identities)
    members = [
        MaskedSumSilo(
            s,
            silos,
            credentials=Credentials(identities[s], listed) if roster else None,
            sample_rate=q,
        )
        for s in range(silos)
    ]

    def exchange(stage, round_index, payloads):
        return {s: members[s].answer(stage, round_index, p) for s, p in payloads.items()}

    server = MaskedSumServer(silos, exchange, hidden_sample=q is not None)
    start = time.perf_counter()
    server.setup()
    return server, members, time.perf_counter() - start


def one_round(
    server, members, round_index: int, updates: np.ndarray, n_users: int, hidden: bool
) -> float:
    """Seconds of one round: each silo's update masked (after drawing the round's sample when hidden), then decoded.
    The updates are given (the same vectors either way), so only the protocol's work is timed."""
    start = time.perf_counter()
    answers = {}
    for s, silo in enumerate(members):
        if hidden:
            silo.sample(round_index, n_users)
        answers[s] = silo.answer("sum-update", round_index, (), update=lambda s=s: updates[s])
    server.finish_round(round_index, answers, updates.shape[1])
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parameters", type=int, default=21840)
    parser.add_argument("--users", type=int, default=100)
    parser.add_argument("--silos", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    updates = rng.normal(size=(args.silos, args.parameters)) * 1e-3
    variants = {"plain": (False, None), "roster": (True, None), "roster_hidden_sample": (True, 0.1)}
    setup: dict[str, list[float]] = {name: [] for name in variants}
    rounds: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(args.repeats):
        for name, (roster, q) in variants.items():
            server, members, seconds = federation(args.silos, roster=roster, q=q)
            setup[name].append(seconds)
            rounds[name].append(one_round(server, members, 1, updates, args.users, q is not None))
    seed = bytes(32)
    draws = []
    for repeat in range(args.repeats):
        start = time.perf_counter()
        sample_users(seed, round_index=repeat + 1, n_users=10_000, q=0.1)
        draws.append(time.perf_counter() - start)
    setup_ms = {name: 1e3 * statistics.median(v) for name, v in setup.items()}
    round_ms = {name: 1e3 * statistics.median(v) for name, v in rounds.items()}
    ms = {
        "setup_ms": setup_ms,
        "round_ms": round_ms,
        "sample_10000_users_ms": 1e3 * statistics.median(draws),
        "round_added_ms": round_ms["roster_hidden_sample"] - round_ms["plain"],
        "setup_added_ms": setup_ms["roster_hidden_sample"] - setup_ms["plain"],
    }
    document = {"arguments": vars(args), "results": ms}
    if args.json:
        print(json.dumps(document))
    else:
        for key, value in ms.items():
            print(f"{key}: {value}")


if __name__ == "__main__":
    main()
