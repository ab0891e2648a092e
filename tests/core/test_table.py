"""Table semantics (docs/semantics.md §2.2-§2.11 and §5.8;
docs/compatibility.md items 6, 12, 14 and 15): insert, eviction, duplicates,
sampling, max_times_sampled, mutate_priorities, reset, close, statistics,
batch insert, snapshots, chunk lifetime and argument validation.
"""

from __future__ import annotations

import gc
import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from resound import _core

from helpers.core_tables import check_accounting, column, table_counters, trajectory
from helpers.waiting import Background, wait_until

RateLimiter = _core.RateLimiter
DeadlineExceededError = _core.DeadlineExceededError
CancelledError = _core.CancelledError


# ---------------------------------------------------------------------------
# Helpers


def keys(table: _core.Table) -> list[int]:
    return [item.key for item in table.snapshot()]


def state(table: _core.Table) -> tuple:
    """Everything observable about the items and counters, for 'unchanged' checks."""
    info = table.info()
    items = [
        (s.key, s.priority, s.times_sampled, s.inserted_at, s.trajectory) for s in table.snapshot()
    ]
    rl = info.rate_limiter
    return (
        items,
        info.current_size,
        info.num_episodes,
        info.num_deleted_episodes,
        info.num_unique_samples,
        info.num_chunks,
        info.memory_bytes,
        (rl["inserts"], rl["samples"], rl["deletes"]),
    )


def check_invariants(table: _core.Table) -> None:
    check_accounting(table)
    assert table.info().current_size == len(table)


@pytest.fixture
def chunk(chunk_factory: Callable[..., _core.Chunk]) -> _core.Chunk:
    """A 4-step float32 chunk of rows of 3 values, episode 0."""
    return chunk_factory()


@pytest.fixture
def traj(chunk: _core.Chunk) -> list:
    return trajectory(chunk.key)


# ---------------------------------------------------------------------------
# Construction


def test_new_table_is_empty_and_reports_its_configuration(store: _core.ChunkStore) -> None:
    table = _core.Table(
        "replay",
        _core.make_selector("prioritized", 0.8, seed=3),
        _core.make_selector("min_heap"),
        17,
        RateLimiter.sample_to_insert_ratio(2.0, 3, 4.0),
        max_times_sampled=5,
        signature=b"sig",
        chunk_store=store,
    )
    assert len(table) == 0
    assert table.name == "replay"
    assert table.chunk_store is store
    info = table.info()
    assert info.name == "replay"
    assert info.sampler.kind == "prioritized"
    assert info.sampler.priority_exponent == 0.8
    assert info.remover.kind == "min_heap"
    assert info.max_size == 17
    assert info.max_times_sampled == 5
    assert info.signature == b"sig"
    assert (info.current_size, info.num_episodes, info.num_deleted_episodes) == (0, 0, 0)
    assert (info.num_unique_samples, info.num_chunks, info.memory_bytes) == (0, 0, 0)
    assert not info.closed
    assert not table.closed
    rl = info.rate_limiter
    assert (rl["samples_per_insert"], rl["min_size_to_sample"]) == (2.0, 3)
    assert (rl["min_diff"], rl["max_diff"]) == (2.0, 10.0)
    assert (rl["inserts"], rl["samples"], rl["deletes"]) == (0, 0, 0)


def _selector(kind: str = "uniform") -> _core.ItemSelector:
    return _core.make_selector(kind)


@pytest.mark.parametrize(
    ("kwargs", "argument"),
    [
        ({"name": ""}, "name"),
        ({"max_size": 0}, "max_size"),
        ({"max_size": -3}, "max_size"),
        ({"sampler": None}, "sampler"),
        ({"remover": None}, "remover"),
        ({"rate_limiter": None}, "rate_limiter"),
    ],
)
def test_bad_table_arguments(store: _core.ChunkStore, kwargs: dict, argument: str) -> None:
    arguments = {
        "name": "t",
        "sampler": _selector(),
        "remover": _selector("fifo"),
        "max_size": 10,
        "rate_limiter": RateLimiter.min_size(1),
    }
    arguments.update(kwargs)
    with pytest.raises(ValueError, match=argument):
        _core.Table(chunk_store=store, **arguments)


# ---------------------------------------------------------------------------
# Insert and sample basics


def test_insert_then_sample_reports_item_state(tables: Any, chunk: _core.Chunk) -> None:
    table = tables()
    before = time.time_ns()
    table.insert(7, 2.5, trajectory(chunk.key, 1, 2))
    after = time.time_ns()
    [item] = table.snapshot()
    assert (item.key, item.priority, item.times_sampled) == (7, 2.5, 0)
    assert before <= item.inserted_at <= after
    [sample] = table.sample(timeout=0)
    assert sample.key == 7
    assert sample.priority == 2.5
    assert sample.times_sampled == 1
    assert sample.probability == 1.0
    assert sample.table_size == 1
    assert sample.inserted_at == item.inserted_at
    assert not sample.rate_limited
    assert sample.trajectory == [([(chunk.key, 1, 2)], False)]
    [sampled_chunk] = sample.chunks
    assert sampled_chunk.key == chunk.key
    assert np.array_equal(np.frombuffer(sampled_chunk, np.float32), np.arange(12, dtype=np.float32))
    assert table.snapshot()[0].times_sampled == 1
    check_invariants(table)


def test_uniform_probability_is_one_over_size(tables: Any, traj: list) -> None:
    table = tables(sampler="uniform")
    for key in range(4):
        table.insert(key, float(key + 1), traj)
    samples = table.sample(20, timeout=0)
    assert len(samples) == 20  # MinSize: every sample is allowed
    assert {s.probability for s in samples} == {0.25}
    assert {s.table_size for s in samples} == {4}


def test_multi_column_trajectory_round_trips(
    tables: Any, chunk_factory: Callable[..., _core.Chunk]
) -> None:
    a = chunk_factory(num_steps=4, shape=(3,), dtype="<f4")
    b = chunk_factory(num_steps=4, shape=(3,), dtype="<f4")
    c = chunk_factory(num_steps=5, shape=(), dtype="<i8")
    table = tables()
    traj = [
        ([(a.key, 2, 2), (b.key, 0, 3)], False),
        column(c.key, 4, 1, squeeze=True),
        column(a.key, 0, 1),
    ]
    table.insert(1, 1.0, traj)
    [sample] = table.sample(timeout=0)
    assert sample.trajectory == [
        ([(a.key, 2, 2), (b.key, 0, 3)], False),
        ([(c.key, 4, 1)], True),
        ([(a.key, 0, 1)], False),
    ]
    # Distinct chunks, in order of first reference.
    assert [ch.key for ch in sample.chunks] == [a.key, b.key, c.key]
    assert table.info().num_chunks == 3
    check_invariants(table)


# ---------------------------------------------------------------------------
# Eviction


@pytest.mark.parametrize(
    ("remover", "expected_keys"),
    [
        # priorities: 1 -> 5.0, 2 -> 3.0, 3 -> 4.0, 4 -> 1.0, 5 -> 6.0
        ("fifo", [3, 4, 5]),
        ("lifo", [1, 2, 3]),  # 4 and 5 each evict themselves
        ("min_heap", [1, 3, 5]),  # 4 (lowest) evicts itself, then 5 evicts 2
        ("max_heap", [2, 3, 4]),  # 4 evicts 1 (highest), 5 (highest) evicts itself
    ],
)
def test_eviction_by_remover(
    tables: Any, traj: list, remover: str, expected_keys: list[int]
) -> None:
    table = tables(remover=remover, max_size=3)
    for key, priority in zip([1, 2, 3, 4, 5], [5.0, 3.0, 4.0, 1.0, 6.0], strict=True):
        table.insert(key, priority, traj)
        assert len(table) <= 3
        check_invariants(table)
    assert sorted(keys(table)) == expected_keys
    assert table_counters(table) == (5, 0, 2)


def test_lifo_remover_evicts_the_new_item_itself(
    store: _core.ChunkStore, tables: Any, traj: list
) -> None:
    table = tables(remover="lifo", max_size=2)
    table.insert(1, 1.0, traj)
    table.insert(2, 1.0, traj)
    new_chunk = store.add(4242, np.zeros(4, np.float32), "<f4", (), 4, episode_id=9)
    table.insert(3, 1.0, trajectory(4242))
    assert keys(table) == [1, 2]
    assert table_counters(table) == (3, 0, 1)
    info = table.info()
    assert info.num_chunks == 1
    assert info.num_episodes == 1
    assert info.num_deleted_episodes == 1  # episode 9 came and went with item 3
    del new_chunk
    assert 4242 not in store  # the evicted item released its chunk


def test_min_heap_remover_evicts_new_item_with_lowest_priority(tables: Any, traj: list) -> None:
    table = tables(remover="min_heap", max_size=2)
    table.insert(1, 5.0, traj)
    table.insert(2, 3.0, traj)
    table.insert(3, 1.0, traj)
    assert keys(table) == [1, 2]
    table.insert(4, 10.0, traj)
    assert keys(table) == [1, 4]
    assert table_counters(table) == (4, 0, 2)


def test_duplicate_insert_refreshes_heap_recency(tables: Any, traj: list) -> None:
    """Ties in a heap go to the item least recently inserted or updated."""
    table = tables(remover="min_heap", max_size=2)
    table.insert(1, 1.0, traj)
    table.insert(2, 1.0, traj)
    table.insert(1, 1.0, traj)  # same priority, but 1 is now the most recent
    table.insert(3, 5.0, traj)
    assert keys(table) == [1, 3]


# ---------------------------------------------------------------------------
# Duplicate keys


def test_duplicate_key_only_changes_priority(
    store: _core.ChunkStore, tables: Any, chunk: _core.Chunk
) -> None:
    table = tables()
    table.insert(1, 1.0, trajectory(chunk.key, 0, 2))
    table.insert(2, 1.0, trajectory(chunk.key, 2, 1))
    table.sample(timeout=0)
    table.sample(timeout=0)
    before = {item.key: item for item in table.snapshot()}
    other = store.add(999, np.ones(8, np.float32), "<f4", (2,), 4, episode_id=3)
    table.insert(1, 7.0, trajectory(999, 1, 3))
    after = {item.key: item for item in table.snapshot()}
    assert len(table) == 2
    assert list(after) == [1, 2]
    assert after[1].priority == 7.0
    assert after[1].trajectory == [([(chunk.key, 0, 2)], False)]
    assert after[1].times_sampled == before[1].times_sampled
    assert after[1].inserted_at == before[1].inserted_at
    assert [c.key for c in after[1].chunks] == [chunk.key]
    assert table_counters(table) == (2, 2, 0)
    info = table.info()
    assert (info.num_chunks, info.num_episodes) == (1, 1)
    del other
    assert 999 not in store  # the duplicate's data was dropped
    check_invariants(table)


def test_duplicate_key_is_still_gated_by_the_limiter(tables: Any, traj: list) -> None:
    table = tables(rate_limiter=RateLimiter.queue(1))
    table.insert(1, 1.0, traj)
    with pytest.raises(DeadlineExceededError):
        table.insert(1, 9.0, traj, timeout=0)
    assert table.snapshot()[0].priority == 1.0
    table.sample(timeout=0)
    table.insert(1, 9.0, traj, timeout=0)
    assert table.snapshot()[0].priority == 9.0
    assert table_counters(table) == (1, 1, 0)


def test_duplicate_key_updates_prioritized_sampling(tables: Any, traj: list) -> None:
    table = tables(sampler="prioritized")
    table.insert(1, 1.0, traj)
    table.insert(2, 1.0, traj)
    table.insert(1, 3.0, traj)
    samples = table.sample(40, timeout=0)
    expected = {1: 0.75, 2: 0.25}
    for s in samples:
        assert s.probability == pytest.approx(expected[s.key])


# ---------------------------------------------------------------------------
# max_times_sampled and queues


def test_max_times_sampled_deletes_after_last_sample(tables: Any, traj: list) -> None:
    table = tables(sampler="fifo", max_times_sampled=2)
    table.insert(1, 1.0, traj)
    table.insert(2, 1.0, traj)
    first, second = table.sample(timeout=0)[0], table.sample(timeout=0)[0]
    assert (first.key, first.times_sampled, first.table_size) == (1, 1, 2)
    # table_size is the size before the deletion this sample caused.
    assert (second.key, second.times_sampled, second.table_size) == (1, 2, 2)
    assert keys(table) == [2]
    assert table_counters(table) == (2, 2, 1)
    [third] = table.sample(timeout=0)
    assert (third.key, third.times_sampled, third.table_size) == (2, 1, 1)
    check_invariants(table)


def test_flexible_batch_stops_when_max_times_sampled_empties_table(tables: Any, traj: list) -> None:
    table = tables(sampler="fifo", max_times_sampled=2)
    table.insert(1, 1.0, traj)
    table.insert(2, 1.0, traj)
    samples = table.sample(10, timeout=0)
    assert [(s.key, s.times_sampled, s.table_size) for s in samples] == [
        (1, 1, 2),
        (1, 2, 2),
        (2, 1, 1),
        (2, 2, 1),
    ]
    assert len(table) == 0
    assert table_counters(table) == (2, 4, 2)
    assert table.info().num_unique_samples == 2


@pytest.mark.parametrize(
    ("kind", "limiter", "expected_order"),
    [("fifo", RateLimiter.queue, [1, 2, 3, 4]), ("lifo", RateLimiter.stack, [3, 4, 2, 1])],
)
def test_queue_and_stack_tables(
    tables: Any,
    traj: list,
    kind: str,
    limiter: Callable[[int], RateLimiter],
    expected_order: list[int],
) -> None:
    """Queue(N)/Stack(N) + max_times_sampled=1 behave as a bounded FIFO/LIFO."""
    table = tables(
        sampler=kind, remover=kind, max_size=3, rate_limiter=limiter(3), max_times_sampled=1
    )
    with pytest.raises(DeadlineExceededError):
        table.sample(timeout=0)
    for key in (1, 2, 3):
        table.insert(key, 1.0, traj, timeout=0)
    with pytest.raises(DeadlineExceededError):
        table.insert(4, 1.0, traj, timeout=0)
    order = [s.key for s in table.sample(timeout=0)]
    table.insert(4, 1.0, traj, timeout=0)
    with pytest.raises(DeadlineExceededError):
        table.insert(5, 1.0, traj, timeout=0)
    order += [s.key for s in table.sample(10, timeout=0)]
    assert order == expected_order
    assert len(table) == 0
    with pytest.raises(DeadlineExceededError):
        table.sample(timeout=0)
    assert table_counters(table) == (4, 4, 4)


def test_flexible_batch_returns_what_the_limiter_allows_without_waiting(
    tables: Any, traj: list
) -> None:
    # One insert allows three samples: 1 - s - 1 >= -2 for s = 0, 1, 2.
    table = tables(rate_limiter=RateLimiter(1.0, 1, -2.0, 10.0))
    table.insert(1, 1.0, traj)
    # No timeout: a sample that waited to fill the batch would never return.
    call = Background(table.sample, 10, timeout=None)
    samples = call.value()
    assert [s.times_sampled for s in samples] == [1, 2, 3]
    assert not any(s.rate_limited for s in samples)
    assert table_counters(table) == (1, 3, 0)


@pytest.mark.parametrize("max_times_sampled", [0, 10**6])
def test_a_huge_request_is_served_in_a_bounded_pass(
    tables: Any, traj: list, max_times_sampled: int
) -> None:
    # An unlimited limiter would allow 2**62 samples; one call returns at most
    # MAX_SAMPLES_PER_CALL instead of trying to allocate them all.
    table = tables(max_times_sampled=max_times_sampled)
    table.insert(1, 1.0, traj)
    table.insert(2, 1.0, traj)
    batch = table.sample(2**62, timeout=0)
    assert len(batch) == _core.MAX_SAMPLES_PER_CALL
    assert table_counters(table) == (2, _core.MAX_SAMPLES_PER_CALL, 0)
    assert sorted(set(batch.keys.tolist())) == [1, 2]


def test_sample_batch_arrays_match_the_samples(tables: Any, traj: list) -> None:
    table = tables(sampler="prioritized", priority_exponent=1.0)
    table.insert(1, 1.0, traj)
    table.insert(2, 3.0, traj)
    batch = table.sample(50, timeout=0)
    assert batch.keys.dtype == np.uint64 and batch.keys.shape == (50,)
    assert batch.keys.tolist() == [s.key for s in batch]
    assert batch.priorities.tolist() == [s.priority for s in batch]
    assert batch.probabilities.tolist() == [{1: 0.25, 2: 0.75}[s.key] for s in batch]
    assert batch.times_sampled.tolist() == [s.times_sampled for s in batch]
    assert batch.table_sizes.tolist() == [2] * 50
    assert batch.inserted_at.tolist() == [s.inserted_at for s in batch]
    assert batch.rate_limited.tolist() == [False] * 50
    assert batch[-1].key == batch.keys[-1]
    with pytest.raises(IndexError):
        batch[50]


def test_sample_rejects_num_samples_below_one(tables: Any, traj: list) -> None:
    table = tables()
    table.insert(1, 1.0, traj)
    for n in (0, -1):
        with pytest.raises(ValueError, match="num_samples"):
            table.sample(n, timeout=0)
    assert table_counters(table) == (1, 0, 0)


# ---------------------------------------------------------------------------
# mutate_priorities


def test_mutate_updates_and_deletes(tables: Any, traj: list) -> None:
    table = tables(sampler="prioritized")
    for key in (1, 2, 3, 4):
        table.insert(key, 1.0, traj)
    assert table.mutate_priorities(updates={1: 5.0, 99: 2.0}, deletes=[2, 98]) == (1, 1)
    assert table.mutate_priorities(updates=[(3, 0.5), (4, 0.0)]) == (2, 0)
    assert {i.key: i.priority for i in table.snapshot()} == {1: 5.0, 3: 0.5, 4: 0.0}
    assert table_counters(table) == (4, 0, 1)
    # Sampling follows the new priorities: weight p (exponent 1), 0 never sampled.
    for s in table.sample(50, timeout=0):
        assert s.key in (1, 3)
        assert s.probability == pytest.approx({1: 5.0 / 5.5, 3: 0.5 / 5.5}[s.key])
    check_invariants(table)


def test_mutate_key_both_updated_and_deleted_ends_deleted(tables: Any, traj: list) -> None:
    table = tables()
    table.insert(1, 1.0, traj)
    table.insert(2, 1.0, traj)
    assert table.mutate_priorities(updates={1: 3.0}, deletes=[1]) == (1, 1)
    assert keys(table) == [2]
    assert table.mutate_priorities() == (0, 0)
    check_invariants(table)


@pytest.mark.parametrize(
    ("sampler", "bad_priority"),
    [
        ("prioritized", math.nan),
        ("prioritized", -1.0),
        ("prioritized", math.inf),
        ("uniform", math.nan),
        ("uniform", math.inf),
        ("fifo", -math.inf),
    ],
)
def test_mutate_with_a_bad_priority_changes_nothing(
    tables: Any, traj: list, sampler: str, bad_priority: float
) -> None:
    table = tables(sampler=sampler)
    for key in (1, 2, 3):
        table.insert(key, 1.0, traj)
    table.sample(timeout=0)
    before = state(table)
    with pytest.raises(ValueError, match="priority"):
        table.mutate_priorities(updates=[(1, 4.0), (2, bad_priority), (3, 2.0)], deletes=[3])
    assert state(table) == before
    # The table keeps working afterwards.
    assert table.mutate_priorities(updates={2: 2.0}) == (1, 0)


def test_negative_priority_is_fine_without_a_prioritized_selector(tables: Any, traj: list) -> None:
    table = tables(sampler="uniform", remover="min_heap", max_size=2)
    table.insert(1, -5.0, traj)
    table.insert(2, 0.0, traj)
    assert table.mutate_priorities(updates={2: -1.0}) == (1, 0)
    table.insert(3, 3.0, traj)  # min_heap evicts the lowest: key 1
    assert {i.key: i.priority for i in table.snapshot()} == {2: -1.0, 3: 3.0}


def test_mutate_with_bad_keys_changes_nothing(tables: Any, traj: list) -> None:
    table = tables()
    table.insert(1, 1.0, traj)
    before = state(table)
    with pytest.raises(ValueError, match="key"):
        table.mutate_priorities(updates={1: 2.0}, deletes=[1, -1])
    with pytest.raises(ValueError, match="key"):
        table.mutate_priorities(updates=[(1, 2.0), (2**64, 1.0)])
    with pytest.raises(ValueError, match="updates"):
        table.mutate_priorities(updates=[(1, 2.0, 3.0)])
    assert state(table) == before


def test_insert_with_bad_priority_changes_nothing(tables: Any, traj: list) -> None:
    table = tables(sampler="prioritized")
    table.insert(1, 1.0, traj)
    before = state(table)
    for bad in (math.nan, -0.5, math.inf):
        with pytest.raises(ValueError, match="priority"):
            table.insert(2, bad, traj)
        with pytest.raises(ValueError, match="priority"):
            table.insert(1, bad, traj)  # as a duplicate too
    assert state(table) == before


# ---------------------------------------------------------------------------
# Reset


def test_reset_clears_items_counters_and_statistics(store: _core.ChunkStore, tables: Any) -> None:
    table = tables(sampler="fifo", max_size=3, rate_limiter=RateLimiter(1.0, 1, -10.0, 10.0))
    chunks = [
        store.add(500 + e, np.zeros(4, np.float32), "<f4", (), 4, episode_id=e) for e in range(5)
    ]
    for key, c in enumerate(chunks):
        table.insert(key, 1.0, trajectory(c.key))
    table.sample(2, timeout=0)
    table.mutate_priorities(deletes=[3])
    info = table.info()
    assert (info.num_deleted_episodes, info.num_unique_samples) == (3, 1)
    assert table_counters(table) == (5, 2, 3)

    table.reset()
    info = table.info()
    assert len(table) == 0
    assert table.snapshot() == []
    assert (info.current_size, info.num_episodes, info.num_deleted_episodes) == (0, 0, 0)
    assert (info.num_unique_samples, info.num_chunks, info.memory_bytes) == (0, 0, 0)
    assert table_counters(table) == (0, 0, 0)
    # Configuration is unchanged.
    assert (info.name, info.max_size, info.sampler.kind) == ("table", 3, "fifo")
    assert (info.rate_limiter["min_diff"], info.rate_limiter["max_diff"]) == (-10.0, 10.0)
    # The table released its chunks.
    del chunks, c
    assert len(store) == 0
    assert store.memory_bytes == 0


def test_reset_table_is_usable_with_the_same_keys(tables: Any, traj: list) -> None:
    table = tables(rate_limiter=RateLimiter.queue(2))
    table.insert(1, 1.0, traj, timeout=0)
    table.insert(2, 1.0, traj, timeout=0)
    assert not table.can_insert(1)
    table.reset()
    assert table.can_insert(2)
    table.insert(2, 4.0, traj, timeout=0)  # a new item, not a duplicate
    table.insert(1, 3.0, traj, timeout=0)
    assert [(i.key, i.priority, i.times_sampled) for i in table.snapshot()] == [
        (2, 4.0, 0),
        (1, 3.0, 0),
    ]
    assert table_counters(table) == (2, 0, 0)


# ---------------------------------------------------------------------------
# Close


def test_close_wakes_blocked_sampler_and_keeps_items_readable(tables: Any, traj: list) -> None:
    table = tables(rate_limiter=RateLimiter.min_size(2))
    table.insert(1, 1.0, traj)
    sampler = Background(table.sample, 1, timeout=None)
    wait_until(lambda: table.info().rate_limiter["waiting_samples"] == 1, "the sampler blocks")
    table.close()
    sampler.raised(CancelledError)
    assert table.closed
    assert keys(table) == [1]
    assert len(table) == 1
    with pytest.raises(CancelledError):
        table.insert(2, 1.0, traj)
    with pytest.raises(CancelledError):
        table.sample(timeout=0)
    check_invariants(table)


def test_insert_batch_stopped_by_close_reports_progress(tables: Any, traj: list) -> None:
    table = tables(rate_limiter=RateLimiter.queue(2))
    call = Background(table.insert_batch, [(k, 1.0, traj) for k in range(5)], timeout=None)
    wait_until(lambda: table.info().rate_limiter["waiting_inserts"] == 1, "the batch blocks")
    table.close()
    error = call.raised(CancelledError)
    assert error.num_inserted == 2
    assert keys(table) == [0, 1]
    check_invariants(table)


# ---------------------------------------------------------------------------
# Statistics


def test_episode_chunk_and_memory_statistics(
    tables: Any, chunk_factory: Callable[..., _core.Chunk]
) -> None:
    table = tables()
    a1 = chunk_factory(episode_id=1)
    a2 = chunk_factory(episode_id=1, num_steps=6)
    b = chunk_factory(episode_id=2, num_steps=2)
    table.insert(1, 1.0, trajectory(a1.key))
    table.insert(2, 1.0, trajectory(a2.key))
    table.insert(3, 1.0, trajectory(b.key))
    table.insert(4, 1.0, [column(b.key, 1), column(a1.key, 3)])  # shares b and a1

    def stats() -> tuple[int, int, int, int]:
        info = table.info()
        return info.num_episodes, info.num_deleted_episodes, info.num_chunks, info.memory_bytes

    mem = {c.key: c.memory_bytes for c in (a1, a2, b)}
    assert all(m > 0 for m in mem.values())
    assert stats() == (2, 0, 3, mem[a1.key] + mem[a2.key] + mem[b.key])
    table.mutate_priorities(deletes=[1])  # a1 still used by item 4
    assert stats() == (2, 0, 3, mem[a1.key] + mem[a2.key] + mem[b.key])
    table.mutate_priorities(deletes=[2])  # a2 gone; episode 1 still referenced by 4
    assert stats() == (2, 0, 2, mem[a1.key] + mem[b.key])
    table.mutate_priorities(deletes=[4])  # last reference to episode 1
    assert stats() == (1, 1, 1, mem[b.key])
    table.mutate_priorities(deletes=[3])
    assert stats() == (0, 2, 0, 0)
    check_invariants(table)


def test_unique_samples_count_distinct_items(tables: Any, traj: list) -> None:
    table = tables(sampler="fifo")
    for key in (1, 2, 3):
        table.insert(key, 1.0, traj)
    assert [s.key for s in table.sample(3, timeout=0)] == [1, 1, 1]
    assert table.info().num_unique_samples == 1
    table.mutate_priorities(deletes=[1])
    assert table.info().num_unique_samples == 1  # deleted items still count
    table.sample(2, timeout=0)
    assert table.info().num_unique_samples == 2


def test_memory_drops_as_items_are_evicted(
    tables: Any, chunk_factory: Callable[..., _core.Chunk]
) -> None:
    table = tables(max_size=2)
    chunks = [chunk_factory(num_steps=4 * (i + 1)) for i in range(3)]
    for key, c in enumerate(chunks):
        table.insert(key, 1.0, trajectory(c.key))
    info = table.info()
    assert info.num_chunks == 2
    assert info.memory_bytes == chunks[1].memory_bytes + chunks[2].memory_bytes
    check_invariants(table)


# ---------------------------------------------------------------------------
# insert_batch


def test_insert_batch_inserts_in_order(tables: Any, traj: list) -> None:
    table = tables(remover="fifo", max_size=3)
    items = [(5, 1.0, traj), (1, 2.0, traj), (3, 3.0, traj), (1, 9.0, traj), (8, 4.0, traj)]
    assert table.insert_batch(items) == 5
    # 1 is a duplicate (priority update); 8 evicts the oldest, 5.
    assert [(i.key, i.priority) for i in table.snapshot()] == [(1, 9.0), (3, 3.0), (8, 4.0)]
    assert table_counters(table) == (4, 0, 1)
    assert table.insert_batch([]) == 0
    check_invariants(table)


def _bad_batch_items(traj: list, chunk: _core.Chunk) -> list[tuple[str, Any, type, str]]:
    return [
        ("unknown chunk", (12, 1.0, trajectory(123456789)), KeyError, "123456789"),
        ("slice out of range", (12, 1.0, trajectory(chunk.key, 3, 2)), ValueError, "outside"),
        ("nan priority", (12, math.nan, traj), ValueError, "priority"),
        ("negative key", (-1, 1.0, traj), ValueError, "key"),
        ("key too large", (2**64, 1.0, traj), ValueError, "key"),
        ("not a triple", (12, 1.0), ValueError, "items"),
        ("bad trajectory", (12, 1.0, [([(chunk.key, 0)], False)]), ValueError, "trajectory"),
    ]


@pytest.mark.parametrize("case", range(7))
def test_insert_batch_validates_everything_first(
    tables: Any, traj: list, chunk: _core.Chunk, case: int
) -> None:
    name, bad, error, message = _bad_batch_items(traj, chunk)[case]
    table = tables()
    table.insert(100, 1.0, traj)
    before = state(table)
    items = [(10, 1.0, traj), (11, 1.0, traj), bad, (13, 1.0, traj)]
    with pytest.raises(error, match=message):
        table.insert_batch(items)
    assert state(table) == before, name


def test_insert_batch_rejects_a_non_sequence(tables: Any) -> None:
    table = tables()
    with pytest.raises(ValueError, match="items"):
        table.insert_batch(5)
    assert len(table) == 0


def test_insert_batch_stopped_by_deadline_reports_progress(tables: Any, traj: list) -> None:
    table = tables(sampler="fifo", rate_limiter=RateLimiter.queue(3), max_times_sampled=1)
    table.insert(0, 1.0, traj)
    with pytest.raises(DeadlineExceededError) as raised:
        table.insert_batch([(k, 1.0, traj) for k in range(1, 6)], timeout=0)
    assert raised.value.num_inserted == 2
    assert keys(table) == [0, 1, 2]
    # The rest of the batch was dropped, not queued.
    table.sample(3, timeout=0)
    assert len(table) == 0
    assert table_counters(table) == (3, 3, 3)


# ---------------------------------------------------------------------------
# Snapshot


def test_snapshot_is_in_insertion_order(
    tables: Any, chunk_factory: Callable[..., _core.Chunk]
) -> None:
    table = tables(sampler="fifo", remover="fifo", max_size=4)
    chunk = chunk_factory()
    order = [50, 1, 30, 2, 2**64 - 1]
    for i, key in enumerate(order):
        table.insert(key, float(i), trajectory(chunk.key, i % 4))
    # 50 was evicted by the fifo remover.
    assert keys(table) == [1, 30, 2, 2**64 - 1]
    table.insert(30, 99.0, trajectory(chunk.key))  # a duplicate keeps its place
    table.mutate_priorities(deletes=[2])
    table.sample(timeout=0)  # fifo: key 1
    snapshot = table.snapshot()
    assert [(i.key, i.priority, i.times_sampled) for i in snapshot] == [
        (1, 1.0, 1),
        (30, 99.0, 0),
        (2**64 - 1, 4.0, 0),
    ]
    assert [i.trajectory for i in snapshot] == [trajectory(chunk.key, k % 4) for k in (1, 2, 4)]
    stamps = [i.inserted_at for i in snapshot]
    assert stamps == sorted(stamps)
    assert all([c.key for c in i.chunks] == [chunk.key] for i in snapshot)


# ---------------------------------------------------------------------------
# Chunk lifetime


def test_item_keeps_its_chunks_alive_after_the_handle_is_dropped(
    store: _core.ChunkStore, tables: Any
) -> None:
    data = np.arange(12, dtype=np.float32)
    handle = store.add(77, data, "<f4", (3,), 4, episode_id=5)
    table = tables()
    table.insert(1, 1.0, trajectory(77, 1, 2))
    del handle
    gc.collect()
    assert 77 in store
    assert len(store) == 1
    [sample] = table.sample(timeout=0)
    assert np.array_equal(np.frombuffer(sample.chunks[0], np.float32), data)
    # Once the item goes and nothing else holds the chunk, it is gone.
    del sample
    table.mutate_priorities(deletes=[1])
    gc.collect()
    assert 77 not in store
    assert len(store) == 0
    assert store.memory_bytes == 0


@pytest.mark.parametrize("deletion", ["mutate", "max_times_sampled", "eviction", "reset"])
def test_sampled_item_keeps_data_alive_after_the_item_is_deleted(
    store: _core.ChunkStore, tables: Any, deletion: str
) -> None:
    data = np.arange(8, dtype=np.int64)
    handle = store.add(88, data, "<i8", (2,), 4, episode_id=1)
    table = tables(
        sampler="fifo",
        remover="fifo",
        max_size=1,
        max_times_sampled=1 if deletion == "max_times_sampled" else 0,
    )
    table.insert(1, 1.0, trajectory(88, 2, 2))
    del handle
    [sample] = table.sample(timeout=0)
    if deletion == "mutate":
        table.mutate_priorities(deletes=[1])
    elif deletion == "eviction":
        other = store.add(89, np.zeros(4, np.float32), "<f4", (), 4)
        table.insert(2, 1.0, trajectory(89))
        del other
    elif deletion == "reset":
        table.reset()
    assert 1 not in keys(table)
    gc.collect()
    assert 88 in store  # held only by the SampledItem
    [c] = sample.chunks
    assert (c.key, c.dtype, c.shape, c.num_steps, c.episode_id) == (88, "<i8", (2,), 4, 1)
    assert np.array_equal(np.frombuffer(c, np.int64), data)
    assert sample.trajectory == trajectory(88, 2, 2)
    del c, sample
    gc.collect()
    assert 88 not in store


# ---------------------------------------------------------------------------
# Bad arguments leave the table unchanged


def _bad_inserts(
    chunk_factory: Callable[..., _core.Chunk], good: _core.Chunk
) -> list[tuple[str, Any, Any, type, str]]:
    """(name, key, trajectory, error, message pattern)."""
    ints = chunk_factory(dtype="<i4")
    narrow = chunk_factory(shape=(2,))
    ok = trajectory(good.key)
    return [
        ("negative key", -1, ok, ValueError, "key"),
        ("key 2**64", 2**64, ok, ValueError, "key"),
        ("float key", 1.5, ok, ValueError, "key"),
        ("string key", "1", ok, ValueError, "key"),
        ("no columns", 1, [], ValueError, "column"),
        ("not a sequence", 1, 5, ValueError, "trajectory"),
        ("string trajectory", 1, "abc", ValueError, "trajectory"),
        ("column not a pair", 1, [(good.key, 0, 1)], ValueError, "trajectory"),
        ("no slices", 1, [([], False)], ValueError, "slice"),
        ("slices not a sequence", 1, [(3, False)], ValueError, "trajectory"),
        ("slice not a triple", 1, [([(good.key, 0)], False)], ValueError, "trajectory"),
        ("negative chunk key", 1, [([(-1, 0, 1)], False)], ValueError, "chunk_key"),
        ("offset past end", 1, trajectory(good.key, 4, 1), ValueError, "outside"),
        ("length past end", 1, trajectory(good.key, 3, 2), ValueError, "outside"),
        ("negative offset", 1, trajectory(good.key, -1, 2), ValueError, "outside"),
        ("zero length", 1, trajectory(good.key, 0, 0), ValueError, "outside"),
        ("squeeze of 2 rows", 1, [column(good.key, 0, 2, squeeze=True)], ValueError, "squeeze"),
        (
            "squeeze of 2 slices",
            1,
            [([(good.key, 0, 1), (good.key, 1, 1)], True)],
            ValueError,
            "squeeze",
        ),
        ("mixed dtype", 1, [([(good.key, 0, 1), (ints.key, 0, 1)], False)], ValueError, "<i4"),
        ("mixed shape", 1, [([(good.key, 0, 1), (narrow.key, 0, 1)], False)], ValueError, "holds"),
        ("unknown chunk", 1, trajectory(31337), KeyError, "31337"),
        ("unknown chunk in 2nd column", 1, [column(good.key), column(31337)], KeyError, "31337"),
    ]


@pytest.mark.parametrize("case", range(22))
def test_bad_insert_raises_and_leaves_table_unchanged(
    tables: Any, chunk_factory: Callable[..., _core.Chunk], case: int
) -> None:
    good = chunk_factory()
    name, key, traj, error, message = _bad_inserts(chunk_factory, good)[case]
    table = tables()
    table.insert(1, 1.0, trajectory(good.key, 1, 1))
    table.sample(timeout=0)
    before = state(table)
    with pytest.raises(error, match=message):
        table.insert(key, 2.0, traj)
    assert state(table) == before, name
    # Still usable.
    table.insert(2, 1.0, trajectory(good.key))
    check_invariants(table)


def test_non_numeric_priorities_name_the_argument(tables: Any, traj: list) -> None:
    table = tables()
    table.insert(1, 1.0, traj)
    before = state(table)
    with pytest.raises(ValueError, match=r"items\[1\]\.priority must be a number"):
        table.insert_batch([(2, 1.0, traj), (3, "high", traj)])
    with pytest.raises(ValueError, match="updates priority must be a number"):
        table.mutate_priorities({1: None})
    assert state(table) == before


def test_accepted_key_range_and_integer_like_keys(tables: Any, traj: list) -> None:
    table = tables()
    table.insert(0, 1.0, traj)
    table.insert(2**64 - 1, 1.0, traj)
    table.insert(np.uint64(2**63 + 5), 1.0, traj)
    table.insert(np.int32(7), 1.0, traj)
    assert keys(table) == [0, 2**64 - 1, 2**63 + 5, 7]


def test_squeezed_column_of_one_row_and_mixed_dtypes_across_columns(
    tables: Any, chunk_factory: Callable[..., _core.Chunk]
) -> None:
    floats = chunk_factory()
    ints = chunk_factory(dtype="<i4", shape=(2, 2))
    table = tables()
    traj = [column(floats.key, 2, 1, squeeze=True), column(ints.key, 0, 3)]
    table.insert(1, 1.0, traj)
    assert table.snapshot()[0].trajectory == [
        ([(floats.key, 2, 1)], True),
        ([(ints.key, 0, 3)], False),
    ]
