"""Helpers shared by the tests of uldp.paper.experiments (tests/test_experiments_*.py).

The dataset folder and the mark that skips a test without it, and the payload of a stored result for a run.
"""

from __future__ import annotations

import os

import pytest

from uldp.paper import experiments

DATA = experiments.REPO_ROOT.parent / "shared" / "data"
needs_data = pytest.mark.skipif(
    not (DATA / "tcga_brca").is_dir() and not os.environ.get("ULDP_DATA_DIR"),
    reason="no dataset files (set ULDP_DATA_DIR)",
)


def _stored_payload(spec) -> dict:
    return {
        "schema": experiments.SCHEMA_VERSION,
        "key": spec.key,
        "grid": spec.grid,
        "panel": spec.panel,
        "series": spec.series,
        "seed": spec.seed,
        "params": spec.kwargs,
        "config": {},
        "result": {"test_loss": [1.0]},
        "provenance": {"date": "2026-01-01T00:00", "command": "c", "wall_seconds": 1.5},
    }
