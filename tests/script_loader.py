"""The scripts of the checkout that are not part of the package (``tools/``, ``benchmarks/``, ``examples/``), loaded
as modules for their tests."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def load_script(relative: str, *, siblings: bool = False) -> ModuleType:
    """Execute the script ``ROOT / relative`` as a new module named after its file.

    Args:
        relative: The script's path from the checkout's root, e.g. ``"tools/build_book.py"``.
        siblings: Put the script's folder on ``sys.path`` while it loads (a script that imports a sibling script).
    """
    path = ROOT / relative
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    if siblings:
        sys.path.insert(0, str(path.parent))
    try:
        spec.loader.exec_module(module)
    finally:
        if siblings:
            sys.path.remove(str(path.parent))
    return module
