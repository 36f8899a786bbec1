"""Benchmark of the private weighting protocol (Protocol 1): straightforward phe sequence vs ours, same inputs.

Part 1 (the paper's artificial default: 16 parameters, 20 users, 3 silos, 3072-bit keys): every silo computes
its encrypted weighted sum and the server aggregates and decrypts, once the straightforward way (one full
ciphertext-scalar multiplication per parameter per user with phe, as a plain implementation of step 2(b) does)
and once with uldp.secure (per-user constant once, small signed exponents with shared tables, work sharing, CRT).
The decoded results must be equal. Wall and CPU times are printed with the load average: on a shared machine the
CPU seconds show what the code costs. Part 2 runs one MNIST CNN silo round (21840 parameters, 5 silos) on two
slices of users and extrapolates linearly to 100 users (see :func:`mnist_slice`).

Usage: python benchmarks/secure_protocol.py [--quick] [--json] [--processes K] [--repeats R] [--skip-mnist]
"""

from __future__ import annotations

import argparse
import json
import os
import time

import gmpy2
import numpy as np
from phe import paillier

from uldp.secure import ProtocolParameters, SecureSession, encoding, fast, masks


def make_inputs(rng, *, n_silos, n_users, dim, clip=0.1, sigma=5.0, full_dim=None):
    """Counts, clipped deltas (norm C, coordinates ~ C / sqrt(full_dim)) and per-silo noise N(0, sigma^2 C^2 / |S|)."""
    counts = rng.integers(1, 2000 // n_silos, size=(n_silos, n_users))
    directions = rng.normal(size=(n_silos, n_users, full_dim or dim))[..., :dim]
    lengths = np.linalg.norm(rng.normal(size=(n_silos, n_users, full_dim or dim)), axis=2, keepdims=True)
    deltas = clip * directions / lengths
    deltas = np.clip(deltas, -clip, clip)
    noise = rng.normal(scale=sigma * clip / np.sqrt(n_silos), size=(n_silos, dim))
    return counts, deltas, noise


def naive_round(session, weights, deltas, noise):
    """Step 2(b)-(c) done literally with phe: one full scalar multiplication per (user, parameter) in each silo."""
    public_key = session.server.public_key
    n = public_key.n
    config = session.config
    bits, c_lcm = config.resolution_bits, config.c_lcm
    per_silo = []
    sums = None
    for silo in session.silos:
        start = time.perf_counter()
        blinds, counts = silo._blinds, silo._counts
        encrypted = [paillier.EncryptedNumber(public_key, c, 0) for c in weights.ciphertexts]
        codes = encoding.encode(deltas[silo.silo_id], resolution_bits=bits)
        net_masks = masks.signed_mask_sum(
            {p: k.masks for p, k in silo._pair_keys.items()}, own_id=silo.silo_id, modulus=n,
            count=codes.shape[1], round_index=weights.round_index, purpose=masks.PURPOSE_UPDATE,
        )
        noise_codes = encoding.encode(noise[silo.silo_id], resolution_bits=bits).tolist()
        outputs = []
        for j in range(codes.shape[1]):
            total = paillier.EncodedNumber(public_key, (noise_codes[j] * c_lcm + net_masks[j]) % n, 0)
            acc = None
            for u in range(config.n_users):
                if counts[u] == 0:
                    continue
                scalar = int(codes[u, j]) * counts[u] * blinds[u] * c_lcm % n
                term = paillier.EncryptedNumber(public_key, encrypted[u]._raw_mul(scalar), 0)
                acc = term if acc is None else acc + term
            outputs.append(acc + total)
        per_silo.append(time.perf_counter() - start)
        sums = outputs if sums is None else [a + b for a, b in zip(sums, outputs, strict=True)]
    assert sums is not None  # at least one silo
    start = time.perf_counter()
    private_key = session.server._private_key
    result = np.array([
        encoding.decode(private_key.raw_decrypt(c.ciphertext(be_secure=False)), resolution_bits=bits, c_lcm=c_lcm,
                        modulus=n)
        for c in sums
    ])
    return result, per_silo, time.perf_counter() - start


def ours_round(session, weights, deltas, noise):
    """Steps 2(b)-(c) with uldp.secure; returns the decoded result, per-silo times and the aggregation time."""
    silos, server = session.silos, session.server
    per_silo = [0.0] * len(silos)
    sealed = []
    for silo in silos:
        start = time.perf_counter()
        sealed += silo.share_weight_powers(weights)
        per_silo[silo.silo_id] += time.perf_counter() - start
    inbox = server.relay(sealed)
    updates = []
    for silo in silos:
        start = time.perf_counter()
        updates.append(silo.masked_update(weights, inbox[silo.silo_id], deltas[silo.silo_id], noise[silo.silo_id]))
        per_silo[silo.silo_id] += time.perf_counter() - start
    start = time.perf_counter()
    result = server.finish_round(updates)
    return result, per_silo, time.perf_counter() - start


def cpu_seconds():
    """CPU seconds of this process and its finished or pooled children (load on the machine does not inflate it)."""
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


def timed(function, *args):
    """(result, wall seconds, CPU seconds, 1-minute load average at the end) of one call.

    Worker processes are started inside and stopped at the end, so that their CPU time is counted (the operating
    system reports it for finished children only) and the wall time includes starting them.
    """
    fast.shutdown_pools()
    wall, cpu = time.perf_counter(), cpu_seconds()
    result = function(*args)
    fast.shutdown_pools()
    return result, time.perf_counter() - wall, cpu_seconds() - cpu, os.getloadavg()[0]


def artificial(args, rng):
    """The paper's artificial default: the naive phe round once, ours ``args.repeats`` times (median), same inputs."""
    n_silos, n_users, dim = 3, (10 if args.quick else 20), (8 if args.quick else 16)
    counts, deltas, noise = make_inputs(rng, n_silos=n_silos, n_users=n_users, dim=dim)
    session = SecureSession(counts, ProtocolParameters(processes=args.processes), clip=0.1, sigma=5.0)
    ours_runs = []
    for _ in range(args.repeats):
        weights = session.server.start_round(1, np.ones(n_users, bool))
        ours_runs.append(timed(ours_round, session, weights, deltas, noise))
    weights = session.server.start_round(1, np.ones(n_users, bool))  # fresh round state for the naive run
    (naive, naive_silos, naive_agg), naive_s, naive_cpu, naive_load = timed(naive_round, session, weights, deltas,
                                                                            noise)
    median_run = sorted(ours_runs, key=lambda run: run[1])[len(ours_runs) // 2]
    (ours, ours_silos, ours_agg), ours_s, ours_cpu, ours_load = median_run
    totals = counts.sum(axis=0)
    plain = np.einsum("su,sud->d", counts / totals, deltas) + noise.sum(axis=0)
    return {
        "parameters": dim, "users": n_users, "silos": n_silos, "key_bits": 3072,
        "naive_s": naive_s, "ours_s": ours_s, "speedup": naive_s / ours_s,
        "ours_runs_s": [run[1] for run in ours_runs],
        "naive_cpu_s": naive_cpu, "ours_cpu_s": ours_cpu, "speedup_cpu": naive_cpu / ours_cpu,
        "load_naive": naive_load, "load_ours": ours_load,
        "naive_silo_max_s": max(naive_silos), "ours_silo_max_s": max(ours_silos),
        "speedup_per_silo": max(naive_silos) / max(ours_silos),
        "naive_aggregation_s": naive_agg, "ours_aggregation_s": ours_agg,
        "equal": bool(np.array_equal(naive, ours)) and all(np.array_equal(run[0][0], ours) for run in ours_runs),
        "max_abs_error_vs_plain": float(np.max(np.abs(ours - plain))),
        "setup_s": session.timings,
    }


def _silo_zero_round(args, rng, slice_users, full_dim, n_users, n_silos):
    """Silo 0's masked update (it holds records of every user) on a slice of ``slice_users`` users, timed."""
    counts, deltas, noise = make_inputs(rng, n_silos=n_silos, n_users=slice_users, dim=full_dim)
    counts = np.minimum(counts, 2000 // n_silos // 5)
    # the encoding resolution of the full round: (|U| + |S|) 2^-f / 2 <= P with |U| = 100, not the slice's users
    precision = 1e-10 * (slice_users + n_silos) / (n_users + n_silos)
    session = SecureSession(counts, ProtocolParameters(precision=precision, processes=args.processes), clip=0.1,
                            sigma=5.0)
    assert session.config.resolution_bits == encoding.resolution_bits_for(1e-10, n_users + n_silos)
    server, silos = session.server, session.silos
    weights = server.start_round(1, np.ones(slice_users, bool))
    sealed, share_times = [], []
    for silo in silos:
        start = time.perf_counter()
        sealed += silo.share_weight_powers(weights)
        own = len(range(silo.silo_id, slice_users, n_silos))
        if own:
            share_times.append((time.perf_counter() - start) / own)
    inbox = server.relay(sealed)
    _, wall, cpu, load = timed(silos[0].masked_update, weights, inbox[0], deltas[0], noise[0])
    return {"wall": wall, "cpu": cpu, "load": load, "share_times": share_times, "session": session,
            "weights": weights, "deltas": deltas}


def mnist_slice(args, rng):
    """One MNIST CNN silo round (21840 parameters, 100 users, 5 silos), extrapolated from two measured slices.

    The real protocol runs silo 0's masked update (it holds records of every user) on a small and a large slice of
    users with all 21840 parameters. The difference of the two times divided by the difference of users is the
    per-user work (its weight power to n_su, tables and one lookup per parameter and non-zero digit), which does
    not depend on the other users; the small slice's time minus its users' share is the per-call work (unsealing
    shares, masks, noise, encoding, starting workers and merging their partial products), paid once per round.
    A silo's round is its share of the full-size powers (|U| / |S| of them) + |U| times the per-user work + the
    per-call work. The server's part: the product over silos and the CRT decryption, timed on a sample of
    ciphertexts.
    """
    full_dim, n_users, n_silos = 21840, 100, 5
    small_users, large_users = (2, 4) if args.quick else (6, 12)
    small = _silo_zero_round(args, rng, small_users, full_dim, n_users, n_silos)
    large = _silo_zero_round(args, rng, large_users, full_dim, n_users, n_silos)
    per_user = (large["wall"] - small["wall"]) / (large_users - small_users)
    per_user_cpu = (large["cpu"] - small["cpu"]) / (large_users - small_users)
    per_call, per_call_cpu = small["wall"] - small_users * per_user, small["cpu"] - small_users * per_user_cpu
    share_per_user = float(np.median(small["share_times"] + large["share_times"]))
    silo_round = share_per_user * n_users / n_silos + per_user * n_users + per_call
    silo_round_cpu = share_per_user * n_users / n_silos + per_user_cpu * n_users + per_call_cpu
    session, weights, deltas = large["session"], large["weights"], large["deltas"]
    server, n = session.server, session.server.public_key.n
    sample = [int(c) for c in rng.choice(np.array(weights.ciphertexts, dtype=object), 32 * args.processes)]
    _, decrypt_s, decrypt_cpu, load_decrypt = timed(
        lambda: server.decrypt(sample))
    n_square = gmpy2.mpz(n) ** 2
    start = time.perf_counter()
    for c in sample:
        c * c % n_square
    multiply = (time.perf_counter() - start) / len(sample)
    server_s = (decrypt_s / len(sample) + (n_silos - 1) * multiply) * full_dim
    bits = int(np.abs(encoding.encode(deltas[0], resolution_bits=session.config.resolution_bits)).max()).bit_length()
    plan = fast.choose_plan(-(-n_users // args.processes), full_dim, bits)
    return {
        "parameters": full_dim, "users": n_users, "silos": n_silos, "slice_users": [small_users, large_users],
        "plan": plan, "exponent_bits": bits, "share_per_user_s": share_per_user, "weighting_per_user_s": per_user,
        "weighting_per_user_cpu_s": per_user_cpu, "per_call_work_s": per_call, "per_call_work_cpu_s": per_call_cpu,
        "silo_round_extrapolated_s": silo_round, "silo_round_extrapolated_cpu_s": silo_round_cpu,
        "server_extrapolated_s": server_s, "server_decrypt_cpu_per_ciphertext_s": decrypt_cpu / len(sample),
        "load": [small["load"], large["load"], load_decrypt],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller instances (a few seconds of naive work)")
    parser.add_argument("--json", action="store_true", help="print a JSON summary as the last line")
    parser.add_argument("--processes", type=int, default=1, help="worker processes for ours (default 1)")
    parser.add_argument("--repeats", type=int, default=3, help="runs of ours at the artificial default (median)")
    parser.add_argument("--skip-mnist", action="store_true", help="only the artificial default")
    args = parser.parse_args()
    rng = np.random.default_rng(2024)
    print(f"load average at start: {os.getloadavg()} on {os.cpu_count()} CPUs; processes for ours: {args.processes}")
    part1 = artificial(args, rng)
    print(f"artificial default ({part1['parameters']} parameters, {part1['users']} users, {part1['silos']} silos, "
          "3072-bit):")
    print(f"  straightforward phe: {part1['naive_s']:8.2f} s wall, {part1['naive_cpu_s']:6.2f} s CPU   "
          f"(slowest silo {part1['naive_silo_max_s']:.2f} s; load {part1['load_naive']:.2f})")
    print(f"  uldp.secure        : {part1['ours_s']:8.2f} s wall, {part1['ours_cpu_s']:6.2f} s CPU   "
          f"(slowest silo {part1['ours_silo_max_s']:.2f} s; "
          f"median of {', '.join(f'{t:.2f}' for t in part1['ours_runs_s'])}"
          f"; load {part1['load_ours']:.2f})")
    print(f"  speedup {part1['speedup']:.1f}x wall ({part1['speedup_cpu']:.1f}x CPU), "
          f"{part1['speedup_per_silo']:.1f}x per silo; decoded results equal: {part1['equal']}; "
          f"max |secure - plain| = {part1['max_abs_error_vs_plain']:.2e}")
    summary = {
        "speedup": part1["speedup"], "equal": part1["equal"], "speedup_cpu": part1["speedup_cpu"],
        "speedup_per_silo": part1["speedup_per_silo"], "naive_s": part1["naive_s"], "ours_s": part1["ours_s"],
        "load": [part1["load_naive"], part1["load_ours"]], "quick": args.quick, "processes": args.processes,
    }
    if not args.skip_mnist:
        part2 = mnist_slice(args, rng)
        print(f"MNIST CNN silo round ({part2['parameters']} parameters, {part2['users']} users, "
              f"{part2['silos']} silos), measured on {' and '.join(map(str, part2['slice_users']))} users "
              f"(exponents of {part2['exponent_bits']} bits, plan "
              f"{part2['plan'][0]} w={part2['plan'][1]}; load {', '.join(f'{x:.2f}' for x in part2['load'])}):")
        print(f"  per user: weighted sum {part2['weighting_per_user_s']:.3f} s wall "
              f"({part2['weighting_per_user_cpu_s']:.3f} s "
              f"CPU), shared power {part2['share_per_user_s']:.3f} s; per-call work {part2['per_call_work_s']:.2f} s")
        print(f"  EXTRAPOLATED silo round: {part2['silo_round_extrapolated_s']:.1f} s wall "
              f"({part2['silo_round_extrapolated_cpu_s']:.1f} s CPU); server product + CRT decryption of "
              f"{part2['parameters']} ciphertexts: {part2['server_extrapolated_s']:.1f} s "
              f"({part2['server_decrypt_cpu_per_ciphertext_s'] * 1e3:.2f} ms CPU per decryption)")
        summary.update(mnist_silo_round_s=part2["silo_round_extrapolated_s"],
                       mnist_silo_round_cpu_s=part2["silo_round_extrapolated_cpu_s"],
                       mnist_server_s=part2["server_extrapolated_s"], mnist_load=part2["load"])
    if args.json:
        print(json.dumps(summary))
    return 0 if part1["equal"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
