"""The same-host transport's calls in the shapes of gRPC's (see
resound._transport.local): ``UnaryMethod`` as a unary-unary method,
``StreamMethod`` as a stream-stream (or unary-stream) one, whose calls
(``StreamCall``) run on the caller's thread, one connection each.

Example:
    >>> method = UnaryMethod(transport, 'Reset', grpc_method, serialize, parse)  # doctest: +SKIP
    >>> response = method(request, timeout=5.0)  # doctest: +SKIP
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import grpc

from resound import _core
from resound._transport.local_connections import (
    LocalConnections,
    LocalRpcError,
    call_once,
    rpc_error,
)
from resound._wire.local_methods import LOCAL_METHODS
from resound.errors import DeadlineExceededError

if TYPE_CHECKING:
    from resound._transport.local import LocalTransport

__all__ = ["StreamCall", "StreamMethod", "UnaryMethod"]


class UnaryMethod:
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
        payload = call_once(connections, self._number, self._serialize(request), timeout)
        return self._deserialize(payload)


class StreamMethod:
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
        return StreamCall(connections, self._number, incoming, self._serialize, self._deserialize)


class _Staged:
    """A request already written into the connection's upload region
    (``StreamCall.stage``): its size."""

    __slots__ = ("size",)

    def __init__(self, size: int) -> None:
        self.size = size


# What a stream's request iterator yields to read the rest of an answer
# that a writer started to read (see StreamCall.finish).
_REST_OF_ANSWER = _Staged(0)
_CONTINUE = 0  # the local method that asks for an answer's next part


class StreamCall:
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

    def __iter__(self) -> StreamCall:
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
        return rpc_error(error)

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
    def answer_in_parts(self) -> bool:
        """Whether the last answer read said more is to come and that rest
        is not read yet (``finish`` asks for it, and reads it)."""
        return self._more

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

    def exchange(
        self, encoder: Any, keep: int, max_items: int, max_bytes: int, wait: float
    ) -> tuple[int, bool]:
        """A waiting writer's turn on an insert stream, in one call to the
        core (``LocalClient.exchange_insert``): reads the answer to the
        message ``start`` (or an earlier turn) sent, waiting up to ``wait``
        seconds for it, confirms its items in ``encoder`` and sends the
        queued ones, until at most ``keep`` items are in flight; then sends
        what is still queued ahead. Returns (items confirmed, whether it
        sent a message). Called with the stream's lock held, between two
        requests of the stream's own and with no answer in parts unread;
        LocalRpcError if the call failed, ValueError for a malformed answer.
        """
        if self._client is None:
            self._connection()  # (a writer's turn may come before the stream's first request)
        client = self._open_client()
        try:
            confirmed, sent, self._awaiting = client.exchange_insert(
                self._number, encoder, keep, max_items, max_bytes, wait
            )
        except (_core.LocalStatusError, DeadlineExceededError, OSError) as error:
            self._awaiting = False
            raise self._failed(error) from None
        except BaseException:  # a malformed answer (ValueError): nothing is pending
            self._awaiting = False
            raise
        return confirmed, sent

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
            raise rpc_error(error) from None

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
