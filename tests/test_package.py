"""The package's lazy exports (uldp/__init__.py): what the docstring lists is reachable after ``import uldp``."""

from __future__ import annotations

import re
import subprocess
import sys

import uldp


def test_every_subpackage_the_docstring_lists_is_reachable_after_import_uldp_alone():
    listed = sorted(set(re.findall(r":mod:`uldp\.(\w+)`", uldp.__doc__ or "")))
    code = ("import sys, uldp\n"
            f"for name in {listed!r}: assert getattr(uldp, name).__name__ == 'uldp.' + name, name\n"
            "print('ok')")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip() == "ok"


def test_the_random_streams_are_not_a_top_level_name():
    assert "seed_stream" not in uldp.__all__ and not hasattr(uldp, "seed_stream")
