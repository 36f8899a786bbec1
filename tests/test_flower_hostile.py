"""Hostile parties on Flower, the earlier runtime's cases on the federation round every transport now drives.

- A silo's malformed Protocol 1 message: a message claiming another silo, addressed to no silo, or with values out
  of range (a ciphertext outside Z*_{n^2}) stops the set-up or the round with the sender named, before anything is
  decrypted.
- A silo's homomorphically inflated masked update is refused by the server's bound on the decoded sum.
- A server's Paillier key is used by a silo only with its proof.
- Strangers and a second silo of one name; the server's settings.
- A silo's malformed or inflated plain update stops the round naming the silo; an inflated update under the masked
  sum stops it on the decoded sum's bound."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
from flower_hospitals import (  # noqa: F401  (hospital_files: a fixture)
    ALLOW_TEST_KEYS,
    HOSPITALS,
    LAX,
    TEST_KEYS,
    flower_run,
    hospital_files,
    load,
    model,
    node_configs,
    plain_update,
)
from torch import nn

import uldp
import uldp.flower as uf
from uldp.common.persist import array_to_bytes
from uldp.flower.local import LocalGrid
from uldp.secure import messages
from uldp.secure.driver import ProtocolAbort

if TYPE_CHECKING:
    from collections.abc import Callable

#: Silo number -> LocalGrid node of the sorted names (General, Royal, St Mary): nodes 103, 101, 102. The victim is
#: silo 1, or silo 0 for the seed R, which only silo 0 seals (step 1(c)).
NODES = {0: 103, 1: 101, 2: 102}


def _replace(**values):
    return lambda m, n: dataclasses.replace(m, **values)


#: case: (the stage whose answer the silo rewrites, the message type it rewrites, how, the refusal's words)
SECURE = {
    "DH key claiming silo 0": (
        "p1-key",
        "DhPublicKeyMessage",
        _replace(silo=0),
        "claims to come from silo 0",
    ),
    "seed sealed to silo 7": (
        "p1-directory",
        "SealedMessage",
        _replace(recipient=7),
        "addressed to silo 7",
    ),
    "histogram value n": (
        "p1-seed",
        "BlindedHistogramMessage",
        lambda m, n: dataclasses.replace(m, values=(n, *m.values[1:])),
        "out of range",
    ),
    "histogram too short": (
        "p1-seed",
        "BlindedHistogramMessage",
        lambda m, n: dataclasses.replace(m, values=m.values[1:]),
        "expected",
    ),
    "histogram of silo 2": (
        "p1-seed",
        "BlindedHistogramMessage",
        _replace(silo=2),
        "claims to come from silo 2",
    ),
    "share from silo 0": (
        "p1-shares",
        "SealedMessage",
        _replace(sender=0),
        "claims to come from silo 0",
    ),
    "ciphertext 0": (
        "p1-update",
        "MaskedUpdateMessage",
        lambda m, n: dataclasses.replace(m, ciphertexts=(0, *m.ciphertexts[1:])),
        "not in Z*_(n^2)",
    ),
    "ciphertext n": (
        "p1-update",
        "MaskedUpdateMessage",
        lambda m, n: dataclasses.replace(m, ciphertexts=(n, *m.ciphertexts[1:])),
        "not in Z*_(n^2)",
    ),
    "ciphertext n^2": (
        "p1-update",
        "MaskedUpdateMessage",
        lambda m, n: dataclasses.replace(m, ciphertexts=(n * n, *m.ciphertexts[1:])),
        "out of range",
    ),
    "update too short": (
        "p1-update",
        "MaskedUpdateMessage",
        lambda m, n: dataclasses.replace(m, ciphertexts=m.ciphertexts[1:]),
        "expected",
    ),
    "update of silo 0": (
        "p1-update",
        "MaskedUpdateMessage",
        _replace(silo=0),
        "claims to come from silo 0",
    ),
}


class Tampering(LocalGrid):
    """LocalGrid whose victim silo rewrites its answer to one Protocol 1 stage (the modulus n read off the way)."""

    stage: str
    kind: type
    change: Callable[[Any, int], Any]
    victim: int
    modulus = 0

    def send_and_receive(self, messages_out, *, timeout=None):
        messages_out = list(messages_out)
        asked = {}
        for message in messages_out:
            content = dict(message.content["uldp"])
            stage = (
                "p1-update" if message.metadata.message_type == "train" else content.get("stage")
            )
            asked[message.metadata.dst_node_id] = stage
            if stage == "p1-key" and content.get("payloads"):
                key: Any = messages.parse_message(bytes(content["payloads"][0]))
                self.modulus = key.modulus
        replies = list(super().send_and_receive(messages_out, timeout=timeout))
        for reply in replies:
            node = reply.metadata.src_node_id
            if node != NODES[self.victim] or asked.get(node) != self.stage or reply.has_error():
                continue
            record: Any = reply.content["uldp"]
            key = "update" if self.stage == "p1-update" else "payloads"
            parsed = [bytes(record[key])] if key == "update" else [bytes(p) for p in record[key]]
            changed = [self._rewrite(messages.parse_message(p)) for p in parsed]
            record[key] = changed[0] if key == "update" else changed
        return replies

    def _rewrite(self, message):
        if isinstance(message, self.kind):
            message = self.change(message, self.modulus)
        return message.to_bytes()


@pytest.mark.parametrize("case", sorted(SECURE))
def test_a_malformed_protocol_message_stops_the_run_naming_the_silo_that_sent_it(
    hospital_files,  # noqa: F811
    case,
):
    from flwr.app import ArrayRecord

    stage, kind, change, detail = SECURE[case]
    grid = Tampering(
        uf.silo_client_app(load, model, nn.CrossEntropyLoss()),
        node_configs(hospital_files, ALLOW_TEST_KEYS),
    )
    grid.stage, grid.kind, grid.change = stage, getattr(messages, kind), change
    grid.victim = 0 if case == "seed sealed to silo 7" else 1
    strategy = (
        uf.UldpStrategy(  # the cases rewrite the paper's Paillier messages (per-user ciphertexts)
            sigma=5.0,
            local_epochs=1,
            protocol={**TEST_KEYS, "backend": "paillier"},
            max_aborted_rounds=0,
        )
    )
    with pytest.raises((RuntimeError, ProtocolAbort)) as raised:
        strategy.start(grid, ArrayRecord([uldp.flat_parameters(model()).numpy()]), num_rounds=1)
    said = str(raised.value)
    assert f"silo {grid.victim} sent a bad" in said and detail in said, said
    assert grid.modulus > 1  # the server's key went out before the victim's answer


@pytest.mark.parametrize("stranger", ["Mallory", "Royal"])
def test_a_stranger_is_left_out_and_a_second_silo_of_one_name_is_refused(hospital_files, stranger):  # noqa: F811
    """The earlier runtime's bad silo ids, on Flower, where a silo is known by its name: a SuperNode of a silo the
    run does not name is left out and the named silos train; a second SuperNode claiming a named silo's name stops
    the set-up (the SuperLink's SuperNode authentication keeps strangers out before this; test_deploy_flower)."""
    from flwr.app import ArrayRecord

    configs = node_configs(hospital_files, LAX)
    configs.append({**configs[0], "silo": stranger})  # Royal's file, under another name or its own
    grid = LocalGrid(uf.silo_client_app(load, model, nn.CrossEntropyLoss()), configs)
    strategy = uf.UldpStrategy(
        method="ULDP-AVG", sigma=5.0, local_epochs=1, secure=False, silos=HOSPITALS
    )
    initial = ArrayRecord([uldp.flat_parameters(model()).numpy()])
    if stranger == "Royal":
        with pytest.raises(RuntimeError, match="two SuperNodes claim the same silo name"):
            strategy.start(grid, initial, num_rounds=1)
        return
    strategy.start(grid, initial, num_rounds=1)
    assert sorted(strategy.silo_names.values()) == sorted(HOSPITALS) and len(strategy.epsilons) == 1


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"join_timeout": 0}, "join_timeout"),
        ({"join_timeout": float("nan")}, "join_timeout"),
        ({"max_aborted_rounds": -1}, "max_aborted_rounds"),
        ({"silos": ["A", "A"]}, "distinct"),
        ({"checkpoint": "."}, "is a directory"),
    ],
)
def test_the_servers_settings_are_checked_before_any_message(arguments, message):
    """The earlier runtime's server settings checks, on the strategy: a bad timeout, silo list or a checkpoint path
    that cannot be written is refused when the strategy is made."""
    with pytest.raises(ValueError, match=message):
        uf.UldpStrategy(method="ULDP-AVG", sigma=5.0, **arguments)


#: The plaintext a hostile silo adds to its first coordinate under encryption: 1.4e4, far past the bound (~12) of
#: the silos' clipped, noised updates (the earlier runtime's attack 6).
INFLATION = 1.4e4


def test_a_homomorphically_inflated_protocol_1_update_is_refused(hospital_files):  # noqa: F811
    """A silo multiplies the first ciphertext of its masked update by Enc(1.4e4) = (1 + n)^m mod n^2: the masks
    still cancel, so the server would decode the honest sum plus 1.4e4 and apply it. The server checks the decoded
    sum against the silos' norm bound and stops the round (the masks hide which silo sent more, so the refusal
    cannot name it); nothing is applied."""
    from flwr.app import ArrayRecord

    from uldp.secure import encoding
    from uldp.secure.config import ProtocolConfig

    strategy = uf.UldpStrategy(
        sigma=5.0,
        local_epochs=1,
        protocol={**TEST_KEYS, "backend": "paillier"},
        max_aborted_rounds=0,
    )

    def inflate(update: Any, n: int) -> Any:
        clip, sigma = strategy.hp.clip, strategy.hp.sigma
        assert clip is not None and sigma is not None
        config = ProtocolConfig.for_training(  # the session's parameters, as the strategy made them
            len(strategy.nodes),
            strategy.n_users,
            clip=clip,
            sigma=sigma,
            parameters=strategy.protocol,
        )
        value = encoding.encode(np.array([INFLATION]), resolution_bits=config.resolution_bits)[0]
        extra = int(value) * config.c_lcm % n
        first = (
            update.ciphertexts[0] * (1 + n * extra) % (n * n)
        )  # Enc(m) Enc(extra) = Enc(m + extra)
        return dataclasses.replace(update, ciphertexts=(first, *update.ciphertexts[1:]))

    grid = Tampering(
        uf.silo_client_app(load, model, nn.CrossEntropyLoss()),
        node_configs(hospital_files, ALLOW_TEST_KEYS),
    )
    grid.stage, grid.kind, grid.change, grid.victim = (
        "p1-update",
        messages.MaskedUpdateMessage,
        inflate,
        1,
    )
    with pytest.raises(RuntimeError) as raised:
        strategy.start(grid, ArrayRecord([uldp.flat_parameters(model()).numpy()]), num_rounds=1)
    said = str(raised.value)
    assert "the securely aggregated sum has norm" in said and "past the bound" in said, said
    assert (
        strategy.epsilons == [] or len(strategy.epsilons) <= 1
    )  # the round was accounted before it was asked


class ForgedKey(uf.UldpStrategy):
    """A server that sends the silos a smooth modulus of the right length (whose discrete logarithms it can take)
    instead of its key, with the proof of its real key relabelled for it (:func:`hostile_keys.swapped_modulus`)."""

    def _ask(self, grid, contents, timeout, **options):
        from hostile_keys import smooth_modulus, swapped_modulus

        smooth = smooth_modulus(self.protocol.key_bits, self.protocol.n_max)
        for content in contents.values():
            payloads = [bytes(p) for p in content.get("payloads", [])]
            if content.get("stage") == "p1-key":
                payloads[0] = messages.PublicKeyMessage(smooth).to_bytes()
            elif content.get("stage") == "p1-directory":
                proof = messages.ModulusProofMessage.from_bytes(payloads[1])
                payloads[1] = swapped_modulus(proof, smooth).to_bytes()
            else:
                continue
            content["payloads"] = payloads
        return super()._ask(grid, contents, timeout, **options)


def test_a_silo_takes_the_servers_key_only_with_its_proof(hospital_files):  # noqa: F811
    """Beyond the paper (issue 30 item 9): a silo uses the server's Paillier modulus only once the server's proof
    that it is a product of two large primes passes. A smooth modulus of the right length, sent with the proof of the
    server's real key, stops the set-up at step 1(b), each silo naming itself; the honest key runs (every other test
    of Protocol 1 on Flower)."""
    from flwr.app import ArrayRecord

    grid = LocalGrid(
        uf.silo_client_app(load, model, nn.CrossEntropyLoss()),
        node_configs(hospital_files, ALLOW_TEST_KEYS),
    )
    strategy = ForgedKey(
        sigma=5.0,
        local_epochs=1,
        protocol={**TEST_KEYS, "backend": "paillier"},
        max_aborted_rounds=0,
    )
    with pytest.raises(
        RuntimeError, match=r"refuses the server's Paillier key: modulus proof"
    ) as raised:
        strategy.start(grid, ArrayRecord([uldp.flat_parameters(model()).numpy()]), num_rounds=1)
    assert "silo 0 refuses" in str(raised.value), raised.value


#: A silo's plain update rewritten by a hostile silo (or a corrupted link), and the refusal naming it: the earlier
#: runtime's cases, on the federation round every transport now drives.
MALFORMED = {
    "inflated": (lambda u: array_to_bytes(u * np.float32(1e30)), r"of norm .* past the bound"),
    "NaN": (lambda u: array_to_bytes(u * np.nan), "NaN or infinite"),
    "inf": (lambda u: array_to_bytes(u + np.inf), "NaN or infinite"),
    "shape (1,)": (lambda u: array_to_bytes(u[:1]), "the model is float32"),
    "2-d": (lambda u: array_to_bytes(u[None, :]), "the model is float32"),
    "float64": (lambda u: array_to_bytes(u.astype(np.float64)), "float64"),
    "garbage": (lambda u: b"\x00" * 40, "malformed array"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_an_update_past_its_methods_bound_or_malformed_aborts_the_round_naming_the_silo(
    hospital_files,  # noqa: F811
    case,
):
    """Attack 6 on Flower: a silo's finite 3e38 update was applied. Now each update is checked against
    clip * (its weights' sum) + the noise's 2^-40 norm tail, and the round stops naming the silo; so does an update
    that is not finite, of another shape or dtype, or not an array at all."""
    from flwr.app import ArrayRecord

    rewrite, detail = MALFORMED[case]

    class Rewriting(LocalGrid):
        def send_and_receive(self, messages, *, timeout=None):
            replies = list(super().send_and_receive(messages, timeout=timeout))
            for reply in replies:
                if reply.metadata.message_type == "train" and reply.metadata.src_node_id == 102:
                    update = reply.content.config_records["uldp"]
                    update["update"] = rewrite(plain_update(reply))
            return replies

    grid = Rewriting(
        uf.silo_client_app(load, model, nn.CrossEntropyLoss()), node_configs(hospital_files, LAX)
    )
    strategy = uf.UldpStrategy(
        method="ULDP-AVG", sigma=5.0, local_epochs=1, secure=False, max_aborted_rounds=0
    )
    with pytest.raises(RuntimeError, match=rf"round 1: silo 'St Mary' sent a .*{detail}"):
        strategy.start(grid, ArrayRecord([uldp.flat_parameters(model()).numpy()]), num_rounds=1)


def test_an_inflated_update_under_the_masked_sum_aborts_the_round(hospital_files, monkeypatch):  # noqa: F811
    """Item 5 with attack 6: the masks hide which silo sent more, so the decoded sum is checked against the sum of
    the silos' bounds and the round stops (no silo named) before anything is applied."""
    from uldp.methods.uldp_avg import UserLevelMethod

    honest = UserLevelMethod.silo_update
    inflated = {"done": False}

    def inflate(self, *args, **kwargs):
        update = honest(self, *args, **kwargs)
        if inflated["done"]:
            return update
        inflated["done"] = True  # one silo of the round
        return update * 1e4

    monkeypatch.setattr(UserLevelMethod, "silo_update", inflate)
    with pytest.raises(RuntimeError, match=r"securely aggregated sum has norm .* past the bound"):
        flower_run(hospital_files, model(), method="ULDP-AVG", sigma=5.0, local_epochs=1, rounds=1)
