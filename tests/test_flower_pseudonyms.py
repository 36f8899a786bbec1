"""uldp.flower.pseudonyms: the silos' relay key file is readable by its owner alone and never overwritten."""

from __future__ import annotations

import os

import pytest

import uldp.flower as uf


def test_key_files_are_private_and_never_overwritten(tmp_path):
    key = uf.write_key_file(tmp_path / "key")
    assert uf.read_key_file(tmp_path / "key") == key
    assert os.stat(tmp_path / "key").st_mode & 0o077 == 0
    with pytest.raises(ValueError, match="exists already"):
        uf.write_key_file(tmp_path / "key")
