"""uldp.secure.masked_sum: Protocol 1's pairwise masks over the silos' plain updates (no Paillier)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from uldp.secure.driver import ProtocolAbort
from uldp.secure.masked_sum import (
    RESOLUTION_BITS,
    STAGE_UPDATE,
    MaskedSumServer,
    MaskedSumSilo,
    precision,
    value_limit,
)
from uldp.secure.messages import MaskedSumMessage


def session(n_silos: int) -> tuple[MaskedSumServer, list[MaskedSumSilo], list]:
    """A server and |S| silos set up over an in-process exchange that records every message the server gets."""
    silos = [MaskedSumSilo(s, n_silos) for s in range(n_silos)]
    received: list = []

    def exchange(stage, round_index, payloads):
        answers = {s: silos[s].answer(stage, round_index, p) for s, p in payloads.items()}
        received.append(answers)
        return answers

    server = MaskedSumServer(n_silos, exchange)
    server.setup()
    return server, silos, received


@settings(max_examples=25, deadline=None)
@given(n_silos=st.integers(2, 5), size=st.integers(1, 40), round_index=st.integers(1, 2**32 - 1))
def test_the_pairwise_masks_cancel_exactly(n_silos, size, round_index):
    _, silos, _ = session(n_silos)
    total = sum(
        (silo.net_mask(round_index, size) for silo in silos), np.zeros(size, dtype=np.uint64)
    )
    assert not total.any()
    assert all(silo.net_mask(round_index, size).any() for silo in silos)


@settings(max_examples=25, deadline=None)
@given(n_silos=st.integers(2, 5), data=st.data())
def test_the_masked_sum_is_the_plain_sum_within_the_encodings_precision(n_silos, data):
    size = data.draw(st.integers(1, 30))
    bound = value_limit(n_silos) / 2.0**RESOLUTION_BITS * 0.99
    values = st.floats(-bound, bound, allow_nan=False, allow_subnormal=False)
    updates = [
        np.array(data.draw(st.lists(values, min_size=size, max_size=size))) for _ in range(n_silos)
    ]
    server, silos, _ = session(n_silos)
    answers = {
        s: (silos[s].masked_update(7, update).to_bytes(),) for s, update in enumerate(updates)
    }
    decoded = server.finish_round(7, answers, size)
    exact = np.sum(
        [np.rint(np.ldexp(u, RESOLUTION_BITS)) for u in updates], axis=0
    )  # fixed point, summed exactly
    assert (
        np.abs(decoded - np.ldexp(exact, -RESOLUTION_BITS)).max() <= np.abs(exact).max() * 2.0**-52
    )
    assert (
        np.abs(decoded - np.sum(updates, axis=0)).max()
        <= precision(n_silos) + np.abs(exact).max() * 2.0**-50
    )


def test_the_server_never_gets_a_silos_update():
    """Everything the server receives: public keys at the set-up, then per round one message per silo that is
    uniform on the ring (a silo's message decoded alone is nowhere near its update)."""
    server, silos, received = session(3)
    updates = [np.full(50, 0.25 * (s + 1)) for s in range(3)]
    messages = [silo.masked_update(1, update) for silo, update in zip(silos, updates, strict=True)]
    for message, update in zip(messages, updates, strict=True):
        alone = np.ldexp(
            np.frombuffer(message.values, "<u8").view(np.int64).astype(np.float64), -RESOLUTION_BITS
        )
        assert np.abs(alone - update).min() > 1e3
    assert len(received) == 2 and not any(
        received[1].values()
    )  # keys, then the directory's empty answers
    np.testing.assert_allclose(
        server.finish_round(1, {s: (m.to_bytes(),) for s, m in enumerate(messages)}, 50),
        np.full(50, 1.5),
        atol=precision(3),
    )


def test_a_round_is_answered_once_and_never_unmasked():
    _, silos, _ = session(2)
    silos[0].masked_update(3, np.ones(4))
    for round_index in (3, 2):
        with pytest.raises(ValueError, match="each round index at most once"):
            silos[0].masked_update(round_index, np.ones(4))
    with pytest.raises(ValueError, match="never sends its update unmasked"):
        MaskedSumSilo(0, 2).answer(STAGE_UPDATE, 1, (), update=lambda: np.ones(4))
    restored = MaskedSumSilo.restore(silos[0].export_state())
    with pytest.raises(ValueError, match="at most once"):
        restored.masked_update(3, np.ones(4))
    np.testing.assert_array_equal(restored.net_mask(4, 6), silos[0].net_mask(4, 6))


def test_a_value_that_could_wrap_the_ring_is_refused():
    _, silos, _ = session(3)
    with pytest.raises(ValueError, match="past the masked sum's range"):
        silos[0].masked_update(1, np.array([1.01 * value_limit(3) / 2.0**RESOLUTION_BITS]))
    with pytest.raises(ValueError, match="NaN or infinite"):
        silos[0].masked_update(2, np.array([np.nan]))


def test_bad_answers_name_the_silo():
    server, silos, _ = session(3)
    good = {s: (silo.masked_update(1, np.zeros(3)).to_bytes(),) for s, silo in enumerate(silos)}
    with pytest.raises(ProtocolAbort, match=r"no masked update from silo\(s\) \[2\]") as missing:
        server.finish_round(1, {0: good[0], 1: good[1]}, 3)
    assert missing.value.silo == 2
    short = MaskedSumMessage(round_index=1, silo=1, parameters=3, values=bytes(16)).to_bytes()
    with pytest.raises(
        ProtocolAbort, match="silo 1 sent a masked update of round 1 with 3 parameters in 16 bytes"
    ):
        server.finish_round(1, {**good, 1: (short,)}, 3)
    with pytest.raises(ProtocolAbort, match="silo 0 sent a masked update claiming silo 1"):
        server.finish_round(1, {**good, 0: good[1]}, 3)
    with pytest.raises(ProtocolAbort, match="expected round 2"):
        server.finish_round(2, good, 3)


def test_a_directory_without_the_silos_own_key_is_refused():
    from uldp.secure.messages import DhDirectoryMessage

    silos = [MaskedSumSilo(s, 2) for s in range(2)]
    keys = tuple(silo.public_key().public_key for silo in silos)
    with pytest.raises(ValueError, match="not hold this silo's key"):
        silos[0].receive_directory(DhDirectoryMessage(keys[::-1]))
    with pytest.raises(ValueError, match="2 distinct keys"):
        silos[0].receive_directory(DhDirectoryMessage((keys[0], keys[0])))
