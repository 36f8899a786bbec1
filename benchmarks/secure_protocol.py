"""Benchmark of the private weighting protocol (Protocol 1): straightforward phe sequence vs ours, same inputs.

Part 1 (the paper's artificial default: 16 parameters, 20 users, 3 silos, 3072-bit keys): every silo computes
its encrypted weighted sum and the server aggregates and decrypts, once the straightforward way (one full
ciphertext-scalar multiplication per parameter per user with phe, as a plain implementation of step 2(b) does)
and once with uldp.secure (per-user constant once, small signed exponents with shared tables, work sharing, CRT).
The decoded results must be equal. Part 2 measures slices of one MNIST CNN silo round (21840 parameters, 100
users, 5 silos) and extrapolates linearly in the number of parameters.

Usage: python benchmarks/secure_protocol.py [--quick] [--json] [--processes K]
"""

from __future__ import annotations

import argparse
import json
import time

import gmpy2
import numpy as np
from phe import paillier

from uldp.secure import encoding, fast, masks
from uldp.secure.protocol import SecureSession


def make_inputs(rng, *, n_silos, n_users, dim, clip=0.1, sigma=5.0, full_dim=None):
    """Counts, clipped deltas (norm C, coordinates ~ C / sqrt(full_dim)) and per-silo noise N(0, sigma^2 C^2 / |S|)."""
    counts = rng.integers(1, 2000 // n_silos, size=(n_silos, n_users))
    directions = rng.normal(size=(n_silos, n_users, full_dim or dim))[..., :dim]
    deltas = clip * directions / np.linalg.norm(rng.normal(size=(n_silos, n_users, full_dim or dim)), axis=2, keepdims=True)
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
        sums = outputs if sums is None else [a + b for a, b in zip(sums, outputs)]
    start = time.perf_counter()
    private_key = session.server._private_key
    result = np.array([
        encoding.decode(private_key.raw_decrypt(c.ciphertext(be_secure=False)), resolution_bits=bits, c_lcm=c_lcm, modulus=n)
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


def artificial(args, rng):
    n_silos, n_users, dim = 3, (10 if args.quick else 20), (8 if args.quick else 16)
    counts, deltas, noise = make_inputs(rng, n_silos=n_silos, n_users=n_users, dim=dim)
    session = SecureSession(counts, clip=0.1, sigma=5.0, key_bits=3072, processes=args.processes)
    weights = session.server.start_round(1, np.ones(n_users, bool))
    start = time.perf_counter()
    ours, ours_silos, ours_agg = ours_round(session, weights, deltas, noise)
    ours_total = time.perf_counter() - start
    weights = session.server.start_round(1, np.ones(n_users, bool))  # fresh round state for the naive run
    start = time.perf_counter()
    naive, naive_silos, naive_agg = naive_round(session, weights, deltas, noise)
    naive_total = time.perf_counter() - start
    totals = counts.sum(axis=0)
    plain = np.einsum("su,sud->d", counts / totals, deltas) + noise.sum(axis=0)
    return {
        "parameters": dim, "users": n_users, "silos": n_silos, "key_bits": 3072,
        "naive_s": naive_total, "ours_s": ours_total, "speedup": naive_total / ours_total,
        "naive_silo_max_s": max(naive_silos), "ours_silo_max_s": max(ours_silos),
        "speedup_per_silo": max(naive_silos) / max(ours_silos),
        "naive_aggregation_s": naive_agg, "ours_aggregation_s": ours_agg,
        "equal": bool(np.array_equal(naive, ours)),
        "max_abs_error_vs_plain": float(np.max(np.abs(ours - plain))),
        "setup_s": session.timings,
    }


def mnist_slice(args, rng):
    """Time one MNIST silo round on a slice of users (all 21840 parameters) and extrapolate linearly in users.

    A user's cost (its per-user constant, digit tables and one lookup per parameter and digit position) does not
    depend on the other users, so the silo round is the slice's per-user time times |U|, plus the per-parameter
    work that does not depend on users (noise, masks), measured on the full parameter vector.
    """
    full_dim, n_users, n_silos = 21840, 100, 5
    slice_users = 2 if args.quick else 5
    counts, deltas, noise = make_inputs(rng, n_silos=n_silos, n_users=slice_users, dim=full_dim)
    counts = np.minimum(counts, 2000 // n_silos // 5)
    session = SecureSession(counts, clip=0.1, sigma=5.0, key_bits=3072, processes=args.processes)
    server, silo = session.server, session.silos[0]
    n = server.public_key.n
    n_square = n * n
    weights = server.start_round(1, np.ones(slice_users, bool))
    start = time.perf_counter()
    silo.share_weight_powers(weights)  # one full-size exponentiation per user of this silo's share
    share_per_user = (time.perf_counter() - start) / len(range(0, slice_users, n_silos))
    bits = session.config.resolution_bits
    codes = encoding.encode(deltas[0], resolution_bits=bits)
    exponent_bits = int(encoding.encode(np.full(1, 0.1), resolution_bits=bits)[0]).bit_length()
    window = fast.choose_window(n_users, full_dim, exponent_bits)
    start = time.perf_counter()
    bases = [gmpy2.powmod(fast.raise_to(c, 1, n_square), int(k), n_square) for c, k in zip(weights.ciphertexts, counts[0])]
    fast.weighted_ciphertext_sum(bases, codes, n_square, window=window, processes=args.processes)
    per_user = (time.perf_counter() - start) / slice_users
    start = time.perf_counter()
    masks.signed_mask_sum({p: k.masks for p, k in silo._pair_keys.items()}, own_id=0, modulus=n, count=full_dim,
                          round_index=1, purpose=masks.PURPOSE_UPDATE)
    per_parameter = time.perf_counter() - start
    start = time.perf_counter()
    fast.crt_decrypt(server._private_key, [weights.ciphertexts[0]] * 64, processes=1)
    decrypt_per_param = (time.perf_counter() - start) / 64
    silo_round = share_per_user * n_users / n_silos + per_user * n_users + per_parameter
    return {
        "parameters": full_dim, "users": n_users, "silos": n_silos, "slice_users": slice_users, "window": window,
        "share_per_user_s": share_per_user, "weighting_per_user_s": per_user, "masks_noise_s": per_parameter,
        "silo_round_extrapolated_s": silo_round, "server_decrypt_extrapolated_s": decrypt_per_param * full_dim,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller instances (a few seconds of naive work)")
    parser.add_argument("--json", action="store_true", help="print a JSON summary as the last line")
    parser.add_argument("--processes", type=int, default=1, help="worker processes for ours (default 1)")
    args = parser.parse_args()
    rng = np.random.default_rng(2024)
    part1 = artificial(args, rng)
    print(f"artificial default ({part1['parameters']} parameters, {part1['users']} users, {part1['silos']} silos, 3072-bit):")
    print(f"  straightforward phe: {part1['naive_s']:8.2f} s   (slowest silo {part1['naive_silo_max_s']:.2f} s)")
    print(f"  uldp.secure        : {part1['ours_s']:8.2f} s   (slowest silo {part1['ours_silo_max_s']:.2f} s)")
    print(f"  speedup {part1['speedup']:.1f}x overall, {part1['speedup_per_silo']:.1f}x per silo; decoded results equal: "
          f"{part1['equal']}; max |secure - plain| = {part1['max_abs_error_vs_plain']:.2e}")
    part2 = mnist_slice(args, rng)
    print(f"MNIST CNN silo round ({part2['parameters']} parameters, {part2['users']} users, {part2['silos']} silos), "
          f"measured on {part2['slice_users']} users:")
    print(f"  per user: weighted sum {part2['weighting_per_user_s']:.2f} s (window {part2['window']}), shared power "
          f"{part2['share_per_user_s']:.3f} s; masks for all parameters {part2['masks_noise_s']:.2f} s")
    print(f"  extrapolated silo round: {part2['silo_round_extrapolated_s']:.1f} s; server decryption "
          f"{part2['server_decrypt_extrapolated_s']:.1f} s")
    if args.json:
        print(json.dumps({
            "speedup": part1["speedup"], "equal": part1["equal"], "speedup_per_silo": part1["speedup_per_silo"],
            "naive_s": part1["naive_s"], "ours_s": part1["ours_s"],
            "mnist_silo_round_s": part2["silo_round_extrapolated_s"],
            "mnist_server_decrypt_s": part2["server_decrypt_extrapolated_s"],
            "quick": args.quick, "processes": args.processes,
        }))
    return 0 if part1["equal"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
