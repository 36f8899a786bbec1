"""uldp.flower.Table: a hospital's own CSV as a silo's records, its columns checked by name before any training."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from uldp.flower.table import Table

TABLE = Table(id_column="mrn", label_column="outcome", feature_columns=("age", "bp"))


def write(tmp_path, frame: pd.DataFrame):
    path = tmp_path / "records.csv"
    frame.to_csv(path, index=False)
    return path


def test_a_table_reads_its_named_columns_from_the_nodes_own_file(tmp_path):
    """The features in the order named (not the file's), bool labels as 0/1, ids as text; the file is the one the
    SuperNode's own node config names."""
    frame = pd.DataFrame(
        {
            "bp": [120.0, 80.5],
            "note": ["x", "y"],
            "mrn": [7, 7],
            "age": [30, 41],
            "outcome": [True, False],
        }
    )
    path = write(tmp_path, frame)
    data = TABLE(SimpleNamespace(node_config={"data": str(path)}))
    np.testing.assert_array_equal(data.x, np.array([[30, 120.0], [41, 80.5]], dtype=np.float32))
    np.testing.assert_array_equal(data.y, np.array([1.0, 0.0], dtype=np.float32))
    assert list(data.patient_ids) == ["7", "7"] and data.x.dtype == np.float32


@pytest.mark.parametrize(
    ("frame", "message"),
    [
        (pd.DataFrame({"mrn": [1], "age": [3], "bp": [1.0]}), r"no column\(s\) \['outcome'\]"),
        (
            pd.DataFrame({"mrn": [1], "age": ["old"], "bp": [1.0], "outcome": [1]}),
            r"column\(s\) \['age'\] are not numeric",
        ),
    ],
)
def test_a_missing_or_non_numeric_column_is_named(tmp_path, frame, message):
    with pytest.raises(ValueError, match=message):
        TABLE.read(write(tmp_path, frame))


def test_bad_tables_and_nodes_without_a_file_are_refused():
    with pytest.raises(ValueError, match="at least one feature"):
        Table(id_column="a", label_column="b", feature_columns=())
    with pytest.raises(ValueError, match="named once"):
        Table(id_column="a", label_column="a", feature_columns=("c",))
    with pytest.raises(ValueError, match="--node-config 'data="):
        TABLE(SimpleNamespace(node_config={}))
