"""The method's silo role for every family (:class:`MethodSilo`) and the norm bound of each silo's update.

A transport builds one :class:`MethodSilo` from what the silo holds (its own records as a
:class:`~uldp.methods.Federation`, its row of ``n[s, u]``, |S| and |U|) and asks it, per round: the request against
the silo's own policy (:meth:`MethodSilo.check_policy`), what an answer releases for its ledger
(:meth:`MethodSilo.release`), and the round's work (:meth:`MethodSilo.work`: the update of Algorithms 1-4 for the
plain and masked aggregations, or Protocol 1's clipped per-user deltas and noise), each computed here once.
The server checks what it decodes against :func:`update_bounds` (issue 30, attack 6).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch

from uldp.methods import EveryRecordSiloNoise, user_level
from uldp.methods.base import needed
from uldp.policy import GroupRelease, PolicyRefusal, release_multiplier, update_norm_bound
from uldp.training.dpsgd import dpsgd_schedule

if TYPE_CHECKING:
    from collections.abc import Callable

    from uldp.methods import Federation, Method
    from uldp.policy import SiloPolicy


def update_bounds(
    method: Method,
    *,
    n_silos: int,
    sampled: np.ndarray,
    size: int,
    counts: np.ndarray | None = None,
) -> list[float] | None:
    """Per silo, the largest l2 norm of its honest update (:func:`uldp.policy.update_norm_bound`): its clipped
    signal ``C sum_u w_su`` (``C`` for ULDP-NAIVE's clipped update) plus the noise's norm bound.

    Args:
        method: The run's method.
        n_silos: |S|.
        sampled: bool [|U|], the round's users.
        size: d.
        counts: ``n[s, u]`` where the server knows it (the weights' sums are then exact); None bounds
            ``sum_u w_su`` by the number of users sampled (per-user weights) or that over |S| (uniform weights).

    Returns:
        The bounds, or None for a method without one (DEFAULT, ULDP-GROUP: no clipped silo update).
    """
    spec, hp = method.spec, method.hp
    if not spec.private or not isinstance(method, EveryRecordSiloNoise) or hp.clip is None:
        return None
    noise_std = method.noise_std(n_silos)
    if not spec.per_user:
        sums = [1.0] * n_silos
    elif counts is not None:
        sums = [float(row.sum()) for row in user_level(method).weights(counts, sampled)]
    else:
        chosen = float(np.count_nonzero(sampled))
        sums = [chosen if spec.per_user_weights else chosen / n_silos] * n_silos
    return [
        update_norm_bound(clip=hp.clip, weight_sum=total, noise_std=noise_std, size=size)
        for total in sums
    ]


@dataclass
class SiloRound:
    """One round of one silo (a :class:`uldp.federation.aggregation.RoundWork`): ``before`` runs first (the ledger's
    admission, on disk before anything is computed), then the method's update or Protocol 1's inputs."""

    silo: MethodSilo
    params: np.ndarray
    round_seed: np.random.SeedSequence
    sampled: np.ndarray
    before: Callable[[], None]

    def update(self) -> np.ndarray:
        self.before()
        silo = self.silo
        update = silo.method.silo_update(
            torch.from_numpy(self.params.copy()).to(silo.federation.device),
            silo.federation,
            self.round_seed,
            silo.silo_id,
            sampled=self.sampled,
            counts=silo.counts,
        )
        return update.detach().cpu().numpy().astype(self.params.dtype)

    def secure_inputs(self) -> tuple[np.ndarray, np.ndarray]:
        silo = self.silo
        if not silo.method.spec.per_user_weights:
            raise ValueError(
                f"Protocol 1 computes the per-user weights of ULDP-SGD-w / ULDP-AVG-w, not "
                f"{silo.method.spec.name}"
            )
        self.before()
        method = user_level(silo.method)
        tensor = torch.from_numpy(self.params.copy()).to(silo.federation.device)
        deltas = method.silo_user_deltas(
            tensor, silo.federation, self.round_seed, self.sampled, silo.silo_id
        )
        noise = method.silo_noise(tensor.numel(), silo.n_silos, self.round_seed, silo.silo_id)
        return (
            deltas.detach().cpu().numpy().astype(np.float64),
            noise.detach().cpu().numpy().astype(np.float64),
        )


class MethodSilo:
    """One silo's side of any method: only this silo's records.

    Args:
        method: The run's method (its hyperparameters as the silo accepted them).
        federation: This silo's records only (ids numbered as in the whole federation).
        silo_id: This silo, ``0 .. n_silos - 1``.
        n_silos: |S|.
        counts: ``n[s, u]`` as this silo knows it (its own row; the others zero unless the silos share counts).
        secure: Whether the server sees only the sum of the silos' updates.
        group_size: ULDP-GROUP-k's k (public: from the shared allocation), else 0.
        fixed_weights: Whether the run fixes ``user_weights`` (then not uniform, as enhanced weights).
    """

    def __init__(
        self,
        method: Method,
        federation: Federation,
        *,
        silo_id: int,
        n_silos: int,
        counts: np.ndarray,
        secure: bool,
        group_size: int = 0,
        fixed_weights: bool = False,
    ) -> None:
        self.method, self.federation = method, federation
        self.silo_id, self.n_silos, self.counts = silo_id, n_silos, counts
        self.secure, self.group_size, self.fixed_weights = secure, group_size, fixed_weights
        self.n_records = int(federation.x.shape[0])

    def check_policy(self, policy: SiloPolicy, sampled: np.ndarray | None = None) -> None:
        """The run's request against this silo's own policy: its sigma and local epochs (``sampled`` None), or the
        size of a round's user sample (methods with user sampling).

        Raises:
            PolicyRefusal: naming the value and the policy's bound, or a method without noise (DEFAULT: a silo
                releases nothing without DP).
        """
        spec, hp = self.method.spec, self.method.hp
        if not spec.private:
            raise PolicyRefusal(
                f"method {spec.name} adds no noise; this silo answers only private methods"
            )
        if (
            policy.colluders
            and spec.per_user
            and user_level(self.method).colluders < policy.colluders
        ):
            raise PolicyRefusal(  # its epsilons would claim a threshold its noise share was not scaled for
                f"this silo's policy asks for colluders={policy.colluders}, and this transport does not scale "
                f"its noise share for them (uldp.flower does: uldp-policy-colluders)"
            )
        if sampled is None:
            policy.check(sigma=hp.sigma, local_epochs=hp.local_epochs)
        elif spec.per_user:
            policy.check(
                sampled_users=int(np.count_nonzero(sampled)),
                n_users=int(self.counts.shape[1]),
            )

    def release(self) -> tuple[float | GroupRelease, float]:
        """What one answer releases, for the silo's ledger (:class:`uldp.policy.SiloLedger`): the noise multiplier the
        server sees (:func:`uldp.policy.release_multiplier`), or for ULDP-GROUP-k this silo's round of DP-SGD
        (:class:`uldp.policy.GroupRelease`: its record rate and steps, sigma and k), and the sampling rate."""
        spec, hp = self.method.spec, self.method.hp
        if spec.capabilities.group_privacy:
            schedule = dpsgd_schedule(
                self.n_records,
                batch_size=needed(hp.batch_size, "batch_size"),
                epochs=needed(hp.local_epochs, "local_epochs"),
            )
            return GroupRelease(
                sigma=float(needed(hp.sigma, "sigma")),
                sample_rate=schedule.sample_rate,
                steps=schedule.steps,
                k=self.group_size,
            ), 1.0
        multiplier = release_multiplier(
            float(hp.sigma or 0.0),
            n_silos=self.n_silos,
            secure=self.secure,
            uniform_weights=not (spec.per_user_weights or (spec.per_user and self.fixed_weights)),
        )
        return multiplier, hp.q if spec.per_user else 1.0

    def work(
        self,
        params: np.ndarray,
        round_seed: np.random.SeedSequence,
        sampled: np.ndarray,
        before: Callable[[], None],
    ) -> SiloRound:
        """The round's computation, run by the aggregation only once the round may be answered."""
        return SiloRound(self, params, round_seed, sampled, before)
