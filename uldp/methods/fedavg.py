"""DEFAULT (FedAvg with global and local learning rates) and ULDP-NAIVE (Algorithm 1, Theorem 1).

Both train one model per silo on all its records (``Q`` epochs of mini-batch SGD) and send the delta
``Delta_s = x_s - x_t`` (local minus global: the pseudo-code's sign is a typo, see settings.md). ULDP-NAIVE clips
``Delta_s`` to norm ``C`` and adds ``N(0, 4 sigma^2 C^2 |S|)`` per silo; the server takes
``x_{t+1} = x_t + eta_g / |S| * sum_s Delta_s`` in both.

Erratum (found by the sensitivity test): the paper's proof of Theorem 1 bounds a user's effect on a silo's clipped
delta by ``C``, but the silo clips its *whole* delta, so removing a user can move it across the C-ball, by up to
``2C``; the user-level sensitivity of the sum is ``2|S|C``. The paper's noise ``sigma C sqrt(|S|)`` per silo thus
gives only noise multiplier ``sigma / 2``. We add ``2 sigma C sqrt(|S|)`` per silo so that Theorem 1's epsilon
(noise multiplier ``sigma``) holds as stated.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import numpy as np
import torch
from torch import Tensor

from uldp.accounting import check_accountant, epsilon_for_method
from uldp.methods.base import (
    KEYS_STREAM,
    TRAIN_STREAM,
    EveryRecordSiloNoise,
    FitDefaults,
    global_torch_seed,
    needed,
    seed_stream,
    torch_generator,
)
from uldp.training import closed_form
from uldp.training.per_user import (
    ChunkConsumer,
    clip_rows,
    record_keys,
    row_writer,
    train_user_chunks,
    train_users,
)

if TYPE_CHECKING:
    from uldp.method_names import MethodSpec
    from uldp.methods.base import AggregateFn, Federation, Hyperparameters, SumFn


def round_keys(federation: Federation, epochs: int, round_seed: np.random.SeedSequence) -> Tensor:
    """Per-record random keys of a round (record order within each training set), indexed by record.

    Drawn over the stable record ids, so removing one user's records leaves every other record's key unchanged; drawn
    on the CPU (the same keys on every device) and moved to the federation's device once per round.
    """
    keys = record_keys(
        federation.id_space, epochs, torch_generator(seed_stream(round_seed, KEYS_STREAM))
    )
    return keys[:, torch.from_numpy(federation.ids)].to(federation.device)


def silo_training(
    federation: Federation,
    params: Tensor,
    groups: list[np.ndarray],
    hp: Hyperparameters,
    keys: Tensor,
    seed: np.random.SeedSequence,
    consume: ChunkConsumer,
) -> None:
    """Local SGD of one model per record group, each chunk of groups' deltas handed to ``consume`` (as
    :func:`~uldp.training.per_user.train_user_chunks`); dropout draws come from ``seed``."""
    with global_torch_seed(seed):
        train_user_chunks(
            federation.model,
            params,
            federation.x,
            federation.y,
            groups,
            consume=consume,
            loss_fn=federation.loss_fn,
            local_lr=needed(hp.local_lr, "local_lr"),
            epochs=needed(hp.local_epochs, "local_epochs"),
            batch_size=hp.batch_size,
            keys=keys,
            precision=federation.precision,
        )


@dataclass(frozen=True)
class FedAvgMethod(EveryRecordSiloNoise):
    """DEFAULT and ULDP-NAIVE.

    Attributes:
        spec: ``DEFAULT`` or ``ULDP-NAIVE``.
        hp: Hyperparameters (``clip`` and ``sigma`` unused by DEFAULT).
    """

    REQUIRED: ClassVar[dict[str, tuple[str, ...]]] = {
        "DEFAULT": ("local_lr", "local_epochs"),
        "ULDP-NAIVE": ("local_lr", "local_epochs", "clip", "sigma"),
    }
    #: FedAvg's step (eta_g = 1: the mean silo update); ULDP-NAIVE clips a silo's whole delta.
    DEFAULTS: ClassVar[dict[str, FitDefaults]] = {
        "DEFAULT": FitDefaults(global_lr=1.0, local_lr=0.01, clip=None, local_epochs=5),
        "ULDP-NAIVE": FitDefaults(global_lr=1.0, local_lr=0.01, clip=1.0, local_epochs=5),
    }
    spec: MethodSpec
    hp: Hyperparameters

    @property
    def clip_bound(self) -> float:
        """The norm each silo's delta is clipped to: ``C`` (ULDP-NAIVE, Algorithm 1 line 13)."""
        return needed(self.hp.clip, "clip")

    def noise_std(self, n_silos: int) -> float:
        """Per-silo noise std ``2 sigma C sqrt(|S|)``: sum std ``sigma`` times the sensitivity ``2|S|C`` (Theorem 1,
        corrected).

        Algorithm 1 line 14 writes ``sigma C sqrt(|S|)``, calibrated to a sensitivity of ``|S|C`` that does not hold
        (see the module docstring).
        """
        if not self.spec.private:
            return 0.0
        return (
            2.0 * needed(self.hp.sigma, "sigma") * needed(self.hp.clip, "clip") * math.sqrt(n_silos)
        )

    def silo_delta(
        self,
        params: Tensor,
        federation: Federation,
        round_seed: np.random.SeedSequence,
        silo: int,
        keys: Tensor | None = None,
    ) -> Tensor:
        """Silo ``silo``'s local-minus-global delta after ``Q`` epochs, clipped to ``C`` for ULDP-NAIVE (line 13).

        Only the records of ``silo`` are read, so ``federation`` may hold that silo's records alone (a deployed
        silo); ``keys`` are the round's :func:`round_keys` (drawn here when ``None``).
        """
        records = federation.silo_records(silo)
        if records.size == 0:
            return torch.zeros_like(params)
        if keys is None:
            keys = round_keys(federation, needed(self.hp.local_epochs, "local_epochs"), round_seed)
        delta = torch.zeros((1, params.numel()), dtype=params.dtype, device=params.device)
        silo_training(
            federation,
            params,
            [records],
            self.hp,
            keys,
            seed_stream(round_seed, TRAIN_STREAM, silo),
            row_writer(delta),
        )
        return clip_rows(delta, self.clip_bound)[0] if self.spec.private else delta[0]

    def silo_deltas(
        self, params: Tensor, federation: Federation, round_seed: np.random.SeedSequence
    ) -> list[Tensor]:
        """Each silo's :meth:`silo_delta`.

        A model with closed-form gradients (:func:`uldp.training.closed_form.for_model`) trains all silos in one
        batched call (the longest silo's steps instead of the sum of all silos' steps), each silo drawing its dropout
        masks from the generator :meth:`silo_delta` seeds, so the result equals training them one by one
        (``tests/test_methods.py``).
        """
        epochs = needed(self.hp.local_epochs, "local_epochs")
        keys = round_keys(federation, epochs, round_seed)
        silos = [federation.silo_records(silo) for silo in range(federation.n_silos)]
        if closed_form.for_model(
            federation.model, federation.loss_fn, federation.precision
        ) is None or any(r.size == 0 for r in silos):
            return [
                self.silo_delta(params, federation, round_seed, silo, keys)
                for silo in range(federation.n_silos)
            ]
        deltas = train_users(
            federation.model,
            params,
            federation.x,
            federation.y,
            silos,
            loss_fn=federation.loss_fn,
            local_lr=needed(self.hp.local_lr, "local_lr"),
            epochs=epochs,
            batch_size=self.hp.batch_size,
            keys=keys,
            dropout_generators=[
                torch_generator(seed_stream(round_seed, TRAIN_STREAM, s), federation.device)
                for s in range(len(silos))
            ],
        )
        return list(clip_rows(deltas, self.clip_bound) if self.spec.private else deltas)

    def clean_update(
        self, params: Tensor, federation: Federation, round_seed: np.random.SeedSequence
    ) -> Tensor:
        """The pre-noise aggregate ``sum_s Delta_s`` (user-level sensitivity: see the chapter and tests)."""
        return torch.stack(self.silo_deltas(params, federation, round_seed)).sum(dim=0)

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
        """What silo ``silo`` sends the server: ``Delta_s + z_s`` (Algorithm 1 lines 13-14; ``Delta_s`` for DEFAULT).

        Reads only that silo's records (see :meth:`silo_delta`); ``sampled`` and ``counts`` (``n[s, u]``) are
        unused here (every record takes part) and give all methods one signature.
        """
        delta = self.silo_delta(params, federation, round_seed, silo)
        if not self.spec.private:
            return delta
        return delta + self.silo_noise(params.numel(), len(counts), round_seed, silo, params.device)

    def server_step(self, params: Tensor, total: Tensor, *, n_users: int, n_silos: int) -> Tensor:
        """``x_{t+1} = x_t + eta_g / |S| * total`` for ``total = sum_s (Delta_s + z_s)`` (Algorithm 1 line 7)."""
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
        """One round: ``x_{t+1} = x_t + eta_g / |S| sum_s (Delta_s + z_s)`` (Algorithm 1 line 7); ``aggregate_fn``
        is unused (no weights to compute). ``sum_fn`` (the masked sum's hook) sums the silos' updates
        ``Delta_s + z_s`` (:meth:`silo_update`'s, computed all at once); without it the sum is in the clear: the
        clean deltas' sum plus the noises' sum."""
        if sum_fn is not None:
            deltas = self.silo_deltas(params, federation, round_seed)
            if self.spec.private:
                noise = self.noise(params.numel(), federation.n_silos, round_seed, params.device)
                deltas = [delta + z for delta, z in zip(deltas, noise, strict=True)]
            everyone = np.ones(federation.n_users, dtype=bool)
            return self.server_step(
                params,
                sum_fn(deltas, federation.counts, everyone),
                n_users=federation.n_users,
                n_silos=federation.n_silos,
            )
        total = self.clean_update(params, federation, round_seed)
        if self.spec.private:
            total = total + torch.stack(
                self.noise(params.numel(), federation.n_silos, round_seed, params.device)
            ).sum(dim=0)
        return self.server_step(
            params, total, n_users=federation.n_users, n_silos=federation.n_silos
        )

    def accounting_arguments(self, federation: Federation) -> dict:
        """What :func:`uldp.accounting.epsilon_for_method` needs besides sigma, rounds and delta: nothing."""
        return {}

    def epsilon(
        self, federation: Federation, rounds: int, *, accountant: str = "rdp"
    ) -> float | None:
        """Theorem 1's user-level epsilon after ``rounds`` rounds by the accountant named ``accountant``
        (``"rdp"`` or ``"pld"``, :mod:`uldp.accounting`); ``None`` for DEFAULT: no guarantee."""
        if not self.spec.private:
            check_accountant(accountant)
            return None
        return epsilon_for_method(
            self.spec.name,
            sigma=needed(self.hp.sigma, "sigma"),
            rounds=rounds,
            delta=self.hp.delta,
            accountant=accountant,
        ).epsilon
