"""Rate limiter semantics (docs/semantics.md §4.1-§4.5) on a standalone
RateLimiter and through real Tables, including blocking, waking, deadlines,
reset and close across threads.

Cross-thread tests never sleep to synchronise: they poll the table's
`waiting_inserts` / `waiting_samples` counters (state) until the other thread
is known to be blocked. Blocked calls wait with timeout=None, so a missed
wake-up cannot be hidden by a wait that ends at its deadline and re-checks;
the test thread joins them with a safety bound, and the fixture closes every
table at teardown so that no thread stays blocked.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from typing import Any

import pytest

from resound import _core

from helpers.core_tables import trajectory
from helpers.waiting import Background, wait_until

RateLimiter = _core.RateLimiter
DeadlineExceededError = _core.DeadlineExceededError
CancelledError = _core.CancelledError

DBL_MAX = sys.float_info.max


# ---------------------------------------------------------------------------
# Helpers


def limiter_info(table: _core.Table) -> dict:
    return table.info().rate_limiter


def wait_blocked(table: _core.Table, inserts: int = 0, samples: int = 0) -> None:
    def reached() -> bool:
        info = limiter_info(table)
        return info["waiting_inserts"] == inserts and info["waiting_samples"] == samples

    wait_until(reached, f"{inserts} inserts and {samples} samples are blocked")


def counters(source: Any) -> tuple[int, int, int]:
    """(inserts, samples, deletes) of a RateLimiter or a Table."""
    if isinstance(source, _core.Table):
        info = limiter_info(source)
        return info["inserts"], info["samples"], info["deletes"]
    return source.inserts, source.samples, source.deletes


def check_invariant(table: _core.Table) -> None:
    info = table.info()
    assert info.rate_limiter["inserts"] - info.rate_limiter["deletes"] == info.current_size
    assert info.current_size == len(table)


@pytest.fixture
def traj(chunk_factory: Callable[..., _core.Chunk]) -> list:
    """A valid one-row trajectory; items of a test may all share it."""
    return trajectory(chunk_factory().key)


def fill(table: _core.Table, traj: list, keys: range | list[int]) -> None:
    for key in keys:
        table.insert(key, 1.0, traj, timeout=0)


# ---------------------------------------------------------------------------
# Configurations


def test_base_constructor_keeps_its_arguments_and_starts_at_zero() -> None:
    rl = RateLimiter(1.5, 3, -2.0, 4.5)
    assert (rl.samples_per_insert, rl.min_size_to_sample, rl.min_diff, rl.max_diff) == (
        1.5,
        3,
        -2.0,
        4.5,
    )
    assert counters(rl) == (0, 0, 0)
    info = rl.info()
    assert info["samples_per_insert"] == 1.5
    assert info["min_size_to_sample"] == 3
    assert (info["min_diff"], info["max_diff"]) == (-2.0, 4.5)
    assert (info["inserts"], info["samples"], info["deletes"]) == (0, 0, 0)
    assert (info["waiting_inserts"], info["waiting_samples"]) == (0, 0)


def test_base_constructor_accepts_equal_diffs() -> None:
    rl = RateLimiter(1.0, 1, 3.0, 3.0)
    assert rl.min_diff == rl.max_diff == 3.0


@pytest.mark.parametrize("m", [1, 7])
def test_min_size_config(m: int) -> None:
    rl = RateLimiter.min_size(m)
    assert rl.samples_per_insert == 1.0
    assert rl.min_size_to_sample == m
    assert rl.min_diff == -DBL_MAX
    assert rl.max_diff == DBL_MAX


@pytest.mark.parametrize(
    ("spi", "min_size", "error_buffer", "expected"),
    [
        (1.0, 10, 1.0, (9.0, 11.0)),  # a worked example of docs/semantics.md §4.4
        (1.5, 2, 3.0, (0.0, 6.0)),
        (0.5, 4, 1.0, (1.0, 3.0)),  # range exactly 2 * max(1, 0.5)
        (3.0, 2, 3.0, (3.0, 9.0)),  # range exactly 2 * max(1, 3)
    ],
)
def test_sample_to_insert_ratio_with_number(
    spi: float, min_size: int, error_buffer: float, expected: tuple[float, float]
) -> None:
    rl = RateLimiter.sample_to_insert_ratio(spi, min_size, error_buffer)
    assert rl.samples_per_insert == spi
    assert rl.min_size_to_sample == min_size
    assert (rl.min_diff, rl.max_diff) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("spi", "min_size", "error_buffer"),
    [
        (1.5, 1, (-3.0, 3.1)),
        (1.0, 1, (-1.0, 1.0)),  # range exactly 2
        (1.0, 2, (2.0, 4.0)),  # lower bound exactly spi * min_size
        (3.0, 2, (0.0, 6.0)),  # range exactly 2 * spi
    ],
)
def test_sample_to_insert_ratio_with_pair(
    spi: float, min_size: int, error_buffer: tuple[float, float]
) -> None:
    rl = RateLimiter.sample_to_insert_ratio(spi, min_size, error_buffer)
    assert (rl.samples_per_insert, rl.min_size_to_sample) == (spi, min_size)
    assert (rl.min_diff, rl.max_diff) == error_buffer


@pytest.mark.parametrize("factory", [RateLimiter.queue, RateLimiter.stack])
@pytest.mark.parametrize("size", [1, 5])
def test_queue_and_stack_config(factory: Callable[[int], RateLimiter], size: int) -> None:
    rl = factory(size)
    assert rl.samples_per_insert == 1.0
    assert rl.min_size_to_sample == 1
    assert (rl.min_diff, rl.max_diff) == (0.0, float(size))


NAN = math.nan
ratio = RateLimiter.sample_to_insert_ratio
INVALID_CONSTRUCTIONS = [
    # RateLimiter(samples_per_insert, min_size_to_sample, min_diff, max_diff)
    ("base spi 0", lambda: RateLimiter(0.0, 1, 0.0, 1.0), "samples_per_insert"),
    ("base spi < 0", lambda: RateLimiter(-1.0, 1, 0.0, 1.0), "samples_per_insert"),
    ("base spi nan", lambda: RateLimiter(NAN, 1, 0.0, 1.0), "samples_per_insert"),
    ("base min_size 0", lambda: RateLimiter(1.0, 0, 0.0, 1.0), "min_size_to_sample"),
    ("base min_size < 0", lambda: RateLimiter(1.0, -4, 0.0, 1.0), "min_size_to_sample"),
    ("base min > max", lambda: RateLimiter(1.0, 1, 2.0, 1.0), "min_diff"),
    ("base min_diff nan", lambda: RateLimiter(1.0, 1, NAN, 1.0), "min_diff"),
    ("base max_diff nan", lambda: RateLimiter(1.0, 1, 0.0, NAN), "max_diff"),
    # MinSize
    ("min_size 0", lambda: RateLimiter.min_size(0), "min_size_to_sample"),
    ("min_size < 0", lambda: RateLimiter.min_size(-1), "min_size_to_sample"),
    # SampleToInsertRatio, error_buffer a number
    ("ratio spi 0", lambda: ratio(0.0, 1, 5.0), "samples_per_insert"),
    ("ratio spi < 0", lambda: ratio(-2.0, 1, 5.0), "samples_per_insert"),
    ("ratio spi nan", lambda: ratio(NAN, 1, 5.0), "samples_per_insert"),
    ("ratio range < 2", lambda: ratio(1.0, 10, 0.5), "error_buffer"),
    ("ratio range < 2spi", lambda: ratio(3.0, 10, 2.9), "error_buffer"),
    ("ratio buffer < 0", lambda: ratio(1.0, 1, -1.0), "error_buffer"),
    ("ratio buffer nan", lambda: ratio(1.0, 1, NAN), "error_buffer"),
    ("ratio min_size 0", lambda: ratio(1.0, 0, 5.0), "min_size_to_sample"),
    # SampleToInsertRatio, error_buffer a (min_diff, max_diff) pair
    ("pair spi 0", lambda: ratio(0.0, 1, (-1.0, 1.0)), "samples_per_insert"),
    ("pair range < 2", lambda: ratio(1.0, 1, (-1.0, 0.5)), "error_buffer"),
    ("pair range < 2spi", lambda: ratio(4.0, 10, (0.0, 7.9)), "error_buffer"),
    ("pair lo > spi*m", lambda: ratio(1.0, 1, (2.0, 10.0)), "error_buffer"),
    ("pair reversed", lambda: ratio(1.0, 1, (5.0, 1.0)), "error_buffer"),
    ("pair nan", lambda: ratio(1.0, 1, (NAN, 3.0)), "error_buffer"),
    ("pair min_size 0", lambda: ratio(1.0, 0, (-5.0, 5.0)), "min_size_to_sample"),
    # Queue / Stack
    ("queue 0", lambda: RateLimiter.queue(0), r"\bsize\b"),
    ("queue < 0", lambda: RateLimiter.queue(-3), r"\bsize\b"),
    ("stack 0", lambda: RateLimiter.stack(0), r"\bsize\b"),
    ("stack < 0", lambda: RateLimiter.stack(-1), r"\bsize\b"),
]


@pytest.mark.parametrize(
    ("factory", "argument"),
    [pytest.param(factory, argument, id=name) for name, factory, argument in INVALID_CONSTRUCTIONS],
)
def test_invalid_construction_raises_value_error_naming_the_argument(
    factory: Callable[[], RateLimiter], argument: str
) -> None:
    with pytest.raises(ValueError, match=argument):
        factory()


def test_can_insert_and_can_sample_reject_n_below_one(tables: Any) -> None:
    rl = RateLimiter.min_size(1)
    table = tables()
    for target in (rl, table):
        for n in (0, -1):
            with pytest.raises(ValueError, match=r"\bn\b"):
                target.can_insert(n)
            with pytest.raises(ValueError, match=r"\bn\b"):
                target.can_sample(n)


def test_table_copies_the_configuration_and_keeps_its_own_counters(tables: Any, traj: list) -> None:
    rl = RateLimiter.sample_to_insert_ratio(1.5, 2, (-1.0, 3.0))
    for _ in range(3):
        rl.record_insert()
    rl.record_sample()
    table = tables(rate_limiter=rl)
    info = limiter_info(table)
    assert (info["inserts"], info["samples"], info["deletes"]) == (0, 0, 0)
    assert info["samples_per_insert"] == 1.5
    assert info["min_size_to_sample"] == 2
    assert (info["min_diff"], info["max_diff"]) == (-1.0, 3.0)
    table.insert(1, 1.0, traj, timeout=0)
    # The limiter passed in is not shared with the table.
    assert counters(rl) == (3, 1, 0)
    assert counters(table) == (1, 0, 0)


def test_reset_counters_standalone() -> None:
    rl = RateLimiter.queue(2)
    rl.record_insert()
    rl.record_insert()
    rl.record_sample()
    rl.record_delete()
    assert not rl.can_insert(2)
    rl.reset_counters()
    assert counters(rl) == (0, 0, 0)
    assert rl.can_insert(2)
    assert not rl.can_sample(1)


# ---------------------------------------------------------------------------
# docs/semantics.md §4.4 worked examples on a standalone limiter


def test_example_min_size_two_standalone() -> None:
    """spi=1, min=2, diff in [-1, 1]: sampling needs 2 inserts."""
    rl = RateLimiter(1.0, 2, -1.0, 1.0)
    assert not rl.can_sample(1)
    rl.record_insert()
    assert not rl.can_sample(1)
    assert rl.can_insert(1)  # size 2 <= min_size: still filling
    rl.record_insert()
    assert rl.can_sample(1)


def test_example_spi_1_5_six_samples_standalone() -> None:
    """spi=1.5, min=1, diff in [-3, 3.1]: two inserts, then six samples."""
    rl = RateLimiter(1.5, 1, -3.0, 3.1)
    assert rl.can_insert(2)
    rl.record_insert()
    rl.record_insert()  # cursor 3.0
    assert not rl.can_insert(1)  # 4.5 > 3.1
    assert rl.can_sample(6)
    assert not rl.can_sample(7)
    for expected_cursor in (2.0, 1.0, 0.0, -1.0, -2.0, -3.0):
        assert rl.can_sample(1)
        rl.record_sample()
        assert rl.inserts * 1.5 - rl.samples == expected_cursor
    assert not rl.can_sample(1)
    assert rl.can_insert(1)  # 4.5 - 6 <= 3.1


def test_example_insert_blocked_until_second_sample_standalone() -> None:
    """spi=1.5, min=2, diff in [-1, 3]: a third insert needs two samples."""
    rl = RateLimiter(1.5, 2, -1.0, 3.0)
    rl.record_insert()
    rl.record_insert()  # cursor 3.0
    rl.record_sample()  # cursor 2.0
    assert not rl.can_insert(1)  # would be 3.5
    rl.record_sample()  # cursor 1.0
    assert rl.can_insert(1)  # 2.5


def test_example_can_sample_n_standalone() -> None:
    """spi=1, min=1, diff in [-1, 1], one insert: two samples, not three."""
    rl = RateLimiter(1.0, 1, -1.0, 1.0)
    rl.record_insert()
    assert rl.can_sample(1)
    assert rl.can_sample(2)
    assert not rl.can_sample(3)
    rl.record_sample()
    assert rl.can_sample(1)
    rl.record_sample()
    assert not rl.can_sample(1)


def test_example_can_insert_n_standalone() -> None:
    """spi=1.5, min=2, diff in [0, 5]."""
    rl = RateLimiter(1.5, 2, 0.0, 5.0)
    assert rl.can_insert(1)
    assert rl.can_insert(2)
    assert rl.can_insert(3)  # 4.5 <= 5
    assert not rl.can_insert(4)  # 6.0
    for _ in range(3):
        rl.record_insert()
    assert not rl.can_insert(1)
    rl.record_sample()
    rl.record_sample()
    assert rl.can_insert(1)  # 4.0
    assert not rl.can_insert(2)  # 5.5


def test_example_delete_unblocks_insert_standalone() -> None:
    """spi=5, min=2, diff in [0, 5]: a sample does not unblock inserts, a delete does."""
    rl = RateLimiter(5.0, 2, 0.0, 5.0)
    rl.record_insert()
    rl.record_insert()
    assert not rl.can_insert(1)
    rl.record_sample()
    assert not rl.can_insert(1)
    rl.record_delete()
    assert rl.can_insert(1)  # size falls back to <= min_size


def test_example_delete_blocks_sampling_standalone() -> None:
    """spi=5, min=2, diff in [0, 5]: a delete blocks sampling, an insert unblocks it."""
    rl = RateLimiter(5.0, 2, 0.0, 5.0)
    rl.record_insert()
    rl.record_insert()
    rl.record_sample()
    assert rl.can_sample(1)
    rl.record_delete()
    assert not rl.can_sample(1)
    rl.record_insert()
    assert rl.can_sample(1)


def test_example_counters_keep_counting_standalone() -> None:
    """spi=1.5, min=2, [0, 5]: the counters a checkpoint records, then continued counting."""
    rl = RateLimiter(1.5, 2, 0.0, 5.0)
    rl.record_insert()
    rl.record_insert()
    rl.record_sample()
    rl.record_delete()
    assert counters(rl) == (2, 1, 1)
    info = rl.info()
    assert (info["inserts"], info["samples"], info["deletes"]) == (2, 1, 1)
    rl.record_insert()
    assert rl.inserts == 3
    rl.record_sample()
    assert rl.samples == 2


def test_example_queue_standalone() -> None:
    """Queue(N) with max_times_sampled=1 (every sample also deletes)."""
    rl = RateLimiter.queue(3)
    assert not rl.can_sample(1)
    for _ in range(3):
        assert rl.can_insert(1)
        rl.record_insert()
    assert not rl.can_insert(1)
    assert rl.can_sample(3)
    rl.record_sample()
    rl.record_delete()
    assert rl.can_insert(1)


def test_example_queue_quirk_delete_without_sample_shrinks_capacity_standalone() -> None:
    rl = RateLimiter.queue(3)
    for _ in range(3):
        rl.record_insert()
    rl.record_delete()  # a MutatePriorities delete: no sample
    assert not rl.can_insert(1)  # only two items, still full
    rl.record_sample()
    rl.record_delete()
    assert rl.can_insert(1)


def test_example_ratio_1_10_1_standalone() -> None:
    """SampleToInsertRatio(1.0, 10, 1.0): range [9, 11]."""
    rl = RateLimiter.sample_to_insert_ratio(1.0, 10, 1.0)
    for _ in range(9):
        rl.record_insert()
    assert not rl.can_sample(1)  # size 9 < 10
    rl.record_insert()
    assert rl.can_sample(1)  # 10 - 1 >= 9
    assert not rl.can_sample(2)
    assert rl.can_insert(1)  # 11 <= 11
    assert not rl.can_insert(2)  # 12 > 11


# ---------------------------------------------------------------------------
# docs/semantics.md §4.4 worked examples through tables


def test_example_min_size_two_table(tables: Any, traj: list) -> None:
    table = tables(rate_limiter=RateLimiter(1.0, 2, -1.0, 1.0))
    with pytest.raises(DeadlineExceededError):
        table.sample(timeout=0)
    table.insert(1, 1.0, traj, timeout=0)
    assert not table.can_sample(1)
    with pytest.raises(DeadlineExceededError):
        table.sample(timeout=0)
    table.insert(2, 1.0, traj, timeout=0)
    assert table.can_sample(1)
    [sample] = table.sample(timeout=0)
    assert sample.key in (1, 2)
    assert counters(table) == (2, 1, 0)


def test_sampler_blocked_on_min_size_is_woken_by_the_insert_that_reaches_it(
    tables: Any, traj: list
) -> None:
    table = tables(rate_limiter=RateLimiter(1.0, 2, -1.0, 1.0))
    sampler = Background(table.sample, 1, timeout=None)
    wait_blocked(table, samples=1)
    table.insert(1, 1.0, traj, timeout=0)
    # One item is not enough: the sampler is still blocked.
    assert not table.can_sample(1)
    assert limiter_info(table)["samples"] == 0
    table.insert(2, 1.0, traj, timeout=0)
    [sample] = sampler.value()
    assert sample.key in (1, 2)
    assert sample.rate_limited
    info = limiter_info(table)
    assert info["samples"] == 1
    assert info["waiting_samples"] == 0
    assert info["blocked_samples"] == 1


@pytest.mark.parametrize("batch", [False, True], ids=["one_at_a_time", "flexible_batch"])
def test_example_spi_1_5_six_samples_table(tables: Any, traj: list, batch: bool) -> None:
    table = tables(rate_limiter=RateLimiter.sample_to_insert_ratio(1.5, 1, (-3.0, 3.1)))
    fill(table, traj, [1, 2])
    with pytest.raises(DeadlineExceededError):
        table.insert(3, 1.0, traj, timeout=0)
    assert len(table) == 2
    assert table.can_sample(6)
    assert not table.can_sample(7)
    if batch:
        assert len(table.sample(10, timeout=0)) == 6
    else:
        for _ in range(6):
            assert len(table.sample(timeout=0)) == 1
    with pytest.raises(DeadlineExceededError):
        table.sample(timeout=0)
    assert counters(table) == (2, 6, 0)
    table.insert(3, 1.0, traj, timeout=0)  # 4.5 - 6 <= 3.1
    check_invariant(table)


def test_example_inserter_blocked_by_ratio_is_woken_by_a_sample(tables: Any, traj: list) -> None:
    """spi=1.5, min=2, diff in [-1, 3]: the third insert waits for a second sample."""
    table = tables(rate_limiter=RateLimiter.sample_to_insert_ratio(1.5, 2, (-1.0, 3.0)))
    fill(table, traj, [1, 2])
    table.sample(timeout=0)  # cursor 2.0
    with pytest.raises(DeadlineExceededError):
        table.insert(3, 1.0, traj, timeout=0)  # would be 3.5
    inserter = Background(table.insert, 3, 1.0, traj, timeout=None)
    wait_blocked(table, inserts=1)
    assert len(table) == 2
    table.sample(timeout=0)  # cursor 1.0: the insert fits (2.5)
    inserter.value()
    assert len(table) == 3
    assert counters(table) == (3, 2, 0)
    info = limiter_info(table)
    assert info["waiting_inserts"] == 0
    assert info["blocked_inserts"] == 1
    check_invariant(table)


def test_example_can_sample_n_table(tables: Any, traj: list) -> None:
    table = tables(rate_limiter=RateLimiter(1.0, 1, -1.0, 1.0))
    table.insert(1, 1.0, traj, timeout=0)
    assert table.can_sample(1)
    assert table.can_sample(2)
    assert not table.can_sample(3)
    samples = table.sample(5, timeout=0)
    assert [s.key for s in samples] == [1, 1]
    assert [s.times_sampled for s in samples] == [1, 2]
    with pytest.raises(DeadlineExceededError):
        table.sample(timeout=0)
    assert counters(table) == (1, 2, 0)


def test_example_can_insert_n_table(tables: Any, traj: list) -> None:
    table = tables(rate_limiter=RateLimiter.sample_to_insert_ratio(1.5, 2, (0.0, 5.0)))
    assert table.can_insert(1)
    assert table.can_insert(2)
    assert table.can_insert(3)
    assert not table.can_insert(4)
    items = [(key, 1.0, traj) for key in range(4)]
    with pytest.raises(DeadlineExceededError) as raised:
        table.insert_batch(items, timeout=0)
    assert raised.value.num_inserted == 3
    assert [item.key for item in table.snapshot()] == [0, 1, 2]
    assert not table.can_insert(1)
    assert len(table.sample(2, timeout=0)) == 2
    assert table.can_insert(1)  # 4.0
    assert not table.can_insert(2)  # 5.5
    table.insert(3, 1.0, traj, timeout=0)
    assert counters(table) == (4, 2, 0)


def test_example_sample_does_not_but_delete_does_unblock_insert(tables: Any, traj: list) -> None:
    """spi=5, min=2, diff in [0, 5]: a blocked inserter is woken by a delete."""
    table = tables(rate_limiter=RateLimiter(5.0, 2, 0.0, 5.0))
    fill(table, traj, [1, 2])
    assert not table.can_insert(1)
    inserter = Background(table.insert, 3, 1.0, traj, timeout=None)
    wait_blocked(table, inserts=1)
    table.sample(timeout=0)
    assert not table.can_insert(1)
    assert limiter_info(table)["waiting_inserts"] == 1
    assert len(table) == 2
    assert table.mutate_priorities(deletes=[1]) == (0, 1)
    inserter.value()
    assert sorted(item.key for item in table.snapshot()) == [2, 3]
    assert counters(table) == (3, 1, 1)
    check_invariant(table)


def test_example_delete_blocks_sampling_insert_unblocks_it(tables: Any, traj: list) -> None:
    """spi=5, min=2, diff in [0, 5]: after a delete a sampler waits for an insert."""
    table = tables(rate_limiter=RateLimiter(5.0, 2, 0.0, 5.0))
    fill(table, traj, [1, 2])
    table.sample(timeout=0)
    assert table.mutate_priorities(deletes=[1]) == (0, 1)
    assert not table.can_sample(1)
    with pytest.raises(DeadlineExceededError):
        table.sample(timeout=0)
    sampler = Background(table.sample, 1, timeout=None)
    wait_blocked(table, samples=1)
    table.insert(3, 1.0, traj, timeout=0)
    [sample] = sampler.value()
    assert sample.key in (2, 3)
    assert sample.rate_limited
    assert counters(table) == (3, 2, 1)
    check_invariant(table)


def test_example_counters_keep_counting_table(tables: Any, traj: list) -> None:
    table = tables(rate_limiter=RateLimiter.sample_to_insert_ratio(1.5, 2, (0.0, 5.0)))
    fill(table, traj, [1, 2])
    table.sample(timeout=0)
    table.mutate_priorities(deletes=[1])
    assert counters(table) == (2, 1, 1)
    table.insert(3, 1.0, traj, timeout=0)
    assert counters(table) == (3, 1, 1)
    table.sample(timeout=0)
    assert counters(table) == (3, 2, 1)


def test_example_queue_quirk_mutate_delete_shrinks_capacity(tables: Any, traj: list) -> None:
    table = tables(
        sampler="fifo",
        remover="fifo",
        max_size=3,
        rate_limiter=RateLimiter.queue(3),
        max_times_sampled=1,
    )
    fill(table, traj, [1, 2, 3])
    with pytest.raises(DeadlineExceededError):
        table.insert(4, 1.0, traj, timeout=0)
    table.mutate_priorities(deletes=[2])
    assert len(table) == 2
    # Two items, but the queue still counts as full: no sample happened.
    assert not table.can_insert(1)
    with pytest.raises(DeadlineExceededError):
        table.insert(4, 1.0, traj, timeout=0)
    [sample] = table.sample(timeout=0)
    assert sample.key == 1
    assert len(table) == 1
    table.insert(4, 1.0, traj, timeout=0)
    assert [item.key for item in table.snapshot()] == [3, 4]
    assert counters(table) == (4, 1, 2)


def test_example_ratio_1_10_1_table(tables: Any, traj: list) -> None:
    table = tables(rate_limiter=RateLimiter.sample_to_insert_ratio(1.0, 10, 1.0))
    info = limiter_info(table)
    assert (info["min_diff"], info["max_diff"]) == (9.0, 11.0)
    fill(table, traj, range(9))
    assert not table.can_sample(1)
    table.insert(9, 1.0, traj, timeout=0)
    assert len(table.sample(5, timeout=0)) == 1  # 10 - 1 >= 9, then 8 < 9
    table.insert(10, 1.0, traj, timeout=0)  # 11 - 1 <= 11
    table.insert(11, 1.0, traj, timeout=0)  # 12 - 1 <= 11
    with pytest.raises(DeadlineExceededError):
        table.insert(12, 1.0, traj, timeout=0)  # 13 - 1 > 11
    check_invariant(table)


# ---------------------------------------------------------------------------
# Blocking and waking across threads


def test_sampler_blocked_on_empty_table_is_woken_by_insert(tables: Any, traj: list) -> None:
    table = tables()
    sampler = Background(table.sample, 1, timeout=None)
    wait_blocked(table, samples=1)
    assert not sampler.done()
    table.insert(42, 3.0, traj, timeout=0)
    [sample] = sampler.value()
    assert sample.key == 42
    assert sample.priority == 3.0
    assert sample.rate_limited
    assert limiter_info(table)["waiting_samples"] == 0
    # A sample that did not wait is not rate limited.
    [again] = table.sample(timeout=0)
    assert not again.rate_limited


def test_several_blocked_samplers_are_each_served_by_one_insert(tables: Any, traj: list) -> None:
    table = tables(
        sampler="fifo", remover="fifo", rate_limiter=RateLimiter.queue(10), max_times_sampled=1
    )
    samplers = [Background(table.sample, 1, timeout=None) for _ in range(3)]
    wait_blocked(table, samples=3)
    for key in (1, 2, 3):
        table.insert(key, 1.0, traj, timeout=0)
    keys = sorted(s.key for sampler in samplers for s in sampler.value())
    assert keys == [1, 2, 3]
    assert len(table) == 0
    assert counters(table) == (3, 3, 3)


def test_inserter_blocked_on_full_queue_is_woken_by_sample(tables: Any, traj: list) -> None:
    table = tables(
        sampler="fifo",
        remover="fifo",
        max_size=2,
        rate_limiter=RateLimiter.queue(2),
        max_times_sampled=1,
    )
    fill(table, traj, [1, 2])
    inserter = Background(table.insert, 3, 1.0, traj, timeout=None)
    wait_blocked(table, inserts=1)
    assert len(table) == 2
    [sample] = table.sample(timeout=0)
    assert sample.key == 1
    inserter.value()
    assert [item.key for item in table.snapshot()] == [2, 3]
    assert counters(table) == (3, 1, 1)


def test_blocked_inserter_of_existing_key_is_gated_and_woken_too(tables: Any, traj: list) -> None:
    """A duplicate key does not use the insert budget but still waits for can_insert."""
    table = tables(sampler="fifo", remover="fifo", rate_limiter=RateLimiter.queue(1))
    table.insert(1, 1.0, traj, timeout=0)
    with pytest.raises(DeadlineExceededError):
        table.insert(1, 5.0, traj, timeout=0)
    assert table.snapshot()[0].priority == 1.0
    inserter = Background(table.insert, 1, 5.0, traj, timeout=None)
    wait_blocked(table, inserts=1)
    table.sample(timeout=0)  # no max_times_sampled: the item stays
    inserter.value()
    [item] = table.snapshot()
    assert item.priority == 5.0
    assert counters(table) == (1, 1, 0)


def test_reset_re_evaluates_blocked_inserter(tables: Any, traj: list) -> None:
    table = tables(rate_limiter=RateLimiter.queue(1))
    table.insert(1, 1.0, traj, timeout=0)
    inserter = Background(table.insert, 2, 1.0, traj, timeout=None)
    wait_blocked(table, inserts=1)
    table.reset()
    inserter.value()
    assert [item.key for item in table.snapshot()] == [2]
    assert counters(table) == (1, 0, 0)


def test_reset_keeps_blocked_sampler_waiting(tables: Any, traj: list) -> None:
    table = tables(rate_limiter=RateLimiter.min_size(2))
    table.insert(1, 1.0, traj, timeout=0)
    sampler = Background(table.sample, 1, timeout=None)
    wait_blocked(table, samples=1)
    table.reset()
    assert limiter_info(table)["waiting_samples"] == 1
    assert not sampler.done()
    table.insert(2, 1.0, traj, timeout=0)
    assert not table.can_sample(1)  # the item inserted before the reset is gone
    table.insert(3, 1.0, traj, timeout=0)
    [sample] = sampler.value()
    assert sample.key in (2, 3)
    assert counters(table) == (2, 1, 0)


# ---------------------------------------------------------------------------
# Deadlines


@pytest.mark.parametrize("timeout", [0, 0.05])
def test_sample_deadline_on_empty_table(tables: Any, timeout: float) -> None:
    table = tables()
    start = time.monotonic()
    with pytest.raises(DeadlineExceededError):
        table.sample(3, timeout=timeout)
    assert time.monotonic() - start >= timeout * 0.9
    info = table.info()
    assert info.current_size == 0
    assert info.num_unique_samples == 0
    assert (info.rate_limiter["samples"], info.rate_limiter["waiting_samples"]) == (0, 0)


@pytest.mark.parametrize("timeout", [0, 0.05])
def test_a_deadline_says_what_the_rate_limiter_waits_for(
    tables: Any, traj: list, timeout: float
) -> None:
    table = tables(name="replay", rate_limiter=RateLimiter.min_size(2))
    table.insert(1, 1.0, traj, timeout=0)
    with pytest.raises(DeadlineExceededError) as raised:
        table.sample(timeout=timeout)
    assert str(raised.value) == (
        "table 'replay' has 1 item; MinSize(2) needs 2 before sampling (1 more insert)"
    )
    # Two samples per insert, 1 below to 3 above that: one insert allows 3
    # samples, a fourth needs one more insert; two more inserts go in, and
    # the one after them needs two more samples.
    ratio = tables(name="r", rate_limiter=RateLimiter(2.0, 1, -1.0, 3.0))
    ratio.insert(1, 1.0, traj, timeout=0)
    ratio.sample(3, timeout=0)
    with pytest.raises(DeadlineExceededError) as raised:
        ratio.sample(timeout=timeout)
    # Built from numbers, the limiter is named by them.
    assert str(raised.value) == (
        "table 'r': RateLimiter(samples_per_insert=2, min_size_to_sample=1, min_diff=-1, "
        "max_diff=3) needs 1 more insert before sampling (1 item, 1 insert and 3 samples so far)"
    )
    fill(ratio, traj, [2, 3])
    with pytest.raises(DeadlineExceededError, match="needs 2 more samples before inserting"):
        ratio.insert(4, 1.0, traj, timeout=timeout)
    ratio.sample(2, timeout=0)
    ratio.insert(4, 1.0, traj, timeout=0)  # as the message said


@pytest.mark.parametrize("timeout", [0, 0.05])
def test_sample_deadline_leaves_items_untouched(tables: Any, traj: list, timeout: float) -> None:
    table = tables(rate_limiter=RateLimiter(1.0, 1, 0.0, 10.0))
    table.insert(1, 1.0, traj, timeout=0)
    table.sample(timeout=0)  # cursor 0: no more samples allowed
    with pytest.raises(DeadlineExceededError):
        table.sample(timeout=timeout)
    [item] = table.snapshot()
    assert item.times_sampled == 1
    assert counters(table) == (1, 1, 0)
    assert limiter_info(table)["waiting_samples"] == 0


@pytest.mark.parametrize("timeout", [0, 0.05])
def test_insert_deadline_leaves_no_trace(
    store: _core.ChunkStore, tables: Any, traj: list, timeout: float
) -> None:
    table = tables(rate_limiter=RateLimiter.queue(1), max_times_sampled=1)
    table.insert(1, 1.0, traj, timeout=0)
    chunk = store.add(555, b"\x00" * 16, "<f4", (), 4)
    start = time.monotonic()
    with pytest.raises(DeadlineExceededError):
        table.insert(2, 1.0, trajectory(555), timeout=timeout)
    assert time.monotonic() - start >= timeout * 0.9
    assert [item.key for item in table.snapshot()] == [1]
    assert counters(table) == (1, 0, 0)
    assert limiter_info(table)["waiting_inserts"] == 0
    assert table.info().num_chunks == 1
    # The timed-out insert is not left queued: freeing space does not insert it...
    table.sample(timeout=0)
    assert len(table) == 0
    assert counters(table) == (1, 1, 1)
    # ...and the table holds no reference to its chunk.
    del chunk
    assert 555 not in store


def test_insert_batch_deadline_reports_progress(tables: Any, traj: list) -> None:
    table = tables(rate_limiter=RateLimiter.queue(2))
    with pytest.raises(DeadlineExceededError) as raised:
        table.insert_batch([(key, 1.0, traj) for key in range(5)], timeout=0.02)
    assert raised.value.num_inserted == 2
    assert [item.key for item in table.snapshot()] == [0, 1]
    assert counters(table) == (2, 0, 0)
    assert limiter_info(table)["waiting_inserts"] == 0


@pytest.mark.parametrize("timeout", [-1.0, -1e-9, math.nan])
def test_invalid_timeout_is_value_error(tables: Any, traj: list, timeout: float) -> None:
    table = tables()
    with pytest.raises(ValueError, match="timeout"):
        table.insert(1, 1.0, traj, timeout=timeout)
    with pytest.raises(ValueError, match="timeout"):
        table.insert_batch([(2, 1.0, traj)], timeout=timeout)
    assert len(table) == 0
    table.insert(3, 1.0, traj, timeout=0)
    with pytest.raises(ValueError, match="timeout"):
        table.sample(timeout=timeout)
    assert counters(table) == (1, 0, 0)


def test_error_hierarchy() -> None:
    assert issubclass(DeadlineExceededError, _core.ReverbError)
    assert issubclass(CancelledError, _core.ReverbError)
    assert issubclass(CancelledError, RuntimeError)
    assert not issubclass(DeadlineExceededError, CancelledError)


# ---------------------------------------------------------------------------
# Close


def test_close_wakes_blocked_inserters_and_samplers(tables: Any, traj: list) -> None:
    # min_diff == max_diff: after one insert and one sample, neither an insert
    # nor a sample is allowed, so both kinds of caller block at once.
    table = tables(rate_limiter=RateLimiter(1.0, 1, 0.0, 0.0))
    table.insert(1, 1.0, traj, timeout=0)
    table.sample(timeout=0)
    assert not table.can_insert(1)
    assert not table.can_sample(1)
    samplers = [Background(table.sample, 2, timeout=None) for _ in range(2)]
    inserters = [Background(table.insert, key, 1.0, traj, timeout=None) for key in (2, 3)]
    batch = Background(table.insert_batch, [(4, 1.0, traj), (5, 1.0, traj)], timeout=None)
    wait_blocked(table, inserts=3, samples=2)
    table.close()
    for call in samplers + inserters:
        error = call.raised(CancelledError)
        assert isinstance(error, RuntimeError)
        assert isinstance(error, _core.ReverbError)
    assert batch.raised(CancelledError).num_inserted == 0
    info = table.info()
    assert info.closed
    assert info.current_size == 1
    assert (info.rate_limiter["waiting_inserts"], info.rate_limiter["waiting_samples"]) == (0, 0)
    assert counters(table) == (1, 1, 0)


def test_calls_after_close_are_cancelled(tables: Any, traj: list) -> None:
    table = tables()
    table.insert(1, 1.0, traj, timeout=0)
    table.close()
    assert table.closed
    with pytest.raises(CancelledError):
        table.insert(2, 1.0, traj, timeout=None)
    with pytest.raises(CancelledError):
        table.sample(timeout=None)
    with pytest.raises(CancelledError):
        table.sample(timeout=0)
    with pytest.raises(CancelledError) as raised:
        table.insert_batch([(3, 1.0, traj)], timeout=None)
    assert raised.value.num_inserted == 0
    # Stored items stay readable and nothing changed.
    assert [item.key for item in table.snapshot()] == [1]
    assert counters(table) == (1, 0, 0)
    table.close()  # idempotent
    assert table.info().closed
