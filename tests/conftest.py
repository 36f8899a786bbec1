"""Shared test settings: hypothesis without deadlines (CI machine is small and shared), and one intra-op thread.

Torch's intra-op threads cost more than they save on the suite's tiny tensors, and on a small shared machine they
oversubscribe the cores: measured on the 2-core reference machine under load, tests/test_per_user.py took 311 s with
torch's default threads and 104 s with one (the per-user loop oracle alone 78.6 s against 2.5 s). Torch is already
imported here (pyproject's warning filters name uldp.fitting's warnings), so the thread count is set on it, and in
the environment for the processes a test starts (grid workers, Flower nodes, the deploy CLI), which then train with
the same single thread. A value the caller set is kept.
"""

import os

import torch
from hypothesis import settings

os.environ.setdefault("OMP_NUM_THREADS", "1")
torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))

settings.register_profile("uldp", deadline=None, max_examples=30, derandomize=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "uldp"))
