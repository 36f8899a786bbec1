"""Default hyperparameters of the registered datasets: the paper's values (its ``settings.md``), as data.

The paper (Section 5) gives no hyperparameter table; ``settings.md`` collects the authors' values. They are the
library's defaults for the datasets it ships loaders for: :class:`uldp.simulation.RunConfig` fills its unset
hyperparameters, silos and batch size from :data:`DATASET_DEFAULTS`, and :class:`uldp.data.DatasetSpec` its default
silo count. Each dataset's row lives in its one registry entry (:mod:`uldp.data.registry`, with its loader, model and
files); :data:`DATASET_DEFAULTS` is a live view of those rows, so a registered dataset brings its own. The
reproduction's own figure settings (seeds, method lists, the other figures' rows) are in :mod:`uldp.paper.settings`,
and ``tests/test_paper_settings.py`` checks both against the tables of ``settings.md``. No torch and no I/O here.

Hyperparameters are keyed by method *family* (:data:`uldp.method_names.FAMILIES`): every ULDP-GROUP-k shares its
row, and the enhanced-weighting variants (``-w``) share their family's.

>>> avg = DATASET_DEFAULTS["mnist"].hyper("ULDP-AVG")
>>> avg.params(100)["global_lr"], avg.params(10000)["global_lr"]
(10.0, 100.0)
"""

from __future__ import annotations

from uldp.data.registry import DatasetSettings, Hyper, RegistryView

__all__ = ["DATASET_DEFAULTS", "DELTA", "SIGMA", "DatasetSettings", "Hyper"]

#: Noise multiplier and delta of every run of the paper (the defaults of a registered dataset's runs).
SIGMA, DELTA = 5.0, 1e-5

#: Every registered dataset's settings by name (a view of :data:`uldp.data.registry.DATASETS`).
DATASET_DEFAULTS: RegistryView[DatasetSettings] = RegistryView(lambda spec: spec.settings)
