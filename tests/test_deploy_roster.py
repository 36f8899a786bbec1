"""uldp deploy with the silos' roster (issue 41 item 3): a deployed silo given its identity and roster
(SiloSettings.credentials, ``uldp deploy silo --identity --roster``) refuses a DH key the server swapped, naming the
silo; a silo whose policy asks for a malicious server's guarantee starts no secure session without them; and a user
sample the silos draw themselves (item 1, ``hidden_sample``)."""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import numpy as np
import pytest
from deploy_harness import MASTER, N_SILOS, Manager, Proxy, make_config, silo_clients

from uldp.common.persist import array_from_bytes
from uldp.deploy import wire
from uldp.deploy.method_roles import MethodServer
from uldp.deploy.server import Coordinator, ServerSettings
from uldp.policy import SiloPolicy
from uldp.secure.keys import new_dh_private_key
from uldp.secure.messages import DhDirectoryMessage
from uldp.secure.roster import Credentials, Identity, Roster

os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")
#: The silo whose key the server replaces in what it relays to the others.
VICTIM = 1


@pytest.fixture(scope="module")
def synthetic():
    from uldp.data import load

    return load("synthetic")


def credentials() -> list[Credentials]:
    identities = [Identity.generate(f"silo-{s}") for s in range(N_SILOS)]
    roster = Roster.of(identities)
    return [Credentials(identity, roster) for identity in identities]


class SwappingRelay(Proxy):
    """The server's link to silo ``silo_id``: it relays every silo but :data:`VICTIM` a Protocol 1 directory with a
    DH key of the server's in the victim's slot (issue 41 attack 3)."""

    def __init__(self, client: Any, silo_id: int) -> None:
        super().__init__(client)
        self.silo_id = silo_id

    def fit(self, ins: Any, timeout: float, group_id: Any) -> Any:
        instruction = wire.Instruction.from_flower(ins)
        if instruction.stage == wire.STAGE_SECURE_DIRECTORY and self.silo_id != VICTIM:
            directory = DhDirectoryMessage.from_bytes(instruction.payloads[0])
            keys = list(directory.public_keys)
            keys[VICTIM] = new_dh_private_key().public_key().public_bytes_raw()
            swapped = DhDirectoryMessage(tuple(keys), directory.attestations).to_bytes()
            instruction = dataclasses.replace(
                instruction, payloads=(swapped, *instruction.payloads[1:])
            )
        return super().fit(instruction.to_flower(), timeout, group_id)


def deployment(synthetic, silo: Any, *, swap: bool) -> Coordinator:
    """A secure deployment (Protocol 1, test keys) of 3 real silo clients with their ``silo(silo_id)`` settings."""
    config = make_config(secure=True, rounds=1)
    clients = silo_clients(synthetic, config, silo)
    proxies = [
        SwappingRelay(client, silo_id) if swap else Proxy(client)
        for silo_id, client in enumerate(clients)
    ]
    settings = ServerSettings(master_key=MASTER, join_timeout=60, round_timeout=60)
    return Coordinator(MethodServer(config, synthetic), settings, Manager(proxies))


def test_a_swapped_key_is_refused_naming_the_silo_and_an_honest_run_passes(synthetic) -> None:
    silos = credentials()
    attacked = deployment(synthetic, lambda s: {"credentials": silos[s]}, swap=True).run()
    assert attacked.rounds_done == 0
    assert (
        f"silo {VICTIM} (silo-{VICTIM}): its relayed DH key is not signed by its roster identity"
        in attacked.error
    ), attacked.error
    honest = deployment(synthetic, lambda s: {"credentials": silos[s]}, swap=False).run()
    assert honest.error == "" and honest.rounds_done == 1, honest.error


def test_a_malicious_server_policy_needs_the_roster(synthetic) -> None:
    strict = SiloPolicy(malicious_server=True)
    result = deployment(synthetic, lambda s: {"policy": strict}, swap=False).run()
    assert result.rounds_done == 0
    assert "starts no secure session without its identity and roster" in result.error, result.error


def test_the_silo_command_takes_its_identity_and_roster_together(tmp_path) -> None:
    """``uldp deploy silo --identity --roster``: the files a silo's operator made, both or neither."""
    import argparse

    from uldp.deploy.legacy_cli import _read_credentials
    from uldp.secure.roster import write_identity, write_roster

    identity = write_identity(tmp_path / "identity.json", "north")
    write_roster(tmp_path / "roster.json", Roster.of([identity]))
    loaded = _read_credentials(
        argparse.Namespace(identity=tmp_path / "identity.json", roster=tmp_path / "roster.json")
    )
    assert loaded is not None and loaded.identity.fingerprint == identity.fingerprint
    assert _read_credentials(argparse.Namespace(identity=None, roster=None)) is None
    with pytest.raises(ValueError, match=r"--identity and --roster: a roster file .* without"):
        _read_credentials(argparse.Namespace(identity=None, roster=tmp_path / "roster.json"))


class SampleSpy(Proxy):
    """The server's link to one silo, keeping the sampled users of every train instruction it sends."""

    def __init__(self, client: Any) -> None:
        super().__init__(client)
        self.sent: list[np.ndarray] = []

    def fit(self, ins: Any, timeout: float, group_id: Any) -> Any:
        instruction = wire.Instruction.from_flower(ins)
        if instruction.stage == wire.STAGE_TRAIN:
            self.sent.append(array_from_bytes(instruction.payloads[1]))
        return super().fit(ins, timeout, group_id)


def test_a_deployed_silo_trains_on_the_silos_hidden_sample(synthetic, monkeypatch) -> None:
    """Issue 41 item 1 in deploy: with ``hidden_sample`` in the run's configuration and sampler "silos" in every
    silo's policy (q = 0.5), each silo trains on the sample the silos agreed on in the masked sum's sum-sample stage
    (the same at every silo, neither empty nor every user), the server's train instructions name every user, and
    the server's view is the released model's epsilon; a silo whose policy and the configuration disagree on who
    samples refuses to start."""
    from uldp.deploy.method_roles import DeployConfig, MethodSilo
    from uldp.policy import PolicyRefusal
    from uldp.simulation import RunConfig

    run = RunConfig(
        dataset="synthetic",
        method="ULDP-AVG",
        n_users=8,
        rounds=2,
        seed=3,
        max_train_records=120,
        local_epochs=1,
        q=0.5,
    )
    config = DeployConfig(run, hidden_sample=True)
    assert DeployConfig.from_json(config.to_json()) == config
    used: dict[tuple[int, int], np.ndarray] = {}
    honest = MethodSilo.work

    def spy(self, params, round_index, sampled, before):
        used[self.silo_id, round_index] = sampled.copy()
        return honest(self, params, round_index, sampled, before)

    monkeypatch.setattr(MethodSilo, "work", spy)
    policy = SiloPolicy(q=0.5, sampler="silos")
    proxies = [SampleSpy(c) for c in silo_clients(synthetic, config, lambda s: {"policy": policy})]
    settings = ServerSettings(master_key=MASTER, join_timeout=60, round_timeout=60)
    result = Coordinator(MethodServer(config, synthetic), settings, Manager(proxies)).run()
    assert result.error == "" and result.rounds_done == 2, result.error
    n_users = MethodServer(config, synthetic).n_users
    for round_index in (1, 2):
        samples = [used[s, round_index] for s in range(N_SILOS)]
        assert all(np.array_equal(s, samples[0]) for s in samples)
        assert 0 < samples[0].sum() < n_users
    assert all(sent.all() and sent.size == n_users for p in proxies for sent in p.sent)
    assert all(r["server_view_epsilon"] == r["epsilon"] for r in result.history)
    with pytest.raises(PolicyRefusal, match=r"the run's configuration does not set hidden_sample"):
        silo_clients(synthetic, DeployConfig(run), lambda s: {"policy": policy})
    with pytest.raises(PolicyRefusal, match=r"sampler 'server', the run's configuration sets"):
        silo_clients(synthetic, config)


def test_a_deployed_silo_refuses_a_collusion_threshold_it_does_not_scale_for(synthetic) -> None:
    """Deploy does not scale the noise shares for ``colluders`` (Flower does), so a deployed silo whose policy asks
    for t colluders refuses rather than report epsilons that claim them; t = 0 passes."""
    from uldp.deploy.method_roles import DeployConfig, MethodSilo
    from uldp.policy import PolicyRefusal
    from uldp.simulation import RunConfig

    run = RunConfig(dataset="synthetic", method="ULDP-AVG", n_users=8, rounds=2, seed=3)
    silo = MethodSilo(DeployConfig(run), 0, synthetic)
    with pytest.raises(PolicyRefusal, match=r"colluders=1, and this transport does not scale"):
        silo.check_policy(SiloPolicy(colluders=1))
    silo.check_policy(SiloPolicy(min_sigma=0.1))
