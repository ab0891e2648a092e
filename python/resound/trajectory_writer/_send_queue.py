"""The send queue of a TrajectoryWriter: items that wait in the writer for
their chunks or the rate limiter, how they are sent, and the background
thread that keeps rate-limited items flowing without user calls.

``_SendQueue`` holds the writer's methods for it; they use the attributes
``TrajectoryWriter.__init__`` sets (``_pending``, ``_send_lock``, ``_wake``,
``_sender``, ``_link``, ``_error``, ``_batch_limit``, ``_closed``).
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import threading
import time
import weakref
from typing import TYPE_CHECKING, Any, cast

from resound._checks import check_timeout
from resound._wire.timeouts import finite_timeout
from resound.errors import DeadlineExceededError
from resound.trajectory_writer._slices import _all_complete
from resound.wait_warnings import WRITER_LOGGER, BlockedWait, timeout_message

if TYPE_CHECKING:
    from resound.trajectory_writer._columns import _Chunk
    from resound.trajectory_writer._writer import TrajectoryWriter

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


class _PendingItem:
    __slots__ = ("chunks", "request", "table")

    def __init__(self, table: str, request: tuple[int, float, list[Any]], chunks: list[_Chunk]):
        self.table = table
        self.request = request
        self.chunks = chunks

    def ready(self) -> bool:
        return _all_complete(self.chunks)


class _SendQueue:
    """The send-queue methods of TrajectoryWriter (see the module doc)."""

    _pending: collections.deque[_PendingItem]
    _send_lock: threading.Lock
    _wake: threading.Condition
    _sender: threading.Thread | None
    _link: Any
    _error: BaseException | None
    _batch_limit: int
    _closed: bool
    # Why the rate limiter refused the writer's last insert that it refused
    # (the text of its DeadlineExceededError; "" before any).
    _held_up_by: str

    def _wait_for_link(self, keep: int, timeout_ms: int | None, call: str) -> None:
        """Waits until the server confirmed all but ``keep`` (of the items
        beyond those still waiting here) of the items sent."""
        if not self._link.in_flight:
            return
        keep = max(0, keep - len(self._pending))
        try:
            self._link.wait(keep, _timeout_seconds(timeout_ms), call)
        except DeadlineExceededError:
            raise
        except BaseException as error:
            self._error = error
            raise

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

    def _send(
        self, deadline: float | None, keep: int = 0, blocked: BlockedWait | None = None
    ) -> bool:
        """Inserts ready items from the front until ``keep`` wait or the front
        item is not ready (True), or until ``deadline`` (time.monotonic();
        None: none; 0.0: do not wait at all) passes (False). ``blocked``: the
        user's call that waits (it warns when a wait is long)."""
        if deadline == 0.0:
            acquired = self._send_lock.acquire(blocking=False)
        elif deadline is None:
            acquired = self._send_lock.acquire()
        else:
            acquired = self._send_lock.acquire(timeout=max(0.0, deadline - time.monotonic()))
        if not acquired:
            return False
        try:
            return self._send_locked(deadline, keep, blocked)
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
        batch: list[_PendingItem] = []
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

    def _send_locked(self, deadline: float | None, keep: int, blocked: BlockedWait | None) -> bool:
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
                self._held_up_by = str(error)
                if deadline is None or (deadline != 0.0 and time.monotonic() < deadline):
                    if blocked is not None:
                        blocked.warn_if_due(self._held_up_by)
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
        timeout = _timeout_seconds(timeout_ms)
        if len(self._pending) <= keep:
            return  # nothing to send (a writer flushing after every item, nearly always)
        deadline = None if timeout is None else time.monotonic() + timeout
        # Complete the chunks of every item that must leave the writer.
        pending = list(self._pending)
        for item in pending[: max(0, len(pending) - keep)]:
            for chunk in item.chunks:
                if not chunk.length:
                    chunk.column.finalize()
        blocked = BlockedWait(WRITER_LOGGER, "writer")
        while len(self._pending) > keep:
            if deadline is not None and deadline <= time.monotonic():
                break
            if self._send(deadline, keep, blocked):
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
                timeout_message(call, timeout or 0.0, self._held_up_by or None)
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
        _WRITERS_WITH_SENDERS.add(cast("TrajectoryWriter", self))  # this mixin's one class
        self._sender.start()

    def _wake_sender(self) -> None:
        with self._wake:
            self._wake.notify()


def _timeout_seconds(timeout_ms: Any) -> float | None:
    """A writer call's ``timeout_ms`` in seconds; None (wait forever) for None
    and for timeouts past a year, ``inf`` included (as every transport reads
    them; the lock waits they bound overflow at about 9e9 s)."""
    if timeout_ms is None:  # (a flush per item asks twice: without the checks)
        return None
    timeout = check_timeout(timeout_ms, "timeout_ms", "milliseconds")
    return finite_timeout(None if timeout is None else timeout / 1000)


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
    held_up_by = None
    try:
        inserted = transport.insert(table, requests, _SENDER_SLICE_SECONDS)
    except DeadlineExceededError as error:
        inserted = getattr(error, "num_inserted", 0)
        held_up_by = str(error)
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
    if held_up_by is not None:
        writer._held_up_by = held_up_by
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
