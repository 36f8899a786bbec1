"""Default hyperparameters of the registered datasets: the paper's values (its ``settings.md``), as data.

The paper (Section 5) gives no hyperparameter table; ``settings.md`` collects the authors' values. They are the
library's defaults for the datasets it ships loaders for: :class:`uldp.simulation.RunConfig` fills its unset
hyperparameters, silos and batch size from :data:`DATASET_DEFAULTS`, and :class:`uldp.data.DatasetSpec` its default
silo count. The reproduction's own figure settings (seeds, method lists, the other figures' rows) are in
:mod:`uldp.paper.settings`, and ``tests/test_paper_settings.py`` checks both against the tables of ``settings.md``.
No torch and no I/O here.

Hyperparameters are given per method *family* (:data:`uldp.method_names.FAMILIES`): every ULDP-GROUP-k shares its
row, and the enhanced-weighting variants (``-w``) share their family's.

>>> avg = DATASET_DEFAULTS["mnist"].hyper("ULDP-AVG")
>>> avg.params(100)["global_lr"], avg.params(10000)["global_lr"]
(10.0, 100.0)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from uldp.method_names import FAMILIES

if TYPE_CHECKING:
    from collections.abc import Mapping

#: Noise multiplier and delta of every run of the paper (the defaults of a registered dataset's runs).
SIGMA, DELTA = 5.0, 1e-5


@dataclass(frozen=True)
class Hyper:
    """One method family's hyperparameters in one figure (a row of settings.md).

    Attributes:
        global_lr: Server learning rate eta_g.
        clip: Clipping bound C (``None`` for DEFAULT).
        local_lr: Local learning rate eta_l (``None`` for ULDP-SGD, one gradient step).
        local_epochs: Local epochs Q (``None`` for ULDP-SGD).
        global_lr_by_users: ``global_lr`` of the user counts whose row gives another one (settings.md: MNIST's
            ULDP-AVG, "10.0 (100 users), 100.0 (10000 users)"); every other count takes ``global_lr``.
    """

    global_lr: float
    clip: float | None
    local_lr: float | None
    local_epochs: int | None
    global_lr_by_users: tuple[tuple[int, float], ...] = ()

    def params(self, n_users: int) -> dict[str, Any]:
        """The run arguments this row fixes for a setting with ``n_users`` users."""
        return {
            "global_lr": dict(self.global_lr_by_users).get(n_users, self.global_lr),
            "clip": self.clip,
            "local_lr": self.local_lr,
            "local_epochs": self.local_epochs,
        }


@dataclass(frozen=True)
class DatasetSettings:
    """A dataset's settings (settings.md, "Shared by all runs" and "Privacy-utility figures").

    Attributes:
        dataset: Registry name (:data:`uldp.data.DATASETS`).
        users: The user counts |U| of its privacy-utility figure.
        n_silos: Silos |S| (fixed by FLamby for the medical datasets).
        rounds: Rounds T.
        batch_size: Local batch size.
        distributions: Allocation schemes (the users/silos pairs of the paper).
        families: Hyperparameters keyed by method family (:data:`uldp.method_names.FAMILIES`); a family no row
            names has no default here (:meth:`hyper` says so). Adding a family is one entry per dataset.
    """

    dataset: str
    users: tuple[int, ...]
    n_silos: int
    rounds: int
    batch_size: int
    distributions: tuple[str, ...]
    families: Mapping[str, Hyper]

    def hyper(self, family: str) -> Hyper:
        """The row of a method family.

        Raises:
            ValueError: Unknown family (the message lists the known ones).
        """
        if family not in self.families:
            raise ValueError(
                f"no {self.dataset} defaults for method family {family!r}; families with defaults: "
                f"{', '.join(self.families)}"
            )
        return self.families[family]

    def __post_init__(self) -> None:
        unknown = sorted(set(self.families) - set(FAMILIES))
        if unknown:
            raise ValueError(
                f"{self.dataset}: unknown method families {unknown}; known families: {', '.join(FAMILIES)}"
            )


_SGD = Hyper(10.0, 0.1, None, None)
#: Every registered dataset's settings. The four of the paper's privacy-utility figures are
#: :data:`uldp.paper.settings.PRIVACY_UTILITY`; the synthetic
#: dataset has no such figure: its row is the defaults of its runs (the protocol-runtime figure's 20 users and 3
#: silos, T = 3, and the medical datasets' hyperparameters).
DATASET_DEFAULTS: dict[str, DatasetSettings] = {
    settings.dataset: settings
    for settings in (
        DatasetSettings(
            "creditcard",
            (100, 1000),
            5,
            100,
            64,
            ("uniform", "zipf"),
            {
                "DEFAULT": Hyper(1.0, None, 0.01, 50),
                "ULDP-NAIVE": Hyper(1.0, 0.1, 0.01, 50),
                "ULDP-GROUP": Hyper(1.0, 0.1, 0.01, 50),
                "ULDP-SGD": _SGD,
                "ULDP-AVG": Hyper(10.0, 0.1, 0.01, 30),
            },
        ),
        # ULDP-NAIVE was not run by the authors on MNIST; settings.md: the Creditcard row's shape with C = 1.0.
        DatasetSettings(
            "mnist",
            (100, 10000),
            5,
            200,
            64,
            ("uniform", "zipf", "zipf-noniid"),
            {
                "DEFAULT": Hyper(1.0, None, 0.01, 50),
                "ULDP-NAIVE": Hyper(1.0, 1.0, 0.01, 50),
                "ULDP-GROUP": Hyper(1.0, 1.0, 0.01, 50),
                "ULDP-SGD": _SGD,
                "ULDP-AVG": Hyper(10.0, 0.1, 0.01, 50, global_lr_by_users=((10000, 100.0),)),
            },
        ),
        DatasetSettings(
            "heart_disease",
            (50, 200),
            4,
            50,
            4,
            ("uniform", "zipf"),
            {
                "DEFAULT": Hyper(1.0, None, 0.001, 50),
                "ULDP-NAIVE": Hyper(1.0, 0.1, 0.001, 50),
                "ULDP-GROUP": Hyper(1.0, 0.1, 0.001, 50),
                "ULDP-SGD": _SGD,
                "ULDP-AVG": Hyper(10.0, 0.1, 0.001, 50),
            },
        ),
        DatasetSettings(
            "tcga_brca",
            (50, 200),
            6,
            50,
            8,
            ("uniform", "zipf"),
            {
                "DEFAULT": Hyper(1.0, None, 0.001, 50),
                "ULDP-NAIVE": Hyper(1.0, 0.1, 0.001, 50),
                "ULDP-GROUP": Hyper(0.1, 100.0, 0.001, 50),
                "ULDP-SGD": _SGD,
                "ULDP-AVG": Hyper(10.0, 0.1, 0.001, 50),
            },
        ),
        DatasetSettings(
            "synthetic",
            (20,),
            3,
            3,
            64,
            ("uniform",),
            {
                "DEFAULT": Hyper(1.0, None, 0.001, 50),
                "ULDP-NAIVE": Hyper(1.0, 0.1, 0.001, 50),
                "ULDP-GROUP": Hyper(1.0, 0.1, 0.001, 50),
                "ULDP-SGD": _SGD,
                "ULDP-AVG": Hyper(10.0, 0.1, 0.001, 50),
            },
        ),
    )
}
