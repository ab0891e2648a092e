"""Concurrent use of tables: writers, samplers, a priority mutator and an
observer running at once against a rate-limited table, with invariants
checked while they run and after; and isolation of blocked waits between
tables that share one ChunkStore.

The workload is bounded by counts: each writer inserts a fixed number of
items; samplers take whatever the limiter allows until the writers are done
and the limiter has nothing left to give, then the table is closed to release
them. Blocking table calls use timeout=None (a missed wake-up is then a hang
caught by a bounded join, not a slow success); the first failing thread closes
the table so that the others return. Nothing sleeps.
"""

from __future__ import annotations

import math
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest

from resound import _core

from helpers.core_tables import check_accounting, make_table, trajectory
from helpers.waiting import SAFETY, wait_until

RateLimiter = _core.RateLimiter
CancelledError = _core.CancelledError


NUM_WRITERS = 4
INSERTS_PER_WRITER = 2000
ROWS_PER_CHUNK = 10  # items per chunk: item k uses row k % 10 of chunk k // 10
CHUNK_KEY_BASE = 1_000_000
ROW_WIDTH = 2
NUM_SAMPLERS = 2
NUM_MUTATIONS = 300


def chunk_key_of(item_key: int) -> int:
    return CHUNK_KEY_BASE + item_key // ROWS_PER_CHUNK


def episode_of(chunk_key: int) -> int:
    # Several chunks per episode, so episodes and chunks are counted differently.
    return chunk_key // 3


def chunk_data(chunk_key: int) -> np.ndarray:
    return chunk_key * 1000.0 + np.arange(ROWS_PER_CHUNK * ROW_WIDTH, dtype=np.float64)


@dataclass(frozen=True)
class Workload:
    sampler: str
    remover: str
    max_size: int
    samples_per_insert: float
    min_size_to_sample: int
    error_buffer: float | tuple[float, float]
    max_times_sampled: int


WORKLOADS = [
    pytest.param(Workload("uniform", "fifo", 300, 1.0, 10, 20.0, 0), id="uniform-fifo"),
    pytest.param(
        Workload("prioritized", "min_heap", 100, 2.0, 5, (-4.0, 16.0), 3), id="prioritized-minheap"
    ),
    pytest.param(Workload("fifo", "lifo", 150, 0.5, 20, 5.0, 1), id="fifo-lifo"),
    pytest.param(Workload("max_heap", "uniform", 50, 1.5, 1, (-3.0, 3.1), 2), id="maxheap-uniform"),
]


class Errors:
    """Collects exceptions from worker threads; the test thread re-raises them.

    A failure calls `on_failure` (which closes the tables) so that no other
    thread stays blocked waiting for the failed one."""

    def __init__(self, on_failure: Callable[[], None]) -> None:
        self._lock = threading.Lock()
        self._on_failure = on_failure
        self.errors: list[tuple[str, BaseException]] = []

    def run(self, name: str, fn: Callable[[], None]) -> threading.Thread:
        def body() -> None:
            try:
                fn()
            except BaseException as error:  # noqa: BLE001 - reported by check()
                with self._lock:
                    self.errors.append((name, error))
                self._on_failure()

        thread = threading.Thread(target=body, name=name, daemon=True)
        thread.start()
        return thread

    def check(self) -> None:
        if self.errors:
            name, error = self.errors[0]
            raise AssertionError(f"{len(self.errors)} thread(s) failed; first: {name}") from error


def join_all(threads: list[threading.Thread], what: str) -> None:
    deadline = time.monotonic() + SAFETY
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
        assert not thread.is_alive(), f"{what} thread {thread.name} did not finish"


@pytest.mark.slow
@pytest.mark.parametrize("workload", WORKLOADS)
def test_writers_samplers_mutator_and_observer(store: _core.ChunkStore, workload: Workload) -> None:
    w = workload
    limiter = RateLimiter.sample_to_insert_ratio(
        w.samples_per_insert, w.min_size_to_sample, w.error_buffer
    )
    spi, min_diff = limiter.samples_per_insert, limiter.min_diff
    table = make_table(
        store,
        sampler=w.sampler,
        remover=w.remover,
        max_size=w.max_size,
        rate_limiter=limiter,
        max_times_sampled=w.max_times_sampled,
    )
    total = NUM_WRITERS * INSERTS_PER_WRITER
    received = [0] * NUM_SAMPLERS
    recently_sampled: list[int] = []  # keys likely still in the table, for the mutator
    mutated_deletes = [0]
    observations = [0]
    stop_observer = threading.Event()
    start = threading.Barrier(NUM_WRITERS + NUM_SAMPLERS + 2)
    # One release per chunk written: paces the mutator with the writers.
    chunks_written = threading.Semaphore(0)

    def on_failure() -> None:
        table.close()  # releases blocked writers and samplers
        chunks_written.release(NUM_MUTATIONS)  # and the mutator

    errors = Errors(on_failure)

    def writer(index: int) -> None:
        rng = random.Random(index)
        first = index * INSERTS_PER_WRITER
        start.wait(SAFETY)
        for base in range(first, first + INSERTS_PER_WRITER, ROWS_PER_CHUNK):
            key = chunk_key_of(base)
            handle = store.add(
                key,
                chunk_data(key),
                "<f8",
                (ROW_WIDTH,),
                ROWS_PER_CHUNK,
                episode_id=episode_of(key),
            )
            items = [
                (k, rng.uniform(0.1, 10.0), trajectory(key, k % ROWS_PER_CHUNK))
                for k in range(base, base + ROWS_PER_CHUNK)
            ]
            if index % 2:  # half the writers use insert_batch
                assert table.insert_batch(items, timeout=None) == ROWS_PER_CHUNK
            else:
                for k, priority, traj in items:
                    table.insert(k, priority, traj, timeout=None)
            del handle  # items (if still present) keep the chunk alive
            chunks_written.release()

    def sampler(index: int) -> None:
        rng = random.Random(100 + index)
        start.wait(SAFETY)
        while True:
            try:
                samples = table.sample(rng.randint(1, 8), timeout=None)
            except CancelledError:
                return
            assert 1 <= len(samples) <= 8
            received[index] += len(samples)
            recently_sampled.extend(s.key for s in list(samples)[:2])
            for s in samples:
                assert 0 <= s.key < total
                key = chunk_key_of(s.key)
                row = s.key % ROWS_PER_CHUNK
                assert s.trajectory == trajectory(key, row)
                assert s.times_sampled >= 1
                if w.max_times_sampled:
                    assert s.times_sampled <= w.max_times_sampled
                assert 1 <= s.table_size <= w.max_size
                assert 0.0 < s.probability <= 1.0
                [chunk] = s.chunks
                assert chunk.key == key
                assert chunk.episode_id == episode_of(key)
                assert chunk.num_steps == ROWS_PER_CHUNK
                values = np.frombuffer(chunk, np.float64).reshape(ROWS_PER_CHUNK, ROW_WIDTH)
                assert np.array_equal(values[row], chunk_data(key)[row * 2 : row * 2 + 2])

    def mutator() -> None:
        rng = random.Random(7)
        start.wait(SAFETY)
        for i in range(NUM_MUTATIONS):
            assert chunks_written.acquire(timeout=SAFETY)
            # Keys that were present a moment ago, and some likely absent ones.
            present = [item.key for item in table.snapshot()] or [0]
            recent = recently_sampled[-20:] or [0]
            updates = {rng.choice(present): rng.uniform(0.0, 10.0) for _ in range(3)}
            updates[rng.choice(recent)] = rng.uniform(0.0, 10.0)
            updates[rng.randrange(total)] = 1.0
            deletes = [rng.choice(present)] if i % 3 == 0 else []
            num_updated, num_deleted = table.mutate_priorities(updates=updates, deletes=deletes)
            assert 0 <= num_updated <= len(updates)
            assert 0 <= num_deleted <= len(deletes)
            mutated_deletes[0] += num_deleted

    def observer() -> None:
        start.wait(SAFETY)
        last = (0, 0, 0)
        while not stop_observer.is_set():
            info = table.info()
            rl = info.rate_limiter
            inserts, samples, deletes = rl["inserts"], rl["samples"], rl["deletes"]
            assert 0 <= info.current_size <= w.max_size
            assert inserts - deletes == info.current_size
            assert inserts <= total
            # Every sample needed cursor - 1 >= min_diff before it was taken,
            # and only samples lower the cursor.
            assert samples == 0 or inserts * spi - samples >= min_diff - 1e-9
            assert all(a <= b for a, b in zip(last, (inserts, samples, deletes), strict=True))
            last = (inserts, samples, deletes)
            assert info.num_chunks <= info.current_size
            assert (info.num_chunks == 0) == (info.current_size == 0)
            assert info.num_episodes <= info.num_chunks
            assert info.memory_bytes >= 0
            assert 0 <= rl["waiting_inserts"] <= NUM_WRITERS
            assert 0 <= rl["waiting_samples"] <= NUM_SAMPLERS
            if observations[0] % 25 == 0:
                snapshot = table.snapshot()
                assert len(snapshot) <= w.max_size
                assert len({item.key for item in snapshot}) == len(snapshot)
            observations[0] += 1

    try:
        writers = [errors.run(f"writer-{i}", lambda i=i: writer(i)) for i in range(NUM_WRITERS)]
        samplers = [errors.run(f"sampler-{i}", lambda i=i: sampler(i)) for i in range(NUM_SAMPLERS)]
        mutator_thread = errors.run("mutator", mutator)
        observer_thread = errors.run("observer", observer)

        join_all([*writers, mutator_thread], "writer/mutator")
        errors.check()
        # The samplers drain what the limiter still allows, then all block.
        # (A woken sampler counts as waiting until it re-takes the lock, hence
        # both conditions.)
        wait_until(
            lambda: (
                bool(errors.errors)
                or (
                    table.info().rate_limiter["waiting_samples"] == NUM_SAMPLERS
                    and not table.can_sample(1)
                )
            ),
            "the samplers have taken every sample the limiter allows",
        )
        errors.check()
        stop_observer.set()
        join_all([observer_thread], "observer")
        table.close()
        join_all(samplers, "sampler")
        errors.check()
    finally:
        stop_observer.set()
        table.close()

    assert observations[0] > 0
    info = table.info()
    rl = info.rate_limiter
    assert rl["inserts"] == total  # every key was new
    assert rl["inserts"] - rl["deletes"] == info.current_size == len(table)
    assert rl["samples"] == sum(received)
    if info.current_size >= w.min_size_to_sample:
        # Drained: exactly as many samples as the limiter allows in total.
        assert rl["samples"] == math.floor(total * spi - min_diff)
    else:
        assert rl["samples"] <= math.floor(total * spi - min_diff)
    assert mutated_deletes[0] > 0
    assert rl["deletes"] >= mutated_deletes[0]
    assert (rl["waiting_inserts"], rl["waiting_samples"]) == (0, 0)
    assert info.current_size <= w.max_size
    assert info.num_unique_samples <= rl["samples"]
    snapshot = check_accounting(table)
    assert all(
        item.trajectory == trajectory(chunk_key_of(item.key), item.key % ROWS_PER_CHUNK)
        for item in snapshot
    )
    # Only chunks still referenced by items are alive.
    del snapshot
    assert len(store) == info.num_chunks


def test_blocked_waits_do_not_block_another_table_on_the_same_store(
    store: _core.ChunkStore,
) -> None:
    empty = make_table(store, name="empty", rate_limiter=RateLimiter.min_size(1))
    full = make_table(store, name="full", rate_limiter=RateLimiter.queue(1))
    other = make_table(store, name="other", max_size=50, rate_limiter=RateLimiter.min_size(1))
    tables = [empty, full, other]
    errors = Errors(lambda: [table.close() for table in tables])
    seed_chunk = store.add(1, np.zeros(4, np.float32), "<f4", (), 4)
    full.insert(0, 1.0, trajectory(1), timeout=0)
    sampled: list = []
    try:
        blocked = [
            errors.run("sampler", lambda: sampled.extend(empty.sample(1, timeout=None))),
            errors.run("inserter", lambda: full.insert(1, 1.0, trajectory(1), timeout=None)),
        ]
        wait_until(lambda: empty.info().rate_limiter["waiting_samples"] == 1, "the sampler blocks")
        wait_until(lambda: full.info().rate_limiter["waiting_inserts"] == 1, "the inserter blocks")

        def work() -> None:
            # Chunk adds, inserts, samples and info on another table of the same store.
            for key in range(100, 300):
                chunk = store.add(key, np.full(4, key, np.float32), "<f4", (), 4, episode_id=key)
                other.insert(key, 1.0, trajectory(key, key % 4), timeout=0)
                del chunk
                [s] = other.sample(1, timeout=0)
                assert s.chunks[0].key in store
            other.mutate_priorities(updates={100: 2.0}, deletes=[299])
            assert other.info().current_size == 49

        worker = errors.run("other-table", work)
        join_all([worker], "other-table")
        errors.check()
        # The blocked calls were neither woken nor disturbed.
        assert empty.info().rate_limiter["waiting_samples"] == 1
        assert full.info().rate_limiter["waiting_inserts"] == 1
        assert len(other) == 49
        assert len(store) == 1 + 49

        empty.insert(5, 1.0, trajectory(1), timeout=0)
        full.sample(1, timeout=0)
        join_all(blocked, "blocked")
        errors.check()
        assert [s.key for s in sampled] == [5]
        assert sorted(item.key for item in full.snapshot()) == [0, 1]
    finally:
        for table in tables:
            table.close()
    del seed_chunk
