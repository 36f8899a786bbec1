"""Build uldp's wheel, install it into a fresh virtual environment with the exact pins, and use it there.

What a user's ``pip install uldp`` meets, checked by ``make test`` (the Makefile's ``wheel`` target): the wheel's
metadata (compatible ranges) must resolve against the pins of ``constraints.txt`` (torch 2.13.0 on the CPU wheel),
the installed package (not this checkout: the check runs outside it) must import without the optional extras, and
``uldp.fit`` must train, while ``uldp.flower``'s names without the ``deploy`` extra say what to install.

Usage: python tools/check_wheel.py [--keep DIR] [--extras deploy,secure]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: Run inside the fresh environment, from a directory outside the checkout.
SMOKE = """
import sys, uldp, torch
from torch import nn
assert "site-packages" in uldp.__file__, uldp.__file__
x = torch.tensor([[0.0, 1.0], [1.0, 0.0], [1.0, 1.0], [0.0, 0.0]])
model, history = uldp.fit(nn.Linear(2, 2), x, [0, 1, 1, 0], user_ids=["a", "b", "a", "c"], silo_ids=[1, 2, 2, 1],
                          loss=nn.CrossEntropyLoss(), epsilon=8.0, rounds=1)
print("uldp", uldp.__version__, "torch", torch.__version__, "epsilon", round(history.epsilon, 3))
if "flwr" not in sys.argv[1:]:
    import uldp.flower  # its names load lazily: the package imports, a name of it needs flwr

    try:
        uldp.flower.UldpStrategy
    except ModuleNotFoundError as error:
        assert "uldp[deploy]" in str(error), error
        print("without flwr:", error)
    else:
        raise AssertionError("uldp.flower.UldpStrategy loaded without the deploy extra")
"""


def run(*command: str | Path, cwd: Path | None = None) -> None:
    """Run a command, its output shown, failing on a non-zero status."""
    print("+", " ".join(map(str, command)), flush=True)
    subprocess.run([str(part) for part in command], check=True, cwd=cwd)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--keep", type=Path, help="build in this directory and keep it (default: a temporary one)"
    )
    parser.add_argument(
        "--extras", default="", help="extras to install with the wheel, e.g. deploy,secure"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="uldp-wheel-") as temporary:
        work = args.keep or Path(temporary)
        work.mkdir(parents=True, exist_ok=True)
        # no build isolation: the build needs only setuptools, already here, and no index
        run(
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            work / "dist",
            ROOT,
        )
        (wheel,) = (work / "dist").glob("uldp-*.whl")
        venv.create(work / "venv", with_pip=True)
        python = work / "venv" / "bin" / "python"
        target = f"{wheel}[{args.extras}]" if args.extras else str(wheel)
        # no bytecode: the venv runs one script, and pip compiles torch's files on one core for longer than that
        # script compiles what it imports
        run(
            python,
            *("-m", "pip", "install", "--quiet", "--no-compile", target),
            *("-c", ROOT / "constraints.txt"),
        )
        run(python, "-c", SMOKE, *(["flwr"] if "deploy" in args.extras else []), cwd=work)
    print("the wheel installs with the pins and trains", flush=True)


if __name__ == "__main__":
    main()
