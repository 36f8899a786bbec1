"""Test only: ``python tests/crashing_silo.py <round> silo <uldp deploy silo's options>`` runs a deployed silo that ends
its process abruptly (exit status 17, no goodbye) on receiving round ``<round>``: a crash mid-round, with the fault
hook here rather than in the silo's production code."""

from __future__ import annotations

import os
import sys
from typing import Any

from uldp.deploy import legacy_cli as cli, silo, wire

CRASH_STATUS = 17


def crash_at(round_index: int) -> None:
    """Make every silo client built from now on exit abruptly when it receives ``round_index``."""
    make_client = silo._make_client

    def crashing(*args: Any, **kwargs: Any) -> Any:
        client = make_client(*args, **kwargs)
        fit = client.fit

        def fit_or_crash(ins: Any) -> Any:
            if wire.Instruction.from_flower(ins).round_index == round_index:
                print(
                    f"silo: exiting abruptly in round {round_index} (test fault)", file=sys.stderr
                )
                os._exit(CRASH_STATUS)
            return fit(ins)

        client.fit = fit_or_crash
        return client

    silo._make_client = crashing


if __name__ == "__main__":
    crash_at(int(sys.argv[1]))
    sys.exit(cli.main(sys.argv[2:]))
