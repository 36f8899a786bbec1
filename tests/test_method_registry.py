"""A method of your own in one call: uldp.methods.register_method (and uldp.method_names.register_family).

The toy, :class:`HalfBall`, is ULDP-NAIVE whose ``clip`` is the clipping ball's diameter: it clips each silo's
delta to ``C/2`` and adds ``N(0, (sigma C)^2 |S|)`` per silo; its hyperparameters stay as given, so
``make_method(name, method.hp)`` rebuilds it (a transport sends them to the silos). The oracle is the built-in
ULDP-NAIVE at ``C/2``, which does the same arithmetic through its own name (Theorem 1 as corrected: noise
``2 sigma (C/2) sqrt(|S|)``), so ``uldp.fit`` and a Flower run of the toy equal those of ULDP-NAIVE at ``C/2`` bit
for bit, and the toy's epsilon is Theorem 1's closed form (``epsilon_naive``) under every accountant.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import numpy as np
import pytest
import torch
from flower_hospitals import (  # noqa: F401  (hospital_files: a fixture)
    INSECURE_SEED_5,
    flower_run,
    hospital_files,
    model as flower_model,
)
from torch import nn

import uldp
from uldp.accounting import ACCOUNTANTS, epsilon_for_method, epsilon_naive
from uldp.method_names import FAMILY_CAPABILITIES, parse_method, register_family
from uldp.methods import FitDefaults, make_method, register_method
from uldp.methods.base import needed
from uldp.methods.fedavg import FedAvgMethod
from uldp.methods.registry import METHOD_CLASSES

TOY = "TOY-HALF-BALL"
NAIVE_NEEDS = FAMILY_CAPABILITIES["ULDP-NAIVE"]


@dataclass(frozen=True)
class HalfBall(FedAvgMethod):
    """ULDP-NAIVE with ``clip`` read as the ball's diameter (a toy: the registry's example of a new family)."""

    REQUIRED: ClassVar[dict[str, tuple[str, ...]]] = {
        TOY: ("local_lr", "local_epochs", "clip", "sigma")
    }
    DEFAULTS: ClassVar[dict[str, FitDefaults]] = {
        TOY: FitDefaults(global_lr=1.0, local_lr=0.01, clip=2.0, local_epochs=5)
    }

    @property
    def clip_bound(
        self,
    ) -> float:  # the radius; its hp stay as given (the transports send them to the silos)
        return needed(self.hp.clip, "clip") / 2

    def noise_std(
        self, n_silos: int
    ) -> float:  # sigma times the sum's sensitivity |S| C (twice the radius, C)
        return needed(self.hp.sigma, "sigma") * needed(self.hp.clip, "clip") * math.sqrt(n_silos)


@pytest.fixture
def registered():
    """The toy registered for one test; the registries restored after it."""
    capabilities, classes = dict(FAMILY_CAPABILITIES), dict(METHOD_CLASSES)
    register_method(HalfBall, capabilities=NAIVE_NEEDS)
    yield
    FAMILY_CAPABILITIES.clear()
    FAMILY_CAPABILITIES.update(capabilities)
    METHOD_CLASSES.clear()
    METHOD_CLASSES.update(classes)


def records(n: int = 90, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = torch.from_numpy(rng.normal(size=(n, 4))).float()
    y = (x[:, 0] - x[:, 2] > 0).long()
    users = [f"p{u}" for u in rng.integers(0, 12, n)]
    silos = [("North", "South", "East")[s] for s in rng.integers(0, 3, n)]
    return x, y, users, silos


def model() -> nn.Module:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(3)
        return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))


def test_a_name_is_unknown_until_registered_and_then_parsed_with_its_capabilities(registered):
    spec = parse_method(TOY)
    assert (spec.name, spec.family, spec.capabilities) == (TOY, TOY, NAIVE_NEEDS)
    assert spec.secure_aggregation == parse_method("ULDP-NAIVE").secure_aggregation
    with pytest.raises(ValueError, match=rf"known methods: DEFAULT.*ULDP-AVG-w, {TOY} \("):
        parse_method("TOY-OTHER")


def test_an_unregistered_name_is_refused():
    with pytest.raises(ValueError, match=r"unknown method 'TOY-HALF-BALL'; known methods: DEFAULT"):
        parse_method(TOY)


@pytest.mark.parametrize(
    ("family", "match"),
    [
        ("ULDP-AVG", "is taken"),
        ("ULDP-GROUP-3", "is taken"),
        ("ULDP-AVG-w", "upper-case"),
        ("toy", "upper-case"),
        ("TOY--X", "upper-case"),
    ],
)
def test_a_taken_or_malformed_family_is_refused(family, match):
    before = dict(FAMILY_CAPABILITIES)
    with pytest.raises(ValueError, match=match):
        register_family(family, NAIVE_NEEDS)
    assert before == FAMILY_CAPABILITIES


def test_a_class_without_matching_required_and_defaults_registers_nothing():
    @dataclass(frozen=True)
    class NoDefaults(FedAvgMethod):
        REQUIRED: ClassVar[dict[str, tuple[str, ...]]] = {"TOY-A": ("clip",), "TOY-B": ()}
        DEFAULTS: ClassVar[dict[str, FitDefaults]] = {"TOY-A": FitDefaults(1.0, 0.1, 1.0, 1)}

    @dataclass(frozen=True)
    class Misnamed(FedAvgMethod):
        REQUIRED: ClassVar[dict[str, tuple[str, ...]]] = {"TOY-A": ("radius",)}
        DEFAULTS: ClassVar[dict[str, FitDefaults]] = {"TOY-A": FitDefaults(1.0, 0.1, 1.0, 1)}

    before = dict(FAMILY_CAPABILITIES)
    with pytest.raises(ValueError, match=r"DEFAULTS must give a FitDefaults for exactly"):
        register_method(NoDefaults, capabilities=NAIVE_NEEDS)
    with pytest.raises(ValueError, match=r"REQUIRED names \['radius'\]; allowed: local_lr"):
        register_method(Misnamed, capabilities=NAIVE_NEEDS)
    with pytest.raises(ValueError, match=r"must be a uldp.method_names.Capabilities, got dict"):
        register_method(HalfBall, capabilities={"private": True})  # type: ignore[arg-type]
    assert before == FAMILY_CAPABILITIES


def test_fit_runs_the_toy_as_the_builtin_method_it_equals(registered):
    x, y, users, silos = records()
    common = {
        "user_ids": users,
        "silo_ids": silos,
        "loss": nn.CrossEntropyLoss(),
        "sigma": 0.8,
        "rounds": 3,
        "seed": 11,
        "test": (x, y),
        "local_lr": 0.05,
        "local_epochs": 2,
        "batch_size": 8,
        "global_lr": 1.0,
    }
    toy, toy_history = uldp.fit(model(), x, y, method=TOY, clip=1.0, **common)
    naive, naive_history = uldp.fit(model(), x, y, method="ULDP-NAIVE", clip=0.5, **common)
    torch.testing.assert_close(
        uldp.flat_parameters(toy), uldp.flat_parameters(naive), rtol=0, atol=0
    )
    assert [row["loss"] for row in toy_history.rows] == [row["loss"] for row in naive_history.rows]
    expected = epsilon_naive(sigma=0.8, rounds=3, delta=1e-5).epsilon
    assert [row["epsilon"] for row in toy_history.rows][-1] == pytest.approx(expected, rel=1e-12)
    untrained = uldp.flat_parameters(model())
    assert not torch.equal(uldp.flat_parameters(toy), untrained)


@pytest.mark.parametrize("accountant", sorted(ACCOUNTANTS))
def test_every_accountant_serves_the_toy_by_its_capabilities(registered, accountant):
    arguments = {"sigma": 1.3, "rounds": 7, "delta": 1e-5, "accountant": accountant}
    toy = epsilon_for_method(TOY, **arguments)
    assert toy == epsilon_for_method("ULDP-NAIVE", **arguments)
    if accountant == "rdp":
        assert toy.epsilon == epsilon_naive(sigma=1.3, rounds=7, delta=1e-5).epsilon


def test_make_method_builds_the_registered_class_with_its_defaults(registered):
    hp = uldp.methods.Hyperparameters(1.0, 0.05, 2, 8, 1.0, 0.8)
    method, naive = make_method(TOY, hp), make_method("ULDP-NAIVE", replace(hp, clip=0.5))
    assert isinstance(method, HalfBall)
    assert isinstance(naive, FedAvgMethod)
    assert method.noise_std(3) == naive.noise_std(3) and method.clip_bound == naive.clip_bound
    assert make_method(TOY, method.hp).hp == hp  # what a transport sends rebuilds the same method
    assert uldp.methods.method_defaults(TOY).clip == 2.0


def test_flower_runs_the_toy_as_the_builtin_method_it_equals(registered, hospital_files):  # noqa: F811
    """The same toy through Flower's strategy and ClientApps (in process, LocalGrid): the model and every round's
    epsilon of ULDP-NAIVE at ``C/2``, bit for bit, with the silos' own insecure test seed."""
    settings: dict[str, Any] = {
        "local_epochs": 1,
        "batch_size": 8,
        "seed": 5,
        "rounds": 2,
        "sigma": 1.0,
    }
    net = flower_model()  # one initial model for both runs
    toy, toy_strategy, _ = flower_run(
        hospital_files, net, INSECURE_SEED_5, secure=False, method=TOY, clip=1.0, **settings
    )
    naive, naive_strategy, _ = flower_run(
        hospital_files,
        net,
        INSECURE_SEED_5,
        secure=False,
        method="ULDP-NAIVE",
        clip=0.5,
        **settings,
    )
    np.testing.assert_array_equal(toy, naive)
    assert toy_strategy.epsilons == naive_strategy.epsilons
    assert not np.array_equal(toy, uldp.flat_parameters(net).numpy())
