"""``sample_batches(..., drop_remainder=True)``: every batch has exactly
``batch_size`` samples, and no sample taken from a queue is thrown away:
samples a timeout leaves short of a batch start the next one, or end up in
``remainder()``; so do batches prefetched and not consumed at ``close()``.
Over both transports."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest

import resound
from resound.batch_iterator import BatchFiller

from helpers.waiting import SAFETY, Background, wait_until


def fill(client: resound.Client, start: int, count: int, table: str = "q") -> None:
    for value in range(start, start + count):
        client.insert(np.int64(value), priorities={table: 1.0})


def values(batch: resound.ReplaySample) -> list[int]:
    return batch.data[0][:, 0].tolist()


def drain(batches: resound.BatchIterator) -> tuple[list[list[int]], BaseException | None]:
    got = []
    try:
        for batch in batches:
            got.append(values(batch))
    except resound.DeadlineExceededError as error:
        return got, error
    return got, None


def test_without_drop_remainder_a_timeout_yields_a_short_batch(serve: Any) -> None:
    _, client = serve(resound.Table.queue("q", 1000))
    fill(client, 0, 300)
    with client.sample_batches("q", 128, timeout=0.3) as batches:
        got, error = drain(batches)
    assert [len(batch) for batch in got] == [128, 128, 44]
    assert isinstance(error, resound.DeadlineExceededError)
    assert batches.remainder() is None


def test_drop_remainder_holds_the_short_batch_as_the_remainder(serve: Any) -> None:
    server, client = serve(resound.Table.queue("q", 1000))
    fill(client, 0, 300)
    batches = client.sample_batches("q", 128, timeout=0.3, drop_remainder=True)
    got, error = drain(batches)
    assert got == [list(range(128)), list(range(128, 256))]
    assert isinstance(error, resound.DeadlineExceededError)
    assert server.table("q").info.current_size == 0  # taken from the queue...
    remainder = batches.remainder()
    assert remainder is not None  # ...and not lost
    assert values(remainder) == list(range(256, 300))
    assert remainder.info.key.dtype == np.uint64 and len(remainder.info.key) == 44
    assert batches.remainder() is not None  # asking again gives it again


def test_held_samples_start_the_next_batch_after_a_timeout(serve: Any) -> None:
    # The filler behind sample_batches, driven directly: a wait that ends
    # with 72 of 128 samples keeps them; the next batch is those and 56 more.
    server, client = serve(resound.Table.queue("q", 1000))
    filler = BatchFiller(client._taker("q"), 128, timeout=0.2, drop_remainder=True, signature=None)
    never = threading.Event()
    fill(client, 0, 200)
    assert values(filler.produce(never)) == list(range(128))
    with pytest.raises(resound.DeadlineExceededError):
        filler.produce(never)  # took 72, then a whole wait brought nothing
    held = filler.held()
    assert held is not None and values(held) == list(range(128, 200))
    fill(client, 200, 56)
    assert values(filler.produce(never)) == list(range(128, 256))
    assert filler.held() is None
    assert server.table("q").info.current_size == 0


@pytest.mark.slow
def test_every_batch_is_full_and_nothing_is_lost_while_a_writer_trickles(serve: Any) -> None:
    # A writer thread inserts 2,000 items while the learner samples 64 at a
    # time with a short timeout: however the waits fall, every batch has 64
    # samples, in queue order, and batches + remainder hold every item once.
    _, client = serve(resound.Table.queue("q", 100_000))
    writer = Background(fill, client, 0, 2000)
    batches = client.sample_batches("q", 64, timeout=0.5, drop_remainder=True)
    got, error = drain(batches)
    writer.join()
    assert isinstance(error, resound.DeadlineExceededError)
    assert all(len(batch) == 64 for batch in got)
    remainder = batches.remainder()
    seen = [value for batch in got for value in batch]
    seen += values(remainder) if remainder is not None else []
    assert seen == list(range(2000))
    assert len(got) == 2000 // 64


def test_close_keeps_prefetched_batches_in_the_remainder(serve: Any) -> None:
    server, client = serve(resound.Table.queue("q", 1000))
    fill(client, 0, 100)
    batches = client.sample_batches("q", 10, prefetch=3, drop_remainder=True)
    assert values(next(batches)) == list(range(10))
    # The thread fills its queue (3) and holds one more batch it cannot queue.
    wait_until(lambda: server.table("q").info.current_size == 50, "prefetching")
    remainder = batches.remainder()  # closes
    assert remainder is not None
    assert values(remainder) == list(range(10, 50))
    with pytest.raises(StopIteration):
        next(batches)
    assert server.table("q").info.current_size == 50


def test_num_batches_counts_full_batches(serve: Any) -> None:
    _, client = serve(resound.Table.queue("q", 1000))
    fill(client, 0, 25)
    with client.sample_batches(
        "q", 10, num_batches=2, timeout=SAFETY, drop_remainder=True
    ) as batches:
        got, error = drain(batches)
    assert error is None
    assert got == [list(range(10)), list(range(10, 20))]


@pytest.mark.parametrize("value", [1, None, "yes"])
def test_drop_remainder_must_be_a_bool(serve: Any, value: object) -> None:
    _, client = serve(resound.Table.queue("q", 10))
    with pytest.raises(ValueError, match="drop_remainder must be True or False"):
        client.sample_batches("q", 2, drop_remainder=value)  # type: ignore[arg-type]


def test_transform_runs_on_the_prefetch_thread_and_remainder_keeps_the_samples(
    serve: Any,
) -> None:
    server, client = serve(resound.Table.queue("q", 1000))
    fill(client, 0, 40)
    threads = []

    def transform(batch: resound.ReplaySample) -> list[int]:
        threads.append(threading.current_thread().name)
        return values(batch)

    batches = client.sample_batches("q", 10, prefetch=2, transform=transform)
    assert next(batches) == list(range(10))
    wait_until(lambda: server.table("q").info.current_size == 0, "prefetching")
    remainder = batches.remainder()
    # The transformed batches not consumed come back as sampled.
    assert remainder is not None and values(remainder) == list(range(10, 40))
    assert set(threads) == {"resound-batch-prefetch"}


def test_drop_remainder_over_several_servers_loses_nothing() -> None:
    # Two servers' queues behind one client: batches drawn from both are
    # full, and batches + remainder hold every item of both once.
    servers = [resound.Server([resound.Table.queue("q", 1000)]) for _ in range(2)]
    try:
        for offset, server in zip((0, 1000), servers, strict=True):
            fill(resound.Client(f"127.0.0.1:{server.port}"), offset, 150)
        client = resound.Client([f"127.0.0.1:{server.port}" for server in servers])
        batches = client.sample_batches("q", 128, timeout=0.5, drop_remainder=True)
        got, error = drain(batches)
        assert isinstance(error, resound.DeadlineExceededError)
        assert [len(batch) for batch in got] == [128, 128]
        remainder = batches.remainder()
        assert remainder is not None
        seen = sorted([value for batch in got for value in batch] + values(remainder))
        assert seen == [*range(150), *range(1000, 1150)]
    finally:
        for server in servers:
            server.stop()


def test_a_transform_error_reaches_the_consumer_and_keeps_the_batch(serve: Any) -> None:
    _, client = serve(resound.Table.queue("q", 1000))
    fill(client, 0, 5)

    def transform(batch: resound.ReplaySample) -> None:
        raise ZeroDivisionError("in the transform")

    batches = client.sample_batches("q", 5, transform=transform)
    with pytest.raises(ZeroDivisionError, match="in the transform"):
        next(batches)
    remainder = batches.remainder()
    assert remainder is not None and values(remainder) == list(range(5))
