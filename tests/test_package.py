"""The package's lazy exports (uldp/__init__.py): what the docstring lists is reachable after ``import uldp``."""

from __future__ import annotations

import re
import subprocess
import sys

import uldp


def test_every_subpackage_the_docstring_lists_is_reachable_after_import_uldp_alone():
    listed = sorted(set(re.findall(r":mod:`uldp\.(\w+)`", uldp.__doc__ or "")))
    code = (
        "import sys, uldp\n"
        f"for name in {listed!r}: assert getattr(uldp, name).__name__ == 'uldp.' + name, name\n"
        "print('ok')"
    )
    assert (
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout.strip()
        == "ok"
    )


def test_the_random_streams_are_not_a_top_level_name():
    assert "seed_stream" not in uldp.__all__ and not hasattr(uldp, "seed_stream")


def test_a_wrong_call_to_a_lazily_exported_name_fails_type_checking(tmp_path):
    """The TYPE_CHECKING re-exports of uldp and uldp.methods give mypy the real signatures, not Any (only uldp's
    own modules are followed, so the check takes seconds)."""
    from mypy import api

    snippet = tmp_path / "snippet.py"
    snippet.write_text(
        "import uldp\n"
        "from uldp.methods import Hyperparameters, make_method\n"
        "make_method('ULDP-AVG', Hyperparameters(1.0, 0.1, 1, 4, 0.1, 5.0))\n"
        "make_method(3, Hyperparameters(1.0, 0.1, 1, 4, 0.1, 5.0))\n"
        "uldp.accounting.epsilon_naive(sigma='5', rounds=1, delta=1e-5)\n"
    )
    config = tmp_path / "mypy.ini"
    config.write_text("[mypy]\nfollow_imports = skip\n[mypy-uldp.*]\nfollow_imports = normal\n")
    report, _, _ = api.run(
        ["--config-file", str(config), "--cache-dir", str(tmp_path / "cache"), str(snippet)]
    )
    errors = sorted(
        line.split(":")[1] + ":" + line.split("error:")[1].split("[")[0].strip()
        for line in report.splitlines()
        if line.startswith(str(snippet)) and " error: " in line
    )
    assert errors == [
        '4:Argument 1 to "make_method" has incompatible type "int"; expected "str"',
        '5:Argument "sigma" to "epsilon_naive" has incompatible type "str"; expected "float"',
    ]
