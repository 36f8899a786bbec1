"""The comb of Protocol 1, step 2(b) (the silo's encrypted weighted sum) in C vs in gmpy2, side by side in one run.

Two measurements on a 6144-bit modulus (n^2 for 3072-bit keys), alternating the two implementations in short
chunks so that a shared, noisy machine slows both alike; each prints the minimum and the median chunk time and
their ratios:

1. one modular multiplication: gmpy2's ``a * b % m`` in a Python loop over accumulators vs the C extension's
   Montgomery multiplication (``_comb.multiply_in_base`` with every digit 1: one product per output);
2. the whole comb, ``fast._comb_partial_gmpy2`` vs ``fast._comb_partial_c``, on ``--bases`` bases and
   ``--outputs`` outputs (the MNIST CNN has 21840) with ~33-bit signed exponents, checked equal.

Usage: python benchmarks/comb.py [--outputs D] [--bases U] [--rounds R]
"""

from __future__ import annotations

import argparse
import os
import time

import gmpy2
import numpy as np

from uldp.secure import fast


def chunk_times(functions: dict, rounds: int) -> dict[str, list[float]]:
    """Seconds of each call, the functions taking turns ``rounds`` times."""
    times: dict[str, list[float]] = {name: [] for name in functions}
    for _ in range(rounds):
        for name, function in functions.items():
            start = time.perf_counter()
            function()
            times[name].append(time.perf_counter() - start)
    return times


def report(title: str, times: dict[str, list[float]], per: int, unit: str) -> None:
    (slow_name, slow), (fast_name, quick) = times.items()
    print(title)
    for name, values in times.items():
        best, median = min(values) / per * 1e6, np.median(values) / per * 1e6
        print(f"  {name:6s}: min {best:9.2f} us, median {median:9.2f} us {unit}")
    ratio_best, ratio_median = min(slow) / min(quick), np.median(slow) / np.median(quick)
    print(f"  {slow_name} / {fast_name}: {ratio_best:.2f}x (min), {ratio_median:.2f}x (median)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--outputs", type=int, default=21840, help="outputs of the comb (default 21840)"
    )
    parser.add_argument("--bases", type=int, default=4, help="bases of the comb (default 4)")
    parser.add_argument(
        "--rounds", type=int, default=3, help="turns of each implementation (default 3)"
    )
    args = parser.parse_args()
    comb = fast._comb
    if comb is None or not fast.c_comb_available():
        print("uldp.secure._comb is not built (pip install -e . builds it); nothing to compare")
        return 1
    print(f"load average at start: {os.getloadavg()} on {os.cpu_count()} CPUs")
    rng = np.random.default_rng(5)
    n = int.from_bytes(rng.bytes(384), "little") | (1 << 3071) | 1
    modulus = gmpy2.mpz(n) ** 2
    count, shift = 96, 6144
    units = (int.from_bytes(rng.bytes(768), "little") % modulus for _ in range(4 * args.bases + 4))
    bases = [b for b in units if gmpy2.gcd(b, modulus) == 1][: args.bases + 1]

    chunk = 500
    accumulators = [
        gmpy2.mpz(int.from_bytes(rng.bytes(768), "little")) % modulus for _ in range(chunk)
    ]
    factor = bases[-1]
    montgomery = np.stack([fast._limbs((a << shift) % modulus, count) for a in accumulators])
    arguments = (
        np.ones((1, chunk), np.int32),
        fast._limbs((factor << shift) % modulus, count),
        fast._limbs((factor << shift) % modulus, count),
        fast._limbs(modulus, count),
        fast._limbs(gmpy2.invert(modulus, gmpy2.mpz(1) << shift), count),
        11,
    )

    def gmpy2_products():
        for j in range(chunk):
            accumulators[j] = accumulators[j] * factor % modulus

    times = chunk_times(
        {"gmpy2": gmpy2_products, "C": lambda: comb.multiply_in_base(montgomery, *arguments)},
        20 * args.rounds,
    )
    report(
        f"one modular multiplication mod a 6144-bit n^2 ({chunk} per chunk):",
        times,
        chunk,
        "per multiplication",
    )

    exponents = np.clip(
        np.round(rng.normal(scale=2.0**30, size=(args.bases, args.outputs))), -(2**33), 2**33
    )
    exponents = exponents.astype(np.int64)
    _, window = fast.choose_plan(args.bases, args.outputs, 34, strategy="comb")
    results = {}

    def run(name, partial):
        results[name] = partial(bases[: args.bases], exponents, modulus, window)

    times = chunk_times(
        {
            "gmpy2": lambda: run("gmpy2", fast._comb_partial_gmpy2),
            "C": lambda: run("C", fast._comb_partial_c),
        },
        args.rounds,
    )
    report(
        f"comb, {args.bases} bases x {args.outputs} outputs, w={window}:",
        times,
        args.bases,
        "per base",
    )
    print(f"  equal: {results['gmpy2'] == results['C']}; load average at end: {os.getloadavg()}")
    return 0 if results["gmpy2"] == results["C"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
