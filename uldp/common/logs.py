"""uldp never configures the root logger, and undoes what a dependency's import does to it.

A library leaves logging configuration to the application: it logs to its own named loggers and never calls
``logging.basicConfig``. Opacus does, at import time (``opacus/utils/module_utils.py``, opacus 1.6): the first
``import opacus`` (which the accountant needs when it solves sigma, and DP-SGD when it trains) adds a stream handler
to the root logger, so every log line of an application that configured its own handler printed twice.
:func:`import_quietly` imports such a module and restores the root logger's handlers and level.
"""

from __future__ import annotations

import importlib
import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from types import ModuleType


def import_quietly(name: str) -> ModuleType:
    """``importlib.import_module(name)``, with the root logger's handlers and level as they were before.

    Example:
        >>> import_quietly("json").dumps([1])
        '[1]'
    """
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        return importlib.import_module(name)
    finally:
        for handler in [h for h in root.handlers if h not in handlers]:
            root.removeHandler(handler)
        root.setLevel(level)
