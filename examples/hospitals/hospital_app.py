"""A hospital federation on Flower: the ServerApp (the coordinating server) and the ClientApp (each hospital).

Each hospital's SuperNode reads only its own CSV file, named in its node config, with raw patient ids; the server
never sees a record, an id or a per-patient count. Copy this file and ``pyproject.toml``, change ``FEATURES``,
``TARGET``, ``PATIENT`` and ``model`` to your table and model, and start the processes as ``launch.py`` does.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from flwr.app import MetricRecord
from flwr.serverapp import ServerApp
from torch import nn

import uldp.flower as uf
from uldp.flower.arrays import trained_model
from uldp.secure.cost import fastest_backend

if TYPE_CHECKING:
    from collections.abc import Callable

    from flwr.app import ArrayRecord, Context
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
    """ULDP-AVG-w at noise ``sigma`` and user sampling rate ``q``, with Protocol 1 unless ``secure`` is false, over
    the hospitals named in ``silos`` (comma-separated; the run refuses to start short of them, and stops naming a
    hospital whose ClientApp fails)."""
    allowed = tuple(name.strip() for name in str(config["backends"]).split(","))
    parameters = sum(p.numel() for p in model().parameters())
    return uf.UldpStrategy(
        method="ULDP-AVG-w",
        sigma=float(config["sigma"]),
        q=float(config["q"]),
        secure=bool(config["secure"]),
        silos=[name.strip() for name in str(config["silos"]).split(",")],
        # the fastest backend the run's policy allows, from the measured cost of a round (uldp.secure.cost); every
        # round scales alike with the patients, so the model's size decides
        protocol={"backend": fastest_backend(parameters=parameters, users=1, allowed=allowed)},
        model=model(),
        # uldp flower-run --hidden-sample / --colluders T / --psu-group NAME: the silos' own sample, the threshold
        # the run needs, and the private set union's group
        hidden_sample=bool(config.get("hidden-sample", False)),
        min_colluders=int(config.get("colluders", 0)),
        psu_group=str(config.get("psu-group", "modp2048")),
    )


def held_out(path: str) -> Callable[[int, ArrayRecord], MetricRecord] | None:
    """The server's evaluation on a held-out CSV (same columns, patients in no hospital's file): loss and AUC
    after every round, in the round's line. None without a file (``test = ""``)."""
    if not path:
        return None
    import torch
    from sklearn.metrics import roc_auc_score

    frame = pd.read_csv(path)
    x = torch.from_numpy(frame[FEATURES].to_numpy(np.float32))
    y = torch.from_numpy(frame[TARGET].to_numpy(np.float32))

    def evaluate(round_index: int, arrays: ArrayRecord) -> MetricRecord:
        with torch.no_grad():
            scores = trained_model(arrays, model())(x).squeeze(1)
        loss = float(nn.functional.binary_cross_entropy_with_logits(scores, y))
        return MetricRecord({"loss": loss, "auc": float(roc_auc_score(y.numpy(), scores.numpy()))})

    return evaluate


@server.main()
def main(grid: Grid, context: Context) -> None:
    """Train for ``rounds`` rounds and save the model's state_dict and the epsilons."""
    import torch

    config = context.run_config
    strategy = make_strategy(config)
    # a saved state_dict to start from (two runs compared from one start), else a fresh model
    initial = torch.load(str(config["initial"])) if config["initial"] else model().state_dict()
    result = strategy.start(
        grid,
        initial,
        num_rounds=int(config["rounds"]),
        evaluate_fn=held_out(str(config["test"])),
    )
    torch.save(strategy.trained_model(result).state_dict(), str(config["out"]))
    with open(f"{config['out']}.json", "w") as file:
        json.dump(
            {
                "epsilon": strategy.epsilons,
                "round_seconds": strategy.round_seconds,
                "setup_seconds": strategy.setup_seconds,
                "rounds": strategy.report.rows if strategy.report else [],
            },
            file,
        )
