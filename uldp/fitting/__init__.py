"""Bring your own federation: train any PyTorch model on your own records with user-level DP, in one call.

:func:`fit` takes a model, records ``x, y``, and for every record the id of the user (patient) it belongs to and of
the silo (hospital) that holds it. Ids may be any hashable values (strings, ints, tuples); users are numbered in
sorted order of their ids, silos too (``history.users`` / ``history.silos`` give the order). A method of the
registry (:mod:`uldp.methods`: Algorithms 1-4 of the paper) then trains it for ``rounds`` rounds with either a noise
multiplier ``sigma`` or a target ``epsilon`` (solved for sigma by :func:`uldp.accounting.sigma_for_epsilon`, RDP),
and reports per round the test loss, your metrics and the user-level epsilon spent (Theorems 1 and 3).

Standard torch losses are adapted to the library's weighted-loss interface by :func:`weighted_loss`; modules that
per-user training cannot run are refused before training by :func:`check_module`, naming the layer and the fix.

:func:`fit` resolves your inputs (:mod:`uldp.fitting.inputs`) into a federation and trains it with
:func:`prepare_method` and the round loop :func:`train_rounds` (:mod:`uldp.fitting.rounds`), the two that
:func:`uldp.simulation.run` calls for the paper's registered datasets. So a registered dataset is one call of
:func:`fit`: its records, its allocation's user and silo ids, :func:`uldp.models.build_model` and
:func:`uldp.models.loss_function` end at ``run``'s model bit for bit, for every method (``tests/test_fitting.py``).

Every random draw (user sampling, record order, dropout, noise) derives from one ``numpy.random.SeedSequence``
(round ``t``'s stream is :func:`round_seed`), never from torch's global generator. By default (``seed=None``) its
entropy
comes from the operating system, so nobody can recompute the noise: the guarantee of Theorems 1-3 needs the noise to
be unknown to the adversary, who in differential privacy may know every record but the target's and re-run this very
call on both neighbours. With ``seed=<int>`` two calls with the same arguments give the same model (research,
tests), and :class:`SeedWarning` says that the guarantee then holds only while the seed stays secret. The model you
pass is not modified; a trained copy is returned. (Its initial weights are yours: build it under a fixed
``torch.random.fork_rng()`` / ``torch.manual_seed`` if those should be reproducible too.)
"""

from __future__ import annotations

from uldp.fitting.api import RECORD_LEVEL, History, SeedWarning, fit
from uldp.fitting.clipping import ClipWarning
from uldp.fitting.federation_checks import FederationWarning
from uldp.fitting.inputs import (
    LossFunction,
    Metric,
    Records,
    UnsupportedModuleError,
    WeightedLoss,
    check_module,
    features_tensor,
    index_ids,
    resolve_hyperparameters,
    resolve_records,
    targets_tensor,
    weighted_loss,
)
from uldp.fitting.rounds import (
    ALLOCATION_STREAM,
    INIT_STREAM,
    PREPARE_STREAM,
    ROUNDS_STREAM,
    SUBSET_STREAM,
    prepare_method,
    round_seed,
    train_rounds,
)

__all__ = [
    "ALLOCATION_STREAM",
    "INIT_STREAM",
    "PREPARE_STREAM",
    "RECORD_LEVEL",
    "ROUNDS_STREAM",
    "SUBSET_STREAM",
    "ClipWarning",
    "FederationWarning",
    "History",
    "LossFunction",
    "Metric",
    "Records",
    "SeedWarning",
    "UnsupportedModuleError",
    "WeightedLoss",
    "check_module",
    "features_tensor",
    "fit",
    "index_ids",
    "prepare_method",
    "resolve_hyperparameters",
    "resolve_records",
    "round_seed",
    "targets_tensor",
    "train_rounds",
    "weighted_loss",
]
