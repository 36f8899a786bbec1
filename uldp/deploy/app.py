"""The Flower app that ``uldp deploy`` runs: a ServerApp and a ClientApp driven by the run's settings file.

The same :class:`uldp.flower.UldpStrategy` and silo ClientApp (:func:`uldp.flower.client.views_client_app`) as any
hand-written Flower app; what they run comes from the deploy settings file (JSON), given to both sides in the
run config's :data:`SETTINGS_KEY` (the text of the file) by ``uldp deploy server``:

- a built-in dataset: the fields of :class:`uldp.simulation.RunConfig` (``dataset``, ``method``, ``n_users``,
  ``n_silos``, ``rounds``, ``seed``, hyperparameters, ``secure``, ``protocol``, ``hidden_sample``, ``psu_group``,
  ``min_colluders``, and for tests only ``insecure_reproducible_noise``), as ``uldp deploy`` has always read them
  (:class:`DeployConfig`). Silo ``s``'s records are those the seed's allocation gives it (its SuperNode's node config
  :data:`DATASET_SILO_KEY`), its patients the allocation's users; the server evaluates each round's model on the
  dataset's test set.
- a hospital's own table: ``"table": {"id_column": ..., "label_column": ..., "feature_columns": [...], "classes": 2,
  "hidden": [32]}`` with ``method``, ``rounds``, ``seed`` and optionally the hyperparameters, ``epsilon`` (or
  ``sigma``), ``q``, ``delta``, ``secure``, ``protocol``, ``hidden_sample``, ``psu_group``, ``min_colluders``: each silo
  reads its own CSV file (its node config's ``data``, :class:`uldp.flower.Table`), and the model is a multi-layer
  perceptron of the given hidden widths (``classes`` 2: one logit and binary cross-entropy; more: cross-entropy).

The silos agree on their patients by the private set union (:mod:`uldp.flower.psu`), so the user numbers of a
built-in dataset are the union's, not the simulation's: the run equals :func:`uldp.fit` on the silos' records in
sorted name order under those numbers (``tests/test_deploy_app.py``).
"""

from __future__ import annotations

import itertools
import json
import math
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from flwr.app import MetricRecord
from flwr.serverapp import ServerApp
from torch import nn

from uldp.common.atomic import write_bytes_atomic
from uldp.common.checks import check_integer
from uldp.deploy.config import DeployConfig
from uldp.flower.arrays import trained_model
from uldp.flower.client import SiloData, silo_view, views_client_app
from uldp.flower.strategy import UldpStrategy
from uldp.flower.table import Table
from uldp.method_names import PROTOCOL_1, parse_method

if TYPE_CHECKING:
    from collections.abc import Callable

    from flwr.app import ArrayRecord, Context
    from flwr.serverapp import Grid

    from uldp.data.base import FederatedDataset
    from uldp.simulation import RunConfig

#: Run config keys (``uldp deploy server`` sets them): the settings file's text, the result file, the checkpoint,
#: the silos that must take part (comma-separated names; "" takes those connected) and the join timeout.
SETTINGS_KEY, OUT_KEY, CHECKPOINT_KEY, SILOS_KEY, JOIN_TIMEOUT_KEY = (
    "settings",
    "out",
    "checkpoint",
    "silos",
    "join-timeout",
)
#: Node config key: this silo's number in a built-in dataset's seed-derived allocation.
DATASET_SILO_KEY = "uldp-dataset-silo"
#: The settings of a table run besides ``table`` (UldpStrategy's, and ``rounds``).
TABLE_RUN_FIELDS = (
    "method",
    "rounds",
    "seed",
    "sigma",
    "epsilon",
    "q",
    "delta",
    "global_lr",
    "local_lr",
    "clip",
    "local_epochs",
    "batch_size",
    "secure",
    "protocol",
    "hidden_sample",
    "psu_group",
    "min_colluders",
    "insecure_reproducible_noise",
)


@dataclass(frozen=True)
class TableModel:
    """A hospital table's columns and the model trained on it.

    Attributes:
        id_column, label_column, feature_columns: As :class:`uldp.flower.Table`.
        classes: 2 (one logit, binary cross-entropy, labels 0/1) or more (cross-entropy, labels 0..classes-1).
        hidden: The widths of the perceptron's hidden layers (ReLU between layers).

    Raises:
        ValueError: fewer than 2 classes, a width that is not a positive integer, or a bad column list.
    """

    id_column: str
    label_column: str
    feature_columns: tuple[str, ...]
    classes: int = 2
    hidden: tuple[int, ...] = (32,)

    def __post_init__(self) -> None:
        object.__setattr__(self, "feature_columns", tuple(self.feature_columns))
        object.__setattr__(self, "hidden", tuple(self.hidden))
        check_integer("table classes", self.classes, minimum=2)
        for width in self.hidden:
            check_integer("table hidden width", width, minimum=1)
        self.table()  # its column checks

    def table(self) -> Table:
        """The ``load(context)`` of a silo's CSV file (its node config's ``data``)."""
        return Table(
            self.id_column,
            self.label_column,
            self.feature_columns,
            label_dtype="float32" if self.classes == 2 else "int64",
        )

    def model(self) -> nn.Module:
        """The perceptron: features -> hidden widths (ReLU) -> one logit (2 classes) or one per class."""
        widths = [len(self.feature_columns), *self.hidden]
        layers: list[nn.Module] = []
        for width_in, width_out in itertools.pairwise(widths):
            layers += [nn.Linear(width_in, width_out), nn.ReLU()]
        layers.append(nn.Linear(widths[-1], 1 if self.classes == 2 else self.classes))
        return nn.Sequential(*layers)

    def loss(self) -> nn.Module:
        return nn.BCEWithLogitsLoss() if self.classes == 2 else nn.CrossEntropyLoss()


@dataclass(frozen=True)
class AppSettings:
    """A deploy settings file, as both sides of the app read it.

    Attributes:
        strategy: :class:`uldp.flower.UldpStrategy`'s keyword arguments (method, noise, hyperparameters, seed,
            secure aggregation, Protocol 1's parameters, hidden sample).
        rounds: The rounds to run.
        deploy: A built-in dataset's configuration, or None.
        table: A hospital table's columns and model, or None.
        insecure_reproducible_noise: INSECURE, tests only: each silo started from these settings draws its noise
            from ``seed`` (``uldp deploy silo`` puts it in its own node config), so the run equals :func:`uldp.fit`.
    """

    strategy: dict
    rounds: int
    deploy: DeployConfig | None = None
    table: TableModel | None = None
    insecure_reproducible_noise: bool = False

    @classmethod
    def from_json(cls, data: Any) -> AppSettings:
        """Parse a settings file's JSON object (a built-in dataset's run configuration, or a table run).

        Raises:
            ValueError: not an object, an unknown or bad field (naming it and the allowed ones), or a setting the
                Flower runtime does not take (fixed ``user_weights``, another accountant than RDP).
        """
        if not isinstance(data, dict):
            raise ValueError(f"deploy settings are a JSON object, got {type(data).__name__}")
        if "table" in data:
            return cls._table_run(dict(data))
        config = DeployConfig.from_json(data)
        run = config.run
        if run.user_weights is not None or run.accountant != "rdp":
            raise ValueError(
                "uldp deploy runs on Flower, which takes neither fixed user_weights nor another accountant than "
                f"'rdp'; got user_weights={run.user_weights is not None}, accountant={run.accountant!r}"
            )
        return cls(
            _strategy_of(run, config),
            run.rounds,
            deploy=config,
            insecure_reproducible_noise=config.insecure_reproducible_noise,
        )

    @classmethod
    def _table_run(cls, data: dict) -> AppSettings:
        columns = data.pop("table")
        if "target_epsilon" in data:  # the run configuration's name, as in RunConfig
            data["epsilon"] = data.pop("target_epsilon")
        unknown = sorted(set(data) - set(TABLE_RUN_FIELDS))
        if unknown or not isinstance(columns, dict):
            raise ValueError(
                f"a table run takes 'table' (an object of {[f.name for f in fields(TableModel)]}) and "
                f"{list(TABLE_RUN_FIELDS)}; got unknown field(s) {unknown}"
            )
        try:
            table = TableModel(**columns)
        except TypeError as error:
            raise ValueError(f"bad 'table': {error}") from error
        if "method" not in data or "rounds" not in data:
            raise ValueError("a table run needs 'method' and 'rounds'")
        rounds = check_integer("rounds", data.pop("rounds"), minimum=1)
        insecure = data.pop("insecure_reproducible_noise", False)
        if not isinstance(insecure, bool):
            raise ValueError(f"insecure_reproducible_noise must be true or false, got {insecure!r}")
        return cls({"seed": 0, **data}, rounds, table=table, insecure_reproducible_noise=insecure)

    @classmethod
    def from_run_config(cls, run_config: Any) -> AppSettings:
        """The settings in a run config's :data:`SETTINGS_KEY`."""
        return cls.from_json(json.loads(str(run_config[SETTINGS_KEY])))

    def model(self) -> nn.Module:
        """The architecture (its weights come from the server each round)."""
        if self.table is not None:
            return self.table.model()
        from uldp.models import build_model

        return build_model(self._run.dataset)

    def loss(self) -> Any:
        if self.table is not None:
            return self.table.loss()
        from uldp.models import loss_function

        return loss_function(self._run.dataset)

    @property
    def _run(self) -> RunConfig:
        if self.deploy is None:
            raise ValueError("a table run has no built-in dataset")
        return self.deploy.run

    def load(self, context: Any) -> SiloData:
        """This silo's records and patient ids: its own CSV file, or its part of the built-in dataset."""
        if self.table is not None:
            return self.table.table()(context)
        if DATASET_SILO_KEY not in context.node_config:
            raise ValueError(
                f"the SuperNode names no silo of {self._run.dataset!r}: --node-config '{DATASET_SILO_KEY}=<id>'"
            )
        from uldp.simulation import build_federation

        federation, _ = build_federation(self._run)
        silo = check_integer(
            DATASET_SILO_KEY,
            int(context.node_config[DATASET_SILO_KEY]),
            minimum=0,
            maximum=federation.n_silos - 1,
        )
        own = np.flatnonzero(federation.allocation.silo == silo)
        index = torch.from_numpy(own)
        users = federation.allocation.user[own]
        return SiloData(federation.x[index], federation.y[index], [f"user-{u}" for u in users])

    def initial(self) -> tuple[nn.Module, Callable[[int, ArrayRecord], MetricRecord] | None]:
        """The server's initial model (a built-in dataset's from its seed, as the simulation's; a table's from
        ``seed``) and its evaluation on the dataset's test set (None for a table)."""
        if self.table is not None:
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(int(self.strategy["seed"]))
                return self.table.model(), None
        from uldp.simulation import build_federation

        federation, data = build_federation(self._run)
        return federation.model, _evaluation(data, self._run.dataset, self.model)


def _strategy_of(run: RunConfig, config: DeployConfig) -> dict:
    """UldpStrategy's arguments for a built-in dataset's run configuration (its resolved hyperparameters)."""
    spec = parse_method(run.method)
    noise: dict[str, Any] = {}
    if spec.private:
        noise = {"sigma": run.sigma} if run.sigma is not None else {"epsilon": run.target_epsilon}
    return {
        "method": run.method,
        **noise,
        "q": run.q,
        "delta": run.delta,
        "global_lr": run.global_lr,
        "local_lr": run.local_lr,
        "clip": run.clip,
        "local_epochs": run.local_epochs,
        "batch_size": run.batch_size,
        "seed": run.seed,
        "secure": config.secure_aggregation,
        "hidden_sample": config.hidden_sample,
        "psu_group": config.psu_group,
        "min_colluders": config.min_colluders,
        **({"protocol": run.protocol} if spec.secure_aggregation == PROTOCOL_1 else {}),
    }


def _evaluation(
    data: FederatedDataset, dataset: str, model: Callable[[], nn.Module]
) -> Callable[[int, ArrayRecord], MetricRecord]:
    """The server's evaluation of each round's model on the dataset's test set (loss and the dataset's metric)."""
    from uldp.models import evaluate

    def evaluate_fn(round_index: int, arrays: ArrayRecord) -> MetricRecord:
        metrics = evaluate(trained_model(arrays, model()), data.x_test, data.y_test, dataset)
        return MetricRecord({name: float(value) for name, value in metrics.items()})

    return evaluate_fn


def _client_view(context: Any) -> dict:
    settings = AppSettings.from_run_config(context.run_config)
    return silo_view(settings.load, settings.model, settings.loss(), context)


#: Each silo's ClientApp.
client = views_client_app(_client_view)
#: The server's ServerApp.
server = ServerApp()


@server.main()
def main(grid: Grid, context: Context) -> None:
    """Run the settings' rounds and write the result (:data:`OUT_KEY`: JSON, the model beside it as ``.npy``)."""
    config = context.run_config
    settings = AppSettings.from_run_config(config)
    silos = [name.strip() for name in str(config.get(SILOS_KEY, "")).split(",") if name.strip()]
    initial, evaluate_fn = settings.initial()
    strategy = UldpStrategy(
        **settings.strategy,
        silos=silos or None,
        checkpoint=str(config[CHECKPOINT_KEY]) if config.get(CHECKPOINT_KEY) else None,
        join_timeout=float(config.get(JOIN_TIMEOUT_KEY, 120.0)),
        model=settings.model(),
    )
    result = strategy.start(grid, initial, num_rounds=settings.rounds, evaluate_fn=evaluate_fn)
    out = Path(str(config[OUT_KEY]))
    params = result.arrays.to_numpy_ndarrays()[0]
    np.save(out.with_suffix(".npy"), params)
    rows = strategy.report.rows if strategy.report else []
    report = {
        "rounds_done": len(rows),
        "epsilon": _finite(strategy.epsilons),  # None: no guarantee (DEFAULT)
        "server_view_epsilon": _finite(strategy.server_view_epsilons),
        "round_seconds": strategy.round_seconds,
        "setup_seconds": strategy.setup_seconds,
        "rounds": [{**row, "epsilon": _finite([row["epsilon"]])[0]} for row in rows],
        "silos": sorted(strategy.silo_names.values()),
        "insecure_reproducible_noise": strategy.insecure_reproducible_noise,
        "colluders": strategy.colluders,  # every epsilon holds against ...
        "against": strategy.against,  # ... in words (the silos' own policies)
        "model": str(out.with_suffix(".npy")),
    }
    write_bytes_atomic(out, json.dumps(report).encode())


def _finite(epsilons: list[float]) -> list[float | None]:
    return [None if math.isinf(value) else value for value in epsilons]
