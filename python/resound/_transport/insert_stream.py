"""A writer's insert stream to a remote server (see resound._transport.remote).

Items and the chunks they use are queued by the writer and sent in batches
on one long-lived Insert call; the server confirms them once they are in
their tables. A stream that loses its connection reconnects with back-off
and sends again what was not confirmed (items are keyed, so nothing is
stored twice), on the same server or, with failover, on another.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import grpc
import numpy as np

from resound import _core
from resound._transport.protocol import TableMeta
from resound._transport.waiting import WAIT_SLICE_SECONDS
from resound._wire.status import TRANSIENT, error_from_rpc, means_unreachable
from resound.errors import CancelledError, DeadlineExceededError
from resound.wait_warnings import WRITER_LOGGER, BlockedWait, timeout_message

if TYPE_CHECKING:
    from resound._transport.remote import RemoteTransport

__all__ = ["InsertStream"]

# One insert message carries at most this many items or payload bytes.
_MAX_ITEMS_PER_MESSAGE = 1024
_MAX_BYTES_PER_MESSAGE = 32 << 20
# A stream's writer waits while this many items, or their chunks' bytes, are
# queued or unconfirmed.
_MAX_IN_FLIGHT_ITEMS = 16 * _MAX_ITEMS_PER_MESSAGE
_MAX_IN_FLIGHT_BYTES = 4 * _MAX_BYTES_PER_MESSAGE
# How long a same-host stream's thread leaves newly queued items to a writer
# that may wait for them (a flush sends them itself, see _exchange_locked)
# before it sends them, in seconds.
_LINGER_SECONDS = 0.001
# A writer that sent its items itself this recently is expected to again
# (one that flushes after every item): new items do not wake the stream's
# thread, which looks for items left to it this often instead.
_WRITER_SENDS_SECONDS = 0.01
# How long a writer's turn on a same-host stream (_writer_turn_locked) waits
# for an answer with the stream's lock held, in seconds: an answer not there
# by then is waited for with the lock released (_exchange_locked).
_TURN_ANSWER_SECONDS = 0.001
# A same-host stream's writer sends its queued items itself (a turn, see
# _writer_turn_locked) once they make a message: this many items, chunks of
# this many bytes, or items that waited this long (seconds). Sending from the
# stream's thread instead cost the writer's thread about a quarter of its
# time in hand-offs of the GIL and of the stream's lock between the two.
_DUE_ITEMS = 64
_DUE_BYTES = 1 << 20
_DUE_SECONDS = _LINGER_SECONDS
# What the encoder's add and add_one return when a message is due.
_MESSAGE_DUE = 2
# At most this many due adds go without a turn after one that found the
# last message unanswered (see InsertStream._due_turn_locked).
_MAX_DUE_SKIPS = 15
# Reconnection back-off of an insert stream, in seconds.
_BACKOFF_START, _BACKOFF_MAX = 0.05, 2.0


class InsertStream:
    """One insert stream to the server (a writer's InsertLink, see
    resound._transport.protocol): items (and the chunks they use) are
    queued by ``submit`` and sent in batches by gRPC's request thread;
    ``wait`` blocks until the server confirmed all but ``keep`` of them.

    The per-item work (queueing, encoding messages, holding chunks until
    their items are confirmed, resending after a reconnect) runs in the
    core's InsertRequestEncoder. At most _MAX_IN_FLIGHT_ITEMS items and about
    _MAX_IN_FLIGHT_BYTES of their chunks are on their way at a time:
    ``submit`` blocks beyond that (back-pressure on a fast writer).

    With ``failover``, a stream whose server went away (unreachable, or
    stopped) moves to the server of the transport ``failover`` returns and
    sends everything unconfirmed there.
    """

    def __init__(
        self,
        transport: RemoteTransport,
        on_error: Callable[[BaseException], None] | None,
        failover: Callable[[RemoteTransport], RemoteTransport | None] | None = None,
    ) -> None:
        self._transport = transport
        self._on_error = on_error
        self._failover = failover
        # The writer's hot path takes the plain lock (a Condition's own
        # __enter__ is Python code); waits go through the Condition on it.
        self._mutex = threading.Lock()
        self._lock = threading.Condition(self._mutex)
        # The stream's own thread waits on a Condition of its own: woken only
        # when it has something to do. Waking it for every confirmation a
        # writer reads itself cost that writer a GIL hand-off to the stream's
        # thread and back per call (~2 futex calls; flush after every item
        # went from 40 to ~26 us per item over the same-host transport).
        self._stream_wake = threading.Condition(self._mutex)
        self._encoder = _core.InsertRequestEncoder(
            transport._store, _MAX_IN_FLIGHT_ITEMS, _MAX_IN_FLIGHT_BYTES
        )
        # Whether the last item added left room for another (the encoder's
        # has_room; its add's answer, 0 without room) on a stream still open:
        # the writer's hot path then skips _wait_for_room_locked. (Cleared by
        # whatever ends the stream.)
        self._room: int = True
        # The stream's thread waits for items and wants a wake for new ones
        # (cleared by the first writer to wake it, so that a burst of items
        # costs one notify, not one each).
        self._idle = False
        # A same-host stream carries one message at a time, which its own
        # thread or a waiting writer sends (see _exchange_locked): whether
        # one is on its way, and what ended the stream if the writer's failed.
        self._exchanging = False
        self._exchange_error: BaseException | None = None
        self._rest_pending = False  # the stream's thread reads the rest of it
        # The writer thread whose wait reads the answer (one at a time:
        # others wait for it as for the stream's thread).
        self._exchange_owner: int | None = None
        self._writer_sent_at = -_WRITER_SENDS_SECONDS  # time.monotonic()
        # Writers waiting on _lock (for room, or in wait): a writer's turn
        # that confirmed items wakes them only if there are any.
        self._writers_waiting = 0
        # Due adds left without a turn, and how many the next missed answer
        # leaves (see _due_turn_locked).
        self._due_skips = 0
        self._due_backoff = 0
        self._error: BaseException | None = None
        self._closed = False
        self._generation = 0
        # The tables written to: what a long wait asks the server about.
        self._tables: set[str] = set()
        # Calls of RemoteTransport.insert using the stream (under that
        # transport's lock).
        self.callers = 0
        self._call: Any = None  # the Insert call now open (close cancels it)
        self._receiver = threading.Thread(
            target=self._run, name="resound-insert-stream", daemon=True
        )
        self._receiver.start()

    @property
    def transport(self) -> RemoteTransport:
        """The transport of the server the stream sends to (another one's
        after a failover)."""
        return self._transport

    @property
    def in_flight(self) -> int:
        # Under the lock: the stream's thread may be writing a message with
        # the encoder meanwhile (without the GIL, see stage_insert).
        with self._mutex:
            return self._encoder.in_flight

    @property
    def error(self) -> BaseException | None:
        return self._error

    def table_info_for_writer(self, name: str) -> TableMeta:
        try:
            meta = self._transport.table_info_for_writer(name)
        except ConnectionError as error:
            # The stream's server went away before its writer's first item:
            # with failover, the writer starts on another server.
            if not self._move_to_another_server():
                raise (self._error or error) from None
            meta = self._transport.table_info_for_writer(name)
        return meta

    def insert(self, table: str, requests: list[Any], timeout: float | None) -> int:
        del timeout  # accepted at once; the server applies the rate limiter
        self.submit(table, requests)
        return len(requests)

    def insert_one(
        self,
        table: str,
        key: int,
        priority: float,
        chunk_key: int,
        offset: int,
        length: int,
        squeeze: bool,
        timeout: float | None,
    ) -> int:
        """``insert`` of one item of one column of one slice (see
        protocol.InsertLink)."""
        del timeout  # accepted at once; the server applies the rate limiter
        with self._mutex:
            if not self._room:
                self._wait_for_room_locked()
            self._tables.add(table)
            self._room = room = self._encoder.add_one(
                table, key, priority, chunk_key, offset, length, squeeze
            )
            if room == _MESSAGE_DUE:
                self._due_turn_locked()
            if self._idle and not self._writer_sends():
                self._idle = False
                self._stream_wake.notify()
        return 1

    def submit(self, table: str, requests: list[Any]) -> None:
        with self._mutex:
            if not self._room:
                self._wait_for_room_locked()
            self._tables.add(table)
            add = self._encoder.add
            room = self._room
            for key, priority, trajectory in requests:
                self._room = room = add(table, key, priority, trajectory)
            if room == _MESSAGE_DUE:
                self._due_turn_locked()
            if self._idle and not self._writer_sends():
                self._idle = False
                self._stream_wake.notify()

    def _due_turn_locked(self) -> None:
        """A writer's turn after an add that made a message due: sends the
        queued items if the answer to the message on its way is there (or
        none is on its way). A turn that found that answer missing (the
        server still stores the last message) is not tried again for the
        next few due adds, more the more often it was missing: looking again
        after every item cost a writer more than its item when several
        writers share the cores with the server."""
        if self._due_skips:
            self._due_skips -= 1
            return
        sent_at = self._writer_sent_at
        self._writer_turn_locked(0, 0.0)
        if self._writer_sent_at != sent_at:
            self._due_backoff = 0
        else:
            self._due_backoff = min(2 * self._due_backoff + 1, _MAX_DUE_SKIPS)
            self._due_skips = self._due_backoff

    def _writer_sends(self) -> bool:
        """Whether a writer sent its items itself just now (see
        _WRITER_SENDS_SECONDS)."""
        return time.monotonic() - self._writer_sent_at < _WRITER_SENDS_SECONDS

    def _wait_for_room_locked(self) -> None:
        """Returns at once while the stream has room; raises the stream's
        error, or RuntimeError once it is closed."""
        encoder = self._encoder
        blocked: BlockedWait | None = None
        while not encoder.has_room and self._error is None and not self._closed:
            if blocked is None:
                blocked = BlockedWait(WRITER_LOGGER, "writer")
            elif blocked.until_due() == 0:
                self._warn_unlocked(blocked)
                continue
            # (On a same-host stream the writer reads the answers itself, as
            # in wait: the stream's thread leaves them to a writer that sends.)
            if not self._exchange_locked(WAIT_SLICE_SECONDS):
                self._wait_locked(WAIT_SLICE_SECONDS)
        if self._error is not None:
            raise self._error
        if self._closed:
            raise RuntimeError("the insert stream is closed")
        self._room = True

    def wait(self, keep: int, timeout: float | None, call: str) -> None:
        """Blocks until at most ``keep`` items are unconfirmed;
        DeadlineExceededError after ``timeout`` seconds (None: no limit)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._mutex:  # (the Condition's lock, without its Python __enter__)
            if self._writer_turn_locked(keep, timeout) and self._encoder.in_flight <= keep:
                if self._error is not None:
                    raise self._error
                return
        blocked: BlockedWait | None = None  # made once the call has to wait
        timed_out = False
        with self._mutex:
            try:
                while self._encoder.in_flight > keep and self._error is None:
                    if blocked is None:
                        blocked = BlockedWait(
                            WRITER_LOGGER, "insert" if call == "Insert" else "writer"
                        )
                    wait = WAIT_SLICE_SECONDS
                    if deadline is not None:
                        left = deadline - time.monotonic()
                        if left <= 0:
                            timed_out = True
                            break
                        wait = min(wait, left)
                    if blocked.until_due() == 0:
                        self._warn_unlocked(blocked)
                        continue
                    if not self._exchange_locked(wait):
                        self._wait_locked(wait)
                if not timed_out:
                    self._send_ahead_locked()
            finally:
                # The rest of an answer a writer stopped reading (its wait ran
                # out) goes to the stream's thread (see _requests). (A message
                # sent ahead is left to the writer's next wait: the thread
                # looks at it when its own wait ends.)
                if timed_out and self._exchanging and self._exchange_owner is None:
                    self._stream_wake.notify()
            if self._error is not None:
                raise self._error
        if timed_out:
            # Asked of the server outside the lock (its confirmations need it).
            reason = self.why_waiting()
            if call == "Insert" and reason.startswith("table '"):
                # Client.insert says only why, as an embedded table's timeout does.
                raise DeadlineExceededError(reason)
            raise DeadlineExceededError(timeout_message(call, timeout or 0.0, reason))

    def _wait_locked(self, seconds: float) -> None:
        """A writer's wait on _lock (counted, see _writers_waiting)."""
        self._writers_waiting += 1
        try:
            self._lock.wait(seconds)
        finally:
            self._writers_waiting -= 1

    def _writer_turn_locked(self, keep: int, timeout: float | None) -> bool:
        """On a same-host stream, a waiting writer's exchange in one call to
        the core (StreamCall.exchange): the answer to the message on its way
        read (if it comes within _TURN_ANSWER_SECONDS), the queued items sent,
        the rest sent ahead (see _send_ahead_locked), all with the lock held.
        A writer that flushes after every item then costs one call per flush
        where _exchange_locked and _send_ahead_locked cost a dozen. False if
        it cannot take a turn now (see _exchange_locked), or if its exchange
        failed (the error is recorded: the stream's thread raises it)."""
        call = self._exchangeable_call_locked()
        if (
            call is None
            or self._exchange_owner is not None
            or self._rest_pending
            or call.answer_in_parts
        ):
            return False
        generation = self._generation
        wait = _TURN_ANSWER_SECONDS if timeout is None else min(timeout, _TURN_ANSWER_SECONDS)
        try:
            confirmed, sent = call.exchange(
                self._encoder, keep, _MAX_ITEMS_PER_MESSAGE, _MAX_BYTES_PER_MESSAGE, wait
            )
        except BaseException as error:  # noqa: BLE001 - raised by the stream's thread
            self._exchange_failed_locked(error, generation)
            self._notify_everyone_locked()
            return False
        self._exchanging = call.answer_pending
        if sent:
            self._writer_sent_at = time.monotonic()
        if confirmed:
            self._transport._outage = None
            if self._writers_waiting:
                self._lock.notify_all()
        return True

    def _exchange_locked(self, seconds: float) -> bool:
        """On a same-host stream, reads the answer to the message on its way
        (sending the queued items first if none is) from this, the waiting
        writer's, thread, for up to ``seconds``: no hand-off to the stream's
        thread and back, which costs more than the round trip. False if the
        writer cannot exchange now (a gRPC stream, nothing to send, or
        another thread reads the answer).

        Called with the lock held; released while waiting. A failed exchange
        ends the stream: its thread raises the error (and reconnects, fails
        over, or fails the stream, as after a failure of its own)."""
        call = self._exchangeable_call_locked()
        if call is None or self._exchange_owner is not None or self._rest_pending:
            return False
        if not self._exchanging:
            if not self._encoder.queued:
                return False
            if not self._start_exchange_locked(call):
                return True  # failed: the error is recorded
        me = threading.get_ident()
        generation = self._generation
        self._exchange_owner = me
        try:
            self._mutex.release()
            try:
                keys = call.finish(seconds)
            finally:
                self._mutex.acquire()
            if self._generation != generation:
                return True  # the stream ended meanwhile (closed): its items go again
            self._exchange_owner = None
            if keys is not None:
                self._transport._outage = None
                self._encoder.confirm(keys)
                # (An answer may come in parts, as the rate limiter lets
                # items in: the writer goes on waiting for the rest.)
                if not call.answer_pending:
                    self._exchanging = False
        except BaseException as error:  # noqa: BLE001 - raised by the stream's thread
            self._exchange_failed_locked(error, generation)
        self._lock.notify_all()
        # The stream's thread: to raise the error, or to send what is left
        # (while the writer sends its items itself, it looks every
        # _WRITER_SENDS_SECONDS anyway).
        if self._exchange_error is not None or (
            self._encoder.queued and not self._exchanging and not self._writer_sends()
        ):
            self._stream_wake.notify()
        return True

    def _send_ahead_locked(self) -> None:
        """On a same-host stream with no message on its way, sends the queued
        items now, without waiting for their answer: the server stores them
        while the writer makes its next items, and the writer's next wait
        reads the answer (or the stream's thread, if the writer does not
        wait again within _WRITER_SENDS_SECONDS). A writer flushing after
        every item with block_until_num_items=2 then never waits for the
        server's work."""
        call = self._exchangeable_call_locked()
        if (
            call is None
            or self._exchanging
            or self._exchange_owner is not None
            or self._rest_pending
            or not self._encoder.queued
        ):
            return
        self._start_exchange_locked(call)

    def _exchangeable_call_locked(self) -> Any:
        """The open same-host call a writer may exchange on, or None."""
        call = self._call
        if (
            getattr(call, "stage", None) is None
            or self._error is not None
            or self._exchange_error is not None
            or self._closed
            or call.done()
        ):
            return None
        return call

    def _start_exchange_locked(self, call: Any) -> bool:
        """Sends the queued items as the next message from this thread
        (False if that failed: the error is recorded)."""
        generation = self._generation
        try:
            staged = call.stage(self._encoder, _MAX_ITEMS_PER_MESSAGE, _MAX_BYTES_PER_MESSAGE)
            self._exchanging = True
            self._writer_sent_at = time.monotonic()
            call.start(staged)  # one frame on the socket: does not block
        except BaseException as error:  # noqa: BLE001 - raised by the stream's thread
            self._exchange_failed_locked(error, generation)
            self._lock.notify_all()
            self._stream_wake.notify()
            return False
        return True

    def _exchange_failed_locked(self, error: BaseException, generation: int) -> None:
        if self._generation == generation:
            # (Without its traceback, which holds this frame and its
            # caller's, the writer among them.)
            self._exchange_error = error.with_traceback(None)
            self._exchanging = False
            self._exchange_owner = None

    def why_waiting(self) -> str:
        """Why the items sent are not confirmed: the server's reasons for
        the stream's tables (its rate limiters), or how many wait on it."""
        reasons = self._transport.why_blocked(sorted(self._tables), insert=True)
        if reasons:
            return "; ".join(reasons)
        return (
            f"{self.in_flight} items sent to the server at {self._transport.address} are not "
            "confirmed yet (no table's rate limiter there refuses them now)"
        )

    def _warn_unlocked(self, blocked: BlockedWait) -> None:
        """Logs ``blocked``'s warning, the lock (held) released meanwhile:
        the reason is a call to the server."""
        self._mutex.release()
        try:
            blocked.warn_if_due(self.why_waiting)
        finally:
            self._mutex.acquire()

    def close(self, wait: bool = True) -> None:
        """Stops the stream; unconfirmed items are dropped. Idempotent.
        ``wait=False`` waits for nothing, neither the stream's thread nor its
        lock: it runs in finalizers, and the garbage collector may run one on
        a thread that holds the lock (the stream's own, collecting a writer
        dropped meanwhile), which would wait for itself for good. The
        stream's threads wait in slices and see ``_closed`` at the next."""
        self._closed = True
        self._room = False
        if not wait:
            if self._mutex.acquire(blocking=False):
                try:
                    self._notify_everyone_locked()
                finally:
                    self._mutex.release()
            return
        with self._lock:
            self._notify_everyone_locked()
            call = self._call
        if call is not None:
            # The server may hold the call's next answer back for good (a
            # full table's rate limiter): ending the requests would not end
            # the call, and the receiver would wait for that answer forever.
            # Not from a finalizer (wait=False), which may run inside grpc
            # on a thread holding the lock cancel() takes, or at shutdown.
            call.cancel()
        if self._receiver is not threading.current_thread():
            self._receiver.join()

    # --- the stream's threads

    def _run(self) -> None:
        backoff = _BACKOFF_START
        while True:
            with self._lock:
                if self._closed or self._error is not None:
                    return
                # A new stream: the server keeps nothing of an old one, so
                # every unconfirmed item goes again, before the queue.
                self._encoder.requeue()
                self._generation += 1
                self._exchanging = False
                self._exchange_error = None
                self._rest_pending = False
                self._exchange_owner = None
                generation = self._generation
            try:
                responses = self._transport._insert_call(self._requests(generation))
                with self._lock:
                    self._call = responses
                    if hasattr(responses, "stage"):  # a same-host stream: writers send too
                        self._encoder.set_message_due(_DUE_ITEMS, _DUE_BYTES, _DUE_SECONDS)
                    else:
                        self._encoder.set_message_due(0, 0, 0.0)
                    closed = self._closed
                if closed:
                    responses.cancel()
                for response in responses:
                    backoff = _BACKOFF_START
                    self._transport._outage = None
                    self._confirm(response)
                with self._lock:
                    if self._closed:
                        return
                # Only a stopping server ends a stream that the client keeps open.
                if self._move_to_another_server():
                    backoff = _BACKOFF_START
                    continue
                if self._error is None:
                    self._fail(CancelledError("Insert: the server stopped"))
                return
            except grpc.RpcError as error:
                with self._lock:
                    if self._closed:
                        return  # close() cancelled the call
                # A server that is unreachable or stopping (CANCELLED) has
                # gone away: with failover, another one takes the items.
                gone = error.code() in (*TRANSIENT, grpc.StatusCode.CANCELLED)
                if gone and self._move_to_another_server():
                    backoff = _BACKOFF_START
                    continue
                if self._error is not None:
                    return  # the failover refused
                if not means_unreachable(error):
                    self._fail(error_from_rpc(error, "Insert"))
                    return
                # Unreachable (and no other server to go to): wait for it, as
                # long as it takes; flush and insert time out meanwhile.
                self._transport._note_outage(error).warn_if_due("Insert")
            except BaseException as error:  # noqa: BLE001 - reported to the writer
                self._fail(error)
                return
            with self._lock:
                if self._closed:
                    return
                self._stream_wake.wait(backoff)
            backoff = min(backoff * 2, _BACKOFF_MAX)

    def _move_to_another_server(self) -> bool:
        """With failover, switches the stream to another server's transport;
        False if there is none (or no failover). A failover that refuses
        (raises ConnectionError) fails the stream: check ``_error`` after."""
        if self._failover is None:
            return False
        try:
            replacement = self._failover(self._transport)
        except ConnectionError as error:
            self._fail(error)
            return False
        if replacement is None or replacement is self._transport:
            return False
        self._transport = replacement
        return True

    def _requests(self, generation: int) -> Iterator[bytes]:
        """The request messages of one stream (runs on gRPC's thread)."""
        encoder = self._encoder
        while True:
            with self._lock:
                self._idle = True
                # Chunks the writer let go of are released at once, by a
                # message of releases alone if nothing is queued: the server
                # keeps them, counted against its max_bytes, until told.
                # (Woken by confirmations, which free the items' chunks;
                # chunks leaving the writer's history show within a slice.)
                # (A same-host stream's writer may be sending a message
                # itself: this thread waits for it, see _exchange_locked,
                # and leaves new items to it for _LINGER_SECONDS.)
                local = hasattr(self._call, "stage")
                lingered = False
                while (
                    not self._rest_pending
                    and self._exchange_error is None
                    and not self._closed
                    and self._generation == generation
                ):
                    if (encoder.queued or encoder.releasable) and not self._exchanging:
                        if lingered or not local:
                            break
                        lingered = True
                        self._idle = True  # (the next item ends the linger)
                        self._stream_wake.wait(_LINGER_SECONDS)
                        continue
                    lingered = False
                    self._idle = True
                    polling = local and self._writer_sends()
                    if self._exchanging and self._exchange_owner is None and not polling:
                        # A writer's message whose answer nobody reads (the
                        # writer has not waited again): read here.
                        self._rest_pending = True
                        break
                    self._stream_wake.wait(_WRITER_SENDS_SECONDS if polling else WAIT_SLICE_SECONDS)
                    # A call that reads its requests on this thread (the
                    # same-host transport's) learns here, between requests,
                    # that its server ended it (as a gRPC call would at once).
                    watch = getattr(self._call, "watch_idle", None)
                    if watch is not None and not self._exchanging:
                        watch()
                self._idle = False
                error = self._exchange_error
                if error is not None:
                    self._exchange_error = None
                    raise error  # the writer's exchange ended the stream
                if self._closed or self._generation != generation:
                    return
                stage = getattr(self._call, "stage", None)
                if self._rest_pending:
                    self._rest_pending = False
                    # This thread reads the answer: writers leave it alone.
                    self._exchange_owner = threading.get_ident()
                    message = self._call.rest_of_answer
                elif stage is not None:
                    self._exchanging = True
                    self._exchange_owner = threading.get_ident()
                    message = stage(encoder, _MAX_ITEMS_PER_MESSAGE, _MAX_BYTES_PER_MESSAGE)
                else:
                    message = encoder.take_message(_MAX_ITEMS_PER_MESSAGE, _MAX_BYTES_PER_MESSAGE)
            yield message

    def _confirm(self, keys: np.ndarray) -> None:
        with self._lock:
            self._encoder.confirm(keys)
            # (A same-host stream's answer may come in parts.)
            self._exchanging = getattr(self._call, "answer_pending", False)
            if not self._exchanging:
                self._exchange_owner = None
            self._lock.notify_all()

    def _notify_everyone_locked(self) -> None:
        """Wakes the writers and the stream's thread (the stream ends)."""
        self._lock.notify_all()
        self._stream_wake.notify_all()

    def _fail(self, error: BaseException) -> None:
        with self._lock:
            self._error = error
            self._room = False
            self._notify_everyone_locked()
        if self._on_error is not None:
            self._on_error(error)
