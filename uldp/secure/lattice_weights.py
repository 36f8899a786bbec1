"""The lattice silo's expanded weights (:mod:`uldp.secure.lattice_silo`; Protocol 1, step 2(b)): the server's packed
weight ciphertexts less the silo's corrections, expanded to one ``W_u = Enc(y_u - c_u)`` per contributing user with
the server's Galois keys (:mod:`uldp.secure.lattice_expand`), once per sample: split between the silo's worker
processes when the sample is new, kept by each worker while the sample is held. What the silo's round reads from
here: :func:`expanded_weights` in a worker, :func:`shared_key`, :data:`SHARED`, :data:`SHARED_KEYS` and
:func:`expand_share` in the silo."""

from __future__ import annotations

import hashlib
import os
import pickle
import re
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from uldp.secure import fast, lattice_expand
from uldp.secure.lattice import RING_DEGREE, _contexts, _seal
from uldp.secure.lattice_wire import _load, ciphertext_residues, to_bytes

if TYPE_CHECKING:
    from collections.abc import Sequence

    from uldp.secure.lattice_silo import _RoundTask


#: The expanded weights this process made, by the digest of what they were made from (the silo's users and
#: corrections, the prime's Galois keys and the server's weights), least recently used first: a round whose weights
#: the silo holds from an earlier round (the same sample) reuses them, whichever other silos of this process (an
#: in-process federation) ran between. A silo's worker j gets the same (prime, chunk) items every round
#: (:func:`uldp.secure.fast.run_each`), so each worker's own store serves its share likewise.
_EXPANDED: OrderedDict[bytes, tuple[int, list[Any]]] = OrderedDict()
#: The shared expansions this process's kept workers read (:func:`_shared_key`), most recent last: a round whose
#: key is here skips the expansion, each worker keeping what it read. Per process, like the workers, so a silo
#: restored between messages (a Flower silo each round) holds its sample too.
_SHARED: OrderedDict[bytes, None] = OrderedDict()
#: The most shared expansions remembered (the workers' own bound, :data:`EXPANDED_CACHE_BYTES`, decides what they
#: keep; a key they dropped only makes a worker expand for itself, with the same result).
SHARED_KEYS = 64
#: The most bytes of expanded weights a process keeps between rounds (two ciphertexts' polynomials over q each).
EXPANDED_CACHE_BYTES = 1 << 31


def _expanded_weights(task: _RoundTask, index: int, weights: Sequence[bytes]) -> list[Any]:
    """The contributing users' ``W_u = Enc(y_u - c_u)`` for plaintext prime ``index``, in NTT form
    (:func:`_expand_weights`), kept in this process for the next rounds within :data:`EXPANDED_CACHE_BYTES` (the
    least recently used dropped first): when the sample repeats the silo holds the same weights and corrections
    (those of the weights' round), so the expansion is done once per sample, as the server's encryption is. They are
    the silo's own values (its corrections are secret), kept in its own process as its workers' inputs are.
    """
    layout = task.layout
    digest = hashlib.sha256(
        repr((index, layout, task.users, task.corrections)).encode()
        + task.galois_digests[index]
        + b"".join(hashlib.sha256(w).digest() for w in weights)
    ).digest()
    if digest in _EXPANDED:
        _EXPANDED.move_to_end(digest)
        return _EXPANDED[digest][1]
    expanded = _shared_expansion(task, index)
    if expanded is None:
        expanded = _expand_weights(task, index, weights)
    size = len(expanded) * 2 * RING_DEGREE * len(layout.coefficient_bits) * 8
    if size <= EXPANDED_CACHE_BYTES:
        held = sum(kept for kept, _ in _EXPANDED.values())
        while _EXPANDED and held + size > EXPANDED_CACHE_BYTES:
            held -= _EXPANDED.popitem(last=False)[1][0]
        _EXPANDED[digest] = (size, expanded)
    return expanded


def _shared_key(task: _RoundTask, weights: Sequence[Sequence[bytes]]) -> bytes:
    """What a shared expansion is of: the silo, its contributing users and corrections, the weights, and the kept
    workers that read it (a restarted pool holds nothing, so its key differs)."""
    return hashlib.sha256(
        repr((task.silo_id, task.users, task.corrections, sorted(fast.worker_pids()))).encode()
        + b"".join(hashlib.sha256(c).digest() for prime in weights for c in prime)
    ).digest()


def _residue_class(users: Sequence[int], parts: int, residue: int) -> list[int]:
    """The users ``u`` with ``u mod parts == residue``, in their order: one worker's share of the expansion. With
    ``parts`` a power of two a share's expansion tree branches only below level log2(parts), so the shares together
    cost about one whole expansion (contiguous blocks of users would each repeat the tree's top)."""
    return [u for u in users if u % parts == residue]


def _expand_share(task: _RoundTask, index: int, parts: int, residue: int) -> None:
    """Step 2(b)'s expansion, split between a silo's workers: the weights of one residue class of the contributing
    users (:func:`_residue_class`) for plaintext prime ``index``, expanded and written as their residues
    ``[users, 2, #q, N]`` to ``expanded-<index>-<parts>-<residue>.npy`` in the round's inputs directory, which every
    worker whose items use the prime reads (:func:`_shared_expansion`) instead of expanding all users itself. The
    values are the silo's own (``y_u - c_u``; its corrections are secret) and stay in its private directory, beside
    its rows."""
    assert task.inputs is not None
    with open(os.path.join(task.inputs, f"weights-{index}.pkl"), "rb") as handle:
        weights = pickle.load(handle)
    users = _residue_class(task.users, parts, residue)
    expanded = _expand_weights(task, index, weights, users)
    residues = (
        np.stack([ciphertext_residues(c, to_bytes(c)) for c in expanded])
        if expanded
        else np.zeros((0, 2, 1, RING_DEGREE), dtype=np.uint64)
    )
    path = os.path.join(task.inputs, f"expanded-{index}-{parts}-{residue}.npy")
    np.save(path + ".part.npy", residues)
    os.replace(path + ".part.npy", path)  # a reader sees a whole file or none


def _shared_expansion(task: _RoundTask, index: int) -> list[Any] | None:
    """The contributing users' expanded weights for prime ``index`` from the round's shares
    (:func:`_expand_share`), in the order of ``task.users``; ``None`` when this round has none (one worker, or a
    sample the silo holds, whose workers keep their own)."""
    if task.inputs is None:
        return None
    shares = [
        name.split("-")
        for name in os.listdir(task.inputs)
        if re.fullmatch(rf"expanded-{index}-\d+-\d+\.npy", name)
    ]
    if not shares:
        return None
    context = _contexts(task.layout.plain_moduli, task.layout.coefficient_bits)[index]
    parts = int(shares[0][2])
    classes = {
        residue: iter(np.load(os.path.join(task.inputs, f"expanded-{index}-{parts}-{residue}.npy")))
        for residue in range(parts)
    }
    return [context.raw_ciphertext(next(classes[u % parts]), ntt_form=True) for u in task.users]


def _expand_weights(
    task: _RoundTask, index: int, weights: Sequence[bytes], users: Sequence[int] | None = None
) -> list[Any]:
    """The ``users``' (default: the contributing users') ``W_u = Enc(y_u - c_u)`` for plaintext prime ``index``, in NTT
    form, in the order of ``task.users``: each packed ciphertext less the packed corrections, expanded
    (:mod:`uldp.secure.lattice_expand`).

    Raises:
        ValueError: weights or Galois keys that are not the session's.
    """
    users = task.users if users is None else users
    sealapi, layout = _seal(), task.layout
    context = _contexts(layout.plain_moduli, layout.coefficient_bits)[index]
    level_count = lattice_expand.levels(layout.n_users)
    galois = sealapi.GaloisKeys()
    if level_count:
        try:
            _load(galois, context.context, _galois_bytes(task, index))
        except (RuntimeError, ValueError) as error:
            raise ValueError(f"not Galois keys of this lattice session: {error}") from error
    corrections = lattice_expand.packed_rows(task.corrections, context.t)
    out: list[Any] = []
    for group, (data, correction) in enumerate(zip(weights, corrections, strict=True)):
        first = group * RING_DEGREE
        wanted = [u - first for u in users if first <= u < first + RING_DEGREE]
        if not wanted:
            continue
        packed = context.load(data)
        context.evaluator.sub_plain_inplace(packed, context.vector(correction.astype(np.int64)))
        expanded = lattice_expand.expand(
            sealapi,
            context.evaluator,
            packed,
            galois,
            level_count=level_count,
            wanted=wanted,
            monomial=context.monomial,
        )
        for weight in expanded:
            context.evaluator.transform_to_ntt_inplace(weight)
            out.append(weight)
    return out


def _galois_bytes(task: _RoundTask, index: int) -> bytes:
    """Prime ``index``'s Galois keys: the task's in process, else ``galois-<index>.bin`` of the round's inputs (a
    worker reads them only to expand; every worker's task carried them before, 0.1 s per worker and round at 100
    users), checked against the digest the silo took when it accepted them.

    Raises:
        ValueError: keys that are not the accepted ones.
    """
    path = os.path.join(task.inputs or "", f"galois-{index}.bin")
    data = task.galois_keys[index] if task.galois_keys is not None else Path(path).read_bytes()
    if hashlib.sha256(data).digest() != task.galois_digests[index]:
        raise ValueError(
            f"silo {task.silo_id}: Galois keys for prime {index} that are not the accepted ones"
        )
    return data
