"""A Flower federation whose silos train on a GPU (each silo's own ``uldp-device="cuda"``) ends at the model of the
same federation trained on the CPU, within float tolerance, plain and through the masked sum. Runs only where
``torch.cuda.is_available()``; the node option itself is tested on the CPU in tests/test_device.py.

The oracle is tests/test_flower.py's: ``uldp.fit`` on the CPU with the user numbers the run's union gave. The silos'
noise and record order come from their own test seed, drawn on the CPU on both devices, and the hospitals' model
has no dropout, so the two train on the same draws.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from flower_hospitals import (  # noqa: F401  (hospital_files: a fixture)
    GROUP_LAX,
    INSECURE_SEED_5,
    NO_DP,
    flower_run,
    hospital_files,
    in_process,
    model,
    net_params,
    union_numbers,
)
from test_gpu import ATOL, RTOL

from uldp.flower.client import DEVICE_KEY
from uldp.method_names import parse_method

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@pytest.mark.parametrize(
    "method, secure",
    [
        ("ULDP-AVG-w", False),
        ("ULDP-SGD-w", False),
        ("ULDP-NAIVE", False),
        ("ULDP-GROUP-2", False),
        ("DEFAULT", False),
        ("ULDP-GROUP-2", True),
    ],
)
def test_a_flower_federation_on_gpus_ends_at_the_in_process_model_on_the_cpu(
    hospital_files,  # noqa: F811  (the fixture imported above)
    method,
    secure,
):
    net, spec = model(), parse_method(method)
    settings = dict(method=method, local_epochs=2, batch_size=8, seed=5, rounds=2)
    settings.update({"q": 0.8} if spec.per_user else {})
    settings.update({"sigma": 1.0} if spec.private else {})
    own = NO_DP if not spec.private else GROUP_LAX if spec.capabilities.group_privacy else {}
    torch.cuda.reset_peak_memory_stats()
    gpu, strategy, grid = flower_run(
        hospital_files,
        net,
        {**INSECURE_SEED_5, **own, DEVICE_KEY: "cuda"},
        secure=secure,
        **settings,
    )
    assert torch.cuda.max_memory_allocated() > 0  # the silos' records and models were on the GPU
    # the oracle of tests/test_flower.py: uldp.fit on the CPU with the user numbers this run's union gave
    trained, _ = in_process(hospital_files, net, union_numbers(hospital_files, grid), **settings)
    np.testing.assert_allclose(gpu, net_params(trained), rtol=RTOL, atol=ATOL)
    assert not np.array_equal(gpu, net_params(net)) and strategy.secure == secure
