"""The remote transport: the Client API over gRPC to a server in another
process (or on another machine).

Writers build their chunks locally (in this process's chunk store, with the
same chunkers as the embedded transport) and stream them with their items to
the server on an insert stream (``InsertStream``), many per message, from a
background thread. The server confirms items once they are in their tables;
``flush`` waits for those confirmations. A stream that loses its connection
reconnects with back-off and sends again what was not confirmed (items are
keyed, so nothing is stored twice). Samples come back with their chunks, once
per response.

A server that cannot be reached is waited for (resound._transport.waiting):
unary calls and samples up to their timeout (then DeadlineExceededError;
without one until it comes up), insert streams until they get through
(``flush`` and ``insert`` time out meanwhile), warning every ~10 s. A
transport of a server set (``wait_for_server = False``) fails at once with
ConnectionError instead, so that the set can leave the server out.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import grpc

from resound import _core, _proto, specs, wait_warnings
from resound._transport.gathered_batch import GatheredSampleBatch
from resound._transport.idle_calls import IdleCalls
from resound._transport.insert_call import InsertCall
from resound._transport.insert_stream import InsertStream
from resound._transport.malloc_thresholds import keep_message_buffers_warm
from resound._transport.one_server import OneServerTransport
from resound._transport.outbox_call import OutboxCall
from resound._transport.protocol import TableMeta
from resound._transport.sample_stream import RemoteSampleBatch, SampleStream
from resound._transport.waiting import (
    WAIT_SLICE_SECONDS,
    Outage,
    deadline_after,
    remaining,
)
from resound._wire import message_codec
from resound._wire.channel_options import CHANNEL_OPTIONS, client_keepalive
from resound._wire.status import error_from_rpc, means_unreachable
from resound._wire.timeouts import finite_timeout
from resound.errors import DeadlineExceededError, NotFoundError
from resound.priority_histogram import PriorityHistogram
from resound.table_info import TableInfo
from resound.tls import ClientTls

__all__ = ["RemoteTransport", "client_chunk_store"]

# A client's channel tries a lost server again at least this often (gRPC's
# default backs off to 2 minutes), so a restarted server is found soon.
_CLIENT_CHANNEL_OPTIONS = [
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 2000),
]
# A call that failed although the channel just became ready waits this long
# before it tries again (a server that accepts connections but is stopping).
_RETRY_AFTER_READY_SECONDS = 0.05
# Idle SampleStreams kept per table for sample(): as many threads as sample
# one table at once reuse theirs; more open and close streams of their own.
# Idle calls kept of each kind (see idle_calls.py): as many threads as call
# at once reuse theirs; more open and close calls of their own.
_IDLE_CALLS = 8
# How long a finalizer (the client's) waits for a lock before it leaves
# what the lock guards as it is.
_FINALIZER_LOCK_SECONDS = 1.0
# How long a wait warning waits for the server to say why (see why_blocked).
_WHY_BLOCKED_TIMEOUT_SECONDS = 2.0
# What the server's Checkpoint answers when its disk is full or unwritable.
_DISK_ERRORS = (grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.FAILED_PRECONDITION)
# The chunks remote clients' writers build, apart from the tables' store
# (resound.table.shared_chunk_store; see RemoteTransport.__init__). Their
# payloads are copied in with ordinary stores: the send reads them back at
# once, from the cache. Large ones are built in the same-host transport's
# payload arena once a local connection made it (see local_connections).
_CLIENT_CHUNK_STORE = _core.ChunkStore(cached_payloads=True, shareable_payloads=True)


def client_chunk_store() -> _core.ChunkStore:
    """The store of the chunks this process's remote writers build (not yet
    sent, or kept for the items to come)."""
    return _CLIENT_CHUNK_STORE


class RemoteTransport(OneServerTransport):
    """Calls the tables of a server at ``address`` over gRPC (a
    ServerTransport: see resound._transport.protocol)."""

    def __init__(self, address: str, tls: ClientTls | None = None) -> None:
        self._address = address
        keep_message_buffers_warm()  # its messages are megabytes (see the module)
        options = [
            *CHANNEL_OPTIONS,
            *_CLIENT_CHANNEL_OPTIONS,
            *client_keepalive(),
            # A subchannel of its own: gRPC otherwise shares connections per
            # address across channels, and one that failed against an earlier
            # server on the same port would fail this client too (backoff).
            ("grpc.use_local_subchannel_pool", 1),
        ]
        if tls is None:
            self._channel = grpc.insecure_channel(address, options=options)
        else:
            self._channel = grpc.secure_channel(
                address, tls.credentials(), options=[*options, *tls.channel_options()]
            )
        P = _proto  # noqa: N806 - the message module

        def method(name: str, kind: str, request: Any, response: Any) -> Any:
            # None: the message travels as the bytes given or received
            # (messages with chunk payloads are written and read by the
            # core, which copies payloads once or never).
            return getattr(self._channel, kind)(
                f"/{P.SERVICE}/{name}",
                request_serializer=request and request.SerializeToString,
                response_deserializer=getattr(response, "FromString", response),
            )

        # Insert confirmations arrive as numpy arrays of item keys, read by the core.
        self._insert_call = method("Insert", "stream_stream", None, _core.insert_response_keys)
        self._sample_call = method("Sample", "unary_stream", P.SampleRequest, None)
        self._sample_stream_call = method("SampleStream", "stream_stream", P.SampleRequest, None)
        self._mutate_call = method(
            "MutatePriorities", "unary_unary", P.MutatePrioritiesRequest, P.MutatePrioritiesResponse
        )
        self._mutate_stream_call = method(
            "MutatePrioritiesStream", "stream_stream", P.MutatePrioritiesRequest,
            P.MutatePrioritiesResponse,
        )  # fmt: skip
        self._reset_call = method("Reset", "unary_unary", P.ResetRequest, P.ResetResponse)
        self._info_call = method(
            "ServerInfo", "unary_unary", P.ServerInfoRequest, P.ServerInfoResponse
        )
        self._checkpoint_call = method(
            "Checkpoint", "unary_unary", P.CheckpointRequest, P.CheckpointResponse
        )
        self._why_blocked_call = method(
            "WhyBlocked", "unary_unary", P.WhyBlockedRequest, P.WhyBlockedResponse
        )
        # Writers chunk locally, exactly as with the embedded transport, but
        # in a store of the process's remote clients: a server in this
        # process counts its tables' store against its max_bytes, and the
        # writer's chunks are not the server's (a copy of each reaches it,
        # as from another process). In that shared store, the chunks a
        # server keeps for a stream also looked alive to the writer, which
        # then never let them go (InsertRequestEncoder releases a chunk once
        # it is gone from the writer's store).
        self._store = client_chunk_store()
        self.add_chunk = self._store.add
        self.get_chunk = self._store.get
        self._infos: dict[str, TableInfo] = {}
        self._infos_lock = threading.Lock()
        # Idle streams of sample() by table, and of insert() without a timeout.
        self._idle_sample_streams: dict[str, IdleCalls[SampleStream]] = {}
        self._idle_insert_calls: IdleCalls[InsertCall] = IdleCalls(
            _IDLE_CALLS, stale=lambda call: call.ended, close=InsertCall.close
        )
        self._idle_mutate_calls: IdleCalls[OutboxCall] = IdleCalls(
            _IDLE_CALLS, stale=lambda call: call.ended, close=OutboxCall.end
        )
        self._metas: dict[str, tuple[TableInfo, TableMeta]] = {}  # see table_info_for_writer
        self._client_stream: InsertStream | None = None
        self._closed = False
        # failover(this transport) -> another server's transport, or None: set
        # by a client of several servers, so that insert streams whose server
        # went away carry on elsewhere.
        self.failover: Callable[[RemoteTransport], RemoteTransport | None] | None = None
        # Whether calls wait for an unreachable server (a client of one
        # server) or raise ConnectionError at once (a member of a server set).
        self.wait_for_server = True
        # Set while the server is unreachable (see resound._transport.waiting).
        self._outage: Outage | None = None

    @property
    def address(self) -> str:
        return self._address

    def close(self) -> None:
        self._closed = True
        if self._client_stream is not None:
            self._client_stream.close()
        self._close_idle_streams()
        self._channel.close()

    def _close_idle_streams(self, lock_timeout: float = -1) -> None:
        """Ends the streams kept open between calls of sample and insert.
        ``lock_timeout``: see IdleCalls.close_all."""
        pools: list[IdleCalls[Any]] = []
        if self._infos_lock.acquire(timeout=lock_timeout):
            try:
                pools = [*self._idle_sample_streams.values()]
            finally:
                self._infos_lock.release()
        for pool in [*pools, self._idle_insert_calls, self._idle_mutate_calls]:
            pool.close_all(lock_timeout)

    def close_client_stream(self) -> None:
        """Ends the stream of ``Client.insert`` (its client is gone; writers
        keep their own streams and the channel). Does not wait for the
        stream's thread: this runs in finalizers."""
        stream, self._client_stream = self._client_stream, None
        if stream is not None:
            stream.close(wait=False)
        # The collector may run a finalizer on a thread that holds one of
        # the locks: never wait for one for good (which would be for itself).
        self._close_idle_streams(lock_timeout=_FINALIZER_LOCK_SECONDS)

    def column_chunker(
        self, dtype: str, shape: tuple[int, ...], max_chunk_length: int, keep_alive: int
    ) -> Any:
        return _core.ColumnChunker(self._store, dtype, shape, max_chunk_length, keep_alive)

    # --- writing

    def open_insert_stream(self, on_error: Callable[[BaseException], None] | None = None) -> Any:
        """A new insert stream (one per trajectory writer)."""
        return InsertStream(self, on_error, self.failover)

    def table_info_for_writer(self, name: str, timeout: float | None = None) -> TableMeta:
        info = self._info(name, timeout)
        # Built once per TableInfo received (client.insert asks at every call).
        cached = self._metas.get(name)
        if cached is not None and cached[0] is info:
            return cached[1]
        meta = TableMeta(
            name,
            info.sampler_options.WhichOneof("distribution") == "prioritized",
            info.signature,
            None if info.signature is None else specs.flat_signature(info.signature),
        )
        self._metas[name] = (info, meta)
        return meta

    def insert(self, table: str, requests: list[Any], timeout: float | None) -> int:
        """Inserts (key, priority, trajectory) triples and waits (at most
        ``timeout`` seconds) until the server confirms them.

        With failover, the stream these calls share moves to another server
        when this one goes away. The next call opens a new stream to this
        server instead of following it, so that a restarted server gets its
        share of the inserts again (a client of several servers sends each
        insert to the servers in turn); the moved stream ends once the calls
        using it are done."""
        timeout = finite_timeout(timeout)  # past a year: no limit
        if timeout is None and self.failover is None:
            self._insert_calling(table, requests)
            return len(requests)
        with self._infos_lock:
            moved = self._client_stream
            if moved is not None and moved.transport is self:
                moved = None
            if self._client_stream is None or moved is not None:
                self._client_stream = InsertStream(self, None, self.failover)
            stream = self._client_stream
            stream.callers += 1
        if moved is not None:
            self._release_client_stream(moved, acquired=False)
        try:
            stream.submit(table, requests)
            stream.wait(0, timeout, "Insert")
        finally:
            self._release_client_stream(stream)
        return len(requests)

    def _insert_calling(self, table: str, requests: list[Any]) -> None:
        """``insert`` with no timeout: on an idle InsertCall of this
        transport's (the caller reads its own confirmation), or a new one."""
        call = self._idle_insert_calls.take() or InsertCall(self)
        # The call blocks in gRPC, where it cannot look at the clock: a
        # watchdog thread warns for it when its wait is long.
        blocked = wait_warnings.BlockedWait(wait_warnings.WRITER_LOGGER, "insert")
        try:
            with wait_warnings.watching(blocked, functools.partial(self._why_insert, table)):
                call.insert(table, requests)
        except BaseException:
            call.close()
            raise
        self._idle_insert_calls.give_back(call, keep=not self._closed)

    def _release_client_stream(self, stream: InsertStream, acquired: bool = True) -> None:
        """A call of ``insert`` is done with ``stream`` (``acquired``); a
        stream that is no longer this transport's ends with its last call."""
        with self._infos_lock:
            if acquired:
                stream.callers -= 1
            ended = stream is not self._client_stream and not stream.callers
        if ended:
            stream.close(wait=False)

    # --- reading

    def sample(
        self, table: str, num_samples: int, timeout: float | None
    ) -> RemoteSampleBatch | GatheredSampleBatch:
        """One batch, asked for on a SampleStream kept open between calls: a
        request on an open stream costs one message each way, a Sample call
        of its own several more (about a third more time per sample(n=1)).
        Each calling thread takes an idle stream of the table's, or opens
        one, and puts it back after. (A GatheredSampleBatch comes only from
        the same-host transport, which overrides this.)"""
        with self._infos_lock:
            idle = self._idle_sample_streams.get(table)
            if idle is None:
                idle = self._idle_sample_streams[table] = IdleCalls(
                    _IDLE_CALLS, stale=lambda stream: stream.ended_while_idle,
                    close=SampleStream.close,
                )  # fmt: skip
        stream = idle.take() or SampleStream(self, table, self._sample_stream_call)
        try:
            batch = stream.start(num_samples, timeout)()
        except DeadlineExceededError:
            idle.give_back(stream, keep=not self._closed)  # the stream goes on
            raise
        except BaseException:
            stream.close()
            raise
        idle.give_back(stream, keep=not self._closed)
        return batch

    def start_sample(
        self, table: str, num_samples: int, timeout: float | None
    ) -> Callable[[], RemoteSampleBatch]:
        """Starts a Sample call (gRPC runs it on its own threads); returns the
        function that receives and decodes its batch. An unreachable server
        is waited for within ``timeout`` (see the module doc)."""
        timeout = finite_timeout(timeout)  # gRPC's deadlines overflow past it
        deadline = deadline_after(timeout)
        what = f"Sample from table {table!r}"

        def call(wait: float | None) -> Any:
            request = _proto.SampleRequest(
                table=table,
                num_samples=num_samples,
                timeout_seconds=-1.0 if wait is None else wait,
            )
            # The server honours the timeout; the call's own deadline only
            # guards against a server that stopped answering.
            return self._sample_call(request, timeout=None if wait is None else wait + 10.0)

        try:
            responses = call(timeout)
        except grpc.RpcError as error:
            raise error_from_rpc(error, what) from None

        def receive() -> RemoteSampleBatch:
            nonlocal responses
            while True:
                try:
                    # Each response is decoded as it arrives, while gRPC
                    # receives the next one.
                    batch = RemoteSampleBatch(responses)
                except grpc.RpcError as error:
                    # (Not a table that starved the request, as _unary reads it.)
                    if self._stalled_connecting(error):
                        raise self._not_reached(error, what, timeout) from None
                    if not (means_unreachable(error) and self.wait_for_server):
                        raise error_from_rpc(error, what) from None
                    self._wait_for_channel(self._note_outage(error), deadline, what, timeout)
                    try:
                        responses = call(remaining(deadline))
                    except grpc.RpcError as again:
                        raise error_from_rpc(again, what) from None
                    continue
                self._outage = None
                return batch

        return receive

    def open_sample_stream(self, table: str) -> SampleStream:
        """A stream of sample requests to ``table`` (for a dataset's fetches)."""
        return SampleStream(self, table, self._sample_stream_call)

    def signature(self, table: str) -> Any:
        return self._info(table).signature

    # --- managing

    def mutate_priorities(
        self,
        table: str,
        updates: Mapping[int, float] | Iterable[tuple[int, float]] | tuple[Any, Any] | None,
        deletes: Iterable[int] | None,
    ) -> tuple[int, int]:
        # (Read and checked by the core, as the other transports read them.)
        keys, priorities, delete_keys = _core.priority_updates(updates, deletes)
        request = _proto.MutatePrioritiesRequest(
            table=table, update_keys=keys, update_priorities=priorities, delete_keys=delete_keys
        )
        what = f"MutatePriorities of {table!r}"
        call = self._idle_mutate_calls.take()
        try:
            if call is None:
                call = OutboxCall(self._mutate_stream_call)
            response = call.ask(request)
        except grpc.RpcError as error:
            if call is not None:
                call.end()  # frees gRPC's request thread
                call = None
            if error.code() != grpc.StatusCode.CANCELLED and not means_unreachable(error):
                raise error_from_rpc(error, what) from None
            # The server went away, maybe while the call was idle: as a call
            # of its own, which waits for it (or says why not).
            response = self._unary(self._mutate_call, request, what)
        except BaseException:
            if call is not None:
                call.end()
            raise
        if call is not None:
            self._idle_mutate_calls.give_back(call, keep=not self._closed)
        return response.num_updated, response.num_deleted

    def reset(self, table: str) -> None:
        self._unary(self._reset_call, _proto.ResetRequest(table=table), f"Reset of {table!r}")

    def server_info(self, timeout: float | None) -> dict[str, TableInfo]:
        response = self._unary(self._info_call, _proto.ServerInfoRequest(), "ServerInfo", timeout)
        infos = {m.name: message_codec.table_info_from_message(m) for m in response.tables}
        with self._infos_lock:
            self._infos = dict(infos)
        return infos

    def _why_insert(self, table: str) -> str:
        reasons = self.why_blocked([table], insert=True)
        if reasons:
            return reasons[0]
        return (
            f"the server at {self._address} has not confirmed the insert yet (table "
            f"{table!r}'s rate limiter does not refuse it now)"
        )

    def why_blocked(self, tables: list[str], insert: bool) -> list[str]:
        """The server's reasons why each of ``tables`` refuses inserts
        (``insert``) or samples now: none for tables that do not, and none
        at all if the server cannot say (an older one, or not reachable
        within _WHY_BLOCKED_TIMEOUT_SECONDS). For wait warnings and timeout
        messages: a writer only sees that confirmations do not come."""
        request = _proto.WhyBlockedRequest(tables=tables, insert=insert)
        try:
            response = self._why_blocked_call(request, timeout=_WHY_BLOCKED_TIMEOUT_SECONDS)
        except grpc.RpcError:
            return []
        return list(response.reasons)

    def priority_histogram(self, table: str, bins: int, timeout: float | None) -> PriorityHistogram:
        """A ServerInfo call that asks for ``bins`` bins: the server counts,
        only the counts travel.

        Example (a server listening on port 8000)::

            RemoteTransport('localhost:8000').priority_histogram('replay', 20, 5.0)
        """
        request = _proto.ServerInfoRequest(priority_histogram_bins=bins)
        response = self._unary(self._info_call, request, "priority_histogram", timeout)
        for message in response.tables:
            if message.name == table:
                return PriorityHistogram.from_message(message.priority_histogram)
        names = ", ".join(sorted(m.name for m in response.tables))
        raise NotFoundError(
            f"Priority table {table} was not found. The following tables exist: {names}."
        )

    def checkpoint(self) -> str:
        try:
            return self._checkpoint_call(_proto.CheckpointRequest()).path
        except grpc.RpcError as error:
            if error.code() in _DISK_ERRORS:  # as a server of this process raises
                raise OSError(f"Checkpoint: {error.details()}") from None
            raise error_from_rpc(error, "Checkpoint") from None

    def _unary(self, call: Any, request: Any, what: str, timeout: float | None = None) -> Any:
        """``call(request)``, waiting for an unreachable server up to
        ``timeout`` (see the module doc)."""
        timeout = finite_timeout(timeout)  # gRPC's deadlines overflow past it
        deadline = deadline_after(timeout)
        wait = timeout
        while True:
            try:
                response = call(request, timeout=wait)
            except grpc.RpcError as error:
                if self._stalled_connecting(error):
                    raise self._not_reached(error, what, timeout) from None
                if not (means_unreachable(error) and self.wait_for_server):
                    raise error_from_rpc(error, what) from None
                self._wait_for_channel(self._note_outage(error), deadline, what, timeout)
                wait = remaining(deadline)
                continue
            if self._outage is not None:
                self._outage = None
            return response

    def _stalled_connecting(self, error: grpc.RpcError) -> bool:
        """Whether ``error`` is the call's own deadline, passed while the
        channel was still connecting (a server that went away, in reconnect
        backoff): the server was not reachable, rather than slow to answer."""
        return error.code() == grpc.StatusCode.DEADLINE_EXCEEDED and not self._channel_ready()

    def _not_reached(self, error: grpc.RpcError, what: str, timeout: float | None) -> Exception:
        """The error of a call whose server was not reachable in time
        (``_stalled_connecting``): a timeout for a client that waits for its
        server, ConnectionError for one that does not (a member of a set)."""
        outage = self._note_outage(error)
        if self.wait_for_server:
            return outage.deadline_error(what, timeout)
        return ConnectionError(
            f"{what}: the server at {self._address} is not reachable "
            f"(last error: {outage.last_error})"
        )

    def _channel_ready(self) -> bool:
        """Whether the channel is connected now (without waiting)."""
        ready = grpc.channel_ready_future(self._channel)
        try:
            ready.result(timeout=0)
            return True
        except grpc.FutureTimeoutError:
            return False
        finally:
            ready.cancel()

    def _note_outage(self, error: BaseException) -> Outage:
        """The transport's outage (started now if there was none), with
        ``error`` as its last error."""
        outage = self._outage
        if outage is None:
            outage = self._outage = Outage(self._address)
        outage.note(error)
        return outage

    def _wait_for_channel(
        self, outage: Outage, deadline: float | None, what: str, timeout: float | None
    ) -> None:
        """Blocks until the channel is connected, the next warning is due (it
        is logged; the caller tries again, which refreshes the last error) or
        ``deadline`` passes (DeadlineExceededError naming the last error)."""
        outage.warn_if_due(what)
        ready = grpc.channel_ready_future(self._channel)
        try:
            while True:
                left = remaining(deadline)
                if left == 0.0:
                    raise outage.deadline_error(what, timeout)
                wait = min(WAIT_SLICE_SECONDS, outage.until_warning())
                if left is not None:
                    wait = min(wait, left)
                try:
                    ready.result(timeout=wait)
                except grpc.FutureTimeoutError:
                    if outage.until_warning() == 0.0:
                        return
                    continue
                # Connected; a server that is still starting or stopping may
                # refuse the call again: not at full speed.
                time.sleep(min(_RETRY_AFTER_READY_SECONDS, left or _RETRY_AFTER_READY_SECONDS))
                return
        finally:
            ready.cancel()

    def _info(self, table: str, timeout: float | None = None) -> TableInfo:
        with self._infos_lock:
            info = self._infos.get(table)
        if info is None:
            info = self.server_info(timeout).get(table)
        if info is None:
            raise NotFoundError(
                f"Priority table {table} was not found. The following tables exist: "
                f"{', '.join(sorted(self._infos))}."
            )
        return info
