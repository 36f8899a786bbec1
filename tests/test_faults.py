"""Faults injected into a federation on Flower (issue 36), the strategy and the silos' ClientApps on a LocalGrid:
a SuperNode killed and back under a new node id, a stalled SuperNode, silos missing at the start, a full disk, the
ServerApp killed mid-round, a resubmitted run. Each test checks that nothing is lost (the last good model and every
completed round stay in the checkpoint) and that no release goes unaccounted (every round index asked is in the
epsilon history, aborted or not, and never asked again). ``benchmarks/faults.py`` injects faults into real
processes of ``uldp deploy``; ``uldp deploy silo``'s wait for its SuperLink is tested here with its SuperNode
stood in for.
"""

from __future__ import annotations

import errno
import json
import logging
import shutil
import sys
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from flower_hospitals import (  # noqa: F401  (a fixture)
    ALLOW_TEST_KEYS,
    HOSPITALS,
    TEST_KEYS,
    hospital_files,
    load as flower_load,
    model as flower_model,
)
from torch import nn

import uldp
import uldp.flower as uf
from uldp.accounting import epsilon_uldp
from uldp.common import persist
from uldp.common.persist import IN_FLIGHT
from uldp.flower.local import LocalGrid
from uldp.flower.recovery import strategy_fingerprint
from uldp.secure.psu import TEST_GROUP

# --- the Flower strategy (uldp.flower.recovery), on LocalGrid ------------------------------------------------------
FLOWER: dict[str, Any] = {
    "method": "ULDP-AVG-w",
    "sigma": 1.0,
    "q": 0.8,
    "local_epochs": 1,
    "batch_size": 8,
    "seed": 5,
    # Protocol 1's small test keys: the faults, not the key sizes, are under test (3072-bit keys were 25 s a run)
    "protocol": TEST_KEYS,
    "psu_group": TEST_GROUP.name,
}


class Hospitals:
    """The three hospitals' SuperNodes on a LocalGrid; ``kill`` = {(silo name, round): new node id} makes that
    silo's ClientApp fail in that round and its SuperNode come back under the new id (an empty context)."""

    def __init__(
        self, files, *, kill: dict | None = None, first_node: int = 101, names=HOSPITALS
    ) -> None:
        from flwr.app import Context, RecordDict

        self.context_type, self.records_type = Context, RecordDict
        self.app = uf.silo_client_app(flower_load, flower_model, nn.CrossEntropyLoss())
        self.configs = {
            name: {
                "silo": name,
                "uldp-key-file": str(files / "key"),
                "data": str(files / f"{name}.csv"),
                **ALLOW_TEST_KEYS,
            }
            for name in names
        }
        self.grid = LocalGrid(self._answer, list(self.configs.values()))
        self.grid.contexts = {
            first_node + i: self._context(first_node + i, name) for i, name in enumerate(names)
        }
        self.kill = dict(kill or {})
        self.asked: list[
            tuple[str, int]
        ] = []  # (silo, round) of every train message a ClientApp received

    def _context(self, node: int, name: str):
        return self.context_type(
            run_id=1,
            node_id=node,
            node_config=self.configs[name],
            state=self.records_type(),
            run_config={},
        )

    def _answer(self, message, context):
        name = context.node_config["silo"]
        if message.metadata.message_type == "train":
            round_index = int(message.metadata.group_id)
            self.asked.append((name, round_index))
            new_node = self.kill.pop((name, round_index), None)
            if new_node is not None:
                del self.grid.contexts[message.metadata.dst_node_id]
                self.grid.contexts[new_node] = self._context(new_node, name)
                raise RuntimeError("SuperNode killed")
        return self.app(message, context)

    def run(self, rounds: int = 2, timeout: float = 600.0, **arguments):
        from flwr.app import ArrayRecord

        strategy = uf.UldpStrategy(**{**FLOWER, **arguments})
        initial = ArrayRecord([uldp.flat_parameters(flower_model()).numpy()])
        return strategy, strategy.start(self.grid, initial, num_rounds=rounds, timeout=timeout)


def _flower_epsilons(releases: int) -> list[float]:
    return [
        epsilon_uldp(sigma=FLOWER["sigma"], rounds=t, delta=1e-5, q=FLOWER["q"]).epsilon
        for t in range(1, releases + 1)
    ]


def test_a_killed_supernode_is_taken_back_under_its_new_node_id_and_its_round_counts(
    hospital_files,
    tmp_path,
) -> None:
    """St Mary's SuperNode dies in round 2 and comes back as node 202: the strategy records round 2 as an aborted
    release (Royal and General answered), takes St Mary back by name and completes rounds 3, without asking round 2
    again; the epsilon history counts 3 releases."""
    hospitals = Hospitals(hospital_files, kill={("St Mary", 2): 202})
    strategy, result = hospitals.run(checkpoint=tmp_path / "flower.ckpt", silos=HOSPITALS)
    assert strategy.silo_names[202] == "St Mary" and 102 not in strategy.nodes
    assert strategy.epsilons == pytest.approx(_flower_epsilons(3), rel=1e-12)
    assert sorted(result.train_metrics_clientapp) == [1, 3]
    asked = {name: [t for silo, t in hospitals.asked if silo == name] for name in HOSPITALS}
    assert asked == {name: [1, 2, 3] for name in HOSPITALS}  # each round index once per silo
    saved = persist.load_checkpoint(
        tmp_path / "flower.ckpt", config_fingerprint=strategy_fingerprint(strategy)
    )
    assert saved is not None and saved.rounds_done == 3
    assert (
        saved.history[1]["answered"] == ["General", "Royal"]
        and "'St Mary'" in saved.history[1]["aborted"]
    )
    np.testing.assert_array_equal(saved.params, result.arrays.to_numpy_ndarrays()[0])


def test_a_resubmitted_flower_run_resumes_at_the_next_round_index(hospital_files, tmp_path) -> None:
    """With no recovery allowed, a failed round 2 stops the run (it says where it will resume); the run submitted
    again, its SuperNodes under other node ids, resumes at round 3 from the checkpoint with every release counted."""
    checkpoint = tmp_path / "flower.ckpt"
    first = Hospitals(hospital_files, kill={("General", 2): 999})
    with pytest.raises(RuntimeError, match=r"1 rounds aborted .*run again to resume at round 3"):
        first.run(checkpoint=checkpoint, max_aborted_rounds=0)
    again = Hospitals(hospital_files, first_node=301)
    strategy, result = again.run(checkpoint=checkpoint)
    assert sorted(again.asked) == sorted((name, 3) for name in HOSPITALS)
    assert strategy.epsilons == pytest.approx(_flower_epsilons(3), rel=1e-12)
    assert sorted(result.train_metrics_clientapp) == [3]


#: The strategy's settings of the checkpoint tests: the ledger, not the aggregation, is what they exercise.
PLAIN: dict[str, Any] = {"method": "ULDP-AVG", "secure": False, "protocol": None}


@pytest.mark.parametrize("failing_write, accounted", [(3, 1), (4, 2)])
def test_a_full_disk_names_the_path_and_loses_no_release(
    failing_write, accounted, hospital_files, tmp_path, monkeypatch
) -> None:
    """The checkpoint is written before each round (its in-flight record) and after it. The disk fills up at the
    write before round 2 (nothing of round 2 goes out) or after every silo answered round 2 (the in-flight record
    on disk already counts it). Either way the run stops naming the path, and the resubmitted run continues after
    the last round index on disk: round 2 is never asked twice."""
    checkpoint = tmp_path / "flower.ckpt"
    real_save, writes = persist.save_checkpoint, []

    def save(path, saved):
        writes.append(saved.rounds_done)
        if len(writes) == failing_write:
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        real_save(path, saved)

    monkeypatch.setattr(persist, "save_checkpoint", save)
    full = Hospitals(hospital_files)
    with pytest.raises(persist.CheckpointFailed, match=f"{checkpoint}: No space left on device"):
        full.run(checkpoint=checkpoint, **PLAIN)
    assert max(t for _, t in full.asked) == accounted  # round 2 went out only once it was on disk
    monkeypatch.setattr(persist, "save_checkpoint", real_save)
    again = Hospitals(hospital_files, first_node=301)
    strategy, _ = again.run(checkpoint=checkpoint, **PLAIN)
    assert {t for _, t in again.asked} == {
        accounted + 1
    }  # the disk counted `accounted`: none asked twice
    assert strategy.epsilons == pytest.approx(_flower_epsilons(accounted + 1), rel=1e-12)


def test_a_serverapp_killed_mid_round_leaves_the_round_counted(hospital_files, tmp_path) -> None:
    """What a ServerApp killed while round 2 runs leaves on disk (copied as the first silo receives round 2) counts
    round 2 as in flight, with the epsilon of 2 releases; a run started from it continues at round 3."""
    checkpoint, left = tmp_path / "flower.ckpt", tmp_path / "left-by-the-killed-serverapp.ckpt"
    hospitals = Hospitals(hospital_files)
    answer = hospitals._answer

    def copy_checkpoint(message, context):
        train = message.metadata.message_type == "train"
        if train and int(message.metadata.group_id) == 2 and not left.exists():
            shutil.copy(checkpoint, left)
        return answer(message, context)

    hospitals.grid.app = copy_checkpoint
    strategy, _ = hospitals.run(checkpoint=checkpoint, **PLAIN)
    saved = persist.load_checkpoint(left, config_fingerprint=strategy_fingerprint(strategy))
    assert saved is not None and saved.rounds_done == 2
    assert saved.history[1] == {"round": 2, "aborted": IN_FLIGHT, "epsilon": strategy.epsilons[1]}
    again = Hospitals(hospital_files, first_node=301)
    resumed, _ = again.run(checkpoint=left, **PLAIN)
    assert {t for _, t in again.asked} == {3}
    assert resumed.epsilons == pytest.approx(_flower_epsilons(3), rel=1e-12)


class PullingGrid(LocalGrid):
    """A LocalGrid that pushes and pulls as a SuperLink's grid does; the replies of ``withheld`` (silo, round) never
    come (a stalled SuperNode)."""

    def __init__(self, app, node_configs, withheld) -> None:
        super().__init__(app, node_configs)
        self.withheld, self.replies = set(withheld), dict[str, Any]()

    def push_messages(self, messages):
        ids = []
        for message in messages:
            message.metadata.__dict__["_message_id"] = (
                message.object_id
            )  # as Flower's grid does on push
            context = self.contexts[message.metadata.dst_node_id]
            if (context.node_config["silo"], message.metadata.group_id) not in self.withheld:
                self.replies[message.object_id] = next(iter(super().send_and_receive([message])))
            ids.append(message.object_id)
        return ids

    def pull_messages(self, message_ids):
        return [self.replies.pop(i) for i in message_ids if i in self.replies]


def test_a_stalled_supernode_is_named_while_it_stalls_and_its_round_counts(
    hospital_files,
    monkeypatch,
    caplog,
) -> None:
    """General never answers round 1: the strategy says who it waits for while it waits, aborts the round naming
    General and the timeout (Royal and St Mary answered: a release), and goes on with General at round 2."""
    from uldp.flower import recovery

    monkeypatch.setattr(recovery, "LOG_EVERY", 0.3)
    monkeypatch.setattr(recovery, "POLL", 0.1)
    hospitals = Hospitals(hospital_files)
    grid = PullingGrid(hospitals.app, list(hospitals.configs.values()), withheld={("General", "1")})
    hospitals.grid = grid
    with caplog.at_level(logging.WARNING, logger="uldp.flower"):
        strategy, result = hospitals.run(timeout=1.5)
    waits = [r.getMessage() for r in caplog.records if "still waiting" in r.getMessage()]
    assert waits and all(
        m.startswith("round 1: still waiting for silo(s) ['General'] after") for m in waits
    ), waits
    assert "round 1: silo ['General'] did not answer within timeout 1.5 s" in caplog.text
    assert strategy.epsilons == pytest.approx(_flower_epsilons(3), rel=1e-12)
    assert sorted(result.train_metrics_clientapp) == [2, 3]


class LaggingGrid:
    """A SuperLink's grid whose replies come at the ``lag``-th pull after the push (silos at work meanwhile)."""

    def __init__(self, lag: int) -> None:
        self.lag, self.pulls, self.pushed = lag, 0, dict[str, int]()

    def create_message(self, content, message_type, dst_node_id, group_id):
        return SimpleNamespace(content=content, metadata=SimpleNamespace(dst_node_id=dst_node_id))

    def push_messages(self, messages):
        self.pushed = {f"m{m.metadata.dst_node_id}": m.metadata.dst_node_id for m in messages}
        return list(self.pushed)

    def pull_messages(self, message_ids):
        self.pulls += 1
        if self.pulls < self.lag:
            return []
        return [
            SimpleNamespace(
                metadata=SimpleNamespace(src_node_id=self.pushed[i], reply_to_message_id=i),
                has_error=lambda: False,
            )
            for i in message_ids
        ]


@pytest.mark.parametrize(
    "lag, waits",
    [(1, []), (4, [0.02, 0.04, 0.08]), (9, [0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.0, 1.0])],
)
def test_a_set_up_exchange_pulls_its_replies_sooner_the_sooner_they_come(
    lag, waits, monkeypatch
) -> None:
    """The set-up's exchanges pull from the SuperLink after 0.02 s, doubling the wait while nothing came, up to
    1 s (Flower's own send_and_receive waited 3 s between pulls, about ten times in a set-up)."""
    from uldp.flower import recovery

    slept: list[float] = []
    monkeypatch.setattr(recovery.time, "sleep", slept.append)
    grid = LaggingGrid(lag)
    replies = recovery.ask_silos(grid, {7: {"stage": "hello"}, 9: {}}, timeout=60, names={})
    assert sorted(replies) == [7, 9] and grid.pulls == lag
    assert slept == pytest.approx(waits)


@pytest.mark.parametrize(
    "connected, message",
    [
        (
            HOSPITALS[:2],
            (
                r"silo\(s\) \['General'\] did not join within join_timeout 1 s "
                r"\(connected: \['Royal', 'St Mary'\]"
            ),
        ),
        ([], "no SuperNode is connected to the SuperLink"),
    ],
)
def test_a_flower_run_refuses_to_start_short_of_its_silos(
    connected,
    message,
    hospital_files,
) -> None:
    """Declared silos that do not all connect: the run stops naming the missing ones (not as a 2-silo federation,
    and not blaming another key or a tampered relay when there is no one)."""
    with pytest.raises(RuntimeError, match=message):
        Hospitals(hospital_files, names=connected).run(silos=HOSPITALS, join_timeout=1.0)


# --- uldp flower-run: flwr run's outcome as an exit status ---------------------------------------------------------
FAKE_FLWR = '''#!{python}
"""A stand-in for the flwr command: `run` starts run 7, `ls` walks through the statuses in {statuses}."""
import json, sys
from pathlib import Path

states = Path({statuses!r})
if sys.argv[1] == "run":
    print(json.dumps({{"success": True, "run-id": "7", "argv": sys.argv[2:]}}, indent=2))  # as rich prints it
elif sys.argv[1] == "ls":
    pending = json.loads(states.read_text())
    status, details = pending.pop(0) if len(pending) > 1 else pending[0]
    states.write_text(json.dumps(pending))
    print(json.dumps({{"success": True, "runs": [{{"run-id": "7", "status": status, "status-details": details}}]}},
                     indent=2))
'''


@pytest.mark.parametrize(
    "statuses, code, said",
    [
        (
            [
                ["running", ""],
                [
                    "finished:failed",
                    "ServerApp raised RuntimeError: silo(s) ['General'] did not join",
                ],
            ],
            1,
            "run 7 finished:failed: ServerApp raised RuntimeError: silo(s) ['General'] did not join; its log: ",
        ),
        (
            [["pending", ""], ["running", ""], ["finished:completed", ""]],
            0,
            "run 7 is finished:completed after",
        ),
    ],
)
def test_flower_run_exits_with_the_status_of_the_run(
    statuses, code, said, tmp_path, capsys
) -> None:
    """`flwr run` exits 0 once the run is submitted; `uldp flower-run` waits for the run and fails with it."""
    from uldp.cli import main

    (tmp_path / "statuses.json").write_text(json.dumps(statuses))
    fake = tmp_path / "flwr"
    fake.write_text(
        FAKE_FLWR.format(python=sys.executable, statuses=str(tmp_path / "statuses.json"))
    )
    fake.chmod(0o755)
    assert (
        main(["flower-run", str(tmp_path), "local", "--poll", "0.01", "--flwr", str(fake)]) == code
    )
    error = capsys.readouterr().err
    assert said in error, error
    assert "run 7 is running after" in error


FOLLOWED_FLWR = """#!{python}
\"\"\"A stand-in for flwr: run 7's log streams for 1.5 s and ends with it; `ls` counts its calls in {calls}.\"\"\"
import json, sys, time
from pathlib import Path

calls, done = Path({calls!r}), Path({calls!r} + ".done")
if sys.argv[1] == "run":
    print(json.dumps({{"success": True, "run-id": "7"}}))
elif sys.argv[1] == "log":
    time.sleep(1.5)
    done.touch()
elif sys.argv[1] == "ls":
    calls.write_text(calls.read_text() + "ls\\n" if calls.exists() else "ls\\n")
    status = "finished:completed" if done.exists() else "running"
    print(json.dumps({{"success": True, "runs": [{{"run-id": "7", "status": status}}]}}))
"""


def test_flower_run_asks_for_the_status_when_the_runs_log_ends(tmp_path, capsys) -> None:
    """While the run's log streams, the launcher waits for its end instead of starting a `flwr ls` process (about 1 s
    of CPU each) every --poll seconds: here 2 queries in a 1.5 s run at --poll 0.05, where polling made about 30."""
    from uldp.cli import main

    calls = tmp_path / "calls"
    fake = tmp_path / "flwr"
    fake.write_text(FOLLOWED_FLWR.format(python=sys.executable, calls=str(calls)))
    fake.chmod(0o755)
    assert (
        main(
            [
                "flower-run",
                str(tmp_path),
                *("--poll", "0.05", "--timeout", "10", "--flwr", str(fake)),
            ]
        )
        == 0
    )
    assert calls.read_text().split() == ["ls", "ls"]  # running, then finished as the log ended
    assert "run 7 is finished:completed after" in capsys.readouterr().err


def test_flower_run_says_why_flwr_failed(tmp_path, capsys, monkeypatch) -> None:
    """flwr's own message, and what lies behind its "unavailable": here nothing listens at the configured address
    (tests/test_flower_cli.py has the TLS failures)."""
    import socket

    from uldp.cli import main

    with socket.socket() as probe:  # a port the OS just gave and took back: nothing listens there
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    (tmp_path / "config.toml").write_text(
        f'[superlink]\ndefault = "server"\n[superlink.server]\naddress = "127.0.0.1:{port}"\n'
    )
    monkeypatch.setenv("FLWR_HOME", str(tmp_path))
    fake = tmp_path / "flwr"
    fake.write_text(
        f"#!{sys.executable}\nimport sys\nprint('Connection to the SuperLink is unavailable.', "
        f"file=sys.stderr)\nsys.exit(1)\n"
    )
    fake.chmod(0o755)
    assert main(["flower-run", str(tmp_path), "--flwr", str(fake)]) == 1
    error = capsys.readouterr().err
    assert "exited with status 1: Connection to the SuperLink is unavailable." in error
    assert f"uldp flower-run: no server at 127.0.0.1:{port}" in error, error


def test_supernodes_whose_clientapps_fail_are_said_to_be_connected(hospital_files) -> None:
    """SuperNodes that are connected but whose ClientApps fail: the error says so (not that none is connected)."""
    hospitals = Hospitals(hospital_files)

    def broken(message, context):
        raise ValueError("the SuperNode needs --node-config 'silo=...'")

    hospitals.app = broken
    with pytest.raises(
        RuntimeError, match=r"3 SuperNode\(s\) connected, none answered the hello stage"
    ):
        hospitals.run(silos=HOSPITALS, join_timeout=1.0)
