"""uldp never configures the root logger, even where a dependency's import does (opacus calls logging.basicConfig)."""

from __future__ import annotations

import subprocess
import sys

SOLVE_SIGMA_AND_TRAIN = """
import logging, numpy as np, torch
from uldp.accounting import sigma_for_epsilon
sigma_for_epsilon("ULDP-AVG", epsilon=2.0, rounds=3, delta=1e-5, q=0.5)  # the sub-sampled Gaussian: opacus' RDP
from uldp.training.dpsgd import dpsgd_train
net = torch.nn.Linear(2, 1)
from uldp.training.per_user import flat_parameters
from uldp.models import bce_loss
dpsgd_train(net, flat_parameters(net), torch.zeros(4, 2), torch.zeros(4), loss_fn=bce_loss, local_lr=0.1, epochs=1,
            batch_size=2, clip=1.0, sigma=1.0, generator=torch.Generator().manual_seed(0), engine="opacus")
import opacus  # already imported: the handler it added on first import was removed
root = logging.getLogger()
print(len(root.handlers), root.level)
"""


def test_solving_sigma_and_dp_sgd_leave_the_root_logger_unconfigured():
    done = subprocess.run(
        [sys.executable, "-c", SOLVE_SIGMA_AND_TRAIN], capture_output=True, text=True, check=True
    )
    assert done.stdout.split() == ["0", "30"]  # no handler, WARNING: Python's defaults


def test_importing_opacus_directly_does_configure_it():
    """The premise: without uldp's guard, opacus' import adds a root handler (if opacus stops, this can go)."""
    done = subprocess.run(
        [sys.executable, "-c", "import logging, opacus; print(len(logging.getLogger().handlers))"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.split() == ["1"]
