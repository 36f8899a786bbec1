"""A hospital's own table as a silo's records: a CSV file with named patient id, label and feature columns.

``silo_client_app(Table(id_column="patient_id", label_column="outcome", feature_columns=(...)), model, loss)`` reads,
at each SuperNode, the file its own node config names (``--node-config 'data="/secure/records.csv"'``); the columns
are checked by name before any training, and the raw ids never leave the silo (:mod:`uldp.flower.psu` blinds them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from uldp.flower.client import SiloData

if TYPE_CHECKING:
    from pathlib import Path


@dataclass(frozen=True)
class Table:
    """Which columns of a silo's CSV file are what (a ``load(context)`` for :func:`uldp.flower.silo_client_app`).

    Attributes:
        id_column: The patient id of each record (any text; one patient may have many records).
        label_column: The label (numbers; ``true``/``false`` become 1/0).
        feature_columns: The model's inputs, in the model's order (numbers).
        path_key: The node config key that names the file at each SuperNode.
        label_dtype: The label's dtype: ``"float32"`` (binary cross-entropy, regression) or ``"int64"`` (classes).

    Raises:
        ValueError: no feature column, a column named twice, or another label dtype.
    """

    id_column: str
    label_column: str
    feature_columns: tuple[str, ...]
    path_key: str = "data"
    label_dtype: str = "float32"

    def __post_init__(self) -> None:
        object.__setattr__(self, "feature_columns", tuple(self.feature_columns))
        names = [self.id_column, self.label_column, *self.feature_columns]
        if not self.feature_columns:
            raise ValueError("a table needs at least one feature column")
        if len(set(names)) != len(names):
            raise ValueError(f"each column may be named once, got {names}")
        if self.label_dtype not in ("float32", "int64"):
            raise ValueError(f"label_dtype must be 'float32' or 'int64', got {self.label_dtype!r}")

    def read(self, path: str | Path) -> SiloData:
        """The records of one CSV file.

        Raises:
            ValueError: a missing column or a non-numeric feature or label column, each named.
        """
        import pandas as pd  # the deploy extra's; imported where a table is read

        frame = pd.read_csv(path)
        missing = [
            name
            for name in (self.id_column, self.label_column, *self.feature_columns)
            if name not in frame.columns
        ]
        if missing:
            raise ValueError(f"{path}: no column(s) {missing}; the file has {list(frame.columns)}")
        labels = frame[self.label_column]
        if labels.dtype == bool:
            labels = labels.astype(np.int64)
        numeric = [
            name
            for name in (*self.feature_columns, self.label_column)
            if not pd.api.types.is_numeric_dtype(
                labels if name == self.label_column else frame[name]
            )
        ]
        if numeric:
            raise ValueError(f"{path}: column(s) {numeric} are not numeric")
        return SiloData(
            frame[list(self.feature_columns)].to_numpy(np.float32),
            labels.to_numpy(self.label_dtype),
            frame[self.id_column].astype(str).to_numpy(),
        )

    def __call__(self, context: Any) -> SiloData:
        """This silo's records, from the file its own node config names."""
        if self.path_key not in context.node_config:
            raise ValueError(
                f"the SuperNode names no table: start it with --node-config '{self.path_key}=\"<file.csv>\"'"
            )
        return self.read(str(context.node_config[self.path_key]))
