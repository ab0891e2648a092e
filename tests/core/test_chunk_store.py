"""Tests of resound._core.ChunkStore and Chunk: contents, sharing, lifetime,
memory accounting and validation."""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable

import numpy as np
import pytest

from resound import _core


def address(array: np.ndarray) -> int:
    return array.__array_interface__["data"][0]


def add_floats(
    store: _core.ChunkStore,
    key: int,
    num_steps: int = 4,
    width: int = 3,
    offset: float = 0.0,
    **kwargs: object,
) -> _core.Chunk:
    data = np.arange(num_steps * width, dtype=np.float32).reshape(num_steps, width) + offset
    return store.add(key, data, "<f4", (width,), num_steps, **kwargs)


# --------------------------------------------------------------------------
# Contents and metadata
# --------------------------------------------------------------------------


def test_add_returns_chunk_with_metadata(store: _core.ChunkStore) -> None:
    data = np.arange(24, dtype=np.float32).reshape(4, 2, 3)
    chunk = store.add(11, data, "<f4", (2, 3), 4)
    assert chunk.key == 11
    assert chunk.dtype == "<f4"
    assert chunk.shape == (2, 3)
    assert isinstance(chunk.shape, tuple)
    assert chunk.num_steps == 4
    assert chunk.compression == "none"
    assert chunk.delta_encoded is False
    assert chunk.episode_id == 0
    assert chunk.start_step == 0
    assert chunk.end_step == 3
    assert chunk.uncompressed_size == 96
    assert chunk.nbytes == 96
    assert chunk.memory_bytes >= 96
    assert "key=11" in repr(chunk)
    assert "'<f4'" in repr(chunk)


def test_add_with_all_metadata(store: _core.ChunkStore) -> None:
    data = np.arange(10, dtype=np.int64)
    chunk = store.add(
        2**64 - 1,
        data,
        "<i8",
        (),
        10,
        delta_encoded=True,
        episode_id=2**64 - 2,
        start_step=100,
        end_step=130,
    )
    assert chunk.key == 2**64 - 1
    assert chunk.shape == ()
    assert chunk.delta_encoded is True
    assert chunk.episode_id == 2**64 - 2
    assert chunk.start_step == 100
    assert chunk.end_step == 130  # sparse: gaps between steps are allowed
    assert chunk.uncompressed_size == 80
    # end_step defaults to the last step of a dense chunk.
    dense = store.add(5, data, "<i8", (), 10, start_step=7)
    assert dense.end_step == 16


def test_chunk_cannot_be_built_directly() -> None:
    with pytest.raises(TypeError):
        _core.Chunk()


def test_contents_read_zero_copy(store: _core.ChunkStore) -> None:
    data = np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32)
    chunk = store.add(1, data, "<f4", (3,), 5)
    view = np.frombuffer(chunk, np.float32)
    np.testing.assert_array_equal(view.reshape(5, 3), data)
    # The store copied the input: changing the input does not change the chunk.
    data[:] = 0
    assert np.frombuffer(chunk, np.float32).any()
    # Every read sees the same memory: nothing is copied on the way out.
    again = np.frombuffer(chunk, np.float32)
    assert address(again) == address(view)
    assert np.shares_memory(view, again)
    assert address(np.frombuffer(store.get(1), np.float32)) == address(view)


@pytest.mark.parametrize("cached_payloads", [False, True])
@pytest.mark.parametrize("num_bytes", [100, 256 * 1024, 400_004])
def test_either_way_of_copying_keeps_every_byte(cached_payloads: bool, num_bytes: int) -> None:
    # (Large payloads stream past the caches unless cached_payloads; both
    # copies must keep an unaligned tail and a start off the cache line.)
    store = _core.ChunkStore(cached_payloads=cached_payloads)
    raw = np.random.default_rng(num_bytes).integers(0, 256, num_bytes + 3, dtype=np.uint8)
    data = raw[3:]  # not aligned to anything
    chunk = store.add(7, data, "|u1", (num_bytes,), 1)
    np.testing.assert_array_equal(np.frombuffer(chunk, np.uint8), data)


def test_buffer_is_read_only(store: _core.ChunkStore) -> None:
    chunk = add_floats(store, 1)
    view = np.frombuffer(chunk, np.float32)
    assert not view.flags.writeable
    with pytest.raises(ValueError):
        view[0] = 5.0
    memory = memoryview(chunk)
    assert memory.readonly
    assert memory.nbytes == chunk.nbytes
    assert memory.format == "B"
    with pytest.raises(TypeError):
        memory[0] = 1


@pytest.mark.parametrize(
    ("dtype", "shape", "values"),
    [
        ("<f8", (2,), np.arange(6, dtype="<f8")),
        (">f8", (2,), np.arange(6, dtype=">f8")),
        ("<i2", (3, 1), np.arange(-4, 5, dtype="<i2")),
        ("|u1", (), np.arange(3, dtype="|u1")),
        ("|b1", (3,), np.array([True, False, True] * 3, dtype="|b1")),
        ("<c16", (), np.array([1 + 2j, 3 - 4j, 0j], dtype="<c16")),
        ("|S5", (), np.array([b"ab", b"cdefg", b""], dtype="|S5")),
        ("<U3", (2,), np.array(["a", "bcd", "", "xyz", "q", "rs"], dtype="<U3")),
    ],
)
def test_dtypes_round_trip(
    store: _core.ChunkStore, dtype: str, shape: tuple, values: np.ndarray
) -> None:
    num_steps = values.size // max(1, int(np.prod(shape)))
    chunk = store.add(3, values, dtype, shape, num_steps)
    assert chunk.dtype == dtype
    assert chunk.uncompressed_size == values.nbytes
    assert chunk.nbytes == values.nbytes
    np.testing.assert_array_equal(np.frombuffer(chunk, np.dtype(dtype)), values.reshape(-1))


@pytest.mark.parametrize("dtype", ["<f3", "<c2", "<i3", "<u16", "<f32", "<c12"])
def test_dtypes_numpy_has_no_type_for_are_refused(store: _core.ChunkStore, dtype: str) -> None:
    # No client could decode such a chunk (numpy: "data type not understood").
    size = int(dtype[2:])
    with pytest.raises(ValueError, match=rf"got '{dtype}'.*no type of kind '{dtype[1]}'"):
        store.add(3, bytes(2 * size), dtype, (), 2)
    with pytest.raises(ValueError, match=rf"got '{dtype}'"):
        _core.ColumnChunker(store, dtype, (), 4, 4)
    assert len(store) == 0


@pytest.mark.parametrize("make_data", [bytes, bytearray, memoryview])
def test_accepts_any_contiguous_buffer(store: _core.ChunkStore, make_data: type) -> None:
    raw = np.arange(6, dtype="<i4").tobytes()
    chunk = store.add(9, make_data(raw), "<i4", (2,), 3)
    assert bytes(memoryview(chunk)) == raw


def test_zero_sized_steps(store: _core.ChunkStore) -> None:
    chunk = store.add(1, np.zeros((4, 0), np.float32), "<f4", (0,), 4)
    assert chunk.nbytes == 0
    assert chunk.uncompressed_size == 0
    assert np.frombuffer(chunk, np.float32).size == 0
    assert memoryview(chunk).nbytes == 0


def test_lz4_chunks_take_any_payload_size(store: _core.ChunkStore) -> None:
    payload = b"\x01\x02\x03\x04\x05\x06\x07"
    chunk = store.add(4, payload, "<f4", (100,), 50, compression="lz4")
    assert chunk.compression == "lz4"
    assert chunk.nbytes == 7
    assert chunk.uncompressed_size == 50 * 100 * 4
    assert bytes(memoryview(chunk)) == payload
    assert chunk.memory_bytes >= 7
    assert chunk.memory_bytes < chunk.uncompressed_size  # the compressed bytes are what is held
    empty = store.add(5, b"", "<f4", (3,), 2, compression="lz4")
    assert empty.nbytes == 0
    assert empty.uncompressed_size == 24


# --------------------------------------------------------------------------
# Lookup and sharing
# --------------------------------------------------------------------------


def test_get_find_contains(store: _core.ChunkStore) -> None:
    chunk = add_floats(store, 42)
    assert 42 in store
    assert 43 not in store
    assert store.get(42).key == 42
    assert store.find(42).key == 42
    assert store.find(43) is None
    with pytest.raises(KeyError, match="43"):
        store.get(43)
    assert len(store) == 1
    del chunk


def test_two_handles_share_one_chunk(store: _core.ChunkStore) -> None:
    a = add_floats(store, 1)
    b = store.get(1)
    c = store.find(1)
    assert address(np.frombuffer(a, np.float32)) == address(np.frombuffer(b, np.float32))
    assert address(np.frombuffer(a, np.float32)) == address(np.frombuffer(c, np.float32))
    assert len(store) == 1


def test_adding_identical_content_returns_existing_chunk(store: _core.ChunkStore) -> None:
    first = add_floats(store, 7, episode_id=3)
    memory = store.memory_bytes
    second = add_floats(store, 7, episode_id=3)
    assert len(store) == 1
    assert store.memory_bytes == memory
    assert address(np.frombuffer(first, np.float32)) == address(np.frombuffer(second, np.float32))
    # A resend from a plain bytes object with the same content also matches.
    raw = bytes(memoryview(first))
    third = store.add(7, raw, "<f4", (3,), 4, episode_id=3)
    assert address(np.frombuffer(third, np.float32)) == address(np.frombuffer(first, np.float32))
    assert len(store) == 1


@pytest.mark.parametrize(
    "changes",
    [
        {"offset": 1.0},
        {"episode_id": 4},
        {"start_step": 1},
        {"end_step": 10},
        {"delta_encoded": True},
        {"compression": "lz4"},
    ],
)
def test_same_key_different_content_is_rejected(store: _core.ChunkStore, changes: dict) -> None:
    first = add_floats(store, 7, episode_id=3)
    before = np.frombuffer(first, np.float32).copy()
    memory = store.memory_bytes
    kwargs = {"episode_id": 3, **changes}
    with pytest.raises(ValueError, match="7"):
        add_floats(store, 7, **kwargs)
    assert len(store) == 1
    assert store.memory_bytes == memory
    np.testing.assert_array_equal(np.frombuffer(store.get(7), np.float32), before)
    assert store.get(7).episode_id == 3


def test_same_key_different_shape_or_dtype_is_rejected(store: _core.ChunkStore) -> None:
    first = store.add(7, np.zeros(12, np.float32), "<f4", (3,), 4)
    with pytest.raises(ValueError, match="7"):
        store.add(7, np.zeros(12, np.float32), "<f4", (6,), 2)
    with pytest.raises(ValueError, match="7"):
        store.add(7, np.zeros(12, np.int32), "<i4", (3,), 4)
    assert store.get(7).shape == (3,)
    assert len(store) == 1
    del first


# --------------------------------------------------------------------------
# Lifetime and memory accounting
# --------------------------------------------------------------------------


def test_chunk_lives_while_a_handle_exists(store: _core.ChunkStore) -> None:
    assert store.memory_bytes == 0
    a = add_floats(store, 1)
    b = store.get(1)
    memory = store.memory_bytes
    assert memory == a.memory_bytes
    del a
    assert 1 in store
    assert len(store) == 1
    assert store.memory_bytes == memory
    del b
    assert 1 not in store
    assert len(store) == 0
    assert store.find(1) is None
    with pytest.raises(KeyError):
        store.get(1)
    assert store.memory_bytes == 0


def test_unkept_chunk_disappears_at_once(store: _core.ChunkStore) -> None:
    add_floats(store, 1)  # the handle is dropped right away
    assert 1 not in store
    assert len(store) == 0
    assert store.memory_bytes == 0


def test_numpy_view_keeps_chunk_alive(store: _core.ChunkStore) -> None:
    chunk = add_floats(store, 1)
    view = np.frombuffer(chunk, np.float32)
    expected = view.copy()
    del chunk
    assert 1 in store
    np.testing.assert_array_equal(view, expected)
    del view
    assert 1 not in store
    assert store.memory_bytes == 0


def test_key_can_be_reused_after_the_chunk_is_gone(store: _core.ChunkStore) -> None:
    chunk = add_floats(store, 5)
    del chunk
    replacement = add_floats(store, 5, offset=100.0)  # different content: no collision
    assert np.frombuffer(replacement, np.float32)[0] == 100.0
    assert len(store) == 1


def test_memory_accounting(store: _core.ChunkStore) -> None:
    handles = {}
    total = 0
    for key, steps in [(1, 1), (2, 10), (3, 1000)]:
        handles[key] = add_floats(store, key, num_steps=steps)
        assert handles[key].memory_bytes >= handles[key].nbytes
        total += handles[key].memory_bytes
        assert store.memory_bytes == total
    # Bigger payloads cost more, by exactly the payload difference.
    small, big = handles[2], handles[3]
    assert big.memory_bytes - small.memory_bytes == big.nbytes - small.nbytes
    del small, big
    assert len(store) == 3
    del handles[2]
    assert store.memory_bytes == handles[1].memory_bytes + handles[3].memory_bytes
    assert len(store) == 2
    handles.clear()
    assert store.memory_bytes == 0
    assert len(store) == 0


def test_chunk_outlives_its_store() -> None:
    store = _core.ChunkStore()
    chunk = add_floats(store, 1)
    del store
    gc.collect()
    np.testing.assert_array_equal(np.frombuffer(chunk, np.float32), np.arange(12, dtype=np.float32))
    del chunk  # unregisters from the store's shared state without crashing


def test_stores_are_independent() -> None:
    a = _core.ChunkStore()
    b = _core.ChunkStore()
    chunk = add_floats(a, 1)
    assert 1 not in b
    other = add_floats(b, 1, offset=5.0)  # same key, different content, other store
    assert np.frombuffer(chunk, np.float32)[0] == 0.0
    assert np.frombuffer(other, np.float32)[0] == 5.0
    assert len(a) == 1
    assert len(b) == 1


@pytest.mark.parametrize("num_shards", [1, 3, 16, 64])
def test_many_chunks_across_shards(num_shards: int) -> None:
    store = _core.ChunkStore(num_shards=num_shards)
    keys = list(range(200)) + [2**64 - 1 - k for k in range(50)]
    handles = [add_floats(store, k, offset=float(i)) for i, k in enumerate(keys)]
    assert len(store) == len(keys)
    for i, k in enumerate(keys):
        assert np.frombuffer(store.get(k), np.float32)[0] == float(i)
    del handles[::2]
    assert len(store) == len(keys) // 2
    assert [k in store for k in keys] == [i % 2 == 1 for i in range(len(keys))]
    assert store.memory_bytes == sum(h.memory_bytes for h in handles)


def test_num_shards_must_be_positive() -> None:
    with pytest.raises(ValueError, match="num_shards"):
        _core.ChunkStore(num_shards=0)


def test_concurrent_adds() -> None:
    store = _core.ChunkStore(num_shards=4)
    results: list[list[_core.Chunk]] = [[] for _ in range(4)]
    errors: list[Exception] = []
    barrier = threading.Barrier(4)

    def writer(index: int) -> None:
        try:
            barrier.wait()
            for key in range(300):
                # Every thread adds the same 300 chunks: all but one add per key dedupe.
                results[index].append(add_floats(store, key, offset=float(key)))
        except Exception as e:
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(store) == 300
    for key in range(300):
        addresses = {address(np.frombuffer(r[key], np.float32)) for r in results}
        assert len(addresses) == 1
    assert store.memory_bytes == sum(c.memory_bytes for c in results[0])
    results.clear()
    assert len(store) == 0
    assert store.memory_bytes == 0


# --------------------------------------------------------------------------
# Validation
# --------------------------------------------------------------------------


def assert_rejected(store: _core.ChunkStore, word: str, *args: object, **kwargs: object) -> None:
    with pytest.raises(ValueError, match=word):
        store.add(*args, **kwargs)
    assert len(store) == 0
    assert store.memory_bytes == 0


def test_data_size_must_match(store: _core.ChunkStore) -> None:
    assert_rejected(store, "data", 1, np.zeros(11, np.float32), "<f4", (3,), 4)
    assert_rejected(store, "data", 1, np.zeros(13, np.float32), "<f4", (3,), 4)
    assert_rejected(store, "data", 1, np.zeros(12, np.float64), "<f4", (3,), 4)
    assert_rejected(store, "data", 1, b"", "<f4", (3,), 4)


def test_num_steps_must_be_positive(store: _core.ChunkStore) -> None:
    assert_rejected(store, "num_steps", 1, b"", "<f4", (3,), 0)
    assert_rejected(store, "num_steps", 1, b"", "<f4", (3,), -1)
    assert_rejected(store, "num_steps", 1, b"", "<f4", (3,), 0, compression="lz4")


def test_shape_dims_must_be_non_negative(store: _core.ChunkStore) -> None:
    assert_rejected(store, "shape", 1, b"", "<f4", (-1,), 2)
    assert_rejected(store, "shape", 1, b"", "<f4", (2, -3), 2, compression="lz4")


def test_huge_shape_is_rejected(store: _core.ChunkStore) -> None:
    assert_rejected(store, "shape", 1, b"", "<f8", (2**62, 2**62), 1, compression="lz4")
    assert_rejected(store, "shape", 1, b"", "<f8", (2**61,), 2, compression="lz4")


@pytest.mark.parametrize(
    "dtype", ["float32", "<O8", "<f0", "f4", "<f", "", "<x4", "<f4a", "|b2", "?f4", "<f-4"]
)
def test_bad_dtype(store: _core.ChunkStore, dtype: str) -> None:
    assert_rejected(store, "dtype", 1, np.zeros(12, np.float32), dtype, (3,), 4)


@pytest.mark.parametrize("compression", ["gzip", "LZ4", "", "snappy"])
def test_bad_compression(store: _core.ChunkStore, compression: str) -> None:
    assert_rejected(
        store, "compression", 1, np.zeros(12, np.float32), "<f4", (3,), 4, compression=compression
    )


def test_end_step_must_cover_the_steps(store: _core.ChunkStore) -> None:
    data = np.zeros(12, np.float32)
    assert_rejected(store, "end_step", 1, data, "<f4", (3,), 4, start_step=5, end_step=7)
    assert_rejected(store, "end_step", 1, data, "<f4", (3,), 4, start_step=5, end_step=4)
    # Exactly the steps is fine.
    chunk = store.add(1, data, "<f4", (3,), 4, start_step=5, end_step=8)
    assert chunk.end_step == 8


def test_start_step_must_be_non_negative(store: _core.ChunkStore) -> None:
    assert_rejected(store, "start_step", 1, np.zeros(12, np.float32), "<f4", (3,), 4, start_step=-1)


def test_non_contiguous_data_is_rejected(store: _core.ChunkStore) -> None:
    data = np.arange(24, dtype=np.float32).reshape(4, 6)[:, ::2]
    assert not data.flags.c_contiguous
    assert_rejected(store, "data", 1, data, "<f4", (3,), 4)
    fortran = np.asfortranarray(np.arange(12, dtype=np.float32).reshape(4, 3))
    assert not fortran.flags.c_contiguous
    assert_rejected(store, "data", 1, fortran, "<f4", (3,), 4)


def test_non_buffer_data_is_rejected(store: _core.ChunkStore) -> None:
    assert_rejected(store, "data", 1, [0.0] * 12, "<f4", (3,), 4)
    assert_rejected(store, "data", 1, "abc", "<f4", (3,), 4)
    assert_rejected(store, "data", 1, None, "<f4", (3,), 4)


@pytest.mark.parametrize("key", [-1, 2**64, 1.0, "1", None])
def test_bad_key(store: _core.ChunkStore, key: object) -> None:
    assert_rejected(store, "key", key, np.zeros(12, np.float32), "<f4", (3,), 4)
    with pytest.raises(ValueError, match="key"):
        store.get(key)
    with pytest.raises(ValueError, match="key"):
        store.find(key)
    with pytest.raises(ValueError, match="key"):
        key in store  # noqa: B015


@pytest.mark.parametrize("episode_id", [-1, 2**64, "x"])
def test_bad_episode_id(store: _core.ChunkStore, episode_id: object) -> None:
    assert_rejected(
        store, "episode_id", 1, np.zeros(12, np.float32), "<f4", (3,), 4, episode_id=episode_id
    )


def test_validation_failure_leaves_existing_chunks(
    store: _core.ChunkStore, chunk_factory: Callable[..., _core.Chunk]
) -> None:
    chunk = chunk_factory(key=3)
    memory = store.memory_bytes
    with pytest.raises(ValueError, match="dtype"):
        store.add(3, np.zeros(12, np.float32), "float32", (3,), 4)
    with pytest.raises(ValueError, match="data"):
        store.add(4, np.zeros(11, np.float32), "<f4", (3,), 4)
    assert len(store) == 1
    assert store.memory_bytes == memory
    assert store.get(3).key == chunk.key
