"""Tests of uldp.secure.masks and uldp.secure.keys: masks cancel, blinds in Z_n^*, OS-CSPRNG keys, AEAD, key sizes."""

import math
import os
import random

import numpy as np
import pytest
from scipy import stats

from uldp.secure import keys, masks


def _pair_keys(n_silos):
    session = os.urandom(32)
    private = [keys.new_dh_private_key() for _ in range(n_silos)]
    public = [keys.dh_public_bytes(k) for k in private]
    return [
        {
            p: keys.derive_pairwise_keys(
                private[s], public[p], own_id=s, peer_id=p, session=session
            )
            for p in range(n_silos)
            if p != s
        }
        for s in range(n_silos)
    ]


@pytest.mark.parametrize("n_silos", [2, 3, 5])
def test_pairwise_masks_cancel_and_are_nonzero(n_silos):
    modulus = (1 << 255) - 19
    pair_keys = _pair_keys(n_silos)
    for s in range(n_silos):
        for p, k in pair_keys[s].items():
            assert k == pair_keys[p][s]  # both ends derive the same keys
    nets = [
        masks.signed_mask_sum(
            {p: k.masks for p, k in pair_keys[s].items()},
            own_id=s,
            modulus=modulus,
            count=7,
            round_index=3,
            purpose=masks.PURPOSE_UPDATE,
        )
        for s in range(n_silos)
    ]
    assert [sum(col) % modulus for col in zip(*nets, strict=True)] == [0] * 7
    assert all(v != 0 for v in nets[0])


def test_streams_differ_by_round_purpose_and_key():
    key, other = os.urandom(32), os.urandom(32)

    def draw(k: bytes, r: int, p: int) -> list[int]:
        return masks.uniform_elements(k, modulus=2**61 - 1, count=4, round_index=r, purpose=p)

    base = draw(key, 1, masks.PURPOSE_UPDATE)
    assert base == draw(key, 1, masks.PURPOSE_UPDATE)
    assert base != draw(key, 2, masks.PURPOSE_UPDATE)
    assert base != draw(key, 1, masks.PURPOSE_HISTOGRAM)
    assert base != draw(other, 1, masks.PURPOSE_UPDATE)


def test_uniform_elements_are_unbiased():
    # 160 is not a power of two: reducing a byte mod 160 would make 0..95 twice as likely as 96..159.
    values = masks.uniform_elements(
        os.urandom(32), modulus=160, count=32_000, round_index=0, purpose=1
    )
    observed = np.bincount(values, minlength=160)
    assert stats.chisquare(observed).pvalue > 1e-6


def test_blinds_are_units_and_shared_by_key():
    modulus = 3 * 5 * 7 * 11 * 13 * 17 * 19 * 23 * 29 * 31  # many non-units: rejection matters
    key = os.urandom(32)
    blinds = masks.unit_blinds(key, modulus=modulus, count=500)
    assert blinds == masks.unit_blinds(key, modulus=modulus, count=500)
    assert all(0 < r < modulus and math.gcd(r, modulus) == 1 for r in blinds)
    assert len(set(blinds)) > 450


def test_keys_do_not_come_from_seeded_simulation_rngs():
    def fresh():
        random.seed(0)
        np.random.seed(0)  # noqa: NPY002 -- the legacy global RNG on purpose: keys must not depend on it
        dh_public = keys.dh_public_bytes(keys.new_dh_private_key())
        return dh_public, keys.generate_paillier_keypair(512, insecure_test_key=True)[0].n

    assert fresh() != fresh()


def test_aead_detects_tampering_and_wrong_header():
    key = os.urandom(32)
    nonce, sealed = keys.seal(key, b"seed R", associated_data=b"0->1")
    assert keys.open_sealed(key, nonce, sealed, associated_data=b"0->1") == b"seed R"
    flipped = bytes([sealed[0] ^ 1]) + sealed[1:]
    with pytest.raises(ValueError, match="authentication"):
        keys.open_sealed(key, nonce, flipped, associated_data=b"0->1")
    with pytest.raises(ValueError, match="authentication"):
        keys.open_sealed(key, nonce, sealed, associated_data=b"0->2")


def test_small_paillier_keys_are_refused_without_test_flag():
    with pytest.raises(ValueError, match="at least 2048"):
        keys.generate_paillier_keypair(1024)
    with pytest.raises(ValueError, match="at least 2048"):
        keys.check_key_bits(2040)
    assert keys.check_key_bits(2048) == 2048
    public, _ = keys.generate_paillier_keypair(512, insecure_test_key=True)
    assert public.n.bit_length() == 512
