"""`uldp --help` and `uldp epsilon` import neither torch nor scipy (their start-up time is measured by
benchmarks/cli_startup.py, not here); checked in fresh interpreters through sys.modules."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

PROBE = """
import contextlib, io, json, sys
import uldp.cli
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    try:
        status = uldp.cli.main({argv!r})
    except SystemExit as exit:
        status = exit.code
print(json.dumps({{"status": status, "heavy": sorted(m for m in ("torch", "scipy", "flwr", "pandas")
                                                   if m in sys.modules)}}))
"""


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["epsilon", "--help"],
        [
            "epsilon",
            "--method",
            "ULDP-AVG-w",
            "--sigma",
            "5",
            "--rounds",
            "100",
            "--delta",
            "1e-5",
            "--json",
        ],
        ["epsilon", "--method", "ULDP-NAIVE", "--sigma", "5", "--rounds", "10", "--delta", "1e-5"],
    ],
)
def test_help_and_epsilon_do_not_import_torch(argv):
    probe = subprocess.run(
        [sys.executable, "-c", PROBE.format(argv=argv)], capture_output=True, text=True, check=True
    )
    result = json.loads(probe.stdout.strip().splitlines()[-1])
    assert result["status"] == 0
    assert result["heavy"] == []


def test_importing_uldp_and_its_command_modules_imports_no_torch():
    code = (
        "import sys, importlib, uldp, uldp.cli\n"
        "for name in uldp.cli.COMMAND_MODULES: importlib.import_module(name)\n"
        "print('torch' in sys.modules)"
    )
    assert (
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout.strip()
        == "False"
    )
