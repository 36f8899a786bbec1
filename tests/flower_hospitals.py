"""The hospitals' federation the Flower tests share: three hospitals' CSV files and their relay key (the
``hospital_files`` fixture), the model and each silo's ``load``, the silos' node configs and their own options
(policies, consent, test keys, reproducible test noise), a run on LocalGrid (:func:`flower_run`) and its oracle
(:func:`in_process`: uldp.fit with the user numbers the run's private set union gave, :func:`union_numbers`)."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import pytest
from torch import nn

import uldp
import uldp.flower as uf
from uldp.common.persist import array_from_bytes
from uldp.flower.local import LocalGrid
from uldp.secure.psu import TEST_GROUP

if TYPE_CHECKING:
    import pathlib

HOSPITALS = ["Royal", "St Mary", "General"]
FEATURES = ["a", "b", "c"]


def model() -> nn.Module:
    return nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))


def load(context) -> uf.SiloData:
    frame = pd.read_csv(context.node_config["data"])
    return uf.SiloData(
        frame[FEATURES].to_numpy(np.float32), frame["label"].to_numpy(), frame["patient"]
    )


@pytest.fixture()
def hospital_files(tmp_path: pathlib.Path) -> pathlib.Path:
    rng = np.random.default_rng(0)
    n = 150
    frame = pd.DataFrame(rng.normal(size=(n, 3)), columns=FEATURES)
    frame["label"] = (frame.a > 0).astype(int)
    frame["patient"] = [f"P{u}" for u in rng.integers(0, 20, n)]
    frame["hospital"] = rng.choice(HOSPITALS, n)
    uf.write_key_file(tmp_path / "key")
    # a patient whose key at its silo (SHA-256) ends in a zero byte (a numpy bytes array would silently drop it)
    trailing_zero = next(
        f"Z{i}"
        for i in range(100000)
        if hashlib.sha256(f"Z{i}".encode()).hexdigest().endswith("00")
    )
    frame.loc[frame["patient"] == "P0", "patient"] = trailing_zero
    for hospital, part in frame.groupby("hospital"):
        part.drop(columns="hospital").to_csv(tmp_path / f"{hospital}.csv", index=False)
    return tmp_path


def union_numbers(files: pathlib.Path, grid: LocalGrid) -> list[np.ndarray]:
    """Per hospital (sorted names), the user number the union gave each record's patient, read at each silo."""
    contexts = {context.node_config["silo"]: context for context in grid.contexts.values()}
    return [
        uf.user_numbers(contexts[h], pd.read_csv(files / f"{h}.csv")["patient"])
        for h in sorted(HOSPITALS)
    ]


def in_process(
    files: pathlib.Path, net: nn.Module, numbers: list[np.ndarray], **arguments
) -> tuple[nn.Module, uldp.History]:
    """uldp.fit on the silos' files concatenated in sorted name order, the union's user numbers (per silo, as
    :func:`union_numbers` reads them) as user ids."""
    parts = [pd.read_csv(files / f"{h}.csv") for h in sorted(HOSPITALS)]
    frame = pd.concat(parts)
    silos = [h for h, part in zip(sorted(HOSPITALS), parts, strict=True) for _ in range(len(part))]
    users = np.concatenate(numbers)
    return uldp.fit(
        net,
        frame[FEATURES].to_numpy(np.float32),
        frame["label"].to_numpy(),
        user_ids=users,
        silo_ids=silos,
        loss=nn.CrossEntropyLoss(),
        **arguments,
    )


#: A policy that lets the plain ULDP-AVG-w runs of these tests spend what the server sees (epsilon ~ 13).
LAX = {"uldp-policy-epsilon": 100.0}


def node_configs(files: pathlib.Path, node_config: dict | None = None) -> list[dict]:
    return [
        {
            "silo": h,
            "uldp-key-file": str(files / "key"),
            "data": str(files / f"{h}.csv"),
            **(node_config or {}),
        }
        for h in HOSPITALS
    ]


TEST_KEYS = {"key_bits": 1024, "n_max": 300, "insecure_test_key": True}
ALLOW_TEST_KEYS = {"uldp-insecure-test-keys": "true"}
#: The silos' own INSECURE test option: noise from seed 5, as uldp.fit(seed=5) (the strategy's seed samples users).
INSECURE_SEED_5 = {"uldp-insecure-reproducible-noise": 5}
#: A silo's own consent to answer a method without noise (DEFAULT).
NO_DP = {"uldp-allow-no-dp": "true"}
#: A policy for ULDP-GROUP-median at sigma 1 (k = 7 here: epsilon ~ 2,000 a round).
GROUP_LAX = {"uldp-policy-epsilon": 1e5}


def net_params(net: nn.Module) -> np.ndarray:
    return uldp.flat_parameters(net).numpy()


def plain_update(reply) -> np.ndarray:
    """A plain train reply's update (uldp.federation's plain aggregation: the array's bytes)."""
    return array_from_bytes(bytes(reply.content["uldp"]["update"]))


def flower_run(
    files: pathlib.Path,
    net: nn.Module,
    node_config: dict | None = None,
    *,
    strategy_class: type[uf.UldpStrategy] | None = None,
    **arguments,
) -> tuple[np.ndarray, uf.UldpStrategy, LocalGrid]:
    """A Flower run on LocalGrid; ``node_config`` is every silo's own (policy, test options). The private set union
    runs in the insecure test group, with every silo's consent, unless ``psu_group`` names another (it is what
    the Flower tests cost most: 3 s a run in the 2048-bit group)."""
    from flwr.app import ArrayRecord

    app = uf.silo_client_app(load, model, nn.CrossEntropyLoss())
    arguments.setdefault("psu_group", TEST_GROUP.name)
    consent = ALLOW_TEST_KEYS if arguments["psu_group"] == TEST_GROUP.name else {}
    grid = LocalGrid(app, node_configs(files, {**LAX, **consent, **(node_config or {})}))
    rounds = arguments.pop("rounds")
    strategy = (strategy_class or uf.UldpStrategy)(**arguments)
    result = strategy.start(
        grid, ArrayRecord([uldp.flat_parameters(net).numpy()]), num_rounds=rounds
    )
    return result.arrays.to_numpy_ndarrays()[0], strategy, grid


def exact_counts(files: pathlib.Path, grid: LocalGrid) -> np.ndarray:
    """n[s, u] counted from the files (silos in sorted name order, users as the union numbered them)."""
    numbers = union_numbers(files, grid)
    n_users = 1 + max(int(n.max()) for n in numbers)
    return np.stack([np.bincount(n, minlength=n_users) for n in numbers])
