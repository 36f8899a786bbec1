"""The ``uldp`` command line: one sub-command per capability, each registered by its own module.

Each module named in :data:`COMMAND_MODULES` exposes ``register(subparsers)``, which adds its sub-command
and sets ``handler`` (a function taking the parsed arguments and returning an exit status). Heavy imports
happen inside the handlers, so ``uldp --help`` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from typing import Any

COMMAND_MODULES: tuple[str, ...] = (
    "uldp.accounting.cli",
    "uldp.data.cli",
    "uldp.experiments_cli",
    "uldp.deploy.cli",
    "uldp.methods.cli",
)


def print_json(payload: Any) -> None:
    """Print ``payload`` as one line of JSON (the last line of output, for scripts)."""
    print(json.dumps(payload, sort_keys=False))


def build_parser() -> argparse.ArgumentParser:
    """Return the ``uldp`` argument parser with every registered sub-command."""
    parser = argparse.ArgumentParser(
        prog="uldp", description="User-level differential privacy for cross-silo federated learning."
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module_name in COMMAND_MODULES:
        importlib.import_module(module_name).register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``uldp`` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.handler(args) or 0)
    except (ValueError, FileNotFoundError) as error:  # bad input or missing data: one clear line, exit 2
        print(f"uldp {args.command}: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
