"""The server side of the Replay service: requests in, core calls out.

Every request is validated before it reaches a table (unknown tables, chunk
metadata, slices, priorities, signatures — the core checks what it stores)
and answered with a status code and a message; a bad request never changes a
table.

The handlers are coroutines on the server's event loop (grpc.aio; see
serving_loop.py), so an open stream or a waiting call costs memory, not a
thread. Inserts and samples try the core without waiting; when the rate
limiter holds one up, it waits in the table's queue (table_waits.py) until
the core says the table may proceed. Checkpoints, which write files, run on
a worker thread. Stopping the server cancels every handler still running,
which then ends its call with CANCELLED ("the server stopped").
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import math
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

import grpc

from resound import _core, _proto
from resound._service.call_limits import CallLimits
from resound._service.refusal_log import RefusalLog
from resound._service.response_budget import ResponseBudget
from resound._service.table_waits import TableWaits
from resound._wire import message_codec as wire
from resound._wire import status
from resound._wire.timeouts import finite_timeout
from resound.errors import DeadlineExceededError, NotFoundError
from resound.table import shared_chunk_store

if TYPE_CHECKING:
    from resound._table_host import TableHost

__all__ = ["ReplayServicer"]

# Read-ahead of a SampleStream's requests: enough that the next request's
# arrival time is known while this one is answered.
_STREAM_INBOX = 2
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
    return status.status_of(error)


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
    """Serves the tables of one host (a ``resound.Server``); ``handler()``
    plugs it into a grpc.aio server, whose loop runs every handler.
    ``stop()`` (on the loop) ends the calls still running."""

    def __init__(self, server: TableHost, limits: CallLimits, budget: ResponseBudget) -> None:
        self._server = server
        self._limits = limits
        self._budget = budget
        self._store = shared_chunk_store()
        self._waits: dict[str, TableWaits] = {}
        self._info_templates: dict[str, Any] = {}  # TableInfo messages, see _table_info
        # Calls parked where they wait for their client or a table; the
        # others are running and check the server on their next step.
        self._parked: set[asyncio.Task[Any]] = set()
        self._stopping = False
        self._refusals = RefusalLog()

    def handler(self) -> grpc.GenericRpcHandler:
        P = _proto  # noqa: N806
        return grpc.method_handlers_generic_handler(
            P.SERVICE,
            {
                "Insert": grpc.stream_stream_rpc_method_handler(
                    self._guard_stream("Insert", self.insert),
                    # Bytes both ways: the core reads each request (its chunk
                    # payloads in place) and writes each confirmation.
                    request_deserializer=None,
                    response_serializer=None,
                ),
                "Sample": grpc.unary_stream_rpc_method_handler(
                    self._guard_stream("Sample", self.sample),
                    request_deserializer=_parser(P.SampleRequest),
                    # Bytes out: the core writes each response whole (sample_response.h).
                    response_serializer=None,
                ),
                "SampleStream": grpc.stream_stream_rpc_method_handler(
                    self._guard_stream("SampleStream", self.sample_stream),
                    request_deserializer=_parser(P.SampleRequest),
                    response_serializer=None,
                ),
                "MutatePriorities": grpc.unary_unary_rpc_method_handler(
                    self._guard("MutatePriorities", self.mutate_priorities),
                    request_deserializer=_parser(P.MutatePrioritiesRequest),
                    response_serializer=P.MutatePrioritiesResponse.SerializeToString,
                ),
                "MutatePrioritiesStream": grpc.stream_stream_rpc_method_handler(
                    self._guard_stream("MutatePrioritiesStream", self.mutate_priorities_stream),
                    request_deserializer=_parser(P.MutatePrioritiesRequest),
                    response_serializer=P.MutatePrioritiesResponse.SerializeToString,
                ),
                "Reset": grpc.unary_unary_rpc_method_handler(
                    self._guard("Reset", self.reset),
                    request_deserializer=_parser(P.ResetRequest),
                    response_serializer=P.ResetResponse.SerializeToString,
                ),
                "ServerInfo": grpc.unary_unary_rpc_method_handler(
                    self._guard("ServerInfo", self.server_info),
                    request_deserializer=_parser(P.ServerInfoRequest),
                    response_serializer=P.ServerInfoResponse.SerializeToString,
                ),
                "WhyBlocked": grpc.unary_unary_rpc_method_handler(
                    self._guard("WhyBlocked", self.why_blocked),
                    request_deserializer=_parser(P.WhyBlockedRequest),
                    response_serializer=P.WhyBlockedResponse.SerializeToString,
                ),
                "Checkpoint": grpc.unary_unary_rpc_method_handler(
                    self._guard("Checkpoint", self.checkpoint),
                    request_deserializer=_parser(P.CheckpointRequest),
                    response_serializer=P.CheckpointResponse.SerializeToString,
                ),
            },
        )

    @property
    def open_calls(self) -> int:
        """Long-lived calls open right now."""
        return self._limits.open

    @property
    def open_connections(self) -> int:
        """Client connections with a long-lived call open right now."""
        return self._limits.connections

    def stop(self) -> None:
        """Ends every call still running (on the loop, after the tables
        closed) with CANCELLED, "the server stopped": the parked ones are
        cancelled, the others see it before they park again. Only parked
        calls are cancelled: a cancellation inside gRPC's own code (a
        response being written) would cut the call off without a status."""
        self._stopping = True
        for task in list(self._parked):
            task.cancel()
        for waits in self._waits.values():
            waits.close()

    # --- error handling: every failure becomes a status, never a crash

    async def _abort(
        self, name: str, context: grpc.aio.ServicerContext, code: grpc.StatusCode, message: str
    ) -> None:
        """Ends the call with a status, logging it first if it is a refusal
        (see refusal_log.py; rate-limited per cause)."""
        self._refusals.refused(name, code, message, context.peer())
        await context.abort(code, message)

    def _guard(self, name: str, method: Callable[[Any, Any], Awaitable[Any]]) -> Any:
        async def call(request: Any, context: grpc.aio.ServicerContext) -> Any:
            if isinstance(request, _Malformed):
                await self._abort(name, context, grpc.StatusCode.INVALID_ARGUMENT, request.what)
            try:
                return await method(request, context)
            except Exception as error:  # noqa: BLE001 - reported to the client
                await self._abort(name, context, *_status_of(error))

        return call

    def _guard_stream(self, name: str, method: Callable[[Any, Any], AsyncIterator[Any]]) -> Any:
        async def call(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            if isinstance(request, _Malformed):
                await self._abort(name, context, grpc.StatusCode.INVALID_ARGUMENT, request.what)
            peer = context.peer()
            refused = self._limits.admit(peer)
            if refused is not None:
                await self._abort(name, context, grpc.StatusCode.RESOURCE_EXHAUSTED, refused)
            status = None
            try:
                async for response in method(request, context):
                    yield response
            except asyncio.CancelledError:
                if not self._stopping:
                    raise  # the client went away: nobody to answer
                status = (grpc.StatusCode.CANCELLED, "the server stopped")
            except Exception as error:  # noqa: BLE001 - reported to the client
                status = _status_of(error)
            finally:
                self._limits.leave(peer)
            if status is not None:
                await self._abort(name, context, *status)

        return call

    async def _parked_on(self, awaitable: Awaitable[Any]) -> Any:
        """Awaits what a call waits for (its client's next message, a
        table), where stopping the server may cancel it."""
        try:
            self._check_running()
        except _StatusError:
            close = getattr(awaitable, "close", None)
            if close is not None:
                close()  # never awaited, by design
            raise
        task = asyncio.current_task()
        assert task is not None
        self._parked.add(task)
        try:
            return await awaitable
        finally:
            self._parked.discard(task)

    def _table(self, name: str) -> Any:
        try:
            return self._server.table(name)._core
        except NotFoundError as error:  # it names the tables, and `name` (the client's)
            raise _StatusError(grpc.StatusCode.NOT_FOUND, str(error), echoed=(name,)) from None

    def _waits_of(self, name: str, table: Any) -> TableWaits:
        waits = self._waits.get(name)
        if waits is None:
            waits = self._waits[name] = TableWaits(table, asyncio.get_running_loop())
        return waits

    def _check_running(self) -> None:
        # CANCELLED, not UNAVAILABLE: clients retry UNAVAILABLE (a lost
        # connection), but a stopped server is not coming back by itself.
        if not self._server.running:
            raise _StatusError(grpc.StatusCode.CANCELLED, "the server stopped")

    # --- Insert

    async def insert(
        self, requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[bytes]:
        holder = _core.ChunkHolder()  # the chunks this stream keeps
        incoming = aiter(requests)
        while True:
            try:
                raw = await self._parked_on(anext(incoming))
            except StopAsyncIteration:
                return
            request = self._decode_insert(raw)
            self._add_chunks(holder, request, raw)
            # Items are confirmed once in their tables: at the end of the
            # request, and meanwhile whenever the rate limiter holds up the
            # rest (a writer ahead of its table learns what went in).
            confirmed = inserted = 0
            try:
                for table_name, begin, end in request.runs:
                    inserted = begin
                    table = self._table(table_name)
                    try:  # at once, as nearly always
                        table.insert_packed(
                            request.keys, request.priorities, request.trajectories, holder,
                            begin, end, 0,
                        )  # fmt: skip
                    except DeadlineExceededError as error:  # held up by the rate limiter
                        inserted = held_from = begin + error.num_inserted
                        async for inserted in self._insert_held_up(  # noqa: B007 - used below
                            table_name, table, request, holder, held_from, end
                        ):
                            if inserted > confirmed:
                                yield request.confirmation(confirmed, inserted)
                                confirmed = inserted
                    inserted = end
            except Exception:
                if inserted > confirmed:  # what went in is confirmed before the error
                    yield request.confirmation(confirmed, inserted)
                raise
            if request.has_releases:
                request.release(holder)
            if len(request) > confirmed:
                yield request.confirmation(confirmed, len(request))

    @staticmethod
    def _decode_insert(raw: bytes) -> Any:
        """The core's reading of an InsertRequest (see _core.InsertRequest)."""
        try:
            return _core.InsertRequest(raw)
        except ValueError as error:
            raise _StatusError(
                grpc.StatusCode.INVALID_ARGUMENT, str(error), _layout_strings(raw)
            ) from None

    def _add_chunks(self, holder: Any, request: Any, raw: bytes) -> None:
        limit = self._server.max_bytes
        if limit is not None:
            held = self._store.memory_bytes
            brought = request.new_chunk_bytes(self._store)
            if brought and held + brought > limit:
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
            request.add_chunks(holder, self._store)
        except ValueError as error:
            raise _StatusError(
                grpc.StatusCode.INVALID_ARGUMENT, str(error), _layout_strings(raw)
            ) from None

    async def _insert_held_up(
        self, table_name: str, table: Any, request: Any, holder: Any, done: int, end: int
    ) -> AsyncIterator[int]:
        """Inserts items [done, end) of a request into ``table`` once its
        rate limiter lets them in, waiting for the table without a thread;
        meanwhile yields how far they got."""
        waiter = self._waits_of(table_name, table).waiter(_core.WAKE_INSERTS)
        try:
            while True:
                self._check_running()
                yield done  # how far it got before the limiter held it up
                await self._parked_on(waiter.wait(None))
                try:
                    done += table.insert_packed(
                        request.keys, request.priorities, request.trajectories, holder, done, end, 0
                    )
                    return
                except DeadlineExceededError as error:
                    done += error.num_inserted
        finally:
            waiter.end()

    # --- Sample

    async def sample(self, request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        batch = await self._take(request, time.monotonic())
        responses = _sample_responses(batch, request.max_per_response)
        async with contextlib.aclosing(self._budgeted(context.peer(), responses)) as budgeted:
            async for response in budgeted:
                yield response

    async def sample_stream(
        self, requests: AsyncIterator[Any], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[Any]:
        """Answers each request of the stream in turn (see the proto): a
        dataset's fetches cost one message each way instead of a call, which
        costs both ends far more CPU than the message (about 0.8 ms here on
        the server and 0.6 ms on the client)."""
        peer = context.peer()
        inbox: asyncio.Queue[Any] = asyncio.Queue(_STREAM_INBOX)
        reader = asyncio.ensure_future(_read_into(requests, inbox))
        try:
            while (arrival := await self._parked_on(inbox.get())) is not _END:
                if isinstance(arrival, BaseException):
                    raise arrival
                arrived, request = arrival
                if isinstance(request, _Malformed):
                    raise _StatusError(grpc.StatusCode.INVALID_ARGUMENT, request.what)
                try:
                    # The timeout counts from the request's arrival, as a
                    # call's would: requests queued behind a wait end with it
                    # instead of waiting in turn (and taking samples from a
                    # client that gave up meanwhile).
                    batch = await self._take(request, arrived)
                except DeadlineExceededError as error:
                    yield _timed_out(str(error))
                    continue
                responses = _sample_responses(batch, request.max_per_response, mark_end=True)
                async with contextlib.aclosing(self._budgeted(peer, responses)) as budgeted:
                    async for response in budgeted:
                        yield response
                # An idle stream must not keep its last batch's items (and
                # their chunks) alive until its next request.
                del batch, responses
        finally:
            reader.cancel()

    async def _budgeted(self, peer: str, responses: Iterator[bytes]) -> AsyncGenerator[bytes, None]:
        """``responses``, each counted against the response budget (see
        response_budget.py) from when it is made until gRPC took it. Callers
        close it with ``contextlib.aclosing``: a call cut off while a response
        is out then gives its bytes back at once, instead of when the event
        loop finalizes the generator (Python 3.13 warns when that comes too
        late, as the loop closes)."""
        for response in responses:
            refused = self._budget.take(peer, len(response))
            if refused is not None:
                raise _StatusError(grpc.StatusCode.RESOURCE_EXHAUSTED, refused)
            try:
                yield response
            finally:
                self._budget.give(peer, len(response))

    async def _take(self, request: Any, arrived: float) -> Any:
        """The sample batch a SampleRequest asks for, waiting for the rate
        limiter without a thread. DeadlineExceededError once its timeout,
        counted from ``arrived`` (time.monotonic()), ran out."""
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
        # Negative, or longer than a year (inf included): wait forever, as
        # clients and the core read such timeouts.
        wait_for = None if timeout < 0 else finite_timeout(timeout)
        deadline = None if wait_for is None else arrived + wait_for
        waiter = self._waits_of(request.table, table).waiter(_core.WAKE_SAMPLES)
        try:
            while True:
                self._check_running()
                try:
                    return table.sample(count, 0.0)
                except DeadlineExceededError:
                    pass
                remaining = None
                if deadline is not None:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        # Why, as the core's own timeouts (embedded) say it.
                        raise DeadlineExceededError(table.why_blocked(False)) from None
                try:
                    await self._parked_on(waiter.wait(remaining))
                except asyncio.TimeoutError:
                    continue  # the try above gets its last chance, then the deadline ends it
        finally:
            waiter.end()

    # --- unary calls

    async def mutate_priorities(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
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

    async def mutate_priorities_stream(
        self, requests: AsyncIterator[Any], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[Any]:
        """Answers each request of the stream in turn (see the proto): a
        message each way instead of a unary call, which costs the server
        about twice the CPU of a stream's message."""
        incoming = aiter(requests)
        while True:
            try:
                request = await self._parked_on(anext(incoming))
            except StopAsyncIteration:
                return
            if isinstance(request, _Malformed):
                raise _StatusError(grpc.StatusCode.INVALID_ARGUMENT, request.what)
            yield await self.mutate_priorities(request, context)

    async def reset(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        del context
        self._table(request.table).reset()
        return _proto.ResetResponse()

    async def server_info(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        del context
        if isinstance(request, _Malformed):
            raise _StatusError(grpc.StatusCode.INVALID_ARGUMENT, request.what)
        bins = request.priority_histogram_bins
        if not 0 <= bins <= _core.MAX_HISTOGRAM_BINS:
            raise _StatusError(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"priority_histogram_bins must be an integer in [0, {_core.MAX_HISTOGRAM_BINS}] "
                f"(0: no histogram), got {bins}",
            )
        served = list(self._server.tables.values())
        tables = [self._table_info(table) for table in served]
        if bins:
            # Only when asked: it reads every item of every table (~10 ms a
            # million), on a worker thread while the loop serves on.
            histograms = await asyncio.get_running_loop().run_in_executor(
                None, lambda: [table._core.priority_histogram(bins) for table in served]
            )
            for message, histogram in zip(tables, histograms, strict=True):
                message.priority_histogram.min = histogram.min
                message.priority_histogram.max = histogram.max
                message.priority_histogram.counts.extend(histogram.counts)
        response = _proto.ServerInfoResponse(tables=tables)
        advertised = getattr(self._server, "local_advertisement", None)
        if advertised is not None:
            response.local_address, response.local_token_sha256 = advertised
        return response

    def _table_info(self, table: Any) -> Any:
        """``table``'s TableInfo message now: what never changes (options,
        signature, limiter settings) built once, the counters read each call
        (building it all took ~150 us per table, a call's own cost)."""
        template = self._info_templates.get(table.name)
        if template is None:
            template = self._info_templates[table.name] = wire.table_info_message(
                table.info, table.signature
            )
        return wire.table_info_now(template, table._core.info())

    async def why_blocked(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        """Why each table asked about (every table if none) holds its side
        up right now; tables that do not, or do not exist, are left out."""
        del context
        names = list(request.tables) or list(self._server.tables)
        response = _proto.WhyBlockedResponse()
        for name in names:
            host = self._server.tables.get(name)
            if host is None:
                continue
            table = host._core
            if not (table.can_insert() if request.insert else table.can_sample()):
                response.tables.append(name)
                response.reasons.append(_status_message(table.why_blocked(request.insert)))
        return response

    async def checkpoint(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        del request, context
        self._check_running()
        try:
            # Writing files: on a worker thread, the loop serves on meanwhile.
            path = await asyncio.get_running_loop().run_in_executor(None, self._server.checkpoint)
        except OSError as error:
            # The disk, not the request: full (RESOURCE_EXHAUSTED) or not
            # writable (FAILED_PRECONDITION). The client raises OSError.
            code = grpc.StatusCode.FAILED_PRECONDITION
            if error.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
                code = grpc.StatusCode.RESOURCE_EXHAUSTED
            raise _StatusError(code, f"checkpoint not written: {error}") from None
        return _proto.CheckpointResponse(path=path)


_END = object()


def _timed_out(reason: str) -> bytes:
    """SampleStream's answer to a request whose wait for the rate limiter
    ran out, saying why (what the client's DeadlineExceededError says)."""
    return _proto.SampleResponse(
        end_of_request=True, timed_out=True, timeout_reason=_status_message(reason)
    ).SerializeToString()


async def _read_into(requests: AsyncIterator[Any], inbox: asyncio.Queue[Any]) -> None:
    """Puts (arrival time, request) of each request of a stream into
    ``inbox`` (time.monotonic() when it was read), then _END, or the error
    that ended the reading. The bounded inbox gives a fast client
    back-pressure."""
    try:
        async for request in requests:
            await inbox.put((time.monotonic(), request))
    except asyncio.CancelledError:
        raise
    except Exception as error:  # noqa: BLE001 - handed to the handler
        await inbox.put(error)
        return
    await inbox.put(_END)


def _layout_strings(raw: bytes) -> tuple[str, ...]:
    """The dtype and compression strings of an InsertRequest's chunk layouts,
    which the core's messages about them repeat (to be shortened there; see
    _status_message). Only for errors: the protobuf runtime reads them."""
    try:
        layouts = _proto.InsertRequest.FromString(raw).chunks.layouts
    except Exception:  # noqa: BLE001 - a message protobuf cannot read either
        return ()
    return tuple(s for layout in layouts for s in (layout.dtype, layout.compression))


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
