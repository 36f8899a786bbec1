"""Packed Paillier for Protocol 1 (backend ``"packed-paillier"``): many parameters per plaintext, exact within P.

Why the weights are rescaled first. In Protocol 1 (step 2(b)) a silo's weight for user u is the integer
``n_su C_LCM / N_u``, and the decrypted aggregate of a parameter is C_LCM times its value: C_LCM = lcm(1..N_max) has
2878 bits for N_max = 2000, so one aggregate fills a 3072-bit plaintext and nothing can be packed beside it. The
packed backend therefore turns the exact weight into a fixed-point weight ``w_u ~ 2^g / N_u`` of g bits (about 50)
once per round and user, with the server's help and the same leakage (:func:`rescale_blind_bits`), and then packs
the aggregates of K parameters into one plaintext in slots of b bits (about 100):

1. step 2(b), first half (``Silo.share_weight_powers``): silo ``u mod |S|`` computes ``Enc(x_u)``,
   ``x_u = b_u C_LCM / N_u`` (b_u = 1 if u is sampled, else 0) as in Protocol 1, adds a blind
   ``rho_u`` uniform on ``[0, 2^(|C_LCM| + 128))`` drawn from the seed R (every silo can draw it, the server cannot)
   and sends ``Enc(x_u + rho_u)`` to the server;
2. the server (``Server.relay``) decrypts ``z_u = x_u + rho_u`` (statistically within 2^-128 of ``rho_u`` alone:
   it learns nothing about N_u) and returns a fresh ``Enc(floor(z_u 2^g / C_LCM))`` to every silo;
3. every silo removes ``floor(rho_u 2^g / C_LCM)`` homomorphically (:func:`unblinded_weight` proves
   ``|w_u - b_u 2^g / N_u| < 1``, and ``w_u = 0`` exactly for unsampled users), computes
   ``Enc(A_sj) = prod_u Enc(w_u)^(n_su E_uj)`` with the fixed-point deltas ``E_uj = rint(delta_uj 2^f)`` as
   before (:mod:`uldp.secure.fast`), packs K of them into one ciphertext,
   ``Enc(sum_k A_{s,jk} 2^(b k)) = prod_k Enc(A_{s,jk})^(2^(b k))`` (:func:`uldp.secure.fast.pack_ciphertexts`),
   and adds the packed noise ``2^g rint(z_sj 2^f)`` and one pairwise mask per *packed* plaintext (the masks cancel
   exactly in the product over silos, as in Theorem 4's proof, whatever the plaintext holds);
4. the server multiplies the silos' packed ciphertexts, decrypts a few, and :func:`unpack_integers` recovers each
   parameter's ``A_j = sum_s A_sj``; the aggregate is ``A_j / 2^(g + f)`` (:func:`decode`).

Exactness (the analogue of Theorem 4, proved in :func:`error_bound`): the decoded aggregate is within P of
``sum_s (sum_u b_u n_su / N_u delta_su + z_s)``. The slots never overflow (proved in :func:`slot_bound`), and the
packed integer stays below n / 2 in magnitude, so decryption and unpacking are exact.

>>> layout = PackedLayout(weight_bits=3, resolution_bits=2, slot_bits=8, slots=3)
>>> unpack_integers(pack_integers([5, -7, 100, -128], layout), 4, layout)
[5, -7, 100, -128]
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING

from uldp.common.checks import check_integer
from uldp.secure import encoding

if TYPE_CHECKING:
    from collections.abc import Sequence

#: Statistical hiding of the rescale blind: the server's view differs from one independent of N_u by <= 2^-128.
RESCALE_HIDING_BITS = 128


@dataclass(frozen=True)
class PackedLayout:
    """The fixed-point and slot sizes of one packed session (public, derived from :class:`ProtocolConfig`).

    Attributes:
        weight_bits: g, the weights are ``w_u ~ 2^g / N_u``.
        resolution_bits: f, the deltas and noise are encoded as ``rint(x 2^f)``.
        slot_bits: b, each parameter's aggregate lies in ``[-2^(b-1), 2^(b-1))``.
        slots: K, parameters per Paillier plaintext.
    """

    weight_bits: int
    resolution_bits: int
    slot_bits: int
    slots: int

    @property
    def scale_bits(self) -> int:
        """g + f: the aggregate integer is the real aggregate times 2^(g+f)."""
        return self.weight_bits + self.resolution_bits

    def ciphertexts_for(self, parameters: int) -> int:
        """Packed ciphertexts (per silo and round) for ``parameters`` model parameters: ceil(d / K)."""
        return -(-parameters // self.slots)


def resolution_bits(precision: float, *, n_users: int, n_silos: int) -> int:
    """f with ``(|U| + |S|) 2^-f / 2 <= P / 2``: the rounding of the deltas and noise takes half the budget P."""
    return encoding.resolution_bits_for(precision / 2, n_users + n_silos)


def weight_bits(
    precision: float, *, n_users: int, n_max: int, delta_bound: float, resolution: int
) -> int:
    """g with ``|U| N_max (C + 2^-(f+1)) 2^-g <= P / 2``: the fixed-point weights take the other half of P.

    See :func:`error_bound` for why this bounds the weights' share of the error.
    """
    per_unit = Fraction(n_users * n_max) * (
        Fraction(delta_bound) + Fraction(1, 2 ** (resolution + 1))
    )
    budget = Fraction(precision) / 2
    g = 0
    while per_unit / 2**g > budget:
        g += 1
    return g


def error_bound(
    layout: PackedLayout, *, n_users: int, n_silos: int, n_max: int, delta_bound: float
) -> Fraction:
    """Largest |decoded - plain| of one parameter, with the proof (the packed backend's Theorem 4).

    Write ``E_suj = rint(delta_suj 2^f)`` (|E - delta 2^f| <= 1/2, |E| <= C 2^f + 1/2) and ``w_u`` the unblinded
    weight with ``|w_u - b_u 2^g / N_u| < 1`` (:func:`unblinded_weight`). A silo's term decodes to
    ``n_su w_u E_suj / 2^(g+f) = (b_u n_su / N_u)(E_suj / 2^f) + n_su (w_u - b_u 2^g / N_u) E_suj / 2^(g+f)``.
    Summed over silos, the first parts differ from ``sum_s b_u n_su / N_u delta_suj`` by at most 2^-f / 2 per user
    (a convex combination of rounding errors), the second by at most ``N_u (C 2^f + 1/2) / 2^(g+f)
    <= N_max (C + 2^-(f+1)) 2^-g`` per user; each silo's noise ``2^g rint(z 2^f) / 2^(g+f)`` is off by 2^-f / 2.
    Hence the bound ``(|U| + |S|) 2^-f / 2 + |U| N_max (C + 2^-(f+1)) 2^-g``, at most P with
    :func:`resolution_bits` and :func:`weight_bits`.
    """
    f, g = layout.resolution_bits, layout.weight_bits
    rounding = Fraction(n_users + n_silos, 2 ** (f + 1))
    weights = Fraction(n_users * n_max) * (Fraction(delta_bound) + Fraction(1, 2 ** (f + 1))) / 2**g
    return rounding + weights


def slot_bound(
    *,
    weight: int,
    resolution: int,
    delta_bound: float,
    noise_bound: float,
    n_users: int,
    n_silos: int,
    n_max: int,
) -> int:
    """An integer B >= |A_j| for every parameter's aggregate ``A_j = sum_s (sum_u n_su w_u E_suj + 2^g Ez_sj)``.

    Proof: ``|E_suj| <= C 2^f + 1/2`` and ``|Ez_sj| <= Z 2^f + 1/2`` (Z the noise bound); ``0 <= w_u < 2^g / N_u + 1``
    and ``sum_s n_su = N_u <= N_max``, so user u contributes at most ``N_u w_u (C 2^f + 1/2) <
    (2^g + N_max)(C 2^f + 1/2)`` and silo s's noise ``2^g (Z 2^f + 1/2)``:
    ``|A_j| <= |U| (2^g + N_max)(C 2^f + 1/2) + |S| 2^g (Z 2^f + 1/2) = B``. Partial sums (fewer silos, as one silo
    alone or a subset) are bounded by the same B.
    """
    scale = Fraction(2) ** resolution
    users = n_users * (2**weight + n_max) * (Fraction(delta_bound) * scale + Fraction(1, 2))
    noise = n_silos * 2**weight * (Fraction(noise_bound) * scale + Fraction(1, 2))
    return math.ceil(users + noise)


def layout_for(
    *,
    key_bits: int,
    precision: float,
    n_users: int,
    n_silos: int,
    n_max: int,
    delta_bound: float,
    noise_bound: float,
) -> PackedLayout:
    """The packed session's sizes: f, g, the slot width b = bits(2B + 1) (so ``2B + 1 < 2^b``) and K = (k-1) // b.

    Why K slots of b bits fit a k-bit modulus n >= 2^(k-1): ``2B + 1 < 2^b`` gives ``B <= 2^(b-1) - 1``, so every
    slot lies in ``[-2^(b-1), 2^(b-1))`` and the packed integer ``P = sum_k A_k 2^(b k)`` has
    ``|P| <= (2^(b-1) - 1)(2^(bK) - 1) / (2^b - 1) < 2^(bK) / 2 <= 2^(k-2) < n / 2`` (bK <= k - 1): the signed
    integer is recovered from P mod n, and :func:`unpack_integers` recovers every A_k.

    Raises:
        ValueError: if not even one slot fits the key (naming the sizes), or the rescale blind does not fit
            (:func:`rescale_blind_bits`).
    """
    f = resolution_bits(precision, n_users=n_users, n_silos=n_silos)
    g = weight_bits(precision, n_users=n_users, n_max=n_max, delta_bound=delta_bound, resolution=f)
    bound = slot_bound(
        weight=g,
        resolution=f,
        delta_bound=delta_bound,
        noise_bound=noise_bound,
        n_users=n_users,
        n_silos=n_silos,
        n_max=n_max,
    )
    width = (2 * bound + 1).bit_length()
    slots = (key_bits - 1) // width
    if slots < 1:
        raise ValueError(
            f"a packed slot needs {width} bits (2^{g} weights, 2^{f} resolution, {n_users} users, {n_silos} silos) "
            f"but a {key_bits}-bit key has {key_bits - 1}; use a larger key or smaller clip / noise / precision"
        )
    rescale_blind_bits(key_bits=key_bits, n_max=n_max)
    return PackedLayout(weight_bits=g, resolution_bits=f, slot_bits=width, slots=slots)


def rescale_blind_bits(*, key_bits: int, n_max: int) -> int:
    """Bits h of the rescale blind rho_u, uniform on [0, 2^h), h = bits(C_LCM) + 128.

    Hiding: ``x_u = b_u C_LCM / N_u`` lies in [0, 2^bits(C_LCM)); the statistical distance between ``x_u + rho_u``
    and ``rho_u`` is at most ``x_u / 2^h <= 2^-128``, so the server's view of step 2 is within 2^-128 of one that
    does not depend on N_u (nor on b_u, which it chose). Correctness needs ``x_u + rho_u < n``: ``x_u + rho_u <
    2^(h+1) <= 2^(k-1) <= n``, i.e. ``h + 2 <= k``.

    Raises:
        ValueError: if the blind does not fit the key.
    """
    h = encoding.lcm_up_to(n_max).bit_length() + RESCALE_HIDING_BITS
    if h + 2 > key_bits:
        raise ValueError(
            f"the packed backend's rescale blind needs {h + 2} bits (C_LCM for N_max={n_max} has "
            f"{h - RESCALE_HIDING_BITS}) but the key has {key_bits}; use a larger key or a smaller n_max"
        )
    return h


def rescaled(value: int, *, c_lcm: int, weight: int) -> int:
    """The server's rescale of a decrypted ``z_u``: ``floor(z_u 2^g / C_LCM)``."""
    return (int(value) << weight) // c_lcm


def unblinded_weight(rescaled_value: int, blind: int, *, c_lcm: int, weight: int) -> int:
    """``w_u = floor((x + rho) 2^g / C) - floor(rho 2^g / C)`` (computed homomorphically by the silos; this is the
    plaintext oracle).

    With ``a = x 2^g / C`` and ``r = rho 2^g / C``: ``floor(a + r) - floor(r)`` is ``floor(a)`` or ``floor(a) + 1``,
    hence in ``(a - 1, a + 1)``; for ``x = 0`` it is exactly 0. With ``x = b_u C_LCM / N_u``, ``a = b_u 2^g / N_u``.
    """
    return rescaled_value - rescaled(blind, c_lcm=c_lcm, weight=weight)


def pack_integers(values: Sequence[int], layout: PackedLayout) -> list[int]:
    """Signed integers, K per packed integer: ``sum_k values[iK + k] 2^(b k)`` (the plaintext side of packing).

    Raises:
        ValueError: if a value lies outside ``[-2^(b-1), 2^(b-1))``.
    """
    width, half = layout.slot_bits, 1 << (layout.slot_bits - 1)
    out = []
    for start in range(0, len(values), layout.slots):
        packed = 0
        for value in reversed(values[start : start + layout.slots]):
            if not -half <= value < half:
                raise ValueError(f"value {value} does not fit a signed slot of {width} bits")
            packed = (packed << width) + int(value)
        out.append(packed)
    return out


def unpack_integers(packed: Sequence[int], count: int, layout: PackedLayout) -> list[int]:
    """Inverse of :func:`pack_integers`: the first ``count`` slots, least significant first.

    Balanced digits: if ``P = sum_k A_k 2^(bk)`` with every ``A_k`` in ``[-2^(b-1), 2^(b-1))``, then
    ``A_0 = ((P + 2^(b-1)) mod 2^b) - 2^(b-1)`` (the unique residue of P mod 2^b in that range) and
    ``(P - A_0) / 2^b`` is the packing of the rest.

    Raises:
        ValueError: if ``count`` needs more packed integers than given.
    """
    check_integer("count", count, minimum=0)
    if layout.ciphertexts_for(count) > len(packed):
        raise ValueError(
            f"{count} values need {layout.ciphertexts_for(count)} packed integers, got {len(packed)}"
        )
    width, half, mask = layout.slot_bits, 1 << (layout.slot_bits - 1), (1 << layout.slot_bits) - 1
    out: list[int] = []
    for value in packed:
        rest = int(value)
        for _ in range(min(layout.slots, count - len(out))):
            digit = ((rest + half) & mask) - half
            out.append(digit)
            rest = (rest - digit) >> width
    return out


def decode(value: int, layout: PackedLayout) -> float:
    """The real aggregate ``A / 2^(g + f)`` of one unpacked slot, rounded once to the nearest float."""
    return float(Fraction(int(value), 1 << layout.scale_bits))
