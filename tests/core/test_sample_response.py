"""The core writes and reads SampleResponse messages itself
(``SampleBatch.encode_response``, ``decode_sample_response``), not through the
protobuf runtime: what it writes must be what protobuf reads, field for field;
what protobuf writes (in any field order, packed or not) must read back; and a
malformed response must raise ValueError without crashing or holding
anything."""

from __future__ import annotations

import numpy as np
import pytest

from resound import _core, _proto


def add_chunk(store, key, values, **fields):
    data = np.asarray(values)
    return store.add(key, data.tobytes(), data.dtype.str, data.shape[1:], len(data), **fields)


@pytest.fixture
def sampled():
    """(table's samples of 3 items over 3 chunks, the chunks): item 1 uses
    two chunks, item 3 shares chunk 11 with item 1."""
    store = _core.ChunkStore()
    a = add_chunk(
        store, 11, np.arange(12, dtype=np.float32).reshape(4, 3), episode_id=7, start_step=5
    )
    b = add_chunk(store, 12, np.array([-1, 2**40], np.int64), episode_id=2**63)
    c = add_chunk(store, 13, np.ones((2, 3), np.float32), delta_encoded=True)
    table = _core.Table(
        "t",
        _core.make_selector("fifo"),
        _core.make_selector("fifo"),
        10,
        _core.RateLimiter.min_size(1),
        max_times_sampled=1,  # each item once, in order
        chunk_store=store,
    )
    table.insert(100, 0.5, [([(11, 1, 2), (13, 0, 1)], False), ([(12, 1, 1)], True)])
    table.insert(2**64 - 1, 1e300, [([(12, 0, 2)], False)])
    table.insert(102, 0.0, [([(11, 3, 1)], True)])
    return table.sample(3), (a, b, c)


def payload(chunk) -> bytes:
    return bytes(memoryview(chunk))


def test_a_response_reads_back_field_for_field_in_protobuf(sampled):
    batch, (a, b, c) = sampled
    end, raw = batch.encode_response(0, 100, 1 << 20)
    assert end == 3
    message = _proto.SampleResponse.FromString(raw)
    items = message.items
    assert list(items.keys) == [100, 2**64 - 1, 102]
    assert list(items.priorities) == [0.5, 1e300, 0.0]
    assert list(items.times_sampled) == [1, 1, 1]
    assert list(items.probabilities) == batch.probabilities.tolist()
    assert list(items.table_sizes) == [3, 2, 1]
    assert list(items.rate_limited) == batch.rate_limited.tolist()
    trajectories = items.trajectories
    assert list(trajectories.num_columns) == [2, 1, 1]
    assert list(trajectories.num_slices) == [2, 1, 1, 1]
    assert list(trajectories.squeeze) == [False, True, False, True]
    assert list(trajectories.chunk_keys) == [11, 13, 12, 12, 11]
    assert list(trajectories.offsets) == [1, 0, 1, 0, 3]
    assert list(trajectories.lengths) == [2, 1, 1, 2, 1]
    chunks = message.chunks
    assert list(chunks.keys) == [11, 13, 12]  # each once, in order of first use
    layouts = [(x.dtype, list(x.shape), x.compression, x.delta_encoded) for x in chunks.layouts]
    assert layouts == [
        ("<f4", [3], "none", False),
        ("<f4", [3], "none", True),
        ("<i8", [], "none", False),
    ]
    assert list(chunks.num_steps) == [4, 2, 2]
    assert list(chunks.episode_ids) == [7, 0, 2**63]
    assert list(chunks.start_steps) == [5, 0, 0]
    assert list(chunks.data_sizes) == [a.nbytes, c.nbytes, b.nbytes]
    assert message.chunk_data == payload(a) + payload(c) + payload(b)


def test_limits_cut_responses_and_every_response_carries_its_chunks(sampled):
    batch, (a, b, c) = sampled
    begin, seen = 0, []
    while begin < len(batch):
        end, raw = batch.encode_response(begin, 2, a.nbytes)  # at most one chunk's bytes
        message = _proto.SampleResponse.FromString(raw)
        seen.append((list(message.items.keys), list(message.chunks.keys)))
        begin = end
    # The first item alone needs more than the limit: it goes, alone.
    assert seen == [([100], [11, 13, 12]), ([2**64 - 1], [12]), ([102], [11])]
    with pytest.raises(ValueError, match="begin"):
        batch.encode_response(3, 1, 1)


def test_with_mark_end_only_the_response_reaching_the_last_sample_is_marked(sampled):
    batch, _ = sampled
    marks = []
    for mark_end in (True, False):
        begin = 0
        while begin < len(batch):
            begin, raw = batch.encode_response(begin, 1, 1 << 20, mark_end)
            decoded = _core.decode_sample_response(raw, _core.ChunkStore(), _core.ChunkHolder())
            assert _proto.SampleResponse.FromString(raw).end_of_request == decoded[7]
            marks.append((decoded[7], decoded[8]))  # (end_of_request, timed_out)
            assert decoded[9] == ""  # no timeout, no reason
    assert marks == [(False, False)] * 2 + [(True, False)] + [(False, False)] * 3


def test_a_timed_out_answer_decodes_as_no_samples_with_both_marks():
    raw = _proto.SampleResponse(end_of_request=True, timed_out=True).SerializeToString()
    packed, keys, *_, end_of_request, timed_out, reason = _core.decode_sample_response(
        raw, _core.ChunkStore(), _core.ChunkHolder()
    )
    assert (len(packed), len(keys), end_of_request, timed_out, reason) == (0, 0, True, True, "")


def test_a_timed_out_answer_carries_its_reason():
    why = "table 't' has 0 items; MinSize(1) needs 1 before sampling"
    raw = _proto.SampleResponse(
        end_of_request=True, timed_out=True, timeout_reason=why
    ).SerializeToString()
    decoded = _core.decode_sample_response(raw, _core.ChunkStore(), _core.ChunkHolder())
    assert (decoded[8], decoded[9]) == (True, why)
    # A server's bad UTF-8 is replaced, not an error.
    bad = raw.replace(b"MinSize", b"Min\xffize")
    assert _core.decode_sample_response(bad, _core.ChunkStore(), _core.ChunkHolder())[9] == (
        why.replace("MinSize", "Min\ufffdize")
    )


def test_a_response_decodes_into_the_samples_the_table_gave(sampled):
    batch, chunks = sampled
    store, holder = _core.ChunkStore(), _core.ChunkHolder()
    _, raw = batch.encode_response(0, 100, 1 << 20)
    packed, keys, priorities, times_sampled, probabilities, table_sizes, rate_limited, *_ = (
        _core.decode_sample_response(raw, store, holder)
    )
    np.testing.assert_array_equal(keys, batch.keys)
    np.testing.assert_array_equal(priorities, batch.priorities)
    np.testing.assert_array_equal(times_sampled, batch.times_sampled)
    np.testing.assert_array_equal(probabilities, batch.probabilities)
    np.testing.assert_array_equal(table_sizes, batch.table_sizes)
    assert rate_limited.dtype == np.bool_ and rate_limited.tolist() == batch.rate_limited.tolist()
    assert keys.dtype == np.uint64 and times_sampled.dtype == np.int32
    assert len(holder) == 3 and all(chunk.key in holder for chunk in chunks)
    unpacked = packed.unpack(holder)
    assert [trajectory for trajectory, _ in unpacked] == [sample.trajectory for sample in batch]
    for (_, got), sample in zip(unpacked, batch, strict=True):
        assert [payload(c) for c in got] == [payload(c) for c in sample.chunks]


def test_what_protobuf_writes_decodes_in_any_field_order():
    chunk_data = np.arange(6, dtype=np.float32).tobytes()
    chunks = _proto.ChunkBatch(
        layouts=[_proto.ChunkLayout(dtype="<f4", shape=[3])],
        keys=[5],
        layout_indices=[0],
        num_steps=[2],
        episode_ids=[1],
        start_steps=[0],
        end_steps=[1],
        data_sizes=[len(chunk_data)],
    )
    items = _proto.SampledItems(
        keys=[9],
        priorities=[2.0],
        times_sampled=[4],
        probabilities=[0.25],
        table_sizes=[8],
        rate_limited=[True],
        trajectories=_proto.Trajectories(
            num_columns=[1],
            num_slices=[1],
            squeeze=[False],
            chunk_keys=[5],
            offsets=[1],
            lengths=[1],
        ),
    )
    # chunk_data first, then items, then chunks: the reverse of the core's order.
    raw = (
        _proto.SampleResponse(chunk_data=chunk_data).SerializeToString()
        + _proto.SampleResponse(items=items).SerializeToString()
        + _proto.SampleResponse(chunks=chunks).SerializeToString()
    )
    store, holder = _core.ChunkStore(), _core.ChunkHolder()
    packed, keys, priorities, times_sampled, probabilities, table_sizes, rate_limited, *_ = (
        _core.decode_sample_response(raw, store, holder)
    )
    assert (keys.tolist(), priorities.tolist(), times_sampled.tolist()) == ([9], [2.0], [4])
    assert (probabilities.tolist(), table_sizes.tolist(), rate_limited.tolist()) == (
        [0.25],
        [8],
        [True],
    )
    [(trajectory, [chunk])] = packed.unpack(holder)
    assert trajectory == [([(5, 1, 1)], False)]
    np.testing.assert_array_equal(np.frombuffer(payload(chunk), np.float32), np.arange(6))


def test_unpacked_repeated_fields_decode_as_packed_ones():
    # proto3 parsers accept a repeated scalar one value per field as well.
    def varint(value: int) -> bytes:
        out = bytearray()
        while value >= 0x80:
            out.append(value & 0x7F | 0x80)
            value >>= 7
        return bytes(out + bytes([value]))

    def field(number: int, wire_type: int, body: bytes) -> bytes:
        prefix = varint(number << 3 | wire_type)
        return prefix + (varint(len(body)) + body if wire_type == 2 else body)

    trajectories = b"".join(
        [field(1, 0, varint(1)), field(2, 0, varint(0)), field(3, 0, varint(1))]
        + [field(1, 0, varint(1)), field(2, 0, varint(0)), field(3, 0, varint(0))]
    )  # two items of one column each, the first squeezed; no slices
    items = b"".join(
        [field(1, 0, varint(7)), field(1, 0, varint(8))]
        + [field(2, 1, np.float64(1.5).tobytes()), field(2, 1, np.float64(2.5).tobytes())]
        + [field(3, 0, varint(1)), field(3, 0, varint(2))]
        + [field(4, 1, np.float64(0.5).tobytes())] * 2
        + [field(5, 0, varint(2))] * 2
        + [field(6, 0, varint(0)), field(6, 0, varint(1))]
        + [field(7, 2, trajectories)]
    )
    raw = field(2, 2, items)
    packed, keys, priorities, times_sampled, _, table_sizes, rate_limited, *_ = (
        _core.decode_sample_response(raw, _core.ChunkStore(), _core.ChunkHolder())
    )
    assert keys.tolist() == [7, 8] and priorities.tolist() == [1.5, 2.5]
    assert times_sampled.tolist() == [1, 2] and table_sizes.tolist() == [2, 2]
    assert rate_limited.tolist() == [False, True]
    assert [t for t, _ in packed.unpack(_core.ChunkHolder())] == [[([], True)], [([], False)]]


def malformed_cases(raw: bytes) -> list[tuple[str, bytes]]:
    message = _proto.SampleResponse.FromString(raw)

    def changed(edit) -> bytes:
        copy = _proto.SampleResponse()
        copy.CopyFrom(message)
        edit(copy)
        return copy.SerializeToString()

    return [
        ("cut", raw[: len(raw) // 2]),
        ("a group", b"\x0b\x00"),
        ("a varint of eleven bytes", b"\x10" + b"\xff" * 11),
        ("a key too few", changed(lambda m: m.items.keys.pop())),
        ("a priority too many", changed(lambda m: m.items.priorities.append(1.0))),
        (
            "a chunk that was not sent",
            changed(lambda m: m.items.trajectories.chunk_keys.__setitem__(0, 99)),
        ),
        ("a payload byte short", changed(lambda m: setattr(m, "chunk_data", m.chunk_data[:-1]))),
        ("a payload byte over", changed(lambda m: setattr(m, "chunk_data", m.chunk_data + b"x"))),
        (
            "a layout index out of range",
            changed(lambda m: m.chunks.layout_indices.__setitem__(0, 9)),
        ),
        ("an unknown dtype", changed(lambda m: setattr(m.chunks.layouts[0], "dtype", "<q9"))),
        ("a negative step count", changed(lambda m: m.chunks.num_steps.__setitem__(0, -4))),
        (
            "a slice past its chunk",
            changed(lambda m: m.items.trajectories.lengths.__setitem__(0, 50)),
        ),
        (
            "a column count past the slices",
            changed(lambda m: m.items.trajectories.num_columns.__setitem__(0, 9)),
        ),
        ("chunk data without chunks", changed(lambda m: m.ClearField("chunks"))),
    ]


def test_malformed_responses_raise_value_error_and_hold_nothing(sampled):
    batch, _ = sampled
    _, raw = batch.encode_response(0, 100, 1 << 20)
    for name, bad in malformed_cases(raw):
        store, holder = _core.ChunkStore(), _core.ChunkHolder()
        try:
            _core.decode_sample_response(bad, store, holder)
        except ValueError:
            assert len(holder) == 0, name
            continue
        # What decodes must describe only chunks it holds (a slice past its
        # chunk is caught later, when the item is made from it).
        assert name == "a slice past its chunk", f"{name}: decoded"


def test_every_cut_and_every_flipped_byte_is_refused_or_decoded_never_a_crash(sampled):
    batch, _ = sampled
    _, raw = batch.encode_response(0, 100, 1 << 20)
    rng = np.random.default_rng(0)
    candidates = [raw[:size] for size in range(len(raw))]
    for _ in range(300):
        flipped = bytearray(raw)
        flipped[int(rng.integers(len(raw)))] ^= int(rng.integers(1, 256))
        candidates.append(bytes(flipped))
    decoded = 0
    for bad in candidates:
        holder = _core.ChunkHolder()
        try:
            packed, keys, *_ = _core.decode_sample_response(bad, _core.ChunkStore(), holder)
        except ValueError:
            assert len(holder) == 0
            continue
        decoded += 1
        assert len(packed) == len(keys)
    assert decoded < len(candidates)
