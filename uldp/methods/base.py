"""What every federated method shares: its hyperparameters, the federation it trains on, the :class:`Method`
protocol and the per-silo noise of the methods that use every record (:class:`EveryRecordSiloNoise`).

A method (:mod:`uldp.methods.fedavg`, :mod:`uldp.methods.group`, :mod:`uldp.methods.uldp_avg`) is a silo-side update
(local training, clipping, weighting, noise with the std of its theorem), a server-side aggregation and its
accountant from :mod:`uldp.accounting`. All randomness of a round comes from one ``numpy.random.SeedSequence``.
Method names are parsed by :mod:`uldp.method_names`; :mod:`uldp.methods.registry` builds a method by family.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, ClassVar, Protocol, TypeVar, runtime_checkable

import numpy as np
import torch
from torch import Tensor, nn

from uldp.common.checks import check_integer, check_number, check_positive, check_rate
from uldp.data.base import Allocation
from uldp.method_names import (
    parse_method as parse_method,
)  # where simulation and fitting import it from
from uldp.models import bce_loss

if TYPE_CHECKING:
    from uldp.method_names import MethodSpec
    from uldp.training.per_user import LossFunction


_T = TypeVar("_T")


def needed(value: _T | None, name: str) -> _T:
    """``value``, a hyperparameter the method needs; raise ``ValueError`` naming ``name`` if it is ``None``.

    Example:
        >>> needed(0.5, "clip")
        0.5
    """
    if value is None:
        raise ValueError(f"{name} is needed by this method (got None)")
    return value


@dataclass(frozen=True)
class Hyperparameters:
    """The training and privacy parameters of one run (the symbols of the paper's notation table, Table 1).

    Attributes:
        global_lr: Server learning rate ``eta_g`` > 0.
        local_lr: Local learning rate ``eta_l`` > 0 (``None`` only where unused: ULDP-SGD).
        local_epochs: Local epochs ``Q`` >= 1 (``None`` only for ULDP-SGD).
        batch_size: Local mini-batch size >= 1.
        clip: Clipping bound ``C`` > 0 (``None`` only for DEFAULT).
        sigma: Noise multiplier > 0 (``None`` only for DEFAULT).
        delta: Target delta in (0, 1).
        q: User-level Poisson sampling rate in (0, 1] (ULDP-SGD/AVG, Algorithm 4).
    """

    global_lr: float
    local_lr: float | None
    local_epochs: int | None
    batch_size: int
    clip: float | None
    sigma: float | None
    delta: float = 1e-5
    q: float = 1.0

    #: The fields that may be ``None``: a method family's class requires some of them (its ``REQUIRED``) and leaves
    #: the others unused (:func:`uldp.methods.registry.unused_hyperparameters`).
    OPTIONAL: ClassVar[tuple[str, ...]] = ("local_lr", "local_epochs", "clip", "sigma")

    def __post_init__(self) -> None:
        """Raise ``ValueError`` naming the first bad value (see :meth:`require` for what a method needs)."""
        check_positive("global_lr", self.global_lr)
        check_integer("batch_size", self.batch_size)
        for name in ("local_lr", "clip", "sigma"):  # None where the method does not use it
            if getattr(self, name) is not None:
                check_positive(name, getattr(self, name))
        if self.local_epochs is not None:
            check_integer("local_epochs", self.local_epochs)
        check_number("delta", self.delta, above=0, below=1)
        check_rate("q (user-level sampling rate)", self.q)

    def require(self, method: str, *names: str) -> None:
        """Raise ``ValueError`` if one of ``names`` is ``None``: ``method`` needs it."""
        missing = [name for name in names if getattr(self, name) is None]
        if missing:
            raise ValueError(f"{method} needs {', '.join(missing)} (got None)")


@dataclass(frozen=True)
class FitDefaults:
    """A method family's defaults for a model and records of your own (:func:`uldp.fit`, :mod:`uldp.flower`).

    The paper tunes its hyperparameters per dataset (settings.md, :mod:`uldp.defaults`); these are what a method
    uses when nothing is known of the model, chosen so that each family's server step moves the model by about one
    mean local update: FedAvg's ``x + eta_g / |S| sum_s Delta_s`` (Algorithms 1 and 2) with ``eta_g = 1``;
    ULDP-AVG's ``x + eta_g / (q |U| |S|) sum_s sum_u w_su Delta_su`` (Algorithm 3 line 6) is ``eta_g / |S|``
    times the mean clipped user update, so its ``global_lr`` is per silo (:meth:`global_lr_for`).
    ``benchmarks/ehr.py`` measures them against a tuned grid on a federation that is not the paper's.

    Attributes:
        global_lr: ``eta_g`` (per silo where ``per_silo``).
        local_lr: ``eta_l`` (``None`` where unused).
        clip: ``C`` (``None`` where unused).
        local_epochs: ``Q`` (``None`` where unused).
        batch_size: Local mini-batch size.
        per_silo: ``eta_g`` is ``global_lr * |S|``.
    """

    global_lr: float
    local_lr: float | None
    clip: float | None
    local_epochs: int | None
    batch_size: int = 64
    per_silo: bool = False

    def global_lr_for(self, n_silos: int) -> float:
        """``eta_g`` for a federation of ``n_silos`` silos."""
        return self.global_lr * n_silos if self.per_silo else self.global_lr

    def values(self, n_silos: int) -> dict[str, float | int | None]:
        """The defaults as keyword arguments of :func:`uldp.fit` for ``n_silos`` silos."""
        return {
            "global_lr": self.global_lr_for(n_silos),
            "local_lr": self.local_lr,
            "clip": self.clip,
            "local_epochs": self.local_epochs,
            "batch_size": self.batch_size,
        }


@dataclass(frozen=True)
class Federation:
    """The training records of a federation: who holds them (silo), whose they are (user), and the model.

    Attributes:
        model: The architecture (mode and buffers are used; parameters travel as flat vectors).
        loss_fn: Weighted mean loss of the model.
        x: All training records.
        y: Their targets.
        allocation: User and silo of every record.
        record_ids: Stable id of every record (``None``: ``0..n-1``, see :attr:`ids`); removing records keeps the
            others' ids, so their random draws (record order) stay the same in a neighbouring federation.
        n_ids: Size of the id space (``None``: ``n``, see :attr:`id_space`).
        precision: The local training's precision (:data:`uldp.training.device.PRECISIONS`); the device is that of
            ``x`` (the model and ``y`` live there too, :meth:`to`).
    """

    model: nn.Module
    loss_fn: LossFunction
    x: Tensor
    y: Tensor
    allocation: Allocation
    record_ids: np.ndarray | None = None
    n_ids: int | None = None
    precision: str = "float32"

    @property
    def device(self) -> torch.device:
        """Where the federation trains: the device of its records."""
        return self.x.device

    def to(self, device: torch.device) -> Federation:
        """The federation with its records on ``device`` (copied once) and its model moved there (in place, as
        ``nn.Module.to``); itself when the records are there already."""
        self.model.to(device)
        if self.x.device == device and self.y.device == device:
            return self
        return replace(self, x=self.x.to(device), y=self.y.to(device))

    @property
    def ids(self) -> np.ndarray:
        """The stable id of every record: ``record_ids``, or ``0..n-1`` when it is ``None``."""
        return np.arange(self.x.shape[0]) if self.record_ids is None else self.record_ids

    @property
    def id_space(self) -> int:
        """The size of the id space: ``n_ids``, or ``n`` when it is ``None``."""
        return int(self.x.shape[0]) if self.n_ids is None else self.n_ids

    @property
    def n_users(self) -> int:
        """``|U|``."""
        return self.allocation.n_users

    @property
    def n_silos(self) -> int:
        """``|S|``."""
        return self.allocation.n_silos

    @property
    def counts(self) -> np.ndarray:
        """``n[s, u]``, records of user ``u`` in silo ``s``."""
        return self.allocation.counts

    def silo_records(self, silo: int) -> np.ndarray:
        """Indices of the records held by ``silo``."""
        return np.flatnonzero(self.allocation.silo == silo)

    def user_groups(
        self, silo: int, users: np.ndarray | None = None
    ) -> tuple[np.ndarray, list[np.ndarray]]:
        """The users of ``silo`` with at least one record (optionally only among ``users``) and their records.

        Returns:
            ``(user ids, per user the indices into x)``.
        """
        records = self.silo_records(silo)
        owners = self.allocation.user[records]
        present = np.unique(owners)
        if users is not None:
            present = np.intersect1d(present, users)
        order = np.argsort(owners, kind="stable")
        starts = np.searchsorted(owners[order], present)
        ends = np.searchsorted(owners[order], present, side="right")
        return present, [records[order[a:b]] for a, b in zip(starts, ends, strict=True)]

    def keep(self, mask: np.ndarray) -> Federation:
        """The federation restricted to the records where ``mask`` is true (users and silos keep their ids)."""
        mask = np.asarray(mask, dtype=bool)
        allocation = replace(
            self.allocation, user=self.allocation.user[mask], silo=self.allocation.silo[mask]
        )
        index = torch.from_numpy(np.flatnonzero(mask)).to(self.x.device)
        return replace(
            self,
            x=self.x[index],
            y=self.y[index],
            allocation=allocation,
            record_ids=self.ids[mask],
            n_ids=self.id_space,
        )

    def without_user(self, user: int) -> Federation:
        """The neighbouring federation with every record of ``user`` removed (user-level adjacency)."""
        return self.keep(self.allocation.user != user)


def heavy_user_federation(n_users: int, n_silos: int, seed: int, heavy: int = 300) -> Federation:
    """A toy federation for sensitivity checks: one heavy user and many light ones (Theorems 1 and 3).

    User 0 owns ``heavy`` records spread round-robin over all silos; ``8 * n_users`` more records get a uniformly
    random user and silo. Features are 3-dimensional Gaussians, labels a noisy threshold of the first feature, and the
    model a logistic regression (``nn.Linear(3, 1)`` with BCE).

    Args:
        n_users: Number of users.
        n_silos: Number of silos.
        seed: Seed of the records and of the model's initialisation.
        heavy: Records of user 0.

    Returns:
        The federation.
    """
    rng = np.random.default_rng(seed)
    n_light = 8 * n_users
    user = np.concatenate([np.zeros(heavy, dtype=int), rng.integers(0, n_users, n_light)])
    silo = np.concatenate([np.arange(heavy) % n_silos, rng.integers(0, n_silos, n_light)])
    x = torch.from_numpy(rng.normal(size=(user.size, 3))).float()
    y = (x[:, 0] + 0.3 * torch.from_numpy(rng.normal(size=user.size)).float() > 0).float()
    torch.manual_seed(seed)
    return Federation(
        nn.Linear(3, 1), bce_loss, x, y, Allocation(user, silo, n_users, n_silos, "toy", seed)
    )


def seed_stream(seed: np.random.SeedSequence, *path: int) -> np.random.SeedSequence:
    """The child of ``seed`` at ``path``: a fixed, named place in the tree of random streams of a run."""
    return np.random.SeedSequence(seed.entropy, spawn_key=tuple(seed.spawn_key) + tuple(path))


@contextmanager
def global_torch_seed(seed: np.random.SeedSequence) -> Iterator[None]:
    """Run a block with torch's global generator (dropout draws) seeded from ``seed``; its state is restored after.

    Training code that draws from the global generator (dropout in train mode) is thus reproducible from the run's
    seed and independent of what ran before it (another silo, another process). ``torch.manual_seed`` seeds the CUDA
    devices' generators too; where CUDA is in use their states are restored as well.
    """
    cuda = list(range(torch.cuda.device_count())) if torch.cuda.is_initialized() else []
    with torch.random.fork_rng(devices=cuda):
        torch.manual_seed(int(seed.generate_state(1, dtype=np.uint64)[0] >> 1))
        yield


def torch_generator(
    seed: np.random.SeedSequence, device: torch.device | str = "cpu"
) -> torch.Generator:
    """A torch generator on ``device`` (the CPU by default) seeded from ``seed``.

    The same seed gives the same stream on every CPU, and another stream (Philox) on a CUDA device: the run's
    draws that must not depend on the device (noise, sampling, record order) use CPU generators; a CUDA generator
    serves only per-step dropout masks.
    """
    return torch.Generator(device=device).manual_seed(
        int(seed.generate_state(1, dtype=np.uint64)[0] >> 1)
    )


def gaussian_noise(
    size: int, *, std: float, generator: torch.Generator, device: torch.device | None = None
) -> Tensor:
    """``N(0, std^2 I_size)`` from ``generator``, a CPU generator, moved to ``device`` (``None``: stays on the CPU).

    How the noise is drawn on a GPU: exactly as on the CPU, then copied. The generator is seeded from the round's
    stream of the run's root seed, which :func:`uldp.fit` takes from the OS CSPRNG (``numpy.random.SeedSequence()``,
    128 bits of OS entropy) unless given a seed, and a Flower or deployed silo from its own ``secrets``; nothing
    the device does enters it. So the guarantee rests on the same secret on every device (whoever does not know the
    root cannot predict the noise), a run's noise is the same numbers on a CPU and a GPU, and it is one
    ``[size]`` copy per silo and round (no per-step transfer). A CUDA generator seeded from the same root would keep
    the secrecy but draw other numbers (Philox), so a GPU run could not be checked against the CPU one.
    """
    return (torch.randn(size, generator=generator) * std).to(device)


#: A server-side aggregation with the signature of the secure aggregation hook (see :func:`uldp.methods.aggregate`).
AggregateFn = Callable[[list[Tensor], np.ndarray, np.ndarray, list[Tensor]], Tensor]
#: The secure aggregation hook of the methods whose weights need no counts (DEFAULT, ULDP-NAIVE, ULDP-GROUP-k,
#: ULDP-SGD / ULDP-AVG with uniform or fixed weights): ``(updates, counts, sampled) -> sum_s updates[s]``, each
#: silo's finished update (what it sends the server) in, their sum out; ``counts`` (``n[s, u]``) and ``sampled``
#: (the round's users) give the server's norm bounds. The masked sum's is
#: :meth:`uldp.federation.InProcessAggregator.sum_updates`.
SumFn = Callable[[list[Tensor], np.ndarray, np.ndarray], Tensor]


#: Sub-stream ids inside a round's SeedSequence.
KEYS_STREAM, TRAIN_STREAM, NOISE_STREAM, SAMPLING_STREAM = 0, 1, 2, 3


@runtime_checkable
class Method(Protocol):
    """What a federated method of the registry provides (Algorithms 1-4); the simulation, ``uldp.fit``, the
    deployment roles, Flower and the audits use a method through these members only.

    A class registers for one or more families of :data:`uldp.method_names.FAMILIES` by naming them, each with the
    hyperparameters it needs besides ``global_lr`` and ``batch_size``, in :attr:`REQUIRED`
    (:mod:`uldp.methods.registry`). Every random draw of a round derives from its ``round_seed``.

    Attributes:
        REQUIRED: Per family this class implements, the :class:`Hyperparameters` that must not be ``None``.
        DEFAULTS: Per family this class implements, its :class:`FitDefaults`.
        spec: The parsed registry name.
        hp: The hyperparameters.
    """

    REQUIRED: ClassVar[dict[str, tuple[str, ...]]]
    DEFAULTS: ClassVar[dict[str, FitDefaults]]

    @property
    def spec(self) -> MethodSpec:
        """The parsed registry name."""

    @property
    def hp(self) -> Hyperparameters:
        """The hyperparameters."""

    def group_size(self, federation: Federation) -> int | None:
        """The records kept per user (ULDP-GROUP-k's ``k``, Algorithm 2) on ``federation``; ``None``: all of them."""

    def keep_mask(self, federation: Federation, seed: np.random.SeedSequence) -> np.ndarray:
        """The records the method trains on (a boolean mask over ``federation``'s records), drawn from ``seed``."""

    def prepare(self, federation: Federation, seed: np.random.SeedSequence) -> Federation:
        """The federation restricted to :meth:`keep_mask`, before the first round."""

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
        """What silo ``silo`` sends the server in one round (reads only that silo's records); ``sampled`` are the
        users sampled this round, ``counts`` the whole federation's ``n[s, u]``."""

    def server_step(self, params: Tensor, total: Tensor, *, n_users: int, n_silos: int) -> Tensor:
        """The next global model from the sum ``total`` of the silos' updates."""

    def round(
        self,
        params: Tensor,
        federation: Federation,
        round_seed: np.random.SeedSequence,
        aggregate_fn: AggregateFn | None = None,
        *,
        sum_fn: SumFn | None = None,
    ) -> Tensor:
        """One whole round in this process: every silo's update, their aggregation, the server step.

        ``aggregate_fn`` sums the per-user deltas under enhanced weights (ULDP-AVG-w / ULDP-SGD-w: Protocol 1's
        hook); ``sum_fn`` sums the silos' finished updates of every other method (the masked sum's hook); each
        ``None`` sums in the clear."""

    def accounting_arguments(self, federation: Federation) -> dict:
        """What :func:`uldp.accounting.epsilon_for_method` needs besides sigma, rounds and delta."""

    def epsilon(
        self, federation: Federation, rounds: int, *, accountant: str = "rdp"
    ) -> float | None:
        """The user-level epsilon after ``rounds`` rounds by the accountant ``accountant``; ``None``: no guarantee."""


class EveryRecordSiloNoise(abc.ABC):
    """What DEFAULT / ULDP-NAIVE and ULDP-SGD / ULDP-AVG share: every record takes part, and each silo adds its own
    Gaussian noise ``N(0, noise_std(|S|)^2 I)`` to what it sends (Algorithm 1 line 14, Algorithm 3 line 18) from its
    sub-stream of the round's seed. A subclass defines ``noise_std``.
    """

    @abc.abstractmethod
    def noise_std(self, n_silos: int) -> float:
        """The std of the noise each of ``n_silos`` silos adds (the method's theorem)."""

    def group_size(self, federation: Federation) -> None:
        """No bound on the records per user: every record is used."""
        return None

    def prepare(self, federation: Federation, seed: np.random.SeedSequence) -> Federation:
        """Nothing to prepare: every record is used."""
        return federation

    def keep_mask(self, federation: Federation, seed: np.random.SeedSequence) -> np.ndarray:
        """The records :meth:`prepare` keeps: all of them."""
        return np.ones(federation.x.shape[0], dtype=bool)

    def silo_noise(
        self,
        size: int,
        n_silos: int,
        round_seed: np.random.SeedSequence,
        silo: int,
        device: torch.device | None = None,
    ) -> Tensor:
        """The noise silo ``silo`` adds, ``N(0, noise_std(|S|)^2 I)`` (zeros when the std is 0: DEFAULT), on
        ``device`` (drawn on the CPU: :func:`gaussian_noise`)."""
        generator = torch_generator(seed_stream(round_seed, NOISE_STREAM, silo))
        return gaussian_noise(size, std=self.noise_std(n_silos), generator=generator, device=device)

    def noise(
        self,
        size: int,
        n_silos: int,
        round_seed: np.random.SeedSequence,
        device: torch.device | None = None,
    ) -> list[Tensor]:
        """The noise each silo adds (:meth:`silo_noise` of every silo)."""
        return [self.silo_noise(size, n_silos, round_seed, s, device) for s in range(n_silos)]
