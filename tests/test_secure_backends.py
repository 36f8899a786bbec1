"""uldp.secure.backends: Protocol 1's backends behind one interface (issue 40 item 3). A backend is one class and one
line in BACKENDS: a toy one, defined here, runs Protocol 1 through the driver unchanged."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from uldp.secure.backends import BACKENDS, Backend
from uldp.secure.config import ProtocolConfig, ProtocolParameters
from uldp.secure.driver import ProtocolAbort, ServerDriver, SiloDriver
from uldp.secure.messages import U32, Ints, MaskedUpdateMessage, Message


@dataclass(frozen=True)
class PlainUpdateMessage(Message, tag=250):
    """The toy backend's update: the silo's counts, deltas and noise in the clear (tests only)."""

    round_index: U32
    silo: U32
    parameters: U32
    counts: Ints
    values: bytes


class PlaintextBackend(Backend):
    """Tests only, never secure: no shares, and the server weights the silos' plain deltas itself."""

    name = "plaintext-test"
    update_message = PlainUpdateMessage

    @classmethod
    def check_config(cls, config: ProtocolConfig) -> None:
        """Nothing can wrap around in float64."""

    def answer_shares(self, server, messages):
        if messages:
            raise ValueError("the plaintext backend has no shares")
        return {s: [] for s in range(self.config.n_silos)}

    def check_update(self, server, message, size):
        if not isinstance(message, PlainUpdateMessage):
            raise ValueError(f"not a plain update: {type(message).__name__}")

    def finish(self, server, updates, size):
        counts = np.array([u.counts for u in updates], dtype=float)
        totals = counts.sum(axis=0)
        weights = np.where(server.sampled, counts / np.where(totals > 0, totals, 1), 0.0)
        rows = [np.frombuffer(u.values).reshape(-1, size) for u in updates]
        return sum(w @ r[:-1] + r[-1] for w, r in zip(weights, rows, strict=True))

    def share(self, silo, message):
        return []

    def masked_update(self, silo, message, shared, deltas, noise, active):
        return PlainUpdateMessage(
            round_index=message.round_index,
            silo=silo.silo_id,
            parameters=deltas.shape[1],
            counts=tuple(silo.counts),
            values=np.vstack([deltas, noise]).tobytes(),
        )


COUNTS = np.array([[2, 0, 1, 4], [1, 3, 0, 4], [0, 1, 1, 0]])


def _federation(backend: str, rng: np.random.Generator):
    parameters = ProtocolParameters(key_bits=512, n_max=50, insecure_test_key=True, backend=backend)
    config = ProtocolConfig(n_silos=3, n_users=4, clip=1.0, sigma=1.0, parameters=parameters)
    silos = [SiloDriver(s, COUNTS[s], config) for s in range(3)]
    deltas = rng.uniform(-1, 1, size=(3, 4, 5)) * (COUNTS > 0)[:, :, None]
    noise = rng.normal(size=(3, 5))

    def exchange(stage, round_index, payloads):
        return {
            s: silos[s].answer(stage, round_index, p, inputs=lambda s=s: (deltas[s], noise[s]))
            for s, p in payloads.items()
        }

    return ServerDriver(config, exchange), deltas, noise


def _plain(deltas, noise, sampled):
    """sum_s (sum_u n_su / N_u delta_su + z_s) over the sampled users, by einsum (the independent oracle)."""
    weights = np.where(sampled, COUNTS / COUNTS.sum(axis=0), 0.0)
    return np.einsum("su,sud->d", weights, deltas) + noise.sum(axis=0)


def test_a_toy_backend_is_one_class_and_one_registry_line(monkeypatch):
    """Registered under a new name, the toy backend runs Protocol 1's set-up and rounds through the driver (which
    names no backend), and its rounds are the plain weighted sum; unregistered, the name is refused."""
    with pytest.raises(ValueError, match="backend must be one of"):
        ProtocolParameters(backend="plaintext-test")
    monkeypatch.setitem(BACKENDS, "plaintext-test", PlaintextBackend)
    driver, deltas, noise = _federation("plaintext-test", np.random.default_rng(1))
    driver.setup()
    for round_index, sampled in enumerate(
        ([True, True, True, False], [False, True, True, True]), 1
    ):
        chosen = np.array(sampled)
        result = driver.round(round_index, chosen, 5)
        np.testing.assert_allclose(result, _plain(deltas, noise, chosen), rtol=0, atol=1e-12)
    with pytest.raises(ProtocolAbort, match="bad PlainUpdateMessage"):
        driver.finish_round(
            {s: (MaskedUpdateMessage(3, s, 5, (1,)).to_bytes(),) for s in range(3)}, 5
        )


@pytest.mark.parametrize("backend", ["paillier", "packed-paillier"])
def test_every_registered_paillier_backend_is_within_p_through_the_driver(backend):
    driver, deltas, noise = _federation(backend, np.random.default_rng(2))
    driver.setup()
    sampled = np.array([True, False, True, True])
    result = driver.round(1, sampled, 5)
    assert np.max(np.abs(result - _plain(deltas, noise, sampled))) <= 1e-10


def test_the_registry_names_each_backend_by_its_own_name():
    assert {name: cls.name for name, cls in BACKENDS.items()} == {name: name for name in BACKENDS}
    assert set(BACKENDS) == {"paillier", "packed-paillier", "lattice"}
