"""The chapters of the book's ``_toc.yml``, root first, whether listed flat or in parts (shared by the tests)."""

from __future__ import annotations

from pathlib import Path

import yaml
from script_loader import load_script

ROOT = Path(__file__).resolve().parent.parent
build_book = load_script("tools/build_book.py")


def toc_chapters() -> list[str]:
    """Every file ``_toc.yml`` names, root first (:func:`tools.build_book.toc_entries`: the files the build runs)."""
    return build_book.toc_entries(yaml.safe_load((ROOT / "_toc.yml").read_text()))
