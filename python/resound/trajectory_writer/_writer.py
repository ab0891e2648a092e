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
from resound._operation_names import mark, names_operation, rename, rename_for
from resound.errors import DeadlineExceededError, ReverbError
from resound.trajectory_writer._columns import _Chunk, _Column
from resound.trajectory_writer._references import (
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
from resound.trajectory_writer._steps import _StepAppender
from resound.trajectory_writer._validation import (
    _check_chunk_length,
    _check_positive,
    _ItemChecks,
)

# object.__new__: the hot paths build slotted objects field by field, which
# costs about half of a call to their __init__.
_new = object.__new__


_INF = math.inf


def _random_source() -> random.Random:
    # Seeded from the OS so that forked processes draw different keys.
    return random.Random(os.urandom(16))


# How long a collected writer waits for its send lock before it gives up on it.
_FINALIZER_LOCK_SECONDS = 1.0


class TrajectoryWriter(_StepAppender, _SendQueue, _ItemChecks):
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
        # Arguments first: a refused writer opens no insert stream.
        self._default_keep_alive = _check_positive(num_keep_alive_refs, "num_keep_alive_refs")
        self._default_chunk_length = _check_chunk_length(max_chunk_length, self._default_keep_alive)
        self._validate_items = bool(validate_items)
        self._compression = _codec.check_compression(compression)
        self._delta_encoded = bool(delta_encoded)
        self._transport = transport
        # Where items go: the transport itself in-process, an insert stream
        # of this writer's own over gRPC (its failures become this writer's).
        self._link = transport.open_insert_stream(_error_setter(weakref.ref(self)))
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
        self._held_up_by = ""

    # --- properties

    def _error_addresses(self) -> list[str]:
        """The servers this writer writes to, for messages (see _operation_names)."""
        return list(self._transport.addresses)

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
        configured = self._columns.get(path)
        if configured is not None:
            configured.reconfigure(keep_alive, chunk_length)

    def create_item(self, table: str, priority: float, trajectory: Any) -> None:
        """Queues an item of ``trajectory`` (a structure of TrajectoryColumn) for
        ``table``. Never blocks; see :meth:`flush`."""
        # What names_operation does, without its generic (*args, **kwargs)
        # frame, which cost ~3 % of a writer's items per second.
        try:
            self._create_item(table, priority, trajectory)
        except Exception as error:
            rename_for(error, "TrajectoryWriter.create_item", self)
            raise

    def _create_item(self, table: str, priority: float, trajectory: Any) -> None:
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
                if ref._generation != column.generation or (
                    not chunk.pins and ref._seq < column.count - column.keep_alive
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
                if len(columns) == 1 and len(columns[0][0]) == 1:
                    # One column of one slice: the call without the nested
                    # lists (the most common item of all).
                    (chunk_key, offset, length), squeeze = columns[0][0][0], columns[0][1]
                    self._link.insert_one(
                        table, key, priority, chunk_key, offset, length, squeeze, 0.0
                    )
                else:
                    self._link.insert(table, [(key, priority, columns)], 0.0)
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
        # What names_operation does, without its generic frame (as
        # create_item): Acme's adders flush after every item.
        try:
            self._flush(block_until_num_items, timeout_ms)
        except Exception as error:
            rename_for(error, "TrajectoryWriter.flush", self)
            raise

    def _flush(self, block_until_num_items: int, timeout_ms: int | None) -> None:
        if type(block_until_num_items) is not int or block_until_num_items < 0:
            if isinstance(block_until_num_items, bool) or not isinstance(
                block_until_num_items, int
            ):
                raise ValueError(
                    f"block_until_num_items must be an int >= 0, got {block_until_num_items!r}"
                )
            if block_until_num_items < 0:
                raise ValueError(f"block_until_num_items must be >= 0, got {block_until_num_items}")
        if self._closed or self._error is not None:
            self._check_usable()
        self._wait_until(block_until_num_items, timeout_ms, "Flush")
        self._wait_for_link(block_until_num_items, timeout_ms, "Flush")

    @names_operation("TrajectoryWriter.end_episode")
    def end_episode(self, clear_buffers: bool = True, timeout_ms: int | None = None) -> None:
        """Flushes every item, then starts a new episode.

        With ``clear_buffers`` every reference expires and the history is
        cleared, so an item cannot span the boundary (``ValueError``: expired
        references); without, references stay usable across it. Either way
        ``episode_steps`` restarts at 0 and a new episode id is drawn.

        If the items are not all in their tables within ``timeout_ms``, the
        new episode starts all the same (buffers cleared or kept as asked),
        the items keep flowing in the background, and DeadlineExceededError
        is raised (as Reverb documents; its writer raises before resetting).

        Example:
            >>> import resound
            >>> server = resound.Server([resound.Table.queue('q', 10)], listen=False)
            >>> writer = server.in_process_client().trajectory_writer(2)
            >>> old = writer.append({'obs': 1.0})['obs']
            >>> writer.end_episode()
            >>> old.expired, len(writer.history['obs']), writer.episode_steps
            (True, 0, 0)
        """
        self._check_usable()
        try:
            self._wait_until(0, timeout_ms, "End episode")
            self._wait_for_link(0, timeout_ms, "End episode")
        except DeadlineExceededError:
            self._start_episode(clear_buffers)
            raise
        self._start_episode(clear_buffers)

    def _start_episode(self, clear_buffers: bool) -> None:
        """Ends the open chunks (clear_buffers: drops them, expiring every
        reference) and starts a new episode. Items waiting in the writer keep
        their chunks (they were completed and are held for them)."""
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

    @names_operation("TrajectoryWriter.close")
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
        # From a finalizer, never wait for good on the send lock (a TSan run
        # once hung here with no live holder): the pins only matter to a
        # writer that lives on, and this one is being collected.
        if self._send_lock.acquire(timeout=-1 if wait_for_sender else _FINALIZER_LOCK_SECONDS):
            try:
                for item in self._pending:
                    for chunk in item.chunks:
                        chunk.pins -= 1
                self._pending.clear()
            finally:
                self._send_lock.release()
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

    def _check_usable(self, operation: str | None = None) -> None:
        """Raises if the writer is closed or failed; the failure names
        ``operation`` (a public method not wrapped by names_operation)."""
        if self._closed:
            raise RuntimeError("TrajectoryWriter::Close has been called.")
        if self._error is not None:
            if operation is not None:
                rename(self._error, operation, self._error_addresses())
            raise self._error


# create_item and flush rename their own errors; warnings logged while they run name them.
mark(TrajectoryWriter.create_item.__code__, "TrajectoryWriter.create_item")
mark(TrajectoryWriter.flush.__code__, "TrajectoryWriter.flush")
