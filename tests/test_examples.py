"""examples/hospitals: the Flower app, its pyproject and its launcher fit together as a user copies them.

The processes themselves (SuperLink, SuperNodes, flwr run) are exercised on loopback by tests/test_flower_loopback.py;
running the launcher takes minutes, so here the pieces are checked: the components the pyproject names exist and are
a ServerApp and a ClientApp, every run-config key the app reads is declared, and the launcher starts."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pandas as pd
import pytest
from script_loader import load_script

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "hospitals"


def test_the_pyproject_names_the_apps_and_declares_every_run_config_key():
    from flwr.clientapp import ClientApp
    from flwr.serverapp import ServerApp

    project = tomllib.loads((EXAMPLE / "pyproject.toml").read_text())
    app = load_script("examples/hospitals/hospital_app.py")
    components = project["tool"]["flwr"]["app"]["components"]
    assert isinstance(getattr(app, components["serverapp"].split(":")[1]), ServerApp)
    assert isinstance(getattr(app, components["clientapp"].split(":")[1]), ClientApp)
    read = set(
        re.findall(r'(?<!node_)config\["(\w+)"\]', (EXAMPLE / "hospital_app.py").read_text())
    )
    assert read <= set(project["tool"]["flwr"]["app"]["config"])
    assert "uldp[deploy]" in project["project"]["dependencies"]


def test_the_apps_strategy_takes_what_uldp_flower_run_sets_in_its_run_config():
    """``uldp flower-run --hidden-sample --colluders T --psu-group NAME`` set run config keys the example declares
    and passes to its UldpStrategy."""
    from uldp.flower.cli import COLLUDERS_KEY, HIDDEN_SAMPLE_KEY, PSU_GROUP_KEY

    config = tomllib.loads((EXAMPLE / "pyproject.toml").read_text())["tool"]["flwr"]["app"][
        "config"
    ]
    assert {HIDDEN_SAMPLE_KEY, COLLUDERS_KEY, PSU_GROUP_KEY} <= set(config)
    app = load_script("examples/hospitals/hospital_app.py")
    assert app.make_strategy(config).psu_group == "modp2048"
    chosen = app.make_strategy({**config, PSU_GROUP_KEY: "modp3072", COLLUDERS_KEY: 1})
    assert chosen.psu_group == "modp3072" and chosen.min_colluders == 1


def test_the_launcher_starts_and_explains_itself():
    done = subprocess.run(
        [sys.executable, str(EXAMPLE / "launch.py"), "--help"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "SuperLink" in done.stdout and "--rounds" in done.stdout


def test_a_hospital_that_fails_stops_the_run_with_its_name_and_exit_status_1(tmp_path, capsys):
    """The launcher on real processes (a SuperLink, four SuperNodes and their workers on loopback; run it under
    ``flock /tmp/uldp-ports.lock``): one hospital's CSV lacks the outcome column. The run stops before any round
    with that hospital's name and cause, ``uldp flower-run`` exits 1 and no model is written (it used to train on
    the other three and exit 0)."""
    spec = importlib.util.spec_from_file_location("launch", EXAMPLE / "launch.py")
    assert spec is not None and spec.loader is not None
    launch = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(launch)
    data = tmp_path / "data"
    data.mkdir()
    launch.demo_data(data, patients=60, records=200)
    broken = data / "Hospital B.csv"
    pd.read_csv(broken).drop(columns="outcome").to_csv(broken, index=False)
    with pytest.raises(SystemExit) as stopped:
        launch.run(data, tmp_path / "work", rounds=1, sigma=5.0, q=1.0, secure=False)
    said = str(stopped.value.code)
    assert (
        "finished:failed" in said
        and "silo 'Hospital B' failed: ValueError:" in said
        and "no column(s) ['outcome']" in said
    ), said
    assert not (tmp_path / "work" / "model.pt").exists()
    assert "round 1/1" not in capsys.readouterr().out  # the streamed ServerApp log: no round ran


def test_the_example_has_a_readme_the_main_readme_links_naming_every_run_config_key():
    readme = (EXAMPLE / "README.md").read_text()
    assert "(examples/hospitals/README.md)" in (EXAMPLE.parents[1] / "README.md").read_text()
    config = tomllib.loads((EXAMPLE / "pyproject.toml").read_text())["tool"]["flwr"]["app"][
        "config"
    ]
    assert all(f"`{key}`" in readme for key in config), sorted(config)
