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

import dataclasses
import functools
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import grpc
import numpy as np

from resound import _core, _proto, specs
from resound._service import wire
from resound._transport import MAX_MESSAGE_BYTES
from resound._transport.embedded import TableMeta
from resound._transport.malloc_thresholds import keep_message_buffers_warm
from resound._transport.waiting import Outage, deadline_after, remaining
from resound.errors import (
    CancelledError,
    DeadlineExceededError,
    NotFoundError,
    ResourceExhaustedError,
)
from resound.table import shared_chunk_store
from resound.table_info import TableInfo
from resound.tls import ClientTls

__all__ = ["InsertStream", "RemoteTransport", "error_from_rpc", "update_arrays"]

# Channel options of both ends.
CHANNEL_OPTIONS = [
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
]
# A client's channel tries a lost server again at least this often (gRPC's
# default backs off to 2 minutes), so a restarted server is found soon.
_CLIENT_CHANNEL_OPTIONS = [
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 2000),
]
# One insert message carries at most this many items or payload bytes.
_MAX_ITEMS_PER_MESSAGE = 1024
_MAX_BYTES_PER_MESSAGE = 32 << 20
# A stream's writer waits while this many items, or their chunks' bytes, are
# queued or unconfirmed.
_MAX_IN_FLIGHT_ITEMS = 16 * _MAX_ITEMS_PER_MESSAGE
_MAX_IN_FLIGHT_BYTES = 4 * _MAX_BYTES_PER_MESSAGE
# Reconnection back-off of an insert stream, in seconds.
_BACKOFF_START, _BACKOFF_MAX = 0.05, 2.0
# A call that failed although the channel just became ready waits this long
# before it tries again (a server that accepts connections but is stopping).
_RETRY_AFTER_READY_SECONDS = 0.05
# Waits in slices this long, so that Ctrl-C reaches the caller.
_WAIT_SLICE_SECONDS = 0.1
# What the server's Checkpoint answers when its disk is full or unwritable.
_DISK_ERRORS = (grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.FAILED_PRECONDITION)
# Status codes that mean "the connection or server went away": retried.
_TRANSIENT = (grpc.StatusCode.UNAVAILABLE,)
# ...unless the server answered and refused the connection (TLS settings that
# do not match): waiting would not help, so that raises ConnectionError.
_REFUSED_CONNECTION = ("handshake", "certificate", "ssl_error", "verification", "unauthenticated")


def _waits(error: grpc.RpcError) -> bool:
    """Whether ``error`` means the server is not there (yet): wait for it."""
    if error.code() not in _TRANSIENT:
        return False
    details = (error.details() or "").lower()
    return not any(refused in details for refused in _REFUSED_CONNECTION)


def error_from_rpc(error: grpc.RpcError, what: str) -> Exception:
    """The resound exception for a failed call (status code -> exception type)."""
    code = error.code() if hasattr(error, "code") else None
    details = (error.details() if hasattr(error, "details") else None) or str(error)
    message = f"{what}: {details}"
    if code == grpc.StatusCode.INVALID_ARGUMENT:
        return ValueError(message)
    if code == grpc.StatusCode.NOT_FOUND:
        return NotFoundError(details)
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return DeadlineExceededError(message)
    if code == grpc.StatusCode.CANCELLED:
        return CancelledError(message)
    if code == grpc.StatusCode.UNIMPLEMENTED:
        return NotImplementedError(details)
    if code == grpc.StatusCode.UNAVAILABLE:
        return ConnectionError(message)
    if code == grpc.StatusCode.RESOURCE_EXHAUSTED:
        return ResourceExhaustedError(message)
    return RuntimeError(f"{message} ({code})")


class RemoteTransport:
    """Calls the tables of a server at ``address`` over gRPC."""

    def __init__(self, address: str, tls: ClientTls | None = None) -> None:
        self._address = address
        keep_message_buffers_warm()  # its messages are megabytes (see the module)
        options = [
            *CHANNEL_OPTIONS,
            *_CLIENT_CHANNEL_OPTIONS,
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
                response_deserializer=response and response.FromString,
            )

        self._insert_call = method("Insert", "stream_stream", None, P.InsertResponse)
        self._sample_call = method("Sample", "unary_stream", P.SampleRequest, None)
        self._mutate_call = method(
            "MutatePriorities", "unary_unary", P.MutatePrioritiesRequest, P.MutatePrioritiesResponse
        )
        self._reset_call = method("Reset", "unary_unary", P.ResetRequest, P.ResetResponse)
        self._info_call = method(
            "ServerInfo", "unary_unary", P.ServerInfoRequest, P.ServerInfoResponse
        )
        self._checkpoint_call = method(
            "Checkpoint", "unary_unary", P.CheckpointRequest, P.CheckpointResponse
        )
        # Writers chunk locally, exactly as with the embedded transport.
        self._store = shared_chunk_store()
        self.add_chunk = self._store.add
        self.get_chunk = self._store.get
        self._infos: dict[str, TableInfo] = {}
        self._infos_lock = threading.Lock()
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
        self._channel.close()

    def close_client_stream(self) -> None:
        """Ends the stream of ``Client.insert`` (its client is gone; writers
        keep their own streams and the channel). Does not wait for the
        stream's thread: this runs in finalizers."""
        stream, self._client_stream = self._client_stream, None
        if stream is not None:
            stream.close(wait=False)

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
        return TableMeta(
            name,
            info.sampler_options.WhichOneof("distribution") == "prioritized",
            info.signature,
            None if info.signature is None else specs.flat_signature(info.signature),
            None,
            None,
        )

    def insert(self, table: str, requests: list[Any], timeout: float | None) -> int:
        """Inserts (key, priority, trajectory) triples and waits (at most
        ``timeout`` seconds) until the server confirms them.

        With failover, the stream these calls share moves to another server
        when this one goes away. The next call opens a new stream to this
        server instead of following it, so that a restarted server gets its
        share of the inserts again (a client of several servers sends each
        insert to the servers in turn); the moved stream ends once the calls
        using it are done."""
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

    def sample(self, table: str, num_samples: int, timeout: float | None) -> RemoteSampleBatch:
        return self.start_sample(table, num_samples, timeout)()

    def start_sample(
        self, table: str, num_samples: int, timeout: float | None
    ) -> Callable[[], RemoteSampleBatch]:
        """Starts a Sample call (gRPC runs it on its own threads); returns the
        function that receives and decodes its batch. An unreachable server
        is waited for within ``timeout`` (see the module doc)."""
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
                    if not (_waits(error) and self.wait_for_server):
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

    def signature(self, table: str) -> Any:
        return self._info(table).signature

    # --- managing

    def mutate_priorities(
        self,
        table: str,
        updates: Mapping[int, float] | Iterable[tuple[int, float]] | tuple[Any, Any] | None,
        deletes: Iterable[int] | None,
    ) -> tuple[int, int]:
        keys, priorities = update_arrays(updates)
        request = _proto.MutatePrioritiesRequest(
            table=table,
            update_keys=keys,
            update_priorities=priorities,
            delete_keys=[] if deletes is None else [int(k) for k in deletes],
        )
        response = self._unary(self._mutate_call, request, f"MutatePriorities of {table!r}")
        return response.num_updated, response.num_deleted

    def reset(self, table: str) -> None:
        self._unary(self._reset_call, _proto.ResetRequest(table=table), f"Reset of {table!r}")

    def server_info(self, timeout: float | None) -> dict[str, TableInfo]:
        response = self._unary(self._info_call, _proto.ServerInfoRequest(), "ServerInfo", timeout)
        infos = {m.name: wire.table_info_from_message(m) for m in response.tables}
        with self._infos_lock:
            self._infos = dict(infos)
        return infos

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
        deadline = deadline_after(timeout)
        wait = timeout
        while True:
            try:
                response = call(request, timeout=wait)
            except grpc.RpcError as error:
                if error.code() == grpc.StatusCode.DEADLINE_EXCEEDED and not self._channel_ready():
                    # The attempt used up the time while the channel was
                    # still connecting (a server that went away, in reconnect
                    # backoff): the server was not reachable, in time or (not
                    # waiting, as in a set of servers) at all.
                    outage = self._note_outage(error)
                    if self.wait_for_server:
                        raise outage.deadline_error(what, timeout) from None
                    raise ConnectionError(
                        f"{what}: the server at {self._address} is not reachable "
                        f"(last error: {outage.last_error})"
                    ) from None
                if not (_waits(error) and self.wait_for_server):
                    raise error_from_rpc(error, what) from None
                self._wait_for_channel(self._note_outage(error), deadline, what, timeout)
                wait = remaining(deadline)
                continue
            if self._outage is not None:
                self._outage = None
            return response

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
                wait = min(_WAIT_SLICE_SECONDS, outage.until_warning())
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


def update_arrays(updates: Any) -> tuple[list[int], list[float]]:
    if updates is None:
        return [], []
    if isinstance(updates, tuple) and len(updates) == 2 and hasattr(updates[0], "__len__"):
        keys = np.asarray(updates[0]).astype(np.uint64, copy=False).ravel().tolist()
        priorities = np.asarray(updates[1], dtype=np.float64).ravel().tolist()
        if len(keys) != len(priorities):
            raise ValueError(
                f"updates: {len(keys)} keys but {len(priorities)} priorities; they must pair up"
            )
        return keys, priorities
    pairs = updates.items() if isinstance(updates, Mapping) else updates
    keys, priorities = [], []
    for key, priority in pairs:
        keys.append(int(key))
        priorities.append(float(priority))
    return keys, priorities


class InsertStream:
    """One insert stream to the server: items (and the chunks they use) are
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
        self._encoder = _core.InsertRequestEncoder(transport._store)
        self._idle = False  # the request thread waits for items
        self._error: BaseException | None = None
        self._closed = False
        self._generation = 0
        # Calls of RemoteTransport.insert using the stream (under that
        # transport's lock).
        self.callers = 0
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
        return self._encoder.queued + self._encoder.unconfirmed

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
        return dataclasses.replace(
            meta,
            insert_batch=functools.partial(self.insert, name),
            insert_one=functools.partial(self.insert_one, name),
        )

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
        """``insert`` of one item of one column of one slice (see TableMeta)."""
        del timeout  # accepted at once; the server applies the rate limiter
        with self._mutex:
            self._wait_for_room_locked()
            self._encoder.add_one(table, key, priority, chunk_key, offset, length, squeeze)
            if self._idle:
                self._lock.notify_all()
        return 1

    def submit(self, table: str, requests: list[Any]) -> None:
        with self._mutex:
            self._wait_for_room_locked()
            add = self._encoder.add
            for key, priority, trajectory in requests:
                add(table, key, priority, trajectory)
            if self._idle:
                self._lock.notify_all()

    def _wait_for_room_locked(self) -> None:
        """Returns at once while the stream has room; raises the stream's
        error, or RuntimeError once it is closed."""
        encoder = self._encoder
        while (
            (
                encoder.queued + encoder.unconfirmed >= _MAX_IN_FLIGHT_ITEMS
                or encoder.in_flight_bytes >= _MAX_IN_FLIGHT_BYTES
            )
            and self._error is None
            and not self._closed
        ):
            self._lock.wait(_WAIT_SLICE_SECONDS)
        if self._error is not None:
            raise self._error
        if self._closed:
            raise RuntimeError("the insert stream is closed")

    def wait(self, keep: int, timeout: float | None, call: str) -> None:
        """Blocks until at most ``keep`` items are unconfirmed;
        DeadlineExceededError after ``timeout`` seconds (None: no limit)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            while self.in_flight > keep and self._error is None:
                wait = _WAIT_SLICE_SECONDS
                if deadline is not None:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise DeadlineExceededError(
                            f"{call} call did not complete within provided timeout of "
                            f"{timeout} s ({self.in_flight} items not yet confirmed)"
                        )
                    wait = min(wait, left)
                self._lock.wait(wait)
            if self._error is not None:
                raise self._error

    def close(self, wait: bool = True) -> None:
        """Stops the stream; unconfirmed items are dropped. Idempotent.
        ``wait=False`` does not wait for the stream's thread (finalizers: the
        thread may need the very thread that collects the writer)."""
        with self._lock:
            self._closed = True
            self._lock.notify_all()
        if wait and self._receiver is not threading.current_thread():
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
                generation = self._generation
            try:
                responses = self._transport._insert_call(self._requests(generation))
                for response in responses:
                    backoff = _BACKOFF_START
                    self._transport._outage = None
                    self._confirm(response.item_keys)
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
                # A server that is unreachable or stopping (CANCELLED) has
                # gone away: with failover, another one takes the items.
                gone = error.code() in (*_TRANSIENT, grpc.StatusCode.CANCELLED)
                if gone and self._move_to_another_server():
                    backoff = _BACKOFF_START
                    continue
                if self._error is not None:
                    return  # the failover refused
                if not _waits(error):
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
                self._lock.wait(backoff)
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
                while not encoder.queued and not self._closed and self._generation == generation:
                    self._lock.wait(_WAIT_SLICE_SECONDS)
                self._idle = False
                if self._closed or self._generation != generation:
                    return
                message = encoder.take_message(_MAX_ITEMS_PER_MESSAGE, _MAX_BYTES_PER_MESSAGE)
            yield message

    def _confirm(self, keys: Any) -> None:
        confirmed = np.array(keys, np.uint64)
        with self._lock:
            self._encoder.confirm(confirmed)
            self._lock.notify_all()

    def _fail(self, error: BaseException) -> None:
        with self._lock:
            self._error = error
            self._lock.notify_all()
        if self._on_error is not None:
            self._on_error(error)


class _RemoteSample:
    __slots__ = ("chunks", "trajectory")

    def __init__(self, trajectory: Any, chunks: list[Any]) -> None:
        self.trajectory = trajectory
        self.chunks = chunks


class RemoteSampleBatch:
    """Samples of one Sample call, shaped like the core's SampleBatch (info
    fields as arrays; items with trajectory and chunks)."""

    def __init__(self, responses: Iterable[bytes]) -> None:
        # The received chunks live in a store of their own, validated by the
        # core like any chunk, and die with the batch.
        store = _core.ChunkStore(1)
        holder = _core.ChunkHolder()
        # Trajectories stay packed until asked for: stack_columns reads them
        # in C++, the item by item path unpacks them into Python lists.
        self._store, self._holder = store, holder
        self._packed: list[_core.PackedTrajectories] = []
        self._unpacked: list[_RemoteSample] | None = None
        parts: list[tuple[Any, ...]] = []
        for raw in responses:
            try:
                decoded = _core.decode_sample_response(raw, store, holder)
            except ValueError as error:
                raise ValueError(f"malformed response from the server: {error}") from None
            self._packed.append(decoded[0])
            parts.append(decoded[1:])
        # keys, priorities, times_sampled, probabilities, table_sizes.
        dtypes = (np.uint64, np.float64, np.int32, np.float64, np.int64)
        arrays = [
            np.concatenate([part[i] for part in parts]) if parts else np.empty(0, dtype)
            for i, dtype in enumerate(dtypes)
        ]
        self.keys, self.priorities, self.times_sampled, self.probabilities, self.table_sizes = (
            arrays
        )

    @property
    def _items(self) -> list[_RemoteSample]:
        if self._unpacked is None:
            self._unpacked = [
                _RemoteSample(trajectory, chunks)
                for packed in self._packed
                for trajectory, chunks in packed.unpack(self._holder)
            ]
        return self._unpacked

    def __len__(self) -> int:
        return len(self.keys)

    def __getitem__(self, index: int) -> _RemoteSample:
        return self._items[index]

    def __iter__(self) -> Iterator[_RemoteSample]:
        return iter(self._items)

    def stack_columns(self) -> list[np.ndarray | None]:
        """Every column stacked over the batch, as the core's SampleBatch does."""
        if not len(self):
            return []
        return _core.stack_trajectories(self._packed, self._store)
