"""The registered datasets' default rows (uldp.defaults), keyed by method family; their values are checked against
settings.md by tests/test_paper_settings.py."""

from __future__ import annotations

import pytest

from uldp.defaults import DATASET_DEFAULTS, DatasetSettings, Hyper
from uldp.method_names import FAMILIES


def test_every_registered_dataset_has_a_row_per_family() -> None:
    for settings in DATASET_DEFAULTS.values():
        assert sorted(settings.families) == sorted(FAMILIES), settings.dataset


def test_rows_are_found_by_family_name_in_any_order() -> None:
    """A table written in another order than FAMILIES, and missing families, still gives each family its own row;
    a missing family is refused at look-up (not at import), naming the dataset and the families it has."""
    avg, default = Hyper(1.0, 0.1, 0.01, 5), Hyper(2.0, None, 0.1, 1)
    settings = DatasetSettings(
        "toy", (10,), 2, 1, 8, ("uniform",), {"ULDP-AVG": avg, "DEFAULT": default}
    )
    assert (settings.hyper("ULDP-AVG"), settings.hyper("DEFAULT")) == (avg, default)
    with pytest.raises(
        ValueError, match=r"no toy defaults for method family 'ULDP-SGD'.*ULDP-AVG, DEFAULT"
    ):
        settings.hyper("ULDP-SGD")


def test_a_row_under_an_unknown_family_is_refused() -> None:
    with pytest.raises(ValueError, match=r"toy: unknown method families \['ULDP-SIXTH'\]"):
        DatasetSettings(
            "toy", (10,), 2, 1, 8, ("uniform",), {"ULDP-SIXTH": Hyper(1.0, 0.1, 0.1, 1)}
        )
