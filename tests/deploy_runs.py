"""What the ``uldp deploy`` tests share: a hospital table run's columns, the deploy app on LocalGrid, and
``uldp.fit`` on the silos' records under the private set union's user numbers (the run a deployment must equal)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import numpy as np
from flower_hospitals import FEATURES
from flwr.app import Context, RecordDict

import uldp
from uldp.deploy import app
from uldp.flower.local import LocalGrid

if TYPE_CHECKING:
    import pathlib

    import uldp.flower as uf
    from uldp.deploy.app import AppSettings

TABLE = {
    "id_column": "patient",
    "label_column": "label",
    "feature_columns": FEATURES,
    "hidden": [4],
}
#: The arguments uldp.fit shares with the strategy (the rest is the transport's).
FIT_KEYS = (
    "method",
    "sigma",
    "q",
    "delta",
    "global_lr",
    "local_lr",
    "clip",
    "local_epochs",
    "batch_size",
    "seed",
)


def run_in_process(
    settings: dict, tmp_path: pathlib.Path, nodes: list[dict]
) -> tuple[dict, np.ndarray, LocalGrid]:
    """The deploy app's ServerApp and ClientApps on LocalGrid, every node config built by ``uldp deploy silo``'s
    builder; the ServerApp's report, its final model and the grid (each silo's context)."""
    out = tmp_path / "result.json"
    run_config: dict[str, bool | float | int | str] = {
        app.SETTINGS_KEY: json.dumps(settings),
        app.OUT_KEY: str(out),
    }
    grid = LocalGrid(app.client, nodes)
    for context in grid.contexts.values():
        context.run_config = run_config
    app.main(
        grid,
        Context(run_id=1, node_id=0, node_config={}, state=RecordDict(), run_config=run_config),
    )
    return json.loads(out.read_text()), np.load(out.with_suffix(".npy")), grid


def fitted(
    settings: AppSettings, parts: list[uf.SiloData], numbers: list[np.ndarray], loss
) -> tuple:
    """uldp.fit on the silos' records in sorted name order, the union's numbers as user ids."""
    net, _ = settings.initial()
    silos = [s for s, part in enumerate(parts) for _ in range(len(part.patient_ids))]
    model, history = uldp.fit(
        net,
        np.concatenate([np.asarray(part.x) for part in parts]),
        np.concatenate([np.asarray(part.y) for part in parts]),
        user_ids=np.concatenate(numbers),
        silo_ids=silos,
        loss=loss,
        rounds=settings.rounds,
        **{key: settings.strategy[key] for key in FIT_KEYS if key in settings.strategy},
    )
    return uldp.flat_parameters(model).numpy(), history
