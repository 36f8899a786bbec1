"""Which extra of ``pip install 'uldp[...]'`` installs an optional package, and the one line that says so.

The extras match roles (pyproject.toml): ``silo`` and ``server`` (a hospital's machine in a federation: Protocol 1,
its lattice backend and Flower, no Jupyter and no plotting), ``secure``, ``lattice``, ``deploy`` (their parts),
``survival`` (lifelines, for a Cox model's c-index), ``paper`` (the reproduction's figures and survival data),
``book``, ``lab`` and ``all``. A command that meets a missing optional package says so in one line instead of a
traceback (:func:`missing_extra`, read by ``uldp.cli.main``).

>>> missing_extra(ModuleNotFoundError("No module named 'gmpy2'", name="gmpy2"))
"needs the optional package 'gmpy2': pip install 'uldp[secure]' (or 'uldp[all]')"
>>> missing_extra(ModuleNotFoundError("No module named 'yaml'", name="yaml")) is None
True
"""

from __future__ import annotations

#: Top-level module -> the extra that installs it (the smallest one).
EXTRA_OF_MODULE = {
    "phe": "secure",
    "gmpy2": "secure",
    "cryptography": "secure",
    "tenseal": "lattice",
    "flwr": "deploy",
    "grpc": "deploy",
    "lifelines": "survival",
    "matplotlib": "paper",
    "PIL": "paper",
    "jupytext": "book",
    "papermill": "book",
    "jupyter_book": "book",
}


def missing_extra(error: ModuleNotFoundError) -> str | None:
    """One line naming the missing package and the extra that installs it; None for a module no extra provides
    (a real bug, which should keep its traceback)."""
    module = (error.name or "").split(".")[0]
    extra = EXTRA_OF_MODULE.get(module)
    if extra is None:
        return None
    return f"needs the optional package {module!r}: pip install 'uldp[{extra}]' (or 'uldp[all]')"
