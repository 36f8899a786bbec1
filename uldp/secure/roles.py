"""What Protocol 1's two roles (:mod:`uldp.secure.protocol`'s ``Server`` and :mod:`uldp.secure.silo`'s ``Silo``) and
its backends (:mod:`uldp.secure.backends`) share: the sizes of the silos' secrets, the purposes of sealed payloads,
the context the modulus proof is bound to (beyond the paper, step 1(b)) and the per-silo ordering of answers."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

from uldp.secure import modulus_proof
from uldp.secure.messages import Message, ModulusProofMessage, RingPedersenMessage

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from uldp.secure.config import ProtocolConfig

#: Purposes of sealed silo-to-silo payloads (authenticated in the AEAD header).
SEALED_SEED = 1
SEALED_WEIGHT_POWERS = 2
#: Bytes of the nonce a silo draws for the modulus proof of one session.
NONCE_BYTES = 32
#: The length of a silo's symmetric secrets: the pairwise AEAD and mask keys (step 1(b)) and the seed R (step 1(c)).
SECRET_BYTES = 32

M = TypeVar("M", bound=Message)


def modulus_proof_context(config: ProtocolConfig, silo_id: int, nonce: bytes) -> bytes:
    """What the server's modulus proof for one silo is bound to (its Fiat-Shamir hashes): the silo's id, the
    session's shape and key size, and the silo's fresh nonce, so a proof made for another silo or another session is
    refused."""
    shape = (silo_id, config.n_silos, config.n_users, config.parameters.key_bits)
    return (
        b"uldp/protocol-1/modulus/" + b"".join(value.to_bytes(4, "big") for value in shape) + nonce
    )


def verifier_of(request: RingPedersenMessage) -> modulus_proof.Verifier:
    """The ring-Pedersen parameters and their proof that a silo sent at step 1(a)."""
    return (
        modulus_proof.RingPedersen(n=request.modulus, s=request.s, t=request.t),
        modulus_proof.RingPedersenProof(
            commitments=request.commitments, responses=request.responses
        ),
    )


def proof_of(message: ModulusProofMessage) -> modulus_proof.ModulusProof:
    """The modulus proof that a :class:`~uldp.secure.messages.ModulusProofMessage` carries."""
    return modulus_proof.ModulusProof(
        blum=modulus_proof.PaillierBlumProof(
            w=message.w, x=message.x, a=message.a, b=message.b, z=message.z
        ),
        factors=modulus_proof.NoSmallFactorProof(
            P=message.P,
            Q=message.Q,
            A=message.A,
            B=message.B,
            T=message.T,
            sigma=message.sigma,
            z1=message.z1,
            z2=message.z2,
            w1=message.w1,
            w2=message.w2,
            v=message.v,
        ),
    )


def one_per_silo(
    messages: Sequence[M], n_silos: int, *, what: str, silo_of: Callable[[M], int]
) -> list[M]:
    """Messages ordered by silo id; aborts with a clear error when a silo is missing, unknown or duplicated."""
    by_silo: dict[int, M] = {}
    for message in messages:
        silo = silo_of(message)
        if not 0 <= silo < n_silos:
            raise ValueError(f"{what} from unknown silo {silo} (silos are 0..{n_silos - 1})")
        if silo in by_silo:
            raise ValueError(f"duplicate {what} from silo {silo}")
        by_silo[silo] = message
    missing = sorted(set(range(n_silos)) - set(by_silo))
    if missing:
        raise ValueError(
            f"aborted: no {what} from silo(s) {missing}; every silo must take part in every round, and the server "
            f"decrypts nothing from a partial set"
        )
    return [by_silo[s] for s in range(n_silos)]
