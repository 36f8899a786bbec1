"""A GPU trains what the CPU trains: ``fit(device="cuda")`` equals ``fit()`` within float tolerance for every method
family, and the per-user engine's MNIST step (closed form and vmap) equals the CPU's. Runs only where
``torch.cuda.is_available()``; the plumbing itself is tested on the CPU in tests/test_device.py.

The models have no dropout (or are in eval mode): dropout masks are the one draw a GPU makes from its own
generator, so with them the two devices train on different masks (equal in distribution only). The noise, the
user sample and the record order are the CPU's draws on both devices.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from torch import nn

import uldp
from uldp.models import build_model, cross_entropy_loss
from uldp.training.per_user import flat_parameters, record_keys, train_users

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

#: Float32 on the two devices differs in summation order (cuDNN, cuBLAS): a few ulps per step, grown over rounds.
RTOL, ATOL = 1e-4, 1e-5


def _fit(method: str, device: str) -> tuple[torch.Tensor, list]:
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(120, 6, generator=generator)
    y = (x[:, 0] - x[:, 2] > 0).long()
    torch.manual_seed(1)
    net = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model, history = uldp.fit(
            net,
            x,
            y,
            user_ids=np.arange(120) % 17,
            silo_ids=np.arange(120) % 3,
            loss=nn.CrossEntropyLoss(),
            method=method,
            rounds=3,
            seed=5,
            test=(x, y),
            device=device,
            sigma=None if method == "DEFAULT" else 1.0,
        )
    return torch.cat([p.detach().flatten().cpu() for p in model.parameters()]), history.column(
        "loss"
    )


@pytest.mark.parametrize(
    "method",
    ["DEFAULT", "ULDP-NAIVE", "ULDP-SGD", "ULDP-AVG", "ULDP-AVG-w", "ULDP-GROUP-2", "DP-SGD"],
)
def test_fit_on_a_gpu_equals_fit_on_the_cpu(method):
    cpu, cpu_loss = _fit(method, "cpu")
    gpu, gpu_loss = _fit(method, "cuda")
    torch.testing.assert_close(gpu, cpu, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(gpu_loss, cpu_loss, rtol=1e-4)


def _engine_deltas(device: str, precision: str) -> torch.Tensor:
    """Per-user local training of the MNIST CNN (eval mode: no dropout) by ``train_users`` on ``device``: 40 users of
    1-9 records, 2 epochs of batches of 4, the closed form in float32 and ``vmap(grad(...))`` under bfloat16
    autocast; the deltas ``[40, d]`` on the CPU."""
    model = build_model("mnist", seed=0).eval()
    generator = torch.Generator().manual_seed(3)
    x = torch.rand(200, 1, 28, 28, generator=generator)
    y = torch.randint(0, 10, (200,), generator=generator)
    sizes = 1 + np.arange(40) % 9
    groups = np.split(np.arange(int(sizes.sum())), np.cumsum(sizes)[:-1])
    keys = record_keys(200, 2, generator)
    target = torch.device(device)
    return train_users(
        model.to(target),
        flat_parameters(model).to(target),
        x.to(target),
        y.to(target),
        groups,
        loss_fn=cross_entropy_loss,
        local_lr=0.05,
        epochs=2,
        batch_size=4,
        keys=keys.to(target),
        precision=precision,
    ).cpu()


def test_the_mnist_engine_on_a_gpu_equals_the_cpu():
    """Float32 (the closed form): equal within float tolerance. ``train_users`` itself turns TF32 off: under torch's
    default (cuDNN may use TF32) the first H200 run differed by up to 6.5e-3 on 2.7% of the entries."""
    torch.testing.assert_close(
        _engine_deltas("cuda", "float32"), _engine_deltas("cpu", "float32"), rtol=RTOL, atol=ATOL
    )


def test_the_mnist_engine_in_bf16_on_a_gpu_is_as_accurate_as_on_the_cpu():
    """Bfloat16 autocast rounds differently on the two devices (other kernels, other ops kept in float32), so the
    entries are not compared: each device's bf16 deltas are compared with the float32 deltas, per user, in relative
    norm: the GPU's error, its mean over users and its largest, stays within twice the CPU's (here, on the CPU, a
    mean of 4% and a largest of 14%, after at most 6 SGD steps in bfloat16's 8 bits)."""
    exact = _engine_deltas("cpu", "float32")

    def relative_error(deltas: torch.Tensor) -> torch.Tensor:
        return (deltas - exact).norm(dim=1) / exact.norm(dim=1)

    cpu = relative_error(_engine_deltas("cpu", "bf16"))
    gpu = relative_error(_engine_deltas("cuda", "bf16"))
    for statistic in (torch.mean, torch.max):
        assert statistic(gpu) <= 2 * statistic(cpu), (
            f"bf16 relative error, {statistic.__name__} over users: {statistic(gpu):.4f} on the GPU, "
            f"{statistic(cpu):.4f} on the CPU"
        )
