"""What a trajectory writer promises over gRPC and the same-host transport,
where items are confirmed asynchronously: flush waits for confirmations (and
honours its timeout on a rate-limited table), a refused item surfaces as an
error on the writer's next call, and a dropped writer's stream thread ends."""

from __future__ import annotations

import contextlib
import gc
import re
import subprocess
import sys
import threading

import numpy as np
import pytest

import resound

from helpers.waiting import SAFETY, Background, wait_until


@pytest.fixture(params=["grpc", "local"])
def remote(request):
    servers = []

    def make(*tables: resound.Table) -> tuple[resound.Server, resound.Client]:
        server = resound.Server(list(tables))
        servers.append(server)
        return server, resound.Client(f"127.0.0.1:{server.port}", transport=request.param)

    yield make
    for server in servers:
        server.stop()


grpc_only = pytest.mark.parametrize("remote", ["grpc"], indirect=True)


def write(writer: resound.TrajectoryWriter, table: str, values: range) -> None:
    for value in values:
        writer.append({"x": np.float32(value)})
        writer.create_item(table, 1.0, {"x": writer.history["x"][-1]})


def test_flush_waits_for_confirmation_and_honours_its_timeout(remote):
    server, client = remote(resound.Table.queue("q", 1))
    writer = client.trajectory_writer(1)
    write(writer, "q", range(3))  # the queue holds one: two wait on the server
    with pytest.raises(resound.DeadlineExceededError):
        writer.flush(timeout_ms=50)
    assert writer.num_pending_items >= 1
    taken = []
    while len(taken) < 3:
        taken += [s.data[0] for s in client.sample("q", 1, emit_timesteps=False, timeout=SAFETY)]
    writer.flush(timeout_ms=int(SAFETY * 1000))
    assert taken == [0, 1, 2] and writer.num_pending_items == 0


# (gRPC only: over the same-host transport the server learns of the closed
# connection between two waits of its rate limiter, up to 50 ms later, and
# an item the limiter lets in meanwhile still goes in.)
@grpc_only
def test_close_returns_while_the_server_holds_items_back(remote):
    # The server keeps the stream's next answer back while its queue is full;
    # close() must end the call rather than wait for that answer.
    server, client = remote(resound.Table.queue("q", 1))
    writer = client.trajectory_writer(1)
    write(writer, "q", range(3))
    with pytest.raises(resound.DeadlineExceededError):
        writer.flush(timeout_ms=50)
    closing = threading.Thread(target=writer.close)
    closing.start()
    closing.join(SAFETY)
    assert not closing.is_alive()
    # The item the queue took stays; the server serves on.
    assert [s.data[0] for s in client.sample("q", 1, emit_timesteps=False, timeout=SAFETY)] == [0]
    assert server.table("q").info.current_size == 0


def test_an_item_the_server_refuses_fails_the_writer(remote):
    table = resound.Table.queue("q", 10, signature={"x": resound.TensorSpec([], np.int64)})
    server, client = remote(table)
    writer = client.trajectory_writer(1, validate_items=False)
    write(writer, "q", range(2))  # float32 into an int64 column: the server refuses
    # The server's words, after the call the user made (not the RPC's name).
    expected = "table 'q': field ('x',) is float32 [] but the signature expects int64 []"
    with pytest.raises(ValueError, match=r"^TrajectoryWriter\.flush at .*: " + re.escape(expected)):
        writer.flush(timeout_ms=int(SAFETY * 1000))
    with pytest.raises(ValueError):
        writer.append({"x": np.float32(0)})
    assert server.table("q").info.current_size == 0


def test_a_dropped_writer_stops_its_stream_thread(remote):
    server, client = remote(resound.Table.queue("q", 10))
    before = set(threading.enumerate())  # other tests' streams may still be ending
    writer = client.trajectory_writer(1)
    write(writer, "q", range(2))
    writer.flush()
    threads = {t for t in set(threading.enumerate()) - before if t.name == "resound-insert-stream"}
    assert len(threads) == 1
    del writer
    gc.collect()
    wait_until(lambda: not any(t.is_alive() for t in threads), "the stream thread ended")
    assert server.table("q").info.current_size == 2


COLLECTED_UNDER_ITS_STREAMS_LOCK = """
import gc, sys, numpy as np, resound
server = resound.Server([resound.Table.queue("q", 10)])
client = resound.Client(f"127.0.0.1:{server.port}", transport=sys.argv[1])
writer = client.trajectory_writer(1)
writer.append({"x": np.float32(0)})
writer.create_item("q", 1.0, {"x": writer.history["x"][-1]})
writer.flush()
stream = writer._link
gc.disable()  # the collection below is the one that finds the writer
del writer
# The collector runs wherever objects are allocated: here, as it may on the
# stream's own thread, with the stream's lock held.
with stream._lock:
    gc.collect()
stream._receiver.join(10)
print(stream._receiver.is_alive(), server.table("q").info.current_size)
server.stop()
"""


@pytest.mark.parametrize("transport", ["grpc", "local"])
def test_a_writer_collected_under_its_streams_lock_does_not_deadlock(transport):
    # A finalizer that waited for the lock would wait for its own thread for
    # good, with the collector stuck in it: every later gc.collect() of the
    # process would collect nothing. Hence a process of its own.
    result = subprocess.run(
        [sys.executable, "-c", COLLECTED_UNDER_ITS_STREAMS_LOCK, transport],
        capture_output=True,
        text=True,
        timeout=SAFETY * 3,
        check=False,
    )
    assert (result.returncode, result.stdout, result.stderr) == (0, "False 1\n", "")


def test_a_writer_ahead_of_the_server_waits_for_room(remote, monkeypatch):
    # The queue holds 2 and nothing samples yet: the server takes 2 items and
    # holds the 3rd; the writer may have only 4 items on their way.
    from resound._transport import insert_stream

    monkeypatch.setattr(insert_stream, "_MAX_IN_FLIGHT_ITEMS", 4)
    server, client = remote(resound.Table.queue("q", 2))
    writer = client.trajectory_writer(1)
    created: list[int] = []

    def write_all() -> None:
        for value in range(12):
            writer.append({"x": np.float32(value)})
            writer.create_item("q", 1.0, {"x": writer.history["x"][-1]})
            created.append(value)

    writing = Background(write_all)
    wait_until(
        lambda: len(created) >= 6 and writer._link.in_flight == 4,
        "2 items are in the table and 4 on their way",
    )
    assert not writing.done() and len(created) == 6  # the 7th waits for room
    taken = []
    while len(taken) < 12:
        taken += [s.data[0] for s in client.sample("q", 1, emit_timesteps=False, timeout=SAFETY)]
    writing.value()
    assert taken == list(range(12))


def test_writers_that_flush_after_every_item_share_a_client(remote):
    # (Over the same-host transport a flushing writer sends its items itself:
    # several of them, and their streams' threads, take turns on each stream.)
    server, client = remote(resound.Table.queue("q", 10_000))
    num_writers, steps = 3, 150

    def run(k: int) -> None:
        with client.trajectory_writer(1) as writer:
            for i in range(steps):
                writer.append({"x": np.float32(k * steps + i)})
                writer.create_item("q", 1.0, {"x": writer.history["x"][-1]})
                writer.flush(block_until_num_items=i % 3, timeout_ms=int(SAFETY * 1000))

    writers = [Background(run, k) for k in range(num_writers)]
    for writing in writers:
        writing.value()
    assert server.table("q").info.current_size == num_writers * steps
    taken = [s.data[0] for s in client.sample("q", num_writers * steps, emit_timesteps=False)]
    for k in range(num_writers):  # each writer's items in its order
        mine = [int(x) - k * steps for x in taken if k * steps <= x < (k + 1) * steps]
        assert mine == list(range(steps))


def test_items_a_flush_leaves_in_flight_arrive_and_are_confirmed_without_another_call(remote):
    # (Over the same-host transport the flush sends them itself and leaves
    # the answer to its next call, which does not come here: the stream's
    # thread reads it.)
    server, client = remote(resound.Table.queue("q", 100))
    writer = client.trajectory_writer(1)
    write(writer, "q", range(5))
    writer.flush(block_until_num_items=5, timeout_ms=int(SAFETY * 1000))
    wait_until(lambda: server.table("q").info.current_size == 5, "the items to arrive")
    wait_until(lambda: writer.num_pending_items == 0, "the items to be confirmed")
    write(writer, "q", range(5, 7))
    writer.flush(timeout_ms=int(SAFETY * 1000))
    taken = [s.data[0] for s in client.sample("q", 7, emit_timesteps=False)]
    assert taken == list(range(7))
    writer.close()


def test_items_of_a_writer_that_never_waits_arrive_in_order_without_a_flush(remote):
    # (Over the same-host transport such a writer sends its items itself,
    # a message's worth at a time between items, and the stream's thread
    # sends the last ones, fewer than a message, once it stops.)
    server, client = remote(resound.Table.queue("q", 5_000), resound.Table.queue("big", 50))
    writer = client.trajectory_writer(1)
    write(writer, "q", range(1_000))
    wait_until(lambda: server.table("q").info.current_size == 1_000, "the items to arrive")
    wait_until(lambda: writer.num_pending_items == 0, "the items to be confirmed")
    taken = [s.data[0] for s in client.sample("q", 1_000, emit_timesteps=False)]
    assert taken == list(range(1_000))
    # Items of 400 KB: a message is due every few of them.
    for value in range(40):
        writer.append({"y": np.full(100_000, value, np.float32)})
        writer.create_item("big", 1.0, {"y": writer.history["y"][-1]})
    wait_until(lambda: server.table("big").info.current_size == 40, "the large items to arrive")
    taken = [s.data[0] for s in client.sample("big", 40, emit_timesteps=False)]
    assert [int(y[0]) for y in taken] == list(range(40))
    assert all((y == y[0]).all() for y in taken)
    writer.close()


def test_rate_limited_flushes_time_out_and_their_items_still_arrive(remote):
    server, client = remote(resound.Table.queue("q", 1))
    writer = client.trajectory_writer(1)
    write(writer, "q", range(1))
    writer.flush(timeout_ms=int(SAFETY * 1000))  # the queue has room for it
    for value in (1, 2):  # the full queue holds these back
        write(writer, "q", range(value, value + 1))
        with pytest.raises(resound.DeadlineExceededError):
            writer.flush(timeout_ms=20)
    taken = []
    while len(taken) < 3:
        taken += [s.data[0] for s in client.sample("q", 1, emit_timesteps=False, timeout=SAFETY)]
    writer.flush(timeout_ms=int(SAFETY * 1000))
    assert taken == [0, 1, 2] and writer.num_pending_items == 0
    writer.close()


def test_flushes_that_time_out_at_once_on_a_busy_queue_keep_every_item_in_order(remote):
    # (Over the same-host transport a flush reads its answers itself, waiting
    # up to 1 ms with the stream's lock held, then as long as its timeout
    # allows with the lock released; the stream's thread reads what nobody
    # waits for. Timeouts of 0 and 1 ms, answers in parts (the queue lets
    # one item in at a time) and a learner taking items meanwhile hand the
    # answers from one to the other at every point.)
    server, client = remote(resound.Table.queue("q", 2))
    writer = client.trajectory_writer(1)
    taken: list[float] = []

    def take_one() -> None:
        taken.extend(s.data[0] for s in client.sample("q", 1, emit_timesteps=False, timeout=SAFETY))

    for value in range(30):
        write(writer, "q", range(value, value + 1))
        # (A full queue: the item waits on the server.)
        with contextlib.suppress(resound.DeadlineExceededError):
            writer.flush(block_until_num_items=value % 3, timeout_ms=value % 2)
        if value % 4 == 3:
            take_one()
    while len(taken) < 30:
        take_one()
    writer.flush(timeout_ms=int(SAFETY * 1000))
    assert taken == list(range(30)) and writer.num_pending_items == 0
    assert server.table("q").info.current_size == 0
    writer.close()


@grpc_only  # counts the server's gRPC calls
def test_a_dropped_client_ends_the_stream_of_its_inserts(remote):
    server, client = remote(resound.Table.queue("q", 10))
    client.insert({"x": np.ones(2, np.float32)}, priorities={"q": 1.0})
    writer = client.trajectory_writer(1)  # outlives the client, with a stream of its own
    # The insert's stream stays open for the client's next insert.
    wait_until(lambda: server.open_calls == 2, "the insert's and the writer's streams")
    del client
    gc.collect()
    wait_until(lambda: server.open_calls == 1, "the dropped client's stream to end")
    write(writer, "q", range(2))
    writer.flush(timeout_ms=int(SAFETY * 1000))
    assert server.table("q").info.current_size == 3
