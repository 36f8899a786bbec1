"""benchmarks/flower_loopback.py's weighing, without processes: a message weighs what Flower's transport sends (a
ConfigRecord as one object, an array in chunks of Flower's chunk size and a small header), a phase's bytes are the
most any one silo moved, the transport is read from the SuperLink's log, and each limit is cited from the installed
flwr file that sets it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from flwr.app import ArrayRecord, ConfigRecord, Message, RecordDict
from script_loader import load_script


def _script():
    return load_script("benchmarks/flower_loopback.py")


def test_a_config_record_is_one_object_and_an_array_goes_in_chunks():
    loopback = _script()
    limits = loopback.flower_limits()
    key = bytes(3 * limits["array_chunk_bytes"] // 2)  # a key message: bytes in a ConfigRecord
    model = np.zeros(limits["array_chunk_bytes"] // 2, dtype=np.float32)  # 2 chunks' worth of bytes

    def echo(message, context):
        return Message(RecordDict({"arrays": ArrayRecord([model])}), reply_to=message)

    grid = loopback.WeighingGrid(echo, [{"silo": "A"}, {"silo": "B"}])
    content = RecordDict({"uldp": ConfigRecord({"stage": "keys", "round": 0, "payloads": [key]})})
    replies = grid.send_and_receive(
        [grid.create_message(content, "query.uldp", node, "setup") for node in (101, 102)]
    )
    assert len(list(replies)) == 2 and len(grid.weighed) == 4
    received = [row for row in grid.weighed if row["direction"] == "received"]
    sent = [row for row in grid.weighed if row["direction"] == "sent"]
    assert all(len(key) < row["largest_object_bytes"] < len(key) + 1000 for row in received)
    assert all(
        model.nbytes < row["bytes"]
        and row["largest_object_bytes"] <= limits["array_chunk_bytes"] + 100
        for row in sent
    )
    summary = loopback.traffic(grid.weighed)
    assert summary["per_silo"]["set-up"]["received_bytes"] == received[0]["bytes"]
    assert summary["largest_object"]["stage"] == "keys"
    assert summary["largest_object"]["direction"] == "received"


def test_a_phase_counts_the_silo_that_moved_most():
    loopback = _script()
    rows = [
        {
            "phase": "round 1",
            "stage": "train",
            "silo": silo,
            "direction": direction,
            "bytes": size,
            "largest_object_bytes": size,
        }
        for silo, direction, size in (
            (1, "received", 10),
            (1, "received", 5),
            (2, "received", 12),
            (2, "sent", 3),
        )
    ]
    summary = loopback.traffic(rows)
    assert summary["per_silo"] == {"round 1": {"received_bytes": 15, "sent_bytes": 3}}
    assert summary["largest_object"]["largest_object_bytes"] == 12
    assert summary["largest_message_bytes"] == 12


def test_the_transport_and_limits_are_read_from_flower_itself():
    import flwr
    from flwr.common import GRPC_MAX_MESSAGE_LENGTH

    loopback = _script()
    assert (
        loopback.transport("INFO : Starting the SuperLink Fleet HTTP API on 127.0.0.1:9093.")
        == "HTTP API"
    )
    assert (
        loopback.transport("Flower Deployment Runtime: Starting Fleet API (gRPC-rere) on x")
        == "API (gRPC-rere)"
    )
    assert loopback.transport("nothing") == "not stated in the SuperLink's log"
    limits = loopback.flower_limits()
    assert limits["grpc_max_message_length_bytes"] == GRPC_MAX_MESSAGE_LENGTH
    site = Path(flwr.__file__).parents[1]
    for key, name in (
        ("grpc_max_message_length_source", "GRPC_MAX_MESSAGE_LENGTH"),
        ("array_chunk_source", "FLWR_PRIVATE_MAX_ARRAY_CHUNK_SIZE"),
        ("http_client_timeout_source", "timeout: float ="),
    ):
        assert name in (site / limits[key].split(" ")[0]).read_text(), key


@pytest.mark.parametrize(
    "argument, message",
    [
        (["--q", "2"], "--q must be a number in (0, 1], got 2.0"),
        (["--hospitals", "1"], "--hospitals must be an integer >= 2, got 1"),
        (["--patients", "3", "--hospitals", "4"], "--patients must be an integer >= 4, got 3"),
    ],
)
def test_a_bad_federation_is_refused_by_name_before_any_process_or_file(
    argument, message, monkeypatch, capsys, tmp_path
):
    loopback = _script()
    monkeypatch.setattr("sys.argv", ["flower_loopback.py", "--keep", str(tmp_path), *argument])
    with pytest.raises(SystemExit) as stopped:
        loopback.main()
    assert stopped.value.code == 2 and message in capsys.readouterr().err
    assert not list(tmp_path.iterdir())  # no run folder made
