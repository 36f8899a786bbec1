"""uldp.secure.psu: the silos' private set union numbers every shared patient alike, |U| is the true union, no silo
can test a guessed id against another silo's patients, and every out-of-order, replayed or altered message is
refused by name. The 256-bit test group keeps it fast; the defaults' groups are checked against RFC 3526."""

from __future__ import annotations

import hashlib
import hmac
from typing import Any

import gmpy2
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from uldp.secure import psu
from uldp.secure.psu import RelayMessage, RelayRefused, Roster, UnionSilo

KEY = bytes(range(32))
TEST: dict[str, Any] = {"group": psu.TEST_GROUP, "insecure_test_group": True}


def union(id_sets, **options):
    return psu.private_set_union(id_sets, relay_key=KEY, **TEST, **options)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(st.integers(0, 30), max_size=25), min_size=1, max_size=4), st.booleans())
def test_every_silo_numbers_a_shared_patient_alike_and_u_is_the_true_union(id_sets, share_counts):
    results = union(id_sets, share_counts=share_counts)
    everyone = set().union(*map(set, id_sets))
    assert {r.n_users for r in results} == {len(everyone)} and len({r.digest for r in results}) == 1
    number: dict[int, int] = {}
    for ids, result in zip(id_sets, results, strict=True):
        for patient, u in zip(ids, result.index_of(ids), strict=True):
            assert number.setdefault(patient, int(u)) == int(
                u
            )  # the same number at every silo holding it
    assert sorted(number.values()) == list(range(len(everyone)))  # a bijection onto [0, |U|)
    for s, result in enumerate(results):
        own = np.bincount([number[i] for i in id_sets[s]], minlength=len(everyone))
        np.testing.assert_array_equal(result.counts[s], own)  # its own n_su, always
        for t, ids in enumerate(id_sets):
            held = np.bincount([number[i] for i in ids], minlength=len(everyone))
            np.testing.assert_array_equal(
                result.counts[t], held if share_counts or t == s else np.minimum(held, 1)
            )


def test_a_silo_cannot_find_a_guessed_patient_at_another_silo():
    """The dictionary attack of issue 30 (attack 7): silo 1 tries every guessable id against all it receives.
    Under the old scheme (HMAC-SHA256 under the silos' shared key) it finds all 20 of silo 0's patients; under the
    union, with its own exponent and every message of the run opened under the relay key, it finds none."""
    guesses = [f"P-{i:04d}" for i in range(500)]
    hospital = guesses[100:120]  # silo 0's 20 patients
    attacker_own = ["P-0300", "P-0301"]

    def old_scheme_view(ids):
        return {hmac.new(KEY, i.encode(), hashlib.sha256).hexdigest() for i in ids}

    received = old_scheme_view(hospital)  # silo 0's sealed histogram, opened under the shared key
    assert (
        sum(hmac.new(KEY, g.encode(), hashlib.sha256).hexdigest() in received for g in guesses)
        == 20
    )

    silos = [
        UnionSilo(name, ids, relay_key=KEY, **TEST)
        for name, ids in (("a", hospital), ("b", attacker_own))
    ]
    roster = Roster(psu.TEST_GROUP.name, ("a", "b"), tuple(s.hello for s in silos))
    transcript: list[RelayMessage] = []

    def ask(stage, requests):
        replies = {}
        for s, request in requests.items():
            message = (
                silos[s].start(Roster.from_bytes(request), share_counts=False)
                if stage == "psu-start"
                else silos[s].relay(RelayMessage.from_bytes(request))
            )
            transcript.append(message)
            replies[s] = message.to_bytes()
        return replies

    shares = [RelayMessage.from_bytes(m) for m in psu.relay_union(ask, roster)]
    silos[1].finish(shares)
    attacker, group = silos[1], psu.TEST_GROUP
    seen = set()
    for message in transcript:  # every list of the run, the attacker's own key opens them all
        plain = attacker._open(message)
        width = group.element_bytes
        count = len(plain) // (width + (8 if message.step == len(silos) else 0))
        seen |= {int.from_bytes(plain[i * width : (i + 1) * width], "big") for i in range(count)}
    exponent = attacker._exponent

    def candidates(
        guess,
    ):  # all the attacker can compute from a guess alone: H(g), and H(g) to its exponent
        h = group.hash_to_group(roster.session, guess)
        return {h, pow(h, exponent, group.p)}

    found = [g for g in guesses if g not in attacker_own and candidates(g) & seen]
    assert found == []
    assert len(seen) > 40  # the attack did look at both silos' lists, at every step


def test_the_server_sees_sizes_only():
    """The server relays sealed lists: no blinded value of any silo appears in what it handles."""
    silos = [
        UnionSilo(n, ids, relay_key=KEY, **TEST) for n, ids in (("a", ["x", "y"]), ("b", ["y"]))
    ]
    roster = Roster(psu.TEST_GROUP.name, ("a", "b"), tuple(s.hello for s in silos))
    relayed: list[bytes] = []

    def ask(stage, requests):
        replies = {
            s: (
                silos[s].start(Roster.from_bytes(r), share_counts=False)
                if stage == "psu-start"
                else silos[s].relay(RelayMessage.from_bytes(r))
            ).to_bytes()
            for s, r in requests.items()
        }
        relayed.extend(replies.values())
        return replies

    shares = psu.relay_union(ask, roster)
    result = silos[0].finish([RelayMessage.from_bytes(m) for m in shares])
    final = [int(v).to_bytes(psu.TEST_GROUP.element_bytes, "big") for v in silos[0]._own_final]
    assert result.n_users == 2 and not any(value in blob for value in final for blob in relayed)


def _session(ids_a=("x", "y"), ids_b=("y", "z")):
    silos = [UnionSilo(n, ids, relay_key=KEY, **TEST) for n, ids in (("a", ids_a), ("b", ids_b))]
    roster = Roster(psu.TEST_GROUP.name, ("a", "b"), tuple(s.hello for s in silos))
    return silos, roster, [s.start(roster, share_counts=False) for s in silos]


def test_replayed_reordered_and_altered_messages_are_refused_by_name():
    silos, roster, starts = _session()
    a, b = silos
    with pytest.raises(RelayRefused, match=r"refuses start .* step 1 is due"):
        a.start(roster, share_counts=False)  # a second start
    with pytest.raises(RelayRefused, match=r"expected \(step, sender, recipient, owner\)"):
        a.relay(starts[0])  # its own list, sent back to it instead of to b
    flipped = starts[1].ciphertext[:-1] + bytes([starts[1].ciphertext[-1] ^ 1])
    forged = RelayMessage(starts[1].session, 0, 1, 0, 1, starts[1].nonce, flipped)
    with pytest.raises(RelayRefused, match="does not open"):
        a.relay(forged)
    other = _session()[2][1]
    with pytest.raises(RelayRefused, match="another session"):
        a.relay(other)
    with pytest.raises(RelayRefused, match="at least 76 bytes, got 60"):
        RelayMessage.from_bytes(starts[1].to_bytes()[:60])
    with pytest.raises(RelayRefused, match="takes the shares once"):
        a.finish([])  # shares before its own list came back
    hop_a = a.relay(starts[1])  # b's list, raised by a, back to b
    with pytest.raises(RelayRefused, match="refuses a relay message of step 0: step 2 is due"):
        a.relay(starts[1])  # the server repeats the step
    hop_b = b.relay(starts[0])
    share_a, share_b = (
        a.relay(hop_b),
        b.relay(hop_a),
    )  # each silo's own list, fully raised: its share
    with pytest.raises(RelayRefused, match="step 3 is due"):
        a.relay(hop_b)
    with pytest.raises(RelayRefused, match="one share from each of the 2 silos"):
        a.finish([share_a, share_a])
    result = a.finish([share_a, share_b])
    assert result.n_users == 3
    with pytest.raises(RelayRefused, match="takes the shares once"):
        a.finish([share_a, share_b])


def test_a_restored_silo_keeps_its_progress_and_refuses_what_it_answered():
    silos, _, starts = _session()
    a = UnionSilo.restore(
        silos[0].export_state(), ["y", "x", "x"], relay_key=KEY, insecure_test_group=True
    )
    a.relay(starts[1])
    again = UnionSilo.restore(a.export_state(), ["x", "y"], relay_key=KEY, insecure_test_group=True)
    with pytest.raises(RelayRefused, match="step 2 is due"):
        again.relay(starts[1])
    with pytest.raises(ValueError, match="patients changed"):
        UnionSilo.restore(a.export_state(), ["x"], relay_key=KEY, insecure_test_group=True)


def test_values_outside_the_group_and_foreign_rosters_are_refused():
    _, roster, _ = _session()
    group = psu.TEST_GROUP
    non_residue = next(v for v in range(2, 100) if gmpy2.jacobi(v, group.p) == -1)
    for value, refusal in (
        (1, "outside the quadratic residues"),
        (non_residue, "outside the quadratic residues"),
    ):
        fresh, fresh_roster, _ = _session()
        header = RelayMessage(fresh_roster.session, 0, 1, 0, 1, b"", b"")
        plain = b"".join(int(v).to_bytes(group.element_bytes, "big") for v in (value, 4))
        nonce, ciphertext = psu.seal(fresh[1]._seal_key, plain, associated_data=header.header())
        with pytest.raises(RelayRefused, match=refusal):
            fresh[0].relay(RelayMessage(header.session, 0, 1, 0, 1, nonce, ciphertext))
    stranger = UnionSilo("a", ["x", "y"], relay_key=KEY, **TEST)
    with pytest.raises(RelayRefused, match="not the one this silo sent"):
        stranger.start(
            roster, share_counts=False
        )  # the roster of a session this silo did not say hello to
    with pytest.raises(RelayRefused, match="sorted order"):
        Roster.from_bytes(Roster("g", ("b", "a"), roster.hellos).to_bytes())
    with pytest.raises(RelayRefused, match="roster is malformed"):
        Roster.from_bytes(b'{"group": "g", "names": ["a"], "hellos": ["zz"]}')
    with pytest.raises(RelayRefused, match="a union hello has 20 bytes, got 3 bytes"):
        psu.Hello.from_bytes(b"abc")
    with pytest.raises(RelayRefused, match="roster's group is 'modp2048'"):
        UnionSilo("a", ["x"], relay_key=KEY, **TEST).start(
            Roster("modp2048", ("a",), roster.hellos[:1]), share_counts=False
        )


def test_groups_are_rfc_3526_safe_primes_and_the_test_group_needs_consent():
    import mpmath

    mpmath.mp.prec = 3200
    for name, (bits, constant) in {"modp2048": (2048, 124476), "modp3072": (3072, 1690314)}.items():
        expected = (
            2**bits
            - 2 ** (bits - 64)
            - 1
            + 2**64 * (int(mpmath.floor(2 ** (bits - 130) * mpmath.pi)) + constant)
        )
        group = psu.GROUPS[name]
        assert group.p == expected and gmpy2.is_prime(group.q, 25)
    assert psu.DEFAULT_GROUP.p.bit_length() >= psu.MIN_GROUP_BITS
    assert gmpy2.is_prime(psu.TEST_GROUP.q, 25) and gmpy2.is_prime(psu.TEST_GROUP.p, 25)
    with pytest.raises(ValueError, match="at least 2048 bits outside tests"):
        UnionSilo("a", ["x"], relay_key=KEY, group=psu.TEST_GROUP)
    with pytest.raises(ValueError, match="relay key must have at least 32 bytes"):
        UnionSilo("a", ["x"], relay_key=b"short", **TEST)


def test_exponents_and_nonces_are_fresh_per_silo_and_run():
    first, second = (UnionSilo("a", ["x"], relay_key=KEY, **TEST) for _ in range(2))
    assert first._exponent != second._exponent and first.hello != second.hello
    assert 0 < first._exponent < psu.TEST_GROUP.q
