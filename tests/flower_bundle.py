"""The pyproject.toml of a Flower app bundle for the tests that run a real SuperLink (one shape, several apps)."""

from __future__ import annotations


def pyproject(name: str, module: str, description: str, config: str) -> str:
    """A Flower app's pyproject: project ``name``, ServerApp ``module:server`` and ClientApp ``module:client``, and
    ``config`` as the body of its ``[tool.flwr.app.config]`` table (TOML lines)."""
    return f'''
[build-system]
requires = ["hatchling"]
build-backend = "hatchling.build"

[project]
name = "{name}"
version = "1.0.0"
description = "{description}"
license = "MIT"
dependencies = []

[tool.flwr.app]
publisher = "uldp"

[tool.flwr.app.components]
serverapp = "{module}:server"
clientapp = "{module}:client"

[tool.flwr.app.config]
{config}
'''
