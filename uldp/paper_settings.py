"""The paper's experimental settings (the authors' values, collected in the paper's ``settings.md``), written once.

The paper (Section 5) gives no hyperparameter table; ``settings.md`` collects the authors' values for every figure.
This module holds them as data and nothing else (no torch, no I/O): :class:`uldp.simulation.RunConfig` fills its
unset hyperparameters, silos and batch size from :data:`PAPER`, and the experiment grids
(:mod:`uldp.experiments.grids`) build their paper-profile runs from :data:`PRIVACY_UTILITY`, :data:`WEIGHTING`,
:data:`USER_SAMPLING` and :data:`PROTOCOL_RUNTIME`. ``tests/test_paper_settings.py`` checks the whole of it against
the tables of ``settings.md``.

Hyperparameters are given per method *family* (the ``family`` of :func:`uldp.methods.parse_method`: ``"DEFAULT"``,
``"ULDP-NAIVE"``, ``"ULDP-GROUP"``, ``"ULDP-SGD"``, ``"ULDP-AVG"``): every ULDP-GROUP-k shares its row, and the
enhanced-weighting variants (``-w``) share their family's.

>>> avg = PAPER["mnist"].hyper("ULDP-AVG")
>>> avg.params(100)["global_lr"], avg.params(10000)["global_lr"]
(10.0, 100.0)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Mapping

#: Noise multiplier and delta of every run of the paper.
SIGMA, DELTA = 5.0, 1e-5
#: Seeds of the paper profile (the paper averages 5 runs).
PAPER_SEEDS: tuple[int, ...] = (0, 1, 2, 3, 4)
#: The ULDP-GROUP-k variants of the privacy-utility figures.
GROUP_METHODS: tuple[str, ...] = ("ULDP-GROUP-max", "ULDP-GROUP-median", "ULDP-GROUP-2", "ULDP-GROUP-8")
#: The methods of the privacy-utility figures, in the paper's legend order.
PRIVACY_UTILITY_METHODS: tuple[str, ...] = (
    "DEFAULT", "ULDP-NAIVE", *GROUP_METHODS, "ULDP-SGD", "ULDP-AVG", "ULDP-AVG-w"
)
#: Method families, in the order of settings.md's rows.
FAMILIES: tuple[str, ...] = ("DEFAULT", "ULDP-NAIVE", "ULDP-GROUP", "ULDP-SGD", "ULDP-AVG")


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
        families: Hyperparameters per method family.
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
            raise ValueError(f"unknown method family {family!r}; known families: {', '.join(self.families)}")
        return self.families[family]


def _families(default: Hyper, naive: Hyper, group: Hyper, sgd: Hyper, avg: Hyper) -> dict[str, Hyper]:
    return dict(zip(FAMILIES, (default, naive, group, sgd, avg), strict=True))


_SGD = Hyper(10.0, 0.1, None, None)
#: Every dataset's settings. The four of the privacy-utility figures are :data:`PRIVACY_UTILITY`; the synthetic
#: dataset has no such figure: its row is the defaults of its runs (the protocol-runtime figure's 20 users and 3
#: silos, T = 3, and the medical datasets' hyperparameters).
PAPER: dict[str, DatasetSettings] = {
    settings.dataset: settings
    for settings in (
        DatasetSettings("creditcard", (100, 1000), 5, 100, 64, ("uniform", "zipf"),
                        _families(Hyper(1.0, None, 0.01, 50), Hyper(1.0, 0.1, 0.01, 50), Hyper(1.0, 0.1, 0.01, 50),
                                  _SGD, Hyper(10.0, 0.1, 0.01, 30))),
        # ULDP-NAIVE was not run by the authors on MNIST; settings.md: the Creditcard row's shape with C = 1.0.
        DatasetSettings("mnist", (100, 10000), 5, 200, 64, ("uniform", "zipf", "zipf-noniid"),
                        _families(Hyper(1.0, None, 0.01, 50), Hyper(1.0, 1.0, 0.01, 50), Hyper(1.0, 1.0, 0.01, 50),
                                  _SGD, Hyper(10.0, 0.1, 0.01, 50, global_lr_by_users=((10000, 100.0),)))),
        DatasetSettings("heart_disease", (50, 200), 4, 50, 4, ("uniform", "zipf"),
                        _families(Hyper(1.0, None, 0.001, 50), Hyper(1.0, 0.1, 0.001, 50),
                                  Hyper(1.0, 0.1, 0.001, 50), _SGD, Hyper(10.0, 0.1, 0.001, 50))),
        DatasetSettings("tcga_brca", (50, 200), 6, 50, 8, ("uniform", "zipf"),
                        _families(Hyper(1.0, None, 0.001, 50), Hyper(1.0, 0.1, 0.001, 50),
                                  Hyper(0.1, 100.0, 0.001, 50), _SGD, Hyper(10.0, 0.1, 0.001, 50))),
        DatasetSettings("synthetic", (20,), 3, 3, 64, ("uniform",),
                        _families(Hyper(1.0, None, 0.001, 50), Hyper(1.0, 0.1, 0.001, 50),
                                  Hyper(1.0, 0.1, 0.001, 50), _SGD, Hyper(10.0, 0.1, 0.001, 50))),
    )
}
#: The datasets of the privacy-utility figures (Figures 4-7), in the paper's order.
PRIVACY_UTILITY: dict[str, DatasetSettings] = {
    name: PAPER[name] for name in ("creditcard", "mnist", "heart_disease", "tcga_brca")
}


@dataclass(frozen=True)
class FigureSetting:
    """One dataset's runs in one of the other figures (a row of settings.md's tables; silos and batch size are the
    dataset's unless given).

    Attributes:
        dataset: Registry name.
        users: The user counts |U|.
        silos: The silo counts |S|.
        distributions: Allocation schemes.
        rounds: Rounds T.
        hyper: The hyperparameters of its methods.
        methods: The methods compared.
        q: User-level Poisson sampling rates.
    """

    dataset: str
    users: tuple[int, ...]
    silos: tuple[int, ...]
    distributions: tuple[str, ...]
    rounds: int
    hyper: Hyper
    methods: tuple[str, ...]
    q: tuple[float, ...] = (1.0,)

    @property
    def batch_size(self) -> int:
        """The dataset's local batch size (settings.md, "Shared by all runs")."""
        return PAPER[self.dataset].batch_size


#: Figure 8, enhanced weighting (test loss, ULDP-AVG vs ULDP-AVG-w).
WEIGHTING: tuple[FigureSetting, ...] = (
    FigureSetting("creditcard", (1000,), (5, 20, 50), ("uniform", "zipf"), 100, Hyper(10.0, 1.0, 0.01, 30),
                  ("ULDP-AVG", "ULDP-AVG-w")),
    FigureSetting("tcga_brca", (200,), (6,), ("uniform", "zipf"), 50, Hyper(10.0, 0.1, 0.001, 50),
                  ("ULDP-AVG", "ULDP-AVG-w")),
)
#: Figure 9, user-level sub-sampling (ULDP-AVG-w with Poisson user sampling rate q).
USER_SAMPLING: tuple[FigureSetting, ...] = (
    FigureSetting("creditcard", (1000,), (5,), ("zipf",), 100, Hyper(10.0, 1.0, 0.01, 30), ("ULDP-AVG-w",),
                  q=(0.1, 0.3, 0.5, 0.7, 1.0)),
    FigureSetting("mnist", (10000,), (5,), ("zipf",), 200, Hyper(100.0, 0.1, 0.01, 50), ("ULDP-AVG-w",),
                  q=(0.1, 0.3, 0.5, 1.0)),
)
#: Figure 10, the private weighting protocol's runtime on the medical datasets (secure aggregation).
PROTOCOL_RUNTIME: tuple[FigureSetting, ...] = tuple(
    FigureSetting(dataset, (10, 100), (PAPER[dataset].n_silos,), ("zipf",), 3, Hyper(10.0, 0.1, 0.001, 50),
                  ("ULDP-AVG-w",))
    for dataset in ("heart_disease", "tcga_brca")
)
