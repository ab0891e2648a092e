"""A writer's columns: each gathers one field's values into chunks (in the
core's ColumnChunker or here) and keeps the field's history of references."""

from __future__ import annotations

import collections
from typing import TYPE_CHECKING, Any

import numpy as np

from resound import _codec, nest
from resound.trajectory_writer._references import CellRef
from resound.trajectory_writer._values import _as_array, _dtype_name

if TYPE_CHECKING:
    from resound.trajectory_writer._writer import TrajectoryWriter

# object.__new__: the hot paths build slotted objects field by field, which
# costs about half of a call to their __init__.
_new = object.__new__


class _Chunk:
    """A chunk being built (``length`` 0) or complete (``length`` rows).

    ``handle`` keeps a complete chunk alive. Chunks of a core-chunked column
    have none at first (the column's chunker keeps them while their rows may
    be referenced); ``keep_alive`` fetches one when an item needs the chunk
    for longer."""

    __slots__ = (
        "column",
        "decoded",
        "end_step",
        "handle",
        "key",
        "length",
        "pins",
        "start_step",
    )

    def __init__(self, column: _Column, key: int, start_step: int) -> None:
        self.column = column
        self.key = key
        self.start_step = start_step
        self.end_step = start_step
        self.handle: Any = None
        self.length = 0  # rows, once complete
        self.decoded: np.ndarray | None = None
        self.pins = 0  # items waiting in the writer that reference this chunk

    def row(self, offset: int) -> np.ndarray:
        if not self.length:
            return np.array(self.column.open_row(offset))
        if self.decoded is None:
            if self.handle is None:
                # Kept by the column's chunker: read it without holding it
                # (a reference the user keeps must not keep the chunk).
                chunk = self.column.writer._transport.get_chunk(self.key)
                return np.array(_codec.decode_chunk(chunk)[offset])
            self.decoded = _codec.decode_chunk(self.handle)
        return np.array(self.decoded[offset])

    def keep_alive(self) -> Any:
        """The complete chunk's handle, fetched from the store if the column's
        ring keeps it (the chunk must still be alive: a live reference or a
        pin guarantees it)."""
        if self.handle is None:
            self.handle = self.column.writer._transport.get_chunk(self.key)
        return self.handle


class _Column:
    """One column's chunker and history.

    Uncompressed numeric columns (the default) are chunked by the core's
    ColumnChunker, which also keeps their complete chunks alive while a row
    is in the keep-alive window. Strings and compressed or delta-encoded
    columns are chunked here, and their chunks hold their store handles.
    """

    def __init__(
        self,
        writer: TrajectoryWriter,
        path: nest.Path,
        index: int,
        first: np.ndarray,
        keep_alive: int,
        max_chunk_length: int,
        history_size: int,
    ) -> None:
        self.writer = writer
        self.path = path
        self.index = index
        self.dtype = first.dtype
        self.shape = first.shape
        self.is_string = first.dtype.kind in "SU"
        self.keep_alive = keep_alive
        self.max_chunk_length = max_chunk_length
        self.typestr = self.dtype.str
        self.count = 0  # values appended since the last reset
        self.generation = 0
        self.open: _Chunk | None = None
        self.open_length = 0
        plain = (
            not self.is_string
            and writer._compression == "none"
            and not (writer._delta_encoded and self.dtype.kind in "iu" and len(self.shape) >= 1)
        )
        self.chunker: Any = (
            writer._transport.column_chunker(self.typestr, self.shape, max_chunk_length, keep_alive)
            if plain
            else None
        )
        self.buffer: Any = (
            None
            if self.is_string or plain
            else np.empty((max_chunk_length, *self.shape), self.dtype)
        )
        self.string_rows: list[np.ndarray] = []
        # History: the newest entries (CellRef or None), and how many older
        # entries were dropped, so positions count from the episode start.
        self.history: collections.deque[CellRef | None] = collections.deque(maxlen=history_size)
        self.history_dropped = 0
        self.history_nones = 0  # None entries in `history`: none lets slices skip the scan

    # --- chunker

    def checked(self, value: Any) -> np.ndarray:
        """``value`` as an array this column accepts (its dtype and shape), or
        ValueError. Changes nothing: an append checks all its values first."""
        array = value if type(value) is np.ndarray else _as_array(value)
        if (
            array.dtype is not self.dtype
            and array.dtype != self.dtype
            and not (self.is_string and array.dtype.kind == self.dtype.kind)
        ):
            array = self._convert_other_dtype(array)
        if array.shape != self.shape:
            raise ValueError(
                f"Tensor of incompatible shape provided for column {self.path!r}. Got "
                f"{list(array.shape)} which is incompatible with {list(self.shape)}."
            )
        return array

    def add(self, array: np.ndarray, step: int) -> CellRef:
        """Adds a value returned by :meth:`checked` as row ``step``."""
        chunker = self.chunker
        if chunker is None:
            return self._add_here(array, step)
        # The hottest path of the writer: kept inline.
        writer = self.writer
        try:
            key = chunker.append(array, writer._episode_id, step)
        except ValueError:
            if array.flags.c_contiguous:
                raise
            # The core copies C-contiguous buffers only (slices, Fortran order).
            key = chunker.append(np.ascontiguousarray(array), writer._episode_id, step)
        seq = self.count
        self.count = seq + 1
        chunk = self.open
        if chunk is None:
            # _Chunk(self, key, step), inline (see _new).
            chunk = _new(_Chunk)
            chunk.column = self
            chunk.key = key
            chunk.start_step = step
            chunk.handle = None
            chunk.length = 0
            chunk.decoded = None
            chunk.pins = 0
            offset = 0
        else:
            offset = self.open_length
        chunk.end_step = step
        # CellRef(self, chunk, offset, seq, self.generation), inline.
        ref = _new(CellRef)
        ref._column = self
        ref._chunk = chunk
        ref._offset = offset
        ref._seq = seq
        ref._generation = self.generation
        if offset + 1 < self.max_chunk_length:
            self.open = chunk
            self.open_length = offset + 1
            return ref
        # The chunker completed the chunk.
        self.open = None
        self.open_length = 0
        chunk.length = offset + 1
        if chunk.pins or writer._pending:
            self._completed(chunk, offset + 1)
        return ref

    def _add_here(self, array: np.ndarray, step: int) -> CellRef:
        """add() for columns chunked here (strings, compression)."""
        chunk = self.open
        if chunk is None:
            chunk = self.open = _Chunk(self, self.writer._draw_key(), step)
            self.open_length = 0
        offset = self.open_length
        if self.is_string:
            self.string_rows.append(np.array(array))  # a copy: the caller may reuse it
        else:
            self.buffer[offset] = array
        self.open_length = offset + 1
        chunk.end_step = step
        ref = CellRef(self, chunk, offset, self.count, self.generation)
        self.count += 1
        if self.open_length >= self.max_chunk_length:
            self.finalize()
        return ref

    def _completed(self, chunk: _Chunk, length: int) -> None:
        chunk.length = length
        if chunk.pins and chunk.handle is None:
            # Items waiting in the writer use it: hold it for them, as the
            # chunker lets go of it once its rows leave the keep-alive window.
            chunk.keep_alive()
        writer = self.writer
        if writer._pending:
            writer._chunk_completed()

    def _convert_other_dtype(self, array: np.ndarray) -> np.ndarray:
        """``array`` as this column's dtype if it is an object array of strings
        for a string column or the column's type in the other byte order;
        otherwise the wrong-dtype ValueError."""
        if array.dtype.kind in "OU":
            array = _as_array(array)
            if self.is_string and array.dtype.kind == self.dtype.kind:
                return array
        elif array.dtype.newbyteorder("=") == self.dtype.newbyteorder("="):
            return array.astype(self.dtype)  # the same type in the other byte order
        raise ValueError(
            f"Tensor of wrong dtype provided for column {self.path!r}. Got "
            f"{_dtype_name(array.dtype)} but expected {_dtype_name(self.dtype)}."
        )

    def open_row(self, offset: int) -> np.ndarray:
        if self.chunker is not None:
            row = np.frombuffer(self.chunker.open_row(offset), self.dtype)
            return row.reshape(self.shape)
        return self.string_rows[offset] if self.is_string else self.buffer[offset]

    def finalize(self) -> None:
        """Completes the open chunk (if any) and hands it to the store."""
        chunk = self.open
        if chunk is None:
            return
        length = self.open_length
        if self.chunker is not None:
            self.chunker.finalize()
        else:
            if self.is_string:
                rows = np.stack(self.string_rows)
                self.string_rows = []
            else:
                rows = self.buffer[:length]
            writer = self.writer
            payload, delta = _codec.encode_rows(rows, writer._compression, writer._delta_encoded)
            chunk.handle = writer._transport.add_chunk(
                chunk.key,
                payload,
                rows.dtype.str,
                self.shape,
                length,
                compression=writer._compression,
                delta_encoded=delta,
                episode_id=writer._episode_id,
                start_step=chunk.start_step,
                end_step=chunk.end_step,
            )
        self.open = None
        self.open_length = 0
        self._completed(chunk, length)

    def reset(self) -> None:
        """Drops the open chunk and expires every reference (new episode)."""
        self.open = None
        self.open_length = 0
        self.string_rows = []
        self.count = 0
        self.generation += 1
        if self.chunker is not None:
            self.chunker.clear()

    def reconfigure(self, keep_alive: int, max_chunk_length: int) -> None:
        if self.open is not None:
            raise RuntimeError(
                f"Flush must be called before ApplyConfig: column {self.path!r} has an open chunk"
            )
        self.keep_alive = keep_alive
        self.max_chunk_length = max_chunk_length
        if self.chunker is not None:
            self.chunker.keep_alive = keep_alive
            self.chunker.max_chunk_length = max_chunk_length
        elif not self.is_string and len(self.buffer) != max_chunk_length:
            self.buffer = np.empty((max_chunk_length, *self.shape), self.dtype)

    # --- history

    def history_length(self) -> int:
        return self.history_dropped + len(self.history)

    def push_history(self, entry: CellRef | None) -> None:
        history = self.history
        if len(history) == history.maxlen:
            self.history_dropped += 1
            if history[0] is None:
                self.history_nones -= 1
        history.append(entry)
        if entry is None:
            self.history_nones += 1

    def history_at(self, position: int) -> CellRef | None:
        index = position - self.history_dropped
        return self.history[index] if index >= 0 else None

    def clear_history(self) -> None:
        self.history.clear()
        self.history_dropped = 0
        self.history_nones = 0
