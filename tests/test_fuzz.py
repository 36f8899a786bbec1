"""Fuzzers of the deployment's parsers, bounded for ``make test`` (targets in ``tests/fuzz_targets.py``; a longer
run: ``python tools/fuzz.py --examples 20000``). Each parser returns a well-formed result or raises ValueError."""

from __future__ import annotations

import pytest
from fuzz_targets import TARGETS
from hypothesis import HealthCheck, given, settings


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_a_parser_returns_a_well_formed_result_or_a_value_error(name) -> None:
    strategy, check = TARGETS[name]
    fuzz = settings(max_examples=150, suppress_health_check=list(HealthCheck))(
        given(strategy)(check)
    )
    fuzz()
