"""Run keys (uldp.paper.experiments.keys and ``config_hash``): what identifies a run's stored file.

``config_hash`` is the SHA-256 of sorted compact JSON, stable across processes; ``effective_arguments`` drops what
cannot change a run (the users of a user-blind run, checked bit for bit by training; TcgaBrca's test scoring); an
accountant or a privacy budget changes only the private runs' keys.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from typing import Any

import pytest
from experiments_helpers import DATA, needs_data
from hypothesis import given, strategies as st

from uldp.paper import experiments
from uldp.paper.experiments import config_hash, effective_arguments, expand


@given(
    st.dictionaries(
        st.text(max_size=5),
        st.one_of(
            st.integers(),
            st.floats(allow_nan=False, allow_infinity=False),
            st.text(max_size=5),
            st.none(),
            st.booleans(),
        ),
        max_size=6,
    )
)
def test_config_hash_is_sha256_of_sorted_compact_json(config):
    text = json.dumps(config, sort_keys=True, separators=(",", ":"))
    assert config_hash(config) == hashlib.sha256(text.encode()).hexdigest()[:16]
    assert config_hash(dict(reversed(list(config.items())))) == config_hash(config)


@pytest.mark.slow
def test_config_hash_is_stable_across_processes_and_distinguishes_values():
    spec = expand("weighting", "paper")[7]
    code = "from uldp.paper.experiments import expand; print(expand('weighting', 'paper')[7].key)"
    for seed in ("1", "12345"):
        out = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
        )
        assert out.stdout.strip() == spec.key
    assert config_hash({"a": 1}) != config_hash({"a": 1.0}) != config_hash({"a": "1"})
    distinct = {
        json.dumps(experiments.effective_arguments(s.kwargs), sort_keys=True)
        for s in expand("mnist", "paper")
    }
    assert len({s.key for s in expand("mnist", "paper")}) == len(distinct) > 100
    with pytest.raises(ValueError, match="finite"):
        config_hash({"a": float("nan")})
    with pytest.raises(ValueError, match="JSON scalars"):
        config_hash({"a": object()})


def test_medical_runs_are_scored_as_the_authors_and_only_heart_disease_keys_depend_on_the_scoring():
    """Results scored per centre never mix with pooled ones: the scoring is in HeartDisease's keys. TcgaBrca's two
    scorings give one test set (tests/test_data.py checks it), so its keys, stored before, stay."""
    for grid in ("heart_disease", "tcga_brca", "protocol_runtime"):
        assert all(
            spec.kwargs["test_scoring"] == "pooled" for spec in expand(grid, "paper", seeds=[0])
        )
    heart = expand("heart_disease", "paper", seeds=[0])[0]
    assert (
        config_hash(effective_arguments({**heart.kwargs, "test_scoring": "per-centre"}))
        != heart.key
    )
    tcga = expand("tcga_brca", "paper", seeds=[0])[0]
    without = {name: value for name, value in tcga.kwargs.items() if name != "test_scoring"}
    assert (
        config_hash(effective_arguments({**tcga.kwargs, "test_scoring": "per-centre"})) == tcga.key
    )
    assert config_hash(effective_arguments(without)) == tcga.key
    assert "test_scoring" not in expand("creditcard", "paper", seeds=[0])[0].kwargs


@needs_data
def test_user_blind_runs_on_fixed_silos_do_not_depend_on_the_allocation(monkeypatch):
    """The fact behind effective_arguments: DEFAULT and ULDP-NAIVE give the same bits under any users."""
    from uldp.simulation import RunConfig, run

    if not os.environ.get("ULDP_DATA_DIR"):
        monkeypatch.setenv("ULDP_DATA_DIR", str(DATA))
    base: dict[str, Any] = dict(
        dataset="tcga_brca",
        rounds=2,
        seed=3,
        local_lr=0.01,
        global_lr=1.0,
        local_epochs=2,
        batch_size=8,
        clip=0.1,
        sigma=1.0,
    )
    for method in ("DEFAULT", "ULDP-NAIVE"):
        runs = [
            run(RunConfig(method=method, n_users=n_users, distribution=distribution, **base))
            for n_users, distribution in ((50, "uniform"), (200, "zipf"))
        ]
        assert runs[0].test_loss == runs[1].test_loss and runs[0].c_index == runs[1].c_index
    group = [
        experiments.effective_arguments({**base, "method": "ULDP-GROUP-2", "n_users": n})
        for n in (50, 200)
    ]
    assert group[0] != group[1]  # a method that reads users keeps them


def test_user_blind_runs_under_the_uniform_allocation_do_not_depend_on_the_number_of_users(
    monkeypatch,
):
    """Without fixed silos: DEFAULT and ULDP-NAIVE under ``uniform`` give the same bits for any |U|, not under zipf."""
    from uldp.simulation import RunConfig, run

    if not os.environ.get("ULDP_DATA_DIR"):
        monkeypatch.setenv("ULDP_DATA_DIR", str(DATA))
    base: dict[str, Any] = dict(
        dataset="creditcard", rounds=2, seed=3, local_epochs=1, max_train_records=600
    )
    for method, distribution in (
        ("DEFAULT", "uniform"),
        ("ULDP-NAIVE", "uniform"),
        ("DEFAULT", "uniform-with-replacement"),
    ):
        runs = [
            run(RunConfig(method=method, n_users=n_users, distribution=distribution, **base))
            for n_users in (7, 90)
        ]
        assert runs[0].test_loss == runs[1].test_loss and runs[0].accuracy == runs[1].accuracy
        keys = {
            config_hash(
                experiments.effective_arguments(
                    {**base, "method": method, "n_users": n_users, "distribution": distribution}
                )
            )
            for n_users in (7, 90)
        }
        assert len(keys) == 1
    zipf = [
        run(RunConfig(method="DEFAULT", n_users=n_users, distribution="zipf", **base))
        for n_users in (7, 90)
    ]
    assert (
        zipf[0].test_loss != zipf[1].test_loss
    )  # under zipf a user's records choose their silos: no sharing
    assert (
        experiments.effective_arguments(
            {**base, "method": "DEFAULT", "n_users": 9, "distribution": "zipf"}
        )["n_users"]
        == 9
    )


def test_accountant_and_budget_change_only_the_private_runs_and_leave_the_paper_keys_alone():
    paper = expand("heart_disease", "paper", seeds=[0])
    assert expand("heart_disease", "paper", seeds=[0], accountant="rdp", epsilon=None) == paper
    assert all(
        "accountant" not in spec.kwargs and "target_epsilon" not in spec.kwargs for spec in paper
    )
    for changes in (
        {"accountant": "pld"},
        {"epsilon": 2.0},
        {"accountant": "pld", "epsilon": 2.0},
    ):
        other = expand("heart_disease", "paper", seeds=[0], **changes)
        assert [(s.panel, s.series, s.seed) for s in other] == [
            (s.panel, s.series, s.seed) for s in paper
        ]
        for before, after in zip(paper, other, strict=True):
            if before.kwargs["method"] == "DEFAULT":
                assert after == before
                continue
            assert after.key != before.key
            # the budget under the name stored runs give it, target_epsilon (their keys hash it)
            stored = {"epsilon": "target_epsilon"}
            expected = {**before.kwargs, **{stored.get(k, k): v for k, v in changes.items()}}
            if "epsilon" in changes:
                expected["sigma"] = None
            assert after.kwargs == expected
    with pytest.raises(ValueError, match="unknown accountant 'prv'"):
        expand("heart_disease", "paper", accountant="prv")
    with pytest.raises(ValueError, match="epsilon must be"):
        expand("heart_disease", "paper", epsilon=-1.0)
