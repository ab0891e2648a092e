"""The server side of the Replay service: requests in, core calls out.

Every request is validated before it reaches a table (unknown tables, chunk
metadata, slices, priorities, signatures — the core checks what it stores)
and answered with a status code and a message; a bad request never changes a
table. Waits for rate limiters run in the core without the GIL, in slices, so
a handler notices a cancelled call or a stopped server within a slice.
"""

from __future__ import annotations

import errno
import math
import queue
import threading
import time
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

import grpc
import numpy as np

from resound import _core, _proto
from resound._service import wire
from resound._transport.waiting import finite_timeout
from resound.errors import CancelledError, DeadlineExceededError, NotFoundError
from resound.table import shared_chunk_store

if TYPE_CHECKING:
    from resound.server import Server

__all__ = ["ReplayServicer"]

# The longest single wait in the core before a handler looks again whether
# its call is still wanted.
_WAIT_SLICE_SECONDS = 0.1
# Sample responses are cut at about this many payload bytes: gRPC messages
# must stay below the channel's limit, and smaller ones stream sooner.
_RESPONSE_BYTES = 16 << 20
# A status message travels in the call's trailers, which gRPC limits (8 KB
# soft, 16 KB hard, after percent-encoding non-ASCII bytes threefold): past
# that the client sees RESOURCE_EXHAUSTED instead of the status. Messages
# are cut to this many UTF-8 bytes, and values the client sent (a 1 MB
# table name) to this many characters wherever they are echoed.
_MAX_STATUS_BYTES = 2048
_MAX_ECHO_CHARS = 100


class _StatusError(Exception):
    """Ends a call with a status (raised inside handlers, turned into
    context.abort at their top). ``echoed``: values of the request the
    message repeats (shortened in the status, see _status_message)."""

    def __init__(self, code: grpc.StatusCode, message: str, echoed: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.code = code
        self.echoed = echoed


class _Malformed:
    """A request that does not parse, handed to the handler in its place (so
    that it gets INVALID_ARGUMENT: gRPC answers INTERNAL when a deserializer
    raises, and logs a traceback)."""

    def __init__(self, message_class: Any, error: Exception) -> None:
        self.what = _status_message(f"malformed {message_class.DESCRIPTOR.name}: {error}")


def _parser(message_class: Any) -> Any:
    def parse(raw: bytes) -> Any:
        try:
            return message_class.FromString(raw)
        except Exception as error:  # noqa: BLE001 - protobuf's DecodeError and kin
            return _Malformed(message_class, error)

    return parse


def _status_of(error: BaseException) -> tuple[grpc.StatusCode, str]:
    """The status (code, message) a call ends with after ``error``; the
    message is cut to fit the trailers (_status_message)."""
    code, message = _code_of(error)
    return code, _status_message(message, getattr(error, "echoed", ()))


def _code_of(error: BaseException) -> tuple[grpc.StatusCode, str]:
    if isinstance(error, _StatusError):
        return error.code, str(error)
    if isinstance(error, NotFoundError):
        return grpc.StatusCode.NOT_FOUND, str(error)
    if isinstance(error, DeadlineExceededError):
        return grpc.StatusCode.DEADLINE_EXCEEDED, str(error)
    if isinstance(error, CancelledError):
        return grpc.StatusCode.CANCELLED, str(error)
    if isinstance(error, (ValueError, TypeError, OverflowError)):
        return grpc.StatusCode.INVALID_ARGUMENT, str(error)
    return grpc.StatusCode.INTERNAL, f"{type(error).__name__}: {error}"


def _status_message(message: str, echoed: Iterable[str] = ()) -> str:
    """``message`` as a status may carry it (see _MAX_STATUS_BYTES): each of
    the ``echoed`` values (what the client sent) longer than _MAX_ECHO_CHARS
    shortened where it appears, with an ellipsis and its length, and then
    the whole cut to _MAX_STATUS_BYTES of UTF-8.

    Example:
        >>> _status_message('no table ' + 'x' * 500 + ' here', ['x' * 500])[:12]
        'no table xxx'
        >>> _status_message('no table ' + 'x' * 500 + ' here', ['x' * 500])[109:]
        '… (500 characters) here'
    """
    for value in sorted({v for v in echoed if len(v) > _MAX_ECHO_CHARS}, key=len, reverse=True):
        shortened = f"{value[:_MAX_ECHO_CHARS]}… ({len(value)} characters)"
        message = message.replace(value, shortened)
        quoted = repr(value)[1:-1]  # as {value!r} shows it, if that differs
        if quoted != value:
            message = message.replace(quoted, shortened)
    encoded = message.encode("utf-8", errors="replace")
    if len(encoded) <= _MAX_STATUS_BYTES:
        return message
    note = f"… (cut; {len(message)} characters in all)"
    kept = encoded[: _MAX_STATUS_BYTES - len(note.encode())]
    return kept.decode("utf-8", errors="ignore") + note


class ReplayServicer:
    """Serves one Server's tables; ``handler()`` plugs it into a grpc.Server."""

    def __init__(self, server: Server) -> None:
        self._server = server
        self._store = shared_chunk_store()

    def handler(self) -> grpc.GenericRpcHandler:
        P = _proto  # noqa: N806
        return grpc.method_handlers_generic_handler(
            P.SERVICE,
            {
                "Insert": grpc.stream_stream_rpc_method_handler(
                    self._guard_stream(self.insert),
                    # Raw bytes in: wire.decode reads chunk payloads in place.
                    request_deserializer=None,
                    response_serializer=P.InsertResponse.SerializeToString,
                ),
                "Sample": grpc.unary_stream_rpc_method_handler(
                    self._guard_stream(self.sample),
                    request_deserializer=_parser(P.SampleRequest),
                    # Bytes out: the core writes each response whole (sample_response.h).
                    response_serializer=None,
                ),
                "SampleStream": grpc.stream_stream_rpc_method_handler(
                    self._guard_stream(self.sample_stream),
                    request_deserializer=_parser(P.SampleRequest),
                    response_serializer=None,
                ),
                "MutatePriorities": grpc.unary_unary_rpc_method_handler(
                    self._guard(self.mutate_priorities),
                    request_deserializer=_parser(P.MutatePrioritiesRequest),
                    response_serializer=P.MutatePrioritiesResponse.SerializeToString,
                ),
                "Reset": grpc.unary_unary_rpc_method_handler(
                    self._guard(self.reset),
                    request_deserializer=_parser(P.ResetRequest),
                    response_serializer=P.ResetResponse.SerializeToString,
                ),
                "ServerInfo": grpc.unary_unary_rpc_method_handler(
                    self._guard(self.server_info),
                    request_deserializer=_parser(P.ServerInfoRequest),
                    response_serializer=P.ServerInfoResponse.SerializeToString,
                ),
                "Checkpoint": grpc.unary_unary_rpc_method_handler(
                    self._guard(self.checkpoint),
                    request_deserializer=_parser(P.CheckpointRequest),
                    response_serializer=P.CheckpointResponse.SerializeToString,
                ),
            },
        )

    # --- error handling: every failure becomes a status, never a crash

    @staticmethod
    def _guard(method: Any) -> Any:
        def call(request: Any, context: grpc.ServicerContext) -> Any:
            if isinstance(request, _Malformed):
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, request.what)
            try:
                return method(request, context)
            except Exception as error:  # noqa: BLE001 - reported to the client
                context.abort(*_status_of(error))

        return call

    @staticmethod
    def _guard_stream(method: Any) -> Any:
        def call(request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
            if isinstance(request, _Malformed):
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, request.what)
            try:
                yield from method(request, context)
            except Exception as error:  # noqa: BLE001 - reported to the client
                context.abort(*_status_of(error))

        return call

    def _table(self, name: str) -> Any:
        try:
            return self._server.table(name)._core
        except NotFoundError as error:  # it names the tables, and `name` (the client's)
            raise _StatusError(grpc.StatusCode.NOT_FOUND, str(error), echoed=(name,)) from None

    def _check_running(self) -> None:
        # CANCELLED, not UNAVAILABLE: clients retry UNAVAILABLE (a lost
        # connection), but a stopped server is not coming back by itself.
        if not self._server.running:
            raise _StatusError(grpc.StatusCode.CANCELLED, "the server stopped")

    # --- Insert

    def insert(self, requests: Iterator[Any], context: grpc.ServicerContext) -> Iterator[Any]:
        holder = _core.ChunkHolder()  # the chunks this stream keeps
        for _, raw in _polled(requests, context, self._check_running):
            request, payloads = self._decode_insert(raw)
            self._add_chunks(holder, request.chunks, payloads)
            items = request.items
            keys = np.array(items.keys, np.uint64)
            # Items are confirmed once in their tables: at the end of the
            # request, and meanwhile whenever the rate limiter holds up the
            # rest (a writer ahead of its table learns what went in).
            confirmed = inserted = 0
            if len(keys):
                priorities, trajectories, runs = _item_batch(items, len(keys))
                try:
                    for table, begin, end in runs:
                        for inserted in self._insert(  # noqa: B007 - used after the loop
                            table, keys, priorities, trajectories, holder, begin, end, context
                        ):
                            if inserted > confirmed:
                                yield _proto.InsertResponse(
                                    item_keys=keys[confirmed:inserted].tolist()
                                )
                                confirmed = inserted
                        inserted = end
                except Exception:
                    if inserted > confirmed:  # what went in is confirmed before the error
                        yield _proto.InsertResponse(item_keys=keys[confirmed:inserted].tolist())
                    raise
            if request.release_chunk_keys:
                holder.release(np.array(request.release_chunk_keys, np.uint64))
            if len(keys) > confirmed:
                yield _proto.InsertResponse(item_keys=keys[confirmed:].tolist())

    @staticmethod
    def _decode_insert(raw: bytes) -> tuple[Any, memoryview]:
        try:
            return wire.decode(_proto.InsertRequest, raw)
        except ValueError as error:
            raise _StatusError(grpc.StatusCode.INVALID_ARGUMENT, str(error)) from None

    def _add_chunks(self, holder: Any, batch: Any, payloads: memoryview) -> None:
        limit = self._server.max_bytes
        if limit is not None and len(payloads):
            held = self._store.memory_bytes
            brought = _new_chunk_bytes(self._store, batch)
            if held + brought > limit:
                # Before anything of the message is stored: a client cannot
                # take the server's memory past its limit (e.g. by sending
                # chunks no item uses), and what is stored stays.
                raise _StatusError(
                    grpc.StatusCode.RESOURCE_EXHAUSTED,
                    f"the server holds {held} bytes of chunks and this message brings "
                    f"{brought} more, past its max_bytes of {limit}; nothing of the "
                    "message was stored (free room: reset or sample from queues, or raise "
                    "max_bytes)",
                )
        try:
            wire.add_chunks(holder, self._store, batch, payloads)
        except ValueError as error:
            # The core's message may repeat a layout's dtype or compression.
            echoed = tuple(
                s for layout in batch.layouts for s in (layout.dtype, layout.compression)
            )
            raise _StatusError(grpc.StatusCode.INVALID_ARGUMENT, str(error), echoed) from None

    def _insert(
        self,
        table_name: str,
        keys: np.ndarray,
        priorities: np.ndarray,
        trajectories: Any,
        holder: Any,
        begin: int,
        end: int,
        context: grpc.ServicerContext,
    ) -> Iterator[int]:
        """Inserts items [begin, end) of a request into ``table_name``; while
        the rate limiter holds them up, yields how far they got."""
        table = self._table(table_name)
        done = begin
        while done < end:
            try:
                done += table.insert_packed(
                    keys, priorities, trajectories, holder, done, end, _WAIT_SLICE_SECONDS
                )
            except DeadlineExceededError as error:
                done += error.num_inserted
                if not context.is_active():
                    raise _StatusError(grpc.StatusCode.CANCELLED, "the client went away") from None
                self._check_running()
                yield done

    # --- Sample

    def sample(self, request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
        batch = self._take(request, context)
        if batch is not None:
            yield from _sample_responses(batch, request.max_per_response)

    def sample_stream(
        self, requests: Iterator[Any], context: grpc.ServicerContext
    ) -> Iterator[Any]:
        """Answers each request of the stream in turn (see the proto): a
        dataset's fetches cost one message each way instead of a call, which
        costs both ends far more CPU than the message (about 0.8 ms here on
        the server and 0.6 ms on the client)."""
        for arrived, request in _polled(requests, context, self._check_running):
            if isinstance(request, _Malformed):
                raise _StatusError(grpc.StatusCode.INVALID_ARGUMENT, request.what)
            try:
                # The timeout counts from the request's arrival, as a call's
                # would: requests queued behind a wait end with it instead
                # of waiting in turn (and taking samples from a client that
                # gave up meanwhile).
                batch = self._take(request, context, arrived)
            except DeadlineExceededError:
                yield _TIMED_OUT
                continue
            if batch is None:
                return
            yield from _sample_responses(batch, request.max_per_response, mark_end=True)

    def _take(
        self, request: Any, context: grpc.ServicerContext, arrived: float | None = None
    ) -> Any:
        """The sample batch a SampleRequest asks for; None if the client went
        away while it waited. DeadlineExceededError once its timeout, from
        ``arrived`` (time.monotonic(); None: now), ran out."""
        table = self._table(request.table)
        if request.num_samples < 1:
            raise _StatusError(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"num_samples must be >= 1, got {request.num_samples}",
            )
        count = min(request.num_samples, _core.MAX_SAMPLES_PER_CALL)
        timeout = request.timeout_seconds
        if math.isnan(timeout):
            raise _StatusError(grpc.StatusCode.INVALID_ARGUMENT, "timeout_seconds must not be NaN")
        start = time.monotonic() if arrived is None else arrived
        # Negative, or longer than a year (inf included): wait forever, as
        # clients and the core read such timeouts.
        wait_for = None if timeout < 0 else finite_timeout(timeout)
        deadline = None if wait_for is None else start + wait_for
        while True:
            self._check_running()
            wait = _WAIT_SLICE_SECONDS
            if deadline is not None:
                wait = min(wait, max(0.0, deadline - time.monotonic()))
            try:
                batch = table.sample(count, wait)
                break
            except DeadlineExceededError:
                if deadline is not None and time.monotonic() >= deadline:
                    raise
                if not context.is_active():
                    return None
        return batch

    # --- unary calls

    def mutate_priorities(self, request: Any, context: grpc.ServicerContext) -> Any:
        del context
        table = self._table(request.table)
        if len(request.update_keys) != len(request.update_priorities):
            raise _StatusError(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"update_keys ({len(request.update_keys)}) and update_priorities "
                f"({len(request.update_priorities)}) must have the same length",
            )
        updates = list(zip(request.update_keys, request.update_priorities, strict=True))
        updated, deleted = table.mutate_priorities(updates, list(request.delete_keys))
        return _proto.MutatePrioritiesResponse(num_updated=updated, num_deleted=deleted)

    def reset(self, request: Any, context: grpc.ServicerContext) -> Any:
        del context
        self._table(request.table).reset()
        return _proto.ResetResponse()

    def server_info(self, request: Any, context: grpc.ServicerContext) -> Any:
        del request, context
        tables = [
            wire.table_info_message(table.info, table.signature)
            for table in self._server.tables.values()
        ]
        return _proto.ServerInfoResponse(tables=tables)

    def checkpoint(self, request: Any, context: grpc.ServicerContext) -> Any:
        del request, context
        self._check_running()
        try:
            path = self._server.checkpoint()
        except OSError as error:
            # The disk, not the request: full (RESOURCE_EXHAUSTED) or not
            # writable (FAILED_PRECONDITION). The client raises OSError.
            code = grpc.StatusCode.FAILED_PRECONDITION
            if error.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
                code = grpc.StatusCode.RESOURCE_EXHAUSTED
            raise _StatusError(code, f"checkpoint not written: {error}") from None
        return _proto.CheckpointResponse(path=path)


_END = object()
# SampleStream's answer to a request whose wait for the rate limiter ran out.
_TIMED_OUT = _proto.SampleResponse(end_of_request=True, timed_out=True).SerializeToString()


def _polled(
    requests: Iterator[Any], context: grpc.ServicerContext, check: Any
) -> Iterator[tuple[float, Any]]:
    """(arrival time, request) of each request of a stream (time.monotonic()
    when it was read), read on a thread of their own so that the
    handler can call ``check`` (which raises once the server stops) while the
    client sends nothing: a stopping server then ends idle streams with a
    status of its choice instead of a dropped connection. The small inbox
    gives a fast client back-pressure."""
    inbox: queue.Queue[Any] = queue.Queue(maxsize=2)
    done = threading.Event()

    def read() -> None:
        try:
            for request in requests:
                while not done.is_set():
                    try:
                        inbox.put((time.monotonic(), request), timeout=_WAIT_SLICE_SECONDS)
                        break
                    except queue.Full:
                        continue
        except Exception:  # noqa: BLE001, S110 - the call ended; the handler sees it inactive
            pass
        finally:
            while not done.is_set():
                try:
                    inbox.put(_END, timeout=_WAIT_SLICE_SECONDS)
                    break
                except queue.Full:
                    continue

    threading.Thread(target=read, name="resound-stream-reader", daemon=True).start()
    try:
        while True:
            check()
            try:
                request = inbox.get(timeout=_WAIT_SLICE_SECONDS)
            except queue.Empty:
                if not context.is_active():
                    return
                continue
            if request is _END:
                return
            yield request
    finally:
        done.set()


def _new_chunk_bytes(store: Any, batch: Any) -> int:
    """Payload bytes of the chunks of ChunkBatch ``batch`` that ``store`` does
    not hold yet: a chunk sent again (after a reconnect, while an item still
    uses its first copy) is stored once, and brings nothing new. (Counts that
    do not pair up are the core's to refuse, after this.)"""
    return sum(
        size for key, size in zip(batch.keys, batch.data_sizes, strict=False) if key not in store
    )


def _item_batch(items: Any, count: int) -> tuple[np.ndarray, Any, list[tuple[str, int, int]]]:
    """(priorities, packed trajectories, runs) of an ItemBatch of ``count``
    items, a run being (table, begin, end) of consecutive items of one table
    (each goes in with one core call)."""
    indices = np.array(items.table_indices, np.uint32)
    priorities = np.array(items.priorities, np.float64)
    if len(indices) != count or len(priorities) != count:
        raise _StatusError(
            grpc.StatusCode.INVALID_ARGUMENT,
            f"items: {count} keys, {len(indices)} table_indices and {len(priorities)} "
            "priorities; they must pair up",
        )
    if int(indices.max()) >= len(items.tables):
        raise _StatusError(
            grpc.StatusCode.INVALID_ARGUMENT,
            f"items: table index {int(indices.max())} is not below the {len(items.tables)} tables",
        )
    try:
        trajectories = wire.packed_trajectories(items.trajectories)
    except ValueError as error:
        raise _StatusError(grpc.StatusCode.INVALID_ARGUMENT, f"items: {error}") from None
    if len(trajectories) != count:
        raise _StatusError(
            grpc.StatusCode.INVALID_ARGUMENT,
            f"items: {count} keys but {len(trajectories)} trajectories",
        )
    bounds = [0, *(np.flatnonzero(np.diff(indices)) + 1).tolist(), count]
    runs = [
        (items.tables[int(indices[begin])], begin, end)
        for begin, end in zip(bounds[:-1], bounds[1:], strict=True)
    ]
    return priorities, trajectories, runs


def _sample_responses(batch: Any, limit: int, mark_end: bool = False) -> Iterator[bytes]:
    """Serialized responses of at most ``limit`` items (0: any number) and
    about _RESPONSE_BYTES of chunks each, every chunk an item uses sent once
    per response (written by the core: one copy of the payloads); with
    ``mark_end``, the last has end_of_request set."""
    limit = limit if limit > 0 else len(batch)
    begin = 0
    while begin < len(batch):
        begin, response = batch.encode_response(begin, limit, _RESPONSE_BYTES, mark_end)
        yield response
