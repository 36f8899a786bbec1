"""Benchmark of Protocol 1 per backend, round and side: the straightforward phe sequence, the ``"paillier"`` backend
(the previous uldp, Protocol 1 as the paper writes it, made fast) and the ``"packed-paillier"`` backend, same inputs.

1. The paper's artificial default (16 parameters, 20 users, 3 silos, 3072-bit keys): the straightforward phe
   sequence (one full ciphertext-scalar multiplication per parameter per user, one decryption per parameter), and
   both backends; the decoded results of phe and "paillier" must be equal, and both backends within P of the plain
   weighted sum.
2. The paper's artificial grid (parameters 16 to 107, users 10 to 40, silos 3 to 9; the other two at the default):
   a round of each backend, the slowest silo's seconds and the server's (encrypting the weights, the relay with the
   packed backend's rescale, the product and decryption), and the bytes each silo sends and receives.
3. The MNIST CNN (21840 parameters, 100 users, 5 silos): silo 0's round measured on two slices of users with all
   parameters and extrapolated linearly to 100 users (:func:`silo_projection`); the server's product and decryption
   measured on all the packed ciphertexts, and on a sample of the per-parameter ones (one CRT decryption each).
4. A model of 1,000,000 parameters (100 users, each with records in all 5 silos): the per-parameter costs of part 3
   projected to 10^6 parameters, the projection checked against one measured silo round on a larger slice.

5. ``--lattice-only`` (in ``benchmarks/secure_protocol_lattice.py``): the lattice (BFV) round of
   :mod:`uldp.secure.lattice` on the MNIST CNN round (silo 0 in full, the server's weights and its sum and decryption
   of |S| updates of that size), exactness on a small federation against the plain sum, and 10^6 parameters
   projected from one- and two-chunk slices (100 users: fixed plus per-chunk cost; every timed round, MNIST's and
   each slice's, a new sample's, whose weights the silo expands) and checked on a four-chunk slice, and the paper's
   artificial grid through the whole protocol (the Paillier rescale included); merged into an existing results file
   under ``"lattice"`` (``--merge PATH``), the other entries kept.

Keys are generated once per size and reused by every session (the benchmark times rounds, not key generation).
Wall and CPU seconds (this process and its workers) are given with the load average: the machine may be shared,
so compare ratios from one run. Under ``--json`` the text goes to stderr and one JSON document to stdout.

Usage: python benchmarks/secure_protocol.py [--quick] [--json] [--processes K] [--repeats R] [--skip-mnist]
       [--skip-million]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time
from dataclasses import replace
from typing import Any

import gmpy2
import numpy as np
from phe import paillier

from uldp.secure import ProtocolParameters, SecureSession, encoding, fast, keys, masks

BACKENDS = ("paillier", "packed-paillier")
FLOAT32_BYTES = 4
MNIST = {"parameters": 21840, "users": 100, "silos": 5}
MILLION = {"parameters": 1_000_000, "users": 100, "silos": 5}
CLIP, SIGMA, P = 0.1, 5.0, 1e-10


@functools.cache
def _cached_keypair(key_bits: int, *, insecure_test_key: bool = False):
    return _generate(key_bits, insecure_test_key=insecure_test_key)


_generate = keys.generate_paillier_keypair
keys.generate_paillier_keypair = (
    _cached_keypair  # every session of this benchmark reuses one key pair per size
)


def say(*parts: object) -> None:
    """Human-readable progress and results on stderr (stdout holds the JSON document under --json)."""
    print(*parts, file=sys.stderr, flush=True)


def make_inputs(rng, *, n_silos, n_users, dim, full_dim=None):
    """Counts, clipped deltas (norm C, coordinates ~ C / sqrt(full_dim)) and per-silo noise N(0, sigma^2 C^2 / |S|)."""
    counts = rng.integers(1, 2000 // n_silos, size=(n_silos, n_users))
    directions = rng.normal(size=(n_silos, n_users, dim))
    lengths = np.sqrt(rng.chisquare(full_dim or dim, size=(n_silos, n_users, 1)))
    deltas = np.clip(CLIP * directions / lengths, -CLIP, CLIP)
    noise = rng.normal(scale=SIGMA * CLIP / np.sqrt(n_silos), size=(n_silos, dim))
    return counts, deltas, noise


def plain_round(counts, deltas, noise):
    return np.einsum("su,sud->d", counts / counts.sum(axis=0), deltas) + noise.sum(axis=0)


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
            {p: k.masks for p, k in silo._pair_keys.items()},
            own_id=silo.silo_id,
            modulus=n,
            count=codes.shape[1],
            round_index=weights.round_index,
            purpose=masks.PURPOSE_UPDATE,
        )
        noise_codes = encoding.encode(noise[silo.silo_id], resolution_bits=bits).tolist()
        outputs = []
        for j in range(codes.shape[1]):
            total = paillier.EncodedNumber(
                public_key, (noise_codes[j] * c_lcm + net_masks[j]) % n, 0
            )
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
    result = np.array(
        [
            encoding.decode(
                private_key.raw_decrypt(c.ciphertext(be_secure=False)),
                resolution_bits=bits,
                c_lcm=c_lcm,
                modulus=n,
            )
            for c in sums
        ]
    )
    return result, {"silo_s": max(per_silo), "server_s": time.perf_counter() - start}


def _worker_pids() -> list[int]:
    """The live kept workers' process ids; ``lattice_workers.py --before`` runs this file on older libraries, whose
    ``fast._POOLS`` held one shared pool per count (before bdaa4fd) and had no ``worker_pids``."""
    if hasattr(fast, "worker_pids"):
        return fast.worker_pids()
    return [
        pid
        for pool in vars(fast)["_POOLS"].values()  # an older library's attribute
        for pid in list(getattr(pool, "_processes", None) or {})
    ]


def cpu_seconds():
    """CPU seconds of this process, its finished children and the live workers of :mod:`uldp.secure.fast`'s kept
    pools (read from ``/proc``: the lattice rounds time a session's later round, its workers already warm)."""
    times = os.times()
    live = 0
    for pid in _worker_pids():
        try:
            with open(f"/proc/{pid}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except (
            OSError
        ):  # exited between the listing and the read: its time is in children_* once reaped
            continue
        live += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat)
    return (
        times.user
        + times.system
        + times.children_user
        + times.children_system
        + live / os.sysconf("SC_CLK_TCK")
    )


class Clock:
    """Wall and CPU seconds of named parts; worker pools are stopped after each part so their CPU time counts."""

    def __init__(self) -> None:
        self.wall: dict[str, float] = {}
        self.cpu: dict[str, float] = {}

    def run(self, name, function, *args):
        fast.shutdown_pools()
        wall, cpu = time.perf_counter(), cpu_seconds()
        result = function(*args)
        fast.shutdown_pools()
        self.wall[name] = self.wall.get(name, 0.0) + time.perf_counter() - wall
        self.cpu[name] = self.cpu.get(name, 0.0) + cpu_seconds() - cpu
        return result


def backend_round(session, deltas, noise, *, silos=None):
    """One round through the stages, timed per side: the slowest silo (its share or rescale request + its masked
    update) and the server (weights, relay, product and decryption), with the bytes each silo sends and receives.

    ``silos``: the silos whose masked update is computed (default all); with a subset the server does not finish
    the round (no result; :func:`_server_round` times its product and decryption).
    """
    server, clock = session.server, Clock()
    n_users = session.config.n_users
    weights = clock.run("server", server.start_round, 1, np.ones(n_users, bool))
    sent = {s.silo_id: 0 for s in session.silos}
    received = {s.silo_id: len(weights.to_bytes()) for s in session.silos}
    shares = []
    for silo in session.silos:
        out = clock.run(f"silo {silo.silo_id}", silo.share_weight_powers, weights)
        sent[silo.silo_id] += sum(len(m.to_bytes()) for m in out)
        shares += out
    inbox = clock.run("server", server.relay, shares)
    updates = []
    for silo in session.silos if silos is None else [session.silos[s] for s in silos]:
        received[silo.silo_id] += sum(len(m.to_bytes()) for m in inbox[silo.silo_id])
        update = clock.run(
            f"silo {silo.silo_id}",
            silo.masked_update,
            weights,
            inbox[silo.silo_id],
            deltas[silo.silo_id],
            noise[silo.silo_id],
        )
        sent[silo.silo_id] += len(update.to_bytes())
        updates.append(update)
    result = None if silos is not None else clock.run("server", server.finish_round, updates)
    silo_names = [
        name
        for name in clock.wall
        if name.startswith("silo")
        and int(name.split()[1]) in (silos if silos is not None else range(session.config.n_silos))
    ]
    slowest = max(silo_names, key=lambda name: clock.wall[name])
    return result, {
        "silo_s": clock.wall[slowest],
        "silo_cpu_s": clock.cpu[slowest],
        "server_s": clock.wall["server"],
        "server_cpu_s": clock.cpu["server"],
        "silo_sent_bytes": max(sent.values()),
        "silo_received_bytes": max(received.values()),
        "update_bytes": len(updates[0].to_bytes()),
        "update_ciphertexts": len(updates[0].ciphertexts),
    }


def session_for(counts, backend, args, *, precision=P, processes=None):
    """A session with 3072-bit keys (reused), N_max = 2000, C = 0.1, sigma = 5 and ``args.processes`` workers."""
    parameters = ProtocolParameters(
        processes=processes or args.processes, backend=backend, precision=precision
    )
    return SecureSession(counts, parameters, clip=CLIP, sigma=SIGMA)


def artificial_default(args, rng):
    """The paper's default: phe once, each backend ``args.repeats`` times (median by wall seconds), same inputs."""
    n_silos, n_users, dim = 3, (10 if args.quick else 20), (8 if args.quick else 16)
    counts, deltas, noise = make_inputs(rng, n_silos=n_silos, n_users=n_users, dim=dim)
    plain = plain_round(counts, deltas, noise)
    out: dict[str, Any] = {"parameters": dim, "users": n_users, "silos": n_silos, "key_bits": 3072}
    # one process: at these sizes starting workers costs more than it saves
    sessions = {backend: session_for(counts, backend, args, processes=1) for backend in BACKENDS}
    for backend, session in sessions.items():
        runs = [backend_round(session, deltas, noise) for _ in range(args.repeats)]
        result, median = sorted(runs, key=lambda run: run[1]["silo_s"] + run[1]["server_s"])[
            len(runs) // 2
        ]
        out[backend] = {
            **median,
            "round_s": [run[1]["silo_s"] + run[1]["server_s"] for run in runs],
            "max_abs_error_vs_plain": float(np.max(np.abs(result - plain))),
            "result": result,
        }
    session = sessions["paillier"]
    weights = session.server.start_round(1, np.ones(n_users, bool))
    fast.shutdown_pools()
    wall, cpu = time.perf_counter(), cpu_seconds()
    naive, parts = naive_round(session, weights, deltas, noise)
    out["phe"] = {
        **parts,
        "wall_s": time.perf_counter() - wall,
        "cpu_s": cpu_seconds() - cpu,
        "max_abs_error_vs_plain": float(np.max(np.abs(naive - plain))),
    }
    out["phe_equals_paillier"] = bool(np.array_equal(naive, out["paillier"].pop("result")))
    out["packed-paillier"].pop("result")
    for backend in BACKENDS:
        ours = out[backend]
        ours["speedup_vs_phe"] = (out["phe"]["silo_s"] + out["phe"]["server_s"]) / (
            ours["silo_s"] + ours["server_s"]
        )
        ours["speedup_per_silo_vs_phe"] = out["phe"]["silo_s"] / ours["silo_s"]
    out["load"] = os.getloadavg()[0]
    return out


def artificial_grid(args, rng, backends=BACKENDS):
    """Each axis of the paper's artificial grid, the other two at the default; one round per backend and point."""
    axes = (
        {"parameters": [16, 107], "users": [10, 40], "silos": [3, 9]}
        if args.quick
        else {"parameters": [16, 30, 58, 107], "users": [10, 20, 30, 40], "silos": [3, 5, 7, 9]}
    )
    default = {"parameters": 16, "users": 20, "silos": 3}
    rows = []
    for axis, values in axes.items():
        for value in values:
            shape = dict(default, **{axis: value})
            counts, deltas, noise = make_inputs(
                rng, n_silos=shape["silos"], n_users=shape["users"], dim=shape["parameters"]
            )
            plain = plain_round(counts, deltas, noise)
            for backend in backends:
                result, parts = backend_round(
                    session_for(counts, backend, args, processes=1), deltas, noise
                )
                rows.append(
                    {
                        "axis": axis,
                        "value": value,
                        **shape,
                        "backend": backend,
                        **parts,
                        "max_abs_error_vs_plain": float(np.max(np.abs(result - plain))),
                    }
                )
                say(
                    f"  grid {axis}={value} {backend}: silo {parts['silo_s']:.3f} s, server {parts['server_s']:.3f} s, "
                    f"sent {parts['silo_sent_bytes']} B"
                )
    return rows


def _slice(args, rng, backend, users, dim, shape):
    """Silo 0's round on a slice of ``users`` users (all in every silo) and ``dim`` parameters, with the encoding
    and the packed layout of the full round (the precision is scaled so that f and g are the full round's)."""
    counts, deltas, noise = make_inputs(
        rng, n_silos=shape["silos"], n_users=users, dim=dim, full_dim=shape["parameters"]
    )
    counts = np.minimum(counts, 2000 // shape["silos"] // 5)
    # f: (|U| + |S|) 2^-f / 2 <= P; the slice's precision gives the full round's f (and g grows by <= 1 bit)
    precision = P * (users + shape["silos"]) / (shape["users"] + shape["silos"])
    session = session_for(counts, backend, args, precision=precision)
    full = replace(
        session.config,
        n_users=shape["users"],
        parameters=replace(session.config.parameters, precision=P),
    )
    assert session.config.resolution_bits == full.resolution_bits
    _, parts = backend_round(session, deltas, noise, silos=[0])
    # the slice's weights may be a bit shorter (fewer users), so its slots more: the full round's count is kept
    packed = full.backend.name == "packed-paillier"  # the only backend of K slots per ciphertext
    parts["full_ciphertexts"] = full.layout.ciphertexts_for(dim) if packed else dim
    if packed:
        parts["slots"] = {"slice": session.config.layout.slots, "full": full.layout.slots}
    return parts


def silo_projection(small, large, users, dim, shape):
    """Silo round for ``shape`` from two slices (users ``users[0] < users[1]``, ``dim`` parameters), in CPU seconds
    (on a shared machine the wall seconds of two slices can differ by more than their work): per-user work (the
    difference over the difference of users) times |U| plus the per-call work (the small slice minus its users'
    share), both linear in the parameters (scaled by shape["parameters"] / dim). The wall seconds are the projected
    CPU seconds times the large slice's wall / CPU ratio (its parallelism and the machine's load at the time).
    """
    per_user = (large["silo_cpu_s"] - small["silo_cpu_s"]) / (users[1] - users[0])
    per_call = small["silo_cpu_s"] - users[0] * per_user
    cpu = (per_user * shape["users"] + per_call) * shape["parameters"] / dim
    wall_per_cpu = large["silo_s"] / large["silo_cpu_s"]
    return {
        "silo_cpu_s": cpu,
        "silo_s": cpu * wall_per_cpu,
        "silo_cpu_per_user_s": per_user,
        "silo_cpu_per_call_s": per_call,
        "wall_per_cpu": wall_per_cpu,
    }


def mnist_and_million(args, rng):
    """Parts 3 and 4: silo 0 on two user slices with all MNIST parameters, the server's product and decryption,
    projections to 100 users and to 10^6 parameters, and a check of the projection on a larger parameter slice."""
    slices = (2, 4) if args.quick else (4, 8)
    out: dict[str, Any] = {
        "mnist": dict(MNIST),
        "million": dict(MILLION),
        "slice_users": list(slices),
    }
    check_users, check_dim = (2, 30_000) if args.quick else (3, 50_000)
    for backend in BACKENDS:
        say(f"MNIST slices, {backend} ...")
        small = _slice(args, rng, backend, slices[0], MNIST["parameters"], MNIST)
        large = _slice(args, rng, backend, slices[1], MNIST["parameters"], MNIST)
        silo = silo_projection(small, large, slices, MNIST["parameters"], MNIST)
        # the server: the per-user work of the large slice's round scaled to 100 users, the finish measured
        server = _server_round(args, rng, backend, slices[1], MNIST)
        per_param = server["finish_s"] / MNIST["parameters"]
        per_user = server["users_s"] / slices[1]
        mnist = {
            "silo_s": silo["silo_s"],
            "silo_cpu_s": silo["silo_cpu_s"],
            "silo_cpu_per_user_s": silo["silo_cpu_per_user_s"],
            "silo_wall_per_cpu": silo["wall_per_cpu"],
            "server_s": server["finish_s"] + per_user * MNIST["users"],
            "server_cpu_s": server["finish_cpu_s"]
            + server["users_cpu_s"] / slices[1] * MNIST["users"],
            "server_finish_measured_on": server["measured_on"],
            "update_ciphertexts": large["full_ciphertexts"],
            "slots": large.get("slots"),
            # the slice's update scaled to the full round's ciphertexts (the same size each)
            "update_bytes": large["update_bytes"]
            * large["full_ciphertexts"]
            / large["update_ciphertexts"],
            "silo_sent_bytes": large["update_bytes"]
            * large["full_ciphertexts"]
            / large["update_ciphertexts"]
            + (large["silo_sent_bytes"] - large["update_bytes"]) * MNIST["users"] / slices[1],
        }
        mnist["ciphertext_bytes_per_parameter"] = mnist["update_bytes"] / MNIST["parameters"]
        mnist["ratio_to_float32"] = mnist["ciphertext_bytes_per_parameter"] / FLOAT32_BYTES
        out["mnist"][backend] = mnist
        scale = MILLION["parameters"] / MNIST["parameters"]
        out["million"][backend] = {
            "silo_s": mnist["silo_s"] * scale,
            "silo_cpu_s": mnist["silo_cpu_s"] * scale,
            "server_s": per_param * MILLION["parameters"] + per_user * MILLION["users"],
            "server_cpu_s": server["finish_cpu_s"] / MNIST["parameters"] * MILLION["parameters"]
            + server["users_cpu_s"] / slices[1] * MILLION["users"],
            "update_bytes": mnist["update_bytes"] * scale,
        }
        say(f"  check on {check_users} users x {check_dim} parameters ...")
        measured = _slice(args, rng, backend, check_users, check_dim, MILLION)
        projected = (
            (silo["silo_cpu_per_user_s"] * check_users + silo["silo_cpu_per_call_s"])
            * check_dim
            / MNIST["parameters"]
        )
        out["million"][backend]["check"] = {
            "users": check_users,
            "parameters": check_dim,
            "measured_silo_cpu_s": measured["silo_cpu_s"],
            "projected_silo_cpu_s": projected,
            "measured_over_projected": measured["silo_cpu_s"] / projected,
        }
        fast.shutdown_pools()
    for key in ("mnist", "million"):
        for side in ("silo_s", "server_s"):
            out[key][f"{side.split('_')[0]}_ratio_paillier_over_packed"] = (
                out[key]["paillier"][side] / out[key]["packed-paillier"][side]
            )
    out["load"] = os.getloadavg()[0]
    return out


def _server_round(args, rng, backend, users, shape):
    """The server's round at ``shape["parameters"]``: per-user work (weights, relay) measured with ``users`` users;
    product over the silos and decryption measured on every ciphertext for the packed backend and on a sample for
    the per-parameter one (its full count would take minutes), scaled to all."""
    counts = make_inputs(rng, n_silos=shape["silos"], n_users=users, dim=8)[0]
    session = session_for(counts, backend, args)
    server, clock = session.server, Clock()
    weights = clock.run("users", server.start_round, 1, np.ones(users, bool))
    shares = [m for silo in session.silos for m in silo.share_weight_powers(weights)]
    clock.run("users", server.relay, shares)
    full = replace(session.config, n_users=shape["users"])
    layout = (
        full.layout if full.backend.name == "packed-paillier" else None
    )  # the full round's slots (more users: longer weights)
    count = layout.ciphertexts_for(shape["parameters"]) if layout else shape["parameters"]
    sample = count if layout else min(count, 48 * args.processes)
    n = server.public_key.n
    ciphertexts = [
        server.public_key.raw_encrypt(int(v)) for v in rng.integers(1, 2**62, size=min(sample, 64))
    ]
    updates = [
        [ciphertexts[i % len(ciphertexts)] for i in range(sample)] for _ in range(shape["silos"])
    ]
    square = gmpy2.mpz(n) * n

    def finish():  # Server.finish_round's product and CRT decryption (masks and decoding are negligible)
        totals = [gmpy2.mpz(c) for c in updates[0]]
        for update in updates[1:]:
            totals = [t * c % square for t, c in zip(totals, update, strict=True)]
        return server.decrypt(totals)

    clock.run("finish", finish)
    return {
        "users_s": clock.wall["users"],
        "users_cpu_s": clock.cpu["users"],
        "finish_s": clock.wall["finish"] * count / sample,
        "finish_cpu_s": clock.cpu["finish"] * count / sample,
        "measured_on": f"{sample} of {count} ciphertexts",
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="smaller instances (a few seconds of naive work)"
    )
    parser.add_argument(
        "--json", action="store_true", help="one JSON document on stdout (the text on stderr)"
    )
    parser.add_argument(
        "--processes", type=int, default=2, help="worker processes of both sides (default 2)"
    )
    parser.add_argument(
        "--repeats", type=int, default=3, help="rounds of each backend at the default (median)"
    )
    parser.add_argument("--skip-mnist", action="store_true", help="without parts 3 and 4")
    parser.add_argument("--skip-grid", action="store_true", help="without part 2")
    parser.add_argument(
        "--lattice-only", action="store_true", help="only part 5, merged into --merge's file"
    )
    parser.add_argument(
        "--merge",
        default="benchmarks/results/secure_protocol.json",
        help="results file to merge into",
    )
    args = parser.parse_args()
    rng = np.random.default_rng(2024)
    if args.lattice_only:
        from secure_protocol_lattice import merge_lattice  # it imports this module's helpers

        part = merge_lattice(args.merge, rng, args)
        if args.json:
            print(json.dumps(part))
        return 0 if part["max_abs_error_vs_plain"] <= P else 1
    document: dict[str, Any] = {
        "quick": args.quick,
        "processes": args.processes,
        "cpus": os.cpu_count(),
        "key_bits": 3072,
        "n_max": 2000,
        "precision": P,
        "load_at_start": os.getloadavg()[0],
    }
    say(
        f"load average at start: {os.getloadavg()} on {os.cpu_count()} CPUs; processes: {args.processes}"
    )
    default = document["default"] = artificial_default(args, rng)
    say(
        f"artificial default ({default['parameters']} parameters, {default['users']} users, {default['silos']} silos):"
    )
    say(f"  phe: silo {default['phe']['silo_s']:.2f} s, server {default['phe']['server_s']:.3f} s")
    for backend in BACKENDS:
        ours = default[backend]
        say(
            f"  {backend}: silo {ours['silo_s']:.3f} s, server {ours['server_s']:.3f} s; "
            f"{ours['speedup_vs_phe']:.1f}x phe; max |error| {ours['max_abs_error_vs_plain']:.1e}"
        )
    if not args.skip_grid:
        say("artificial grid:")
        document["grid"] = artificial_grid(args, rng)
    if not args.skip_mnist:
        document.update(mnist_and_million(args, rng))
        for key in ("mnist", "million"):
            for backend in BACKENDS:
                part = document[key][backend]
                say(
                    f"{key} {backend}: silo {part['silo_s']:.1f} s ({part['silo_cpu_s']:.1f} s CPU), server "
                    f"{part['server_s']:.1f} s ({part['server_cpu_s']:.1f} s CPU), {part['update_bytes'] / 1e6:.2f} MB"
                )
    exact = (
        default["phe_equals_paillier"]
        and all(default[b]["max_abs_error_vs_plain"] <= P for b in BACKENDS)
        and all(row["max_abs_error_vs_plain"] <= P for row in document.get("grid", []))
    )
    document["exact_within_p"] = exact
    if args.json:
        print(json.dumps(document))
    return 0 if exact else 1


if __name__ == "__main__":
    raise SystemExit(main())
