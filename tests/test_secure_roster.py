"""uldp.secure.roster: silo identities and the federation roster authenticate the relayed DH keys, so a server that
swaps them (and would sit in the middle of every pair) is refused by name (issue 41 item 3).

Each attack is run twice: without a roster it succeeds (the server recovers a silo's update, or opens the sealed
seed R), which shows the attack is real; with a roster every silo refuses the directory, naming the swapped slot."""

from __future__ import annotations

import os
import stat
from dataclasses import replace

import numpy as np
import pytest

from uldp.secure import keys
from uldp.secure.config import ProtocolConfig, ProtocolParameters
from uldp.secure.driver import STAGE_DIRECTORY, STAGE_SEED, ProtocolAbort, ServerDriver, SiloDriver
from uldp.secure.masked_sum import (
    RESOLUTION_BITS,
    STAGE_DIRECTORY as SUM_DIRECTORY,
    MaskedSumServer,
    MaskedSumSilo,
    precision,
    ring_masks,
    session_of,
)
from uldp.secure.messages import DhDirectoryMessage, MaskedSumMessage, SealedMessage
from uldp.secure.roles import SEALED_SEED
from uldp.secure.roster import (
    Credentials,
    Identity,
    Roster,
    RosterMismatch,
    read_identity,
    read_roster,
    write_identity,
    write_roster,
)

NAMES = ("north", "south", "east")


def federation_credentials(n_silos: int) -> list[Credentials]:
    identities = [Identity.generate(name) for name in NAMES[:n_silos]]
    roster = Roster.of(identities)
    return [Credentials(identity, roster) for identity in identities]


def swapped(directory: DhDirectoryMessage, target: int) -> tuple[DhDirectoryMessage, dict]:
    """What a server in the middle sends silo ``target``: its own X25519 keys in every other slot (the silos'
    attestations relayed as they are, the best it can do without their identities), and its private keys."""
    fakes = {s: keys.new_dh_private_key() for s in range(len(directory.public_keys)) if s != target}
    public = tuple(
        keys.dh_public_bytes(fakes[s]) if s in fakes else key
        for s, key in enumerate(directory.public_keys)
    )
    return replace(directory, public_keys=public), fakes


class MiddleServer:
    """A masked-sum exchange whose server gives each silo a directory of its own keys (``swapped``)."""

    def __init__(self, silos: list[MaskedSumSilo]) -> None:
        self.silos = silos
        self.fakes: dict[int, dict] = {}
        self.directories: dict[int, DhDirectoryMessage] = {}

    def exchange(self, stage, round_index, payloads):
        answers = {}
        for s, sent in payloads.items():
            if stage == SUM_DIRECTORY:
                directory, self.fakes[s] = swapped(DhDirectoryMessage.from_bytes(sent[0]), s)
                self.directories[s] = directory
                sent = (directory.to_bytes(),)
            answers[s] = self.silos[s].answer(stage, round_index, sent)
        return answers

    def recover(self, message: MaskedSumMessage) -> np.ndarray:
        """Silo ``message.silo``'s update: the server knows every pairwise mask key of the silo."""
        target, directory = message.silo, self.directories[message.silo]
        net = np.zeros(message.parameters, dtype=np.uint64)
        for peer, fake in self.fakes[target].items():
            key = keys.derive_pairwise_keys(
                fake,
                directory.public_keys[target],
                own_id=peer,
                peer_id=target,
                session=session_of(directory),
            ).masks
            masks = ring_masks(key, round_index=message.round_index, count=message.parameters)
            net = net + masks if target < peer else net - masks
        encoded = np.frombuffer(message.values, dtype="<u8") - net
        return np.ldexp(encoded.view(np.int64).astype(np.float64), -RESOLUTION_BITS)


def test_a_server_in_the_middle_reads_every_masked_update_without_a_roster_and_is_refused_with_one():
    updates = [
        np.array([0.5, -1.25, 3.0]),
        np.array([2.0, 0.25, -0.125]),
        np.array([1.0, 1.0, 7.0]),
    ]
    silos = [MaskedSumSilo(s, 3) for s in range(3)]
    middle = MiddleServer(silos)
    MaskedSumServer(3, middle.exchange).setup()
    for s, silo in enumerate(silos):
        recovered = middle.recover(silo.masked_update(1, updates[s]))
        assert np.max(np.abs(recovered - updates[s])) <= 2.0 ** -(RESOLUTION_BITS + 1)

    credentials = federation_credentials(3)
    silos = [MaskedSumSilo(s, 3, credentials=credentials[s]) for s in range(3)]
    with pytest.raises(
        RosterMismatch, match=r"silo 1 \(south\): its relayed DH key is not signed"
    ) as refused:
        MaskedSumServer(3, MiddleServer(silos).exchange).setup()
    assert refused.value.silo == 1
    assert not any(silo.ready for silo in silos)  # not one pairwise key was derived


def test_with_a_roster_an_honest_run_gives_the_exact_sum_and_a_dropped_or_foreign_signature_is_refused():
    credentials = federation_credentials(3)
    silos = [MaskedSumSilo(s, 3, credentials=credentials[s]) for s in range(3)]

    def exchange(stage, round_index, payloads):
        return {s: silos[s].answer(stage, round_index, p) for s, p in payloads.items()}

    server = MaskedSumServer(3, exchange)
    server.setup()
    rng = np.random.default_rng(0)
    updates = rng.normal(size=(3, 50))
    answers = {s: (silos[s].masked_update(1, updates[s]).to_bytes(),) for s in range(3)}
    assert np.max(np.abs(server.finish_round(1, answers, 50) - updates.sum(axis=0))) <= precision(3)

    honest = [MaskedSumSilo(s, 3, credentials=credentials[s]) for s in range(3)]
    messages = [silo.public_key() for silo in honest]
    directory = DhDirectoryMessage(
        tuple(m.public_key for m in messages), tuple(m.attestation for m in messages)
    )
    with pytest.raises(RosterMismatch, match=r"silo 2 \(east\).*no attestation") as dropped:
        honest[0].receive_directory(replace(directory, attestations=directory.attestations[:2]))
    assert dropped.value.silo == 2
    # Another federation's silo named "south" (another identity): signed, but not by the roster's south.
    stranger = federation_credentials(2)[1]
    with pytest.raises(ValueError, match="is not silo 1 of the roster"):
        MaskedSumSilo(1, 3, credentials=replace(stranger, roster=credentials[1].roster))
    other = Credentials(stranger.identity, Roster.of([credentials[0].identity, stranger.identity]))
    forged = MaskedSumSilo(1, 2, credentials=other).public_key()
    with pytest.raises(RosterMismatch, match=r"silo 1 \(south\).*another identity") as impostor:
        honest[0].receive_directory(
            replace(
                directory,
                public_keys=(directory.public_keys[0], forged.public_key, directory.public_keys[2]),
                attestations=(
                    directory.attestations[0],
                    forged.attestation,
                    directory.attestations[2],
                ),
            )
        )
    assert impostor.value.silo == 1
    honest[0].receive_directory(directory)
    assert honest[0].ready


KEYS = ProtocolParameters(key_bits=512, n_max=50, insecure_test_key=True)
COUNTS = np.array([[2, 0, 1], [1, 3, 0], [0, 1, 1]])


def _protocol_federation(config: ProtocolConfig, credentials: list[Credentials] | None):
    """Three Protocol 1 silo drivers behind a server in the middle: it gives each silo a directory of its own keys
    (:func:`swapped`), opens what a silo seals for another at step 1(c) and seals it again for the recipient, so
    that the set-up completes as an honest one would. ``seen["opened"]`` keeps what it opened."""
    silos = [
        SiloDriver(
            s, COUNTS[s], config, credentials=credentials[s] if credentials is not None else None
        )
        for s in range(3)
    ]
    seen: dict = {"fakes": {}, "directories": {}, "opened": []}

    def pair_key(silo: int, peer: int) -> bytes:
        """The AEAD key silo ``silo`` derived with the server's key in ``peer``'s slot."""
        return keys.derive_pairwise_keys(
            seen["fakes"][silo][peer],
            seen["directories"][silo].public_keys[silo],
            own_id=peer,
            peer_id=silo,
            session=keys.session_id(server.server.public_key_message().modulus),
        ).aead

    def reseal(data: bytes) -> bytes:
        message = SealedMessage.from_bytes(data)
        header = message.associated_data()
        plain = keys.open_sealed(
            pair_key(message.sender, message.recipient),
            message.nonce,
            message.ciphertext,
            associated_data=header,
        )
        seen["opened"].append((message.purpose, plain))
        nonce, ciphertext = keys.seal(
            pair_key(message.recipient, message.sender), plain, associated_data=header
        )
        return replace(message, nonce=nonce, ciphertext=ciphertext).to_bytes()

    def exchange(stage, round_index, payloads):
        answers = {}
        for s, sent in payloads.items():
            if stage == STAGE_DIRECTORY:
                directory, seen["fakes"][s] = swapped(DhDirectoryMessage.from_bytes(sent[0]), s)
                seen["directories"][s] = directory
                sent = (directory.to_bytes(), *sent[1:])
            if stage == STAGE_SEED:
                sent = tuple(map(reseal, sent))
            answers[s] = silos[s].answer(stage, round_index, sent)
        return answers

    server = ServerDriver(config, exchange)
    return server, silos, seen


@pytest.mark.parametrize("backend", ["paillier", "lattice"])
def test_protocol_1_with_a_swapped_directory_gives_the_server_the_seed_without_a_roster_and_aborts_with_one(
    backend,
):
    if backend == "lattice":
        pytest.importorskip("tenseal")
        parameters = replace(KEYS, key_bits=1024, n_max=300, backend="lattice")
    else:
        parameters = KEYS
    config = ProtocolConfig(
        n_silos=3, n_users=3, clip=1.0, sigma=1.0, noise_bound=3.0, parameters=parameters
    )
    server, silos, seen = _protocol_federation(config, None)
    server.setup()  # completes: every silo derived its pairwise keys with the server's keys
    # The server opened the seed R (every blind r_u, hence every N_u from the blinded totals) on its way.
    assert seen["opened"] == [(SEALED_SEED, silos[0].role._seed)] * 2

    server, silos, seen = _protocol_federation(config, federation_credentials(3))
    with pytest.raises(
        ProtocolAbort, match=r"silo 0 refuses the DH directory: silo 1 \(south\)"
    ) as refused:
        server.setup()
    assert refused.value.silo == 1 and not seen["opened"]  # nothing sealed under a swapped key


def test_protocol_1_with_a_roster_runs_honestly_to_the_weighted_sum():
    config = ProtocolConfig(n_silos=3, n_users=3, clip=1.0, sigma=1.0, parameters=KEYS)
    credentials = federation_credentials(3)
    silos = [SiloDriver(s, COUNTS[s], config, credentials=credentials[s]) for s in range(3)]
    inputs = {s: (np.full((3, 2), 0.25 * (s + 1)), np.array([0.5, -0.5])) for s in range(3)}

    def exchange(stage, round_index, payloads):
        return {
            s: silos[s].answer(stage, round_index, p, inputs=lambda s=s: inputs[s])
            for s, p in payloads.items()
        }

    server = ServerDriver(config, exchange)
    server.setup()
    sampled = np.array([True, True, False])
    decoded = server.round(1, sampled, 2)
    weights = np.where(sampled, COUNTS / COUNTS.sum(axis=0), 0.0)
    exact = sum(weights[s] @ inputs[s][0] + inputs[s][1] for s in range(3))
    assert np.max(np.abs(decoded - exact)) <= KEYS.precision
    with pytest.raises(ValueError, match="the roster lists 3 silos, the federation has 2"):
        SiloDriver(
            0, COUNTS[0, :2], replace(config, n_silos=2, n_users=2), credentials=credentials[0]
        )


def test_identity_files_are_owner_only_and_a_flipped_byte_of_a_roster_is_refused(tmp_path):
    identity = write_identity(tmp_path / "north.key", "north")
    assert stat.S_IMODE(os.stat(tmp_path / "north.key").st_mode) == 0o600
    assert read_identity(tmp_path / "north.key").fingerprint == identity.fingerprint
    with pytest.raises(ValueError, match="exists already"):
        write_identity(tmp_path / "north.key", "north")
    os.chmod(tmp_path / "north.key", 0o644)
    with pytest.raises(ValueError, match="readable by its owner only"):
        read_identity(tmp_path / "north.key")
    with pytest.raises(ValueError, match="a silo name is"):
        Identity.generate("../north")

    south = Identity.generate("south")
    roster = Roster.of([identity, south])
    path = tmp_path / "roster.json"
    write_roster(path, roster)
    assert read_roster(path) == roster
    data = path.read_bytes()
    digits = [i for i, byte in enumerate(data) if chr(byte) in "0123456789abcdef"]
    for index in digits[:: max(1, len(digits) // 40)]:  # fingerprints, digest and names alike
        flipped = bytearray(data)
        flipped[index] = ord("0") if data[index] != ord("0") else ord("1")
        path.write_bytes(bytes(flipped))
        with pytest.raises(ValueError, match="roster"):
            read_roster(path)
    with pytest.raises(ValueError, match="each name once"):
        Roster.of([identity, identity])
    with pytest.raises(ValueError, match="is in the roster; pass --replace"):
        roster.with_entry("south", identity.fingerprint)
    rotated = roster.with_entry("south", Identity.generate("south").fingerprint, replace=True)
    assert rotated.digest != roster.digest and [e.name for e in rotated.silos] == ["north", "south"]
