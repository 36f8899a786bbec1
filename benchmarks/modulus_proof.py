"""What the modulus proof adds to Protocol 1's set-up (issue 30 item 9): seconds and bytes at a key size.

Per silo, once (kept across sessions): its ring-Pedersen parameters and their proof (CGGMP20 Figure 17). Per silo and
session: the server checks that proof, proves its modulus (Figures 16 and 28), and the silo verifies. Bytes are the
two messages' wire sizes. The baseline is the set-up's own key generation (the Blum-prime Paillier key) at the same
size, so the printed ratios say what the proofs cost against what the set-up already paid.

Usage: ``PYTHONPATH=. python benchmarks/modulus_proof.py [--key-bits 3072] [--repeats 3] [--json]``
(``python benchmarks/save.py modulus_proof`` stores the result with its provenance).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import asdict

import numpy as np

from uldp.secure import keys, modulus_proof, protocol
from uldp.secure.config import ProtocolConfig, ProtocolParameters
from uldp.secure.messages import PublicKeyMessage


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--key-bits", type=int, default=3072, help="Paillier key size (default 3072)"
    )
    parser.add_argument(
        "--repeats", type=int, default=3, help="sessions to time (default 3; the median is kept)"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    args = parser.parse_args()
    parameters = ProtocolParameters(
        key_bits=args.key_bits,
        n_max=min(2000, args.key_bits // 4),
        insecure_test_key=args.key_bits < keys.MIN_KEY_BITS,
    )
    config = ProtocolConfig(n_silos=2, n_users=4, clip=1.0, sigma=1.0, parameters=parameters)
    sizes = modulus_proof.proof_parameters(args.key_bits)
    print(f"{args.key_bits}-bit keys, proof sizes {asdict(sizes)}", file=sys.stderr)
    start = time.perf_counter()
    verifier = modulus_proof.ring_pedersen(sizes.pedersen_bits, rounds=sizes.blum_challenges)
    pedersen_seconds = time.perf_counter() - start
    print(
        f"silo, once: ring-Pedersen parameters and proof {pedersen_seconds:.1f} s", file=sys.stderr
    )
    rows = []
    for repeat in range(args.repeats):
        start = time.perf_counter()
        server = protocol.Server(config)
        keygen = time.perf_counter() - start
        silo = protocol.Silo(0, np.ones(4, dtype=np.int64), config, verifier=verifier)
        _, request = silo.receive_public_key(server.public_key_message())
        start = time.perf_counter()
        proof = server.prove_modulus(request)  # includes checking the silo's Figure 17 proof
        prove = time.perf_counter() - start
        silo.accept_modulus(proof)
        verify = time.perf_counter() - start - prove
        rows.append(
            {
                "paillier_keygen_s": keygen,
                "server_prove_s": prove,
                "silo_verify_s": verify,
                "proof_bytes": len(proof.to_bytes()),
                "ring_pedersen_bytes": len(request.to_bytes()),
                "public_key_bytes": len(PublicKeyMessage(server.public_key.n).to_bytes()),
            }
        )
        print(
            f"session {repeat + 1}: key {keygen:.2f} s, prove {prove:.2f} s, verify {verify:.2f} s, "
            f"proof {rows[-1]['proof_bytes']} B",
            file=sys.stderr,
        )
    median = {name: statistics.median(row[name] for row in rows) for name in rows[0]}
    result = {
        "key_bits": args.key_bits,
        "proof_parameters": asdict(sizes),
        "repeats": args.repeats,
        "silo_ring_pedersen_once_s": pedersen_seconds,
        "median": median,
        "sessions": rows,
        "prove_over_keygen": median["server_prove_s"] / median["paillier_keygen_s"],
        "verify_over_keygen": median["silo_verify_s"] / median["paillier_keygen_s"],
        "smallest_factor_bits": modulus_proof.smallest_factor_bits(
            2 ** (args.key_bits - 1) + 1, sizes
        ),
    }
    print(
        f"median per silo and session: prove {median['server_prove_s']:.2f} s "
        f"({result['prove_over_keygen']:.2f}x the key generation), verify {median['silo_verify_s']:.2f} s "
        f"({result['verify_over_keygen']:.2f}x), {median['proof_bytes'] + median['ring_pedersen_bytes']:.0f} "
        f"bytes on the wire",
        file=sys.stderr,
    )
    if args.json:
        print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
