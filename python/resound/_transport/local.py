"""The same-host transport's client (docs/local-transport.md).

A ``LocalTransport`` is a ``RemoteTransport`` whose calls go over the
server's Unix socket and shared memory instead of gRPC, carrying the same
request and response messages: each of the transport's gRPC methods is
replaced by a local one of the same shape (``_UnaryMethod``,
``_StreamMethod``), so that everything the gRPC transport does with its
calls (retries, waiting for a server that went away, failover, insert
streams, sample streams) works unchanged. A local call that fails raises a
``grpc.RpcError`` of the same status a gRPC call would.

The transport finds the socket by asking the server over gRPC
(``ServerInfoResponse.local_address``) and uses it only if the token the
socket hands out has the SHA-256 the server advertised: another server's
socket at that path (another container's, a restarted server's) is never
mistaken for it. Until then, and whenever the server offers none, the calls
go over gRPC; a server that went away is looked for again.

Each connection carries one call at a time: a pool keeps idle ones, and
streams (inserts, sample streams) hold one of their own for their life (an
insert stream's chunks live in its connection's session on the server).
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import grpc

from resound import _core, _proto
from resound._transport.gathered_batch import GatheredSampleBatch
from resound._transport.remote import RemoteTransport
from resound._transport.sample_stream import RemoteSampleBatch, SampleStream, sample_timeout
from resound._wire.local_methods import LOCAL_METHODS
from resound._wire.status import error_from_rpc, means_unreachable
from resound._wire.timeouts import finite_timeout
from resound.errors import DeadlineExceededError
from resound.tls import ClientTls

__all__ = ["UNIX_SCHEME", "LocalRpcError", "LocalTransport"]

_LOGGER = logging.getLogger("resound")

UNIX_SCHEME = "unix://"
# Each connection's shared memory, each way: a sample answer larger than
# this comes in parts.
_REGION_BYTES = 64 << 20
_IDLE_CONNECTIONS = 8
_CONNECT_SECONDS = 5.0
# After finding no endpoint, gRPC is used this long before looking again.
_LOOK_AGAIN_SECONDS = 2.0
_CODES = {code.value[0]: code for code in grpc.StatusCode}


class LocalRpcError(grpc.RpcError):
    """A local call's failure, as the gRPC call's would be."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(details)
        self._code = code
        self._details = details

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details

    def __str__(self) -> str:
        return f"{self._code.name}: {self._details}"


def _details(error: grpc.RpcError) -> str:
    details = getattr(error, "details", None)
    return str(details() if callable(details) else error)


def _rpc_error(error: BaseException) -> LocalRpcError:
    """The status a local call's exception means."""
    if isinstance(error, LocalRpcError):
        return error
    if isinstance(error, _core.LocalStatusError):
        code, message = error.args
        return LocalRpcError(_CODES.get(code, grpc.StatusCode.UNKNOWN), message)
    if isinstance(error, DeadlineExceededError):
        return LocalRpcError(grpc.StatusCode.DEADLINE_EXCEEDED, str(error))
    if isinstance(error, OSError):
        return LocalRpcError(
            grpc.StatusCode.UNAVAILABLE, f"failed to connect to the local socket: {error}"
        )
    raise error


class LocalConnections:
    """Connections to one server's socket at ``path``; each new one is
    checked against ``token_sha256`` (None: an address the user gave)."""

    def __init__(self, path: str, token_sha256: bytes | None) -> None:
        self.path = path
        self._token_sha256 = token_sha256
        self._idle: list[Any] = []
        self._lock = threading.Lock()
        self.lost = False  # the server went away: look for it again
        self._closed = False

    def take(self) -> Any:
        with self._lock:
            if self._idle:
                return self._idle.pop()
        try:
            client = _core.LocalClient(self.path, _REGION_BYTES, _REGION_BYTES, _CONNECT_SECONDS)
        except BaseException as error:
            self.lost = True
            raise _rpc_error(error) from None
        if (
            self._token_sha256 is not None
            and hashlib.sha256(client.token).digest() != self._token_sha256
        ):
            client.shutdown()
            self.lost = True
            raise LocalRpcError(
                grpc.StatusCode.UNAVAILABLE,
                f"the socket {self.path} belongs to another server than the one that advertised it",
            )
        return client

    def give_back(self, client: Any) -> None:
        if client.broken:
            client.shutdown()  # (a call that timed out, say): dropped, not reused
            return
        with self._lock:
            if not self._closed and len(self._idle) < _IDLE_CONNECTIONS:
                self._idle.append(client)
                return
        client.shutdown()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for client in idle:
            client.shutdown()


def _call_once(
    connections: LocalConnections, number: int, request: bytes, timeout: float | None
) -> bytes:
    """One request of a one-part answer on a pooled connection (LocalRpcError
    if it failed)."""
    client = connections.take()
    try:
        payload, _ = client.call(number, request, timeout)
    except (_core.LocalStatusError, DeadlineExceededError, OSError) as error:
        raise _rpc_error(error) from None
    finally:
        connections.give_back(client)
    return payload


class _UnaryMethod:
    """A local method in the shape of a gRPC unary-unary one:
    ``method(request, timeout=None)`` returns the response message."""

    def __init__(
        self,
        transport: LocalTransport,
        name: str,
        grpc_method: Any,
        serialize: Callable[[Any], bytes],
        deserialize: Callable[[bytes], Any],
    ) -> None:
        self._transport = transport
        self._number = LOCAL_METHODS[name]
        self._grpc = grpc_method
        self._serialize = serialize
        self._deserialize = deserialize

    def __call__(self, request: Any, timeout: float | None = None) -> Any:
        connections = self._transport._local_connections()
        if connections is None:
            return self._grpc(request, timeout=timeout)
        payload = _call_once(connections, self._number, self._serialize(request), timeout)
        return self._deserialize(payload)


class _StreamMethod:
    """A local method in the shape of a gRPC stream-stream (or, with
    ``single``, unary-stream) one: ``method(requests)`` returns a call that
    iterates the responses, ``cancel()`` and ``done()``."""

    def __init__(
        self,
        transport: LocalTransport,
        name: str,
        grpc_method: Any,
        serialize: Callable[[Any], bytes] | None,
        deserialize: Callable[[bytes], Any] | None,
        single: bool = False,
    ) -> None:
        self._transport = transport
        self._number = LOCAL_METHODS[name]
        self._grpc = grpc_method
        self._serialize = serialize or bytes
        self._deserialize = deserialize or (lambda payload: payload)
        self._single = single

    def __call__(self, requests: Any, timeout: float | None = None) -> Any:
        connections = self._transport._local_connections()
        if connections is None:
            return self._grpc(requests, timeout=timeout)
        incoming = iter([requests]) if self._single else iter(requests)
        return _StreamCall(connections, self._number, incoming, self._serialize, self._deserialize)


class _Staged:
    """A request already written into the connection's upload region
    (``_StreamCall.stage``): its size."""

    __slots__ = ("size",)

    def __init__(self, size: int) -> None:
        self.size = size


# What a stream's request iterator yields to read the rest of an answer
# that a writer started to read (see _StreamCall.finish).
_REST_OF_ANSWER = _Staged(0)
_CONTINUE = 0  # the local method that asks for an answer's next part


class _StreamCall:
    """One local stream: each request sent when the previous one's answer
    (all its parts) was read, on the connection it holds for its life.

    The requests are read on the caller's thread, when it asks for the next
    answer: a request costs no hand-off between threads (two of them, each a
    wake-up of another thread, cost more than the local round trip). While
    the caller waits for its next request the connection is not watched: a
    server that stopped meanwhile is learnt of at the next request, which
    then fails with the server's status (as its call would have).
    """

    def __init__(
        self,
        connections: LocalConnections,
        number: int,
        requests: Iterator[Any],
        serialize: Callable[[Any], bytes],
        deserialize: Callable[[bytes], Any],
    ) -> None:
        self._connections = connections
        self._number = number
        self._requests = requests
        self._serialize = serialize
        self._deserialize = deserialize
        self._client: Any = None
        self._more = False
        self._awaiting = False  # start() sent a request whose answer is unread
        self._taking = threading.Lock()  # see _connection
        self._done = False
        self._cancelled = False

    def __iter__(self) -> _StreamCall:
        return self

    def __next__(self) -> Any:
        if self._cancelled:
            self._end()
            raise LocalRpcError(grpc.StatusCode.CANCELLED, "the call was cancelled")
        if self._done:
            raise StopIteration
        try:
            client = self._connection()
            if self._more:
                payload, self._more = client.continue_call(None)
            else:
                request = self._next_request()
                if request is _REST_OF_ANSWER:
                    return self.finish(None)
                if type(request) is _Staged:
                    payload, self._more = client.call_staged(self._number, request.size, None)
                else:
                    payload, self._more = client.call(self._number, self._serialize(request), None)
        except (_core.LocalStatusError, DeadlineExceededError, OSError) as error:
            raise self._failed(error) from None
        return self._deserialize(payload)

    def _connection(self) -> Any:
        """The stream's connection, taken at its first request. (Under a
        lock: the first request may be a writer's, see ``stage``, while the
        stream's thread starts; two connections would split the stream.)"""
        with self._taking:
            if self._done:
                raise LocalRpcError(grpc.StatusCode.CANCELLED, "the call has ended")
            if self._client is None:
                self._client = self._connections.take()
            return self._client

    def _failed(self, error: BaseException) -> LocalRpcError:
        """Ends the stream after ``error``: the status to raise."""
        self._end()
        if self._cancelled:
            return LocalRpcError(grpc.StatusCode.CANCELLED, "the call was cancelled")
        return _rpc_error(error)

    # --- an insert stream's messages, written by its encoder straight into
    # the upload region (no bytes object, one copy fewer), and sent by the
    # stream's own thread (as a request) or by a writer that waits for them

    def stage(self, encoder: Any, max_items: int, max_bytes: int) -> _Staged:
        """The encoder's next message, in the upload region (called with the
        stream's lock held: the encoder is not thread-safe)."""
        try:
            return _Staged(self._connection().stage_insert(encoder, max_items, max_bytes))
        except (_core.LocalStatusError, OSError) as error:  # a region it may not have
            raise self._failed(error) from None

    @property
    def answer_pending(self) -> bool:
        """Whether (parts of) the last request's answer are still to come."""
        return self._awaiting or self._more

    @property
    def rest_of_answer(self) -> _Staged:
        """What the request iterator yields to have the stream's thread read
        the rest of an answer that a writer started to read (``finish``)."""
        return _REST_OF_ANSWER

    def _open_client(self) -> Any:
        """The connection a staged request went on; LocalRpcError once the
        call was cancelled or has ended."""
        client = self._client
        if self._cancelled or client is None:
            self._end()
            raise LocalRpcError(grpc.StatusCode.CANCELLED, "the call was cancelled")
        return client

    def start(self, staged: _Staged) -> None:
        """Sends ``staged`` without waiting for its answer (``finish``), from
        any thread, between two requests of the stream's own: the caller
        makes sure no other request is on its way (LocalRpcError if it
        failed: the stream has ended then)."""
        client = self._open_client()
        try:
            client.start(self._number, staged.size, data_tail=True)
        except (_core.LocalStatusError, DeadlineExceededError, OSError) as error:
            raise self._failed(error) from None
        self._awaiting = True

    def finish(self, timeout: float | None) -> Any:
        """The next part of the answer to the request ``start`` sent (asking
        for it first after a part that said more), or None if it did not
        come within ``timeout`` (it stays pending: finish again, on any
        thread). LocalRpcError if the call failed."""
        client = self._open_client()
        try:
            if not self._awaiting:
                client.start(_CONTINUE, 0)  # the next part of an answer in parts
                self._awaiting = True
            answer = client.finish(timeout)
        except (_core.LocalStatusError, DeadlineExceededError, OSError) as error:
            self._awaiting = False
            raise self._failed(error) from None
        if answer is None:
            return None
        self._awaiting = False
        payload, self._more = answer
        return self._deserialize(payload)

    def _next_request(self) -> Any:
        """The next request; StopIteration once the requests end."""
        try:
            request = next(self._requests)
        except BaseException:  # StopIteration included: the stream is over
            self._end()
            raise
        if self._cancelled:
            raise LocalRpcError(grpc.StatusCode.CANCELLED, "the call was cancelled")
        return request

    def watch_idle(self) -> None:
        """Raises the server's status if it ended the connection while the
        stream waits for its next request (called from the stream's thread,
        between requests)."""
        client = self._client
        if client is None or self._done:
            return
        try:
            client.check_open()
        except (_core.LocalStatusError, OSError) as error:
            self._end()
            raise _rpc_error(error) from None

    def cancel(self) -> bool:
        """Ends the stream from any thread (a call waiting on it returns)."""
        self._cancelled = True
        client = self._client
        if client is not None:
            client.shutdown()
        return True

    def done(self) -> bool:
        return self._done

    def _end(self) -> None:
        with self._taking:
            self._done = True
            client, self._client = self._client, None
        if client is not None:
            # Not reused: the server's session of an insert stream holds its
            # chunks until the connection ends.
            client.shutdown()


_MUTATE_PRIORITIES = LOCAL_METHODS["MutatePriorities"]


class LocalTransport(RemoteTransport):
    """A RemoteTransport whose calls use the server's same-host transport
    when it has one (see the module doc).

    ``address``: the server's gRPC address, or ``unix:///path`` of its
    socket (no gRPC then). ``required``: with a gRPC address, calls raise
    ConnectionError instead of using gRPC when the server offers no
    same-host transport (``Client(transport='local')``).
    """

    def __init__(self, address: str, tls: ClientTls | None = None, *, required: bool = False):
        super().__init__(address, tls)
        self._required = required
        self._look_lock = threading.Lock()
        self._local: LocalConnections | None = None
        self._looked_at = -_LOOK_AGAIN_SECONDS
        self._fixed_path = address[len(UNIX_SCHEME) :] if address.startswith(UNIX_SCHEME) else None
        grpc_info = self._info_call
        self._grpc_info = grpc_info
        P = _proto  # noqa: N806 - the message module

        def unary(name: str, grpc_method: Any, request: Any, response: Any) -> _UnaryMethod:
            return _UnaryMethod(
                self, name, grpc_method, request.SerializeToString, response.FromString
            )

        self._insert_call = _StreamMethod(
            self, "Insert", self._insert_call, None, _core.insert_response_keys
        )
        self._sample_call = _StreamMethod(
            self, "Sample", self._sample_call, P.SampleRequest.SerializeToString, None, single=True
        )
        self._sample_stream_call = _StreamMethod(
            self, "SampleStream", self._sample_stream_call, P.SampleRequest.SerializeToString, None
        )
        self._mutate_call = unary(
            "MutatePriorities", self._mutate_call, P.MutatePrioritiesRequest,
            P.MutatePrioritiesResponse,
        )  # fmt: skip
        self._mutate_stream_call = _StreamMethod(
            self, "MutatePriorities", self._mutate_stream_call,
            P.MutatePrioritiesRequest.SerializeToString, P.MutatePrioritiesResponse.FromString,
        )  # fmt: skip
        self._reset_call = unary("Reset", self._reset_call, P.ResetRequest, P.ResetResponse)
        self._info_call = unary("ServerInfo", grpc_info, P.ServerInfoRequest, P.ServerInfoResponse)
        self._checkpoint_call = unary(
            "Checkpoint", self._checkpoint_call, P.CheckpointRequest, P.CheckpointResponse
        )
        self._why_blocked_call = unary(
            "WhyBlocked", self._why_blocked_call, P.WhyBlockedRequest, P.WhyBlockedResponse
        )

    # --- the calls a learner makes most, straight on a connection: no
    # stream object, no idle-call pool (each layer cost about as much as
    # the local round trip itself)

    def sample(
        self, table: str, num_samples: int, timeout: float | None
    ) -> RemoteSampleBatch | GatheredSampleBatch:
        """One batch, gathered by the server into shared memory when every
        column stacks (one copy on this side), else as SampleResponses."""
        connections = self._local_connections()
        if connections is None:
            return super().sample(table, num_samples, timeout)
        wait = finite_timeout(timeout)
        request = _proto.SampleRequest(
            table=table, num_samples=num_samples, timeout_seconds=-1.0 if wait is None else wait
        ).SerializeToString()
        what = f"Sample from table {table!r}"
        try:
            client = connections.take()
        except LocalRpcError:
            return super().sample(table, num_samples, timeout)  # waits for the server
        try:
            # As a SampleStream's request: a timeout is an answer.
            try:
                kind, *answer = client.sample_gathered(request, num_samples)
            except ValueError as error:
                raise ValueError(f"malformed response from the server: {error}") from None
            if kind == "gathered":
                return GatheredSampleBatch(*answer)
            return RemoteSampleBatch(answer[0], until_end_of_request=True)
        except DeadlineExceededError as error:
            raise sample_timeout(error, what) from None
        except (_core.LocalStatusError, OSError) as error:
            rpc = _rpc_error(error)
            if means_unreachable(rpc) and self.wait_for_server:
                return super().sample(table, num_samples, timeout)
            raise error_from_rpc(rpc, what) from None
        finally:
            connections.give_back(client)

    def open_sample_stream(self, table: str) -> SampleStream | None:  # type: ignore[override]
        """None while the calls go over the socket: a dataset then takes its
        batches with ``sample`` (gathered, on the calling thread), which
        costs less than requests run ahead on a stream; a SampleStream over
        gRPC otherwise."""
        if self._local_connections() is not None:
            return None
        return super().open_sample_stream(table)

    def mutate_priorities(self, table: str, updates: Any, deletes: Any) -> tuple[int, int]:
        connections = self._local_connections()
        if connections is None:
            return super().mutate_priorities(table, updates, deletes)
        request = _core.encode_mutate_request(table, updates, deletes)
        try:
            answer = _call_once(connections, _MUTATE_PRIORITIES, request, None)
        except LocalRpcError as error:
            if means_unreachable(error) and self.wait_for_server:
                return super().mutate_priorities(table, updates, deletes)
            raise error_from_rpc(error, f"MutatePriorities of {table!r}") from None
        response = _proto.MutatePrioritiesResponse.FromString(answer)
        return response.num_updated, response.num_deleted

    @property
    def local_path(self) -> str | None:
        """The socket the calls use now; None while they use gRPC."""
        local = self._local
        return None if local is None or local.lost else local.path

    def close(self) -> None:
        local = self._local
        if local is not None:
            local.close()
        super().close()

    def _local_connections(self) -> LocalConnections | None:
        """The connections to use, or None for gRPC: found (again) by asking
        the server, at most every _LOOK_AGAIN_SECONDS while there is none."""
        local = self._local
        if local is not None and not local.lost:
            return local
        with self._look_lock:
            local = self._local
            if local is not None and not local.lost:
                return local
            if self._fixed_path is not None:
                if local is not None:
                    local.close()
                self._local = LocalConnections(self._fixed_path, None)
                return self._local
            now = time.monotonic()
            # Right away after losing one (a restarted server has another);
            # after finding none, not again for a while (gRPC meanwhile).
            if local is None and now - self._looked_at < _LOOK_AGAIN_SECONDS:
                self._none_found()
                return None
            if local is not None:
                local.close()
                self._local = None
            try:
                self._local = self._find()
            except grpc.RpcError as error:
                # The server is not reachable now: looked for again at the
                # next call. gRPC's call waits for it (or says why not); a
                # client that must use the socket waits the same way.
                if self._required:
                    raise LocalRpcError(grpc.StatusCode.UNAVAILABLE, _details(error)) from None
                return None
            except ValueError:
                return None  # the transport closed: gRPC's call says so
            if self._local is None:
                self._looked_at = now  # it answered, with no endpoint to use
            if self._local is None:
                self._none_found()
            return self._local

    def _none_found(self) -> None:
        """Raises ConnectionError if the socket is required (else gRPC is used)."""
        if self._required:
            raise ConnectionError(
                f"the server at {self.address} offers no same-host transport that this process "
                "reaches (another host, another user, or started with local_transport=False); "
                "use transport='auto' or 'grpc'"
            )

    def _find(self) -> LocalConnections | None:
        """The server's endpoint, if it advertises one that answers with the
        advertised token; None if it has none (gRPC is used then)."""
        # grpc.RpcError if the server is not reachable, ValueError if the
        # transport closed: the caller decides.
        response = self._grpc_info(_proto.ServerInfoRequest(), timeout=_CONNECT_SECONDS)
        address = response.local_address
        if not address.startswith(UNIX_SCHEME) or not response.local_token_sha256:
            return None
        connections = LocalConnections(address[len(UNIX_SCHEME) :], response.local_token_sha256)
        try:
            connections.give_back(connections.take())
        except LocalRpcError as error:
            # Another host's socket, another user's, another server's: gRPC.
            _LOGGER.debug("not using %s: %s", address, error.details())
            return None
        return connections

    def _socket_only(self) -> bool:
        """Whether every call goes over the socket (an explicit address, or
        transport='local'): waits for the server then watch the socket,
        not a gRPC channel that no call uses."""
        return self._required or self._fixed_path is not None

    def _channel_ready(self) -> bool:
        if not self._socket_only():
            return super()._channel_ready()
        try:
            connections = self._local_connections()
            assert connections is not None
            connections.give_back(connections.take())
            return True
        except (LocalRpcError, ConnectionError):
            return False

    def _wait_for_channel(
        self, outage: Any, deadline: float | None, what: str, timeout: Any
    ) -> None:
        if not self._socket_only():
            super()._wait_for_channel(outage, deadline, what, timeout)
            return
        # The socket (found again through gRPC where the address is gRPC's)
        # is tried a slice apart until it answers or the deadline passes.
        outage.warn_if_due(what)
        pause = threading.Event()
        while not self._channel_ready():
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise outage.deadline_error(what, timeout)
            if outage.until_warning() == 0.0:
                return  # the caller tries again, and warns
            pause.wait(min(0.05, left) if left is not None else 0.05)
