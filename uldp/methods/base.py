"""What every federated method shares: the parsed method name, its hyperparameters, the federation it trains on.

A method (:mod:`uldp.methods.fedavg`, :mod:`uldp.methods.group`, :mod:`uldp.methods.uldp_avg`) is a silo-side update
(local training, clipping, weighting, noise with the std of its theorem), a server-side aggregation and its
accountant from :mod:`uldp.accounting`. All randomness of a round comes from one ``numpy.random.SeedSequence``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace

import numpy as np
import torch
from torch import Tensor, nn

from uldp.checks import check_integer, check_number, check_positive, check_rate
from uldp.data.base import Allocation
from uldp.training.per_user import LossFunction

#: Method families and the names of the registry (``k`` stands for a positive integer group size).
FAMILIES: tuple[str, ...] = ("DEFAULT", "ULDP-NAIVE", "ULDP-GROUP", "ULDP-SGD", "ULDP-AVG")
KNOWN_METHODS: tuple[str, ...] = (
    "DEFAULT", "ULDP-NAIVE", "ULDP-GROUP-k", "ULDP-GROUP-max", "ULDP-GROUP-median",
    "ULDP-SGD", "ULDP-SGD-w", "ULDP-AVG", "ULDP-AVG-w",
)


@dataclass(frozen=True)
class MethodSpec:
    """A parsed method name.

    Attributes:
        name: The canonical registry name (``"ULDP-GROUP-8"``, ``"ULDP-AVG-w"``, ...).
        family: One of :data:`FAMILIES`.
        enhanced_weights: ULDP-SGD/AVG: ``w_su = n_su / N_u`` (``-w``) instead of ``1 / |S|``.
        group_size: ULDP-GROUP: ``k`` (an int, ``"max"`` or ``"median"``); otherwise ``None``.
    """

    name: str
    family: str
    enhanced_weights: bool = False
    group_size: int | str | None = None

    @property
    def private(self) -> bool:
        """Whether the method has a user-level DP guarantee (all but DEFAULT)."""
        return self.family != "DEFAULT"

    @property
    def reads_users(self) -> bool:
        """Whether training reads who owns each record (all but DEFAULT and ULDP-NAIVE, which use every record of a
        silo alike): with fixed silos, a user-blind method's run does not depend on the users' allocation."""
        return self.family not in ("DEFAULT", "ULDP-NAIVE")

    @property
    def per_user(self) -> bool:
        """Whether the method clips per user and silo (ULDP-SGD/AVG, with user-level sampling)."""
        return self.family in ("ULDP-SGD", "ULDP-AVG")


def parse_method(name: str) -> MethodSpec:
    """Parse a registry name.

    Args:
        name: ``"DEFAULT"``, ``"ULDP-NAIVE"``, ``"ULDP-GROUP-<k>"`` (``k`` a positive int, ``max`` or ``median``),
            ``"ULDP-SGD"``, ``"ULDP-SGD-w"``, ``"ULDP-AVG"`` or ``"ULDP-AVG-w"``.

    Returns:
        The :class:`MethodSpec`.

    Raises:
        ValueError: Unknown name; the message lists the known ones.

    Example:
        >>> parse_method("ULDP-GROUP-8").group_size, parse_method("ULDP-AVG-w").enhanced_weights
        (8, True)
    """
    if name in ("DEFAULT", "ULDP-NAIVE"):
        return MethodSpec(name, name)
    if name in ("ULDP-SGD", "ULDP-AVG", "ULDP-SGD-w", "ULDP-AVG-w"):
        return MethodSpec(name, name.removesuffix("-w"), enhanced_weights=name.endswith("-w"))
    prefix = "ULDP-GROUP-"
    if isinstance(name, str) and name.startswith(prefix):
        suffix = name[len(prefix):]
        if suffix in ("max", "median"):
            return MethodSpec(name, "ULDP-GROUP", group_size=suffix)
        if suffix.isdigit() and int(suffix) >= 1:
            return MethodSpec(f"{prefix}{int(suffix)}", "ULDP-GROUP", group_size=int(suffix))
    raise ValueError(f"unknown method {name!r}; known methods: {', '.join(KNOWN_METHODS)} (k a positive integer)")


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
class Federation:
    """The training records of a federation: who holds them (silo), whose they are (user), and the model.

    Attributes:
        model: The architecture (mode and buffers are used; parameters travel as flat vectors).
        loss_fn: Weighted mean loss of the model.
        x: All training records.
        y: Their targets.
        allocation: User and silo of every record.
        record_ids: Stable id of every record (``None``: ``0..n-1``); removing records keeps the others' ids, so
            their random draws (record order) stay the same in a neighbouring federation.
        n_ids: Size of the id space (``None``: ``n``).
    """

    model: nn.Module
    loss_fn: LossFunction
    x: Tensor
    y: Tensor
    allocation: Allocation
    record_ids: np.ndarray | None = None
    n_ids: int | None = None

    def __post_init__(self) -> None:
        if self.record_ids is None:
            object.__setattr__(self, "record_ids", np.arange(self.x.shape[0]))
        if self.n_ids is None:
            object.__setattr__(self, "n_ids", int(self.x.shape[0]))

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

    def user_groups(self, silo: int, users: np.ndarray | None = None) -> tuple[np.ndarray, list[np.ndarray]]:
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
        return present, [records[order[a:b]] for a, b in zip(starts, ends)]

    def keep(self, mask: np.ndarray) -> Federation:
        """The federation restricted to the records where ``mask`` is true (users and silos keep their ids)."""
        mask = np.asarray(mask, dtype=bool)
        allocation = replace(self.allocation, user=self.allocation.user[mask], silo=self.allocation.silo[mask])
        index = torch.from_numpy(np.flatnonzero(mask))
        return replace(self, x=self.x[index], y=self.y[index], allocation=allocation,
                       record_ids=self.record_ids[mask])

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
    from uldp.models import bce_loss

    rng = np.random.default_rng(seed)
    n_light = 8 * n_users
    user = np.concatenate([np.zeros(heavy, dtype=int), rng.integers(0, n_users, n_light)])
    silo = np.concatenate([np.arange(heavy) % n_silos, rng.integers(0, n_silos, n_light)])
    x = torch.from_numpy(rng.normal(size=(user.size, 3))).float()
    y = (x[:, 0] + 0.3 * torch.from_numpy(rng.normal(size=user.size)).float() > 0).float()
    torch.manual_seed(seed)
    return Federation(nn.Linear(3, 1), bce_loss, x, y, Allocation(user, silo, n_users, n_silos, "toy", seed))


def seed_stream(seed: np.random.SeedSequence, *path: int) -> np.random.SeedSequence:
    """The child of ``seed`` at ``path``: a fixed, named place in the tree of random streams of a run."""
    return np.random.SeedSequence(seed.entropy, spawn_key=tuple(seed.spawn_key) + tuple(path))


@contextmanager
def global_torch_seed(seed: np.random.SeedSequence) -> Iterator[None]:
    """Run a block with torch's global generator (dropout draws) seeded from ``seed``; its state is restored after.

    Training code that draws from the global generator (dropout in train mode) is thus reproducible from the run's
    seed and independent of what ran before it (another silo, another process).
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed.generate_state(1, dtype=np.uint64)[0] >> 1))
        yield


def torch_generator(seed: np.random.SeedSequence) -> torch.Generator:
    """A torch CPU generator seeded from ``seed``."""
    return torch.Generator().manual_seed(int(seed.generate_state(1, dtype=np.uint64)[0] >> 1))


def gaussian_noise(size: int, *, std: float, generator: torch.Generator) -> Tensor:
    """``N(0, std^2 I_size)`` (simulation noise, from the run's seeded generator)."""
    return torch.randn(size, generator=generator) * std


#: A server-side aggregation with the signature of the secure aggregation hook (see :func:`uldp.methods.aggregate`).
AggregateFn = Callable[[list[Tensor], np.ndarray, np.ndarray, list[Tensor]], Tensor]
