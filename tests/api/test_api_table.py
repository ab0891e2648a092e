"""resound.Table (docs/semantics.md §2.1, §4 and docs/compatibility.md item
13): constructor validation, one table per selector/limiter object, queue and
stack tables, the rate-limiter queries, info, replace and repr."""

from __future__ import annotations

import dataclasses
import gc

import numpy as np
import pytest

import resound
from resound import _core, rate_limiters, selectors
from resound.table_info import RateLimiterCallStats, RateLimiterInfo, TableInfo

from helpers.waiting import Background, wait_until


def make_table(name: str = "t", **overrides: object) -> resound.Table:
    arguments: dict[str, object] = {
        "name": name,
        "sampler": selectors.Uniform(),
        "remover": selectors.Fifo(),
        "max_size": 10,
        "rate_limiter": rate_limiters.MinSize(1),
    }
    arguments.update(overrides)
    return resound.Table(**arguments)  # type: ignore[arg-type]


@dataclasses.dataclass
class ShapeDtype:
    """A spec-like object (as jax.ShapeDtypeStruct): .shape and .dtype, not data."""

    shape: tuple[int, ...]
    dtype: object


# --- constructor validation


@pytest.mark.parametrize("name", ["", None, 3])
def test_name_must_be_a_nonempty_str(name: object) -> None:
    with pytest.raises(ValueError, match="name must be a nonempty str"):
        make_table(name)  # type: ignore[arg-type]


@pytest.mark.parametrize("max_size", [0, -1, 2.0, True, "10", None])
def test_max_size_must_be_a_positive_integer(max_size: object) -> None:
    with pytest.raises(ValueError, match=r"max_size \(.*\) must be a positive integer"):
        make_table(max_size=max_size)


def test_max_size_accepts_numpy_integers() -> None:
    assert make_table(max_size=np.int64(7)).info.max_size == 7


@pytest.mark.parametrize("max_times_sampled", [1.5, "1", None, True])
def test_max_times_sampled_must_be_an_integer(max_times_sampled: object) -> None:
    with pytest.raises(ValueError, match="max_times_sampled must be an integer"):
        make_table(max_times_sampled=max_times_sampled)


@pytest.mark.parametrize("argument", ["sampler", "remover"])
@pytest.mark.parametrize("value", ["uniform", None, _core.SelectorOptions("fifo")])
def test_selectors_must_be_resound_selectors(argument: str, value: object) -> None:
    with pytest.raises(ValueError, match=f"{argument} must be a selector"):
        make_table(**{argument: value})


@pytest.mark.parametrize("value", [None, "min_size", _core.RateLimiter.min_size(1)])
def test_rate_limiter_must_be_a_resound_limiter(value: object) -> None:
    with pytest.raises(ValueError, match="rate_limiter must be a limiter"):
        make_table(rate_limiter=value)


def test_extensions_are_rejected() -> None:
    with pytest.raises(ValueError, match="extensions are not supported"):
        make_table(extensions=[object()])
    assert make_table(extensions=()).name == "t"


@pytest.mark.parametrize(
    "signature",
    [
        np.zeros(3, np.float32),
        {"obs": np.zeros(3, np.float32)},
        {"obs": resound.TensorSpec((3,), np.float32), "bad": 1.0},
        [resound.TensorSpec((), np.int64), "int64"],
    ],
)
def test_signature_leaves_must_be_specs(signature: object) -> None:
    with pytest.raises(ValueError, match="Unsupported signature spec"):
        make_table(signature=signature)


def test_signature_accepts_tensor_specs_and_spec_like_objects() -> None:
    signature = {
        "obs": resound.TensorSpec((None, 3), np.float32),
        "act": ShapeDtype((), np.dtype(np.int64)),
    }
    table = make_table(signature=signature)
    assert table.signature is signature
    assert table.info.signature is signature


# --- one table per selector / limiter object


@pytest.mark.parametrize("argument", ["sampler", "remover", "rate_limiter"])
def test_a_selector_or_limiter_object_cannot_serve_two_tables(argument: str) -> None:
    shared = {
        "sampler": selectors.Uniform(),
        "remover": selectors.Fifo(),
        "rate_limiter": rate_limiters.MinSize(1),
    }[argument]
    first = make_table("first", **{argument: shared})
    with pytest.raises(ValueError, match=f"{argument} .* is already used by table 'first'"):
        make_table("second", **{argument: shared})
    assert first.info.current_size == 0  # the first table is untouched


def test_one_selector_object_may_be_sampler_and_remover_of_one_table() -> None:
    fifo = selectors.Fifo()
    table = make_table(sampler=fifo, remover=fifo)
    assert table.info.sampler_options == selectors.Fifo()
    assert table.info.remover_options == selectors.Fifo()


def test_a_failed_construction_leaves_its_selectors_free() -> None:
    used_limiter = rate_limiters.MinSize(1)
    keep = make_table("first", rate_limiter=used_limiter)
    sampler, remover = selectors.Uniform(), selectors.Fifo()
    with pytest.raises(ValueError, match="already used") as failure:
        make_table("second", sampler=sampler, remover=remover, rate_limiter=used_limiter)
    # `failure` keeps the traceback (and so the failed table object) alive.
    assert failure.value is not None
    second = make_table("second", sampler=sampler, remover=remover)
    assert second.name == "second"
    assert keep.name == "first"


def test_objects_of_a_collected_table_can_be_reused() -> None:
    sampler = selectors.Uniform()
    make_table("gone", sampler=sampler)
    gc.collect()
    assert make_table("new", sampler=sampler).name == "new"


# --- queue and stack


def limiter_info(max_diff: float) -> RateLimiterInfo:
    """A queue's or stack's limiter info before any call (the counts are there, at 0)."""
    none = RateLimiterCallStats(completed=0)
    return RateLimiterInfo(
        samples_per_insert=1.0,
        min_diff=0.0,
        max_diff=max_diff,
        min_size_to_sample=1,
        insert_stats=none,
        sample_stats=none,
        delete_stats=none,
    )


def test_queue_configuration() -> None:
    info = resound.Table.queue("q", 5).info
    assert info.name == "q"
    assert info.max_size == 5
    assert info.max_times_sampled == 1
    assert info.sampler_options == selectors.Fifo()
    assert info.remover_options == selectors.Fifo()
    assert info.rate_limiter_info == limiter_info(max_diff=5.0)


def test_stack_configuration() -> None:
    info = resound.Table.stack("s", 4).info
    assert info.max_times_sampled == 1
    assert info.sampler_options == selectors.Lifo()
    assert info.remover_options == selectors.Lifo()
    assert info.rate_limiter_info == limiter_info(max_diff=4.0)


def test_queue_and_stack_validate_max_size() -> None:
    for factory in (resound.Table.queue, resound.Table.stack):
        with pytest.raises(ValueError):
            factory("q", 0)


def sampled_values(client: resound.Client, table: str, count: int) -> list[int]:
    return [
        int(sample.data[0][0])
        for sample in client.sample(table, count, emit_timesteps=False, timeout=5.0)
    ]


def test_queue_is_fifo_and_samples_each_item_once() -> None:
    with resound.Server([resound.Table.queue("q", 10)], listen=False) as server:
        client = server.in_process_client()
        for value in range(5):
            client.insert(value, priorities={"q": 1.0})
        assert sampled_values(client, "q", 3) == [0, 1, 2]
        client.insert(5, priorities={"q": 1.0})
        assert sampled_values(client, "q", 3) == [3, 4, 5]
        info = server.table("q").info
        assert info.current_size == 0
        assert info.rate_limiter_info.sample_stats.completed == 6
        assert info.rate_limiter_info.delete_stats.completed == 6


def test_stack_is_lifo_and_samples_each_item_once() -> None:
    with resound.Server([resound.Table.stack("s", 10)], listen=False) as server:
        client = server.in_process_client()
        for value in range(4):
            client.insert(value, priorities={"s": 1.0})
        assert sampled_values(client, "s", 2) == [3, 2]
        client.insert(9, priorities={"s": 1.0})
        assert sampled_values(client, "s", 3) == [9, 1, 0]
        assert server.table("s").info.current_size == 0


@pytest.mark.parametrize("factory", [resound.Table.queue, resound.Table.stack])
def test_full_queue_blocks_inserts_and_empty_queue_blocks_samples(factory: object) -> None:
    table = factory("q", 2)  # type: ignore[operator]
    with resound.Server([table], listen=False) as server:
        client = server.in_process_client()
        with pytest.raises(resound.DeadlineExceededError):
            client.sample_batch("q", 1, timeout=0.01)  # empty
        client.insert(1, priorities={"q": 1.0})
        client.insert(2, priorities={"q": 1.0})
        assert not table.can_insert(1)
        with pytest.raises(resound.DeadlineExceededError):
            client.insert(3, priorities={"q": 1.0}, timeout=0.01)  # full
        assert table.info.current_size == 2
        # A blocked insert goes in once a sample makes room.
        blocked = Background(client.insert, 3, priorities={"q": 1.0})
        wait_until(lambda: table._core.info().rate_limiter["waiting_inserts"] == 1, "insert waits")
        assert len(client.sample_batch("q", 1).info.key) == 1
        blocked.value()
        assert table.info.current_size == 2
        assert table.info.rate_limiter_info.insert_stats.completed == 3


def test_blocked_sample_on_queue_gets_the_next_insert() -> None:
    table = resound.Table.queue("q", 2)
    with resound.Server([table], listen=False) as server:
        client = server.in_process_client()
        blocked = Background(lambda: next(client.sample("q", emit_timesteps=False)))
        wait_until(lambda: table._core.info().rate_limiter["waiting_samples"] == 1, "sample waits")
        client.insert(42, priorities={"q": 1.0})
        np.testing.assert_array_equal(blocked.value().data[0], [42])


# --- can_sample / can_insert


def test_can_sample_and_can_insert_follow_the_rate_limiter() -> None:
    table = resound.Table.queue("q", 3)
    assert not table.can_sample(1)
    assert table.can_insert(3)
    assert not table.can_insert(4)
    with resound.Server([table], listen=False) as server:
        client = server.in_process_client()
        client.insert(1, priorities={"q": 1.0})
        client.insert(2, priorities={"q": 1.0})
        assert table.can_sample(2)
        assert not table.can_sample(3)
        assert table.can_insert(1)
        assert not table.can_insert(2)


def test_can_sample_ignores_max_times_sampled() -> None:
    # Reverb's quirk (docs/semantics.md §4.6): a pure rate-limiter query.
    table = make_table(rate_limiter=rate_limiters.MinSize(1), max_times_sampled=1)
    with resound.Server([table], listen=False) as server:
        client = server.in_process_client()
        client.insert(1, priorities={"t": 1.0})
        client.insert(2, priorities={"t": 1.0})
        assert table.can_sample(3)


def test_min_size_gates_sampling() -> None:
    table = make_table(rate_limiter=rate_limiters.MinSize(2))
    with resound.Server([table], listen=False) as server:
        client = server.in_process_client()
        client.insert(1, priorities={"t": 1.0})
        assert not table.can_sample(1)
        client.insert(2, priorities={"t": 1.0})
        assert table.can_sample(1)


@pytest.mark.parametrize("count", [0, -1, 1.0, True, None])
def test_can_sample_and_can_insert_reject_non_positive_counts(count: object) -> None:
    table = make_table()
    with pytest.raises(ValueError, match="num_samples must be an integer >= 1"):
        table.can_sample(count)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="num_inserts must be an integer >= 1"):
        table.can_insert(count)  # type: ignore[arg-type]


# --- info, replace, repr


def test_info_of_a_new_table() -> None:
    limiter = rate_limiters.SampleToInsertRatio(2.0, 3, 6.0)
    table = make_table(
        "replay",
        sampler=selectors.Prioritized(0.6),
        remover=selectors.MinHeap(),
        max_size=50,
        max_times_sampled=4,
        rate_limiter=limiter,
    )
    info = table.info
    assert isinstance(info, TableInfo)
    assert info.name == "replay"
    assert info.sampler_options == selectors.Prioritized(0.6)
    assert info.remover_options == selectors.MinHeap()
    assert info.max_size == 50
    assert info.max_times_sampled == 4
    limiter_info = info.rate_limiter_info
    assert limiter_info.samples_per_insert == 2.0
    assert limiter_info.min_size_to_sample == 3
    assert (limiter_info.min_diff, limiter_info.max_diff) == (0.0, 12.0)
    assert limiter_info.insert_stats.completed == 0
    assert limiter_info.sample_stats.completed == 0
    assert info.signature is None
    assert (info.current_size, info.num_episodes, info.num_deleted_episodes) == (0, 0, 0)
    assert info.num_unique_samples == 0
    assert (info.num_chunks, info.memory_bytes) == (0, 0)


def test_info_is_live() -> None:
    table = make_table()
    with resound.Server([table], listen=False) as server:
        client = server.in_process_client()
        client.insert(np.zeros(100, np.float64), priorities={"t": 1.0})
        client.insert(np.zeros(100, np.float64), priorities={"t": 1.0})
        client.sample_batch("t", 3)
        info = table.info
        assert info.current_size == 2
        assert info.num_episodes == 2  # each Client.insert is its own episode
        assert info.num_chunks == 2
        assert info.memory_bytes >= 2 * 800
        assert info.rate_limiter_info.insert_stats.completed == 2
        assert info.rate_limiter_info.sample_stats.completed == 3
        assert 1 <= info.num_unique_samples <= 2


def test_replace_makes_an_empty_table_with_the_same_options() -> None:
    signature = {"x": resound.TensorSpec((), np.int64)}
    table = make_table(
        "old",
        sampler=selectors.Prioritized(0.7),
        remover=selectors.MaxHeap(),
        max_size=33,
        max_times_sampled=2,
        rate_limiter=rate_limiters.SampleToInsertRatio(1.5, 2, 4.0),
        signature=signature,
    )
    with resound.Server([table], listen=False) as server:
        server.in_process_client().insert({"x": 1}, priorities={"old": 1.0})
    new = table.replace(name="new")
    assert isinstance(new, resound.Table)
    old_info, new_info = table.info, new.info
    assert new_info.name == "new"
    assert new_info.current_size == 0
    assert new_info.rate_limiter_info.insert_stats.completed == 0
    assert old_info.current_size == 1
    for field in ("sampler_options", "remover_options", "max_size", "max_times_sampled"):
        assert getattr(new_info, field) == getattr(old_info, field), field
    # The same limiter configuration; the call counts start again.
    expected_limiter = RateLimiterInfo()
    expected_limiter.CopyFrom(old_info.rate_limiter_info)
    for counts in ("insert_stats", "sample_stats", "delete_stats"):
        getattr(expected_limiter, counts).completed = 0
    assert new_info.rate_limiter_info == expected_limiter
    assert new.signature is signature
    # The copy owns its own selectors and limiter: both tables can serve.
    with resound.Server([table.replace(name="a"), table.replace(name="b")], listen=False):
        pass


def test_replace_overrides_the_given_options() -> None:
    table = make_table("t", max_size=10)
    new = table.replace(max_size=3, sampler=selectors.Lifo(), rate_limiter=rate_limiters.Queue(3))
    info = new.info
    assert (info.name, info.max_size) == ("t", 3)
    assert info.sampler_options == selectors.Lifo()
    assert info.remover_options == selectors.Fifo()
    assert info.rate_limiter_info.max_diff == 3.0
    with pytest.raises(ValueError, match="max_size"):
        table.replace(max_size=0)


def test_repr() -> None:
    table = make_table(
        "replay",
        sampler=selectors.Prioritized(0.8),
        max_size=7,
        max_times_sampled=3,
        rate_limiter=rate_limiters.MinSize(2),
    )
    text = repr(table)
    assert text.startswith("Table(sampler=PrioritizedSelector(priority_exponent=0.8), ")
    assert "remover=FifoSelector" in text
    assert "max_size=7, max_times_sampled=3, name='replay'" in text
    assert "rate_limiter=RateLimiter(samples_per_insert=1.0, min_size_to_sample=2" in text
    assert text.endswith("signature=None)")
