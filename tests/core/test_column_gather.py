"""SampleBatch.stack_columns: every sampled column stacked into one numpy
array straight from the chunk payloads, checked against numpy slicing of the
arrays the chunks were made from; columns that cannot be stacked that way
(ragged lengths, compressed or delta-encoded chunks) come back as None.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from resound import _core

from helpers.core_tables import column, make_table

Slices = list[tuple[int, int, int]]


class Data:
    """A chunk store that remembers the array behind every chunk, and the
    expected value of every column of every inserted item."""

    def __init__(self) -> None:
        self.store = _core.ChunkStore()
        self.table = make_table(self.store, sampler="uniform", max_size=1000)
        self.arrays: dict[int, np.ndarray] = {}
        self.expected: dict[int, list[np.ndarray]] = {}
        self._handles: list[_core.Chunk] = []

    def chunk(
        self, key: int, array: np.ndarray, compression: str = "none", delta_encoded: bool = False
    ) -> None:
        array = np.ascontiguousarray(array)
        handle = self.store.add(
            key,
            array,
            array.dtype.str,
            array.shape[1:],
            array.shape[0],
            compression=compression,
            delta_encoded=delta_encoded,
        )
        self._handles.append(handle)
        self.arrays[key] = array

    def insert(self, key: int, columns: list[tuple[Slices, bool]]) -> None:
        self.table.insert(key, 1.0, columns)
        expected = []
        for slices, squeeze in columns:
            rows = np.concatenate([self.arrays[k][o : o + n] for k, o, n in slices])
            expected.append(rows[0] if squeeze else rows)
        self.expected[key] = expected

    def sample(self, n: int = 16) -> _core.SampleBatch:
        batch = self.table.sample(n, timeout=0)
        assert len(batch) == n
        return batch

    def check(self, batch: _core.SampleBatch, stacked: np.ndarray | None, index: int) -> None:
        """`stacked` is column `index` of the batch, sample by sample."""
        assert stacked is not None
        want = np.stack([self.expected[int(key)][index] for key in batch.keys])
        assert stacked.dtype == want.dtype
        assert stacked.shape == want.shape
        assert stacked.flags.c_contiguous and stacked.flags.writeable
        assert np.array_equal(stacked, want)


@pytest.fixture
def data() -> Iterator[Data]:
    made = Data()
    yield made
    made.table.close()


def values(dtype: str, shape: tuple[int, ...], seed: int) -> np.ndarray:
    """Distinct-looking values of any supported dtype."""
    rng = np.random.default_rng(seed)
    numbers = rng.integers(0, 1000, size=shape)
    kind = np.dtype(dtype).kind
    if kind == "b":
        return (numbers % 2).astype(dtype)
    if kind in "SU":
        return np.array([str(n) for n in numbers.ravel()], dtype=dtype).reshape(shape)
    return numbers.astype(dtype)


@pytest.mark.parametrize("dtype", ["<f4", "<i8", "|b1", "|S5", "<U3"])
@pytest.mark.parametrize("step_shape", [(), (3,), (2, 3)])
def test_stacks_a_column_of_any_dtype_and_step_shape(
    data: Data, dtype: str, step_shape: tuple[int, ...]
) -> None:
    data.chunk(1, values(dtype, (6, *step_shape), seed=1))
    for key, offset in enumerate([0, 1, 3, 4]):
        data.insert(key, [column(1, offset, 2)])
    batch = data.sample()
    assert batch.num_columns == 1
    [stacked] = batch.stack_columns()
    assert stacked is not None and stacked.shape == (16, 2, *step_shape)
    data.check(batch, stacked, 0)


def test_every_column_of_a_multi_column_item(data: Data) -> None:
    data.chunk(1, values("<f4", (5, 2, 2), seed=1))
    data.chunk(2, values("<i8", (5,), seed=2))
    data.chunk(3, values("<U3", (5, 4), seed=3))
    for key in range(3):
        squeezed = column(2, key + 2, 1, squeeze=True)
        data.insert(key, [column(1, key, 3), squeezed, column(3, key, 2)])
    batch = data.sample()
    assert batch.num_columns == 3
    stacked = batch.stack_columns()
    assert [a.shape for a in stacked if a is not None] == [(16, 3, 2, 2), (16,), (16, 2, 4)]
    for index, array in enumerate(stacked):
        data.check(batch, array, index)


def test_squeezed_column_drops_the_time_axis(data: Data) -> None:
    data.chunk(1, values("<f4", (4, 2, 3), seed=1))
    for key in range(4):
        data.insert(key, [column(1, key, 1, squeeze=True)])
    batch = data.sample()
    [stacked] = batch.stack_columns()
    assert stacked is not None and stacked.shape == (16, 2, 3)
    data.check(batch, stacked, 0)


def test_items_whose_rows_span_two_chunks(data: Data) -> None:
    data.chunk(1, values("<i8", (4, 3), seed=1))
    data.chunk(2, values("<i8", (4, 3), seed=2))
    data.insert(0, [([(1, 2, 2), (2, 0, 2)], False)])
    data.insert(1, [([(1, 0, 4)], False)])
    data.insert(2, [([(2, 3, 1), (1, 1, 1), (2, 0, 2)], False)])
    batch = data.sample()
    [stacked] = batch.stack_columns()
    assert stacked is not None and stacked.shape == (16, 4, 3)
    data.check(batch, stacked, 0)


def test_mixed_lengths_give_none_for_that_column_only(data: Data) -> None:
    data.chunk(1, values("<f4", (6, 3), seed=1))
    data.chunk(2, values("<i8", (6,), seed=2))
    data.insert(0, [column(1, 0, 2), column(2, 0, 2)])
    data.insert(1, [column(1, 0, 3), column(2, 1, 2)])
    batch = data.sample()
    assert {len(data.expected[int(k)][0]) for k in batch.keys} == {2, 3}  # both lengths sampled
    ragged, stacked = batch.stack_columns()
    assert ragged is None
    data.check(batch, stacked, 1)


@pytest.mark.parametrize(
    "flags", [{"compression": "lz4"}, {"delta_encoded": True}], ids=["lz4", "delta"]
)
def test_encoded_chunks_give_none(data: Data, flags: dict) -> None:
    data.chunk(1, values("<f4", (4, 3), seed=1))
    data.chunk(2, values("<f4", (4, 3), seed=2), **flags)
    data.insert(0, [column(1, 0, 2), column(1, 2, 2)])
    # The encoded chunk is the second slice of an otherwise raw column.
    data.insert(1, [([(1, 0, 1), (2, 0, 1)], False), column(1, 1, 2)])
    batch = data.sample()
    encoded, raw = batch.stack_columns()
    assert encoded is None
    data.check(batch, raw, 1)


def test_differing_dtypes_give_none(data: Data) -> None:
    data.chunk(1, values("<f4", (4,), seed=1))
    data.chunk(2, values("<i4", (4,), seed=2))
    data.insert(0, [column(1, 0, 2)])
    data.insert(1, [column(2, 0, 2)])
    assert data.sample().stack_columns() == [None]


def test_samples_with_fewer_columns_than_the_first(data: Data) -> None:
    data.chunk(1, values("<f4", (4,), seed=1))
    data.insert(0, [column(1, 0, 2), column(1, 1, 1)])
    data.insert(1, [column(1, 2, 2)])
    seen = set()
    for _ in range(20):
        batch = data.sample(8)
        first_columns = len(data.expected[int(batch.keys[0])])
        seen.add(first_columns)
        assert batch.num_columns == first_columns
        stacked = batch.stack_columns()
        assert len(stacked) == first_columns
        data.check(batch, stacked[0], 0)
        if first_columns == 2:
            if set(batch.keys.tolist()) == {0}:
                data.check(batch, stacked[1], 1)
            else:
                assert stacked[1] is None  # item 1 lacks the column
    assert seen == {1, 2}


def test_stacked_arrays_own_their_memory(data: Data) -> None:
    data.chunk(1, values("<f4", (4, 3), seed=1))
    data.insert(0, [column(1, 0, 4)])
    batch = data.sample(2)
    [stacked] = batch.stack_columns()
    assert stacked is not None
    stacked[...] = -1  # writing must not reach the chunk
    [again] = batch.stack_columns()
    data.check(batch, again, 0)


def test_empty_batch() -> None:
    batch = _core.SampleBatch()
    assert len(batch) == 0
    assert batch.num_columns == 0
    assert batch.stack_columns() == []
