"""uldp.training.chunks: a silo's users split into chunks in count order, each under its memory bound and filling
at least MIN_FILL of its padded slots, each as large as both allow (the engines' equality with the per-user loop at
any chunking is tests/test_per_user.py's)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

from uldp.training import chunks
from uldp.training.chunks import MIN_FILL, user_chunks


def _groups(counts: list[int]) -> list[np.ndarray]:
    starts = np.cumsum([0, *counts])
    return [np.arange(start, start + count) for start, count in zip(starts, counts, strict=False)]


def _batched(batch: int):
    """The padded length of train_users: whole mini-batches of min(batch, n) records."""
    return lambda n: -(-n // min(batch, n)) * min(batch, n)


def _fits(sizes: list[int], per_record: int, bound: int, padded) -> bool:
    users, largest = len(sizes), max(sizes)
    return users == 1 or (
        users * largest * per_record <= bound and sum(sizes) >= MIN_FILL * users * padded(largest)
    )


@settings(max_examples=200, deadline=None)
@given(
    counts=st.lists(st.integers(1, 400), min_size=1, max_size=60),
    per_record=st.integers(1, 50),
    bound=st.integers(1, 20_000),
    batch=st.integers(1, 64),
)
def test_chunks_partition_the_users_in_count_order_each_fitting_and_none_could_take_the_next(
    counts, per_record, bound, batch
):
    _check_chunks(counts, per_record, bound, batch)


@settings(max_examples=40, deadline=None)
@given(
    counts=st.lists(st.integers(1, 8), min_size=65, max_size=700),
    per_record=st.integers(1, 4),
    bound=st.integers(2_000, 40_000),
    batch=st.integers(1, 8),
)
def test_chunks_of_hundreds_of_users_follow_the_same_rules(counts, per_record, bound, batch):
    """Chunks past the first windows that user_chunks looks through (64, 128, 256 users)."""
    _check_chunks(counts, per_record, bound, batch)


def _check_chunks(counts: list[int], per_record: int, bound: int, batch: int) -> None:
    groups, padded = _groups(counts), _batched(batch)
    split = user_chunks(groups, lambda n: n * per_record, bound, padded)
    order = np.argsort(counts, kind="stable")
    assert np.array_equal(np.concatenate(split), order)
    sizes = [[counts[position] for position in chunk] for chunk in split]
    assert all(_fits(chunk, per_record, bound, padded) for chunk in sizes)
    for chunk, following in itertools.pairwise(sizes):  # each as large as the bound and fill allow
        assert not _fits([*chunk, following[0]], per_record, bound, padded)


def test_on_a_zipf_silo_the_one_record_users_and_the_largest_never_share_a_chunk(monkeypatch):
    counts = [1] * 150 + [2] * 30 + [10] * 15 + [300] * 5
    groups, padded = _groups(counts), _batched(64)
    largest = {position for position, count in enumerate(counts) if count == 300}
    split = user_chunks(groups, lambda n: n * 10, 2**23, padded)
    assert all(set(chunk) <= largest or not set(chunk) & largest for chunk in split)
    monkeypatch.setattr(
        chunks, "MIN_FILL", 0.0
    )  # the memory bound alone: one chunk, all padded to 320 slots
    assert len(user_chunks(groups, lambda n: n * 10, 2**23, padded)) == 1


def test_a_single_user_forms_a_chunk_even_beyond_the_bound():
    assert [
        list(chunk) for chunk in user_chunks(_groups([500, 3]), lambda n: n * 100, 10, lambda n: n)
    ] == [
        [1],
        [0],
    ]


@pytest.mark.parametrize("fill", [0.0, 0.5, 1.0])
def test_equal_counts_are_never_split_by_the_fill_rule(fill, monkeypatch):
    monkeypatch.setattr(chunks, "MIN_FILL", fill)
    split = user_chunks(_groups([6] * 40), lambda n: n, 10**6, _batched(64))
    assert len(split) == 1


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.lists(st.integers(0, 999), min_size=1, max_size=7, unique=True), min_size=1, max_size=12
    ),
    st.randoms(use_true_random=False),
)
def test_padded_indices_hold_each_users_records_in_order_then_index_zero(groups, random):
    """Row ``r`` is member ``r``'s record indices in their order, padded with 0 to the longest; counts are sizes."""
    arrays = [np.array(group, dtype=np.int64) for group in groups]
    members = np.array(random.sample(range(len(arrays)), random.randint(1, len(arrays))))
    index, counts = chunks.padded_indices(arrays, members, torch.device("cpu"))
    assert counts.tolist() == [arrays[m].size for m in members]
    assert index.shape == (len(members), max(arrays[m].size for m in members))
    for row, member in enumerate(members):
        size = arrays[member].size
        assert index[row, :size].tolist() == groups[member]
        assert not index[row, size:].any()
