"""uldp.secure.sampling: the silos draw each round's user sample from a seed the server never sees (issue 41 item 1).

The sample is checked against an independent recomputation (the ChaCha20 keystream read with Python integers), the
decoded sums against the plain sums over the silos' sample, and the server's view (every byte it receives) for two
different samples: the same messages of the same sizes, masked values uniform, and no contribution to the seed in it.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms
from hypothesis import given, settings, strategies as st

from uldp.secure.config import ProtocolConfig, ProtocolParameters
from uldp.secure.driver import ServerDriver, SiloDriver
from uldp.secure.masked_sum import STAGE_SAMPLE, MaskedSumServer, MaskedSumSilo, precision
from uldp.secure.masks import PURPOSE_SAMPLE
from uldp.secure.messages import (
    DhDirectoryMessage,
    MaskedSumMessage,
    SealedMessage,
    parse_message,
)
from uldp.secure.roster import Credentials, Identity, Roster
from uldp.secure.sampling import agreed_seed, sample_users


def oracle_sample(seed: bytes, round_index: int, n_users: int, q: float) -> list[bool]:
    """u is sampled iff its 8 little-endian keystream bytes, as an integer, are below floor(q 2^64)."""
    nonce = bytes(4) + PURPOSE_SAMPLE.to_bytes(4, "little") + round_index.to_bytes(8, "little")
    stream = (
        Cipher(algorithms.ChaCha20(seed, nonce), mode=None).encryptor().update(bytes(8 * n_users))
    )
    threshold = int(q * 2**64)
    return [int.from_bytes(stream[8 * u : 8 * u + 8], "little") < threshold for u in range(n_users)]


@settings(max_examples=20, deadline=None)
@given(
    seed=st.binary(min_size=32, max_size=32),
    round_index=st.integers(1, 2**40),
    q=st.floats(0.001, 0.999),
)
def test_the_sample_is_the_prf_below_q_and_poisson_at_rate_q(seed, round_index, q):
    n_users = 4000
    sample = sample_users(seed, round_index=round_index, n_users=n_users, q=q)
    assert sample.tolist() == oracle_sample(seed, round_index, n_users, q)
    spread = 5 * np.sqrt(n_users * q * (1 - q)) + 1
    assert abs(int(sample.sum()) - q * n_users) <= spread
    assert sample_users(seed, round_index=round_index, n_users=5, q=1.0).all()
    with pytest.raises(ValueError, match="q must be"):
        sample_users(seed, round_index=round_index, n_users=5, q=0.0)


def silos_and_server(n_silos: int, q: float, received: list):
    identities = [Identity.generate(f"silo-{s}") for s in range(n_silos)]
    roster = Roster.of(identities)
    silos = [
        MaskedSumSilo(s, n_silos, credentials=Credentials(identities[s], roster), sample_rate=q)
        for s in range(n_silos)
    ]

    def exchange(stage, round_index, payloads):
        answers = {s: silos[s].answer(stage, round_index, p) for s, p in payloads.items()}
        received.append((stage, {s: tuple(a) for s, a in answers.items()}))
        return answers

    server = MaskedSumServer(n_silos, exchange, hidden_sample=True)
    server.setup()
    return server, silos


def run_masked(user_updates: np.ndarray, q: float, rounds: int):
    """|S| silos with a hidden sample: each silo's update is the sum of its sampled users' updates."""
    n_silos, n_users, size = user_updates.shape
    received: list = []
    server, silos = silos_and_server(n_silos, q, received)
    results = []
    for round_index in range(1, rounds + 1):
        samples = [silo.sample(round_index, n_users) for silo in silos]
        assert all((sample == samples[0]).all() for sample in samples)
        answers = {
            s: silo.answer(
                "sum-update",
                round_index,
                (),
                update=lambda s=s, chosen=samples[0]: user_updates[s][chosen].sum(axis=0),
            )
            for s, silo in enumerate(silos)
        }
        received.append(("sum-update", answers))
        results.append((samples[0], server.finish_round(round_index, answers, size)))
    return results, received, silos


def test_the_masked_sum_of_a_hidden_sample_is_the_plain_sum_of_the_sampled_users_and_the_view_is_the_same():
    rng = np.random.default_rng(0)
    user_updates = rng.normal(size=(3, 40, 64))
    views = []
    samples = []
    for _ in range(2):  # two sessions: two seeds, two different samples
        results, received, silos = run_masked(user_updates, 0.3, rounds=3)
        for sample, decoded in results:
            exact = user_updates[:, sample].sum(axis=(0, 1))
            assert np.max(np.abs(decoded - exact)) <= precision(3)
        samples.append(np.stack([sample for sample, _ in results]))
        views.append(received)
        everything = b"".join(p for _, answers in received for a in answers.values() for p in a)
        for (
            silo
        ) in silos:  # neither a contribution nor the seed is ever in what the server receives
            assert silo._contribution not in everything and silo._sampling_seed not in everything
        assert STAGE_SAMPLE in [stage for stage, _ in received]
    assert not (samples[0] == samples[1]).all()
    shapes = [
        [(stage, {s: tuple(map(len, a)) for s, a in answers.items()}) for stage, answers in view]
        for view in views
    ]
    assert (
        shapes[0] == shapes[1]
    )  # the same messages of the same sizes, whichever users were sampled
    masked = np.concatenate(
        [
            np.frombuffer(MaskedSumMessage.from_bytes(a[0]).values, dtype="<u8")
            for view in views
            for stage, answers in view
            if stage == "sum-update"
            for a in answers.values()
        ]
    )
    top_bits = (masked >> np.uint64(63)).astype(
        float
    )  # uniform on the ring: half of them set, +- 5 sd
    assert abs(top_bits.mean() - 0.5) <= 5 * 0.5 / np.sqrt(masked.size)


def test_a_silo_with_a_hidden_sample_answers_no_round_before_its_seed_and_the_seed_is_everyones():
    silo = MaskedSumSilo(0, 2, sample_rate=0.5)
    peer = MaskedSumSilo(1, 2, sample_rate=0.5)
    directory = DhDirectoryMessage((silo.public_key().public_key, peer.public_key().public_key))
    sealed = silo.answer("sum-directory", 0, (directory.to_bytes(),))
    other = peer.answer("sum-directory", 0, (directory.to_bytes(),))
    with pytest.raises(ValueError, match="nor, with a hidden sample, before its seed"):
        silo.masked_update(1, np.zeros(2))
    with pytest.raises(ValueError, match="is not one it expects"):
        silo.answer(STAGE_SAMPLE, 0, sealed)  # its own contribution, addressed to the peer
    message = SealedMessage.from_bytes(other[0])
    tampered = replace(
        message, ciphertext=bytes([message.ciphertext[0] ^ 1]) + message.ciphertext[1:]
    )
    with pytest.raises(ValueError, match="failed authentication"):
        silo.answer(STAGE_SAMPLE, 0, (tampered.to_bytes(),))
    silo.answer(STAGE_SAMPLE, 0, other)
    peer.answer(STAGE_SAMPLE, 0, sealed)
    assert (
        silo._sampling_seed
        == peer._sampling_seed
        == agreed_seed([silo._contribution, peer._contribution], session=silo._session)
    )
    restored = MaskedSumSilo.restore(silo.export_state(), sample_rate=0.5)
    assert (restored.sample(4, 100) == peer.sample(4, 100)).all()


KEYS = ProtocolParameters(key_bits=512, n_max=50, insecure_test_key=True)


def test_protocol_1_with_a_hidden_sample_is_the_weighted_sum_of_the_sampled_users_within_p():
    rng = np.random.default_rng(1)
    counts = rng.integers(0, 4, size=(3, 12))
    counts[0] += counts.sum(axis=0) == 0  # every user holds a record
    config = ProtocolConfig(n_silos=3, n_users=12, clip=1.0, sigma=1.0, parameters=KEYS)
    silos = [SiloDriver(s, counts[s], config, sample_rate=0.4) for s in range(3)]
    inputs = {s: (rng.uniform(-1, 1, size=(12, 3)), rng.uniform(-1, 1, size=3)) for s in range(3)}
    sent: list = []

    def exchange(stage, round_index, payloads):
        sent.append(
            {s: tuple(parse_message(p).__class__.__name__ for p in m) for s, m in payloads.items()}
        )
        return {
            s: silos[s].answer(stage, round_index, p, inputs=lambda s=s: inputs[s])
            for s, p in payloads.items()
        }

    server = ServerDriver(config, exchange)
    server.setup()
    every_user = np.ones(12, dtype=bool)  # the server is not told the sample
    weights_all = counts / counts.sum(axis=0)
    for round_index in (1, 2, 3):
        sample = silos[0].sample(round_index)
        assert all((silo.sample(round_index) == sample).all() for silo in silos)
        decoded = server.round(round_index, every_user, 3)
        weights = np.where(sample, weights_all, 0.0)
        exact = sum(weights[s] @ inputs[s][0] + inputs[s][1] for s in range(3))
        assert np.max(np.abs(decoded - exact)) <= KEYS.precision
        unsampled = sum(weights_all[s] @ inputs[s][0] + inputs[s][1] for s in range(3))
        assert sample.all() or np.max(np.abs(decoded - unsampled)) > KEYS.precision
