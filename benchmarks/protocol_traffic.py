"""Protocol 1's traffic per round at MNIST size (issue 43 item 5): the bytes one silo sends and receives in each
stage of a round, per backend, against the model's float32 bytes (21,840 parameters, 100 users, 5 silos, 3072-bit
Paillier keys, N_max = 2000, P = 1e-10; the goal: at most 10 times the model sent, at most 10 MB received).

Each stage's payloads are the real messages of :mod:`uldp.secure.messages` (their wire format) built as
:class:`uldp.secure.driver.ServerDriver` sends them: at ``p1-shares`` the encrypted weights; with a backend that
checks the server's weights (:mod:`uldp.secure.weight_check`) the same weights and the answer to the shares again at
``p1-check``; at ``p1-update`` the weights, the answer and the check's proof. The Paillier ciphertexts are random
elements below n^2 of a 3072-bit n (their bytes are those of real ones: a ciphertext is uniform on Z*_(n^2)), the
silo-to-silo shares are sealed with ChaCha20-Poly1305 as the silos seal them, and the packed layout (K parameters
per ciphertext) is the session's own (:attr:`uldp.secure.config.ProtocolConfig.layout`). The lattice backend's BFV
weights and update are made by its engine (:mod:`uldp.secure.lattice`, :mod:`uldp.secure.lattice_silo`) at the
MNIST shape: SEAL's serialisation sizes, measured.

The lattice backend is measured in two rounds: one whose sample is that of the BFV weights the silo holds
(``lattice (held)``: the server sends the weights once per sample, so every round with q = 1 or with the silos'
hidden sample after the first) and one with a new sample (``lattice (new_sample)``: a server-drawn sample at q < 1).
Its step 1(a) keys (BFV public keys and the Galois keys that expand the packed weights, :mod:`uldp.secure.
lattice_expand`), received once per session, are given apart (``setup_received_bytes``), not in the round's bytes.
``--before REV`` runs this script's own version at REV on the library at REV in the same run, for before/after.

Usage: python benchmarks/protocol_traffic.py [--json] [--write PATH] [--before REV]
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import subprocess
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

import numpy as np

from uldp.common.atomic import write_json_atomic
from uldp.common.provenance import now, provenance
from uldp.secure import ProtocolConfig, ProtocolParameters, keys
from uldp.secure.driver import STAGE_CHECK, STAGE_SHARES, STAGE_UPDATE
from uldp.secure.messages import (
    EncryptedWeightsMessage,
    LatticeHeldMessage,
    LatticeKeysMessage,
    LatticeUpdateMessage,
    LatticeWeightsMessage,
    MaskedUpdateMessage,
    Message,
    RescaledWeightsMessage,
    RescaleRequestMessage,
    SealedMessage,
    WeightCheckMessage,
    WeightCheckProofMessage,
    pack_ints,
)
from uldp.secure.roles import SEALED_WEIGHT_POWERS

MNIST = {"parameters": 21840, "users": 100, "silos": 5}
KEY_BITS, N_MAX, CLIP, SIGMA = 3072, 2000, 0.1, 5.0
FLOAT32_BYTES = 4
GOAL_SENT_RATIO, GOAL_RECEIVED_BYTES = 10, 10_000_000


def say(*parts: object) -> None:
    """Progress and results on stderr (stdout holds the JSON document under --json)."""
    print(*parts, file=sys.stderr, flush=True)


def size(messages: list[Message]) -> int:
    return sum(len(m.to_bytes()) for m in messages)


def ciphertexts(count: int) -> tuple[int, ...]:
    """``count`` stand-ins for Paillier ciphertexts of a 3072-bit key: uniform below n^2 (~2^6144)."""
    return tuple(secrets.randbelow(1 << (2 * KEY_BITS)) for _ in range(count))


def sealed(sender: int, recipient: int, payload: bytes) -> SealedMessage:
    header = SealedMessage(sender, recipient, 1, SEALED_WEIGHT_POWERS, b"", b"")
    nonce, body = keys.seal(os.urandom(32), payload, associated_data=header.associated_data())
    return SealedMessage(sender, recipient, 1, SEALED_WEIGHT_POWERS, nonce, body)


def paillier_family(config: ProtocolConfig) -> dict[str, dict[str, int]]:
    """Silo 0's bytes per stage (sent, received) for a Paillier backend, as the driver sends them."""
    users, silos, d = config.n_users, config.n_silos, MNIST["parameters"]
    backend = config.backend(config)
    mine = len(range(0, users, silos))
    weights = EncryptedWeightsMessage(1, ciphertexts(users))
    if (
        backend.name == "paillier"
    ):  # the paper's shares: sealed weight powers, to and from every peer
        shares_out: list[Message] = [
            sealed(0, p, pack_ints(ciphertexts(mine))) for p in range(1, silos)
        ]
        answer: list[Message] = [
            sealed(p, 0, pack_ints(ciphertexts(mine))) for p in range(1, silos)
        ]
    else:  # the rescale: one request out, the rescaled weights back
        shares_out = [RescaleRequestMessage(1, 0, ciphertexts(mine))]
        answer = [RescaledWeightsMessage(1, ciphertexts(users))]
    update = MaskedUpdateMessage(1, 0, d, ciphertexts(backend.ciphertexts_for(d)))
    stages = {STAGE_SHARES: {"sent": size(shares_out), "received": size([weights])}}
    proof: list[Message] = []
    if backend.checks_weights:
        check = WeightCheckMessage(1, 0, ciphertexts(1)[0])
        proof = [
            WeightCheckProofMessage(
                1,
                bytes(users),
                ciphertexts(silos),
                secrets.randbelow(1 << KEY_BITS),
                secrets.randbelow(1 << KEY_BITS),
            )
        ]
        stages[STAGE_CHECK] = {"sent": size([check]), "received": size([weights, *answer])}
    stages[STAGE_UPDATE] = {"sent": size([update]), "received": size([weights, *answer, *proof])}
    return stages


def lattice(config: ProtocolConfig) -> dict[str, dict[str, dict[str, int]]]:
    """Silo 0's bytes per stage with the lattice backend, its BFV messages made by the engine: in a round whose sample
    is the one of the weights the silo holds (the server sends them once per sample: every round with q = 1 or the
    silos' hidden sample) and in a round with a new sample (the server's own at q < 1)."""
    from uldp.secure import lattice as engine, lattice_silo

    users, silos, d = config.n_users, config.n_silos, MNIST["parameters"]
    layout = config.layout
    say(
        "lattice: BFV keys, the weights of 100 users and one silo's update at 21,840 parameters ..."
    )
    server = engine.LatticeServer(layout)
    rng = np.random.default_rng(0)
    counts = rng.integers(1, 12, size=users)
    silo = lattice_silo.LatticeSilo(
        0,
        counts,
        layout,
        public_keys=server.public_keys(),
        galois_keys=server.galois_keys(),
        mask_keys={p: os.urandom(32) for p in range(1, silos)},
    )
    weights_bfv = server.encrypt_weights([int(c) for c in rng.integers(0, 2**40, size=users)])
    deltas = rng.uniform(-CLIP, CLIP, size=(users, d))
    update = silo.masked_update(1, weights_bfv, [0] * users, deltas, np.zeros(d))
    mine = len(range(0, users, silos))
    weights = EncryptedWeightsMessage(1, ciphertexts(users))
    fresh = LatticeWeightsMessage(2, 2, tuple(c for prime in weights_bfv for c in prime))
    sent = LatticeUpdateMessage(2, 0, d, tuple(c for prime in update for c in prime))
    shares = [RescaleRequestMessage(2, 0, ciphertexts(mine)), LatticeHeldMessage(2, 0, 1)]
    setup = LatticeKeysMessage(public_keys=server.public_keys(), galois_keys=server.galois_keys())
    return {
        case: {
            STAGE_SHARES: {"sent": size(shares), "received": size([weights])},
            STAGE_UPDATE: {"sent": size([sent]), "received": size([weights, answer])},
            "setup": {"sent": 0, "received": size([setup])},
        }
        for case, answer in (
            ("held", replace(fresh, weights_round=1, ciphertexts=())),
            ("new_sample", fresh),
        )
    }


def measure() -> dict:
    """Silo 0's bytes per round, per backend (the lattice in its two cases), against the model's float32 bytes."""
    model = MNIST["parameters"] * FLOAT32_BYTES
    results: dict = {
        **MNIST,
        "key_bits": KEY_BITS,
        "model_float32_bytes": model,
        "goal": {"sent_ratio": GOAL_SENT_RATIO, "received_bytes": GOAL_RECEIVED_BYTES},
    }
    for backend in ("paillier", "packed-paillier", "lattice"):
        parameters = ProtocolParameters(key_bits=KEY_BITS, n_max=N_MAX, backend=backend)
        config = ProtocolConfig.for_training(
            MNIST["silos"], MNIST["users"], clip=CLIP, sigma=SIGMA, parameters=parameters
        )
        cases = (
            {f"lattice ({case})": stages for case, stages in lattice(config).items()}
            if backend == "lattice"
            else {backend: paillier_family(config)}
        )
        for name, stages in cases.items():
            setup = stages.pop("setup", None)
            sent = sum(s["sent"] for s in stages.values())
            received = sum(s["received"] for s in stages.values())
            results[name] = {
                **({"setup_received_bytes": setup["received"]} if setup else {}),
                "stages": stages,
                "sent_bytes": sent,
                "received_bytes": received,
                "sent_ratio_to_float32": sent / model,
                "received_ratio_to_float32": received / model,
                "meets_goal": sent <= GOAL_SENT_RATIO * model and received <= GOAL_RECEIVED_BYTES,
            }
    return results


def before(revision: str) -> dict:
    """The same measurement by this script's version at ``revision`` on the library at ``revision`` (``git
    archive`` into a temporary directory, run there with that tree first on the path)."""
    root = Path(__file__).resolve().parent.parent
    with tempfile.TemporaryDirectory() as tree:
        archive = subprocess.run(
            ["git", "-C", str(root), "archive", revision, "uldp", "benchmarks/protocol_traffic.py"],
            check=True,
            capture_output=True,
        ).stdout
        subprocess.run(["tar", "-x", "-C", tree], input=archive, check=True)
        run = subprocess.run(
            [sys.executable, "benchmarks/protocol_traffic.py", "--json"],
            cwd=tree,
            env={**os.environ, "PYTHONPATH": tree},
            check=True,
            capture_output=True,
            text=True,
        )
    commit = subprocess.run(
        ["git", "-C", str(root), "rev-parse", revision], check=True, capture_output=True, text=True
    ).stdout.strip()
    return {"git_commit": commit, "results": json.loads(run.stdout)["results"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="one JSON document on stdout")
    parser.add_argument("--write", type=Path, help="also write the document to this path")
    parser.add_argument(
        "--before",
        metavar="REV",
        help="also measure the library at this git revision, in the same run",
    )
    args = parser.parse_args()
    started = now()
    document: dict = {
        "provenance": {
            **provenance(
                "python benchmarks/protocol_traffic.py"
                + (f" --before {args.before}" if args.before else "")
            ),
            "date": started,
        },
        "results": measure(),
    }
    if args.before:
        say(f"before: the same measurement at {args.before} ...")
        document["before"] = before(args.before)
    for name, after in document["results"].items():
        if not isinstance(after, dict) or "sent_bytes" not in after:
            continue
        line = (
            f"{name}: silo sends {after['sent_bytes'] / 1e6:.3f} MB "
            f"({after['sent_ratio_to_float32']:.1f} x float32), receives "
            f"{after['received_bytes'] / 1e6:.3f} MB; goal met: {after['meets_goal']}"
        )
        previous = document.get("before", {}).get("results", {})
        old = previous.get(name) or previous.get(name.split(" (")[0])
        if old:
            line += (
                f" (before: sends {old['sent_bytes'] / 1e6:.3f} MB, receives "
                f"{old['received_bytes'] / 1e6:.3f} MB; sent x{after['sent_bytes'] / old['sent_bytes']:.3f}, "
                f"received x{after['received_bytes'] / old['received_bytes']:.4f})"
            )
        say(line)
    if args.write:
        write_json_atomic(args.write, document)
    if args.json:
        print(json.dumps(document))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
