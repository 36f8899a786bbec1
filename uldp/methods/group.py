"""ULDP-GROUP-k (Algorithm 2, Theorem 2): bound each user to ``k`` records, then record-level DP-SGD per silo.

The flags ``B`` keep at most ``k`` records of each user over all silos, chosen uniformly at random among the user's
records once, before training, and fixed for all rounds (like the paper, the flags are not computed privately:
this is a baseline). Each silo then runs DP-SGD (opacus, Poisson sampling) on its kept records; the server takes
``x_{t+1} = x_t + eta_g / |S| * sum_s Delta_s``. ``k`` is an integer, or ``"max"`` / ``"median"`` of the records
per user (over users with at least one record). The guarantee is record-level RDP maximised over silos, converted
to groups of ``k`` (:func:`uldp.accounting.epsilon_group`, which uses the valid group conversion of settings.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import numpy as np
import torch
from torch import Tensor

from uldp.accounting import epsilon_for_method
from uldp.methods.base import (
    TRAIN_STREAM,
    FitDefaults,
    global_torch_seed,
    needed,
    seed_stream,
    torch_generator,
)
from uldp.training import closed_form
from uldp.training.dpsgd import dpsgd_schedule, dpsgd_train, dpsgd_train_silos

if TYPE_CHECKING:
    from uldp.method_names import MethodSpec
    from uldp.methods.base import AggregateFn, Federation, Hyperparameters, SumFn

#: Child of a silo's training stream for the global generator (dropout); the stream itself drives DP-SGD's
#: sampling and noise.
DROPOUT_STREAM = 0


def resolve_group_size(group_size: int | str, records_per_user: np.ndarray) -> int:
    """The integer ``k`` of ``ULDP-GROUP-k``: itself, or the max / median (rounded down, at least 1) of ``N_u``.

    Example:
        >>> resolve_group_size("median", np.array([1, 2, 9, 0])), resolve_group_size("max", np.array([1, 2, 9]))
        (2, 9)
    """
    present = records_per_user[records_per_user > 0]
    if group_size == "max":
        return int(present.max())
    if group_size == "median":
        return max(1, int(np.floor(np.median(present))))
    if (
        isinstance(group_size, (int, np.integer))
        and not isinstance(group_size, bool)
        and group_size >= 1
    ):
        return int(group_size)
    raise ValueError(
        f"group size must be a positive integer, 'max' or 'median', got {group_size!r}"
    )


def contribution_flags(user: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """Flags ``B``: keep at most ``k`` records of every user, drawn uniformly among its records in all silos.

    Returns:
        Boolean mask over records.
    """
    keys = rng.random(user.size)
    order = np.lexsort((keys, user))  # by user, random within a user
    sorted_users = user[order]
    first = np.searchsorted(sorted_users, sorted_users)  # start of each record's user block
    rank = np.arange(user.size) - first
    keep = np.zeros(user.size, dtype=bool)
    keep[order[rank < k]] = True
    return keep


@dataclass(frozen=True)
class GroupMethod:
    """ULDP-GROUP-k.

    Attributes:
        spec: The parsed name (``group_size`` an int, ``"max"`` or ``"median"``).
        hp: Hyperparameters (``clip`` and ``sigma`` are DP-SGD's per-record bound and noise multiplier).
    """

    REQUIRED: ClassVar[dict[str, tuple[str, ...]]] = {
        "ULDP-GROUP": ("local_lr", "local_epochs", "clip", "sigma")
    }
    #: DP-SGD's usual start (per-record clip 1, one epoch a round) under FedAvg's step.
    DEFAULTS: ClassVar[dict[str, FitDefaults]] = {
        "ULDP-GROUP": FitDefaults(global_lr=1.0, local_lr=0.1, clip=1.0, local_epochs=1)
    }
    spec: MethodSpec
    hp: Hyperparameters

    def group_size(self, federation: Federation) -> int:
        """``k`` for this federation (resolves ``max`` / ``median`` on the records per user)."""
        if self.spec.group_size is None:
            raise ValueError(
                f"{self.spec.name} has no group size k; GroupMethod needs a ULDP-GROUP-<k> name"
            )
        return resolve_group_size(self.spec.group_size, federation.counts.sum(axis=0))

    def keep_mask(self, federation: Federation, seed: np.random.SeedSequence) -> np.ndarray:
        """The flags ``B`` over all records (Algorithm 2 line 8); they depend only on who owns each record."""
        k = self.group_size(federation)
        return contribution_flags(federation.allocation.user, k, np.random.default_rng(seed))

    def prepare(self, federation: Federation, seed: np.random.SeedSequence) -> Federation:
        """Apply the flags (Algorithm 2 line 8): the federation with at most ``k`` records per user."""
        return federation.keep(self.keep_mask(federation, seed))

    def silo_delta(
        self, params: Tensor, federation: Federation, round_seed: np.random.SeedSequence, silo: int
    ) -> Tensor:
        """Silo ``silo``'s DP-SGD delta (noise included: DP-SGD adds it per step); reads only that silo's records."""
        records = torch.from_numpy(federation.silo_records(silo)).to(federation.device)
        if records.numel() == 0:
            return torch.zeros_like(params)
        with global_torch_seed(seed_stream(round_seed, TRAIN_STREAM, silo, DROPOUT_STREAM)):
            return dpsgd_train(
                federation.model,
                params,
                federation.x[records],
                federation.y[records],
                loss_fn=federation.loss_fn,
                local_lr=needed(self.hp.local_lr, "local_lr"),
                epochs=needed(self.hp.local_epochs, "local_epochs"),
                batch_size=self.hp.batch_size,
                clip=needed(self.hp.clip, "clip"),
                sigma=needed(self.hp.sigma, "sigma"),
                generator=torch_generator(seed_stream(round_seed, TRAIN_STREAM, silo)),
            )

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
        """What silo ``silo`` sends the server: its :meth:`silo_delta` (``sampled``, ``counts`` unused here)."""
        return self.silo_delta(params, federation, round_seed, silo)

    def silo_deltas(
        self, params: Tensor, federation: Federation, round_seed: np.random.SeedSequence
    ) -> list[Tensor]:
        """Each silo's :meth:`silo_delta`.

        For a model with closed-form gradients all silos run their DP-SGD together
        (:func:`~uldp.training.dpsgd.dpsgd_train_silos`: the same draws, dropout masks included, hence the same
        deltas, in the longest silo's number of steps).
        """
        silos = [
            torch.from_numpy(federation.silo_records(silo)).to(federation.device)
            for silo in range(federation.n_silos)
        ]
        if closed_form.for_dpsgd(federation.model, federation.loss_fn) is None or any(
            r.numel() == 0 for r in silos
        ):
            return [
                self.silo_delta(params, federation, round_seed, silo)
                for silo in range(federation.n_silos)
            ]
        deltas = dpsgd_train_silos(
            federation.model,
            params,
            [(federation.x[r], federation.y[r]) for r in silos],
            loss_fn=federation.loss_fn,
            local_lr=needed(self.hp.local_lr, "local_lr"),
            epochs=needed(self.hp.local_epochs, "local_epochs"),
            batch_size=self.hp.batch_size,
            clip=needed(self.hp.clip, "clip"),
            sigma=needed(self.hp.sigma, "sigma"),
            generators=[
                torch_generator(seed_stream(round_seed, TRAIN_STREAM, silo))
                for silo in range(len(silos))
            ],
            dropout_generators=[
                torch_generator(
                    seed_stream(round_seed, TRAIN_STREAM, silo, DROPOUT_STREAM), federation.device
                )
                for silo in range(len(silos))
            ],
        )
        return list(deltas)

    def server_step(self, params: Tensor, total: Tensor, *, n_users: int, n_silos: int) -> Tensor:
        """``x_{t+1} = x_t + eta_g / |S| * total`` for ``total = sum_s Delta_s`` (Algorithm 2 line 6)."""
        return params + self.hp.global_lr / n_silos * total

    def round(
        self,
        params: Tensor,
        federation: Federation,
        round_seed: np.random.SeedSequence,
        aggregate_fn: AggregateFn | None = None,
        *,
        sum_fn: SumFn | None = None,
    ) -> Tensor:
        """One round: ``x_{t+1} = x_t + eta_g / |S| sum_s Delta_s`` (Algorithm 2 line 6); ``aggregate_fn`` is unused
        (no weights to compute); ``sum_fn`` (the masked sum's hook) sums the silos' DP-SGD deltas, else they are
        summed in the clear."""
        deltas = self.silo_deltas(params, federation, round_seed)
        if sum_fn is None:
            total = torch.stack(deltas).sum(dim=0)
        else:
            total = sum_fn(deltas, federation.counts, np.ones(federation.n_users, dtype=bool))
        return self.server_step(
            params, total, n_users=federation.n_users, n_silos=federation.n_silos
        )

    def accounting_arguments(self, federation: Federation) -> dict:
        """What :func:`uldp.accounting.epsilon_for_method` needs besides sigma, rounds and delta: ``k`` and each
        silo's DP-SGD schedule (record rate and steps per round).

        ``federation`` is the prepared (flag-filtered) one: its silo sizes set each silo's DP-SGD schedule.
        """
        sizes = [federation.silo_records(s).size for s in range(federation.n_silos)]
        epochs = needed(self.hp.local_epochs, "local_epochs")
        schedules = [
            dpsgd_schedule(n, batch_size=self.hp.batch_size, epochs=epochs) for n in sizes if n > 0
        ]
        return {
            "k": self.group_size(federation),
            "sample_rates": [s.sample_rate for s in schedules],
            "steps_per_round": [s.steps for s in schedules],
        }

    def epsilon(self, federation: Federation, rounds: int, *, accountant: str = "rdp") -> float:
        """Theorem 2's user-level epsilon after ``rounds`` rounds by the accountant named ``accountant``: ``"rdp"``
        (valid orders, next power of two for ``k``) or ``"pld"`` (the mixture of Gaussians of a ``k``-record
        group, :mod:`uldp.accounting.pld`)."""
        return epsilon_for_method(
            self.spec.name,
            sigma=needed(self.hp.sigma, "sigma"),
            rounds=rounds,
            delta=self.hp.delta,
            accountant=accountant,
            **self.accounting_arguments(federation),
        ).epsilon
