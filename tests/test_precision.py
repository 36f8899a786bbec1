"""Tests of uldp.paper.experiments.precision: runs stored at two precisions pair by key and seed, and the verdict
(the other precision's mean inside the float32 seeds' range) against values read back from the files."""

import json
import statistics

import pytest
from fake_executor import FAKE, execute, resolve

from uldp.paper.experiments import Executor, compare_precisions, run_grid

PANEL = {"n_users": ["100"], "distribution": ["zipf"]}
SHIFT: list[float] = [0.0]


def shifted(params, checkpoint=None):
    """The fake run with every accuracy moved by ``SHIFT[0]`` times (seed + 1)."""
    result = execute(params)
    step = SHIFT[0] * (params["seed"] + 1)
    return {**result, "accuracy": [a + step for a in result["accuracy"]]}


SHIFTED = Executor(resolve=resolve, execute=shifted)


def _stored(tmp_path, shift: float, *, seeds=(0, 1, 2), precision="bf16"):
    SHIFT[0] = shift
    for root, executor, trained in (("f32", FAKE, "float32"), ("other", SHIFTED, precision)):
        run_grid(
            "mnist",
            "short",
            where=PANEL,
            seeds=seeds if root == "other" else (0, 1, 2),
            root=tmp_path / root,
            executor=executor,
            precision=trained,
            progress=False,
        )


def _finals(root) -> dict[int, float]:
    runs = [json.loads(path.read_text()) for path in root.glob("mnist/*.json")]
    return {run["seed"]: run["result"]["accuracy"][-1] for run in runs}


def _compare(tmp_path, precision="bf16"):
    return compare_precisions(
        "mnist",
        "short",
        candidate_root=tmp_path / "other",
        reference_root=tmp_path / "f32",
        precision=precision,
        where=PANEL,
    )


def test_runs_pair_by_seed_and_a_small_change_stays_within_the_float32_range(tmp_path):
    _stored(tmp_path, 0.0001)  # the fake seeds' finals lie 0.0011 apart
    (comparison,) = _compare(tmp_path)
    reference, candidate = _finals(tmp_path / "f32"), _finals(tmp_path / "other")
    assert comparison.seeds == (0, 1, 2)
    assert comparison.reference == tuple(reference[s] for s in (0, 1, 2))
    assert comparison.candidate == tuple(candidate[s] for s in (0, 1, 2))
    assert comparison.differences == pytest.approx([0.0001, 0.0002, 0.0003])
    low, high = min(reference.values()), max(reference.values())
    mean = statistics.fmean(candidate.values())
    assert comparison.within and low < mean < high
    assert comparison.margin == pytest.approx(min(mean - low, high - mean))
    assert comparison.panel == "|U|=100, zipf" and comparison.series == "ULDP-AVG"
    text = comparison.describe()
    assert (
        "within that range" in text and f"{high:.3f}" in text and f"{reference[2]:.3f} → " in text
    )


def test_a_change_beyond_the_seeds_range_is_outside_with_a_negative_margin(tmp_path):
    _stored(tmp_path, -0.05)
    (comparison,) = _compare(tmp_path)
    low = min(comparison.reference)
    assert not comparison.within
    assert comparison.margin < 0
    assert comparison.margin == pytest.approx(statistics.fmean(comparison.candidate) - low)
    assert "outside that range" in comparison.describe()


def test_only_seeds_stored_at_both_precisions_are_paired(tmp_path):
    _stored(tmp_path, 0.0, seeds=(1,))
    (comparison,) = _compare(tmp_path)
    assert comparison.seeds == (1,) and comparison.differences == (0.0,)
    assert comparison.within  # one seed: the range is a point, and an equal value lies on it
    assert "standard deviation" not in comparison.describe()  # none of one value


def test_a_run_of_the_wrong_precision_under_a_root_is_refused(tmp_path):
    _stored(tmp_path, 0.0, precision="float32")  # the candidate root holds float32 runs
    with pytest.raises(ValueError, match=r"trained in float32, not bf16"):
        _compare(tmp_path)
    assert _compare(tmp_path, precision="float32")  # named as what they are, they pair


def test_an_unknown_precision_or_metric_is_refused_by_name(tmp_path):
    _stored(tmp_path, 0.0)
    with pytest.raises(ValueError, match=r"bf17"):
        _compare(tmp_path, precision="bf17")
    with pytest.raises(ValueError, match=r"no 'c_index' curve to compare; its curves: .*accuracy"):
        compare_precisions(
            "mnist",
            "short",
            candidate_root=tmp_path / "other",
            reference_root=tmp_path / "f32",
            precision="bf16",
            where=PANEL,
            metric="c_index",
        )
