"""uldp.secure.driver: Protocol 1's one driver keeps the stage order, checks every answer, and a silo answers each
round index at most once (issue 29 item 2; issue 30 attack 2 on Protocol 1), and uses the server's key only once its
proof passed (issue 30 item 9)."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from hostile_keys import odd_part, smooth_modulus

from uldp.secure import modulus_proof
from uldp.secure.config import ProtocolConfig, ProtocolParameters
from uldp.secure.driver import (
    STAGE_DIRECTORY,
    STAGE_KEY,
    STAGE_SHARES,
    STAGE_UPDATE,
    ProtocolAbort,
    ServerDriver,
    SiloDriver,
)
from uldp.secure.messages import BlindedHistogramMessage, ModulusProofMessage, RingPedersenMessage
from uldp.secure.protocol import Server

KEYS = ProtocolParameters(key_bits=512, n_max=50, insecure_test_key=True)
COUNTS = np.array([[2, 0, 1], [1, 3, 0]])
CONFIG = ProtocolConfig(n_silos=2, n_users=3, clip=1.0, sigma=1.0, parameters=KEYS)


class Federation:
    """Two silo drivers behind an in-process exchange that can replay or rewrite what the server sends."""

    def __init__(self) -> None:
        self.silos = [SiloDriver(s, COUNTS[s], CONFIG) for s in range(2)]
        self.inputs = {
            s: (np.full((3, 2), 0.25 * (s + 1)), np.array([0.5, -0.5])) for s in range(2)
        }
        self.sent: list[tuple[str, int, dict]] = []
        self.server = ServerDriver(CONFIG, self.exchange)

    def exchange(self, stage, round_index, payloads):
        self.sent.append((stage, round_index, payloads))
        return {
            s: self.silos[s].answer(stage, round_index, p, inputs=lambda s=s: self.inputs[s])
            for s, p in payloads.items()
        }


def test_a_round_through_the_driver_is_the_weighted_sum_within_p() -> None:
    federation = Federation()
    federation.server.setup()
    sampled = np.array([True, True, False])
    decoded = federation.server.round(1, sampled, 2)
    weights = np.where(sampled, COUNTS / COUNTS.sum(axis=0), 0.0)
    exact = sum(weights[s] @ federation.inputs[s][0] + federation.inputs[s][1] for s in range(2))
    assert np.max(np.abs(decoded - exact)) <= KEYS.precision
    assert [stage for stage, _, _ in federation.sent] == [
        "p1-key",
        "p1-directory",
        "p1-seed",
        "p1-shares",
        "p1-check",
        "p1-update",
    ]


def test_stages_out_of_order_are_refused_by_name_not_attribute_errors() -> None:
    """Before the driver, a silo given the directory before the key failed with AttributeError (_session)."""
    silo = SiloDriver(0, COUNTS[0], CONFIG)
    with pytest.raises(
        ProtocolAbort, match=f"refuses {STAGE_DIRECTORY} of round 0: it expects {STAGE_KEY}"
    ):
        silo.answer(STAGE_DIRECTORY, 0, (b"",))
    with pytest.raises(
        ProtocolAbort, match=f"refuses {STAGE_SHARES} of round 1: it expects {STAGE_KEY}"
    ):
        silo.answer(STAGE_SHARES, 1, (b"",))
    with pytest.raises(ProtocolAbort, match="unknown Protocol 1 stage 'p1-other'"):
        silo.answer("p1-other", 0, ())
    server = ServerDriver(CONFIG, Federation().exchange)
    with pytest.raises(ProtocolAbort, match="before Protocol 1's set-up"):
        server.begin_round(1, np.ones(3, bool))
    with pytest.raises(ProtocolAbort, match="no round was started"):
        server.finish_round({}, 2)


def test_an_update_before_its_shares_and_a_second_set_up_step_are_refused() -> None:
    federation = Federation()
    federation.server.setup()
    key_message = federation.sent[0][2][0]
    with pytest.raises(ProtocolAbort, match=f"refuses {STAGE_KEY}"):
        federation.silos[0].answer(STAGE_KEY, 0, key_message)
    with pytest.raises(ProtocolAbort, match=f"refuses {STAGE_UPDATE} of round 1"):
        federation.silos[0].answer(STAGE_UPDATE, 1, (b"",), inputs=lambda: federation.inputs[0])


def test_a_replayed_round_gets_no_second_masked_update() -> None:
    """Attack 2 on Protocol 1: asked for round 1 again (its weights and shares resent), a silo used to answer with
    the same masks and fresh inputs, and the key holder's Dec(A / B) was the difference of the clean updates.
    Now the repeated round and any older one are refused, and a refused round draws nothing (inputs not called)."""
    federation = Federation()
    federation.server.setup()
    federation.server.round(2, np.ones(3, bool), 2)
    shares_stage, update_stage = federation.sent[-2], federation.sent[-1]
    drawn: list[int] = []

    def draw() -> tuple[np.ndarray, np.ndarray]:
        drawn.append(1)
        return federation.inputs[1]

    for stage, round_index, payloads in (
        shares_stage,
        update_stage,
        (STAGE_SHARES, 1, shares_stage[2]),
    ):
        with pytest.raises(
            ProtocolAbort, match=f"round {round_index}: it expects p1-shares of a round after 2"
        ):
            federation.silos[1].answer(stage, round_index, payloads[1], inputs=draw)
    assert not drawn
    with pytest.raises(ProtocolAbort, match="each round index is used once"):
        federation.server.begin_round(2, np.ones(3, bool))
    assert federation.server.round(3, np.ones(3, bool), 2).shape == (2,)


def test_a_silo_answer_claiming_another_silo_aborts_naming_the_sender() -> None:
    federation = Federation()

    def swap(stage, round_index, payloads):
        answers = federation.exchange(stage, round_index, payloads)
        return {0: answers[1], 1: answers[0]} if stage == STAGE_KEY else answers

    with pytest.raises(
        ProtocolAbort,
        match="p1-key: silo 0 sent a bad DhPublicKeyMessage: it claims to come from silo 1",
    ) as caught:
        ServerDriver(CONFIG, swap).setup()
    assert caught.value.silo == 0

    fresh = Federation()

    def drop(stage, round_index, payloads):
        return {0: fresh.exchange(stage, round_index, payloads)[0]}

    with pytest.raises(ProtocolAbort, match=r"no answer from silo\(s\) \[1\]"):
        ServerDriver(CONFIG, drop).setup()


# --- beyond the paper: a malicious server's key (issue 30 item 9) ------------------------------------------------
class SmoothKeyServer(Server):
    """A server that announces a smooth ``modulus`` (sending its real key's proof: it has none for this one) and keeps
    the silos' blinded histograms."""

    def __init__(self, config: ProtocolConfig, modulus: int) -> None:
        super().__init__(config)
        self._n, self.histograms = modulus, list[BlindedHistogramMessage]()

    def receive_histograms(self, messages) -> None:
        self.histograms.extend(messages)


def _malicious_setup(
    counts: np.ndarray, modulus: int
) -> tuple[ServerDriver, SmoothKeyServer, list[str]]:
    config = ProtocolConfig(
        n_silos=counts.shape[0], n_users=counts.shape[1], clip=1.0, sigma=1.0, parameters=KEYS
    )
    silos = [SiloDriver(s, counts[s], config) for s in range(counts.shape[0])]
    stages: list[str] = []

    def exchange(stage, round_index, payloads):
        stages.append(stage)
        return {s: silos[s].answer(stage, round_index, p) for s, p in payloads.items()}

    driver = ServerDriver(config, exchange)
    driver.server = server = SmoothKeyServer(config, modulus)
    return driver, server, stages


def test_a_smooth_modulus_reveals_every_users_odd_count_if_accepted_and_set_up_refuses_it(
    monkeypatch,
) -> None:
    """Issue 30 item 9: with n smooth, gcd(B(N_u), n) = gcd(r_u N_u, n) is the odd part of N_u. A silo that took any
    odd number of the right length (09fdb4c; here the proof check switched off) leaks it for 12 of 12 users; with
    the check, silo 0 refuses the key at step 1(b) and no blinded count ever leaves a silo."""
    counts = np.random.default_rng(3).integers(1, 17, size=(3, 12))
    totals = counts.sum(axis=0)
    modulus = smooth_modulus(KEYS.key_bits, KEYS.n_max)
    with monkeypatch.context() as patch:
        patch.setattr(
            modulus_proof, "verify_modulus", lambda *args, **kwargs: None
        )  # 09fdb4c's silo
        driver, server, _ = _malicious_setup(counts, modulus)
        driver.setup()
    blinded = [sum(h.values[u] for h in server.histograms) % modulus for u in range(12)]
    assert [math.gcd(b, modulus) for b in blinded] == [odd_part(int(t)) for t in totals]  # 12 of 12
    assert sum(odd_part(int(t)) > 1 for t in totals) >= 10  # and most of them are not 1
    driver, server, stages = _malicious_setup(counts, modulus)
    with pytest.raises(
        ProtocolAbort, match="silo 0 refuses the server's Paillier key: modulus proof: "
    ) as refused:
        driver.setup()
    assert refused.value.silo == 0
    assert stages == [STAGE_KEY, STAGE_DIRECTORY] and server.histograms == []


def test_a_modulus_proof_made_for_another_silo_or_session_is_refused() -> None:
    """The proof binds the silo's id, its own ring-Pedersen parameters and its fresh nonce (Fiat-Shamir)."""

    def deliver(change):
        federation = Federation()
        honest = federation.exchange

        def exchange(stage, round_index, payloads):
            return honest(
                stage, round_index, change(payloads) if stage == STAGE_DIRECTORY else payloads
            )

        federation.server._exchange = exchange
        return federation

    silo_0s = deliver(lambda payloads: {0: payloads[0], 1: payloads[0]})
    with pytest.raises(
        ProtocolAbort,
        match="silo 1 refuses the server's Paillier key: modulus proof: it is for "
        "silo 0, this is silo 1",
    ):
        silo_0s.server.setup()

    def readdressed(payloads):
        proof = ModulusProofMessage.from_bytes(payloads[0][1])
        return {0: payloads[0], 1: (payloads[1][0], replace(proof, silo=1).to_bytes())}

    with pytest.raises(
        ProtocolAbort, match="silo 1 refuses the server's Paillier key: modulus proof: challenge 0 "
    ):
        deliver(readdressed).server.setup()
    earlier = Federation()
    earlier.server.setup()
    key_message, old_directory = earlier.sent[0][2][0], earlier.sent[1][2][0]
    again = SiloDriver(
        0, COUNTS[0], CONFIG, verifier=earlier.silos[0].role.verifier
    )  # same group, new session
    again.answer(STAGE_KEY, 0, key_message)
    with pytest.raises(
        ProtocolAbort, match="silo 0 refuses the server's Paillier key: modulus proof: challenge 0 "
    ):
        again.answer(STAGE_DIRECTORY, 0, old_directory)


def test_the_server_refuses_to_prove_against_a_silos_parameters_that_fail_their_proof() -> None:
    """An s outside <t> would let a silo learn the server's factors from the commitments (CGGMP20 Figure 17)."""
    federation = Federation()
    honest = federation.exchange

    def exchange(stage, round_index, payloads):
        answers = honest(stage, round_index, payloads)
        if stage == STAGE_KEY:
            request = RingPedersenMessage.from_bytes(answers[1][1])
            answers[1] = (answers[1][0], replace(request, s=request.modulus - request.s).to_bytes())
        return answers

    federation.server._exchange = exchange
    with pytest.raises(
        ProtocolAbort,
        match="silo 1 sent ring-Pedersen parameters the server cannot prove against: "
        "ring-Pedersen proof: challenge",
    ) as refused:
        federation.server.setup()
    assert refused.value.silo == 1
