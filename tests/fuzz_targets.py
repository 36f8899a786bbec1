"""Fuzz targets of the deployment's parsers: one hypothesis strategy and one check per parser (issue 25, item 4).

Each check feeds one generated input to a parser and accepts exactly two outcomes: a well-formed result (which, for
the byte formats, writes back to the same bytes) or a ``ValueError``; anything else (``struct.error``, ``KeyError``,
``TypeError``, a hang) fails. Inputs are mutations of valid encodings, resealed with a correct digest half of the
time so that the parser's checks behind the digest are reached, and arbitrary JSON where a parser reads JSON.

``tests/test_fuzz.py`` runs every target with a bounded number of examples (``make test``); ``tools/fuzz.py`` runs
them longer and reports the inputs fuzzed per parser.
"""

from __future__ import annotations

import hashlib
import json
import struct
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from hypothesis import strategies as st

from uldp.common import persist
from uldp.deploy.config import DeployConfig
from uldp.paper import experiments
from uldp.secure import messages

if TYPE_CHECKING:
    from collections.abc import Callable

DIGEST = 32
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=10,
)
_SCRATCH = Path(tempfile.mkdtemp(prefix="uldp-fuzz-"))


def reseal(body: bytes) -> bytes:
    """``body`` followed by its SHA-256 (what a well-formed array, message or checkpoint ends with)."""
    return body + hashlib.sha256(body).digest()


@st.composite
def mutated(draw: Any, valid: st.SearchStrategy[bytes]) -> bytes:
    """A valid encoding with a few byte flips, insertions, deletions or a truncation before its digest (half of them in
    the first 17 bytes, where the type, dimensions and lengths are), then resealed (half of the time) or followed by
    its original digest."""
    data = draw(valid)
    body = bytearray(data[:-DIGEST])
    for _ in range(draw(st.integers(0, 4))):
        last = max(len(body) - 1, 0)
        position = draw(
            st.integers(0, min(last, 16)) | st.integers(0, last)
        )  # headers (type, sizes) half the time
        action = draw(st.sampled_from(["flip", "insert", "delete", "truncate", "set"]))
        if action == "flip" and body:
            body[position] ^= 1 << draw(st.integers(0, 7))
        elif action == "insert":
            body[position:position] = draw(st.binary(min_size=1, max_size=9))
        elif action == "delete" and body:
            del body[position : position + draw(st.integers(1, 9))]
        elif action == "truncate":
            del body[position:]
        elif action == "set" and body:
            body[position] = draw(st.sampled_from([0, 1, 2, 0x7F, 0x80, 0xFF]))
    return reseal(bytes(body)) if draw(st.booleans()) else bytes(body) + data[-DIGEST:]


# --- wire arrays --------------------------------------------------------------------------------------------------
def _array_bytes(dtype: type, shape: tuple[int, ...], seed: int) -> bytes:
    rng = np.random.default_rng(seed)
    values = rng.normal(size=shape).astype(dtype) if dtype != np.bool_ else rng.random(shape) < 0.5
    return persist.array_to_bytes(values)


VALID_ARRAYS = st.builds(
    _array_bytes,
    st.sampled_from([np.float32, np.float64, np.int64, np.bool_]),
    st.lists(st.integers(0, 4), max_size=3).map(tuple),
    st.integers(0, 9),
)
ARRAYS = mutated(VALID_ARRAYS) | st.binary(max_size=80)


def writes_back(parse: Callable[[bytes], Any], encode: Callable[[Any], bytes], data: bytes) -> None:
    """A byte format's check: ``data`` is refused (``ValueError``) or parses to what encodes to ``data`` again."""
    try:
        value = parse(data)
    except ValueError:
        return
    assert encode(value) == data


def check_array(data: bytes) -> None:
    writes_back(persist.array_from_bytes, persist.array_to_bytes, data)


# --- Protocol 1 messages ------------------------------------------------------------------------------------------
_INTS = st.lists(st.integers(0, 2**80), max_size=4).map(tuple)
_U32 = st.integers(0, 2**32 - 1)
VALID_MESSAGES = st.one_of(
    st.builds(messages.PublicKeyMessage, st.integers(0, 2**600)),
    st.builds(messages.DhPublicKeyMessage, _U32, st.binary(max_size=32)),
    st.builds(messages.DhDirectoryMessage, st.lists(st.binary(max_size=8), max_size=3).map(tuple)),
    st.builds(
        messages.SealedMessage,
        _U32,
        _U32,
        _U32,
        _U32,
        st.binary(max_size=12),
        st.binary(max_size=20),
    ),
    st.builds(messages.BlindedHistogramMessage, _U32, _INTS),
    st.builds(messages.EncryptedWeightsMessage, _U32, _INTS),
    st.builds(messages.MaskedUpdateMessage, _U32, _U32, _U32, _INTS),
    st.builds(messages.RescaleRequestMessage, _U32, _U32, _INTS),
    st.builds(messages.RescaledWeightsMessage, _U32, _INTS),
    st.builds(
        messages.RingPedersenMessage,
        _U32,
        st.binary(max_size=32),
        *[st.integers(0, 2**80)] * 3,
        _INTS,
        _INTS,
    ),
    st.builds(
        messages.ModulusProofMessage,
        _U32,
        st.integers(0, 2**80),
        st.integers(0, 2**80),
        *[_INTS] * 4,
        *[st.integers(0, 2**80)] * 5,
        *[st.integers(-(2**80), 2**80)] * 6,
    ),
).map(lambda message: message.to_bytes())
MESSAGES = mutated(VALID_MESSAGES) | st.binary(max_size=80)


def check_message(data: bytes) -> None:
    writes_back(messages.parse_message, lambda message: message.to_bytes(), data)


# --- checkpoints --------------------------------------------------------------------------------------------------
_HEADER = st.one_of(
    JSON.map(lambda value: json.dumps(value).encode()),
    st.builds(
        lambda rounds, history: json.dumps(
            {"rounds_done": rounds, "config_fingerprint": "f", "history": history}
        ).encode(),
        JSON,
        JSON,
    ),
    st.binary(max_size=40),
)
CHECKPOINTS = st.builds(
    lambda header, length_delta, params, sealed: (lambda body: reseal(body) if sealed else body)(
        persist.MAGIC
        + struct.pack("<I", max(0, len(header) + length_delta) % 2**32)
        + header
        + params
    ),
    _HEADER,
    st.sampled_from([0, 0, 0, -1, 1, 2**20]),
    mutated(VALID_ARRAYS),
    st.booleans(),
) | st.binary(max_size=80)


def check_checkpoint(data: bytes) -> None:
    path = _SCRATCH / "model.ckpt"
    path.write_bytes(data)
    try:
        loaded = persist.load_checkpoint(path, config_fingerprint="f", like=np.zeros(3, np.float32))
    except ValueError:
        return
    assert loaded is not None  # the file exists
    assert loaded.rounds_done == len(loaded.history) and loaded.params.shape == (3,)


# --- key files ----------------------------------------------------------------------------------------------------
KEY_FILES = st.one_of(
    st.binary(max_size=80),
    st.text(max_size=80).map(str.encode),
    st.binary(min_size=0, max_size=40).map(lambda key: key.hex().encode() + b"\n"),
)


def check_key_file(data: bytes) -> None:
    """The silos' relay key file (``uldp deploy keys``, read by every SuperNode's ClientApp)."""
    from uldp.flower.pseudonyms import read_key_file

    path = _SCRATCH / "relay.key"
    path.write_bytes(data)
    try:
        key = read_key_file(path)
    except ValueError:
        return
    assert isinstance(key, bytes) and len(key) >= 32


# --- deployment configurations ------------------------------------------------------------------------------------
_BASE = {"dataset": "synthetic", "method": "ULDP-AVG-w", "n_users": 8, "rounds": 2, "seed": 0}
_FIELDS = sorted(
    {
        *_BASE,
        "n_silos",
        "q",
        "sigma",
        "clip",
        "secure",
        "user_weights",
        "local_epochs",
        "protocol",
        "insecure_reproducible_noise",
        "max_train_records",
        "distribution",
        "bogus",
        "table",
    }
)
_PROTOCOL = st.dictionaries(
    st.sampled_from(["key_bits", "precision", "n_max", "insecure_test_key", "bits"]),
    JSON | st.integers(0, 5000),
    max_size=4,
)
#: A hospital table's run (``"table"``: its columns and model), the other kind of settings file.
_TABLE_BASE = {
    "table": {"id_column": "id", "label_column": "y", "feature_columns": ["a", "b"], "hidden": [4]},
    "method": "ULDP-AVG",
    "rounds": 1,
}
_TABLE = st.dictionaries(
    st.sampled_from(["id_column", "label_column", "feature_columns", "classes", "hidden", "bogus"]),
    JSON | st.lists(st.text(max_size=4), max_size=3) | st.lists(st.integers(-2, 9), max_size=3),
    max_size=5,
)
CONFIGS = (
    st.builds(
        lambda changes: {**_BASE, **changes},
        st.dictionaries(st.sampled_from(_FIELDS), JSON | _PROTOCOL, max_size=4),
    )
    | st.builds(
        lambda changes: {**_TABLE_BASE, **changes},
        st.dictionaries(
            st.sampled_from(
                ["table", "method", "rounds", "sigma", "epsilon", "seed", "q", "bogus"]
            ),
            JSON | _TABLE,
            max_size=3,
        ),
    )
    | JSON
)


def check_config(data: Any) -> None:
    """``uldp deploy``'s settings file: a built-in dataset's run configuration (which writes back to itself) or a
    table run."""
    from uldp.deploy.app import AppSettings

    try:
        settings = AppSettings.from_json(data)
    except ValueError:
        return
    assert (settings.deploy is None) == (settings.table is not None)
    if settings.deploy is not None:
        config = settings.deploy
        assert DeployConfig.from_json(json.loads(json.dumps(config.to_json()))) == config


# --- stored results -----------------------------------------------------------------------------------------------
_SPEC = experiments.expand("user_sampling", "paper", seeds=[0])[0]
_VALID_RESULT = {
    "schema": experiments.SCHEMA_VERSION,
    "key": _SPEC.key,
    "grid": _SPEC.grid,
    "panel": _SPEC.panel,
    "series": _SPEC.series,
    "seed": _SPEC.seed,
    "params": _SPEC.kwargs,
    "config": {},
    "result": {"test_loss": [1.0]},
    "provenance": {"date": "2026-01-01", "wall_seconds": 1.0},
}
RESULTS = (
    st.builds(
        lambda changes: {**_VALID_RESULT, **changes},
        st.dictionaries(st.sampled_from(sorted(_VALID_RESULT)), JSON, max_size=3),
    )
    | JSON
)


def check_result(payload: Any) -> None:
    path = _SCRATCH / "grid" / f"{_SPEC.key}.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(payload))
    try:
        stored = experiments.read_result(path)
    except ValueError as error:
        assert str(path) in str(error)
        return
    assert stored is None or stored.key == _SPEC.key


#: Every fuzz target: name -> (strategy, check).
TARGETS: dict[str, tuple[st.SearchStrategy, Callable[[Any], None]]] = {
    "wire array": (ARRAYS, check_array),
    "protocol message": (MESSAGES, check_message),
    "checkpoint": (CHECKPOINTS, check_checkpoint),
    "key file": (KEY_FILES, check_key_file),
    "deployment configuration": (CONFIGS, check_config),
    "stored result": (RESULTS, check_result),
}
