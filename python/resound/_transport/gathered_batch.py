"""A batch the same-host transport received gathered: the server copied
every column's rows straight into shared memory in the stacked layout, and
the client's core copied them once into the arrays given here
(docs/local-transport.md, "Gathered batches").

It has the shape of the other transports' batches (the info fields as
arrays, ``stack_columns``, items with ``trajectory`` and ``chunks``), so
``Client.sample``, ``sample_batch`` and the datasets read it as they read
those; its items' columns are views of the stacked arrays.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

__all__ = ["GatheredSampleBatch"]


class _RowsChunk:
    """A column of one gathered item in the place of a chunk: its rows are
    already decoded (``_codec.decode_chunk`` returns them as they are)."""

    __slots__ = ("decoded_rows", "key")

    def __init__(self, key: int, rows: np.ndarray) -> None:
        self.key = key
        self.decoded_rows = rows


class _GatheredSample:
    __slots__ = ("chunks", "trajectory")

    def __init__(self, columns: list[np.ndarray], squeezed: list[bool], index: int) -> None:
        self.trajectory = []
        self.chunks = []
        for c, (column, squeeze) in enumerate(zip(columns, squeezed, strict=True)):
            rows = column[index][None] if squeeze else column[index]
            self.trajectory.append(([(c, 0, len(rows))], squeeze))
            self.chunks.append(_RowsChunk(c, rows))


class GatheredSampleBatch:
    """Samples of one request, received gathered (see the module doc)."""

    def __init__(self, infos: tuple[np.ndarray, ...], columns: list[Any], squeezed: list[bool]):
        self.keys, self.priorities, self.times_sampled, self.probabilities, self.table_sizes = infos
        self._columns = columns
        self._squeezed = squeezed

    def __len__(self) -> int:
        return len(self.keys)

    def __getitem__(self, index: int) -> _GatheredSample:
        if not -len(self) <= index < len(self):
            raise IndexError("sample index out of range")
        return _GatheredSample(self._columns, self._squeezed, index % len(self))

    def __iter__(self) -> Iterator[_GatheredSample]:
        return (_GatheredSample(self._columns, self._squeezed, i) for i in range(len(self)))

    def stack_columns(self) -> list[np.ndarray]:
        """Every column stacked over the batch (the arrays received)."""
        return list(self._columns)
