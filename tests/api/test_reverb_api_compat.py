"""Reverb's API beyond the writers: errors for unknown tables, TableInfo's
options messages, and the names of Reverb's ``pybind`` module; each against
both transports where a server is involved."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import resound
from resound import errors, rate_limiters, selectors

# --- unknown tables


def _queue_table() -> resound.Table:
    return resound.Table.queue("known", max_size=10)


def _unknown_table_calls(client: resound.Client) -> dict[str, Callable[[], Any]]:
    """Each client call that names a table, on a table the server lacks."""
    return {
        "insert": lambda: client.insert(np.ones(2), priorities={"missing": 1.0}),
        "sample": lambda: next(client.sample("missing", 1)),
        "sample_batch": lambda: client.sample_batch("missing", 2),
        "mutate_priorities": lambda: client.mutate_priorities("missing", updates={1: 1.0}),
        "update_priorities": lambda: client.update_priorities("missing", {1: 1.0}),
        "reset": lambda: client.reset("missing"),
    }


@pytest.mark.parametrize("caught", [ValueError, RuntimeError, KeyError])
@pytest.mark.parametrize(
    "call",
    ["insert", "sample", "sample_batch", "mutate_priorities", "update_priorities", "reset"],
)
def test_an_unknown_table_is_caught_by_each_of_reverbs_except_clauses(
    serve: Any, call: str, caught: type[Exception]
) -> None:
    _, client = serve(_queue_table())
    with pytest.raises(caught) as raised:
        _unknown_table_calls(client)[call]()
    assert isinstance(raised.value, errors.NotFoundError)
    assert "missing" in str(raised.value) and "known" in str(raised.value)


def test_not_found_error_is_a_value_runtime_and_key_error() -> None:
    assert issubclass(errors.NotFoundError, ValueError)
    assert issubclass(errors.NotFoundError, RuntimeError)
    assert issubclass(errors.NotFoundError, KeyError)
    assert issubclass(errors.NotFoundError, errors.ReverbError)
    # KeyError quotes its message; this error does not.
    assert str(errors.NotFoundError("Priority table t was not found.")) == (
        "Priority table t was not found."
    )


def test_create_item_for_an_unknown_table_raises_value_error(serve: Any) -> None:
    _, client = serve(_queue_table())
    with client.trajectory_writer(1) as writer:
        writer.append({"x": np.ones(2)})
        with pytest.raises(ValueError, match="missing"):
            writer.create_item("missing", 1.0, {"x": writer.history["x"][-1:]})
        # The writer is still usable for a table that exists.
        writer.create_item("known", 1.0, {"x": writer.history["x"][-1:]})
    assert client.server_info()["known"].current_size == 1


def test_unknown_tables_across_several_servers() -> None:
    servers = [resound.Server([_queue_table()]) for _ in range(2)]
    try:
        client = resound.Client([f"127.0.0.1:{server.port}" for server in servers])
        for call in _unknown_table_calls(client).values():
            with pytest.raises(errors.NotFoundError, match="missing"):
                call()
    finally:
        for server in servers:
            server.stop()


# --- TableInfo: Reverb's options messages


def _tables_of_every_selector() -> list[resound.Table]:
    ratio = rate_limiters.SampleToInsertRatio(2.0, 1, 5.0)
    return [
        resound.Table("prio", selectors.Prioritized(0.6), selectors.MinHeap(), 10, ratio),
        resound.Table(
            "max", selectors.Uniform(), selectors.MaxHeap(), 10, rate_limiters.MinSize(1)
        ),
        resound.Table("lifo", selectors.Lifo(), selectors.Fifo(), 10, rate_limiters.MinSize(1)),
    ]


def test_sampler_and_remover_options_read_as_reverbs_messages(serve: Any) -> None:
    _, client = serve(*_tables_of_every_selector())
    info = client.server_info()
    prio, max_heap, lifo = info["prio"], info["max"], info["lifo"]

    assert prio.sampler_options.WhichOneof("distribution") == "prioritized"
    assert prio.sampler_options.HasField("prioritized")
    assert prio.sampler_options.prioritized.priority_exponent == pytest.approx(0.6)
    assert not prio.sampler_options.is_deterministic
    assert prio.remover_options.WhichOneof("distribution") == "heap"
    assert prio.remover_options.HasField("heap") and prio.remover_options.heap.min_heap
    assert prio.remover_options.is_deterministic

    # A max-heap's options hold a heap whose min_heap is False (the default).
    assert max_heap.remover_options.HasField("heap")
    assert max_heap.remover_options.heap.min_heap is False
    assert max_heap.sampler_options.uniform and not max_heap.sampler_options.fifo
    assert max_heap.sampler_options.WhichOneof("distribution") == "uniform"

    assert lifo.sampler_options.lifo and lifo.sampler_options.is_deterministic
    assert lifo.remover_options.WhichOneof("distribution") == "fifo"


def test_options_messages_compare_equal_to_the_selectors_they_describe(serve: Any) -> None:
    _, client = serve(*_tables_of_every_selector())
    info = client.server_info()
    assert info["prio"].sampler_options == selectors.Prioritized(0.6)
    assert info["prio"].sampler_options != selectors.Prioritized(0.7)
    assert info["prio"].remover_options == selectors.MinHeap()
    assert info["prio"].remover_options != selectors.MaxHeap()
    assert info["max"].remover_options == selectors.MaxHeap()
    assert info["lifo"].sampler_options != selectors.Fifo()


def test_options_bytes_are_reverbs_key_distribution_options_encoding() -> None:
    from resound.table_info import key_distribution_options

    # Reverb's KeyDistributionOptions: prioritized = 3 (its priority_exponent
    # = 1, a double), heap = 4 (min_heap = 1), lifo = 6, is_deterministic = 7.
    prioritized = key_distribution_options(selectors.Prioritized(0.5))
    assert prioritized.SerializeToString() == b"\x1a\x09\x09" + np.float64(0.5).tobytes()
    assert key_distribution_options(selectors.MinHeap()).SerializeToString() == (
        b"\x22\x02\x08\x01\x38\x01"
    )
    assert key_distribution_options(selectors.MaxHeap()).SerializeToString() == b"\x22\x00\x38\x01"
    assert key_distribution_options(selectors.Lifo()).SerializeToString() == b"\x30\x01\x38\x01"


def test_rate_limiter_info_and_worker_time_are_messages(serve: Any) -> None:
    _, client = serve(*_tables_of_every_selector())
    client.insert(np.ones(2), priorities={"prio": 1.0})
    client.insert(np.ones(2), priorities={"prio": 1.0})
    list(client.sample("prio", 3))
    info = client.server_info()["prio"]
    limiter = info.rate_limiter_info
    assert (limiter.samples_per_insert, limiter.min_size_to_sample) == (2.0, 1)
    assert limiter.HasField("insert_stats") and limiter.insert_stats.completed == 2
    assert limiter.sample_stats.completed == 3
    parsed = type(limiter).FromString(limiter.SerializeToString())
    assert parsed == limiter
    worker_time = info.table_worker_time
    assert type(worker_time).FromString(worker_time.SerializeToString()) == worker_time


def test_table_worker_time_says_where_the_tables_time_went(serve: Any) -> None:
    # Reverb's TableWorkerTime: milliseconds inserting and sampling (under
    # the table's lock), held up by the rate limiter, and the rest sleeping.
    busy = resound.Table(
        "busy", selectors.Uniform(), selectors.Fifo(), 50_000, rate_limiters.MinSize(1)
    )
    empty = resound.Table.queue("empty", 10)
    _, client = serve(busy, empty)
    with client.trajectory_writer(num_keep_alive_refs=1) as writer:
        for _ in range(20_000):  # well over a millisecond of inserts, on any machine
            writer.append({"x": np.zeros(1, np.float32)})
            writer.create_item("busy", 1.0, {"x": writer.history["x"][-1:]})
    for _ in range(20):
        client.sample_batch("busy", 10_000)
    with pytest.raises(errors.DeadlineExceededError):
        next(client.sample("empty", timeout=0.2))
    infos = client.server_info()
    busy_time, empty_time = infos["busy"].table_worker_time, infos["empty"].table_worker_time
    assert busy_time.inserting_ms >= 1 and busy_time.sampling_ms >= 1
    assert busy_time.running_ms >= busy_time.inserting_ms + busy_time.sampling_ms
    assert busy_time.sleeping_ms == (
        busy_time.running_ms - busy_time.inserting_ms - busy_time.sampling_ms
    )
    assert busy_time.waiting_for_inserts_ms == busy_time.waiting_for_sampling_ms == 0
    # The sample on the empty queue waited (most of) its 0.2 s for an insert.
    assert empty_time.waiting_for_inserts_ms >= 100
    assert empty_time.inserting_ms == empty_time.sampling_ms == 0


def test_table_info_options_summed_over_several_servers() -> None:
    servers = [resound.Server(_tables_of_every_selector()) for _ in range(2)]
    try:
        client = resound.Client([f"127.0.0.1:{server.port}" for server in servers])
        for _ in range(3):  # a call goes to one server, the servers in turn
            client.insert(np.ones(2), priorities={"lifo": 1.0})
        total = client.server_info()["lifo"]
        assert total.current_size == 3 and total.max_size == 20
        assert total.rate_limiter_info.insert_stats.completed == 3
        assert total.sampler_options.lifo and total.remover_options.fifo
        each = client.server_infos()
        assert sorted(infos["lifo"].current_size for infos in each.values()) == [1, 2]
        # Summing did not change any server's own info.
        assert sum(i["lifo"].rate_limiter_info.insert_stats.completed for i in each.values()) == 3
        # Each server's table ran on its own: their running times add up
        # (each read a little after the total, so at least as long).
        running = [i["lifo"].table_worker_time.running_ms for i in each.values()]
        assert 0 < total.table_worker_time.running_ms <= sum(running)
    finally:
        for server in servers:
            server.stop()


def test_selector_from_options_builds_the_selector_back() -> None:
    from resound.table_info import KeyDistributionOptions, selector_from_options

    for selector in (
        selectors.Fifo(),
        selectors.Lifo(),
        selectors.Uniform(),
        selectors.Prioritized(0.25),
        selectors.MinHeap(),
        selectors.MaxHeap(),
    ):
        options = resound.table_info.key_distribution_options(selector)
        assert selector_from_options(options) == selector
        assert selector_from_options(options.SerializeToString()) == selector
    with pytest.raises(ValueError, match="one distribution"):
        selector_from_options(KeyDistributionOptions(is_deterministic=True))
    with pytest.raises(ValueError, match="KeyDistributionOptions"):
        selector_from_options(b"\xff\xff")
    with pytest.raises(ValueError, match="KeyDistributionOptions"):
        selector_from_options("fifo")


# --- resound.pybind: Reverb's pybind names


def test_pybind_names_are_resounds_own_classes() -> None:
    import resound.pybind as imported

    assert imported is resound.pybind
    pybind = resound.pybind
    assert pybind.FifoSelector is selectors.Fifo
    assert pybind.LifoSelector is selectors.Lifo
    assert pybind.UniformSelector is selectors.Uniform
    assert pybind.PrioritizedSelector is selectors.Prioritized
    assert pybind.HeapSelector is selectors.HeapSelector
    assert pybind.ItemSelector is selectors.ItemSelector
    assert pybind.RateLimiter is rate_limiters.RateLimiter
    assert issubclass(rate_limiters.MinSize, pybind.RateLimiter)
    assert pybind.WeakCellRef is resound.CellRef


def test_trajectory_writer_references_are_pybind_weak_cell_refs(serve: Any) -> None:
    _, client = serve(_queue_table())
    with client.trajectory_writer(2) as writer:
        refs = writer.append({"x": np.arange(3, dtype=np.int16)})
        assert isinstance(refs["x"], resound.pybind.WeakCellRef)
        assert refs["x"].shape == (3,) and refs["x"].dtype == np.int16
        np.testing.assert_array_equal(refs["x"].numpy(), [0, 1, 2])
        assert not refs["x"].expired


def test_pybind_selectors_and_limiter_build_tables_that_behave_as_named(serve: Any) -> None:
    from resound import pybind

    assert pybind.HeapSelector(min_heap=True) == selectors.MinHeap()
    assert pybind.HeapSelector(False) == selectors.MaxHeap()
    _, client = serve(
        resound.Table(
            "min_heap",
            sampler=pybind.HeapSelector(min_heap=True),
            remover=pybind.FifoSelector(),
            max_size=10,
            rate_limiter=pybind.RateLimiter(
                samples_per_insert=1.0, min_size_to_sample=1, min_diff=-100.0, max_diff=100.0
            ),
        ),
        resound.Table(
            "prioritized",
            pybind.PrioritizedSelector(0.8),
            pybind.LifoSelector(),
            10,
            pybind.RateLimiter(1.0, 1, -100.0, 100.0),
        ),
    )
    for priority in (3.0, 1.0, 2.0):
        client.insert(np.float32(priority), priorities={"min_heap": priority})
    sample = next(client.sample("min_heap", 1, emit_timesteps=False))
    assert sample.info.priority == 1.0 and sample.data[0].tolist() == [1.0]
    info = client.server_info()
    assert info["min_heap"].sampler_options.heap.min_heap
    assert info["prioritized"].sampler_options.prioritized.priority_exponent == pytest.approx(0.8)
    assert info["prioritized"].remover_options.lifo


def test_pybind_selector_from_proto_reads_table_info_options(serve: Any) -> None:
    from resound import pybind

    _, client = serve(*_tables_of_every_selector())
    info = client.server_info()["prio"]
    sampler = pybind.selector_from_proto(info.sampler_options.SerializeToString())
    assert isinstance(sampler, pybind.PrioritizedSelector)
    assert sampler.priority_exponent == pytest.approx(0.6)
    remover = pybind.selector_from_proto(info.remover_options.SerializeToString())
    assert isinstance(remover, pybind.HeapSelector) and remover.min_heap
    with pytest.raises(ValueError, match="KeyDistributionOptions"):
        pybind.selector_from_proto(b"\x0b")
