"""TrajectoryWriter itself: appends steps into its columns and creates items
(see the package doc)."""

from __future__ import annotations

import collections
import contextlib
import functools
import math
import os
import random
import threading
import weakref
from typing import Any

from resound import _codec, nest
from resound.errors import DeadlineExceededError, ReverbError
from resound.trajectory_writer._columns import _Chunk, _Column
from resound.trajectory_writer._references import (
    CellRef,
    TrajectoryColumn,
    _ColumnHistory,
    _NoColumn,
)
from resound.trajectory_writer._send_queue import (
    _MAX_BATCH,
    _error_setter,
    _PendingItem,
    _SendQueue,
)
from resound.trajectory_writer._slices import _empty_column_error, _run_slices, _slices
from resound.trajectory_writer._validation import (
    _check_chunk_length,
    _check_positive,
    _ItemChecks,
)
from resound.trajectory_writer._values import _as_array

# object.__new__: the hot paths build slotted objects field by field, which
# costs about half of a call to their __init__.
_new = object.__new__


_INF = math.inf


def _random_source() -> random.Random:
    # Seeded from the OS so that forked processes draw different keys.
    return random.Random(os.urandom(16))


class TrajectoryWriter(_SendQueue, _ItemChecks):
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

    def _check_usable(self) -> None:
        if self._closed:
            raise RuntimeError("TrajectoryWriter::Close has been called.")
        if self._error is not None:
            raise self._error


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
