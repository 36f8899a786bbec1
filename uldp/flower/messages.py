"""What the strategy and the silos' ClientApp share on Flower: the message layout, the node config keys, the round
seed (:mod:`uldp.flower.strategy`, :mod:`uldp.flower.client`)."""

from __future__ import annotations

from typing import Any

import numpy as np
from flwr.app import ConfigRecord, RecordDict

from uldp.fitting import round_seed

#: The message type of the setup stages (a ``ClientApp`` query action).
SETUP_ACTION = "uldp"
#: The node_config keys a SuperNode sets: ``--node-config 'silo="Hospital A" uldp-key-file="/secure/key"'``.
SILO_KEY, KEY_FILE_KEY = "silo", "uldp-key-file"
#: The node_config key of the silo's ledger file (:class:`uldp.policy.SiloLedger`; without it, beside its key file).
LEDGER_KEY = "uldp-ledger"
#: INSECURE, tests and the book only: the node_config key whose value seeds this silo's noise and record order, so
#: that the run equals :func:`uldp.fit` with that seed (whoever knows it can remove the noise). Only the silo's own
#: configuration sets it; whatever the server sends is ignored.
INSECURE_NOISE_KEY = "uldp-insecure-reproducible-noise"
#: The node_config key by which a silo agrees to answer a method without noise (DEFAULT: no DP, nothing for its
#: ledger to charge): ``uldp-allow-no-dp=true``. Without it every silo refuses DEFAULT by name.
ALLOW_NO_DP_KEY = "uldp-allow-no-dp"


def records(values: dict) -> Any:
    """A message's content: ``values`` as its ``uldp`` ConfigRecord."""
    return RecordDict({"uldp": ConfigRecord(values)})


def config_of(message: Any) -> dict:
    """A message's ``uldp`` ConfigRecord as a dict."""
    return dict(message.content["uldp"])


def server_round_seed(seed: int, server_round: int) -> np.random.SeedSequence:
    """The stream of :func:`uldp.fit`'s round ``server_round - 1`` under ``seed`` (the server's 1-based rounds)."""
    return round_seed(np.random.SeedSequence(seed), server_round - 1)
