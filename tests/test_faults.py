"""Faults injected into a deployed federation (issue 36): a silo killed, a silo stalled, a network cut, a full disk,
the server killed mid-round, a server that is not up yet. Each test checks that nothing is lost (the last good
model and every completed round stay in the checkpoint) and that no release goes unaccounted (every round index
asked is in the epsilon history, aborted or not, and never asked again).

The server and the silos are the real ones (:class:`uldp.deploy.server.Coordinator` and the silo's Flower client)
in one process, joined by the stand-in proxies of ``deploy_harness``; ``benchmarks/faults.py`` injects the same
faults into real processes. The Flower strategy meets the same faults on a LocalGrid: a SuperNode killed and
back under a new node id, a resubmitted run, silos missing at the start.
"""

from __future__ import annotations

import errno
import json
import logging
import shutil
import sys
import threading
import time
from types import SimpleNamespace
from typing import Any

import grpc
import numpy as np
import pytest
from deploy_harness import MASTER, Manager, Proxy, make_config, silo_clients
from test_flower import HOSPITALS, hospital_files, load as flower_load, model as flower_model  # noqa: F401  (a fixture)
from torch import nn

import uldp
import uldp.flower as uf
from uldp.accounting import epsilon_uldp
from uldp.common import persist
from uldp.common.persist import IN_FLIGHT
from uldp.deploy import server as server_module, silo as silo_module, wire
from uldp.deploy.method_roles import MethodServer
from uldp.deploy.server import Coordinator, ServerSettings
from uldp.flower.local import LocalGrid
from uldp.flower.recovery import strategy_fingerprint


@pytest.fixture(scope="module")
def synthetic():
    from uldp.data import load

    return load("synthetic")


def _expected_epsilons(releases: int) -> list[float]:
    """Theorem 3's epsilon after 1, 2, ..., ``releases`` releases (the run's sigma, q and delta)."""
    run = make_config(False).run
    assert run.sigma is not None
    return [
        epsilon_uldp(sigma=run.sigma, rounds=t, delta=run.delta, q=run.q).epsilon
        for t in range(1, releases + 1)
    ]


class Federation:
    """Three real silo clients kept across server restarts (each remembers the rounds it was asked)."""

    def __init__(self, synthetic, tmp_path, *, secure: bool = False) -> None:
        self.synthetic, self.config = synthetic, make_config(secure)
        self.clients = silo_clients(synthetic, self.config)
        self.checkpoint = tmp_path / "model.ckpt"

    def serve(
        self, faults: dict | None = None, absent: tuple[int, ...] = (), **settings
    ) -> tuple[Coordinator, server_module.FederationResult]:
        """One server start: a coordinator whose silo ``s`` meets ``faults[s]`` before each instruction (the silos
        in ``absent`` never connect)."""
        faults = faults or {}
        proxies = [
            Proxy(client, fault=faults.get(silo_id))
            for silo_id, client in enumerate(self.clients)
            if silo_id not in absent
        ]
        options = {
            "master_key": MASTER,
            "join_timeout": 60,
            "round_timeout": 60,
            "checkpoint": self.checkpoint,
            **settings,
        }
        coordinator = Coordinator(
            MethodServer(self.config, self.synthetic), ServerSettings(**options), Manager(proxies)
        )
        return coordinator, coordinator.run()

    def saved(self) -> persist.Checkpoint:
        checkpoint = persist.load_checkpoint(
            self.checkpoint, config_fingerprint=self.config.fingerprint
        )
        assert checkpoint is not None
        return checkpoint

    def assert_every_round_asked_once(self, last_round: int, *, missed: dict | None = None) -> None:
        """Each silo was asked rounds 1..last_round once each, in order (except those in ``missed[silo]``)."""
        for silo_id, client in enumerate(self.clients):
            skipped = (missed or {}).get(silo_id, ())
            assert client.rounds_seen == [
                t for t in range(1, last_round + 1) if t not in skipped
            ], silo_id


def _at(round_index: int, error: Exception, stage: str = wire.STAGE_TRAIN):
    """A fault that raises ``error`` when the instruction of ``stage`` in ``round_index`` arrives."""

    def fault(instruction, timeout):
        if instruction.stage == stage and instruction.round_index == round_index:
            raise error

    return fault


def _assert_accounted(history, aborted: dict) -> None:
    """One record per round index, in order, each with the epsilon of that many releases; ``aborted`` maps the
    aborted rounds to the silos known to have answered them (None for a round left in flight)."""
    assert [record["round"] for record in history] == list(range(1, len(history) + 1))
    assert [record["epsilon"] for record in history] == pytest.approx(
        _expected_epsilons(len(history)), rel=1e-12
    )
    assert {r["round"]: r.get("answered") for r in history if "aborted" in r} == aborted


def test_a_killed_silo_costs_one_release_and_the_resumed_run_never_asks_its_round_again(
    synthetic, tmp_path
) -> None:
    """Silo 2 dies as round 2 starts, after silos 0 and 1 answered it: round 2 is recorded as an aborted release
    (epsilon of 2 rounds); the restarted server continues at round 3, and the history counts 3 releases."""
    federation = Federation(synthetic, tmp_path)
    _, aborted = federation.serve({2: _at(2, ConnectionError("killed"))})
    assert aborted.error.startswith(
        "round 2 aborted: round 2: silo 2 dropped out (connection lost after"
    )
    assert aborted.rounds_done == 1 and aborted.last_round == 2
    saved = federation.saved()
    assert saved.rounds_done == 2 and "silo 2 dropped out" in saved.history[1]["aborted"]
    np.testing.assert_array_equal(
        saved.params, aborted.params
    )  # round 1's model, nothing of round 2 applied
    assert not np.array_equal(
        saved.params, MethodServer(federation.config, synthetic).initial_params()
    )

    _, resumed = federation.serve()
    assert resumed.error == "" and resumed.resumed_from == 2 and resumed.rounds_done == 2
    assert resumed.last_round == 3
    _assert_accounted(resumed.history, {2: [0, 1]})
    federation.assert_every_round_asked_once(3, missed={2: (2,)})
    assert federation.saved().history == tuple(resumed.history)


def test_a_stalled_silo_is_named_with_its_timeout_and_logged_while_it_stalls(
    synthetic, tmp_path, caplog
) -> None:
    """Silo 1 does not answer round 1: the server logs the wait while it lasts, then aborts naming the silo and
    the timeout that ran out; round 1 counts as a release (silos 0 and 2 answered), the initial model is kept."""

    def stall(instruction, timeout):
        if instruction.stage == wire.STAGE_TRAIN:
            threading.Event().wait(timeout)  # as Flower's proxy: no answer until the timeout
            raise TimeoutError("no answer")

    federation = Federation(synthetic, tmp_path)
    with caplog.at_level(logging.WARNING, logger="uldp.deploy"):
        _, result = federation.serve({1: stall}, round_timeout=1.5, stall_log_seconds=0.4)
    assert "round 1: silo 1 dropped out (no answer within --round-timeout 1.5 s" in result.error, (
        result.error
    )
    waits = [r.getMessage() for r in caplog.records if "still waiting" in r.getMessage()]
    assert waits and all(
        m.startswith("round 1: still waiting for silo(s) [1] after") for m in waits
    ), waits
    assert result.rounds_done == 0
    _assert_accounted(result.history, {1: [0, 2]})
    assert federation.saved().history == tuple(result.history)


def test_a_silo_that_never_joins_is_named_while_the_server_waits(
    synthetic, tmp_path, caplog
) -> None:
    """Silo 2 never connects: the server says whom it waits for while it waits, then stops naming silo 2 and the
    join timeout; nothing was asked, so nothing is accounted."""
    federation = Federation(synthetic, tmp_path)
    with caplog.at_level(logging.WARNING, logger="uldp.deploy"):
        _, result = federation.serve(absent=(2,), join_timeout=1.0, stall_log_seconds=0.3)
    assert result.error.startswith("admission: silo(s) [2] did not join within 1 s"), result.error
    waits = [r.getMessage() for r in caplog.records if "to join" in r.getMessage()]
    assert waits and all(m.startswith("waiting for silo(s) [2] to join: ") for m in waits), waits
    assert result.history == [] and not federation.checkpoint.exists()


def test_a_network_cut_in_protocol_1_costs_one_release_and_the_restart_sets_up_afresh(
    synthetic, tmp_path
) -> None:
    """Protocol 1: silo 0's link is cut at the masked-update step of round 1, after every silo sent its shares.
    The round counts; the restarted server runs Protocol 1's set-up again and continues at round 2."""
    federation = Federation(synthetic, tmp_path, secure=True)
    _, cut = federation.serve({0: _at(1, ConnectionResetError("cut"), wire.STAGE_SECURE_UPDATE)})
    assert "round 1: silo 0 dropped out (connection lost" in cut.error and cut.rounds_done == 0
    _assert_accounted(cut.history, {1: [0, 1, 2]})
    _, resumed = federation.serve()
    assert resumed.error == "" and resumed.rounds_done == 2 and resumed.setup_seconds > 0
    _assert_accounted(resumed.history, {1: [0, 1, 2]})
    federation.assert_every_round_asked_once(3)


@pytest.mark.parametrize("failing_write, accounted", [(3, 1), (4, 2)])
def test_a_full_disk_names_the_path_and_loses_no_release(
    failing_write, accounted, synthetic, tmp_path, monkeypatch
) -> None:
    """The checkpoint is written before each round (its in-flight record) and after it. The disk fills up at the
    write before round 2 (nothing of round 2 goes out) or after every silo answered round 2 (the in-flight record
    on disk already counts it). Either way the error names the path, and the restart continues after the last
    round index on disk: round 2 is never asked twice."""
    real_save, writes = persist.save_checkpoint, []

    def save(path, checkpoint):
        writes.append(checkpoint.rounds_done)
        if len(writes) == failing_write:
            raise OSError(
                errno.ENOSPC, "No space left on device", str(path.parent / ".model.ckpt.0.tmp")
            )
        real_save(path, checkpoint)

    federation = Federation(synthetic, tmp_path)
    monkeypatch.setattr(persist, "save_checkpoint", save)
    _, full = federation.serve()
    monkeypatch.setattr(persist, "save_checkpoint", real_save)
    assert (
        f"cannot write the checkpoint {federation.checkpoint}: No space left on device"
        in full.error
    ), full.error
    saved = federation.saved()
    assert saved.rounds_done == accounted and sum("aborted" not in r for r in saved.history) == 1
    if accounted == 2:
        assert full.error.startswith("after round 2:") and saved.history[1]["aborted"] == IN_FLIGHT
    federation.assert_every_round_asked_once(accounted)

    _, resumed = federation.serve()
    assert resumed.error == "" and resumed.resumed_from == accounted and resumed.rounds_done == 2
    _assert_accounted(resumed.history, {2: None} if accounted == 2 else {})
    federation.assert_every_round_asked_once(accounted + 1)


def test_a_server_killed_mid_round_leaves_the_round_counted(synthetic, tmp_path) -> None:
    """What a server killed while round 2 runs leaves on disk (copied as silo 0 receives round 2) counts round 2
    as in flight; a server started from it continues at round 3."""
    federation = Federation(synthetic, tmp_path)
    left = tmp_path / "left-by-the-killed-server.ckpt"

    def copy_checkpoint(instruction, timeout):
        if instruction.stage == wire.STAGE_TRAIN and instruction.round_index == 2:
            shutil.copy(federation.checkpoint, left)

    federation.serve({0: copy_checkpoint})
    shutil.copy(left, federation.checkpoint)
    assert federation.saved().history[1] == {
        "round": 2,
        "aborted": IN_FLIGHT,
        "epsilon": pytest.approx(_expected_epsilons(2)[1], rel=1e-12),
    }
    _, resumed = federation.serve()
    assert resumed.error == "" and resumed.resumed_from == 2 and resumed.last_round == 3
    assert [r["round"] for r in resumed.history] == [1, 2, 3] and "aborted" in resumed.history[1]
    for client in federation.clients:
        assert client.rounds_seen == [
            1,
            2,
            3,
        ]  # round 2 once (in the run that was "killed"), then round 3


class _Unavailable(grpc.RpcError):
    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.UNAVAILABLE


def test_a_silo_waits_for_a_server_that_is_not_up_yet_and_for_one_that_comes_back(
    synthetic, monkeypatch, caplog
) -> None:
    """``--max-wait``: the server is unreachable twice, then admits the silo and runs round 1, then goes away
    (a crash) and is unreachable once, then comes back and finishes. The silo waits through both, with backoff
    and a line each time, and ends with the final model."""
    import flwr.client

    from uldp.deploy.method_roles import MethodSilo
    from uldp.deploy.silo import SiloSettings, run_silo

    config = make_config(False)
    role = MethodSilo(config, 0, synthetic)
    final = MethodServer(config, synthetic).initial_params()
    script = iter(["down", "down", "round", "down", "finish"])

    def start_client(*, client, **options):
        step = next(script)
        if step == "down":
            raise _Unavailable()
        client.get_properties(wire.Instruction(wire.STAGE_HELLO).to_flower())  # the handshake
        if step == "round":
            sampled = np.ones(role.n_users, dtype=bool)
            payloads = (persist.array_to_bytes(final), persist.array_to_bytes(sampled))
            client.fit(wire.Instruction(wire.STAGE_TRAIN, 1, payloads=payloads).to_flower())
            raise _Unavailable()  # the server dies after the round
        client.fit(
            wire.Instruction(
                wire.STAGE_FINISH, 1, payloads=(persist.array_to_bytes(final),)
            ).to_flower()
        )

    pauses: list[float] = []
    monkeypatch.setattr(flwr.client, "start_client", start_client)
    monkeypatch.setattr(
        silo_module,
        "time",
        SimpleNamespace(
            monotonic=time.monotonic, perf_counter=time.perf_counter, sleep=pauses.append
        ),
    )
    with caplog.at_level(logging.WARNING, logger="uldp.deploy"):
        params = run_silo(role, SiloSettings(max_wait=30.0))
    np.testing.assert_array_equal(params, final)
    assert pauses == [1.0, 2.0, 1.0, 2.0]  # backoff, started afresh once the server had admitted it
    lines = [r.getMessage() for r in caplog.records if "no server at" in r.getMessage()]
    assert (
        len(lines) == 4 and "no round seen yet" in lines[1] and "last round seen: 1" in lines[2]
    ), lines


def test_a_silo_gives_up_after_max_wait_saying_how_long_it_waited(synthetic, monkeypatch) -> None:
    """A server that never comes: the silo stops once --max-wait has passed, not at the first refusal."""
    import flwr.client

    from uldp.deploy.method_roles import MethodSilo
    from uldp.deploy.silo import FederationIncomplete, SiloSettings, run_silo

    clock = [0.0]

    def start_client(**options):
        clock[0] += 0.5  # each attempt takes half a second
        raise _Unavailable()

    monkeypatch.setattr(flwr.client, "start_client", start_client)
    monkeypatch.setattr(
        silo_module,
        "time",
        SimpleNamespace(
            monotonic=lambda: clock[0],
            perf_counter=time.perf_counter,
            sleep=lambda s: clock.__setitem__(0, clock[0] + s),
        ),
    )
    with pytest.raises(
        FederationIncomplete, match=r"no server at 127.0.0.1:8080 for 20 s \(--max-wait 20 s"
    ):
        run_silo(MethodSilo(make_config(False), 1, synthetic), SiloSettings(max_wait=20.0))
    assert clock[0] == pytest.approx(20.5)  # a last attempt at the deadline


# --- the Flower strategy (uldp.flower.recovery), on LocalGrid ------------------------------------------------------
FLOWER: dict[str, Any] = {
    "method": "ULDP-AVG-w",
    "sigma": 1.0,
    "q": 0.8,
    "local_epochs": 1,
    "batch_size": 8,
    "seed": 5,
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

        strategy = uf.UldpStrategy(**FLOWER, **arguments)
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
