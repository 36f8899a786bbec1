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

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "hospitals"


def test_the_pyproject_names_the_apps_and_declares_every_run_config_key():
    from flwr.clientapp import ClientApp
    from flwr.serverapp import ServerApp

    project = tomllib.loads((EXAMPLE / "pyproject.toml").read_text())
    spec = importlib.util.spec_from_file_location("hospital_app", EXAMPLE / "hospital_app.py")
    assert spec is not None and spec.loader is not None
    app = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(app)
    components = project["tool"]["flwr"]["app"]["components"]
    assert isinstance(getattr(app, components["serverapp"].split(":")[1]), ServerApp)
    assert isinstance(getattr(app, components["clientapp"].split(":")[1]), ClientApp)
    read = set(
        re.findall(r'(?<!node_)config\["(\w+)"\]', (EXAMPLE / "hospital_app.py").read_text())
    )
    assert read <= set(project["tool"]["flwr"]["app"]["config"])
    assert "uldp[deploy]" in project["project"]["dependencies"]


def test_the_launcher_starts_and_explains_itself():
    done = subprocess.run(
        [sys.executable, str(EXAMPLE / "launch.py"), "--help"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "SuperLink" in done.stdout and "--rounds" in done.stdout
