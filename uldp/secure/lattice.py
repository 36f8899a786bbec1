"""A lattice (Ring-LWE, BFV) backend for the round of Protocol 1: one user's weight times N parameters per operation.

What it computes. The round of Protocol 1 (steps 2(a)-(c)) with the packed backend's fixed-point weights
(:mod:`uldp.secure.packing`): the server decodes ``A_j / 2^(g+f)`` with
``A_j = sum_s (sum_u n_su w_u E_suj + 2^g Ez_sj)``, ``w_u`` within 1 of ``b_u 2^g / N_u`` (0 when u is not
sampled), ``E = rint(x 2^f)``; it is within P of ``sum_s (sum_u b_u n_su / N_u delta_suj + z_sj)``
(:func:`uldp.secure.packing.error_bound`, unchanged).

Parties and what they learn (as Protocol 1, Theorem 5, with the packed backend's rescale):

- step 2(a)-(b), first half, as the packed backend (Paillier, every round): silo ``u mod |S|`` sends
  ``Enc_Paillier(b_u C_LCM / N_u + rho_u)``; the server decrypts ``z_u`` (within 2^-128 of a value independent of
  N_u and b_u, :func:`uldp.secure.packing.rescale_blind_bits`) and computes ``y_u = floor(z_u 2^g / C_LCM)``; every
  silo knows ``c_u = floor(rho_u 2^g / C_LCM)`` and ``w_u = y_u - c_u`` (:func:`uldp.secure.packing.unblinded_weight`).
- the server then encrypts, per plaintext prime t_i, every user's ``y_u mod t_i`` as one coefficient of one polynomial
  (secret-key BFV encryption, **seeded**: the uniform half of the ciphertext is sent as SEAL's 64-byte PRNG seed;
  ``ceil(|U| / N)`` ciphertexts, :mod:`uldp.secure.lattice_expand`) and sends the *same* ones to every silo
  (:meth:`LatticeServer.encrypt_weights`; only when the sample
  changed: :meth:`uldp.secure.backends.lattice.LatticeBackend.encrypt_weights`). Broadcasting them is
  safe: they are IND-CPA encryptions under the server's key of values the server may know, so any set of silos
  learns nothing from them (not even which users were sampled), and the server learns nothing from having sent
  them: what it later sees is only the masked, flooded sum (points 2 and 3 below).
- step 2(b), silo s: subtracts its corrections c_u (a plaintext) and expands the result with the server's Galois keys
  into ``W_u = Enc(w_u)``, one constant ciphertext per user (:mod:`uldp.secure.lattice_expand`, with why the
  argument below still holds), then per chunk of N parameters
  ``sum_u W_u * (n_su E_su)`` (a plaintext-ciphertext product with the chunk coefficient-encoded: one user's weight
  times N parameters, coefficient j holding parameter j), plus the
  encoded noise ``2^g Ez_s``; then it **re-randomises** (adds a fresh public-key ``Enc(0)``), **floods** (adds a
  uniform integer polynomial in ``[-F, F]`` to the first component), **switches** the ciphertext down to a power of
  two, keeping only c0's used coefficients, and **masks** it (adds, for every peer, a pairwise mask uniform on the
  switched ciphertext's group, with opposite signs in the two silos, from the pairwise mask keys of step 1(b)):
  :mod:`uldp.secure.lattice_switch`, with the proof that the switch keeps the sum exact and costs no security.
- step 2(c): the server adds the |S| updates (masks cancel exactly), lifts and decrypts the sum, reads every used
  coefficient modulo every t_i and recovers ``A_j`` by the Chinese remainder theorem (``prod t_i > 2B + 1``, B the
  packed backend's :func:`~uldp.secure.packing.slot_bound`).

Security argument (semi-honest, as Theorem 5):

1. *IND-CPA, 128 bits.* Ring dimension N = 16384 and a coefficient modulus of at most
   :data:`MAX_COEFFICIENT_PRIMES` 60-bit primes (:attr:`LatticeLayout.coefficient_bits`, chosen as small as the
   noise allows) is at most the HE standard's bound for 128-bit classical security with ternary secrets and error
   sigma 3.2 (Albrecht et al., Homomorphic Encryption Standard, 2018, Table 1: 438 bits at N = 16384;
   :data:`HE_STANDARD_MAX_BITS`, which SEAL enforces as ``sec_level_type.tc128``). A silo's view of step 2(a) is
   ciphertexts under the server's key: indistinguishable from encryptions of 0 (the seed of a seeded ciphertext is
   the public randomness a of an RLWE sample, as in SEAL's own serialisation). The Galois keys it also receives are
   Ring-LWE samples under the same key (with the circular-security assumption of every BFV scheme with rotations;
   :mod:`uldp.secure.lattice_expand`).
2. *One silo's update hides its inputs from the key holder.* The pairwise masks are uniform on the switched
   update's group and cancel in the sum (Theorem 5's argument with ``Z_n`` replaced by that group): any |S| - 1
   silos' updates are uniform and independent, the last is fixed by the sum: the server's view is the *sum* alone.
3. *Circuit privacy of the sum (decryption leaks only the sum).* The sum's c1 is ``sum_u P_u c1(W_u)`` plus the
   silos' ``p1 r_s + e_s`` of their fresh ``Enc(0)``: pseudorandom under Ring-LWE with the silos' secrets r_s (the
   server's key s is independent of them), whatever the plaintexts P_u. With s, the server computes
   ``c0 + c1 s = Delta A + e_circuit + sum_s (F_s + e_fresh,s)``: e_circuit depends on the silos' inputs, but each
   silo's flood F_s is uniform on ``[-F, F]`` with ``F >= 2^lambda N n_ct ||e_circuit + e_fresh||_inf``
   (:attr:`LatticeLayout.flood_bits`), so by the smudging lemma the decrypted noise is within
   ``2^-lambda`` (lambda = :data:`STATISTICAL_BITS`) of one independent of the inputs: decryption reveals ``A_j``
   (the sum Protocol 1 reveals) and nothing else. This is the flooding remedy to the decryption-noise leakage that
   Li and Micciancio (EUROCRYPT 2021) show for CKKS; BFV decryption rounds the noise away, but the key holder can
   still compute it, hence the same flood. One honest silo's flood suffices.
4. Correctness: every noise term is bounded (:func:`noise_bits`: SEAL's errors are clipped at 6 sigma, ternary
   secrets), ``|S| (F + noise) <= q / (8 t)`` and the switch's budget
   (:func:`uldp.secure.lattice_switch.check_budget`) are checked when the layout is made; the masks cancel exactly;
   hence the decrypted ``A_j mod t_i`` are exact and the result is within P (packed Theorem 4).

Why BFV and not CKKS: CKKS is approximate, so its result would be within P only with high probability and its
masks, added to real slots, would hide by smudging only; BFV is exact in ``Z_t``, the masks live in ``R_q`` where
they cancel exactly, and the paper's precision P carries over with the packed backend's proofs. The price is that
SEAL's plaintext modulus has at most 60 bits, so a slot of b > 59 bits is split over several plaintext primes (CRT),
each as small as the slot allows (:func:`plain_moduli_for`).

Assumption that differs from Paillier: Ring-LWE (a lattice problem, believed post-quantum) instead of decisional
composite residuosity; the statistical flooding bound instead of perfect re-randomisation. The per-round rescale
still uses Paillier (as the packed backend).

The silo's side (the check of the public keys, :class:`~uldp.secure.lattice_silo.LatticeSilo`) is
:mod:`uldp.secure.lattice_silo`.

Wire format: the weights in SEAL's own serialisation, seeded (half the bytes; :mod:`uldp.secure.lattice_wire`); the
updates switched and bit-packed (:mod:`uldp.secure.lattice_switch`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from uldp.secure import lattice_expand, lattice_switch, packing
from uldp.secure.lattice_wire import (
    _load,
    _raw_ciphertext_bytes,
    _raw_plaintext_bytes,
    to_bytes,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

#: Ring dimension N (N coefficients, one parameter each).
RING_DEGREE = 16384
#: Bits of every RNS prime of q (SEAL's last prime is the key-switching prime, unused here but counted by the
#: HE standard).
COEFFICIENT_PRIME_BITS = 60
#: At most 7 primes of 60 bits: 420 <= 438 bits, the HE standard's 128-bit bound at N = 16384.
MAX_COEFFICIENT_PRIMES = 7
#: HE standard (2018), Table 1: largest log2 q for 128-bit classical security, ternary secret, sigma 3.2.
HE_STANDARD_MAX_BITS = {4096: 109, 8192: 218, 16384: 438, 32768: 881}
#: Most bits of a plaintext prime t_i (below the 60-bit coefficient primes: SEAL needs them coprime).
PLAIN_PRIME_BITS = 59
#: lambda of the smudging lemma: the decrypted noise is within 2^-lambda of one independent of the inputs.
STATISTICAL_BITS = 40
#: log2 of the most ciphertexts one silo's round may hold (2^20 chunks: d <= 2^34 parameters), for the smudging.
CIPHERTEXT_BITS = 20
#: SEAL's error bound: a clipped normal of sigma 3.2, at most 6 sigma.
ERROR_BOUND = 20
#: ChaCha20 purpose of the ciphertext masks (beside :mod:`uldp.secure.masks`' purposes).
PURPOSE_LATTICE_UPDATE = 5


def coefficient_modulus_bits(bits: Sequence[int]) -> int:
    """Total bits of a coefficient modulus (with the special prime), as the HE standard counts them."""
    return sum(bits)


def _seal() -> Any:
    """TenSEAL's SEAL bindings (the ``lattice`` extra), with an install hint when missing."""
    try:
        import tenseal.sealapi as sealapi
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise ImportError(
            "the lattice backend needs tenseal: pip install 'uldp[lattice]'"
        ) from error
    return sealapi


@dataclass(frozen=True)
class LatticeLayout:
    """The public sizes of one lattice session (derived by :func:`layout_for`).

    Attributes:
        packed: f, g and the slot bound's width of the packed backend (the same fixed-point encoding).
        slot_bound: B, every aggregate lies in [-B, B].
        plain_moduli: the plaintext primes t_i (prod t_i > 2B + 1, :func:`plain_moduli_for`).
        coefficient_bits: the bit sizes of q's RNS primes (the last is SEAL's special prime).
        flood_bits: log2 F of each silo's flood.
        switch_bits: (b0, b1), the bits a silo's update is switched to (:mod:`uldp.secure.lattice_switch`).
        n_users, n_silos, n_max: the federation's shape and N_max.
        clip, noise_bound: C and the noise bound the slot bound assumes.
    """

    packed: packing.PackedLayout
    slot_bound: int
    plain_moduli: tuple[int, ...]
    coefficient_bits: tuple[int, ...]
    flood_bits: int
    switch_bits: tuple[int, int]
    n_users: int
    n_silos: int
    n_max: int
    clip: float
    noise_bound: float

    @property
    def slots(self) -> int:
        """Parameters per ciphertext: N."""
        return RING_DEGREE

    def chunks_for(self, parameters: int) -> int:
        """Ciphertexts per plaintext prime for ``parameters`` parameters: ceil(d / N)."""
        return -(-parameters // RING_DEGREE)


def noise_bits(*, n_users: int, weight_bits: int, plain_bits: int = PLAIN_PRIME_BITS) -> int:
    """A bound (log2) on one silo's circuit noise before the flood, with the proof.

    BFV's invariant: ``c0 + c1 s = Delta m + v (mod q)``, ``Delta = floor(q / t)``, ``Delta t = q - r_t(q)``.
    ``W_u``, the expanded weight (:mod:`uldp.secure.lattice_expand`), has ``||v|| <= V``
    (:func:`uldp.secure.lattice_expand.expansion_noise`, with k the most data primes) and plaintext ``m_u = w_u`` with
    ``w_u mod t``, ``0 <= w_u < 2^g + 1``. The product with a plaintext X (coefficients in [0, t)) is
    ``Delta w_u X + v X``: ``(w_u mod t) X = (w_u X mod t) + t k`` with ``||k|| <= w_u`` (a constant times each
    coefficient), and ``Delta t k = -r_t(q) k (mod q)``, so the new noise is ``v X - r_t(q) k`` with norm
    ``<= N t V + t (2^g + 1)``. Summed over |U| users, plus the encoded noise's ``add_plain`` (``<= t``) and the
    fresh public-key Enc(0) (``<= 2 N E + E``): at most ``|U| (N t V + t 2^(g+1)) + t + 3 N E``.
    """
    degree_bits = int(math.log2(RING_DEGREE))
    weight_noise = lattice_expand.noise_bits_of(
        lattice_expand.levels(n_users), error_bound=ERROR_BOUND, data_primes=MAX_COEFFICIENT_PRIMES
    )
    per_user = max(degree_bits + weight_noise, weight_bits + 1) + plain_bits + 1
    return per_user + math.ceil(math.log2(max(n_users, 1))) + 1


def plain_moduli_for(bound: int, count: int) -> tuple[int, ...]:
    """The plaintext moduli: ``count`` consecutive primes from ``ceil((2B + 2)^(1/count))``, so their product exceeds
    2B + 1 (the CRT recovers every aggregate in [-B, B]) with the fewest bits each (fewer bits per switched coefficient,
    :func:`uldp.secure.lattice_switch.switch_bits`). The message is coefficient-encoded, so they need not be batching
    primes; they are primes of at most :data:`PLAIN_PRIME_BITS` bits, hence coprime to q's 60-bit primes.

    >>> plain_moduli_for(10**6, 2)
    (1423, 1427)
    """
    import gmpy2

    root, exact = gmpy2.iroot(gmpy2.mpz(2 * bound + 2), count)
    moduli, candidate = [], int(root) - (1 if exact else 0)
    for _ in range(count):
        candidate = int(gmpy2.next_prime(candidate))
        moduli.append(candidate)
    if moduli[-1] >= 1 << PLAIN_PRIME_BITS:
        raise ValueError(f"plaintext moduli of {moduli[-1].bit_length()} bits: use more of them")
    return tuple(moduli)


def layout_for(
    *,
    precision: float,
    n_users: int,
    n_silos: int,
    n_max: int,
    delta_bound: float,
    noise_bound: float,
) -> LatticeLayout:
    """The lattice session's sizes, checked for exactness (within P) and correct decryption.

    The coefficient modulus is the fewest 60-bit primes (plus SEAL's special prime) whose product q leaves room for
    |S| flooded noises below ``Delta / 2 = q / (2t)``: fewer primes make every operation and every byte cheaper.

    Args:
        precision: P.
        n_users, n_silos, n_max: |U|, |S| and N_max.
        delta_bound, noise_bound: C and the noise bound (as the packed backend's).

    Raises:
        ValueError: if the flooded noise of |S| silos does not fit even :data:`MAX_COEFFICIENT_PRIMES` primes
            (naming the sizes).
    """
    sealapi = _seal()
    f = packing.resolution_bits(precision, n_users=n_users, n_silos=n_silos)
    g = packing.weight_bits(
        precision, n_users=n_users, n_max=n_max, delta_bound=delta_bound, resolution=f
    )
    bound = packing.slot_bound(
        weight=g,
        resolution=f,
        delta_bound=delta_bound,
        noise_bound=noise_bound,
        n_users=n_users,
        n_silos=n_silos,
        n_max=n_max,
    )
    primes = 1
    while (1 << ((PLAIN_PRIME_BITS - 1) * primes)) <= 2 * bound + 1:
        primes += 1
    moduli = plain_moduli_for(bound, primes)
    plain_bits = max(moduli).bit_length()
    circuit = noise_bits(n_users=n_users, weight_bits=g, plain_bits=plain_bits)
    flood = circuit + STATISTICAL_BITS + int(math.log2(RING_DEGREE)) + CIPHERTEXT_BITS
    # |S| (F + noise) < 2^(flood + 1 + log|S|) must stay below q / (8t) (a quarter of Delta / 2: the switch to a
    # power of two takes the rest, :mod:`uldp.secure.lattice_switch`), and SEAL's 60-bit primes are above 2^59
    needed = flood + 1 + math.ceil(math.log2(n_silos)) + plain_bits + 3
    data_primes = max(-(-needed // (COEFFICIENT_PRIME_BITS - 1)), lattice_switch.LEVEL_PRIMES)
    if data_primes + 1 > MAX_COEFFICIENT_PRIMES:
        raise ValueError(
            f"the lattice backend needs a {needed}-bit q for {n_users} users and {n_silos} silos "
            f"(flood 2^{flood}) but 128-bit security allows {MAX_COEFFICIENT_PRIMES - 1} data primes "
            f"of {COEFFICIENT_PRIME_BITS} bits; use fewer users per session or a coarser precision"
        )
    coefficient_bits = (COEFFICIENT_PRIME_BITS,) * (data_primes + 1)
    primes_q = [m.value() for m in sealapi.CoeffModulus.Create(RING_DEGREE, list(coefficient_bits))]
    lattice_switch.check_budget(
        coefficient_primes=primes_q[:-1],
        plain_moduli=moduli,
        n_silos=n_silos,
        flood_bits=flood,
    )
    layout = packing.PackedLayout(
        weight_bits=g, resolution_bits=f, slot_bits=(2 * bound + 1).bit_length(), slots=1
    )
    return LatticeLayout(
        packed=layout,
        slot_bound=bound,
        plain_moduli=moduli,
        coefficient_bits=coefficient_bits,
        flood_bits=flood,
        switch_bits=lattice_switch.switch_bits(moduli, n_silos),
        n_users=n_users,
        n_silos=n_silos,
        n_max=n_max,
        clip=delta_bound,
        noise_bound=noise_bound,
    )


class _Context:
    """One BFV context (plaintext prime t) with the objects a party uses."""

    def __init__(self, plain_modulus: int, coefficient_bits: Sequence[int]) -> None:
        sealapi = _seal()
        params = sealapi.EncryptionParameters(sealapi.SCHEME_TYPE.BFV)
        params.set_poly_modulus_degree(RING_DEGREE)
        params.set_coeff_modulus(sealapi.CoeffModulus.Create(RING_DEGREE, list(coefficient_bits)))
        params.set_plain_modulus(plain_modulus)
        # tc128 makes SEAL itself refuse parameters beyond the HE standard's 128-bit bound
        self.context = sealapi.SEALContext(params, True, sealapi.SEC_LEVEL_TYPE.TC128)
        if not self.context.parameters_set():
            raise ValueError(
                f"SEAL refuses the lattice parameters: {self.context.parameters_error_message()}"
            )
        data = self.context.first_context_data()
        self.moduli = [m.value() for m in data.parms().coeff_modulus()]
        self.parms_id = self.context.first_parms_id()
        self.t = plain_modulus
        self.evaluator = sealapi.Evaluator(self.context)
        level = data
        while len(level.parms().coeff_modulus()) > lattice_switch.LEVEL_PRIMES:
            level = level.next_context_data()
        self.level_parms_id = level.parms_id()
        self.level_moduli = [m.value() for m in level.parms().coeff_modulus()]

    def constant(self, value: int) -> Any:
        """The constant plaintext polynomial ``value mod t`` (no encoding needed)."""
        return _seal().Plaintext(format(int(value) % self.t, "X"))

    def vector(self, values: np.ndarray) -> Any:
        """The coefficient-encoded plaintext ``sum_j (values_j mod t) x^j`` (at most N values; zeros after).

        Times a constant ciphertext ``Enc(w)`` it is ``Enc(sum_j w values_j x^j)``: coefficient j holds parameter j
        alone, so the server needs only the used coefficients of c0 (:mod:`uldp.secure.lattice_switch`)."""
        row = np.zeros(RING_DEGREE, dtype=np.uint64)
        row[: len(values)] = np.mod(np.asarray(values, dtype=np.int64), self.t)
        plain = _seal().Plaintext()
        _load(plain, self.context, _raw_plaintext_bytes(row))
        return plain

    def monomial(self, exponent: int) -> Any:
        """The plaintext ``X^exponent`` (SEAL multiplies by a monomial as a shift, without noise growth)."""
        row = np.zeros(RING_DEGREE, dtype=np.int64)
        row[exponent] = 1
        return self.vector(row)

    def raw_ciphertext(self, polys: np.ndarray, *, ntt_form: bool = False) -> Any:
        """The ciphertext whose components are ``polys`` [2, #primes, N] (residues), in coefficient form or
        (``ntt_form``) in NTT form."""
        return self.load(
            _raw_ciphertext_bytes(polys, self.parms_id, ntt_form=ntt_form), ntt_form=ntt_form
        )

    def load(self, data: bytes, *, ntt_form: bool = False, level: bool = False) -> Any:
        """A ciphertext of this context from its SEAL bytes (seeded or not).

        Args:
            data: SEAL's bytes.
            ntt_form: whether the ciphertext must be in NTT form or not (every message).
            level: whether it is at the switched level Q2 (a lifted sum) or at the first level (the weights).

        Raises:
            ValueError: bytes that are no valid two-component ciphertext of this context in the expected form.
        """
        ciphertext = _seal().Ciphertext()
        try:
            _load(ciphertext, self.context, data)
        except (RuntimeError, ValueError) as error:
            raise ValueError(f"not a ciphertext of this lattice session: {error}") from error
        if (
            ciphertext.size() != 2
            or ciphertext.is_ntt_form() != ntt_form
            or list(ciphertext.parms_id()) != list(self.level_parms_id if level else self.parms_id)
        ):
            raise ValueError("not a fresh two-component ciphertext of this lattice session")
        return ciphertext


_CONTEXTS: dict[tuple[tuple[int, ...], tuple[int, ...]], list[_Context]] = {}


def _contexts(plain_moduli: Sequence[int], coefficient_bits: Sequence[int]) -> list[_Context]:
    """The session's contexts (one per plaintext prime), built once per process: parameters are public, so worker
    processes rebuild them from the layout alone and keep them for every later round of the session."""
    key = (tuple(plain_moduli), tuple(coefficient_bits))
    if key not in _CONTEXTS:
        _CONTEXTS[key] = [_Context(t, coefficient_bits) for t in plain_moduli]
    return _CONTEXTS[key]


def _split(count: int, processes: int) -> list[np.ndarray]:
    """Indices 0..count-1 in at most ``processes`` non-empty contiguous groups."""
    return [
        group
        for group in np.array_split(np.arange(count), max(1, min(processes, count)))
        if group.size
    ]


class LatticeServer:
    """The key holder: BFV secret keys (one per plaintext prime), step 2(a)'s weights and step 2(c)'s decryption.

    Args:
        layout: the session's :class:`LatticeLayout`.
    """

    def __init__(self, layout: LatticeLayout) -> None:
        sealapi = _seal()
        self.layout = layout
        self._contexts = _contexts(layout.plain_moduli, layout.coefficient_bits)
        elements = lattice_expand.galois_elements(lattice_expand.levels(layout.n_users))
        self._decryptors, self._encryptors, self._public, self._galois = [], [], [], []
        for context in self._contexts:
            generator = sealapi.KeyGenerator(context.context)
            public = sealapi.PublicKey()
            generator.create_public_key(public)
            self._decryptors.append(sealapi.Decryptor(context.context, generator.secret_key()))
            self._encryptors.append(sealapi.Encryptor(context.context, generator.secret_key()))
            self._public.append(to_bytes(public))
            # seeded (half the bytes); none for a single user, whose weight needs no expansion
            self._galois.append(
                to_bytes(generator.create_galois_keys(elements)) if elements else b""
            )

    def public_keys(self) -> tuple[bytes, ...]:
        """The public keys, one per plaintext prime (silos re-randomise with them)."""
        return tuple(self._public)

    def galois_keys(self) -> tuple[bytes, ...]:
        """The Galois keys the silos expand the packed weights with (:mod:`uldp.secure.lattice_expand`), one set per
        plaintext prime in SEAL's seeded format (empty bytes for a single user)."""
        return tuple(self._galois)

    def encrypt_weights(self, rescaled: Sequence[int]) -> tuple[tuple[bytes, ...], ...]:
        """Step 2(a)-(b), the rescale's answer: per plaintext prime, ``ceil(|U| / N)`` fresh seeded encryptions of
        every user's ``y_u`` packed as coefficients (:func:`uldp.secure.lattice_expand.packed_rows`).

        The same ciphertexts go to every silo (see the module docstring: broadcasting them is safe). SEAL draws each
        encryption's randomness from a PRNG it seeds from the OS (``std::random_device``).

        Args:
            rescaled: y_u = floor(z_u 2^g / C_LCM) of this round's rescale (:func:`uldp.secure.packing.rescaled`),
                which holds b_u (``w_u = y_u - c_u = 0`` for users not sampled).

        Raises:
            ValueError: on a wrong number of users or a negative y_u.
        """
        if len(rescaled) != self.layout.n_users or any(int(y) < 0 for y in rescaled):
            raise ValueError(
                f"rescaled weights must be {self.layout.n_users} non-negative integers, got "
                f"{len(rescaled)}"
            )
        values = [int(y) for y in rescaled]
        return tuple(
            tuple(
                to_bytes(encryptor.encrypt_symmetric(context.vector(row.astype(np.int64))))
                for row in lattice_expand.packed_rows(values, context.t)
            )
            for context, encryptor in zip(self._contexts, self._encryptors, strict=True)
        )

    def check_update(
        self, update: Sequence[Sequence[bytes]], parameters: int
    ) -> list[list[tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]]]:
        """One silo's update parsed: per plaintext prime, ``ceil(d / N)`` switched ciphertexts of exactly
        :func:`uldp.secure.lattice_switch.wire_bytes` bytes, unpacked to (c0, c1) values below 2^b0 and 2^b1.

        Raises:
            ValueError: a wrong count of ciphertexts or a ciphertext of the wrong length.
        """
        chunks, bits = self.layout.chunks_for(parameters), self.layout.switch_bits
        if len(update) != len(self._contexts) or any(len(p) != chunks for p in update):
            raise ValueError(
                f"an update must hold {chunks} ciphertexts per plaintext prime "
                f"({len(self._contexts)} primes) for {parameters} parameters"
            )
        parsed = []
        for prime in update:
            per_chunk = []
            for chunk, data in enumerate(prime):
                used = _used(parameters, chunk)
                split = -(-used * bits[0] // 8)
                if len(data) != lattice_switch.wire_bytes(used, bits):
                    raise ValueError(
                        f"not a ciphertext of this lattice session: {len(data)} bytes for chunk {chunk}, "
                        f"expected {lattice_switch.wire_bytes(used, bits)}"
                    )
                per_chunk.append(
                    (
                        lattice_switch.unpack(data[:split], used, bits[0]),
                        lattice_switch.unpack(data[split:], RING_DEGREE, bits[1]),
                    )
                )
            parsed.append(per_chunk)
        return parsed

    def finish(self, updates: Sequence[Sequence[Sequence[bytes]]], parameters: int) -> np.ndarray:
        """Step 2(c): add every silo's switched update in Z_(2^b) (masks cancel), lift the sum to Q2, decrypt it at
        that level, CRT-combine and decode (:mod:`uldp.secure.lattice_switch` for why this is exact).

        Args:
            updates: per silo, per plaintext prime, ``ceil(d / N)`` switched ciphertexts.
            parameters: d.

        Returns:
            float64 [d], within P of the plain aggregate.

        Raises:
            ValueError: a silo missing, a wrong count of ciphertexts or bytes that are no ciphertext of the session
                (the silo named); nothing is decrypted then.
        """
        layout = self.layout
        if len(updates) != layout.n_silos:
            raise ValueError(
                f"aborted: {len(updates)} updates for {layout.n_silos} silos; nothing is decrypted"
            )
        parsed = []
        for silo, sent in enumerate(updates):
            try:
                parsed.append(self.check_update(sent, parameters))
            except ValueError as error:
                raise ValueError(f"update of silo {silo}: {error}") from error
        sealapi = _seal()
        b0, b1 = layout.switch_bits
        residues = []
        for index, (context, decryptor) in enumerate(
            zip(self._contexts, self._decryptors, strict=True)
        ):
            per_chunk = []
            for chunk in range(layout.chunks_for(parameters)):
                c0, c1 = parsed[0][index][chunk]
                for update in parsed[1:]:
                    c0 = lattice_switch.add(c0, update[index][chunk][0], b0)
                    c1 = lattice_switch.add(c1, update[index][chunk][1], b1)
                polys = np.zeros((2, len(context.level_moduli), RING_DEGREE), dtype=np.uint64)
                used = _used(parameters, chunk)
                polys[0][:, :used] = lattice_switch.lift(c0, b0, context.level_moduli)
                polys[1] = lattice_switch.lift(c1, b1, context.level_moduli)
                total = context.load(
                    _raw_ciphertext_bytes(polys, context.level_parms_id), level=True
                )
                plain = sealapi.Plaintext()
                decryptor.decrypt(total, plain)
                read = plain.data
                count = min(used, plain.coeff_count())
                per_chunk.append(
                    np.array(
                        [read(j) for j in range(count)] + [0] * (used - count), dtype=np.uint64
                    )
                )
            residues.append(np.concatenate(per_chunk)[:parameters])
        return decode_crt(residues, layout)


def _used(parameters: int, chunk: int) -> int:
    """Parameters (used coefficients) of chunk ``chunk``."""
    return min(RING_DEGREE, parameters - chunk * RING_DEGREE)


def decode_crt(residues: Sequence[np.ndarray], layout: LatticeLayout) -> np.ndarray:
    """The real aggregates from their residues modulo every t_i: CRT, the centred representative, ``/ 2^(g+f)``."""
    modulus = math.prod(layout.plain_moduli)
    combined = np.zeros(len(residues[0]), dtype=object)
    for t, values in zip(layout.plain_moduli, residues, strict=True):
        cofactor = modulus // t
        combined = (combined + values.astype(object) * (cofactor * pow(cofactor, -1, t))) % modulus
    centred = np.where(combined > modulus // 2, combined - modulus, combined)
    return np.array([packing.decode(int(a), layout.packed) for a in centred], dtype=np.float64)
