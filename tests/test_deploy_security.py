"""The server-side denoising attack of issue 25 against the deployment roles (uldp.deploy.method_roles).

The server is the adversary of the paper's trust model (Section 3.1: semi-honest server). It holds the shared run
configuration, seed included, and builds the method from it with its own objects; if a silo drew its noise from
that seed, the server could rebuild the noise and subtract it (to ~1e-8 before the fix). Each silo now draws its
noise from its own secret (OS CSPRNG), so what the server subtracts is unrelated noise: the residual has the size of
two independent noises, not of the clean update.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from uldp.deploy.method_roles import DeployConfig, MethodServer, MethodSilo
from uldp.methods import EveryRecordSiloNoise

os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")
NOISY = ["ULDP-NAIVE", "ULDP-SGD", "ULDP-SGD-w", "ULDP-AVG", "ULDP-AVG-w"]


@pytest.fixture(scope="module")
def synthetic():
    from uldp.data import load

    return load("synthetic")


def _config(method: str, *, insecure: bool = False, **fields) -> DeployConfig:
    from uldp.simulation import RunConfig

    run = RunConfig(
        dataset="synthetic",
        method=method,
        n_users=8,
        rounds=2,
        seed=3,
        max_train_records=200,
        local_epochs=None if method.startswith("ULDP-SGD") else 1,
        **fields,
    )
    return DeployConfig(run, **({"insecure_reproducible_noise": True} if insecure else {}))


def _server_rebuilt_noise(server: MethodServer, size: int, round_index: int) -> list[np.ndarray]:
    """The attack: every silo's noise rebuilt from the shared configuration alone (the server's own objects)."""
    from uldp.fitting import round_seed

    shared = round_seed(np.random.SeedSequence(server.config.run.seed), round_index - 1)
    method = server.method
    assert isinstance(method, EveryRecordSiloNoise)
    return [
        method.silo_noise(size, server.n_silos, shared, s).numpy() for s in range(server.n_silos)
    ]


def _plain_residuals(config: DeployConfig, dataset) -> tuple[np.ndarray, float]:
    """What each silo sent minus the noise the server rebuilt, over 2 rounds; and the per-silo noise std."""
    server = MethodServer(config, dataset)
    silos = [MethodSilo(config, s, dataset) for s in range(server.n_silos)]
    params, residuals = server.initial_params(), []
    for round_index in (1, 2):
        sampled = server.sampled_users(round_index)
        received = [silo.contribution(params, round_index, sampled) for silo in silos]
        rebuilt = _server_rebuilt_noise(server, params.size, round_index)
        residuals += [r.astype(np.float64) - z for r, z in zip(received, rebuilt, strict=True)]
        params = server.combine(params, received, round_index)
    assert isinstance(server.method, EveryRecordSiloNoise)
    return np.concatenate(residuals), server.method.noise_std(server.n_silos)


@pytest.mark.parametrize("method", NOISY)
def test_the_server_cannot_remove_a_silos_noise(method, synthetic) -> None:
    """Each silo's contribution minus the server's rebuilt noise keeps noise of std sqrt(2) sigma_z (two independent
    draws), not the clean update (std below C, ~30 times smaller here)."""
    residual, noise_std = _plain_residuals(_config(method), synthetic)
    assert 0.5 * np.sqrt(2) * noise_std < residual.std() < 2 * np.sqrt(2) * noise_std


def test_the_insecure_option_is_what_the_attack_needs(synthetic) -> None:
    """With ``insecure_reproducible_noise`` the server strips the noise: what is left is the clean update (a weighted
    sum of clipped deltas), far below the noise. This is why the option is for tests only."""
    residual, noise_std = _plain_residuals(_config("ULDP-AVG-w", insecure=True), synthetic)
    assert residual.std() < 0.05 * noise_std


@pytest.mark.parametrize("method", ["ULDP-NAIVE", "ULDP-GROUP-2", "ULDP-AVG-w"])
def test_a_silos_draws_are_not_a_function_of_the_shared_configuration(method, synthetic) -> None:
    """Two processes of the same silo with the same configuration send different contributions (its noise, and
    ULDP-GROUP's DP-SGD sampling and noise, come from its own secret); the same ones with the insecure option."""
    for insecure in (False, True):
        config = _config(method, insecure=insecure)
        server = MethodServer(config, synthetic)
        params, sampled = server.initial_params(), np.ones(server.n_users, dtype=bool)
        first, second = (
            MethodSilo(config, 0, synthetic).contribution(params, 1, sampled) for _ in range(2)
        )
        assert np.array_equal(first, second) == insecure


def test_the_server_cannot_remove_the_noise_on_the_secure_path(synthetic) -> None:
    """Protocol 1 (512-bit test keys) on the silos' secure inputs: the decoded aggregate minus the server's rebuilt
    noise differs from the clean weighted sum by noise of std sqrt(2) sigma C (before the fix: within P = 1e-10)."""
    from uldp.methods import enhanced_weights
    from uldp.secure import SecureAggregator

    config = _config(
        "ULDP-AVG-w",
        secure=True,
        protocol={"key_bits": 512, "insecure_test_key": True, "n_max": 200},
    )
    server = MethodServer(config, synthetic)
    silos = [MethodSilo(config, s, synthetic) for s in range(server.n_silos)]
    protocol = server.protocol_config()
    aggregate = SecureAggregator(protocol.parameters, clip=protocol.clip, sigma=protocol.sigma)
    params, errors = server.initial_params(), []
    for round_index in (1, 2):
        sampled = server.sampled_users(round_index)
        deltas, noise = zip(
            *(silo.secure_inputs(params, round_index, sampled) for silo in silos), strict=True
        )
        decoded = (
            aggregate(list(deltas), server.counts, sampled, list(noise)).numpy().astype(np.float64)
        )
        weights = enhanced_weights(server.counts, sampled)
        clean = sum(weights[s] @ deltas[s].astype(np.float64) for s in range(server.n_silos))
        denoised = decoded - sum(_server_rebuilt_noise(server, params.size, round_index))
        errors.append(denoised - clean)
        params = server.apply_aggregate(params, decoded, round_index)
    error, expected = np.concatenate(errors), np.sqrt(2) * config.run.sigma * config.run.clip
    assert 0.5 * expected < error.std() < 2 * expected


def test_a_deployed_silo_uses_the_servers_key_only_with_its_proof(synthetic) -> None:
    """Issue 30 item 9 on the wire (Flower's FitIns/FitRes bytes): the real deploy silo refuses a smooth modulus of
    the right length, sent with the proof of the server's real key, by name at step 1(b); the real key passes."""
    from deploy_harness import make_config, silo_clients
    from hostile_keys import smooth_modulus, swapped_modulus

    from uldp.deploy import wire
    from uldp.deploy.method_roles import MethodSilo
    from uldp.secure import protocol
    from uldp.secure.messages import (
        DhDirectoryMessage,
        DhPublicKeyMessage,
        PublicKeyMessage,
        RingPedersenMessage,
    )

    deploy_config = make_config(secure=True)
    server = protocol.Server(MethodSilo(deploy_config, 0, synthetic).protocol_config())
    smooth = smooth_modulus(deploy_config.protocol.key_bits, deploy_config.protocol.n_max)
    client = silo_clients(synthetic, deploy_config)[0]

    def send(stage, *payloads):
        return wire.Reply.from_flower(
            client.fit(wire.Instruction(stage, 0, payloads=payloads).to_flower())
        )

    for modulus, error in (
        (smooth, "ProtocolAbort: silo 0 refuses the server's Paillier key: modulus proof: "),
        (server.public_key.n, ""),
    ):
        dh_key, request = send(
            wire.STAGE_SECURE_KEYS, PublicKeyMessage(modulus).to_bytes()
        ).payloads
        proof = swapped_modulus(
            server.prove_modulus(RingPedersenMessage.from_bytes(request)), modulus
        )
        own = DhPublicKeyMessage.from_bytes(dh_key).public_key
        directory = DhDirectoryMessage((own, b"k" * 32, b"k" * 32))
        reply = send(wire.STAGE_SECURE_DIRECTORY, directory.to_bytes(), proof.to_bytes())
        assert reply.error.startswith(error) if error else reply.error == "", reply.error
