"""Per-user local training (ULDP-AVG's silo side): the plain per-user loop vs the vmap engine, side by side.

For the Creditcard MLP and the MNIST CNN, one silo-round (Q = 2 local epochs, batch 64, lr 0.01) with 100 users x 60
records and 1000 users x 6 records: the loop time, the fast times (the hand-written closed forms of
:mod:`uldp.training.mlp` and :mod:`uldp.training.cnn`, what the library runs; plain vmap over autograd, where a
conv2d becomes a grouped convolution in native kernels; for the CNN also vmap over the im2col ``UnfoldConv2d``
variant), the ratio of the best, an equality check (dropout off, same mini-batches) and the achieved GFLOP/s beside
this machine's measured float32 matmul peak. Times are the best of
``--repeats`` runs (the machine is shared). The last line with ``--json`` is
``{"mlp_1000_users": ratio, "cnn_1000_users": ratio, "equal": true}``.

Usage: ``python benchmarks/per_user_training.py [--quick] [--json]``
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch
from torch.utils.flop_counter import FlopCounterMode

from uldp.models import build_model, loss_function
from uldp.training.per_user import (
    flat_parameters,
    record_keys,
    train_users,
    train_users_loop,
)
from uldp.training.unfold import vmap_friendly

EPOCHS, BATCH, LR = 2, 64, 0.01
INPUT_SHAPE = {"creditcard": (30,), "mnist": (1, 28, 28)}
CLASSES = {"creditcard": 2, "mnist": 10}


def best_time(fn, repeats: int) -> tuple[float, object]:
    """Best wall time of ``repeats`` calls and the last result."""
    best, result = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def matmul_peak(repeats: int) -> float:
    """Measured float32 matmul GFLOP/s (1024 x 1024, best of ``repeats``)."""
    a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)
    seconds, _ = best_time(lambda: [a @ b for _ in range(10)], repeats)
    return 10 * 2 * 1024**3 / seconds / 1e9


def flops_per_record(model: torch.nn.Module, dataset: str) -> float:
    """FLOPs of one training step (forward + backward) per record, counted by torch's FlopCounterMode."""
    x = torch.randn((BATCH, *INPUT_SHAPE[dataset]))
    y = torch.randint(0, CLASSES[dataset], (BATCH,))
    with FlopCounterMode(display=False) as counter:
        loss_function(dataset)(model(x), y, None).backward()
    return counter.get_total_flops() / BATCH


def problem(dataset: str, n_users: int, per_user: int, seed: int):
    gen = torch.Generator().manual_seed(seed)
    n = n_users * per_user
    x = torch.randn((n, *INPUT_SHAPE[dataset]), generator=gen)
    y = torch.randint(0, CLASSES[dataset], (n,), generator=gen)
    owner = np.random.default_rng(seed).integers(
        0, n_users, n
    )  # ~per_user records each, some more, some fewer
    groups = [np.flatnonzero(owner == u) for u in np.unique(owner)]
    return x, y, groups, record_keys(n, EPOCHS, torch.Generator().manual_seed(seed + 1))


def measure(dataset: str, n_users: int, per_user: int, repeats: int, peak: float) -> dict:
    torch.manual_seed(0)
    model = build_model(dataset, seed=0)
    params = flat_parameters(model)
    x, y, groups, keys = problem(dataset, n_users, per_user, seed=n_users)
    kwargs = dict(
        loss_fn=loss_function(dataset), local_lr=LR, epochs=EPOCHS, batch_size=BATCH, keys=keys
    )
    loss_fn = kwargs.pop("loss_fn")
    # a loss the closed-form registry does not know sends the same model through vmap(grad(...)) instead
    autograd_loss = lambda outputs, targets, weight: loss_fn(outputs, targets, weight)  # noqa: E731
    variants = {"closed-form": (model, loss_fn), "vmap": (model, autograd_loss)}
    if dataset == "mnist":
        variants["vmap+im2col"] = (vmap_friendly(model), autograd_loss)
    model.train()
    loop_seconds, _ = best_time(
        lambda: train_users_loop(model, params, x, y, groups, loss_fn=loss_fn, **kwargs), repeats
    )
    fast = {}
    for name, (variant, loss) in variants.items():
        variant.train()
        fast[name], _ = best_time(
            lambda v=variant, f=loss: train_users(v, params, x, y, groups, loss_fn=f, **kwargs),
            repeats,
        )
    best_variant = min(fast, key=fast.__getitem__)
    # equality of the library's path (what the simulation runs): dropout off, identical mini-batches.
    # The im2col variant agrees exactly in float64 but accumulates more float32 error (shown, not required).
    model.eval()
    reference = train_users_loop(model, params, x, y, groups, loss_fn=loss_fn, **kwargs)
    differences = {}
    for name, (variant, loss) in variants.items():
        variant.eval()
        differences[name] = float(
            (train_users(variant, params, x, y, groups, loss_fn=loss, **kwargs) - reference)
            .abs()
            .max()
        )
    kwargs["loss_fn"] = loss_fn
    candidate = train_users(model, params, x, y, groups, **kwargs)
    equal = bool(torch.allclose(candidate, reference, rtol=1e-3, atol=1e-5))
    flops = flops_per_record(model, dataset) * x.shape[0] * EPOCHS
    row = {
        "dataset": dataset,
        "users": n_users,
        "records": int(x.shape[0]),
        "loop_s": loop_seconds,
        "fast_s": fast,
        "best": best_variant,
        "ratio": loop_seconds / fast[best_variant],
        "gflops": flops / fast[best_variant] / 1e9,
        "peak_gflops": peak,
        "equal": equal,
        "max_abs_diff": float((candidate - reference).abs().max()),
    }
    fast_text = ", ".join(f"{name} {seconds:.2f} s" for name, seconds in fast.items())
    print(
        f"{dataset:>10} {n_users:>5} users x ~{per_user:<3} records: loop {loop_seconds:.2f} s | fast {fast_text} | "
        f"ratio {row['ratio']:.1f}x | {row['gflops']:.1f} GFLOP/s of {peak:.0f} peak | equal {equal} "
        f"(max diff {row['max_abs_diff']:.1e}; per variant "
        + ", ".join(f"{name} {diff:.1e}" for name, diff in differences.items())
        + ")",
        flush=True,
    )
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1000-user cases only, one repeat")
    parser.add_argument(
        "--json", action="store_true", help="print the JSON summary as the last line"
    )
    parser.add_argument(
        "--repeats", type=int, default=None, help="timing repeats (default 3, 1 with --quick)"
    )
    args = parser.parse_args(argv)
    repeats = args.repeats or (1 if args.quick else 3)
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, Q={EPOCHS}, batch {BATCH}; best of {repeats}"
    )
    peak = matmul_peak(5)
    print(f"measured float32 matmul peak: {peak:.1f} GFLOP/s")
    cases = [(1000, 6)] if args.quick else [(100, 60), (1000, 6)]
    rows = [
        measure(dataset, users, per_user, repeats, peak)
        for dataset in ("creditcard", "mnist")
        for users, per_user in cases
    ]
    ratio = {(row["dataset"], row["users"]): row["ratio"] for row in rows}
    if args.json:
        print(
            json.dumps(
                {
                    "mlp_1000_users": round(ratio["creditcard", 1000], 2),
                    "cnn_1000_users": round(ratio["mnist", 1000], 2),
                    "equal": all(row["equal"] for row in rows),
                }
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
