"""uldp.secure.cost: the committed measurements are the benchmark's (no number copied by hand), an estimate is the
measured round at a measured size, a line between sizes and scaled by the users, and the fastest backend is chosen
among those the run allows and this machine has."""

from __future__ import annotations

import json
import logging
import math
from dataclasses import replace
from pathlib import Path

import pytest

from uldp.secure import cost

RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "backend_rounds.json"


def test_the_table_is_the_committed_benchmark():
    rows = json.loads(RESULTS.read_text())["results"]
    measured: dict[str, list[tuple[int, float]]] = {}
    setup: dict[str, float] = {}
    for row in rows["rows"]:
        if "round_seconds" in row:
            measured.setdefault(row["backend"], []).append(
                (row["parameters"], row["round_seconds"])
            )
            setup[row["backend"]] = min(setup.get(row["backend"], math.inf), row["setup_seconds"])
    assert {backend: tuple(points) for backend, points in measured.items()} == cost.MEASURED
    assert setup == cost.SETUP
    assert rows["users"] == cost.MEASURED_USERS


@pytest.fixture()
def table(monkeypatch):
    monkeypatch.setattr(
        cost, "MEASURED", {"paillier": ((2000, 100.0), (20000, 1000.0)), "lattice": ((2000, 10.0),)}
    )
    monkeypatch.setattr(cost, "SETUP", {"paillier": 60.0, "lattice": 80.0})


def test_an_estimate_interpolates_scales_by_users_and_says_when_projected(table):
    at = cost.estimate("paillier", parameters=2000, users=cost.MEASURED_USERS)
    assert (at.round_seconds, at.setup_seconds, at.projected) == (100.0, 60.0, False)
    between = cost.estimate("paillier", parameters=11000, users=2 * cost.MEASURED_USERS)
    assert (
        between.round_seconds == pytest.approx(2 * (100 + 900 * 9000 / 18000))
        and not between.projected
    )
    beyond = cost.estimate("paillier", parameters=200000, users=cost.MEASURED_USERS)
    assert beyond.round_seconds == pytest.approx(100 + 900 * 198000 / 18000) and beyond.projected
    assert "projected" in beyond.line() and "set-up about 60 s" in beyond.line()
    single = cost.estimate("lattice", parameters=4000, users=cost.MEASURED_USERS)
    assert single.round_seconds == pytest.approx(20.0) and single.projected
    assert cost.estimate("packed-paillier", parameters=10, users=5).round_seconds is None


def test_the_fastest_allowed_and_installed_backend_is_chosen(table, monkeypatch):
    assert cost.fastest_backend(parameters=2000, users=40) == "lattice"
    assert cost.fastest_backend(parameters=2000, users=40, allowed=("paillier",)) == "paillier"
    monkeypatch.setattr(cost, "installed", lambda backend: backend != "lattice")
    assert cost.fastest_backend(parameters=2000, users=40) == "paillier"
    with pytest.raises(
        ValueError, match=r"none of the allowed backends \['lattice'\] is installed"
    ):
        cost.fastest_backend(parameters=2000, users=40, allowed=("lattice",))
    with pytest.raises(ValueError, match="backend must be one of"):
        cost.estimate("rsa", parameters=1, users=1)


def test_the_measured_backends_are_the_registered_ones() -> None:
    from uldp.secure.backends import BACKENDS as REGISTERED

    assert set(cost.BACKENDS) == set(REGISTERED)
    assert {name: REGISTERED[name].checks_weights for name in REGISTERED} == cost.CHECKS_WEIGHTS


def test_auto_is_the_fastest_backend_the_policy_allows_and_the_key_fits(monkeypatch, caplog):
    monkeypatch.setattr(
        cost, "installed", lambda backend: True
    )  # the lattice counts even without TenSEAL
    # the measured lattice is the fastest, but under a malicious server its weights go unchecked: packed Paillier
    assert cost.fastest_backend(parameters=20001, users=40) == "lattice"
    with caplog.at_level(logging.INFO, logger="uldp.secure.cost"):
        assert cost.choose_backend(users=40, parameters=20001) == "packed-paillier"
    assert "'auto': packed-paillier" in caplog.text and "about 112 s per round" in caplog.text
    assert cost.choose_backend(users=40, parameters=20001, malicious_server=False) == "lattice"
    # the packed rescale needs room in the key: the paper's backend then
    assert cost.choose_backend(users=40, fits=lambda name: name == "paillier") == "paillier"


def test_auto_is_the_default_and_a_session_names_the_backend_it_runs():
    from uldp.secure.config import ProtocolConfig, ProtocolParameters
    from uldp.simulation import RunConfig

    user = ProtocolParameters.for_user(None)
    assert ProtocolParameters().backend == "paillier"  # the protocol object's own: the paper's
    assert user.backend == cost.AUTO == RunConfig("synthetic", "ULDP-AVG-w", 10, 1).protocol.backend
    assert ProtocolParameters.for_user({"key_bits": 4096}) == replace(user, key_bits=4096)
    assert ProtocolParameters.for_user({"backend": "lattice"}).backend == "lattice"
    session = ProtocolConfig(n_silos=3, n_users=40, clip=1.0, sigma=1.0, parameters=user)
    assert session.parameters.backend == "packed-paillier"
    training = ProtocolConfig.for_training(3, 40, clip=1.0, sigma=1.0, parameters=user)
    assert training.parameters.backend == "packed-paillier"
    # n_max 650: C_LCM has 937 bits, the packed rescale blind needs 130 more than a 1024-bit key holds
    small = replace(user, key_bits=1024, insecure_test_key=True, n_max=650)
    with pytest.raises(ValueError, match="packed backend's rescale blind"):
        ProtocolConfig(3, 40, 1.0, parameters=replace(small, backend="packed-paillier"))
    assert ProtocolConfig(3, 40, 1.0, parameters=small).parameters.backend == "paillier"
    named = replace(small, backend="paillier", n_max=100)
    assert ProtocolConfig(3, 40, 1.0, parameters=named).parameters.backend == "paillier"
    with pytest.raises(ValueError, match=r"backend must be one of \['auto', 'paillier'"):
        ProtocolParameters(backend="rsa")
