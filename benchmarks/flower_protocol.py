"""Per-round cost of ULDP-AVG-w on Flower with Protocol 1, against Flower without it and against the in-process round.

One federation of 3 hospitals (``--records`` records, ``--patients`` patients visiting several hospitals, a small
MLP) runs ``--rounds`` rounds three ways, on the same records, settings and seed:

1. in process: :func:`uldp.fit` (its per-round seconds);
2. on Flower without Protocol 1: :class:`uldp.flower.UldpStrategy` with :class:`uldp.flower.LocalGrid` (the same
   Flower messages and ClientApps in this process; each silo sends ``sum_u w_su Delta_su + z_s``);
3. on Flower with Protocol 1 (``secure=True``, ``--key-bits`` Paillier keys, N_max = ``--n-max``): one more message
   exchange per round, the silos' masked updates and the server's decryption; its set-up (Paillier key generation
   and three exchanges) once.

It prints the median wall seconds per round of each and their ratios (Flower / in process, Flower with Protocol 1 /
Flower without, Flower with Protocol 1 / in process), the set-up's seconds, and the CPU seconds of each whole run
(set-up included) with the same ratios: everything runs in this process, so on a shared machine the CPU seconds
show what the code costs. Every silo's noise is its own
(CSPRNG), as in a real federation. The numbers depend on the machine and its load: compare ratios from one run.

Usage: python benchmarks/flower_protocol.py [--rounds R] [--key-bits B] [--n-max N] [--records N] [--patients U]
       [--hidden H] [--json]
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from torch import nn

import uldp
import uldp.flower as uf

HOSPITALS = ["General", "Royal", "St Mary"]
FEATURES = ["a", "b", "c", "d"]


def write_hospitals(folder: Path, records: int, patients: int) -> Path:
    """Three hospital files of records with raw patient ids (patients visit several hospitals) and a silo key."""
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(rng.normal(size=(records, len(FEATURES))), columns=FEATURES)
    frame["label"] = (frame.a + frame.b > 0).astype(int)
    frame["patient"] = [f"P{u}" for u in rng.integers(0, patients, records)]
    frame["hospital"] = rng.choice(HOSPITALS, records)
    for hospital, part in frame.groupby("hospital"):
        part.drop(columns="hospital").to_csv(folder / f"{hospital}.csv", index=False)
    uf.write_key_file(folder / "key")
    return folder


def load(context) -> uf.SiloData:
    frame = pd.read_csv(context.node_config["data"])
    return uf.SiloData(
        frame[FEATURES].to_numpy(np.float32), frame["label"].to_numpy(), frame["patient"]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--key-bits", type=int, default=3072, help="Paillier key size (3072, the paper's)"
    )
    parser.add_argument("--n-max", type=int, default=2000, help="N_max (2000, the paper's)")
    parser.add_argument("--records", type=int, default=300)
    parser.add_argument("--patients", type=int, default=40)
    parser.add_argument(
        "--hidden", type=int, default=16, help="hidden units of the MLP (its size sets d)"
    )
    parser.add_argument(
        "--json", action="store_true", help="one JSON document on stdout instead of text"
    )
    args = parser.parse_args()
    logging.getLogger("flwr").setLevel(logging.WARNING)
    from flwr.app import ArrayRecord

    def model() -> nn.Module:
        return nn.Sequential(
            nn.Linear(len(FEATURES), args.hidden), nn.ReLU(), nn.Linear(args.hidden, 2)
        )

    settings: dict[str, Any] = {
        "method": "ULDP-AVG-w",
        "sigma": 1.0,
        "q": 1.0,
        "local_epochs": 1,
        "batch_size": 16,
        "seed": 0,
    }
    protocol = {
        "key_bits": args.key_bits,
        "n_max": args.n_max,
        "insecure_test_key": args.key_bits < 2048,
    }
    with tempfile.TemporaryDirectory() as tmp:
        folder = write_hospitals(Path(tmp), args.records, args.patients)
        net = model()
        frame = pd.concat([pd.read_csv(folder / f"{h}.csv") for h in HOSPITALS])
        silos = [h for h in HOSPITALS for _ in range(len(pd.read_csv(folder / f"{h}.csv")))]
        for rounds in (
            1,
            args.rounds,
        ):  # the first call warms torch up (its one-time costs are not a round's)
            cpu_start = time.process_time()
            _, history = uldp.fit(
                model(),
                frame[FEATURES].to_numpy(np.float32),
                frame["label"].to_numpy(),
                user_ids=frame["patient"],
                silo_ids=silos,
                loss=nn.CrossEntropyLoss(),
                rounds=rounds,
                **settings,
            )
        app = uf.silo_client_app(load, model, nn.CrossEntropyLoss())
        measured: dict[str, dict[str, Any]] = {
            "in process": {
                "round_seconds": list(history.column("seconds")),
                "setup_seconds": None,
                "cpu_seconds": time.process_time() - cpu_start,
            }
        }
        variants: tuple[tuple[str, dict[str, Any]], ...] = (
            ("Flower", {"secure": False}),
            ("Flower + Protocol 1", {"secure": True, "protocol": protocol}),
        )
        for name, extra in variants:
            grid = uf.LocalGrid(
                app,
                [
                    {
                        "silo": h,
                        "data": str(folder / f"{h}.csv"),
                        "uldp-key-file": str(folder / "key"),
                        "uldp-insecure-test-keys": args.key_bits < 2048,
                        # a timing run: the plain round's server view (sigma / sqrt(|S|)) is allowed
                        "uldp-policy-epsilon": 1e6,
                    }
                    for h in HOSPITALS
                ],
            )
            strategy = uf.UldpStrategy(**settings, **extra)
            cpu_start = time.process_time()
            strategy.start(
                grid, ArrayRecord([uldp.flat_parameters(net).numpy()]), num_rounds=args.rounds
            )
            measured[name] = {
                "round_seconds": strategy.round_seconds,
                "setup_seconds": strategy.setup_seconds,
                "cpu_seconds": time.process_time() - cpu_start,
            }
    median = {name: statistics.median(m["round_seconds"]) for name, m in measured.items()}
    cpu = {name: m["cpu_seconds"] for name, m in measured.items()}
    pairs = (
        ("Flower", "in process"),
        ("Flower + Protocol 1", "Flower"),
        ("Flower + Protocol 1", "in process"),
    )
    ratios = {f"{a} / {b}": median[a] / median[b] for a, b in pairs}
    cpu_ratios = {f"{a} / {b}": cpu[a] / cpu[b] for a, b in pairs}
    document = {
        "parameters": int(uldp.flat_parameters(net).numel()),
        "silos": len(HOSPITALS),
        "users": int(frame["patient"].nunique()),
        "records": args.records,
        "key_bits": args.key_bits,
        "n_max": args.n_max,
        "rounds": args.rounds,
        "measured": measured,
        "median_round_seconds": median,
        "ratios": ratios,
        "cpu_seconds": cpu,
        "cpu_ratios": cpu_ratios,
    }
    if args.json:
        print(json.dumps(document))
        return
    print(
        f"{document['parameters']} parameters, {document['users']} patients in {len(HOSPITALS)} hospitals, "
        f"{args.key_bits}-bit keys, N_max = {args.n_max}, {args.rounds} rounds"
    )
    for name, seconds in median.items():
        setup = measured[name]["setup_seconds"]
        print(
            f"  {name:22s} median round {seconds:8.3f} s wall   whole run {cpu[name]:7.2f} s CPU"
            + ("" if setup is None else f"   set-up {setup:6.2f} s wall")
        )
    print("  ratios (per-round wall; whole-run CPU, set-up included):")
    for name, ratio in ratios.items():
        print(f"  {name:34s} {ratio:7.2f}x   {cpu_ratios[name]:7.2f}x")


if __name__ == "__main__":
    main()
