"""uldp.common.extras: a command that needs an optional package that is missing says in one line which extra
installs it (it printed a 25-line traceback ending in "No module named 'gmpy2'"); a missing module that no extra
provides keeps its traceback."""

from __future__ import annotations

import subprocess
import sys

import pytest

#: Runs ``uldp ARGS`` with the named top-level modules unimportable, as in an install without their extra.
BLOCKED = """
import sys, importlib.abc
blocked = set(sys.argv[1].split(","))
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in blocked:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, Block())
from uldp.cli import main
sys.exit(main(sys.argv[2:]))
"""


@pytest.mark.parametrize(
    ("blocked", "command", "extra"),
    [
        (
            "gmpy2,phe",
            "run --dataset synthetic --method ULDP-AVG-w --users 4 --rounds 1 --seed 0 --secure",
            "secure",
        ),
        ("flwr", "deploy server --config {tmp}/run.json", "deploy"),
    ],
)
def test_a_missing_optional_package_is_one_line_naming_its_extra(tmp_path, blocked, command, extra):
    (tmp_path / "run.json").write_text(
        '{"dataset": "synthetic", "method": "ULDP-AVG-w", "n_users": 4, "n_silos": 2, "rounds": 1, "seed": 0}'
    )
    done = subprocess.run(
        [sys.executable, "-c", BLOCKED, blocked, *command.format(tmp=tmp_path).split()],
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert f"pip install 'uldp[{extra}]'" in lines[0] and "Traceback" not in done.stderr, lines


def test_a_module_no_extra_provides_keeps_its_traceback():
    from uldp.common.extras import missing_extra

    assert (
        missing_extra(ModuleNotFoundError("No module named 'uldp.nothing'", name="uldp.nothing"))
        is None
    )
