"""``TrajectoryWriter``: writes steps into per-column chunks and creates items
over any of the steps it still keeps (Reverb's modern writer).

Each leaf path of the appended structure is a *column*. A column's values are
gathered into chunks of up to ``max_chunk_length`` steps; an item is a
priority plus, per column, a list of references to cells of those chunks, so
overlapping items share the same stored data. References older than
``num_keep_alive_refs`` steps of their column expire (unless an item still
waiting to be inserted uses them).

``create_item`` never blocks: items wait in the writer until their chunks are
complete and the table's rate limiter lets them in. ``flush`` waits until at
most ``block_until_num_items`` items wait; ``end_episode`` flushes everything
and starts a new episode.

Example:
    >>> import resound
    >>> server = resound.Server([resound.Table.queue('q', 10)], listen=False)
    >>> client = server.in_process_client()
    >>> with client.trajectory_writer(num_keep_alive_refs=2) as writer:
    ...     first = writer.append({'obs': 1.0})
    ...     second = writer.append({'obs': 2.0})
    ...     writer.create_item('q', priority=1.0, trajectory={'obs': writer.history['obs'][-2:]})
    >>> next(client.sample('q', emit_timesteps=False)).data
    [array([1., 2.])]
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import datetime
import functools
import itertools
import math
import os
import random
import threading
import time
import weakref
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from resound import _codec, nest, specs
from resound._checks import as_priority, check_timeout
from resound.errors import DeadlineExceededError, ReverbError

__all__ = ["CellRef", "TrajectoryColumn", "TrajectoryWriter"]

# A column chunk holds at most this many steps unless configured otherwise:
# long enough to amortise per-chunk costs, short enough that items over
# recent steps do not wait long for their chunk to complete.
DEFAULT_MAX_CHUNK_LENGTH = 16
# The most items handed to one table in one core call.
_MAX_BATCH = 4096
# How long the background sender blocks in one core call before it looks at
# whether the writer was closed or a flush wants to take over.
_SENDER_SLICE_SECONDS = 0.05
# The longest single wait for the rate limiter in flush and end_episode.
_WAIT_SLICE_SECONDS = 0.1
# How long an idle sender waits before it looks again whether its writer
# still exists (a writer collected on the sender's own thread cannot wake it).
_SENDER_IDLE_SECONDS = 1.0


# object.__new__: the hot paths build slotted objects field by field, which
# costs about half of a call to their __init__.
_new = object.__new__


_INF = math.inf


def _random_source() -> random.Random:
    # Seeded from the OS so that forked processes draw different keys.
    return random.Random(os.urandom(16))


def _as_array(value: Any) -> np.ndarray:
    array = value if type(value) is np.ndarray else np.asarray(value)
    if array.dtype.kind == "O":
        # Only strings may hide in object arrays (e.g. from pandas or TF);
        # anything else (None, sets, objects) would otherwise become its repr.
        if _all_of(array, bytes):
            target = np.bytes_
        elif _all_of(array, str):
            target = np.str_
        elif _all_of(array, (bytes, str)):
            target = np.bytes_
        else:
            raise ValueError(
                f"unsupported object data {value!r}: values must be numbers, bools, arrays "
                "or strings (str or bytes)"
            )
        try:
            array = array.astype(target)
        except (TypeError, ValueError, UnicodeEncodeError) as error:
            raise ValueError(f"unsupported object data {value!r}: {error}") from None
    elif array.dtype.kind == "V":
        # Structured and extension types (e.g. ml_dtypes' bfloat16) have no
        # portable type string: they would come back as raw bytes.
        raise ValueError(
            f"unsupported dtype {array.dtype} of {type(value).__name__}: values must be bool, "
            "integer, float or complex numbers, or strings (convert e.g. bfloat16 with "
            ".astype(np.float32))"
        )
    return _codec.encode_strings(array)  # str is stored as UTF-8 bytes


def _all_of(array: np.ndarray, types: type | tuple[type, ...]) -> bool:
    return all(isinstance(item, types) for item in array.flat)


def _dtype_name(dtype: np.dtype) -> str:
    if dtype.kind == "S":
        return "bytes"
    if dtype.kind == "U":
        return "str"
    return dtype.name


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


class CellRef:
    """A reference to one value appended to a column (Reverb's WeakCellRef)."""

    __slots__ = ("_chunk", "_column", "_generation", "_offset", "_seq")

    def __init__(
        self, column: _Column, chunk: _Chunk, offset: int, seq: int, generation: int
    ) -> None:
        self._column = column
        self._chunk = chunk
        self._offset = offset
        self._seq = seq
        self._generation = generation

    @property
    def expired(self) -> bool:
        """True once the writer no longer keeps the value (see the module doc)."""
        column = self._column
        if self._chunk.pins:
            return False
        if self._generation != column.generation:
            return True
        return self._seq < column.count - column.keep_alive

    @property
    def shape(self) -> tuple[int, ...]:
        return self._column.shape

    @property
    def dtype(self) -> np.dtype:
        return self._column.dtype

    def numpy(self) -> np.ndarray:
        """A copy of the referenced value."""
        if self.expired:
            raise RuntimeError("Cannot access data from expired WeakCellRef")
        return self._chunk.row(self._offset)

    def __repr__(self) -> str:
        state = "expired" if self.expired else "alive"
        return f"CellRef(column={self._column.path!r}, step={self._seq}, {state})"


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

    def add(self, value: Any, step: int) -> CellRef:
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


class TrajectoryColumn:
    """A column of an item: references to cells, optionally squeezed.

    A squeezed column holds exactly one reference and has no time axis.

    Example:
        >>> col = writer.history['obs'][-3:]  # doctest: +SKIP
        >>> col.shape  # doctest: +SKIP
        (3, 4)
    """

    # _contiguous: the references are consecutive values of one column (a
    # history slice), which lets create_item skip per-reference work.
    __slots__ = ("_contiguous", "_path", "_refs", "_squeeze")

    def __init__(
        self, data_references: Sequence[CellRef], *, squeeze: bool = False, path: Any = None
    ) -> None:
        refs = list(data_references)
        for ref in refs:
            if ref is None:
                raise ValueError(
                    "TrajectoryColumns cannot contain any None data references: "
                    f"TrajectoryColumn at path {path!r} got {refs!r}"
                )
        if squeeze and len(refs) != 1:
            raise ValueError(
                f"Columns must contain exactly one data reference when squeeze set, got {len(refs)}"
            )
        self._refs = refs
        self._squeeze = bool(squeeze)
        self._path = path
        self._contiguous = False

    @classmethod
    def _single(cls, ref: CellRef | None, path: Any) -> TrajectoryColumn:
        """``TrajectoryColumn([ref], squeeze=True, path=path)`` without the
        general checks (the hot path of ``history[...][-1]``)."""
        if ref is None:
            return cls([ref], squeeze=True, path=path)  # raises the usual error
        column = cls.__new__(cls)
        column._refs = [ref]
        column._squeeze = True
        column._path = path
        column._contiguous = True
        return column

    @classmethod
    def _run(cls, refs: list[CellRef], path: Any) -> TrajectoryColumn:
        """An unsqueezed column of consecutive values of one column (the caller
        guarantees it and that no reference is None)."""
        column = cls.__new__(cls)
        column._refs = refs
        column._squeeze = False
        column._path = path
        column._contiguous = True
        return column

    @property
    def is_squeezed(self) -> bool:
        return self._squeeze

    @property
    def shape(self) -> tuple[int, ...]:
        if not self._refs:
            return (0,)
        element = tuple(self._refs[0].shape)
        return element if self._squeeze else (len(self._refs), *element)

    @property
    def dtype(self) -> np.dtype:
        if not self._refs:
            raise ValueError("an empty TrajectoryColumn has no dtype")
        return self._refs[0].dtype

    def numpy(self) -> np.ndarray:
        """The referenced values (stacked unless squeezed); RuntimeError if
        any reference expired."""
        values = [ref.numpy() for ref in self._refs]
        return values[0] if self._squeeze else np.stack(values)

    def __len__(self) -> int:
        return len(self._refs)

    def __iter__(self) -> Iterator[CellRef]:
        return iter(self._refs)

    def __getitem__(self, index: Any) -> TrajectoryColumn:
        if isinstance(index, (int, np.integer)) and not isinstance(index, bool):
            return TrajectoryColumn([self._refs[index]], squeeze=True, path=self._path)
        if isinstance(index, slice):
            refs = self._refs[index]
            if self._contiguous and refs and index.step in (None, 1):
                return TrajectoryColumn._run(refs, self._path)
            return TrajectoryColumn(refs, path=self._path)
        if isinstance(index, (list, tuple, np.ndarray)):
            return TrajectoryColumn([self._refs[i] for i in index], path=self._path)
        raise TypeError(f"TrajectoryColumn indices must be int, slice or list, got {index!r}")

    def __repr__(self) -> str:
        return (
            f"TrajectoryColumn(path={self._path!r}, length={len(self._refs)}, "
            f"squeeze={self._squeeze})"
        )


class _ColumnHistory:
    """All steps of one column since the episode began; older than the
    keep-alive window read as None."""

    __slots__ = ("_column", "_path", "_writer")

    def __init__(self, writer: TrajectoryWriter, column: _Column) -> None:
        self._writer = writer
        self._column = column
        self._path = column.path

    def __len__(self) -> int:
        return self._column.history_length()

    def _entry(self, position: int) -> CellRef | None:
        length = self._column.history_length()
        if position < 0:
            position += length
        if not 0 <= position < length:
            raise IndexError(f"step {position} out of range for a history of {length} steps")
        return self._column.history_at(position)

    def __getitem__(self, index: Any) -> TrajectoryColumn:
        column = self._column
        if index.__class__ is int and index == -1:
            # The hot path of single steps: history['x'][-1].
            history = column.history
            if history:
                ref = history[-1]
                if ref is not None:
                    single = _new(TrajectoryColumn)
                    single._refs = [ref]
                    single._squeeze = True
                    single._path = self._path
                    single._contiguous = True
                    return single
        if type(index) is slice:  # the hot path of sequences: history['x'][-10:]
            dropped = column.history_dropped
            start, stop, step = index.indices(dropped + len(column.history))
            if step == 1 and dropped <= start < stop:
                # Consecutive steps still in the history: one C-level copy.
                refs = list(itertools.islice(column.history, start - dropped, stop - dropped))
                if not column.history_nones or None not in refs:
                    run = _new(TrajectoryColumn)
                    run._refs = refs
                    run._squeeze = False
                    run._path = self._path
                    run._contiguous = True
                    return run
            positions = range(start, stop, step)
            return TrajectoryColumn([column.history_at(p) for p in positions], path=self._path)
        if isinstance(index, (int, np.integer)) and not isinstance(index, bool):
            return TrajectoryColumn._single(self._entry(int(index)), self._path)
        if isinstance(index, (list, tuple, np.ndarray)):
            return TrajectoryColumn([self._entry(int(p)) for p in index], path=self._path)
        raise TypeError(f"history indices must be int, slice or list, got {index!r}")

    def __repr__(self) -> str:
        return f"ColumnHistory(path={self._path!r}, length={len(self)})"


class _NoColumn:
    """The history side of a field that has only been None so far (it has no
    column yet): every step reads None."""

    __slots__ = ("_writer", "history", "path")

    def __init__(self, writer: TrajectoryWriter, path: nest.Path) -> None:
        self._writer = writer
        self.path = path
        self.history = ()

    def history_length(self) -> int:
        return self._writer._steps_in_history

    def history_at(self, position: int) -> None:
        return None


class _PendingItem:
    __slots__ = ("chunks", "request", "table")

    def __init__(self, table: str, request: tuple[int, float, list[Any]], chunks: list[_Chunk]):
        self.table = table
        self.request = request
        self.chunks = chunks

    def ready(self) -> bool:
        return _all_complete(self.chunks)


class TrajectoryWriter:
    """Writes steps and creates items; see the module docstring.

    Create it with ``Client.trajectory_writer(num_keep_alive_refs)``.
    """

    def __init__(
        self,
        transport: Any,
        num_keep_alive_refs: int,
        *,
        validate_items: bool = True,
        max_chunk_length: int | None = None,
        compression: str = "none",
        delta_encoded: bool = False,
    ) -> None:
        self._transport = transport
        # Where items go: the transport itself in-process, an insert stream
        # of this writer's own over gRPC (its failures become this writer's).
        self._link = transport.open_insert_stream(_error_setter(weakref.ref(self)))
        self._default_keep_alive = _check_positive(num_keep_alive_refs, "num_keep_alive_refs")
        self._default_chunk_length = _check_chunk_length(max_chunk_length, self._default_keep_alive)
        self._validate_items = bool(validate_items)
        self._compression = _codec.check_compression(compression)
        self._delta_encoded = bool(delta_encoded)
        self._random = _random_source()
        self._draw_key = functools.partial(self._random.getrandbits, 64)
        self._episode_id = self._draw_key()
        self._episode_step = 0
        self._episode_steps = 0
        self._step_open = False
        self._columns: dict[nest.Path, _Column] = {}
        self._none_paths: set[nest.Path] = set()  # fields without a value so far
        self._column_list: list[_Column] = []
        self._configs: dict[nest.Path, tuple[int, int]] = {}
        self._history_size = self._default_keep_alive
        self._steps_in_history = 0  # steps recorded since the history was cleared
        self._structure: Any = None
        self._history: Any = None
        self._fast_keys: tuple[Any, ...] | None = None
        # The column of each key of _fast_keys (zip() costs more than a lookup).
        self._fast_columns: dict[Any, _Column | None] = {}
        self._tables: dict[str, Any] = {}
        self._pending: collections.deque[_PendingItem] = collections.deque()
        self._send_lock = threading.Lock()
        self._wake = threading.Condition(threading.Lock())
        self._sender: threading.Thread | None = None
        self._error: BaseException | None = None
        # Items per core call; 1 once a batch was refused, so that the items
        # before a refused one still go in (the core checks a whole batch first).
        self._batch_limit = _MAX_BATCH
        self._closed = False

    # --- properties

    @property
    def history(self) -> Any:
        """The appended structure with a column history at each leaf."""
        history = self._history
        if history is not None:
            return history
        if self._structure is None:
            raise RuntimeError(
                "history cannot be accessed before `append` is called at least once."
            )
        if self._history is None:
            self._history = nest.unflatten_as(
                self._structure,
                [
                    _ColumnHistory(self, self._columns.get(path) or _NoColumn(self, path))
                    for path, _ in nest.flatten_with_path(self._structure)
                ],
            )
        return self._history

    @property
    def episode_steps(self) -> int:
        """Full (not partial) appends since the writer started or the episode ended."""
        return self._episode_steps

    @property
    def num_pending_items(self) -> int:
        """Items created but not yet in their tables."""
        return len(self._pending) + self._link.in_flight

    # --- writing

    def append(self, data: Any, *, partial_step: bool = False) -> Any:
        """Appends a step (or part of one, with ``partial_step=True``).

        Returns ``data``'s structure with a CellRef for every value (None
        where the value was None).

        If a value is rejected (ValueError: wrong dtype or shape, or a field
        already set in the open step), the values before it (in flattened
        order) stay in the step, which stays open as after a partial append:
        complete it with the remaining fields, or end the episode.
        """
        if self._closed or self._error is not None:
            self._check_usable()
        step = self._episode_step
        fast_keys = self._fast_keys
        if type(data) is dict and fast_keys is not None and tuple(data) == fast_keys:
            refs = {}
            if self._step_open:
                fast_columns = self._fast_columns
                for key, value in data.items():
                    column = fast_columns[key]
                    refs[key] = None if value is None else self._add(column, value, step)
            else:
                # A new step holding every column: record each value directly.
                self._steps_in_history += 1
                try:
                    fast_columns = self._fast_columns
                    for key, value in data.items():
                        column = fast_columns[key]
                        ref = refs[key] = None if value is None else column.add(value, step)
                        # column.push_history(ref), inline:
                        history = column.history
                        if len(history) == history.maxlen:
                            column.history_dropped += 1
                            if history[0] is None:
                                column.history_nones -= 1
                        history.append(ref)
                        if ref is None:
                            column.history_nones += 1
                except BaseException:
                    self._keep_step_open()
                    raise
            result: Any = refs
        else:
            if not self._step_open:
                self._open_step()
            try:
                result = self._append_general(data, step)
            except BaseException:
                self._keep_step_open()
                raise
        if not partial_step:
            self._step_open = False
            self._episode_step += 1
            self._episode_steps += 1
        else:
            self._step_open = True
        return result

    def _keep_step_open(self) -> None:
        """After a failed append: every column gets an entry for the step (None
        where no value was added), which stays open for the rest of its values."""
        for column in self._column_list:
            if column.history_length() < self._steps_in_history:
                column.push_history(None)
        self._step_open = True

    def _open_step(self) -> None:
        for column in self._column_list:
            column.push_history(None)
        self._steps_in_history += 1

    def _add(self, column: Any, value: Any, step: int) -> CellRef:
        if column.history[-1] is not None:
            raise ValueError(
                f"Field {column.path!r} has already been set in the active step by previous "
                "(partial) append call and thus must be omitted or set to None but got: "
                f"{value!r}"
            )
        ref = column.add(value, step)
        column.history[-1] = ref
        column.history_nones -= 1
        return ref

    def _append_general(self, data: Any, step: int) -> Any:
        flat = nest.flatten_with_path(data)
        refs = []
        new_paths = False
        try:
            for path, value in flat:
                if value is None:
                    refs.append(None)
                    if path not in self._columns and path not in self._none_paths:
                        # A field seen only as None so far: in history, all None.
                        self._none_paths.add(path)
                        new_paths = True
                    continue
                column = self._columns.get(path)
                if column is None:
                    column = self._new_column(path, value)
                    new_paths = True
                refs.append(self._add(column, value, step))
        except BaseException:
            if new_paths:  # columns made before the failure belong in history
                self._structure = _merge_structures(self._structure, data)
                self._history = None
                self._fast_keys = None
            raise
        if new_paths or self._structure is None:
            self._structure = _merge_structures(self._structure, data)
            self._history = None
        # Remember plain {key: leaf} steps so the next ones skip flattening.
        if (
            type(data) is dict
            and all(len(path) == 1 for path, _ in flat)
            and len(flat) == len(data)
        ):
            self._fast_keys = tuple(data)
            self._fast_columns = {key: self._columns.get((key,)) for key in data}
            if any(column is None for column in self._fast_columns.values()) or len(
                self._fast_columns
            ) != len(self._column_list):
                self._fast_keys = None
        else:
            self._fast_keys = None
        return nest.unflatten_as(data, refs)

    def _new_column(self, path: nest.Path, value: Any) -> _Column:
        keep_alive, chunk_length = self._configs.get(
            path, (self._default_keep_alive, self._default_chunk_length)
        )
        column = _Column(
            self,
            path,
            len(self._column_list),
            _as_array(value),
            keep_alive,
            chunk_length,
            self._history_size,
        )
        # Earlier steps of a new column read as None.
        kept = min(self._steps_in_history, self._history_size)
        column.history.extend([None] * kept)
        column.history_dropped = self._steps_in_history - kept
        column.history_nones = kept
        self._columns[path] = column
        self._column_list.append(column)
        return column

    def configure(
        self, path: Any, *, num_keep_alive_refs: int, max_chunk_length: int | None
    ) -> None:
        """Sets keep-alive and chunk length for one column (by its path tuple)."""
        self._check_usable()
        keep_alive = _check_positive(num_keep_alive_refs, "num_keep_alive_refs")
        chunk_length = _check_chunk_length(max_chunk_length, keep_alive)
        path = tuple(path) if isinstance(path, (tuple, list)) else (path,)
        self._configs[path] = (keep_alive, chunk_length)
        if keep_alive > self._history_size:
            self._history_size = keep_alive
            for column in self._column_list:
                column.history = collections.deque(column.history, maxlen=keep_alive)
        column = self._columns.get(path)
        if column is not None:
            column.reconfigure(keep_alive, chunk_length)

    def create_item(self, table: str, priority: float, trajectory: Any) -> None:
        """Queues an item of ``trajectory`` (a structure of TrajectoryColumn) for
        ``table``. Never blocks; see :meth:`flush`."""
        if self._closed or self._error is not None:
            self._check_usable()
        if type(trajectory) is dict and len(trajectory) == 1:
            # The common {'obs': column} item, without the general flatten.
            leaves = list(trajectory.values())
            if type(leaves[0]) is not TrajectoryColumn:
                leaves = nest.flatten(trajectory)
        else:
            leaves = nest.flatten(trajectory)
        if not leaves:
            raise ValueError("trajectory must not be empty.")
        meta = self._tables.get(table)
        if meta is None or type(priority) is not float or not 0.0 <= priority < _INF:
            priority = self._check_item_priority(table, priority)
            meta = self._tables.get(table)
        columns = []
        chunks: list[_Chunk] = []
        index = -1
        for leaf in leaves:  # a counter: enumerate() costs more on this hot path
            index += 1
            if type(leaf) is not TrajectoryColumn:
                raise TypeError(
                    f"trajectory leaves must be TrajectoryColumn (from writer.history), got "
                    f"{type(leaf).__name__} at position {index}"
                )
            refs = leaf._refs
            if len(refs) == 1:  # one step: no runs to find
                ref = refs[0]
                chunk = ref._chunk
                column = ref._column
                if not chunk.pins and (
                    ref._generation != column.generation
                    or ref._seq < column.count - column.keep_alive
                ):
                    raise ValueError(f"Error in column {index}: Column contains expired CellRef.")
                if chunk not in chunks:
                    chunks.append(chunk)
                columns.append(([(chunk.key, ref._offset, 1)], leaf._squeeze))
            elif leaf._contiguous:
                columns.append(_run_slices(refs, index, chunks))
            elif refs:
                columns.append(_slices(leaf, index, chunks))
            else:
                raise _empty_column_error(leaves, index)
        if self._validate_items and (meta is None or meta.flat_signature is not None):
            self._check_signature(table, leaves)
        key = self._draw_key()
        pending = self._pending
        complete = True
        for chunk in chunks:  # _all_complete(chunks), inline
            if not chunk.length:
                complete = False
                break
        if complete and not pending and self._sender is None:
            # The common case: nothing waits and no sender thread runs, so
            # this thread may insert right away, without queueing.
            try:
                if meta is None:
                    self._link.insert(table, [(key, priority, columns)], 0.0)
                elif len(columns) == 1 and len(columns[0][0]) == 1:
                    # One column of one slice: the core call without the
                    # nested lists (the most common item of all).
                    (chunk_key, offset, length), squeeze = columns[0][0][0], columns[0][1]
                    meta.insert_one(key, priority, chunk_key, offset, length, squeeze, 0.0)
                else:
                    meta.insert_batch([(key, priority, columns)], 0.0)
                return
            except DeadlineExceededError:
                pass  # rate limited: queue it; the sender thread takes over
            except BaseException as error:
                self._error = error
                raise
        for chunk in chunks:
            chunk.pins += 1
            if chunk.length and chunk.handle is None:
                chunk.keep_alive()  # its chunker may let go of it while the item waits
        item = _new(_PendingItem)  # _PendingItem(table, request, chunks), inline
        item.table = table
        item.request = (key, priority, columns)
        item.chunks = chunks
        pending.append(item)
        # Only a new front item can make the queue sendable here: an item
        # behind others waits for them (the front is sent as soon as its
        # chunks complete, or by the sender thread if rate limited).
        if complete and len(pending) == 1:
            self._send_now()

    def flush(self, block_until_num_items: int = 0, timeout_ms: int | None = None) -> None:
        """Completes chunks of all but the last ``block_until_num_items`` waiting
        items and waits until at most that many wait.

        ``timeout_ms=None`` waits forever; otherwise DeadlineExceededError after
        that many milliseconds (the items stay queued and keep flowing).
        """
        if isinstance(block_until_num_items, bool) or not isinstance(block_until_num_items, int):
            raise ValueError(
                f"block_until_num_items must be an int >= 0, got {block_until_num_items!r}"
            )
        if block_until_num_items < 0:
            raise ValueError(f"block_until_num_items must be >= 0, got {block_until_num_items}")
        self._check_usable()
        self._wait_until(block_until_num_items, timeout_ms, "Flush")
        self._wait_for_link(block_until_num_items, timeout_ms, "Flush")

    def end_episode(self, clear_buffers: bool = True, timeout_ms: int | None = None) -> None:
        """Flushes every item, then starts a new episode.

        With ``clear_buffers`` every reference expires and the history is
        cleared; without, references stay usable across the boundary.
        """
        self._check_usable()
        self._wait_until(0, timeout_ms, "End episode")
        self._wait_for_link(0, timeout_ms, "End episode")
        for column in self._column_list:
            if clear_buffers:
                column.reset()
                column.clear_history()
            else:
                column.finalize()
        if clear_buffers:
            self._steps_in_history = 0
        self._episode_id = self._draw_key()
        self._episode_step = 0
        self._episode_steps = 0
        self._step_open = False

    def close(self) -> None:
        """Stops the writer without flushing: waiting items are dropped. Idempotent."""
        self._close(wait_for_sender=True)

    def _close(self, wait_for_sender: bool) -> None:
        if self._closed:
            return
        self._closed = True
        sender = self._sender
        if sender is threading.current_thread():
            # Collected by the garbage collector on its own sender thread, which
            # may hold the send lock or the wake lock; it stops by itself.
            return
        self._wake_sender()
        if sender is not None and wait_for_sender:
            sender.join()
        with self._send_lock:
            for item in self._pending:
                for chunk in item.chunks:
                    chunk.pins -= 1
            self._pending.clear()
        if self._link is not self._transport:
            self._link.close(wait=wait_for_sender)

    def __enter__(self) -> TrajectoryWriter:
        return self

    def __exit__(self, exc_type: Any, exc: Any, traceback: Any) -> None:
        reverb_error = exc_type is not None and issubclass(exc_type, ReverbError)
        if not reverb_error and not self._closed and self._error is None:
            self.flush()

    def __del__(self) -> None:
        # No join here: the garbage collector may run this anywhere, and joining
        # a thread from a finalizer can block for good (seen under CPython
        # 3.11.2). The woken sender sees the writer gone and stops by itself.
        with contextlib.suppress(Exception):  # the interpreter may be shutting down
            self._close(wait_for_sender=False)

    def __repr__(self) -> str:
        return (
            f"TrajectoryWriter(num_keep_alive_refs={self._default_keep_alive}, "
            f"max_chunk_length={self._default_chunk_length}, columns={len(self._columns)}, "
            f"pending_items={len(self._pending)}, closed={self._closed})"
        )

    # --- internals

    def _wait_for_link(self, keep: int, timeout_ms: int | None, call: str) -> None:
        """Waits until the server confirmed all but ``keep`` (of the items
        beyond those still waiting here) of the items sent."""
        if not self._link.in_flight:
            return
        timeout = check_timeout(timeout_ms, "timeout_ms", "milliseconds")
        keep = max(0, keep - len(self._pending))
        try:
            self._link.wait(keep, None if timeout is None else timeout / 1000, call)
        except DeadlineExceededError:
            raise
        except BaseException as error:
            self._error = error
            raise

    def _check_usable(self) -> None:
        if self._closed:
            raise RuntimeError("TrajectoryWriter::Close has been called.")
        if self._error is not None:
            raise self._error

    def _table(self, name: str) -> Any:
        table = self._tables.get(name)
        if table is None:
            table = self._tables[name] = self._link.table_info_for_writer(name)
        return table

    def _check_item_priority(self, table: str, priority: Any) -> float:
        value = as_priority(priority)
        if math.isnan(value):
            raise ValueError("`priority` must not be nan.")
        if math.isinf(value):
            raise ValueError(f"priority must be finite, got {value}")
        meta = self._table_or_none(table)
        if value < 0 and meta is not None and meta.prioritized:
            raise ValueError(
                f"priority must be >= 0 for table {table!r} (it has a Prioritized "
                f"selector), got {value}"
            )
        return value

    def _table_or_none(self, table: str) -> Any:
        try:
            return self._table(table)
        except KeyError:
            if self._validate_items:
                raise ValueError(
                    f"Unable to create item in table '{table}' since the table could not be found."
                ) from None
            return None

    def _check_signature(self, table: str, leaves: list[TrajectoryColumn]) -> None:
        meta = self._table_or_none(table)
        if meta is None or meta.flat_signature is None:
            return
        expected = meta.flat_signature
        if len(leaves) != len(expected):
            raise ValueError(
                f"Unable to create item in table '{table}' since the provided trajectory is "
                f"inconsistent with the table signature. The trajectory has {len(leaves)} "
                f"columns but the table signature has {len(expected)} columns."
            )
        for index, (column, spec) in enumerate(zip(leaves, expected, strict=False)):
            shape = column.shape
            if not (
                specs.dtypes_match(spec.dtype, column.dtype)
                and specs.shapes_compatible(spec.shape, shape)
            ):
                raise ValueError(
                    f"Unable to create item in table '{table}' since the provided trajectory is "
                    f"inconsistent with the table signature. The table expects column {index} "
                    f"to be a {_dtype_name(spec.dtype)} {_shape_text(spec.shape)} tensor but "
                    f"got a {_dtype_name(column.dtype)} {_shape_text(shape)} tensor."
                )

    def _chunk_completed(self) -> None:
        if self._pending and self._pending[0].ready():
            self._send_now()

    def _send_now(self) -> None:
        """Inserts what the limiter admits right now; the background sender
        takes over the rest."""
        if not self._send(0.0) and not self._closed:
            if self._sender is None:
                self._start_sender()
            self._wake_sender()

    def _send(self, deadline: float | None, keep: int = 0) -> bool:
        """Inserts ready items from the front until ``keep`` wait or the front
        item is not ready (True), or until ``deadline`` (time.monotonic();
        None: none; 0.0: do not wait at all) passes (False)."""
        if deadline == 0.0:
            acquired = self._send_lock.acquire(blocking=False)
        elif deadline is None:
            acquired = self._send_lock.acquire()
        else:
            acquired = self._send_lock.acquire(timeout=max(0.0, deadline - time.monotonic()))
        if not acquired:
            return False
        try:
            return self._send_locked(deadline, keep)
        finally:
            self._send_lock.release()

    def _ready_batch(self, keep: int) -> tuple[str, list[_PendingItem]] | None:
        """The table and the ready items at the front (leaving ``keep``) that
        go to it in one core call, or None if the front item is not ready."""
        pending = self._pending
        if len(pending) <= keep or not pending[0].ready():
            return None
        table = pending[0].table
        limit = min(self._batch_limit, len(pending) - keep)
        batch = []
        # By index, not by iterating the deque: the writer's thread may append
        # to it meanwhile (only the send lock's holder removes items).
        for index in range(limit):
            item = pending[index]
            if item.table != table:
                break
            for chunk in item.chunks:  # item.ready(), inline: a hot loop
                if not chunk.length:
                    return table, batch
            batch.append(item)
        return table, batch

    def _send_locked(self, deadline: float | None, keep: int) -> bool:
        while True:
            ready = self._ready_batch(keep)
            if ready is None:
                break
            table, batch = ready
            # Long waits go in slices: the interpreter runs signal handlers
            # (Ctrl-C) only between core calls.
            if deadline is None:
                timeout = _WAIT_SLICE_SECONDS
            elif deadline == 0.0:
                timeout = 0.0
            else:
                timeout = min(max(0.0, deadline - time.monotonic()), _WAIT_SLICE_SECONDS)
            try:
                inserted = self._link.insert(table, [item.request for item in batch], timeout)
            except DeadlineExceededError as error:
                self._pop(getattr(error, "num_inserted", 0))
                if deadline is None or (deadline != 0.0 and time.monotonic() < deadline):
                    continue
                return False
            except Exception as error:
                if len(batch) > 1:
                    self._pop(getattr(error, "num_inserted", 0))
                    self._batch_limit = 1  # find the refused item
                    continue
                self._error = error
                raise
            self._pop(inserted)
        return True

    def _pop(self, count: int) -> None:
        pending = self._pending
        for _ in range(count):
            # Unpinned before it leaves the queue: a flush that sees the queue
            # shrink (from another thread) also sees the references released.
            for chunk in pending[0].chunks:
                chunk.pins -= 1
            pending.popleft()

    def _wait_until(self, keep: int, timeout_ms: int | None, call: str) -> None:
        timeout = check_timeout(timeout_ms, "timeout_ms", "milliseconds")
        deadline = None if timeout is None else time.monotonic() + timeout / 1000
        # Complete the chunks of every item that must leave the writer.
        pending = list(self._pending)
        for item in pending[: max(0, len(pending) - keep)]:
            for chunk in item.chunks:
                if not chunk.length:
                    chunk.column.finalize()
        while len(self._pending) > keep:
            if deadline is not None and deadline <= time.monotonic():
                break
            if self._send(deadline, keep):
                if len(self._pending) > keep and not self._pending[0].ready():
                    break
                continue
            if self._error is not None:
                raise self._error
        if len(self._pending) > keep:
            if self._error is not None:
                raise self._error
            if not self._pending[0].ready():
                return  # only items over still-open chunks remain beyond `keep`
            if self._sender is None:
                self._start_sender()
            raise DeadlineExceededError(
                f"{call} call did not complete within provided timeout of "
                f"{datetime.timedelta(milliseconds=timeout_ms or 0)}"
            )

    # --- background sender: keeps rate-limited items flowing without user calls

    def _start_sender(self) -> None:
        # The thread holds the writer only weakly, and not at all while it
        # waits for the rate limiter, so that an abandoned writer is still
        # collected (and closed) as in Reverb.
        self._sender = threading.Thread(
            target=_run_sender,
            args=(weakref.ref(self), self._wake, self._send_lock),
            name="resound-trajectory-writer",
            daemon=True,
        )
        _WRITERS_WITH_SENDERS.add(self)
        self._sender.start()

    def _wake_sender(self) -> None:
        with self._wake:
            self._wake.notify()


def _error_setter(writer_ref: weakref.ref[TrajectoryWriter]) -> Any:
    """A callback that records an insert stream's failure in the writer (if
    it still exists), raised by the writer's next call."""

    def record(error: BaseException) -> None:
        writer = writer_ref()
        if writer is not None and writer._error is None:
            writer._error = error

    return record


def _run_sender(
    writer_ref: weakref.ref[TrajectoryWriter], wake: threading.Condition, lock: threading.Lock
) -> None:
    while True:
        writer = writer_ref()
        if writer is None or writer._closed or writer._error is not None:
            return
        with wake:
            if not (writer._pending and writer._pending[0].ready()):
                del writer
                wake.wait(_SENDER_IDLE_SECONDS)
                continue
        del writer
        if not lock.acquire(timeout=_SENDER_SLICE_SECONDS):
            continue  # a flush is sending
        try:
            if not _send_one_batch(writer_ref):
                return
        finally:
            lock.release()


def _send_one_batch(writer_ref: weakref.ref[TrajectoryWriter]) -> bool:
    """Inserts the ready batch at the front of the writer's queue, waiting for
    the rate limiter at most one slice; False once the sender should stop.

    Called with the send lock held. Nothing that reaches the writer is held
    while the core call waits (the items' chunk handles keep the data alive).
    """
    writer = writer_ref()
    if writer is None or writer._closed:
        return False
    ready = writer._ready_batch(0)
    if ready is None:
        return True
    transport = writer._link
    table = ready[0]
    requests = [item.request for item in ready[1]]
    handles = [chunk.handle for item in ready[1] for chunk in item.chunks]
    del writer, ready
    try:
        inserted = transport.insert(table, requests, _SENDER_SLICE_SECONDS)
    except DeadlineExceededError as error:
        inserted = getattr(error, "num_inserted", 0)
    except BaseException as error:  # noqa: BLE001 - kept in writer._error, raised to the user
        writer = writer_ref()
        if writer is not None:
            if len(requests) > 1 and isinstance(error, Exception):
                writer._pop(getattr(error, "num_inserted", 0))
                writer._batch_limit = 1  # find the refused item
                return True
            writer._error = error
        return False
    del handles  # the table holds the chunks of inserted items
    writer = writer_ref()
    if writer is None:
        return False
    writer._pop(inserted)
    return True


# Writers whose sender thread runs. They are closed at interpreter exit, before
# daemon threads are stopped: a sender stopped inside a core call that waits
# for the rate limiter would abort the process.
_WRITERS_WITH_SENDERS: weakref.WeakSet[TrajectoryWriter] = weakref.WeakSet()


@atexit.register
def _close_writers_at_exit() -> None:
    for writer in list(_WRITERS_WITH_SENDERS):
        with contextlib.suppress(Exception):
            writer.close()


def _all_complete(chunks: list[_Chunk]) -> bool:
    # A plain loop: all() over a generator costs more on this hot path.
    for chunk in chunks:  # noqa: SIM110
        if not chunk.length:
            return False
    return True


def _run_slices(refs: list[CellRef], index: int, chunks: list[_Chunk]) -> tuple[list[Any], bool]:
    """Core slices of consecutive values of one column: one slice per chunk.

    Such references are alive if the oldest is, and a chunk boundary is where
    a reference's offset is 0 again (each chunk starts at row 0).
    """
    first = refs[0]
    column = first._column
    if not first._chunk.pins and (
        first._generation != column.generation or first._seq < column.count - column.keep_alive
    ):
        # The oldest may be expired while a newer one is pinned: decide per reference.
        return _slices(TrajectoryColumn(refs), index, chunks)
    # Walk chunk by chunk: a complete chunk holds `length` rows, and the
    # newest (open) chunk holds all references that remain.
    total = len(refs)
    slices = []
    position = 0
    ref = first
    while True:
        chunk = ref._chunk
        start = ref._offset
        take = total - position
        if chunk.length and chunk.length - start < take:
            take = chunk.length - start
        slices.append((chunk.key, start, take))
        if chunk not in chunks:
            chunks.append(chunk)
        position += take
        if position >= total:
            break
        ref = refs[position]
    return slices, False


def _slices(column: TrajectoryColumn, index: int, chunks: list[_Chunk]) -> tuple[list[Any], bool]:
    """Core slices of a column: runs of strictly consecutive rows of one chunk."""
    slices: list[list[int]] = []
    last_chunk = None
    last_offset = -2
    first = None
    for ref in column._refs:
        if ref.expired:
            raise ValueError(f"Error in column {index}: Column contains expired CellRef.")
        chunk = ref._chunk
        if first is None:
            first = ref._column
        elif ref._column is not first and (
            ref._column.dtype != first.dtype or ref._column.shape != first.shape
        ):
            other = ref._column
            raise ValueError(
                f"Error in column {index}: references hold different dtypes or shapes "
                f"({first.dtype}{list(first.shape)} and {other.dtype}{list(other.shape)})"
            )
        if chunk is last_chunk and ref._offset == last_offset + 1:
            slices[-1][2] += 1
        else:
            slices.append([chunk.key, ref._offset, 1])
            if chunk not in chunks:
                chunks.append(chunk)
        last_chunk = chunk
        last_offset = ref._offset
    return [tuple(s) for s in slices], column._squeeze


def _empty_column_error(leaves: list[Any], index: int) -> Exception:
    """The error for an empty column ``index`` of a trajectory (Reverb: an
    empty trajectory if every column is empty)."""
    for position, leaf in enumerate(leaves):
        if type(leaf) is not TrajectoryColumn:
            return TypeError(
                f"trajectory leaves must be TrajectoryColumn (from writer.history), got "
                f"{type(leaf).__name__} at position {position}"
            )
    if any(len(leaf) for leaf in leaves):
        return ValueError(f"Error in column {index}: Column must not be empty.")
    return ValueError("trajectory must not be empty.")


def _merge_structures(old: Any, new: Any) -> Any:
    """The union of two structures (new keys and longer sequences are added)."""
    if old is None:
        return new
    if isinstance(old, dict) and isinstance(new, dict):
        merged = dict(old)
        for key, value in new.items():
            merged[key] = _merge_structures(old.get(key), value)
        return merged
    if isinstance(old, (list, tuple)) and isinstance(new, (list, tuple)) and type(old) is type(new):
        items = [
            _merge_structures(old[i] if i < len(old) else None, new[i] if i < len(new) else None)
            for i in range(max(len(old), len(new)))
        ]
        if hasattr(type(old), "_fields"):
            return type(old)(*items)
        return type(old)(items)
    return old if new is None else new


def _check_positive(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} ({value!r}) must be a positive integer")
    return int(value)


def _check_chunk_length(value: Any, keep_alive: int) -> int:
    if value is None:
        return min(keep_alive, DEFAULT_MAX_CHUNK_LENGTH)
    length = _check_positive(value, "max_chunk_length")
    if length > keep_alive:
        raise ValueError(
            f"num_keep_alive_refs ({keep_alive}) must be >= max_chunk_length ({length})."
        )
    return length


def _shape_text(shape: Any) -> str:
    if shape is None:
        return "<unknown>"
    return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"
