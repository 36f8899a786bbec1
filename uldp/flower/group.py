"""ULDP-GROUP-k's flags ``B`` on Flower: two more set-up stages after ``federation`` (all ``query.uldp``).

Algorithm 2 line 8 keeps at most ``k`` records of each user over all silos, drawn once before training
(:func:`uldp.methods.group.contribution_flags`): a silo's flags depend on the other silos' records of its users, and
``k = max`` / ``median`` on every user's record count. Like the paper, the flags are not computed privately (the
method is a baseline), but the server still learns no user of any record:

- ``group-users``: each silo answers the user number of each of its records (in its record order), sealed
  (ChaCha20-Poly1305) under a key derived from the silos' relay key, which the server never holds.
- ``group-flags``: the server relays every silo's sealed list to every silo; each opens them, concatenates them in
  silo order (the record order of :func:`uldp.fit` on the pooled records), draws the flags from a seed the silos
  derive from the relay key and the union's digest (:func:`flags_seed`; the INSECURE test seed's ``PREPARE_STREAM``
  as :func:`uldp.fit` with it), keeps its own in its node-local state and answers ``k``, its number of kept records
  and a digest of all flags. The server checks that the silos agree, and takes ``k`` and the kept records per silo
  for the accountant (ULDP-GROUP's Theorem 2: each silo's DP-SGD rate and steps), which is all it learns.

So each silo learns the other silos' users per record (more than the counts ``n_su`` that plain ULDP-AVG-w shares).
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

import numpy as np
from flwr.app import ArrayRecord

from uldp.fitting import PREPARE_STREAM
from uldp.methods.base import seed_stream
from uldp.methods.group import contribution_flags, resolve_group_size
from uldp.secure.keys import derive_key, open_sealed, seal

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

#: The set-up stages this module answers, in order.
STAGES = ("group-users", "group-flags")
#: Where a silo keeps its own flags in ``context.state``.
STATE_KEY = "uldp_group"


def _sealing_key(relay_key: bytes) -> bytes:
    return derive_key(relay_key, label=b"group-flags")


def _associated(digest: str, silo: int) -> bytes:
    return f"uldp group users|{digest}|{silo}".encode()


def flags_seed(relay_key: bytes, digest: str, insecure_seed: int | None) -> np.random.SeedSequence:
    """The seed of the flags: :func:`uldp.fit`'s (``PREPARE_STREAM`` of ``insecure_seed``, tests only), else one the
    silos derive alike from the relay key and the union's digest, which the server never learns."""
    if insecure_seed is not None:
        return seed_stream(np.random.SeedSequence(insecure_seed), PREPARE_STREAM)
    entropy = hashlib.sha256(b"uldp group flags seed|" + relay_key + digest.encode()).digest()
    return np.random.SeedSequence(int.from_bytes(entropy, "big"))


def users_message(codes: np.ndarray, *, silo: int, digest: str, relay_key: bytes) -> dict:
    """The silo's ``group-users`` answer: its records' user numbers, sealed for the other silos."""
    plain = np.asarray(codes, dtype="<i8").tobytes()
    nonce, sealed = seal(_sealing_key(relay_key), plain, associated_data=_associated(digest, silo))
    return {"nonce": nonce, "users": sealed}


def flags(
    settings: dict,
    context: Any,
    codes: np.ndarray,
    *,
    group_size: int | str,
    relay_key: bytes,
    insecure_seed: int | None,
) -> dict:
    """The silo's ``group-flags`` answer (``settings``: every silo's sealed list); keeps its own flags.

    Raises:
        ValueError: before the federation stage, a list that does not open (tampered, of another union or another
            silo's), or lists that disagree with this silo's own records or the federation's size.
    """
    state = dict(context.state["uldp"]) if "uldp" in context.state else None
    if state is None:
        raise ValueError("a group-flags stage before the federation stage")
    index, digest = int(state["index"]), str(state["users_digest"])
    nonces, sealed = list(settings["nonces"]), list(settings["users"])
    if len(nonces) != int(state["n_silos"]) or len(sealed) != len(nonces):
        raise ValueError(
            f"group-flags needs one list per silo ({state['n_silos']}), got {len(sealed)}"
        )
    key = _sealing_key(relay_key)
    lists = []
    for silo, (nonce, ciphertext) in enumerate(zip(nonces, sealed, strict=True)):
        try:
            plain = open_sealed(
                key, bytes(nonce), bytes(ciphertext), associated_data=_associated(digest, silo)
            )
        except ValueError as error:
            raise ValueError(f"silo {silo}'s user list does not open: {error}") from error
        lists.append(np.frombuffer(plain, dtype="<i8"))
    if not np.array_equal(lists[index], codes) or sum(map(len, lists)) != int(
        state["total_records"]
    ):
        raise ValueError("the relayed user lists disagree with this silo's records")
    users = np.concatenate(lists)
    if users.size and (users.min() < 0 or users.max() >= int(state["n_users"])):
        raise ValueError("a relayed user number is outside the union")
    k = resolve_group_size(group_size, np.bincount(users, minlength=int(state["n_users"])))
    keep = contribution_flags(
        users, k, np.random.default_rng(flags_seed(relay_key, digest, insecure_seed))
    )
    offset = int(state["offset"])
    own = keep[offset : offset + codes.size]
    context.state[STATE_KEY] = ArrayRecord([own, np.array([k])])
    return {
        "k": k,
        "kept": int(own.sum()),
        "digest": hashlib.sha256(np.packbits(keep).tobytes() + str(k).encode()).hexdigest(),
    }


def own_flags(context: Any) -> tuple[np.ndarray, int]:
    """This silo's flags (bool per record) and ``k``, after ``group-flags``.

    Raises:
        ValueError: before ``group-flags``.
    """
    if STATE_KEY not in context.state:
        raise ValueError("a ULDP-GROUP round before the group-flags stage (the strategy runs it)")
    own, k = context.state[STATE_KEY].to_numpy_ndarrays()
    return own.astype(bool), int(k[0])


def server_flags(
    ask: Callable[[dict[int, dict]], dict[int, dict]], n_silos: int, method: str
) -> tuple[int, Sequence[int]]:
    """The server's two stages: collect the sealed lists, relay them all to every silo, check the silos agree.

    Returns:
        ``k`` and the kept records of each silo (for Theorem 2's accountant).

    Raises:
        RuntimeError: the silos disagree on the flags.
    """
    lists = ask({s: {"stage": "group-users"} for s in range(n_silos)})
    relayed = {
        "stage": "group-flags",
        "method": method,
        "nonces": [bytes(lists[s]["nonce"]) for s in range(n_silos)],
        "users": [bytes(lists[s]["users"]) for s in range(n_silos)],
    }
    answers = ask(dict.fromkeys(range(n_silos), relayed))
    agreed = {(int(a["k"]), str(a["digest"])) for a in answers.values()}
    if len(agreed) != 1:
        raise RuntimeError("the silos disagree on ULDP-GROUP's flags (a tampered relay)")
    return agreed.pop()[0], [int(answers[s]["kept"]) for s in range(n_silos)]
