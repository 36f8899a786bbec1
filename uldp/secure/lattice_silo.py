"""The silo's side of the lattice backend (:mod:`uldp.secure.lattice`; Protocol 1, steps 1(a) and 2(b)-(c)): the
check of the server's BFV public keys, and :class:`LatticeSilo`, the masked, flooded weighted sum in BFV with its
worker kernel. The module docstring of :mod:`uldp.secure.lattice` gives the protocol and its security argument.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import shutil
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from uldp.common.checks import check_integer
from uldp.secure import fast, lattice_expand, lattice_switch
from uldp.secure.config import auto_workers
from uldp.secure.lattice import (
    PURPOSE_LATTICE_UPDATE,
    RING_DEGREE,
    LatticeLayout,
    _contexts,
    _seal,
    _split,
)
from uldp.secure.lattice_weights import (
    _SHARED,
    SHARED_KEYS,
    _expand_share,
    _expanded_weights,
    _shared_key,
)
from uldp.secure.lattice_wire import _load, _scratch, ciphertext_residues, to_bytes

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

#: Bytes SEAL adds to a key's or ciphertext's coefficients when it saves one (its header and parms id; 161 measured).
SERIALISATION_OVERHEAD = 1024


def public_key_bytes_bound(layout: LatticeLayout) -> int:
    """The most bytes one BFV public key of the session may have: SEAL saves it uncompressed as two polynomials
    over every RNS prime of q (the special prime included), 8 bytes a coefficient, plus its header
    (:data:`SERIALISATION_OVERHEAD`); 1.57 MB at six 60-bit primes."""
    return 2 * RING_DEGREE * len(layout.coefficient_bits) * 8 + SERIALISATION_OVERHEAD


def load_public_keys(
    layout: LatticeLayout, public_keys: Sequence[bytes], *, silo_id: int
) -> list[Any]:
    """The server's BFV public keys (step 1(a) of the lattice backend) as SEAL objects, each checked by size and by
    SEAL's own load against the session's context before anything is made of it.

    Args:
        layout: the session's :class:`LatticeLayout`.
        public_keys: SEAL's bytes of each key, one per plaintext prime.
        silo_id: the silo that checks them (named in the errors).

    Raises:
        ValueError: a count other than one key per plaintext prime, a key over :func:`public_key_bytes_bound`, or
            bytes that are no public key of this session (naming the silo).
    """
    sealapi = _seal()
    if len(public_keys) != len(layout.plain_moduli):
        raise ValueError(
            f"silo {silo_id}: {len(public_keys)} public keys for {len(layout.plain_moduli)} primes"
        )
    bound = public_key_bytes_bound(layout)
    if any(len(key) > bound for key in public_keys):
        raise ValueError(
            f"silo {silo_id}: a BFV public key of {max(len(key) for key in public_keys)} bytes, over "
            f"the {bound} bytes of one of this lattice session"
        )
    loaded = []
    for context, key in zip(
        _contexts(layout.plain_moduli, layout.coefficient_bits), public_keys, strict=True
    ):
        public = sealapi.PublicKey()
        try:
            _load(public, context.context, key)
        except (RuntimeError, ValueError) as error:
            raise ValueError(
                f"silo {silo_id}: not a public key of this lattice session: {error}"
            ) from error
        loaded.append(public)
    return loaded


def check_galois_keys(
    layout: LatticeLayout, galois_keys: Sequence[bytes], *, silo_id: int
) -> tuple[bytes, ...]:
    """The server's Galois keys (step 1(a)), checked by count and size: one set per plaintext prime, each at most
    L key-switching keys of (#data primes) ciphertexts over every prime of q (:func:`public_key_bytes_bound` each),
    and none when a single user needs no expansion. SEAL checks their content when a silo first loads them.

    Raises:
        ValueError: a wrong count, or a set over the bound or missing (naming the silo).
    """
    level_count = lattice_expand.levels(layout.n_users)
    bound = level_count * (len(layout.coefficient_bits) - 1) * public_key_bytes_bound(layout)
    if len(galois_keys) != len(layout.plain_moduli) or any(
        len(key) > bound or bool(key) != bool(level_count) for key in galois_keys
    ):
        raise ValueError(
            f"silo {silo_id}: Galois keys must be {len(layout.plain_moduli)} sets (one per plaintext prime) "
            f"of at most {bound} bytes{'' if level_count else ', empty for a single user'}; got sizes "
            f"{[len(key) for key in galois_keys]}"
        )
    return tuple(galois_keys)


def _public_encryptors(
    layout: LatticeLayout, public_keys: Sequence[bytes], silo_id: int
) -> list[Any]:
    """Public-key encryptors of the server's keys (for the fresh ``Enc(0)``), built once per process and kept
    under a digest of the parameters and keys (worker processes reuse them in the session's later rounds)."""
    digest = hashlib.sha256(
        repr((layout.plain_moduli, layout.coefficient_bits)).encode() + b"".join(public_keys)
    ).digest()
    if digest not in _PUBLIC_ENCRYPTORS:
        sealapi = _seal()
        _PUBLIC_ENCRYPTORS[digest] = [
            sealapi.Encryptor(context.context, public)
            for context, public in zip(
                _contexts(layout.plain_moduli, layout.coefficient_bits),
                load_public_keys(layout, public_keys, silo_id=silo_id),
                strict=True,
            )
        ]
    return _PUBLIC_ENCRYPTORS[digest]


_PUBLIC_ENCRYPTORS: dict[bytes, list[Any]] = {}


@dataclass(frozen=True)
class _RoundTask:
    """What a worker needs for its share of one silo's round (all public parameters, or the silo's own secrets:
    only this silo's own forked workers receive them). ``inputs`` is a directory (in RAM where it fits) holding
    ``rows.npy`` (the encoded rows of the contributing users, (users, d) int64), ``weights-i.pkl`` (the packed
    weights' bytes for plaintext prime i) and ``galois-i.bin`` (its Galois keys), which workers read without the
    parent pickling them to each; or None when they are passed in process (:attr:`rows`, :attr:`weights`,
    :attr:`galois_keys`). ``users`` are the contributing users (the rows' order), ``corrections`` every user's c_u,
    ``galois_digests`` the SHA-256 of each prime's Galois keys (the key of the expanded weights)."""

    layout: LatticeLayout
    public_keys: tuple[bytes, ...]
    galois_digests: tuple[bytes, ...]
    users: tuple[int, ...]
    mask_keys: tuple[tuple[int, bytes], ...]
    silo_id: int
    round_index: int
    corrections: tuple[int, ...]
    noise: np.ndarray  # rint(noise 2^f), int64 [d]
    inputs: str | None
    rows: np.ndarray | None = None
    weights: tuple[tuple[bytes, ...], ...] | None = None
    galois_keys: tuple[bytes, ...] | None = None


def _round_items(task: _RoundTask, items: Sequence[tuple[int, int]]) -> list[bytes]:
    """Step 2(b)-(c) for the (plaintext prime, chunk) ``items`` of one silo's round: per item the switched, masked
    ciphertext of ``sum_u W_u X_u + Enc(0) + 2^g Ez + flood`` (:mod:`uldp.secure.lattice_switch`).

    A worker computes whole ciphertexts (every user's product of its chunks), so nothing is summed across workers and
    the parent only concatenates: the bytes do not depend on how the items are split, up to the fresh randomness.

    Raises:
        ValueError: weights that are no ciphertexts of the session.
    """
    sealapi = _seal()
    layout = task.layout
    rows = (
        task.rows
        if task.inputs is None
        else np.load(os.path.join(task.inputs, "rows.npy"), mmap_mode="r")
    )
    assert rows is not None
    contexts = _contexts(layout.plain_moduli, layout.coefficient_bits)
    encryptors = _public_encryptors(layout, task.public_keys, task.silo_id)
    parameters, g = rows.shape[1], layout.packed.weight_bits
    b0, b1 = layout.switch_bits
    prepared: dict[int, list[Any]] = {}
    out = []
    for index, chunk in items:
        context, evaluator = contexts[index], contexts[index].evaluator
        if index not in prepared:  # W_u = Enc(y_u - c_u) in NTT form, once per prime and worker
            if task.inputs is None:
                assert task.weights is not None
                weights = task.weights[index]
            else:  # only the primes this worker's items need
                with open(os.path.join(task.inputs, f"weights-{index}.pkl"), "rb") as handle:
                    weights = pickle.load(handle)
            prepared[index] = _expanded_weights(task, index, weights)
        span = slice(chunk * RING_DEGREE, min((chunk + 1) * RING_DEGREE, parameters))
        used = span.stop - span.start
        total, product = None, sealapi.Ciphertext()
        for weight, row in zip(prepared[index], rows[:, span], strict=True):
            if (
                not row.any()
            ):  # a row of zeros adds nothing (and SEAL refuses its product, a transparent one)
                continue
            plain = context.vector(row)
            evaluator.transform_to_ntt_inplace(plain, context.parms_id)
            if total is None:
                total = sealapi.Ciphertext()
                evaluator.multiply_plain(weight, plain, total)
            else:
                evaluator.multiply_plain(weight, plain, product)
                evaluator.add_inplace(total, product)
        fresh = sealapi.Ciphertext()
        encryptors[index].encrypt_zero(fresh)  # re-randomisation: a fresh public-key Enc(0)
        if total is None:
            total = fresh
        else:
            evaluator.transform_from_ntt_inplace(total)
            evaluator.add_inplace(total, fresh)
        noise = (task.noise[span].astype(object) * (1 << g)) % context.t
        evaluator.add_plain_inplace(total, context.vector(noise.astype(np.int64)))
        flood = np.zeros((2, len(context.moduli), RING_DEGREE), dtype=np.uint64)
        flood[0] = flood_residues(layout.flood_bits, context.moduli)
        evaluator.add_inplace(total, context.raw_ciphertext(flood))
        evaluator.mod_switch_to_inplace(total, context.level_parms_id)
        residues = ciphertext_residues(total, to_bytes(total))
        c0 = lattice_switch.switch(residues[0][:, :used], context.level_moduli, b0)
        c1 = lattice_switch.switch(residues[1], context.level_moduli, b1)
        for peer, key in task.mask_keys:
            sign = 1 if task.silo_id < peer else -1
            for component, bits, count in ((0, b0, used), (1, b1, RING_DEGREE)):
                mask = lattice_switch.mask_words(
                    key,
                    round_index=task.round_index,
                    purpose=PURPOSE_LATTICE_UPDATE,
                    prime=index,
                    chunk=chunk,
                    component=component,
                    count=count,
                    bits=bits,
                )
                if component == 0:
                    c0 = lattice_switch.add(c0, mask, bits, sign=sign)
                else:
                    c1 = lattice_switch.add(c1, mask, bits, sign=sign)
        out.append(lattice_switch.pack(c0, b0) + lattice_switch.pack(c1, b1))
    return out


def flood_residues(bits: int, moduli: Sequence[int]) -> np.ndarray:
    """A polynomial with coefficients uniform on [-2^bits, 2^bits) from the OS CSPRNG, as residues [#q, N]."""
    width = bits + 1
    words = -(-width // 8)
    raw = os.urandom(words * RING_DEGREE)
    values = [
        int.from_bytes(raw[i * words : (i + 1) * words], "little") % (1 << width) - (1 << bits)
        for i in range(RING_DEGREE)
    ]
    column = np.array(values, dtype=object)
    return np.stack([(column % q).astype(np.uint64) for q in moduli])


class LatticeSilo:
    """Silo s of the lattice round: its counts, the server's public keys, its pairwise mask keys.

    Args:
        silo_id: s.
        counts: n_su, [|U|].
        layout: the session's :class:`LatticeLayout`.
        public_keys: the server's, one per plaintext prime.
        galois_keys: the server's Galois keys, one set per plaintext prime
            (:meth:`uldp.secure.lattice.LatticeServer.galois_keys`; checked by size here, by SEAL at their first use).
        mask_keys: per peer silo, the 32-byte pairwise mask key of step 1(b).
        workers: worker processes for step 2(b)-(c) (default :func:`uldp.secure.config.auto_workers`); the round's
            ciphertexts (one per plaintext prime and chunk of N parameters) are split between them, each computed whole
            by one worker (its users' products, re-randomisation, flood, switch and masks). A new sample's weights are
            expanded once, split between the workers by residue class of the users (:mod:`uldp.secure.lattice_weights`),
            and read by every worker that needs them: before, each worker expanded all users' weights of its primes, so
            a new sample's CPU time grew with the workers (4.0 times from 1 to 16 on 16 cores,
            ``benchmarks/results/lattice_workers_h200.json``); sharing it took a new sample's round at 8 workers on 2
            cores from 16.4 to 10.9 CPU seconds (``lattice_workers_shared.json``). Workers rebuild the session's
            contexts once from its public parameters and keep them. 1 runs in this process.
        answered_round: the last round this silo answered (0: none), for a silo restored between messages
            (:attr:`answered_round`); it answers only later rounds.

    Raises:
        ValueError: counts of the wrong shape, a worker count below 1, or public keys that are not this session's
            (naming the silo).
    """

    def __init__(
        self,
        silo_id: int,
        counts: np.ndarray,
        layout: LatticeLayout,
        *,
        public_keys: Sequence[bytes],
        galois_keys: Sequence[bytes],
        mask_keys: Mapping[int, bytes],
        workers: int | None = None,
        answered_round: int = 0,
    ) -> None:
        self.workers = auto_workers() if workers is None else check_integer("workers", workers)
        check_integer("answered_round", answered_round, minimum=0)
        row = np.asarray(counts, dtype=np.int64)
        if row.shape != (layout.n_users,):
            raise ValueError(
                f"silo {silo_id}: counts for {layout.n_users} users, got shape {row.shape}"
            )
        self.silo_id, self.layout, self._counts = silo_id, layout, row
        self._mask_keys = dict(mask_keys)
        self._public_keys = tuple(public_keys)
        load_public_keys(layout, self._public_keys, silo_id=silo_id)
        self._galois_keys = check_galois_keys(layout, galois_keys, silo_id=silo_id)
        self._galois_digests = tuple(hashlib.sha256(key).digest() for key in self._galois_keys)
        self._answered = answered_round

    @property
    def answered_round(self) -> int:
        """The last round whose update this silo computed (0: none): each round index at most once, increasing."""
        return self._answered

    def masked_update(
        self,
        round_index: int,
        weights: Sequence[Sequence[bytes]],
        corrections: Sequence[int],
        deltas: np.ndarray,
        noise: np.ndarray,
    ) -> tuple[tuple[bytes, ...], ...]:
        """Step 2(b)-(c): per plaintext prime and chunk of N parameters, the masked, flooded, switched weighted sum
        (:mod:`uldp.secure.lattice_switch`'s wire format).

        Args:
            round_index: t (each at most once, increasing).
            weights: the server's packed weights, per plaintext prime ``ceil(|U| / N)`` ciphertexts
                (:meth:`LatticeServer.encrypt_weights`), expanded here (:mod:`uldp.secure.lattice_expand`).
            corrections: c_u = floor(rho_u 2^g / C_LCM) of the rescale blinds the weights answered (the same in
                every silo).
            deltas: clipped deltas of this silo's users, (|U|, d) (rows of users without records are ignored).
            noise: this silo's noise, (d,).

        The ciphertexts are computed by :attr:`workers` processes (:func:`_round_items`); users whose encoded rows
        are all zero add nothing, so their weights are not even expanded.

        Raises:
            ValueError: a round index not above the last answered one (a second update of a round would let the
                key holder subtract the masks), wrong shapes, values beyond the bounds, or weights that are no
                ciphertexts of the session.
        """
        if round_index <= self._answered:
            raise ValueError(
                f"silo {self.silo_id} refuses round {round_index}: it answered round {self._answered} "
                f"(each round index at most once, in increasing order)"
            )
        layout = self.layout
        deltas, noise = np.asarray(deltas, dtype=np.float64), np.asarray(noise, dtype=np.float64)
        if (
            deltas.ndim != 2
            or deltas.shape[0] != layout.n_users
            or noise.shape != (deltas.shape[1],)
        ):
            raise ValueError(
                f"silo {self.silo_id}: deltas must be (|U|, d) and noise (d,), got {deltas.shape}, "
                f"{noise.shape}"
            )
        primes = len(layout.plain_moduli)
        packed = lattice_expand.groups(layout.n_users)
        if len(weights) != primes or any(len(w) != packed for w in weights):
            raise ValueError(
                f"silo {self.silo_id}: weights must hold ceil(|U| / N) = {packed} packed ciphertexts "
                f"per plaintext prime ({primes} primes)"
            )
        if len(corrections) != layout.n_users:
            raise ValueError(
                f"silo {self.silo_id}: {len(corrections)} corrections for {layout.n_users} users"
            )
        f = layout.packed.resolution_bits
        active = [u for u in range(layout.n_users) if self._counts[u] > 0]
        if (
            np.abs(deltas[active]).max(initial=0.0) > layout.clip
            or np.abs(noise).max(initial=0.0) > layout.noise_bound
        ):
            raise ValueError(
                f"silo {self.silo_id}: a delta beyond C={layout.clip} or a noise coordinate beyond "
                f"{layout.noise_bound:.3g}, the bounds the slot bound assumed; clip the deltas"
            )
        self._answered = round_index
        scale = float(1 << f)
        encoded = np.rint(deltas[active] * scale).astype(np.int64) * self._counts[active][:, None]
        contributing = [i for i in range(len(active)) if encoded[i].any()]
        users = [active[i] for i in contributing]
        task = _RoundTask(
            layout=layout,
            public_keys=self._public_keys,
            galois_digests=self._galois_digests,
            users=tuple(users),
            mask_keys=tuple(sorted(self._mask_keys.items())),
            silo_id=self.silo_id,
            round_index=round_index,
            corrections=tuple(int(c) for c in corrections),
            noise=np.rint(noise * scale).astype(np.int64),
            inputs=None,
        )
        chosen = tuple(tuple(prime) for prime in weights)
        rows = np.ascontiguousarray(encoded[contributing])
        items = [(i, c) for i in range(primes) for c in range(layout.chunks_for(deltas.shape[1]))]
        groups = [[items[j] for j in group] for group in _split(len(items), self.workers)]
        if len(groups) <= 1:
            alone = replace(task, rows=rows, weights=chosen, galois_keys=self._galois_keys)
            parts = [_round_items(alone, items)]
        else:  # (prime, chunk) items split over worker processes, which read the inputs from a file
            expanded_bytes = (
                len(users) * primes * 2 * len(layout.coefficient_bits) * RING_DEGREE * 8
            )
            size = rows.nbytes + sum(len(c) for prime in chosen for c in prime) + expanded_bytes
            room = _scratch()
            if (
                shutil.disk_usage(room).free < 2 * size
            ):  # a small /dev/shm (containers): the disk instead
                room = tempfile.gettempdir()
            with tempfile.TemporaryDirectory(dir=room) as inputs:
                np.save(os.path.join(inputs, "rows.npy"), rows)
                for index, prime in enumerate(chosen):
                    with open(os.path.join(inputs, f"weights-{index}.pkl"), "wb") as handle:
                        pickle.dump(prime, handle, protocol=pickle.HIGHEST_PROTOCOL)
                    Path(inputs, f"galois-{index}.bin").write_bytes(self._galois_keys[index])
                shared = replace(task, inputs=inputs)
                # a new sample: expanded once, split between the workers, one call per worker at a time
                if _shared_key(task, chosen) not in _SHARED:
                    shares = 1 << max(0, (len(groups) // primes).bit_length() - 1)
                    calls = [
                        (shared, index, shares, residue)
                        for index in range(primes)
                        for residue in range(shares)
                    ]
                    for start in range(0, len(calls), len(groups)):
                        fast.run_each(_expand_share, calls[start : start + len(groups)])
                    _SHARED[_shared_key(task, chosen)] = None
                    while len(_SHARED) > SHARED_KEYS:
                        _SHARED.popitem(last=False)
                parts = fast.run_each(_round_items, [(shared, group) for group in groups])
        flat = [c for part in parts for c in part]
        chunks = layout.chunks_for(deltas.shape[1])
        return tuple(tuple(flat[i * chunks : (i + 1) * chunks]) for i in range(primes))
