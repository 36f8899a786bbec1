"""Part 5 of ``benchmarks/secure_protocol.py`` (``--lattice-only``): the lattice (BFV) round of
:mod:`uldp.secure.lattice` on the MNIST CNN round, its exactness against the plain sum, the 10^6-parameter projection
from one- and two-chunk slices checked on four, and the merge of the part into an existing results file. Run it
through ``python benchmarks/secure_protocol.py --lattice-only``; it shares that script's inputs, oracle and clocks.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import numpy as np
from secure_protocol import (
    BACKENDS,
    CLIP,
    FLOAT32_BYTES,
    MILLION,
    MNIST,
    SIGMA,
    P,
    artificial_grid,
    cpu_seconds,
    make_inputs,
    plain_round,
    say,
)

from uldp.secure import encoding, packing


def lattice_projection(slices, *, server_weights_s, server_weights_cpu_s, chunks):
    """A lattice round of ``chunks`` chunks from slices of 1 and 2 chunks (``slices[k]``), checked on 4 chunks.

    Each side's CPU seconds are fitted as ``fixed + chunks * per_chunk`` on the 1- and 2-chunk slices (the silo's
    fixed part: expanding the packed weights of a new sample into |U| ciphertexts, so every slice is a new sample's
    round; the server's finish is linear), the 4-chunk slice checks the fit (measured / projected), and the wall
    seconds are the projected CPU seconds times the 4-chunk slice's wall / CPU ratio (the machine may be shared).
    The server's weights do not depend on d.
    """
    out: dict[str, Any] = {"chunks": chunks, "check": {"chunks": 4}}
    for side in ("silo", "server_finish"):
        one, two, four = (slices[k][f"{side}_cpu_s"] for k in (1, 2, 4))
        per_chunk = two - one
        fixed = one - per_chunk
        wall_per_cpu = slices[4][f"{side}_s"] / max(four, 1e-9)
        out[f"{side}_cpu_fixed_s"], out[f"{side}_cpu_per_chunk_s"] = fixed, per_chunk
        out[f"{side}_cpu_s"] = fixed + chunks * per_chunk
        out[f"{side}_s"] = out[f"{side}_cpu_s"] * wall_per_cpu
        out["check"][f"{side}_measured_cpu_s"], out["check"][f"{side}_projected_cpu_s"] = (
            four,
            fixed + 4 * per_chunk,
        )
        out["check"][f"{side}_measured_over_projected"] = four / (fixed + 4 * per_chunk)
    out["server_s"] = server_weights_s + out["server_finish_s"]
    out["server_cpu_s"] = server_weights_cpu_s + out["server_finish_cpu_s"]
    out["update_bytes"] = slices[1]["update_bytes"] * chunks
    return out


def lattice_rounds(rng, processes):
    """Part 5: the lattice round (silo 0 in full, the server), exactness, and the 10^6-parameter projection.

    Both sides run ``processes`` worker processes; every timed round is a session's second (its first, untimed,
    lets the workers build their contexts and keys, a once-per-session cost). The MNIST round is also timed with
    one process in the same run (``mnist["serial"]``), for the ratio.
    """
    from uldp.secure import lattice, lattice_silo

    def session(counts, workers=processes):
        n_silos, n_users = counts.shape
        layout = lattice.layout_for(
            precision=P,
            n_users=n_users,
            n_silos=n_silos,
            n_max=2000,
            delta_bound=CLIP,
            noise_bound=encoding.noise_tail_bound(sigma=SIGMA, clip=CLIP, n_silos=n_silos),
        )
        server = lattice.LatticeServer(layout)
        mask_keys = {(a, b): os.urandom(32) for a in range(n_silos) for b in range(a + 1, n_silos)}
        silos = [
            lattice_silo.LatticeSilo(
                s,
                counts[s],
                layout,
                public_keys=server.public_keys(),
                galois_keys=server.galois_keys(),
                workers=workers,
                mask_keys={p: mask_keys[min(s, p), max(s, p)] for p in range(n_silos) if p != s},
            )
            for s in range(n_silos)
        ]
        return layout, server, silos

    def timed(function, *args):
        wall, cpu = time.perf_counter(), cpu_seconds()
        result = function(*args)
        return result, time.perf_counter() - wall, cpu_seconds() - cpu

    def silo_round(users, dim, shape, workers=processes):
        counts, deltas, noise = make_inputs(rng, n_silos=shape["silos"], n_users=users, dim=dim)
        layout, server, silos = session(counts, workers)
        corrections = [
            int.from_bytes(os.urandom(8), "little") for _ in range(users)
        ]  # timing only: any c_u
        silos[0].masked_update(
            1, server.encrypt_weights(corrections), corrections, deltas[0], noise[0]
        )  # warm-up
        weights, enc_s, enc_cpu = timed(server.encrypt_weights, corrections)
        update, silo_s, silo_cpu = timed(
            silos[0].masked_update, 2, weights, corrections, deltas[0], noise[0]
        )
        sizes = [len(c) for prime in update for c in prime]
        _, finish_s, finish_cpu = timed(server.finish, [update] * shape["silos"], dim)
        return {
            "users": users,
            "parameters": dim,
            "processes": workers,
            "silo_s": silo_s,
            "silo_cpu_s": silo_cpu,
            "server_weights_s": enc_s,
            "server_weights_cpu_s": enc_cpu,
            "server_finish_s": finish_s,
            "server_finish_cpu_s": finish_cpu,
            "server_s": enc_s + finish_s,
            "server_cpu_s": enc_cpu + finish_cpu,
            "update_bytes": sum(sizes),
            "update_ciphertexts": len(sizes),
            "silo_received_bytes": sum(len(c) for prime in weights for c in prime),
            "plain_primes": len(layout.plain_moduli),
            "ring_degree": lattice.RING_DEGREE,
            "coefficient_modulus_bits": lattice.coefficient_modulus_bits(layout.coefficient_bits),
            "flood_bits": layout.flood_bits,
        }

    out: dict[str, Any] = {
        "processes": processes,
        "cpus": os.cpu_count(),
        "load_at_start": os.getloadavg()[0],
    }
    counts, deltas, noise = make_inputs(rng, n_silos=3, n_users=10, dim=2000)
    _, server, silos = session(counts)
    c_lcm, g = encoding.lcm_up_to(2000), server.layout.packed.weight_bits
    blind_bits = packing.rescale_blind_bits(key_bits=3072, n_max=2000)
    blinds = [int.from_bytes(os.urandom(blind_bits // 8), "little") for _ in range(10)]
    rescaled = [
        packing.rescaled(c_lcm // int(n) + r, c_lcm=c_lcm, weight=g)
        for n, r in zip(counts.sum(axis=0), blinds, strict=True)
    ]
    corrections = [packing.rescaled(r, c_lcm=c_lcm, weight=g) for r in blinds]
    weights = server.encrypt_weights(rescaled)
    result = server.finish(
        [
            s.masked_update(1, weights, corrections, deltas[i], noise[i])
            for i, s in enumerate(silos)
        ],
        2000,
    )
    out["max_abs_error_vs_plain"] = float(
        np.max(np.abs(result - plain_round(counts, deltas, noise)))
    )
    say(
        f"lattice: exactness on 3 silos x 10 users x 2000 parameters: {out['max_abs_error_vs_plain']:.1e}"
    )
    say("lattice: MNIST round (silo 0 in full, the server) ...")
    mnist = out["mnist"] = silo_round(MNIST["users"], MNIST["parameters"], MNIST)
    mnist["ciphertext_bytes_per_parameter"] = mnist["update_bytes"] / MNIST["parameters"]
    mnist["ratio_to_float32"] = mnist["ciphertext_bytes_per_parameter"] / FLOAT32_BYTES
    say(
        f"  silo {mnist['silo_s']:.2f} s ({mnist['silo_cpu_s']:.2f} CPU), server {mnist['server_s']:.2f} s "
        f"({mnist['server_cpu_s']:.2f} CPU) with {processes} processes; load {os.getloadavg()[0]:.1f}"
    )
    serial = mnist["serial"] = silo_round(MNIST["users"], MNIST["parameters"], MNIST, workers=1)
    for side in ("silo_s", "server_s"):
        mnist[f"{side.split('_')[0]}_ratio_serial_over_parallel"] = serial[side] / mnist[side]
    say(
        f"  one process: silo {serial['silo_s']:.2f} s ({serial['silo_cpu_s']:.2f} CPU), server "
        f"{serial['server_s']:.2f} s ({serial['server_cpu_s']:.2f} CPU)"
    )
    say("lattice: 10^6 parameters from one- and two-chunk slices, checked on four chunks ...")
    counts, deltas, noise = make_inputs(
        rng,
        n_silos=MILLION["silos"],
        n_users=MILLION["users"],
        dim=4 * lattice.RING_DEGREE,
        full_dim=MILLION["parameters"],
    )
    _, server, silos = session(counts)
    corrections = [
        int.from_bytes(os.urandom(8), "little") for _ in range(MILLION["users"])
    ]  # timing: any c_u
    weights = server.encrypt_weights(
        corrections
    )  # warm-up round 1 (the workers' contexts and keys)
    silos[0].masked_update(1, weights, corrections, deltas[0][:, :1], noise[0][:1])
    weights, weights_s, weights_cpu = timed(server.encrypt_weights, corrections)
    slices = {}
    for round_index, chunks in enumerate((1, 2, 4), start=2):
        # each slice a new sample's round, as the MNIST one: new weights, which the silo expands (it keeps the
        # expansion of a sample for its next round, which would leave the expansion out of the later slices)
        if round_index > 2:
            weights = server.encrypt_weights(corrections)
        dim = chunks * lattice.RING_DEGREE
        update, silo_s, silo_cpu = timed(
            silos[0].masked_update,
            round_index,
            weights,
            corrections,
            deltas[0][:, :dim],
            noise[0][:dim],
        )
        _, finish_s, finish_cpu = timed(server.finish, [update] * MILLION["silos"], dim)
        slices[chunks] = {
            "parameters": dim,
            "silo_s": silo_s,
            "silo_cpu_s": silo_cpu,
            "server_finish_s": finish_s,
            "server_finish_cpu_s": finish_cpu,
            "update_bytes": sum(len(c) for p in update for c in p),
        }
    out["million"] = {
        "slices": list(slices.values()),
        "server_weights_s": weights_s,
        "server_weights_cpu_s": weights_cpu,
        "silo_received_bytes": sum(len(c) for prime in weights for c in prime),
        **lattice_projection(
            slices,
            server_weights_cpu_s=weights_cpu,
            server_weights_s=weights_s,
            chunks=-(-MILLION["parameters"] // lattice.RING_DEGREE),
        ),
    }
    check = out["million"]["check"]
    say(
        f"  silo {out['million']['silo_s']:.1f} s, server {out['million']['server_s']:.1f} s; four-chunk check "
        f"measured/projected CPU: silo {check['silo_measured_over_projected']:.2f}, server finish "
        f"{check['server_finish_measured_over_projected']:.2f}"
    )
    out["load"] = os.getloadavg()[0]
    return out


def merge_lattice(path, rng, args):
    """Run part 5 and store it under ``"lattice"`` in the results file at ``path`` (other entries kept)."""
    from uldp.paper.experiments import now, provenance, write_json_atomic

    with open(path) as handle:
        document = json.load(handle)
    started = now()
    part = lattice_rounds(rng, args.processes)
    say("lattice: the paper's artificial grid through the protocol (rescale included) ...")
    part["grid"] = artificial_grid(args, rng, backends=("lattice",))
    results = document["results"]
    for key in ("mnist", "million"):
        for backend in BACKENDS:
            if backend in results.get(key, {}):
                for side in ("silo_s", "server_s"):
                    part[key][f"{side.split('_')[0]}_ratio_{backend}_over_lattice"] = (
                        results[key][backend][side] / part[key][side]
                    )
    part["provenance"] = {
        **provenance(
            f"python benchmarks/secure_protocol.py --lattice-only --processes "
            f"{args.processes} --merge {path}"
        ),
        "date": started,
    }
    results["lattice"] = part
    write_json_atomic(path, document)
    return part
