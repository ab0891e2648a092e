"""The core writes InsertRequest messages itself (InsertRequestEncoder), not
through the protobuf runtime: what it writes must be what protobuf reads, field
for field, and its queue must hold, resend and release as the stream needs."""

from __future__ import annotations

import time

import numpy as np
import pytest

from resound import _core, _proto


@pytest.fixture
def store() -> _core.ChunkStore:
    return _core.ChunkStore()


def add_chunk(store, key, values, **fields):
    data = np.asarray(values)
    return store.add(key, data.tobytes(), data.dtype.str, data.shape[1:], len(data), **fields)


def test_a_message_reads_back_field_for_field(store):
    grid = np.arange(12, dtype=np.float32).reshape(4, 3)
    a = add_chunk(store, 11, grid, episode_id=7, start_step=5)
    b = add_chunk(store, 12, np.array([-1, 2**40], np.int64), episode_id=2**63, start_step=0)
    c = add_chunk(store, 13, np.ones((2, 3), np.float32), delta_encoded=True)
    encoder = _core.InsertRequestEncoder(store)
    encoder.add("first", 100, 0.1, [([(11, 1, 2), (13, 0, 1)], False), ([(12, 1, 1)], True)])
    encoder.add("second", 2**64 - 1, 1e300, [([(11, 3, 1)], True)])
    encoder.add("first", 102, 0.0, [([(12, 0, 2)], False)])
    assert (encoder.queued, encoder.unconfirmed) == (3, 0)
    assert encoder.in_flight_bytes == (a.nbytes + c.nbytes + b.nbytes) + a.nbytes + b.nbytes

    message = _proto.InsertRequest.FromString(encoder.take_message(1000, 1 << 20))
    assert (encoder.queued, encoder.unconfirmed) == (0, 3)
    items = message.items
    assert list(items.tables) == ["first", "second"]
    assert list(items.table_indices) == [0, 1, 0]
    assert list(items.keys) == [100, 2**64 - 1, 102]
    assert list(items.priorities) == [0.1, 1e300, 0.0]
    trajectories = items.trajectories
    assert list(trajectories.num_columns) == [2, 1, 1]
    assert list(trajectories.num_slices) == [2, 1, 1, 1]
    assert list(trajectories.squeeze) == [False, True, True, False]
    assert list(trajectories.chunk_keys) == [11, 13, 12, 11, 12]
    assert list(trajectories.offsets) == [1, 0, 1, 3, 0]
    assert list(trajectories.lengths) == [2, 1, 1, 1, 2]
    chunks = message.chunks
    assert list(chunks.keys) == [11, 13, 12]  # each once, in order of first use
    layouts = [(x.dtype, list(x.shape), x.compression, x.delta_encoded) for x in chunks.layouts]
    assert layouts == [
        ("<f4", [3], "none", False),
        ("<f4", [3], "none", True),
        ("<i8", [], "none", False),
    ]
    assert list(chunks.layout_indices) == [0, 1, 2]
    assert list(chunks.num_steps) == [4, 2, 2]
    assert list(chunks.episode_ids) == [7, 0, 2**63]
    assert list(chunks.start_steps) == [5, 0, 0]
    assert list(chunks.end_steps) == [8, 1, 1]
    assert list(chunks.data_sizes) == [a.nbytes, c.nbytes, b.nbytes]
    assert message.chunk_data == bytes(memoryview(a)) + bytes(memoryview(c)) + bytes(memoryview(b))
    assert list(message.release_chunk_keys) == []


def test_chunks_go_once_per_stream_and_are_released_when_gone(store):
    encoder = _core.InsertRequestEncoder(store)
    handle = add_chunk(store, 21, np.zeros(3, np.float32))
    encoder.add("t", 1, 1.0, [([(21, 0, 1)], True)])
    first = _proto.InsertRequest.FromString(encoder.take_message(10, 1 << 20))
    encoder.add("t", 2, 1.0, [([(21, 1, 2)], False)])
    second = _proto.InsertRequest.FromString(encoder.take_message(10, 1 << 20))
    assert list(first.chunks.keys) == [21] and list(second.chunks.keys) == []
    assert second.chunk_data == b"" and list(second.items.keys) == [2]

    # Confirmed items let go of the chunk; once the writer's handle goes
    # too, the next message releases it on the server.
    assert encoder.confirm(np.array([1, 2], np.uint64)) == 2
    assert (encoder.unconfirmed, encoder.in_flight_bytes) == (0, 0)
    del handle
    kept = add_chunk(store, 22, np.zeros(1, np.float32))
    encoder.add("t", 3, 1.0, [([(22, 0, 1)], True)])
    third = _proto.InsertRequest.FromString(encoder.take_message(10, 1 << 20))
    assert list(third.release_chunk_keys) == [21] and list(third.chunks.keys) == [kept.key]


def test_add_answers_whether_the_in_flight_limits_leave_room(store):
    # A writer learns from the call that queues its item whether it may add
    # the next without waiting (InsertStream's hot path): 0 without room, 1
    # with room (2: with room and a message due, below).
    handle = add_chunk(store, 31, np.zeros(4, np.float32))  # 16 bytes
    by_items = _core.InsertRequestEncoder(store, max_in_flight_items=3)
    assert by_items.has_room
    assert by_items.add_one("t", 1, 1.0, 31, 0, 1, False) == 1
    assert by_items.add("t", 2, 1.0, [([(31, 1, 1)], False)]) == 1
    by_items.take_message(10, 1 << 20)  # sent, unconfirmed: still in flight
    assert by_items.add_one("t", 3, 1.0, 31, 2, 1, False) == 0
    assert not by_items.has_room
    assert by_items.confirm(np.array([1], np.uint64)) == 1
    assert by_items.has_room

    by_bytes = _core.InsertRequestEncoder(store, max_in_flight_bytes=40)
    assert by_bytes.add_one("t", 1, 1.0, 31, 0, 1, False) == 1  # 16
    assert by_bytes.add_one("t", 2, 1.0, 31, 0, 1, False) == 1  # 32
    assert by_bytes.add_one("t", 3, 1.0, 31, 0, 1, False) == 0  # 48
    assert by_bytes.in_flight_bytes == 48

    # Without limits (0, the default) there is always room.
    unlimited = _core.InsertRequestEncoder(store)
    assert all(unlimited.add_one("t", key, 1.0, 31, 0, 1, False) == 1 for key in range(100))
    del handle


def test_add_says_when_the_queue_makes_a_message(store):
    # A same-host writer sends its queued items itself once they make a
    # message (InsertStream._DUE_*): add tells it, by items, by bytes, or by
    # the oldest item's wait; never unless asked.
    handle = add_chunk(store, 41, np.zeros(4, np.float32))  # 16 bytes
    never = _core.InsertRequestEncoder(store)
    assert [never.add_one("t", key, 1.0, 41, 0, 1, False) for key in range(50)] == [1] * 50
    assert not never.message_due

    by_items = _core.InsertRequestEncoder(store)
    by_items.set_message_due(3, 0, 0.0)
    assert [by_items.add_one("t", key, 1.0, 41, 0, 1, False) for key in range(4)] == [1, 1, 2, 2]
    by_items.take_message(2, 1 << 20)  # two go: two are left, below three
    assert not by_items.message_due
    assert by_items.add("t", 9, 1.0, [([(41, 0, 1)], False)]) == 2
    by_items.take_message(10, 1 << 20)
    assert not by_items.message_due  # nothing queued

    by_bytes = _core.InsertRequestEncoder(store)
    by_bytes.set_message_due(0, 40, 0.0)
    assert [by_bytes.add_one("t", key, 1.0, 41, 0, 1, False) for key in range(3)] == [1, 1, 2]
    # Unconfirmed items sent again after a reconnect count as queued.
    by_bytes.take_message(10, 1 << 20)
    assert not by_bytes.message_due
    by_bytes.requeue()
    assert by_bytes.message_due and by_bytes.queued == 3

    # Room comes first: a full stream says 0 even with a message due.
    full = _core.InsertRequestEncoder(store, max_in_flight_items=2)
    full.set_message_due(1, 0, 0.0)
    assert [full.add_one("t", key, 1.0, 41, 0, 1, False) for key in range(2)] == [2, 0]

    by_age = _core.InsertRequestEncoder(store)
    by_age.set_message_due(0, 0, 3600.0)
    assert by_age.add_one("t", 1, 1.0, 41, 0, 1, False) == 1
    by_age.set_message_due(0, 0, 0.001)  # (the oldest item's wait starts again here)
    start = time.perf_counter()
    while time.perf_counter() - start < 0.002:  # the clock passes the age
        pass
    assert by_age.message_due
    assert by_age.add_one("t", 2, 1.0, 41, 0, 1, False) == 2

    for bad in (-1.0, float("nan"), 3601.0):
        with pytest.raises(ValueError, match="seconds"):
            by_age.set_message_due(0, 0, bad)
    del handle


def test_a_release_goes_without_items_once_a_sent_chunk_is_gone(store):
    # An idle stream sends its releases alone (see InsertStream._requests):
    # the server would otherwise keep the chunks until the writer's next item.
    encoder = _core.InsertRequestEncoder(store)
    handles = [add_chunk(store, key, np.zeros(3, np.float32)) for key in (41, 42)]
    assert not encoder.releasable  # nothing sent yet
    encoder.add("t", 1, 1.0, [([(41, 0, 1)], True), ([(42, 0, 1)], True)])
    encoder.take_message(10, 1 << 20)
    encoder.confirm(np.array([1], np.uint64))
    assert not encoder.releasable  # the writer still holds both
    del handles[0]
    assert encoder.releasable
    alone = _proto.InsertRequest.FromString(encoder.take_message(10, 1 << 20))
    assert list(alone.release_chunk_keys) == [41]
    assert not alone.HasField("items") and not alone.HasField("chunks")
    assert not encoder.releasable and encoder.queued == 0


def test_limits_cut_messages_and_requeue_resends_in_order(store):
    handles = [add_chunk(store, 30 + i, np.zeros(256, np.float32)) for i in range(5)]
    encoder = _core.InsertRequestEncoder(store)
    for i in range(5):
        encoder.add("t", i, 1.0, [([(30 + i, 0, 1)], True)])
    by_items = _proto.InsertRequest.FromString(encoder.take_message(2, 1 << 20))
    by_bytes = _proto.InsertRequest.FromString(encoder.take_message(10, 1500))
    assert list(by_items.items.keys) == [0, 1] and list(by_bytes.items.keys) == [2]
    # A confirmation from before a reconnect (key 9) is ignored.
    assert encoder.confirm(np.array([9, 0], np.uint64)) == 1
    encoder.requeue()  # a new stream: 1 and 2 go again, before 3 and 4, chunks too
    again = _proto.InsertRequest.FromString(encoder.take_message(10, 1 << 20))
    assert list(again.items.keys) == [1, 2, 3, 4] and list(again.chunks.keys) == [31, 32, 33, 34]
    assert len(handles) == 5


def test_an_item_with_a_chunk_that_is_not_live_is_not_queued(store):
    encoder = _core.InsertRequestEncoder(store)
    with pytest.raises(KeyError):
        encoder.add("t", 1, 1.0, [([(999, 0, 1)], True)])
    with pytest.raises(ValueError):
        encoder.add("t", 1, 1.0, [([("x", 0, 1)], True)])
    assert (encoder.queued, encoder.in_flight_bytes) == (0, 0)


def test_the_server_reads_what_the_encoder_writes(store):
    # The server's side of the same message: _core.InsertRequest reads it
    # without the protobuf runtime, and writes the confirmations.
    held = [  # the store keeps chunks only while someone holds them
        add_chunk(store, 11, np.arange(12, dtype=np.float32).reshape(4, 3), episode_id=7),
        add_chunk(store, 12, np.array([-1, 2**40], np.int64)),
    ]
    encoder = _core.InsertRequestEncoder(store)
    encoder.add("first", 100, 0.1, [([(11, 1, 2)], False), ([(12, 1, 1)], True)])
    encoder.add("first", 101, 0.5, [([(11, 3, 1)], True)])
    encoder.add("second", 2**64 - 1, 1e300, [([(12, 0, 2)], False)])
    encoder.add("first", 103, 0.0, [([(12, 0, 1)], False)])
    request = _core.InsertRequest(encoder.take_message(1000, 1 << 20))
    del held
    assert len(request) == 4
    assert request.runs == [("first", 0, 2), ("second", 2, 3), ("first", 3, 4)]
    assert request.keys.tolist() == [100, 101, 2**64 - 1, 103]
    assert request.priorities.tolist() == [0.1, 0.5, 1e300, 0.0]
    assert len(request.trajectories) == 4 and not request.has_releases

    server_store, holder = _core.ChunkStore(), _core.ChunkHolder()
    assert request.new_chunk_bytes(server_store) == 12 * 4 + 2 * 8
    request.add_chunks(holder, server_store)
    assert len(holder) == 2 and request.new_chunk_bytes(server_store) == 0
    chunk = server_store.get(11)
    assert (chunk.episode_id, chunk.dtype, chunk.shape, chunk.num_steps) == (7, "<f4", (3,), 4)
    np.testing.assert_array_equal(np.frombuffer(server_store.get(12), np.int64), [-1, 2**40])

    confirmation = request.confirmation(1, 3)
    assert list(_proto.InsertResponse.FromString(confirmation).item_keys) == [101, 2**64 - 1]
    assert _core.insert_response_keys(confirmation).tolist() == [101, 2**64 - 1]
    assert _core.insert_response_keys(b"").tolist() == []
    with pytest.raises(ValueError, match="bad range"):
        request.confirmation(3, 5)


def test_the_server_reads_releases_and_messages_protobuf_writes():
    message = _proto.InsertRequest(release_chunk_keys=[5, 6])
    request = _core.InsertRequest(message.SerializeToString())
    assert len(request) == 0 and request.runs == [] and request.has_releases
    holder = _core.ChunkHolder()
    request.release(holder)  # releasing what is not held is allowed
    assert _core.insert_response_keys(
        _proto.InsertResponse(item_keys=[1, 2**64 - 1]).SerializeToString()
    ).tolist() == [1, 2**64 - 1]


@pytest.mark.parametrize(
    ("message", "problem"),
    [
        (b"\x0a\x05\x01", "InsertRequest"),  # a field cut off
        (
            _proto.InsertRequest(
                items=_proto.ItemBatch(tables=["t"], table_indices=[0], keys=[1])
            ).SerializeToString(),
            "1 keys, 1 table_indices and 0 priorities; they must pair up",
        ),
        (
            _proto.InsertRequest(
                items=_proto.ItemBatch(tables=["t"], table_indices=[2], keys=[1], priorities=[1])
            ).SerializeToString(),
            "table index 2 is not below the 1 tables",
        ),
        (
            _proto.InsertRequest(
                items=_proto.ItemBatch(tables=["t"], table_indices=[0], keys=[1], priorities=[1])
            ).SerializeToString(),
            "1 keys but 0 trajectories",
        ),
        (
            _proto.InsertRequest(
                chunks=_proto.ChunkBatch(layouts=[_proto.ChunkLayout(dtype="<f3")])
            ).SerializeToString(),
            "layouts[0]",
        ),
        (
            _proto.InsertRequest(items=_proto.ItemBatch()).SerializeToString() * 2,
            "items must come once",
        ),
    ],
)
def test_the_server_refuses_malformed_requests_naming_the_problem(message, problem):
    with pytest.raises(ValueError) as caught:
        _core.InsertRequest(message)
    assert problem in str(caught.value)


@pytest.mark.parametrize("timeout", [-1.0, 0.0, 2.5])
def test_sample_requests_read_back_as_protobuf_writes_them(timeout):
    # The same-host transport writes SampleRequests in the core.
    raw = _core.encode_sample_request("tåble", 2**40, timeout)
    message = _proto.SampleRequest.FromString(raw)
    assert (message.table, message.num_samples, message.timeout_seconds) == (
        "tåble",
        2**40,
        timeout,
    )
    assert message.max_per_response == 0
    written = _proto.SampleRequest(table="tåble", num_samples=2**40, timeout_seconds=timeout)
    if timeout:  # (protobuf leaves a 0.0 out; the core writes it)
        assert raw == written.SerializeToString()
