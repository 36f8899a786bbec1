"""uldp.secure.weight_check: weights a malicious server cannot inflate (issue 41 item 4). The attack: the server
encrypts lambda * B_inv(N_u) for one target user in step 2(a), and every silo weights that user's delta lambda times
(n_su / N_u), lifting it lambda times above the noise. Now the silos' joint check refuses it on both Paillier
backends before any update leaves, an honest round passes, a forged decryption proof is refused, and a silo whose
policy asks for a malicious server's guarantee refuses the lattice backend, whose weights cannot be checked."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from uldp.secure import weight_check
from uldp.secure.backends.paillier import PaillierBackend
from uldp.secure.config import ProtocolConfig, ProtocolParameters
from uldp.secure.driver import STAGE_CHECK, STAGE_UPDATE, ProtocolAbort, ServerDriver, SiloDriver
from uldp.secure.messages import EncryptedWeightsMessage, WeightCheckProofMessage
from uldp.secure.protocol import Server

COUNTS = np.array([[2, 0, 1, 4], [1, 3, 0, 4], [0, 1, 1, 1]])
TARGET, LAMBDA = 3, 2**20
SAMPLED = np.array([True, True, False, True])


class InflatingServer(Server):
    """A malicious server: Enc(B_inv(N_t))^lambda = Enc(lambda B_inv(N_t)) for the target in step 2(a)."""

    sent = b""  # the last weights it sent

    def start_round(self, round_index, sampled):
        honest = super().start_round(round_index, sampled)
        ciphertexts = list(honest.ciphertexts)
        ciphertexts[TARGET] = pow(ciphertexts[TARGET], LAMBDA, self.modulus**2)
        message = EncryptedWeightsMessage(round_index=round_index, ciphertexts=tuple(ciphertexts))
        self.sent = message.to_bytes()
        return message


class Federation:
    """Three silo drivers behind an in-process exchange; ``forge`` may rewrite the update stage's payloads."""

    def __init__(self, backend, *, server=Server, forge=None):
        parameters = ProtocolParameters(
            key_bits=512, n_max=50, insecure_test_key=True, backend=backend
        )
        self.config = ProtocolConfig(
            n_silos=3, n_users=4, clip=1.0, sigma=1.0, parameters=parameters
        )
        rng = np.random.default_rng(5)
        self.deltas = rng.uniform(-1, 1, size=(3, 4, 6)) * (COUNTS > 0)[:, :, None]
        self.noise = rng.normal(scale=0.1, size=(3, 6))
        self.silos = [SiloDriver(s, COUNTS[s], self.config) for s in range(3)]
        self.drawn: list[int] = []
        self.forge = forge
        self.driver = ServerDriver(self.config, self.exchange)
        self.driver.server = server(self.config)
        self.driver.setup()

    def exchange(self, stage, round_index, payloads):
        if stage == STAGE_UPDATE and self.forge is not None:
            payloads = {s: self.forge(p) for s, p in payloads.items()}
        return {
            s: self.silos[s].answer(stage, round_index, p, inputs=lambda s=s: self.inputs(s))
            for s, p in payloads.items()
        }

    def inputs(self, silo):
        self.drawn.append(silo)
        return self.deltas[silo], self.noise[silo]

    def plain(self, factor=1.0):
        """sum_s (sum_u b_u n_su / N_u delta_su + z_s), the target's weight times ``factor`` (einsum oracle)."""
        weights = np.where(SAMPLED, COUNTS / COUNTS.sum(axis=0), 0.0)
        weights[:, TARGET] *= factor
        return np.einsum("su,sud->d", weights, self.deltas) + self.noise.sum(axis=0)


@pytest.mark.parametrize("backend", ["paillier", "packed-paillier"])
def test_an_honest_round_passes_the_check_and_stays_within_p(backend):
    federation = Federation(backend)
    result = federation.driver.round(1, SAMPLED, 6)
    assert np.max(np.abs(result - federation.plain())) <= 1e-10
    assert sorted(federation.drawn) == [0, 1, 2]


def test_without_the_check_the_inflated_weight_lifts_the_target_lambda_times(monkeypatch):
    """The attack as it was (main at 810a402 had no check): the round decodes with the target's weight times 2^20."""
    monkeypatch.setattr(PaillierBackend, "checks_weights", False)
    federation = Federation("paillier", server=InflatingServer)
    result = federation.driver.round(1, SAMPLED, 6)
    np.testing.assert_allclose(result, federation.plain(LAMBDA), rtol=1e-9)
    assert not np.allclose(result, federation.plain(), atol=1.0)


@pytest.mark.parametrize("backend", ["paillier", "packed-paillier"])
def test_an_inflated_weight_is_refused_before_any_update_leaves(backend):
    federation = Federation(backend, server=InflatingServer)
    with pytest.raises(
        ProtocolAbort, match=r"refuses the server's weights of round 1: .*not what the counts imply"
    ):
        federation.driver.round(1, SAMPLED, 6)
    assert federation.drawn == []  # no silo trained, drew noise or sent an update


def _forged(change):
    def forge(payloads):
        proof = WeightCheckProofMessage.from_bytes(payloads[-1])
        return (*payloads[:-1], replace(proof, **change(proof)).to_bytes())

    return forge


@pytest.mark.parametrize(
    ("change", "refusal"),
    [
        (lambda proof: {"plaintext": (proof.plaintext + 1)}, "decryption proof fails"),
        (lambda proof: {"randomness": 1}, "decryption proof fails"),
        (
            lambda proof: {"contributions": (1, *proof.contributions[1:])},
            "does not hold silo 0's",
        ),
        (lambda proof: {"sampled": bytes(4)}, "not what the counts imply"),
    ],
)
def test_a_forged_decryption_proof_or_list_is_refused(change, refusal):
    federation = Federation("paillier", forge=_forged(change))
    with pytest.raises(ProtocolAbort, match=refusal):
        federation.driver.round(1, SAMPLED, 6)
    assert federation.drawn == []


def test_an_inflated_weight_with_the_expected_plaintext_still_fails_its_proof():
    """The server claims the honest sum (computed here from a silo's secrets, which the server lacks) for the
    inflated weights: without the key's randomness for that plaintext, the proof fails."""
    federation: Federation

    def claim_honest(proof):
        silo, server = federation.silos[0].role, federation.driver.server
        assert isinstance(server, InflatingServer)
        coefficients = silo.seed_elements(
            weight_check.weights_label(server.sent),
            modulus=1 << weight_check.COEFFICIENT_BITS,
            round_index=1,
            purpose=weight_check.PURPOSE_WEIGHT_CHECK,
        )
        honest = silo.config.c_lcm * sum(c for c, b in zip(coefficients, SAMPLED, strict=True) if b)
        return {"plaintext": honest % silo.modulus}

    federation = Federation("paillier", server=InflatingServer, forge=_forged(claim_honest))
    with pytest.raises(ProtocolAbort, match="decryption proof fails"):
        federation.driver.round(1, SAMPLED, 6)


def test_the_check_is_answered_once_per_round():
    federation = Federation("paillier")
    sent = []
    exchange = federation.exchange

    def record(stage, round_index, payloads):
        sent.append((stage, payloads))
        return exchange(stage, round_index, payloads)

    federation.driver._exchange = record
    federation.driver.round(1, SAMPLED, 6)
    check = next(payloads for stage, payloads in sent if stage == STAGE_CHECK)
    with pytest.raises(ProtocolAbort, match="refuses p1-check of round 1"):
        federation.silos[0].answer(STAGE_CHECK, 1, check[0])


def test_a_malicious_server_policy_refuses_the_lattice_backend():
    parameters = ProtocolParameters(
        key_bits=1024, n_max=50, insecure_test_key=True, backend="lattice"
    )
    config = ProtocolConfig(
        n_silos=3, n_users=4, clip=0.5, sigma=1.0, noise_bound=3.0, parameters=parameters
    )
    with pytest.raises(
        ProtocolAbort, match="refuses the lattice backend: its policy asks for a guarantee"
    ):
        SiloDriver(0, COUNTS[0], config, malicious_server=True)
    assert SiloDriver(0, COUNTS[0], config).role.backend.checks_weights is False
    paillier = replace(config, parameters=replace(parameters, backend="paillier", key_bits=512))
    assert SiloDriver(0, COUNTS[0], paillier, malicious_server=True).role.backend.checks_weights


def test_the_decryption_proof_is_the_encryption_randomness():
    """prove_decryption's r is the r of (1 + n)^m r^n: checked against an encryption made with a known r."""
    server = Server(
        ProtocolConfig(
            n_silos=2,
            n_users=2,
            clip=1.0,
            sigma=1.0,
            parameters=ProtocolParameters(key_bits=512, n_max=50, insecure_test_key=True),
        )
    )
    n, rng = server.modulus, np.random.default_rng(7)
    p, q = int(server._private_key.p), int(server._private_key.q)
    for _ in range(5):
        m, r = int(rng.integers(0, 2**62)), int(rng.integers(2, 2**62))
        ciphertext = (1 + m * n) * pow(r, n, n * n) % (n * n)
        assert weight_check.prove_decryption(ciphertext, m, p=p, q=q) == r
        weight_check.verify_decryption(ciphertext, m, r, n)
        with pytest.raises(ValueError, match="proof fails"):
            weight_check.verify_decryption(ciphertext, m + 1, r, n)
