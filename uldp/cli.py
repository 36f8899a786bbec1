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
import warnings
from typing import Any

from uldp.common.extras import missing_extra

COMMAND_MODULES: tuple[str, ...] = (
    "uldp.accounting.cli",
    "uldp.data.cli",
    "uldp.paper.experiments_cli",
    "uldp.deploy.cli",
    "uldp.secure.cli",
    "uldp.flower.cli",
    "uldp.simulation_cli",
)


class DeprecatedAlias(argparse.Action):
    """An option kept for one release under its old name: it sets the new one's value and warns."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option: Any = None,
    ) -> None:
        warnings.warn(
            f"{option} is deprecated and will be removed in the next release; use --{self.dest}",
            DeprecationWarning,
            stacklevel=2,
        )
        setattr(namespace, self.dest, values)


#: The dests of nested sub-commands (``uldp deploy server``, ``uldp roster add``): part of the command's name.
_SUBCOMMANDS = ("deploy_command", "roster_command")
#: Parsed arguments that are plumbing, not inputs of the computation (left out of the JSON ``inputs``).
_NOT_INPUTS = frozenset({"handler", "json", "progress", "quiet", "command", *_SUBCOMMANDS})


def command_inputs(args: argparse.Namespace) -> dict[str, Any]:
    """The inputs of a sub-command as given or defaulted: every parsed argument but the plumbing.

    Example:
        >>> command_inputs(argparse.Namespace(command="epsilon", sigma=5.0, json=True, handler=print))
        {'sigma': 5.0}
    """
    return {name: value for name, value in vars(args).items() if name not in _NOT_INPUTS}


def print_json(payload: dict[str, Any], args: argparse.Namespace) -> None:
    """Write the one JSON document of a ``--json`` command to stdout: its command and inputs, then ``payload``.

    Nothing else goes to stdout under ``--json`` (progress and logs go to stderr), so
    ``uldp ... --json | python -c 'import json, sys; json.load(sys.stdin)'`` reads it whole. Paths and other
    values JSON has no type for are written as strings.
    """
    nested = (getattr(args, name, None) for name in _SUBCOMMANDS)
    command = " ".join(filter(None, (args.command, *nested)))
    document = {"command": command, "inputs": command_inputs(args), **payload}
    print(json.dumps(document, sort_keys=False, default=str))


def add_progress_option(parser: argparse.ArgumentParser) -> None:
    """Add ``--progress`` to a sub-command that shows a progress bar."""
    parser.add_argument(
        "--progress",
        action="store_true",
        help="show the progress bar on stderr (shown by default only when stderr is a terminal)",
    )


def add_device_option(parser: argparse.ArgumentParser) -> None:
    """Add ``--device`` (``RunConfig.device``; checked when the run is configured) to a sub-command that trains."""
    parser.add_argument(
        "--device",
        default="cpu",
        help="where to train: cpu (default), cuda or cuda:<index>; the noise is drawn as on the CPU",
    )


def add_precision_option(parser: argparse.ArgumentParser) -> None:
    """Add ``--precision`` (``RunConfig.precision``; checked by :func:`uldp.training.device.check_precision` when the
    run is configured) to a sub-command that trains."""
    parser.add_argument(
        "--precision",
        default="float32",
        help="float32 (default), tf32 (CUDA's TF32 matmuls) or bf16 (bfloat16 autocast; not ULDP-GROUP)",
    )


def show_progress(args: argparse.Namespace) -> bool:
    """Whether to draw a progress bar: on request (``--progress``), or when stderr is a terminal."""
    return bool(getattr(args, "progress", False)) or sys.stderr.isatty()


def build_parser() -> argparse.ArgumentParser:
    """Return the ``uldp`` argument parser with every registered sub-command."""
    parser = argparse.ArgumentParser(
        prog="uldp",
        description="User-level differential privacy for cross-silo federated learning.",
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
    except (
        ModuleNotFoundError
    ) as error:  # an optional package: the extra that installs it, in one line
        if (message := missing_extra(error)) is None:
            raise
        print(f"uldp {args.command}: error: {message}", file=sys.stderr)
        return 2
    except (
        ValueError,
        FileNotFoundError,
    ) as error:  # bad input or missing data: one clear line, exit 2
        print(f"uldp {args.command}: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
