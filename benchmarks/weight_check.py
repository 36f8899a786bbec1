"""Benchmark of the silos' check of the server's weights (issue 41 item 4, :mod:`uldp.secure.weight_check`): its
added cost per round at MNIST size (100 users, 5 silos, 3072-bit keys) for both Paillier backends, beside the round
it guards.

The check does not depend on the model's size d: each silo raises its |U| weight ciphertexts to 128-bit coefficients
twice (its contribution, then again to find it in the server's list) and verifies one decryption proof (one
full-size exponentiation); the server multiplies |S| ciphertexts, decrypts one and computes one full-size power. So
it is measured on a round of d = 16 parameters and reported beside the committed MNIST round of
benchmarks/results/secure_protocol.json (21,840 parameters, the same federation and keys): the ratio there is the
check's share of an MNIST round. It also costs one more exchange per round (its latency is the transport's).

Usage: python benchmarks/weight_check.py [--quick] [--json] [--repeats R] [--write PATH]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from uldp.common.atomic import write_json_atomic
from uldp.common.provenance import now, provenance
from uldp.secure import ProtocolParameters, SecureSession
from uldp.secure.driver import STAGE_CHECK

MNIST = {"users": 100, "silos": 5}
CLIP, SIGMA, N_MAX, DIM = 0.1, 5.0, 2000, 16
COMMITTED = Path("benchmarks/results/secure_protocol.json")


def say(*parts: object) -> None:
    """Progress and results on stderr (stdout holds the JSON document under --json)."""
    print(*parts, file=sys.stderr, flush=True)


def timed(function, *args):
    """(result, wall seconds, CPU seconds of this process)."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = function(*args)
    return result, time.perf_counter() - wall, time.process_time() - cpu


def check_round(session: SecureSession, round_index: int, deltas, noise, sampled) -> dict:
    """One round through the roles with the check timed apart: per silo its contribution and its verification,
    at the server the proof; the round is finished and its result checked within P."""
    server, silos = session.server, session.silos
    weights = server.start_round(round_index, sampled)
    inbox = server.relay([m for silo in silos for m in silo.share_weight_powers(weights)])
    silo_s, silo_cpu = [0.0] * len(silos), [0.0] * len(silos)
    checks = []
    for silo in silos:
        check, wall, cpu = timed(silo.weight_check, weights, inbox[silo.silo_id])
        checks.append(check)
        silo_s[silo.silo_id] += wall
        silo_cpu[silo.silo_id] += cpu
    proof, server_s, server_cpu = timed(server.prove_weight_check, checks)
    for silo in silos:
        _, wall, cpu = timed(silo.verify_weights, weights, inbox[silo.silo_id], proof)
        silo_s[silo.silo_id] += wall
        silo_cpu[silo.silo_id] += cpu
    updates = [
        silo.masked_update(weights, inbox[silo.silo_id], deltas[silo.silo_id], noise[silo.silo_id])
        for silo in silos
    ]
    result = server.finish_round(updates)
    counts = session.totals
    weights_su = np.where(sampled, np.stack([np.asarray(s.counts) for s in silos]) / counts, 0.0)
    plain = np.einsum("su,sud->d", weights_su, deltas) + noise.sum(axis=0)
    if np.max(np.abs(result - plain)) > session.config.parameters.precision:
        raise AssertionError("the checked round is not within P of the plain weighted sum")
    slowest = int(np.argmax(silo_s))
    return {
        "silo_s": silo_s[slowest],
        "silo_cpu_s": silo_cpu[slowest],
        "server_s": server_s,
        "server_cpu_s": server_cpu,
        "silo_sent_bytes": len(checks[0].to_bytes()),
        "silo_received_bytes": len(proof.to_bytes()),
    }


def measure(backend: str, args, rng) -> dict:
    """The check's median seconds over ``args.repeats`` rounds of one session, and its share of the MNIST round."""
    counts = rng.integers(1, 12, size=(MNIST["silos"], MNIST["users"]))
    deltas = rng.uniform(-CLIP, CLIP, size=(*counts.shape, DIM))
    noise = rng.normal(scale=0.1, size=(MNIST["silos"], DIM))
    sampled = rng.random(MNIST["users"]) < 0.8
    parameters = ProtocolParameters(
        key_bits=args.key_bits,
        n_max=N_MAX if not args.quick else 300,
        backend=backend,
        insecure_test_key=args.quick,
    )
    say(
        f"{backend}: set-up of {MNIST['silos']} silos, {MNIST['users']} users, {args.key_bits}-bit keys ..."
    )
    session = SecureSession(counts, parameters, clip=CLIP, sigma=SIGMA)
    rounds = [check_round(session, t, deltas, noise, sampled) for t in range(1, args.repeats + 1)]
    part = {key: float(np.median([r[key] for r in rounds])) for key in rounds[0]}
    if COMMITTED.exists() and not args.quick:
        mnist = json.loads(COMMITTED.read_text())["results"]["mnist"][backend]
        part["mnist_round_silo_s"] = mnist["silo_s"]
        part["mnist_round_server_s"] = mnist["server_s"]
        part["silo_share_of_mnist_round"] = part["silo_s"] / mnist["silo_s"]
        part["server_share_of_mnist_round"] = part["server_s"] / mnist["server_s"]
        part["bytes_share_of_mnist_silo_sent"] = (
            part["silo_sent_bytes"] + part["silo_received_bytes"]
        ) / mnist["silo_sent_bytes"]
    say(
        f"  check per round: slowest silo {part['silo_s']:.3f} s ({part['silo_cpu_s']:.3f} CPU), server "
        f"{part['server_s']:.3f} s; bytes: silo sends {part['silo_sent_bytes']:.0f}, receives "
        f"{part['silo_received_bytes']:.0f}"
        + (
            f"; {100 * part['silo_share_of_mnist_round']:.2f}% of the MNIST silo round, "
            f"{100 * part['server_share_of_mnist_round']:.3f}% of its server round"
            if "silo_share_of_mnist_round" in part
            else ""
        )
    )
    return part


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="1024-bit test keys and N_max = 300, one round"
    )
    parser.add_argument("--json", action="store_true", help="one JSON document on stdout")
    parser.add_argument("--repeats", type=int, default=3, help="rounds per backend (median)")
    parser.add_argument("--write", type=Path, help="also write the document to this path")
    args = parser.parse_args()
    args.key_bits = 1024 if args.quick else 3072
    args.repeats = 1 if args.quick else args.repeats
    started = now()
    rng = np.random.default_rng(0)
    results = {
        "key_bits": args.key_bits,
        **MNIST,
        "parameters_measured": DIM,
        "stage": STAGE_CHECK,
        **{backend: measure(backend, args, rng) for backend in ("paillier", "packed-paillier")},
    }
    command = "python benchmarks/weight_check.py" + (" --quick" if args.quick else "")
    document = {"provenance": {**provenance(command), "date": started}, "results": results}
    if args.write:
        write_json_atomic(args.write, document)
    if args.json:
        print(json.dumps(document))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
