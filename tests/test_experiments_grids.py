"""The experiment grids (uldp.paper.experiments.grids, expanded by ``expand``).

The paper-profile grids are checked against the tables of settings.md, parsed here independently of the module; then
the smaller profiles (they only shrink the paper grid), the uniform allocation, the filters ``methods``, ``datasets``
and ``where``, and the errors for unknown names.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import fake_executor
import numpy as np
import pytest

from uldp.paper import experiments
from uldp.paper.experiments import GRIDS, expand, run_grid

SETTINGS_MD = experiments.REPO_ROOT.parent / "shared" / "paper" / "settings.md"
DATASET_NAMES = {
    "Creditcard": "creditcard",
    "MNIST": "mnist",
    "HeartDisease": "heart_disease",
    "TcgaBrca": "tcga_brca",
}


# ----------------------------------------------------------------------------------------- settings.md, parsed here


def _table(text: str, heading: str) -> list[list[str]]:
    """Rows (cells stripped) of the first markdown table after the heading that starts with ``heading``."""
    section = text[text.index(heading) :]
    block = []
    for line in section.splitlines()[1:]:
        if line.startswith("|"):
            block.append(line)
        elif block:
            break
    assert block
    return [[cell.strip() for cell in row.strip("|").split("|")] for row in block[2:]]


def _methods(cell: str) -> list[str]:
    expanded = re.sub(
        r"(\S+)-\{([^}]*)\}",
        lambda m: ", ".join(f"{m[1]}-{x.strip()}" for x in m[2].split(",")),
        cell,
    )
    return [name.strip() for name in expanded.split(",")]


def _number(cell: str) -> float | None:
    return None if cell == "-" else float(cell)


def _paper_params(grid: str) -> list[dict]:
    return [dict(entry.params) for entry in GRIDS[grid].entries()]


needs_settings = pytest.mark.skipif(
    not SETTINGS_MD.exists(), reason="settings.md of the paper is not beside the repo"
)


@needs_settings
def test_privacy_utility_grids_are_the_settings_md_table():
    text = SETTINGS_MD.read_text()
    expected: dict[tuple[str, str, int], dict] = {}
    dataset = users = rounds = None
    for row in _table(text, "## Privacy-utility figures"):
        if row[0]:
            dataset, users, rounds = (
                DATASET_NAMES[row[0]],
                [int(u) for u in row[1].split(",")],
                int(row[2]),
            )
        assert dataset is not None and users is not None, "the table's first row names its dataset"
        lr_by_users = dict(re.findall(r"([\d.]+) \((\d+) users\)", row[4]))
        for method in _methods(row[3]):
            for n_users in users:
                lr = float(
                    {int(u): v for v, u in lr_by_users.items()}.get(n_users, row[4].split()[0])
                )
                expected[(dataset, method, n_users)] = {
                    "rounds": rounds,
                    "global_lr": lr,
                    "clip": _number(row[5]),
                    "local_lr": _number(row[6]),
                    "local_epochs": None if row[7] == "-" else int(row[7]),
                }
    # The sentence under the table: NAIVE on MNIST at the Creditcard shape with C = 1.0.
    assert "global lr 1.0, C 1.0, local lr 0.01, Q 50" in text
    for n_users in (100, 10000):
        expected[("mnist", "ULDP-NAIVE", n_users)] = {
            "rounds": 200,
            "global_lr": 1.0,
            "clip": 1.0,
            "local_lr": 0.01,
            "local_epochs": 50,
        }
    batch = {"creditcard": 64, "mnist": 64, "heart_disease": 4, "tcga_brca": 8}
    silos = {"creditcard": 5, "mnist": 5, "heart_disease": 4, "tcga_brca": 6}
    assert "Local batch size 64 (Creditcard, MNIST), 4 (HeartDisease), 8 (TcgaBrca)" in text
    assert "Creditcard and MNIST 5 silos; HeartDisease 4, TcgaBrca 6" in text
    for name in ("creditcard", "mnist", "heart_disease", "tcga_brca"):
        # the medical datasets' uniform is the authors' independent draws (issue 32); the others' stays balanced
        uniform = (
            "uniform-with-replacement" if name in ("heart_disease", "tcga_brca") else "uniform"
        )
        schemes = {uniform, "zipf", "zipf-noniid"} if name == "mnist" else {uniform, "zipf"}
        runs = _paper_params(name)
        got = {(p["dataset"], p["method"], p["n_users"]) for p in runs}
        assert got == {key for key in expected if key[0] == name}
        assert len(runs) == len(got) * len(schemes)
        for params in runs:
            want = expected[(params["dataset"], params["method"], params["n_users"])]
            assert {key: params[key] for key in want} == want, params
            assert (params["batch_size"], params["n_silos"]) == (batch[name], silos[name])
            sigma = None if params["method"] == "DEFAULT" else 5.0  # DEFAULT adds no noise
            assert (params["sigma"], params["delta"], params["q"]) == (sigma, 1e-5, 1.0)
            assert params["distribution"] in schemes
        assert {p["distribution"] for p in runs} == schemes


@needs_settings
def test_weighting_and_user_sampling_grids_are_the_settings_md_tables():
    text = SETTINGS_MD.read_text()
    expected: set[tuple[Any, ...]] = set()
    for row in _table(text, "## Enhanced weighting figure"):
        for n_silos in row[2].split(","):
            for dist in row[3].split(","):
                dataset = DATASET_NAMES[row[0]]
                # the medical datasets' uniform is the authors' independent draws (issue 32)
                scheme = (
                    "uniform-with-replacement"
                    if dist.strip() == "uniform" and dataset in ("heart_disease", "tcga_brca")
                    else dist.strip()
                )
                for method in ("ULDP-AVG", "ULDP-AVG-w"):
                    expected.add(
                        (
                            dataset,
                            int(row[1]),
                            int(n_silos),
                            scheme,
                            int(row[4]),
                            float(row[5]),
                            float(row[6]),
                            float(row[7]),
                            int(row[8]),
                            method,
                        )
                    )
    fields = (
        "dataset",
        "n_users",
        "n_silos",
        "distribution",
        "rounds",
        "global_lr",
        "clip",
        "local_lr",
        "local_epochs",
        "method",
    )
    assert {tuple(p[f] for f in fields) for p in _paper_params("weighting")} == expected
    expected = set()
    for row in _table(text, "## User-level sub-sampling figure"):
        assert row[2] == "zipf/zipf"
        for q in row[3].split(","):
            expected.add(
                (
                    DATASET_NAMES[row[0]],
                    int(row[1]),
                    "zipf",
                    float(q),
                    int(row[4]),
                    float(row[5]),
                    float(row[6]),
                    float(row[7]),
                    int(row[8]),
                    "ULDP-AVG-w",
                )
            )
    fields = (
        "dataset",
        "n_users",
        "distribution",
        "q",
        "rounds",
        "global_lr",
        "clip",
        "local_lr",
        "local_epochs",
        "method",
    )
    assert {tuple(p[f] for f in fields) for p in _paper_params("user_sampling")} == expected


def test_paper_spot_checks_transcribed_from_settings_md():
    runs = {
        (p["dataset"], p["method"], p["n_users"], p["distribution"]): p
        for p in _paper_params("mnist")
    }
    assert runs[("mnist", "ULDP-AVG", 10000, "zipf-noniid")]["global_lr"] == 100.0
    assert runs[("mnist", "ULDP-AVG-w", 100, "uniform")]["global_lr"] == 10.0
    tcga = {(p["method"], p["n_users"], p["distribution"]): p for p in _paper_params("tcga_brca")}
    assert (
        tcga[("ULDP-GROUP-8", 50, "zipf")]["global_lr"],
        tcga[("ULDP-GROUP-8", 50, "zipf")]["clip"],
    ) == (0.1, 100.0)
    assert tcga[("ULDP-SGD", 200, "uniform-with-replacement")]["local_epochs"] is None
    runtime = _paper_params("protocol_runtime")
    assert {(p["dataset"], p["n_users"]) for p in runtime} == {
        (d, u) for d in ("heart_disease", "tcga_brca") for u in (10, 100)
    }
    assert all(p["rounds"] == 3 and p["method"] == "ULDP-AVG-w" and p["secure"] for p in runtime)
    assert {s.seed for s in expand("creditcard", "paper")} == {0, 1, 2, 3, 4}


@pytest.mark.parametrize("profile", ["smoke", "default"])
@pytest.mark.parametrize("name", sorted(GRIDS))
def test_smaller_profiles_only_shrink_the_paper_grid(name, profile):
    paper = _paper_params(name)
    small = expand(name, profile)
    assert small
    places = [(s.panel, s.series, s.seed) for s in small]
    assert len(places) == len(set(places))
    for spec in small:  # only user-blind runs on fixed silos share a stored run across panels
        twins = [other for other in small if other.key == spec.key and other is not spec]
        assert not twins or (
            spec.kwargs["method"] in ("DEFAULT", "ULDP-NAIVE")
            and spec.kwargs["dataset"] in ("heart_disease", "tcga_brca")
        )
    fixed = (
        "dataset",
        "method",
        "distribution",
        "global_lr",
        "clip",
        "local_lr",
        "batch_size",
        "sigma",
        "delta",
        "q",
    )
    for spec in small:
        params = spec.kwargs
        paper_twins = [p for p in paper if all(p[f] == params[f] for f in fixed)]
        assert paper_twins, params
        assert params["rounds"] <= paper_twins[0]["rounds"]
        assert params["n_users"] <= max(p["n_users"] for p in paper_twins)
    if profile == "smoke":
        assert max(spec.kwargs["rounds"] for spec in small) <= 3 and {s.seed for s in small} == {0}
    methods = {spec.kwargs["method"] for spec in small}
    if (
        GRIDS[name].kind == "privacy_utility"
    ):  # the method families the figure compares keep a representative
        assert {"DEFAULT", "ULDP-AVG", "ULDP-AVG-w"} | (
            {"ULDP-SGD"} if profile == "smoke" else set()
        ) <= methods
        assert any(m.startswith("ULDP-GROUP") for m in methods)


def test_only_the_smoke_runtime_check_uses_test_keys_so_the_stored_runs_keep_theirs():
    """The smoke profile checks Protocol 1's path with test keys (its chapter shows the committed paper runs); the
    paper and default runs name no protocol, so their keys, and the stored results under them, stay."""
    smoke = expand("protocol_runtime", "smoke")
    assert smoke and all(
        spec.kwargs["secure"]
        and spec.kwargs["protocol"] == {"key_bits": 1024, "n_max": 500, "insecure_test_key": True}
        for spec in smoke
    )
    for profile in ("paper", "default"):
        assert not any("protocol" in spec.kwargs for spec in expand("protocol_runtime", profile))
    assert not any(  # a reduction's protocol reaches secure runs only
        "protocol" in spec.kwargs
        for name in GRIDS
        for spec in expand(name, "smoke")
        if name != "protocol_runtime"
    )
    results = Path(__file__).resolve().parents[1] / "results" / "protocol_runtime"
    stored = {path.stem for path in results.glob("*.json")}
    assert {spec.key for spec in expand("protocol_runtime", "paper")} & stored


def test_uniform_allocation_swaps_only_the_authors_draws_and_rejects_other_schemes():
    drawn = experiments.expand("heart_disease", "paper")
    balanced = experiments.expand("heart_disease", "paper", uniform_allocation="uniform")
    assert len(drawn) == len(balanced)
    for one, other in zip(drawn, balanced, strict=True):
        params, swapped = one.kwargs, other.kwargs
        if params["distribution"] == "uniform-with-replacement":
            assert swapped == {**params, "distribution": "uniform"}
            assert "uniform" in other.panel and "with-replacement" not in other.panel
        else:
            assert swapped == params and one.key == other.key
    # user-blind runs (DEFAULT, ULDP-NAIVE) ignore the allocation on fixed silos: one stored run serves both
    blind = [
        (a.key, b.key)
        for a, b in zip(drawn, balanced, strict=True)
        if a.kwargs["method"] == "DEFAULT"
    ]
    assert blind and all(a == b for a, b in blind)
    assert experiments.expand(
        "creditcard", "paper", uniform_allocation="uniform"
    ) == experiments.expand("creditcard", "paper")
    with pytest.raises(
        ValueError,
        match="uniform_allocation must be one of uniform, uniform-with-replacement, got 'zipf'",
    ):
        experiments.expand("heart_disease", "paper", uniform_allocation="zipf")


def test_method_filter_keeps_exactly_those_runs():
    everything = expand("heart_disease", "paper")
    chosen = expand("heart_disease", "paper", methods=["ULDP-AVG-w", "ULDP-SGD"])
    assert {spec.kwargs["method"] for spec in chosen} == {"ULDP-AVG-w", "ULDP-SGD"}
    assert {spec.key for spec in chosen} == {
        spec.key for spec in everything if spec.kwargs["method"] in ("ULDP-AVG-w", "ULDP-SGD")
    }
    with pytest.raises(
        ValueError, match=r"methods \['ULDP-FOO'\] not all in grid 'heart_disease'.*ULDP-AVG-w"
    ):
        expand("heart_disease", "paper", methods=["ULDP-FOO"])


def test_dataset_filter_keeps_exactly_those_runs():
    everything = expand("user_sampling", "paper")
    assert {spec.kwargs["dataset"] for spec in everything} == {"creditcard", "mnist"}
    chosen = expand("user_sampling", "paper", datasets=["creditcard"], seeds=[1])
    assert {spec.key for spec in chosen} == {
        spec.key for spec in everything if spec.kwargs["dataset"] == "creditcard" and spec.seed == 1
    }
    assert len(chosen) == 5  # q in 0.1, 0.3, 0.5, 0.7, 1.0
    both = expand("weighting", "paper", datasets=["tcga_brca"], methods=["ULDP-AVG-w"])
    assert {(s.kwargs["dataset"], s.kwargs["method"]) for s in both} == {
        ("tcga_brca", "ULDP-AVG-w")
    }
    with pytest.raises(
        ValueError, match=r"datasets \['heart'\] not all in grid 'weighting'.*creditcard, tcga_brca"
    ):
        expand("weighting", "paper", datasets=["heart"])
    with pytest.raises(ValueError, match=r"datasets \[\] not all in grid"):
        expand("weighting", "paper", datasets=[])


def test_where_keeps_exactly_the_runs_whose_parameters_take_those_values():
    everything = expand("mnist", "short")
    one_panel = expand("mnist", "short", where={"n_users": ["100"], "distribution": ["zipf"]})
    assert {spec.key for spec in one_panel} == {
        spec.key
        for spec in everything
        if spec.kwargs["n_users"] == 100 and spec.kwargs["distribution"] == "zipf"
    }
    assert len(one_panel) == 3 and {spec.panel for spec in one_panel} == {"|U|=100, zipf"}
    either = expand("user_sampling", "paper", datasets=["creditcard"], where={"q": ["0.1", "1.0"]})
    assert sorted({spec.kwargs["q"] for spec in either}) == [0.1, 1.0]
    with pytest.raises(ValueError, match=r"no parameter 'n_user' to select by; .*n_users"):
        expand("mnist", "short", where={"n_user": ["100"]})
    with pytest.raises(
        ValueError, match=r"values of n_users \['101'\] not all in grid 'mnist'.*100, 10000"
    ):
        expand("mnist", "short", where={"n_users": ["101"]})


def test_unknown_names_give_clear_errors():
    with pytest.raises(ValueError, match=r"unknown grid 'nope'.*creditcard.*weighting"):
        expand("nope", "paper")
    with pytest.raises(ValueError, match=r"unknown profile 'huge'.*smoke, default, short, paper"):
        expand("mnist", "huge")
    with pytest.raises(
        ValueError, match=r"grid 'creditcard' has no short profile; grids with one: mnist"
    ):
        expand("creditcard", "short")
    with pytest.raises(
        ValueError, match=re.escape("seeds must be distinct and at least one, got [1, 1]")
    ):
        expand("mnist", "smoke", seeds=[1, 1])
    with pytest.raises(
        ValueError, match=re.escape("seeds must be distinct and at least one, got []")
    ):
        expand("mnist", "smoke", seeds=[])
    bad: Any  # not a seed, on purpose
    for bad in (True, -1, 1.0):  # True used to be taken as seed 1
        with pytest.raises(ValueError, match=f"seed must be an integer >= 0, got {bad!r}"):
            expand("mnist", "smoke", seeds=[0, bad])
    numpy_seeds: list[Any] = [np.int64(3)]
    numpy_seed = [spec.key for spec in expand("heart_disease", "smoke", seeds=numpy_seeds)]
    assert numpy_seed == [spec.key for spec in expand("heart_disease", "smoke", seeds=[3])]
    with pytest.raises(ValueError, match="jobs must be an integer >= 1, got 0"):
        run_grid("mnist", "smoke", jobs=0, executor=fake_executor.FAKE)
