"""The one parser of registry names (uldp.method_names): canonical names, families, group sizes, no torch."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import given, settings, strategies as st

from uldp.method_names import (
    FAMILIES,
    FAMILY_CAPABILITIES,
    KNOWN_METHODS,
    MASKED_SUM,
    PROTOCOL_1,
    parse_group_size,
    parse_method,
)

NAMES = [
    "DEFAULT",
    "ULDP-NAIVE",
    "ULDP-GROUP-max",
    "ULDP-GROUP-median",
    "ULDP-SGD",
    "ULDP-SGD-w",
    "ULDP-AVG",
    "ULDP-AVG-w",
]


def test_importing_the_names_does_not_import_torch():
    """The accountant and the CLI parse names without paying for torch."""
    code = "import sys, uldp.method_names, uldp.accounting; print('torch' in sys.modules)"
    assert (
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout
        == "False\n"
    )


@settings(max_examples=30, deadline=None)
@given(
    name=st.one_of(st.sampled_from(NAMES), st.integers(1, 10**6).map(lambda k: f"ULDP-GROUP-{k}"))
)
def test_a_canonical_name_parses_to_itself(name):
    spec = parse_method(name)
    assert spec.name == name and parse_method(spec.name) == spec
    assert spec.family in FAMILIES and name.startswith(spec.family)
    assert spec.group_size == parse_group_size(name) and (spec.group_size is None) == (
        spec.family != "ULDP-GROUP"
    )
    assert spec.enhanced_weights == name.endswith("-w")


@given(k=st.integers(1, 10**6), zeros=st.integers(1, 3))
@settings(max_examples=20, deadline=None)
def test_leading_zeros_give_the_canonical_group_name(k, zeros):
    assert parse_method(f"ULDP-GROUP-{'0' * zeros}{k}").name == f"ULDP-GROUP-{k}"


def test_the_properties_of_each_family():
    """Who is private (all but DEFAULT), who clips per user (Algorithms 3-4) and whose training reads the users."""
    specs = {
        family: parse_method(name)
        for family, name in zip(
            FAMILIES, ("DEFAULT", "ULDP-NAIVE", "ULDP-GROUP-2", "ULDP-SGD", "ULDP-AVG"), strict=True
        )
    }
    assert [f for f, s in specs.items() if s.private] == [
        "ULDP-NAIVE",
        "ULDP-GROUP",
        "ULDP-SGD",
        "ULDP-AVG",
    ]
    assert [f for f, s in specs.items() if s.per_user] == ["ULDP-SGD", "ULDP-AVG"]
    assert [f for f, s in specs.items() if s.reads_users] == ["ULDP-GROUP", "ULDP-SGD", "ULDP-AVG"]
    assert len(KNOWN_METHODS) == 9


@pytest.mark.parametrize(
    "bad", ["FEDAVG", "ULDP-GROUP-0", "ULDP-GROUP-x", "ULDP-GROUP-", "uldp-avg", "ULDP-AVG-W"]
)
def test_unknown_names_list_the_known_ones(bad):
    with pytest.raises(ValueError, match="known methods: DEFAULT, ULDP-NAIVE"):
        parse_method(bad)


def test_a_bad_group_suffix_says_what_is_allowed():
    with pytest.raises(ValueError, match=r"'ULDP-GROUP-0'.*positive integer"):
        parse_group_size("ULDP-GROUP-0")


def test_each_method_names_how_it_is_securely_aggregated():
    """Protocol 1 exactly for the per-user (enhanced) weights of Eq. (3), which read every silo's n_su; the masked
    sum for the rest, whose weights need no counts (Section 4 of the paper: Protocol 1 computes n_su / N_u)."""
    expected = {
        "DEFAULT": MASKED_SUM,
        "ULDP-NAIVE": MASKED_SUM,
        "ULDP-GROUP-3": MASKED_SUM,
        "ULDP-SGD": MASKED_SUM,
        "ULDP-SGD-w": PROTOCOL_1,
        "ULDP-AVG": MASKED_SUM,
        "ULDP-AVG-w": PROTOCOL_1,
    }
    for name, aggregation in expected.items():
        spec = parse_method(name)
        assert spec.secure_aggregation == aggregation, name
        assert spec.per_user_weights == (aggregation == PROTOCOL_1), name


def test_capabilities_are_one_table_keyed_by_family():
    """FAMILIES is the table's keys; only ULDP-GROUP's guarantee goes through group privacy (Theorem 2), and every
    private family names what it clips (the clip warning's message)."""
    assert tuple(FAMILY_CAPABILITIES) == FAMILIES
    assert [f for f, c in FAMILY_CAPABILITIES.items() if c.group_privacy] == ["ULDP-GROUP"]
    assert all(bool(c.clipped) == c.private for c in FAMILY_CAPABILITIES.values())
    assert parse_method("ULDP-SGD-w").capabilities.clipped == "per-user gradient"
