"""Tests of uldp.common.persist: the array encoding, configuration fingerprints and checkpoints (atomic, resumable), the
formats that the simulation and the deployment share."""

from __future__ import annotations

import hashlib
import json
import struct

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

from uldp.common import atomic, persist


# --- array encoding ----------------------------------------------------------------------------------------------
@settings(max_examples=25)
@given(
    hnp.arrays(
        dtype=st.sampled_from([np.float32, np.float64, np.int64, np.bool_]),
        shape=hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=5),
    )
)
def test_array_bytes_round_trip_keeps_dtype_shape_and_bits(values: np.ndarray) -> None:
    restored = persist.array_from_bytes(persist.array_to_bytes(values))
    assert restored.dtype == values.dtype and restored.shape == values.shape
    assert restored.tobytes() == values.tobytes()  # bit-exact, NaNs included


def test_array_bytes_reject_corruption_truncation_and_other_dtypes() -> None:
    data = bytearray(persist.array_to_bytes(np.arange(4.0)))
    data[20] ^= 1
    with pytest.raises(ValueError, match="digest"):
        persist.array_from_bytes(bytes(data))
    with pytest.raises(ValueError, match="malformed"):
        persist.array_from_bytes(persist.array_to_bytes(np.arange(4.0))[:-40])
    with pytest.raises(ValueError, match="dtype"):
        persist.array_to_bytes(np.arange(3, dtype=np.int16))


def test_array_bytes_are_the_documented_layout() -> None:
    """The format written byte by byte from its description (magic, dtype code, ndim, u64 shape, little-endian
    data, SHA-256), independently of the encoder: files and messages of earlier versions stay readable."""
    values = np.array([[1.5, -2.0, 0.25], [3.0, 0.0, -0.5]], dtype=np.float64)
    body = b"ULDA" + bytes([2, 2]) + (2).to_bytes(8, "little") + (3).to_bytes(8, "little")
    body += b"".join(struct.pack("<d", v) for v in values.ravel())
    assert persist.array_to_bytes(values) == body + hashlib.sha256(body).digest()
    flags = np.array([True, False])
    body = b"ULDA" + bytes([4, 1]) + (2).to_bytes(8, "little") + b"\x01\x00"
    assert persist.array_to_bytes(flags) == body + hashlib.sha256(body).digest()


def test_big_endian_arrays_are_written_little_endian() -> None:
    values = np.arange(5, dtype=">f8")
    assert np.array_equal(persist.array_from_bytes(persist.array_to_bytes(values)), values)


def test_fingerprint_changes_with_any_field() -> None:
    base = {"dataset": "heart_disease", "rounds": 2, "sigma": 1.0}
    assert persist.fingerprint(base) == persist.fingerprint(dict(reversed(list(base.items()))))
    for key, value in (("rounds", 3), ("sigma", 1.0000001), ("dataset", "tcga_brca")):
        assert persist.fingerprint({**base, key: value}) != persist.fingerprint(base)


# --- checkpoints -----------------------------------------------------------------------------------------------
def _checkpoint(rounds: int = 2) -> persist.Checkpoint:
    return persist.Checkpoint(
        rounds,
        np.arange(6, dtype=np.float32) / 7,
        "f" * 64,
        tuple({"round": r} for r in range(1, rounds + 1)),
    )


def test_checkpoint_round_trip(tmp_path) -> None:
    path = tmp_path / "run" / "model.ckpt"
    assert persist.load_checkpoint(path, config_fingerprint="f" * 64) is None
    persist.save_checkpoint(path, _checkpoint())
    loaded = persist.load_checkpoint(path, config_fingerprint="f" * 64)
    assert loaded is not None
    assert loaded.rounds_done == 2 and loaded.history == ({"round": 1}, {"round": 2})
    assert loaded.params.dtype == np.float32 and np.array_equal(loaded.params, _checkpoint().params)


def test_checkpoint_file_is_the_documented_layout(tmp_path) -> None:
    """b"ULDPCKPT", u32 header length, the JSON header, the model's array bytes, SHA-256 of all before it."""
    path = tmp_path / "model.ckpt"
    persist.save_checkpoint(path, _checkpoint())
    header = json.dumps(
        {"rounds_done": 2, "config_fingerprint": "f" * 64, "history": [{"round": 1}, {"round": 2}]}
    ).encode()
    model = np.arange(6, dtype=np.float32) / 7
    array = b"ULDA" + bytes([1, 1]) + (6).to_bytes(8, "little") + model.astype("<f4").tobytes()
    body = (
        b"ULDPCKPT"
        + struct.pack("<I", len(header))
        + header
        + array
        + hashlib.sha256(array).digest()
    )
    assert path.read_bytes() == body + hashlib.sha256(body).digest()


def test_checkpoint_refuses_corruption_and_other_configurations(tmp_path) -> None:
    path = tmp_path / "model.ckpt"
    persist.save_checkpoint(path, _checkpoint())
    with pytest.raises(ValueError, match="another configuration"):
        persist.load_checkpoint(path, config_fingerprint="0" * 64)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="corrupted"):
        persist.load_checkpoint(path, config_fingerprint="f" * 64)


def test_a_crash_while_writing_keeps_the_previous_checkpoint(tmp_path, monkeypatch) -> None:
    path = tmp_path / "model.ckpt"
    persist.save_checkpoint(path, _checkpoint(1))

    def crash(*_args: object) -> None:
        raise OSError("power cut")

    monkeypatch.setattr(atomic.os, "replace", crash)
    with pytest.raises(OSError, match="power cut"):
        persist.save_checkpoint(path, _checkpoint(2))
    monkeypatch.undo()
    loaded = persist.load_checkpoint(path, config_fingerprint="f" * 64)
    assert loaded is not None and loaded.rounds_done == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "model.ckpt"
    ]  # no temporary file left behind
