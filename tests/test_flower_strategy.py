"""uldp.flower.strategy: UldpStrategy refuses settings its method gives no meaning, takes the initial model as a
module, a state_dict or an ArrayRecord (checked before any message) and returns a model, and calibrates sigma to a
target epsilon for the rounds it runs."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from flower_hospitals import (  # noqa: F401  (hospital_files: a fixture)
    INSECURE_SEED_5,
    LAX,
    TEST_KEYS,
    flower_run,
    hospital_files,
    load,
    model,
    node_configs,
)
from torch import nn

import uldp
import uldp.flower as uf
from uldp.flower.local import LocalGrid
from uldp.methods.base import needed


@pytest.mark.parametrize(
    ("arguments", "refusal"),
    [
        ({"method": "DEFAULT", "sigma": 1.0}, "DEFAULT adds no noise"),
        ({"method": "ULDP-NAIVE", "sigma": 1.0, "q": 0.5}, "ULDP-NAIVE samples no users"),
        (
            {"method": "ULDP-GROUP-2", "sigma": 1.0, "hidden_sample": True},
            "a method that samples users",
        ),
        ({"method": "ULDP-AVG", "sigma": 1.0, "protocol": TEST_KEYS}, "ULDP-AVG has not"),
        ({"method": "ULDP-GROUP-2", "epsilon": 3.0}, "ULDP-GROUP-2: give sigma"),
    ],
)
def test_the_strategy_refuses_settings_the_method_gives_no_meaning(arguments, refusal):
    with pytest.raises(ValueError, match=refusal):
        uf.UldpStrategy(**arguments)


#: The initial model is checked before the grid is used: these calls fail before any message.
NO_GRID: Any = None


def test_start_takes_the_model_or_its_state_dict_and_returns_a_model(hospital_files):  # noqa: F811
    """Issue 33: start needed a flat vector; a state_dict surfaced at a hospital as a size mismatch."""
    from flwr.app import ArrayRecord

    net = model()
    settings: dict[str, Any] = dict(
        method="ULDP-AVG", sigma=1.0, local_epochs=1, batch_size=8, seed=5
    )
    finals = []
    for initial in (net, net.state_dict(), ArrayRecord(net.state_dict())):
        app = uf.silo_client_app(load, model, nn.CrossEntropyLoss())
        grid = LocalGrid(app, node_configs(hospital_files, {**LAX, **INSECURE_SEED_5}))
        strategy = uf.UldpStrategy(model=model(), **settings)
        result = strategy.start(grid, initial, num_rounds=1)
        finals.append(uldp.flat_parameters(strategy.trained_model(result)).numpy())
    flat, _, _ = flower_run(hospital_files, net, INSECURE_SEED_5, rounds=1, **settings)
    for final in finals:  # each run's union numbers the users afresh: float32 sums in another order
        np.testing.assert_allclose(final, flat, rtol=1e-6, atol=1e-7)
    strategy = uf.UldpStrategy(model=model(), **settings)
    with pytest.raises(ValueError, match=r"missing \['2.bias', '2.weight'\]"):
        strategy.start(
            NO_GRID, {k: v for k, v in net.state_dict().items() if not k.startswith("2.")}
        )
    with pytest.raises(ValueError, match="needs the architecture"):
        uf.UldpStrategy(**settings).start(NO_GRID, net.state_dict())
    with pytest.raises(ValueError, match="flat vector of 26 parameters"):
        strategy.start(NO_GRID, ArrayRecord([np.zeros(30, np.float32)]))


def test_a_target_epsilon_calibrates_sigma_for_the_rounds_run(hospital_files):  # noqa: F811
    """epsilon= as in uldp.fit: sigma is the smallest the accountant finds for num_rounds, so the strategy's own
    epsilon after the last round is the target (to the solver's tolerance) and never above it."""
    from uldp.accounting import epsilon_uldp

    _, strategy, _ = flower_run(
        hospital_files,
        model(),
        method="ULDP-AVG",
        epsilon=3.0,
        q=0.5,
        local_epochs=1,
        secure=False,
        rounds=2,
    )
    sigma = needed(strategy.hp.sigma, "sigma")
    assert strategy.epsilons[-1] <= 3.0 and strategy.epsilons[-1] == pytest.approx(3.0, rel=1e-3)
    assert epsilon_uldp(sigma=sigma, rounds=2, delta=1e-5, q=0.5).epsilon == pytest.approx(
        3.0, rel=1e-3
    )
    cases: list[dict[str, Any]] = [{"sigma": 1.0, "epsilon": 3.0}, {}]
    for both_or_neither in cases:
        with pytest.raises(ValueError, match="give sigma or epsilon"):
            uf.UldpStrategy(method="ULDP-AVG", **both_or_neither)
