"""``uldp deploy``'s Flower app in process (uldp.deploy.app on LocalGrid, each silo's node config built by ``uldp
deploy silo``'s builder): a hospital's own table or a built-in dataset, the settings file's options (the union's group,
the collusion threshold) and its bad values; the runs equal uldp.fit under the private set union's user numbers.
``tests/test_deploy_flower.py`` runs the same app as real processes."""

from __future__ import annotations

import json

import numpy as np
import pytest
from deploy_runs import TABLE, fitted, run_in_process
from flower_hospitals import HOSPITALS, hospital_files  # noqa: F401  (fixture)
from torch import nn

import uldp.flower as uf
from uldp.deploy.app import AppSettings
from uldp.deploy.superlink import silo_node_config
from uldp.secure.psu import TEST_GROUP


def test_a_table_run_from_the_settings_file_equals_fit(hospital_files, tmp_path):  # noqa: F811
    """A hospital table run: each silo reads its own CSV, the node configs come from ``uldp deploy silo``'s builder;
    the model is fit's bit for bit (ULDP-AVG-w, q 0.8, the silos' INSECURE test seed), the epsilons fit's. The
    settings name the union's test group, so each silo's own copy of them consents to it."""
    data = {
        "table": TABLE,
        "psu_group": TEST_GROUP.name,
        "method": "ULDP-AVG-w",
        "rounds": 2,
        "seed": 5,
        "sigma": 1.0,
        "q": 0.8,
        "local_epochs": 2,
        "batch_size": 8,
        "secure": False,
        "insecure_reproducible_noise": True,
    }
    settings = AppSettings.from_json(data)
    config = tmp_path / "run.json"
    nodes = [
        {
            **silo_node_config(
                settings,
                config=config,
                silo_id=None,
                name=None,
                data=hospital_files / f"{h}.csv",
                relay_key=hospital_files / "key",
            ),
            "uldp-policy-epsilon": 100.0,
        }
        for h in HOSPITALS
    ]
    assert {node["silo"] for node in nodes} == set(HOSPITALS)
    assert all(node["uldp-insecure-reproducible-noise"] == 5 for node in nodes)
    assert all(node["uldp-insecure-test-keys"] is True for node in nodes)
    report, params, grid = run_in_process(data, tmp_path, nodes)
    contexts = {context.node_config["silo"]: context for context in grid.contexts.values()}
    assert all(
        b'"group": "insecure-test-256"' in bytes(c.state["uldp_psu"]["state"])  # type: ignore[arg-type]  # bytes here
        for c in contexts.values()
    )
    parts = [settings.load(contexts[h]) for h in sorted(HOSPITALS)]
    numbers = [
        uf.user_numbers(contexts[h], part.patient_ids)
        for h, part in zip(sorted(HOSPITALS), parts, strict=True)
    ]
    expected, history = fitted(settings, parts, numbers, nn.BCEWithLogitsLoss())
    np.testing.assert_array_equal(params, expected)
    assert report["epsilon"] == history.column("epsilon") and report["rounds_done"] == 2
    assert report["silos"] == sorted(HOSPITALS) and report["insecure_reproducible_noise"]


def test_a_deployed_silos_collusion_threshold_comes_from_its_policy_file_and_a_run_can_require_one(
    hospital_files,  # noqa: F811
    tmp_path,
):
    """Each silo's ``policy.json`` says how many silos colluding with the server its epsilon holds against
    (``"colluders"``, which scales its noise share: the model moves with it, under the same test seed); the
    server's report says whom the run's epsilons hold against; a ``run.json`` that needs more (``"min_colluders"``)
    stops at the set-up, naming the silos short of it."""
    data = {
        "table": TABLE,
        "psu_group": TEST_GROUP.name,
        "method": "ULDP-AVG",
        "rounds": 1,
        "seed": 5,
        "sigma": 1.0,
        "local_epochs": 1,
        "batch_size": 8,
        "secure": False,
        "insecure_reproducible_noise": True,
    }
    settings = AppSettings.from_json(data)

    def silos(colluders: int) -> list[dict]:
        policy = tmp_path / f"policy-{colluders}.json"
        policy.write_text(json.dumps({"colluders": colluders, "epsilon": 100.0}))
        return [
            silo_node_config(
                settings,
                config=tmp_path / f"run-{colluders}.json",
                silo_id=None,
                name=None,
                data=hospital_files / f"{h}.csv",
                relay_key=hospital_files / "key",
                policy=policy,
            )
            for h in HOSPITALS
        ]

    plain, plain_params, _ = run_in_process(data, tmp_path, silos(0))
    wary, wary_params, _ = run_in_process(data, tmp_path, silos(1))
    assert plain["colluders"] == 0 and wary["colluders"] == 1
    assert "colluding with up to 1 silo(s)" in wary["against"], wary["against"]
    assert not np.allclose(plain_params, wary_params)  # the silos' noise shares were scaled
    with pytest.raises(
        RuntimeError, match=r"silo\(s\) .+ hold against fewer than the run's min_colluders 2"
    ):
        run_in_process({**data, "min_colluders": 2}, tmp_path, silos(1))


def test_a_built_in_dataset_run_gives_each_silo_its_allocated_records(tmp_path):
    """A built-in dataset (the deploy settings file as before): silo s reads the records the seed's allocation gives
    it; the run equals fit on them (bit for bit) and the server evaluates each round on the test set."""
    from uldp.models import loss_function

    data = {
        "dataset": "synthetic",
        "method": "ULDP-AVG",
        "n_users": 8,
        "n_silos": 3,
        "rounds": 2,
        "seed": 3,
        "max_train_records": 120,
        "local_epochs": 1,
        "q": 0.7,
        "secure": False,
        "insecure_reproducible_noise": True,
    }
    settings = AppSettings.from_json(data)
    uf.write_key_file(tmp_path / "key")
    nodes = [
        silo_node_config(
            settings,
            config=tmp_path / "run.json",
            silo_id=s,
            name=None,
            data=None,
            relay_key=tmp_path / "key",
        )
        for s in range(3)
    ]
    report, params, grid = run_in_process(data, tmp_path, nodes)
    contexts = sorted(grid.contexts.values(), key=lambda context: context.node_config["silo"])
    parts = [settings.load(context) for context in contexts]
    assert sum(len(part.patient_ids) for part in parts) == 120
    numbers = [
        uf.user_numbers(c, part.patient_ids) for c, part in zip(contexts, parts, strict=True)
    ]
    expected, history = fitted(settings, parts, numbers, loss_function("synthetic"))
    np.testing.assert_array_equal(params, expected)
    assert report["epsilon"] == history.column("epsilon")
    assert all({"loss", "accuracy"} <= set(row) for row in report["rounds"])
    options = {
        "psu_group": "modp3072",
        "min_colluders": 1,
    }  # reach the strategy as a table run's do
    assert options.items() <= AppSettings.from_json({**data, **options}).strategy.items()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([1], "a JSON object"),
        (
            {"table": TABLE, "method": "ULDP-AVG", "rounds": 1, "colour": 1},
            r"unknown field\(s\) \['colour'\]",
        ),
        ({"table": {**TABLE, "classes": 1}, "method": "ULDP-AVG", "rounds": 1}, "table classes"),
        ({"table": TABLE, "rounds": 1}, "needs 'method' and 'rounds'"),
        (
            {
                "dataset": "synthetic",
                "method": "ULDP-AVG",
                "n_users": 4,
                "rounds": 1,
                "accountant": "pld",
            },
            "another accountant",
        ),
        (
            {"dataset": "synthetic", "method": "ULDP-AVG", "n_users": 4, "rounds": 1, "colour": 1},
            "colour",
        ),
        (
            {
                "dataset": "synthetic",
                "method": "ULDP-AVG",
                "n_users": 2,
                "n_silos": 2,
                "rounds": 1,
                "user_weights": [[0.5, 0.5], [0.5, 0.5]],
            },
            "fixed user_weights",
        ),
    ],
)
def test_bad_settings_are_refused_by_name(data, message):
    with pytest.raises(ValueError, match=message):
        AppSettings.from_json(data)


def test_the_silo_node_config_needs_its_data_and_both_of_identity_and_roster(tmp_path):
    uf.write_key_file(tmp_path / "key")
    table = AppSettings.from_json({"table": TABLE, "method": "ULDP-AVG", "rounds": 1})
    options = {"config": tmp_path / "run.json", "name": None, "relay_key": tmp_path / "key"}
    with pytest.raises(ValueError, match="--data FILE"):
        silo_node_config(table, silo_id=0, data=None, **options)
    with pytest.raises(ValueError, match="go together"):
        silo_node_config(
            table, silo_id=None, data=tmp_path / "a.csv", identity=tmp_path / "i", **options
        )
    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps({"epsilon": 3.0, "min_sigma": 2.0}))
    node = silo_node_config(table, silo_id=None, data=tmp_path / "a.csv", policy=policy, **options)
    assert node["uldp-policy-epsilon"] == 3.0 and node["uldp-policy-min-sigma"] == 2.0
    # a field the file does not name keeps the node's default (with a roster: malicious_server)
    assert "uldp-policy-malicious-server" not in node and "uldp-policy-colluders" not in node
    assert node["silo"] == "a" and node["uldp-ledger"].endswith("run.a.ledger.json")
    assert "uldp-allow-no-dp" not in node and "uldp-insecure-reproducible-noise" not in node
