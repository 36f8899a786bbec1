"""The chapters of the book's ``_toc.yml``, root first, whether listed flat or in parts (shared by the tests)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("build_book", ROOT / "tools" / "build_book.py")
assert _spec is not None and _spec.loader is not None
build_book = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(build_book)


def toc_chapters() -> list[str]:
    """Every file ``_toc.yml`` names, root first (:func:`tools.build_book.toc_entries`: the files the build runs)."""
    return build_book.toc_entries(yaml.safe_load((ROOT / "_toc.yml").read_text()))
