"""Tests of uldp.secure.messages: explicit byte format, round trips, malformed and tampered input rejected."""

import hashlib

import pytest
from hypothesis import given, settings, strategies as st

from uldp.secure import messages as msg

_big = st.integers(0, 2**3100)
_signed = st.integers(-(2**3100), 2**3100)

_any_message = st.one_of(
    st.builds(msg.PublicKeyMessage, _big),
    st.builds(msg.DhPublicKeyMessage, st.integers(0, 2**32 - 1), st.binary(max_size=40)),
    st.builds(msg.DhDirectoryMessage, st.lists(st.binary(max_size=40), max_size=5).map(tuple)),
    st.builds(
        msg.SealedMessage,
        *[st.integers(0, 2**32 - 1)] * 4,
        st.binary(max_size=12),
        st.binary(max_size=64),
    ),
    st.builds(
        msg.BlindedHistogramMessage, st.integers(0, 9), st.lists(_big, max_size=6).map(tuple)
    ),
    st.builds(
        msg.EncryptedWeightsMessage, st.integers(0, 9), st.lists(_big, max_size=6).map(tuple)
    ),
    st.builds(
        msg.MaskedUpdateMessage,
        st.integers(0, 9),
        st.integers(0, 9),
        st.integers(0, 2**32 - 1),
        st.lists(_big, max_size=6).map(tuple),
    ),
    st.builds(
        msg.RescaleRequestMessage,
        st.integers(0, 9),
        st.integers(0, 9),
        st.lists(_big, max_size=6).map(tuple),
    ),
    st.builds(msg.RescaledWeightsMessage, st.integers(0, 9), st.lists(_big, max_size=6).map(tuple)),
    st.builds(
        msg.RingPedersenMessage,
        st.integers(0, 9),
        st.binary(max_size=32),
        _big,
        _big,
        _big,
        *[st.lists(_big, max_size=3).map(tuple)] * 2,
    ),
    st.builds(
        msg.ModulusProofMessage,
        st.integers(0, 9),
        _big,
        _big,
        *[st.lists(_big, max_size=3).map(tuple)] * 4,
        *[_big] * 5,
        *[_signed] * 6,
    ),
)


@given(_any_message)
@settings(max_examples=80)
def test_round_trip(message):
    data = message.to_bytes()
    assert data.startswith(b"ULDP")
    assert msg.parse_message(data) == message
    assert type(message).from_bytes(data) == message


@given(_any_message, st.data())
@settings(max_examples=80)
def test_any_flipped_byte_is_rejected(message, data):
    raw = bytearray(message.to_bytes())
    index = data.draw(st.integers(0, len(raw) - 1))
    raw[index] ^= 1 << data.draw(st.integers(0, 7))
    with pytest.raises(ValueError):
        msg.parse_message(bytes(raw))


def _redigest(body: bytes) -> bytes:
    return body + hashlib.sha256(body).digest()


def test_malformed_messages_give_clear_errors():
    good = msg.BlindedHistogramMessage(silo=1, values=(1, 2)).to_bytes()
    with pytest.raises(ValueError, match=r"truncated|not a ULDP"):
        msg.parse_message(good[:10])
    with pytest.raises(ValueError, match="digest"):
        msg.parse_message(good[:-33] + good[-32:])
    with pytest.raises(ValueError, match="truncated"):
        msg.parse_message(_redigest(good[:-34]))  # consistent digest, body cut short
    with pytest.raises(ValueError, match="trailing"):
        msg.parse_message(_redigest(good[:-32] + b"\x00"))
    with pytest.raises(ValueError, match="version"):
        msg.parse_message(_redigest(b"ULDP\x09" + good[5:-32]))
    with pytest.raises(ValueError, match="unknown type"):
        msg.parse_message(_redigest(b"ULDP\x01\x63" + good[6:-32]))
    with pytest.raises(ValueError, match="expected a MaskedUpdateMessage"):
        msg.MaskedUpdateMessage.from_bytes(good)


@given(_signed)
def test_a_signed_field_carries_its_sign_and_refuses_a_negative_zero(value):
    """The modulus proof's responses are signed (beyond the paper, :class:`msg.ModulusProofMessage`)."""
    message = msg.ModulusProofMessage(
        0, 1, 1, (), (), (), (), 1, 1, 1, 1, 1, value, 0, -1, 1, 2, value
    )
    data = message.to_bytes()
    assert msg.parse_message(data) == message
    zero = msg.ModulusProofMessage(
        0, 1, 1, (), (), (), (), 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0
    ).to_bytes()
    sigma = (
        len(zero) - 32 - 6 * 5
    )  # the first signed field's sign byte: six signed zeros of 5 bytes end the body
    assert zero[sigma] == 0
    with pytest.raises(
        ValueError, match="sign byte must be 0, or 1 for a non-zero magnitude, got 1"
    ):
        msg.parse_message(_redigest(zero[:sigma] + b"\x01" + zero[sigma + 1 : -32]))
    with pytest.raises(ValueError, match="got 2"):
        msg.parse_message(_redigest(zero[:sigma] + b"\x02" + zero[sigma + 1 : -32]))


def test_range_checks_name_the_field():
    message = msg.EncryptedWeightsMessage(round_index=1, ciphertexts=(5, 200))
    with pytest.raises(ValueError, match="#1 is out of range"):
        message.check_elements(message.ciphertexts, bound=100, count=2, what="encrypted weights")
    with pytest.raises(ValueError, match="expected 3"):
        message.check_elements(message.ciphertexts, bound=1000, count=3, what="encrypted weights")


def test_pack_ints_round_trip():
    values = (0, 1, 2**3071 + 5)
    assert msg.unpack_ints(msg.pack_ints(values)) == values
    with pytest.raises(ValueError):
        msg.unpack_ints(msg.pack_ints(values)[:-1])
