"""A hospital federation on Flower: the ServerApp (the coordinating server) and the ClientApp (each hospital).

Each hospital's SuperNode reads only its own CSV file, named in its node config, with raw patient ids; the server
never sees a record, an id or a per-patient count. Copy this file and ``pyproject.toml``, change ``FEATURES``,
``TARGET``, ``PATIENT`` and ``model`` to your table and model, and start the processes as ``launch.py`` does.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from flwr.serverapp import ServerApp
from torch import nn

import uldp.flower as uf

if TYPE_CHECKING:
    from flwr.app import Context
    from flwr.serverapp import Grid

FEATURES = [f"f{i}" for i in range(30)]
TARGET, PATIENT = "outcome", "patient_id"


def model() -> nn.Module:
    """The architecture; the server sends the weights every round."""
    return nn.Sequential(
        nn.Linear(len(FEATURES), 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 1)
    )


#: This hospital's own records, from the CSV file its SuperNode was given (``--node-config 'data="..."'``).
load = uf.Table(id_column=PATIENT, label_column=TARGET, feature_columns=tuple(FEATURES))


client = uf.silo_client_app(load, model, nn.BCEWithLogitsLoss())
server = ServerApp()


def make_strategy(config: dict) -> uf.UldpStrategy:
    """ULDP-AVG-w at noise ``sigma`` and user sampling rate ``q``, with Protocol 1 unless ``secure`` is false."""
    return uf.UldpStrategy(
        method="ULDP-AVG-w",
        sigma=float(config["sigma"]),
        q=float(config["q"]),
        secure=bool(config["secure"]),
        model=model(),
    )


@server.main()
def main(grid: Grid, context: Context) -> None:
    """Train for ``rounds`` rounds and save the model's state_dict and the epsilons."""
    import torch

    config = context.run_config
    strategy = make_strategy(config)
    result = strategy.start(grid, model().state_dict(), num_rounds=int(config["rounds"]))
    torch.save(strategy.trained_model(result).state_dict(), str(config["out"]))
    with open(f"{config['out']}.json", "w") as file:
        json.dump(
            {
                "epsilon": strategy.epsilons,
                "round_seconds": strategy.round_seconds,
                "setup_seconds": strategy.setup_seconds,
            },
            file,
        )
