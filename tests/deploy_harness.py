"""A deployed federation in one process: the real server coordinator and real silo clients, with stand-ins for
Flower's client proxies that can rewrite, delay or drop what a silo answers (tests of hostile parties and faults)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from uldp.deploy import keys, wire
from uldp.deploy.method_roles import DeployConfig, MethodServer, MethodSilo
from uldp.deploy.server import Coordinator, ServerSettings
from uldp.deploy.silo import SiloSettings, _make_client

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")
MASTER = bytes(range(32))
N_SILOS = 3


def make_config(secure: bool, rounds: int = 2) -> DeployConfig:
    """ULDP-AVG-w on the synthetic dataset, 8 users over 3 silos (Protocol 1 with 512-bit test keys if secure)."""
    from uldp.secure.config import ProtocolParameters
    from uldp.simulation import RunConfig

    protocol = ProtocolParameters(key_bits=512, insecure_test_key=True, n_max=200)
    run = RunConfig(
        dataset="synthetic",
        method="ULDP-AVG-w",
        n_users=8,
        rounds=rounds,
        seed=3,
        max_train_records=120,
        local_epochs=1,
        secure=secure,
        protocol=protocol,
    )
    return DeployConfig(run)


class Proxy:
    """Flower's client proxy for one in-process silo client; ``tamper(instruction, reply)`` may rewrite replies,
    ``fault(instruction, timeout)`` runs before the silo sees the instruction (it may sleep or raise)."""

    def __init__(
        self, client: Any, tamper: Any = None, hello: dict | None = None, fault: Any = None
    ) -> None:
        self.client, self.tamper, self.hello, self.fault = client, tamper, hello or {}, fault

    def get_properties(self, ins: Any, timeout: float, group_id: Any) -> Any:
        answer = self.client.get_properties(ins)
        answer.properties.update(self.hello)
        return answer

    def fit(self, ins: Any, timeout: float, group_id: Any) -> Any:
        if self.fault is not None:
            self.fault(wire.Instruction.from_flower(ins), timeout)
        answer = self.client.fit(ins)
        if self.tamper is None:
            return answer
        instruction = wire.Instruction.from_flower(ins)
        reply = self.tamper(instruction, wire.Reply.from_flower(answer))
        return answer if reply is None else reply.to_flower()

    def reconnect(self, ins: Any, timeout: float, group_id: Any) -> None:
        return None


class Manager:
    """Flower's client manager: the connections the server sees."""

    def __init__(self, proxies: list) -> None:
        self.proxies = proxies

    def all(self) -> dict:
        return {f"client-{i}": proxy for i, proxy in enumerate(self.proxies)}


def silo_clients(
    synthetic: Any, deploy_config: DeployConfig, silo: Callable[[int], dict[str, Any]] | None = None
) -> list:
    """The real silo clients of the 3 silos (each with its key under :data:`MASTER`; ``silo(silo_id)`` gives a
    silo's own SiloSettings fields, its policy and ledger)."""
    return [
        _make_client(
            MethodSilo(deploy_config, silo_id, synthetic),
            SiloSettings(key=keys.silo_key(MASTER, silo_id), **(silo(silo_id) if silo else {})),
        )
        for silo_id in range(N_SILOS)
    ]


def federation(
    synthetic: Any,
    *,
    secure: bool = False,
    tamper: Any = None,
    victim: int = 1,
    extra: Sequence = (),
    settings: ServerSettings | None = None,
    silo: Callable[[int], dict[str, Any]] | None = None,
) -> Coordinator:
    """A coordinator over 3 real silo clients (silo ``victim``'s replies go through ``tamper``) and ``extra``."""
    deploy_config = make_config(secure)
    proxies = [
        *extra,
        *(
            Proxy(client, tamper if silo_id == victim else None)
            for silo_id, client in enumerate(silo_clients(synthetic, deploy_config, silo))
        ),
    ]
    settings = settings or ServerSettings(master_key=MASTER, join_timeout=60, round_timeout=60)
    return Coordinator(MethodServer(deploy_config, synthetic), settings, Manager(proxies))
