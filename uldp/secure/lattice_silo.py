"""The silo's side of the lattice backend (:mod:`uldp.secure.lattice`; Protocol 1, steps 1(a) and 2(b)-(c)): the
check of the server's BFV public keys, and :class:`LatticeSilo`, the masked, flooded weighted sum in BFV with its
worker kernel. The module docstring of :mod:`uldp.secure.lattice` gives the protocol and its security argument.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import numpy as np

from uldp.common.checks import check_integer
from uldp.secure import fast, masks
from uldp.secure.lattice import (
    PURPOSE_LATTICE_UPDATE,
    RING_DEGREE,
    LatticeLayout,
    _contexts,
    _seal,
    _split,
)
from uldp.secure.lattice_wire import _load, to_bytes

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


def _weighted_products(
    plain_moduli: Sequence[int],
    coefficient_bits: Sequence[int],
    weights: Sequence[Sequence[bytes]],
    corrections: Sequence[int],
    rows: np.ndarray,
) -> list[list[bytes | None]]:
    """Step 2(b)'s products for a group of users: per plaintext prime and chunk, ``sum_u (V_u - c_u) * X_u``.

    Args:
        plain_moduli, coefficient_bits: the session's parameters (contexts are rebuilt once per process).
        weights: per plaintext prime, the group's ``Enc(y_u)`` bytes.
        corrections: the group's c_u.
        rows: the group's ``n_su E_su``, (users, d) int64.

    Returns:
        Per prime and chunk, the NTT-form ciphertext bytes of the sum (None where every row of the chunk is 0).
        Addition in R_q is exact, so the sum over groups does not depend on how users are split.

    Raises:
        ValueError: weights that are no ciphertexts of the session.
    """
    sealapi = _seal()
    parameters = rows.shape[1]
    out = []
    for context, prime in zip(_contexts(plain_moduli, coefficient_bits), weights, strict=True):
        evaluator = context.evaluator
        user_weights = []
        for weight_bytes, correction in zip(
            prime, corrections, strict=True
        ):  # W_u = V_u - c_u, in NTT form
            weight = context.load(weight_bytes)
            evaluator.sub_plain_inplace(weight, context.constant(int(correction)))
            evaluator.transform_to_ntt_inplace(weight)
            user_weights.append(weight)
        sums: list[bytes | None] = []
        for start in range(0, parameters, RING_DEGREE):
            block = rows[:, start : start + RING_DEGREE]
            total, product = None, sealapi.Ciphertext()
            for weight, row in zip(user_weights, block, strict=True):
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
            sums.append(None if total is None else to_bytes(total))
        out.append(sums)
    return out


def uniform_residues(
    stream: masks.KeyStream, moduli: Sequence[int], shape: tuple[int, ...]
) -> np.ndarray:
    """Residues uniform on Z_(q_i) for every q_i (rejection sampling on 60-bit candidates), shape (*shape, #q, N).

    The moduli are SEAL's primes just below 2^60, so one candidate in 2^60 / q_i is rejected.
    """
    out = np.empty((*shape, len(moduli), RING_DEGREE), dtype=np.uint64)
    view = out.reshape(-1, len(moduli), RING_DEGREE)
    for index, q in enumerate(moduli):
        if q >= 1 << 60:
            raise ValueError(f"coefficient prime {q} has more than 60 bits")
        need = view.shape[0] * RING_DEGREE
        values = np.empty(0, dtype=np.uint64)
        while values.size < need:
            candidates = np.frombuffer(
                stream.read(8 * (need - values.size + 64)), dtype="<u8"
            ) & np.uint64(2**60 - 1)
            values = np.concatenate([values, candidates[candidates < np.uint64(q)]])
        view[:, index, :] = values[:need].reshape(-1, RING_DEGREE)
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
        mask_keys: per peer silo, the 32-byte pairwise mask key of step 1(b).
        processes: worker processes for step 2(b)'s products (:class:`~uldp.secure.config.ProtocolParameters`'
            ``processes``); they rebuild the session's contexts once from its public parameters and keep them.
        answered_round: the last round this silo answered (0: none), for a silo restored between messages
            (:attr:`answered_round`); it answers only later rounds.

    Raises:
        ValueError: counts of the wrong shape, or public keys that are not this session's (naming the silo).
    """

    def __init__(
        self,
        silo_id: int,
        counts: np.ndarray,
        layout: LatticeLayout,
        *,
        public_keys: Sequence[bytes],
        mask_keys: Mapping[int, bytes],
        processes: int = 1,
        answered_round: int = 0,
    ) -> None:
        sealapi = _seal()
        check_integer("processes", processes)
        check_integer("answered_round", answered_round, minimum=0)
        self.processes = processes
        row = np.asarray(counts, dtype=np.int64)
        if row.shape != (layout.n_users,):
            raise ValueError(
                f"silo {silo_id}: counts for {layout.n_users} users, got shape {row.shape}"
            )
        self.silo_id, self.layout, self._counts = silo_id, layout, row
        self._mask_keys = dict(mask_keys)
        self._contexts = _contexts(layout.plain_moduli, layout.coefficient_bits)
        self._encryptors = [
            sealapi.Encryptor(context.context, public)
            for context, public in zip(
                self._contexts, load_public_keys(layout, public_keys, silo_id=silo_id), strict=True
            )
        ]
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
        """Step 2(b): per plaintext prime and chunk of N parameters, the masked, flooded weighted sum.

        Args:
            round_index: t (each at most once, increasing).
            weights: the server's ``Enc(y_u)``, per plaintext prime |U| ciphertexts
                (:meth:`LatticeServer.encrypt_weights`).
            corrections: c_u = floor(rho_u 2^g / C_LCM) of this round's rescale blinds (the same in every silo).
            deltas: clipped deltas of this silo's users, (|U|, d) (rows of users without records are ignored).
            noise: this silo's noise, (d,).

        The products run in :attr:`processes` worker processes, the users split between them (each worker sums its
        users' products in NTT form, exactly in R_q, so the update decrypts to the same sum for any process count),
        while this process draws the re-randomisation, flood and masks. Users whose encoded rows are all zero add
        nothing, so their weights are not even loaded.

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
        if len(weights) != len(self._contexts) or any(len(w) != layout.n_users for w in weights):
            raise ValueError(
                f"silo {self.silo_id}: weights must hold |U| = {layout.n_users} ciphertexts per "
                f"plaintext prime ({len(self._contexts)} primes)"
            )
        if len(corrections) != layout.n_users:
            raise ValueError(
                f"silo {self.silo_id}: {len(corrections)} corrections for {layout.n_users} users"
            )
        f, g = layout.packed.resolution_bits, layout.packed.weight_bits
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
        contributing = [
            i for i in range(len(active)) if encoded[i].any()
        ]  # all-zero rows add nothing: not loaded
        users, encoded = [active[i] for i in contributing], encoded[contributing]
        parameters = deltas.shape[1]
        groups = _split(len(users), self.processes)
        tasks = [
            (
                layout.plain_moduli,
                layout.coefficient_bits,
                [[prime[users[i]] for i in group] for prime in weights],
                [int(corrections[users[i]]) for i in group],
                encoded[group],
            )
            for group in groups
        ]
        pool = (
            fast._pool(len(tasks)) if len(tasks) > 1 else None
        )  # users split over worker processes
        futures = [pool.submit(_weighted_products, *task) for task in tasks] if pool else []
        encoded_noise = np.rint(noise * scale).astype(object) * (1 << g)
        peers = sorted(self._mask_keys)
        streams = {
            peer: masks.KeyStream(
                self._mask_keys[peer], round_index=round_index, purpose=PURPOSE_LATTICE_UPDATE
            )
            for peer in peers
        }
        sealapi = _seal()
        blinded = []  # while the workers multiply: per prime and chunk, Enc(0) + noise + flood + masks
        for context, encryptor in zip(self._contexts, self._encryptors, strict=True):
            moduli = np.array(context.moduli, dtype=np.uint64)[None, :, None]
            per_chunk = []
            for chunk in range(layout.chunks_for(parameters)):
                span = slice(chunk * RING_DEGREE, min((chunk + 1) * RING_DEGREE, parameters))
                total = sealapi.Ciphertext()
                encryptor.encrypt_zero(total)  # re-randomisation: a fresh public-key Enc(0)
                context.evaluator.add_plain_inplace(
                    total,
                    context.vector(
                        np.array(
                            [int(v) % context.t for v in encoded_noise[span]], dtype=np.uint64
                        ).astype(np.int64)
                    ),
                )
                extra = np.zeros((2, len(context.moduli), RING_DEGREE), dtype=np.uint64)
                extra[0] = flood_residues(layout.flood_bits, context.moduli)
                for peer in peers:
                    mask = uniform_residues(streams[peer], context.moduli, (2,))
                    signed = mask if self.silo_id < peer else (moduli - mask) % moduli
                    extra = (extra + signed) % moduli
                context.evaluator.add_inplace(total, context.raw_ciphertext(extra))
                per_chunk.append(total)
            blinded.append(per_chunk)
        partials = (
            [future.result() for future in futures]
            if pool
            else [_weighted_products(*t) for t in tasks]
        )
        out = []
        for index, (context, per_chunk) in enumerate(zip(self._contexts, blinded, strict=True)):
            ciphertexts = []
            for chunk, total in enumerate(per_chunk):
                sums = [
                    context.load(data, ntt_form=True)
                    for p in partials
                    if (data := p[index][chunk]) is not None
                ]
                for partial in sums[1:]:
                    context.evaluator.add_inplace(sums[0], partial)
                if sums:
                    context.evaluator.transform_from_ntt_inplace(
                        sums[0]
                    )  # back from NTT form once per chunk
                    context.evaluator.add_inplace(total, sums[0])
                ciphertexts.append(to_bytes(total))
            out.append(tuple(ciphertexts))
        return tuple(out)
