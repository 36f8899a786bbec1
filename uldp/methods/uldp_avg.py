"""ULDP-AVG and ULDP-SGD (Algorithm 3, Theorem 3), enhanced weights (Eq. (3)) and user-level sampling (Algorithm 4).

Silo side (Algorithm 3, lines 8-19 / 20-26): every user ``u`` of silo ``s`` trains its own copy of the global model
on its records in ``s`` (ULDP-AVG: ``Q`` epochs; ULDP-SGD: one full-batch gradient, sent as the descent direction
``-g``), clips the result to norm ``C`` and weights it by ``w_su``; the silo adds ``N(0, sigma^2 C^2 / |S|)``.
Server side: ``x_{t+1} = x_t + eta_g / (q |U| |S|) * sum_s Delta_s``.

Weights: uniform ``w_su = 1 / |S|`` (ULDP-AVG, ULDP-SGD) or enhanced ``w_su = n_su / N_u`` (``-w``); both sum to 1
over silos for every user, so one user moves the sum by at most ``C`` (Theorem 3's sensitivity). With Poisson
user sampling at rate ``q`` (Algorithm 4, with the erratum of settings.md) the weights of the users NOT sampled are
set to 0 for the round.

The weighting and summation is one call with the signature of the secure aggregation hook
(:data:`uldp.methods.base.AggregateFn`): :func:`aggregate` computes it in the clear, ``uldp.secure`` by Protocol 1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import numpy as np
import torch
from torch import Tensor

from uldp.accounting import epsilon_for_method
from uldp.methods.base import (
    SAMPLING_STREAM,
    TRAIN_STREAM,
    EveryRecordSiloNoise,
    FitDefaults,
    global_torch_seed,
    needed,
    seed_stream,
)
from uldp.methods.fedavg import round_keys, silo_training
from uldp.policy import collusion_scale
from uldp.training.per_user import ChunkConsumer, clip_rows, row_writer, user_gradient_chunks

if TYPE_CHECKING:
    from uldp.method_names import MethodSpec
    from uldp.methods.base import AggregateFn, Federation, Hyperparameters, Method, SumFn


def uniform_weights(counts: np.ndarray, sampled: np.ndarray) -> np.ndarray:
    """``w_su = 1 / |S|`` for sampled users, 0 otherwise (ULDP-AVG / ULDP-SGD).

    Example:
        >>> uniform_weights(np.array([[1, 0], [3, 2]]), np.array([True, False])).tolist()
        [[0.5, 0.0], [0.5, 0.0]]
    """
    n_silos = counts.shape[0]
    return np.repeat(np.asarray(sampled, dtype=float)[None, :] / n_silos, n_silos, axis=0)


def enhanced_weights(counts: np.ndarray, sampled: np.ndarray) -> np.ndarray:
    """``w_su = n_su / N_u`` for sampled users with records, 0 otherwise (Eq. (3), ULDP-AVG-w / ULDP-SGD-w).

    Example:
        >>> enhanced_weights(np.array([[1, 0], [3, 2]]), np.array([True, True])).tolist()
        [[0.25, 0.0], [0.75, 1.0]]
    """
    counts = np.asarray(counts, dtype=float)
    totals = counts.sum(axis=0)
    weights = np.divide(
        counts, totals[None, :], out=np.zeros_like(counts), where=totals[None, :] > 0
    )
    return weights * np.asarray(sampled, dtype=bool)[None, :]


def check_weights(weights: np.ndarray, counts: np.ndarray) -> None:
    """Raise ``ValueError`` unless weights are >= 0 and sum to 1 over silos for every user with records.

    The condition of Algorithm 3 (``sum_s w_su = 1``) that bounds a user's contribution to ``C``; users with no
    record or not sampled may have all-zero weights.
    """
    weights = np.asarray(weights, dtype=float)
    if weights.shape != counts.shape:
        raise ValueError(
            f"weights must have shape {counts.shape} (silos x users), got {weights.shape}"
        )
    if (weights < 0).any():
        raise ValueError(f"weights must be >= 0, got minimum {weights.min()}")
    sums = weights.sum(axis=0)
    bad = np.flatnonzero(
        (counts.sum(axis=0) > 0) & (np.abs(sums) > 1e-9) & (np.abs(sums - 1) > 1e-9)
    )
    if bad.size:
        raise ValueError(
            f"weights of user {bad[0]} sum to {sums[bad[0]]} over silos; they must sum to 1 (or 0)"
        )


def silo_weighted_sum(deltas: Tensor, weights: np.ndarray, noise: Tensor) -> Tensor:
    """One silo's ``sum_u w_su * deltas[u] + noise`` (Algorithm 3 line 18).

    ``deltas`` is ``[U, d]``, ``weights`` ``[U]``.
    """
    return torch.as_tensor(weights, dtype=deltas.dtype, device=deltas.device) @ deltas + noise


def weighted_sum(deltas: list[Tensor], weights: np.ndarray, noise: list[Tensor]) -> Tensor:
    """``sum_s (sum_u w_su * deltas[s][u] + noise[s])`` (Algorithm 3 lines 18 and 6, in the clear)."""
    return summed(
        [
            silo_weighted_sum(delta, weights[silo], z)
            for silo, (delta, z) in enumerate(zip(deltas, noise, strict=True))
        ]
    )


def summed(updates: list[Tensor]) -> Tensor:
    """``sum_s updates[s]``, added in silo order (the server's sum of Algorithm 3 line 6, in the clear)."""
    total = torch.zeros_like(updates[0])
    for update in updates:
        total += update
    return total


def aggregate(
    deltas: list[Tensor], counts: np.ndarray, sampled: np.ndarray, noise: list[Tensor]
) -> Tensor:
    """The plain server-side aggregation of ULDP-AVG-w / ULDP-SGD-w (the secure aggregation hook).

    Returns ``sum_s (sum_u w_su * deltas[s][u] + noise[s])`` with ``w_su = n_su / N_u`` for sampled users and 0
    otherwise (Eq. (3) and Algorithm 4). A ``uldp.federation.SecureAggregator`` has the same signature and result (to
    within the precision P) and computes it by the private weighting protocol (Protocol 1).

    Args:
        deltas: Per silo, ``[U, d]`` clipped deltas (zeros where ``n_su = 0``).
        counts: ``n[s, u]`` ``[S, U]``.
        sampled: ``[U]`` booleans, the users sampled this round.
        noise: Per silo, ``[d]`` Gaussian noise.

    Returns:
        ``[d]`` the noisy weighted sum.

    Example:
        >>> d = [torch.tensor([[1.0], [0.0]]), torch.tensor([[3.0], [5.0]])]
        >>> aggregate(d, np.array([[1, 0], [3, 2]]), np.array([True, True]), [torch.zeros(1), torch.ones(1)])
        tensor([8.5000])
    """
    return weighted_sum(deltas, enhanced_weights(counts, sampled), noise)


@dataclass(frozen=True)
class UserLevelMethod(EveryRecordSiloNoise):
    """ULDP-SGD, ULDP-SGD-w, ULDP-AVG and ULDP-AVG-w, with user-level sampling rate ``hp.q``.

    Attributes:
        spec: The parsed name.
        hp: Hyperparameters.
        user_weights: Optional fixed ``W`` ``[S, U]`` (each user's column sums to 1) replacing the uniform or
            enhanced weights; checked by :func:`check_weights` every round.
        colluders: The collusion threshold t of the silo's policy (:attr:`uldp.policy.SiloPolicy.colluders`): each
            silo's noise share is scaled by :func:`uldp.policy.collusion_scale` so that sigma holds against t silos
            colluding with the server (0: the paper's shares).
    """

    REQUIRED: ClassVar[dict[str, tuple[str, ...]]] = {
        "ULDP-SGD": ("clip", "sigma"),
        "ULDP-AVG": ("local_lr", "local_epochs", "clip", "sigma"),
    }
    #: eta_g per silo: eta_g = |S| makes the server step (Algorithm 3 line 6) the mean clipped user update; ULDP-AVG
    #: takes nine of them (a user's few records give few local steps; benchmarks/ehr.py measured 3 |S| 0.027 below
    #: 9 |S| on its federation, and measures the defaults against a grid around them).
    DEFAULTS: ClassVar[dict[str, FitDefaults]] = {
        "ULDP-SGD": FitDefaults(
            global_lr=1.0, local_lr=None, clip=1.0, local_epochs=None, per_silo=True
        ),
        "ULDP-AVG": FitDefaults(
            global_lr=9.0, local_lr=0.1, clip=1.0, local_epochs=5, per_silo=True
        ),
    }
    spec: MethodSpec
    hp: Hyperparameters
    user_weights: np.ndarray | None = None
    colluders: int = 0

    def noise_std(self, n_silos: int) -> float:
        """Per-silo noise std ``sigma C / sqrt(|S|)`` (Algorithm 3 line 18; sum std ``sigma C``, Theorem 3), times
        ``sqrt(|S| / (|S| - t))`` against ``t`` colluding silos (:func:`uldp.policy.collusion_scale`).

        Raises:
            PolicyRefusal: ``t >= |S|``.
        """
        scale = collusion_scale(n_silos=n_silos, colluders=self.colluders)
        return (
            needed(self.hp.sigma, "sigma")
            * needed(self.hp.clip, "clip")
            / math.sqrt(n_silos)
            * scale
        )

    def sample_users(self, n_users: int, round_seed: np.random.SeedSequence) -> np.ndarray:
        """Poisson sampling of users with rate ``q`` (Algorithm 4 line 4): ``[U]`` booleans (all when q = 1)."""
        if self.hp.q >= 1:
            return np.ones(n_users, dtype=bool)
        return (
            np.random.default_rng(seed_stream(round_seed, SAMPLING_STREAM)).random(n_users)
            < self.hp.q
        )

    def weights(self, counts: np.ndarray, sampled: np.ndarray) -> np.ndarray:
        """``W`` of this round: uniform, enhanced or the given ones, zero for users not sampled."""
        if self.user_weights is not None:
            check_weights(self.user_weights, counts)
            return (
                np.asarray(self.user_weights, dtype=float)
                * np.asarray(sampled, dtype=bool)[None, :]
            )
        return (enhanced_weights if self.spec.enhanced_weights else uniform_weights)(
            counts, sampled
        )

    def user_deltas(
        self,
        params: Tensor,
        federation: Federation,
        round_seed: np.random.SeedSequence,
        sampled: np.ndarray,
    ) -> list[Tensor]:
        """Per silo ``[U, d]``: the clipped per-user update of every sampled user with records, zeros elsewhere.

        ULDP-AVG: ``clip(x_su - x_t)`` after ``Q`` local epochs (lines 10-16). ULDP-SGD: ``clip(-g_su)`` for the
        full-batch gradient ``g_su`` (lines 21-23, as a descent direction so both share the server step).
        """
        keys = None
        if self.spec.family == "ULDP-AVG":
            keys = round_keys(federation, needed(self.hp.local_epochs, "local_epochs"), round_seed)
        return [
            self.silo_user_deltas(params, federation, round_seed, sampled, silo, keys)
            for silo in range(federation.n_silos)
        ]

    def silo_user_deltas(
        self,
        params: Tensor,
        federation: Federation,
        round_seed: np.random.SeedSequence,
        sampled: np.ndarray,
        silo: int,
        keys: Tensor | None = None,
    ) -> Tensor:
        """Silo ``silo``'s ``[U, d]`` of :meth:`user_deltas` (:meth:`each_user_delta`'s rows, zeros elsewhere)."""
        deltas = torch.zeros(
            (federation.n_users, params.numel()), dtype=params.dtype, device=params.device
        )
        self.each_user_delta(
            params, federation, round_seed, sampled, silo, row_writer(deltas), keys
        )
        return deltas

    def each_user_delta(
        self,
        params: Tensor,
        federation: Federation,
        round_seed: np.random.SeedSequence,
        sampled: np.ndarray,
        silo: int,
        consume: ChunkConsumer,
        keys: Tensor | None = None,
    ) -> None:
        """Silo ``silo``'s clipped per-user updates, handed to ``consume(users, rows)`` one chunk of users at a time.

        ``rows[i]`` is user ``users[i]``'s update clipped to norm ``C``: ``clip(x_su - x_t)`` after ``Q`` local epochs
        (ULDP-AVG, Algorithm 3 lines 10-16) or ``clip(-g_su)`` (ULDP-SGD, lines 21-23), for every sampled user with
        records in the silo, each once. Reads only that silo's records, so ``federation`` may hold them alone (a
        deployed silo); ``keys`` are the round's :func:`~uldp.methods.fedavg.round_keys` (drawn here when ``None``,
        ULDP-AVG only). Memory holds one chunk of deltas (:func:`uldp.training.per_user.train_user_chunks`).
        """
        users, groups = federation.user_groups(silo, users=np.flatnonzero(sampled))
        if not users.size:
            return
        clip = needed(self.hp.clip, "clip")
        seed = seed_stream(round_seed, TRAIN_STREAM, silo)
        if self.spec.family == "ULDP-AVG":
            if keys is None:
                keys = round_keys(
                    federation, needed(self.hp.local_epochs, "local_epochs"), round_seed
                )
            silo_training(
                federation,
                params,
                groups,
                self.hp,
                keys,
                seed,
                lambda rows, deltas: consume(users[rows], clip_rows(deltas, clip)),
            )
            return
        with global_torch_seed(seed):  # dropout, if the model has it
            user_gradient_chunks(
                federation.model,
                params,
                federation.x,
                federation.y,
                groups,
                consume=lambda rows, gradients: consume(users[rows], clip_rows(-gradients, clip)),
                loss_fn=federation.loss_fn,
                precision=federation.precision,
            )

    def silo_weighted_delta(
        self,
        params: Tensor,
        federation: Federation,
        round_seed: np.random.SeedSequence,
        sampled: np.ndarray,
        silo: int,
        weights: np.ndarray,
        keys: Tensor | None = None,
    ) -> Tensor:
        """Silo ``silo``'s ``sum_u w_su Delta_su`` (Algorithm 3 line 18 before the noise), ``weights`` its ``[U]`` row.

        Summed one chunk of users at a time (:meth:`each_user_delta`), so the silo holds ``[d]`` and one chunk of
        deltas, never ``[U, d]``: every clear path of a round (in process, a Flower silo, a deployed silo) sums this
        way, in the same order, so they agree exactly.
        """
        total = torch.zeros_like(params)

        def add(users: np.ndarray, deltas: Tensor) -> None:
            total.add_(
                torch.as_tensor(weights[users], dtype=deltas.dtype, device=deltas.device) @ deltas
            )

        self.each_user_delta(params, federation, round_seed, sampled, silo, add, keys)
        return total

    def silo_update(
        self,
        params: Tensor,
        federation: Federation,
        round_seed: np.random.SeedSequence,
        silo: int,
        *,
        sampled: np.ndarray,
        counts: np.ndarray,
    ) -> Tensor:
        """What silo ``silo`` sends the server in the clear: ``sum_u w_su Delta_su + z_s`` (Algorithm 3 line 18).

        Args:
            params: Global model ``[d]``.
            federation: Holds at least silo ``silo``'s records (only those are read).
            round_seed: The round's random stream.
            silo: The silo.
            sampled: ``[U]`` the users the server sampled this round (Algorithm 4).
            counts: ``n[s, u]`` of the whole federation, for the weights ``w_su`` (enhanced weights need ``N_u``).

        Returns:
            ``[d]``; the server sums these over silos (:meth:`server_step`).
        """
        weights = self.weights(counts, sampled)[silo]
        noise = self.silo_noise(params.numel(), len(counts), round_seed, silo, params.device)
        return (
            self.silo_weighted_delta(params, federation, round_seed, sampled, silo, weights) + noise
        )

    def server_step(self, params: Tensor, total: Tensor, *, n_users: int, n_silos: int) -> Tensor:
        """``x_{t+1} = x_t + eta_g / (q |U| |S|) * total`` (Algorithm 3 line 6, Algorithm 4 line 10); ``total`` may
        come back from the secure aggregation on the CPU."""
        scale = self.hp.global_lr / (self.hp.q * n_users * n_silos)
        return params + scale * total.to(params.device, params.dtype)

    def silo_weighted_deltas(
        self,
        params: Tensor,
        federation: Federation,
        round_seed: np.random.SeedSequence,
        sampled: np.ndarray,
    ) -> list[Tensor]:
        """Every silo's :meth:`silo_weighted_delta` under this round's weights (:meth:`weights`)."""
        weights = self.weights(federation.counts, sampled)
        keys = None
        if self.spec.family == "ULDP-AVG":
            keys = round_keys(federation, needed(self.hp.local_epochs, "local_epochs"), round_seed)
        return [
            self.silo_weighted_delta(params, federation, round_seed, sampled, s, weights[s], keys)
            for s in range(federation.n_silos)
        ]

    def clean_update(
        self, params: Tensor, federation: Federation, round_seed: np.random.SeedSequence
    ) -> Tensor:
        """The pre-noise aggregate ``sum_s sum_u w_su clip(Delta_su)`` of one round (sensitivity ``C``)."""
        sampled = self.sample_users(federation.n_users, round_seed)
        return summed(self.silo_weighted_deltas(params, federation, round_seed, sampled))

    def round(
        self,
        params: Tensor,
        federation: Federation,
        round_seed: np.random.SeedSequence,
        aggregate_fn: AggregateFn | None = None,
        *,
        sum_fn: SumFn | None = None,
    ) -> Tensor:
        """One round: ``x_{t+1} = x_t + eta_g / (q |U| |S|) * aggregate`` (Algorithm 3 line 6, Algorithm 4 line 10).

        Without ``aggregate_fn`` each silo's weighted sum is computed a chunk of users at a time
        (:meth:`silo_weighted_delta`), as a silo of the Flower or deployed paths computes it, so a round holds
        ``[d]`` per silo; an ``aggregate_fn`` receives every silo's ``[U, d]`` per-user deltas.

        Args:
            params: Global model ``[d]``.
            federation: The records.
            round_seed: The round's random stream.
            aggregate_fn: Enhanced-weight methods only: the aggregation of the per-user deltas (a
                ``uldp.federation.SecureAggregator``; default: the enhanced weights' sum, in the clear, as
                :func:`aggregate` computes it).
            sum_fn: Uniform or fixed weights only: the sum of the silos' updates ``sum_u w_su Delta_su + z_s``
                (:meth:`silo_update`'s; the masked sum's hook); default: their sum, in the clear.

        Returns:
            The new global model.
        """
        sampled = self.sample_users(federation.n_users, round_seed)
        noise = self.noise(params.numel(), federation.n_silos, round_seed, params.device)
        enhanced = self.spec.enhanced_weights and self.user_weights is None
        if enhanced and aggregate_fn is not None:
            deltas = self.user_deltas(params, federation, round_seed, sampled)
            total = aggregate_fn(deltas, federation.counts, sampled, noise)
        else:
            updates = [
                delta + z
                for delta, z in zip(
                    self.silo_weighted_deltas(params, federation, round_seed, sampled),
                    noise,
                    strict=True,
                )
            ]
            total = (
                summed(updates)
                if enhanced or sum_fn is None
                else sum_fn(updates, federation.counts, sampled)
            )
        return self.server_step(
            params, total, n_users=federation.n_users, n_silos=federation.n_silos
        )

    def accounting_arguments(self, federation: Federation | None) -> dict:
        """What :func:`uldp.accounting.epsilon_for_method` needs besides sigma, rounds and delta: the rate ``q`` (no
        fact of the federation, which may be None)."""
        return {"q": self.hp.q}

    def epsilon(
        self, federation: Federation | None, rounds: int, *, accountant: str = "rdp"
    ) -> float:
        """Theorem 3's user-level epsilon (sub-sampled with rate ``q``, Algorithm 4) after ``rounds`` rounds, by the
        accountant named ``accountant`` (``"rdp"`` or ``"pld"``, :mod:`uldp.accounting`); it does not depend on
        the federation, which may be None (a Flower server holds none)."""
        return epsilon_for_method(
            self.spec.name,
            sigma=needed(self.hp.sigma, "sigma"),
            rounds=rounds,
            delta=self.hp.delta,
            accountant=accountant,
            **self.accounting_arguments(federation),
        ).epsilon


def user_level(method: Method) -> UserLevelMethod:
    """``method`` as ULDP-SGD/AVG (Algorithms 3-4): the calls only they have (user sampling, weights, per-user
    deltas), which the roles make on their ``per_user`` paths.

    Raises:
        ValueError: ``method`` is not one of them.
    """
    if not isinstance(method, UserLevelMethod):
        raise ValueError(f"{method.spec.name} samples and weights no users (not ULDP-SGD/AVG)")
    return method
