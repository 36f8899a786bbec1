"""uldp.secure.scan: the artificial runtime scan of Protocol 1 (Figure 11), with small test keys."""

from __future__ import annotations

import pytest

from uldp.secure.config import ProtocolParameters
from uldp.secure.scan import SCAN_DEFAULT, SCAN_PARTS, protocol_scan

SMALL = ProtocolParameters(key_bits=512, n_max=60, insecure_test_key=True)


def test_every_setting_of_every_axis_is_measured_once_per_repeat():
    points = protocol_scan(protocol=SMALL, axes={"users": (2, 5), "silos": (2,)}, repeats=2)
    assert [(p.axis, p.value, p.repeat) for p in points] == [
        ("users", 2, 0),
        ("users", 5, 0),
        ("silos", 2, 0),
        ("users", 2, 1),
        ("users", 5, 1),
        ("silos", 2, 1),
    ]
    for point in points:
        assert set(point.seconds) == set(SCAN_PARTS) and all(t >= 0 for t in point.seconds.values())
        assert point.as_row()["axis"] == point.axis


@pytest.mark.parametrize("axes", [{"layers": (2,)}, {"users": ()}, {}])
def test_bad_axes_are_refused_naming_the_allowed_ones(axes):
    with pytest.raises(ValueError, match="parameters"):
        protocol_scan(protocol=SMALL, axes=axes)


def test_n_max_too_small_for_the_silos_is_refused():
    with pytest.raises(ValueError, match="n_max = 60 is too small for 20 silos"):
        protocol_scan(protocol=SMALL, axes={"silos": (20,)})


def test_the_default_is_the_papers():
    assert SCAN_DEFAULT == {"parameters": 16, "users": 20, "silos": 3}
