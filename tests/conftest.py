"""Shared test settings: hypothesis without deadlines (CI machine is small and shared)."""

import os

from hypothesis import settings

settings.register_profile("uldp", deadline=None, max_examples=30, derandomize=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "uldp"))
