"""The configuration of one simulated run, :class:`RunConfig`: the paper's settings for a dataset and method unless
given, every value checked (:mod:`uldp.simulation` runs it).

Unset hyperparameters take the paper's values for the dataset and method (the paper's settings.md, collected in
:data:`uldp.defaults.DATASET_DEFAULTS`); :data:`STORED_NAMES` maps the names stored runs use to today's fields.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from uldp.accounting import check_accountant
from uldp.common.checks import check_integer, check_positive, renamed_keyword
from uldp.data import DATASETS, SCHEMES
from uldp.data.allocation import MAX_SILOS, MAX_USERS, PAPER_N_LABELS
from uldp.data.base import check_test_scoring
from uldp.defaults import DATASET_DEFAULTS, DELTA, SIGMA
from uldp.method_names import PROTOCOL_1
from uldp.methods import make_method
from uldp.methods.base import Hyperparameters, parse_method
from uldp.methods.registry import unused_hyperparameters
from uldp.secure.config import ProtocolParameters
from uldp.training.device import check_precision_for, resolve_device


def paper_hyperparameters(dataset: str, method: str, n_users: int) -> dict[str, Any]:
    """The paper's ``global_lr``, ``clip``, ``local_lr``, ``local_epochs`` for a dataset, method and user count
    (the method family's row of :data:`uldp.defaults.DATASET_DEFAULTS`).

    Raises:
        ValueError: Unknown dataset or method (the message lists the known ones).

    Example:
        >>> paper_hyperparameters("mnist", "ULDP-AVG-w", 10000)["global_lr"]
        100.0
    """
    if dataset not in DATASET_DEFAULTS:
        raise ValueError(
            f"unknown dataset {dataset!r}; known datasets: {', '.join(DATASET_DEFAULTS)}"
        )
    return DATASET_DEFAULTS[dataset].hyper(parse_method(method).family).params(n_users)


@dataclass(frozen=True)
class RunConfig:
    """Everything that defines one run; unset (``None``) values are filled from the paper's settings.

    Attributes:
        dataset: ``"creditcard"``, ``"mnist"``, ``"heart_disease"``, ``"tcga_brca"`` or ``"synthetic"``.
        method: A registry name of :mod:`uldp.methods` (``"ULDP-AVG-w"``, ``"ULDP-GROUP-8"``, ...).
        n_users: Number of users ``|U|`` >= 1.
        rounds: Number of rounds ``T`` >= 1.
        seed: The one seed of every random draw.
        n_silos: Number of silos (``None``: 5 for Creditcard/MNIST, 3 synthetic, FLamby's 4 and 6 for the medical sets).
        distribution: Allocation scheme, one of :data:`uldp.data.SCHEMES` (``"uniform"``, ``"zipf"``,
            ``"zipf-noniid"``, ``"uniform-with-replacement"``).
        local_epochs: ``Q`` (``None``: the paper's; stays ``None`` for ULDP-SGD).
        global_lr: ``eta_g`` > 0.
        local_lr: ``eta_l`` > 0 (stays ``None`` for ULDP-SGD).
        clip: ``C`` > 0 (stays ``None`` for DEFAULT).
        sigma: Noise multiplier > 0 (5.0; ``None`` for DEFAULT).
        q: User-level Poisson sampling rate in (0, 1] (ULDP-SGD/AVG only).
        delta: Target delta.
        batch_size: Local batch size.
        user_weights: Optional fixed ULDP-SGD/AVG weights ``[S][U]``, each user's column summing to 1.
        secure: Secure aggregation (CONTRIBUTING's glossary), the method's own as Flower and ``uldp deploy`` run
            it, here with every party in this process (:func:`uldp.simulation.secure_aggregator`): Protocol 1, the
            private weighting protocol, for ULDP-AVG-w / ULDP-SGD-w; the masked sum (Protocol 1's pairwise masks
            alone) for every other method, DEFAULT included (what Flower runs when every silo allows a method
            without noise). Not with fixed ``user_weights`` for the -w methods (Protocol 1 computes n_su / N_u).
        protocol: Protocol 1's :class:`~uldp.secure.config.ProtocolParameters` for ``secure`` runs (the paper's
            3072-bit key and N_max = 2000 by default, and the backend ``"auto"`` unless named:
            :meth:`~uldp.secure.config.ProtocolParameters.for_user`; a mapping of its fields is accepted, as JSON
            gives it).
        max_train_records: Use a stratified random subset of at most this many training records (smaller runs).
        n_labels: Labels per user for ``zipf-noniid`` (2, as in the paper).
        test_scoring: How the test set is prepared (:data:`uldp.data.TEST_SCORINGS`): ``"pooled"``, the authors'
            scoring (FLamby's pooled test set for the medical datasets), or ``"per-centre"`` (medical datasets only).
        accountant: The privacy accountant of the reported epsilon and of the budget: ``"rdp"`` (the paper's) or
            ``"pld"`` (tighter; :mod:`uldp.accounting.pld`).
        epsilon: A target epsilon, the privacy budget (user-level epsilon at ``delta`` after ``rounds`` rounds,
            by ``accountant``). With ``sigma`` unset, sigma is the smallest that meets it (calibrated when the run
            is prepared: ULDP-GROUP-k's silo sizes are known only then); with ``sigma`` set, the run refuses to
            start when its first round exceeds the budget and stops before the first round that would. Its old
            name ``target_epsilon`` is accepted for one release, with a ``DeprecationWarning``; stored runs keep
            it as their argument's name (:data:`STORED_NAMES`).
        device: Where to train (:func:`uldp.training.device.resolve_device`): ``"cpu"`` (the default),
            ``"cuda"`` or ``"cuda:<index>"``, kept as ``str(torch.device)``. Not a run argument of the grids (a
            stored run's key does not depend on it); the resolved configuration and the provenance name it.
        precision: ``"float32"`` (the default), ``"tf32"`` or ``"bf16"`` (:mod:`uldp.training.device`; bf16 not
            for ULDP-GROUP-k).

    Raises:
        ValueError: On any bad value (the message names it and what is allowed).
    """

    dataset: str
    method: str
    n_users: int
    rounds: int
    seed: int = 0
    n_silos: int | None = None
    distribution: str = "uniform"
    local_epochs: int | None = None
    global_lr: float | None = None
    local_lr: float | None = None
    clip: float | None = None
    sigma: float | None = None
    q: float = 1.0
    delta: float = DELTA
    batch_size: int | None = None
    user_weights: tuple[tuple[float, ...], ...] | None = None
    secure: bool = False
    protocol: ProtocolParameters = field(default_factory=lambda: ProtocolParameters.for_user(None))
    max_train_records: int | None = None
    n_labels: int = PAPER_N_LABELS
    test_scoring: str = "pooled"
    accountant: str = "rdp"
    epsilon: float | None = None
    device: str = "cpu"
    precision: str = "float32"

    def __post_init__(self) -> None:
        spec = parse_method(self.method)
        check_accountant(self.accountant)
        object.__setattr__(self, "device", str(resolve_device(self.device)))
        check_precision_for(spec.family, self.precision)
        if self.epsilon is not None:
            check_positive("epsilon", self.epsilon)
            if not spec.private:
                raise ValueError(
                    f"epsilon needs a private method; {spec.name} has no privacy guarantee"
                )
        if self.dataset not in DATASET_DEFAULTS:
            raise ValueError(
                f"unknown dataset {self.dataset!r}; known datasets: {', '.join(DATASET_DEFAULTS)}"
            )
        check_integer("n_users", self.n_users, maximum=MAX_USERS)
        check_integer("rounds", self.rounds)
        check_integer("seed", self.seed, minimum=0)
        if self.n_silos is not None:
            check_integer("n_silos", self.n_silos, maximum=MAX_SILOS)
        if self.distribution not in SCHEMES:
            raise ValueError(
                f"distribution must be one of {', '.join(SCHEMES)}, got {self.distribution!r}"
            )
        if self.secure and self.user_weights is not None and spec.secure_aggregation == PROTOCOL_1:
            raise ValueError(
                f"secure=True runs Protocol 1 for {spec.name}, which computes the weights n_su / N_u, not fixed "
                f"user_weights; give fixed weights to {spec.family} (its masked sum) instead"
            )
        object.__setattr__(self, "protocol", ProtocolParameters.for_user(self.protocol))
        if self.max_train_records is not None:
            check_integer("max_train_records", self.max_train_records)
        check_test_scoring(self.test_scoring)
        if self.test_scoring != "pooled" and not DATASETS[self.dataset].fixed_silos:
            raise ValueError(
                f"dataset {self.dataset!r} has one test set; test_scoring must be 'pooled', "
                f"got {self.test_scoring!r}"
            )
        if self.user_weights is not None:
            weights = np.asarray(self.user_weights, dtype=float)
            if (
                weights.ndim != 2
                or (weights < 0).any()
                or not np.allclose(weights.sum(axis=0), 1.0, atol=1e-9)
            ):
                sums = weights.sum(axis=0) if weights.ndim == 2 else weights
                raise ValueError(
                    f"user_weights must be [silos][users] >= 0 with each user's weights summing to 1 "
                    f"over silos; got column sums {np.round(sums, 6).tolist()[:8]}"
                )
            object.__setattr__(
                self, "user_weights", tuple(tuple(float(v) for v in row) for row in weights)
            )
        object.__setattr__(self, "method", spec.name)
        paper = paper_hyperparameters(self.dataset, spec.name, self.n_users)
        unused = unused_hyperparameters(spec.family)
        calibrate = (
            self.epsilon is not None and self.sigma is None
        )  # sigma stays None until prepared
        defaults = {
            **paper,
            "sigma": None if not spec.private or calibrate else SIGMA,
            "batch_size": DATASET_DEFAULTS[self.dataset].batch_size,
        }
        for name, value in defaults.items():
            if getattr(self, name) is None and name not in unused:
                object.__setattr__(self, name, value)
        if self.n_silos is None:
            object.__setattr__(self, "n_silos", DATASET_DEFAULTS[self.dataset].n_silos)
        # validates learning rates, C, sigma, q, delta, Q, batch size for this method (any sigma while calibrating)
        (replace(self, sigma=SIGMA) if calibrate else self).hyperparameters()

    def hyperparameters(self) -> Hyperparameters:
        """The method's :class:`~uldp.methods.Hyperparameters` (raises ``ValueError`` on bad values)."""
        if (
            self.global_lr is None or self.batch_size is None
        ):  # __post_init__ fills both for every method
            raise ValueError(
                f"a run needs global_lr and batch_size; got global_lr={self.global_lr!r}, "
                f"batch_size={self.batch_size!r}"
            )
        hp = Hyperparameters(
            global_lr=self.global_lr,
            local_lr=self.local_lr,
            local_epochs=self.local_epochs,
            batch_size=self.batch_size,
            clip=self.clip,
            sigma=self.sigma,
            delta=self.delta,
            q=self.q,
        )
        make_method(
            self.method,
            hp,
            user_weights=None if self.user_weights is None else np.asarray(self.user_weights),
        )
        return hp

    @property
    def target_epsilon(self) -> float | None:
        """Deprecated (one release): :attr:`epsilon`."""
        warnings.warn(
            "RunConfig.target_epsilon is deprecated and will be removed in the next release; use .epsilon",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.epsilon


# the old keyword, for one release
RunConfig.__init__ = renamed_keyword("target_epsilon", "epsilon")(RunConfig.__init__)  # type: ignore[method-assign]
#: Run arguments as stored runs name them (``results/**/*.json``'s ``params``, and checkpoints' fingerprints) ->
#: ``RunConfig``'s names: their keys are hashes of the stored names, which therefore stay.
STORED_NAMES = {"target_epsilon": "epsilon"}
