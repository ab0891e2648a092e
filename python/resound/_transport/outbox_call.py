"""A bidirectional gRPC call whose requests the caller puts in an outbox.

grpcio's synchronous stream calls read their requests from an iterator on a
thread of their own. ``OutboxCall`` gives that thread a queue to read, so
the caller sends a message with ``send`` and reads the answers from
``responses`` on its own thread, as a ping-pong over one open stream wants
(used by InsertCall and SampleStream).

Example:
    >>> call = OutboxCall(channel.stream_stream('/pkg.Service/Method'))  # doctest: +SKIP
    >>> call.send(request_bytes)  # doctest: +SKIP
    >>> answer = next(call.responses)  # doctest: +SKIP
    >>> call.end()  # doctest: +SKIP
"""

from __future__ import annotations

import queue
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import grpc

__all__ = ["OutboxCall"]

# Ends the request iterator, which frees gRPC's request thread.
_NO_MORE_REQUESTS = None


class _Ended(grpc.RpcError):
    """A call that ended without a status: the server stopped it."""

    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.CANCELLED

    def details(self) -> str:
        return "the call ended without an answer"


class OutboxCall:
    """Opens ``open_call(requests)``, ``first`` sent at once (e.g. requests
    not answered on an earlier call); ``responses`` iterates the answers."""

    def __init__(
        self, open_call: Callable[[Iterator[Any]], Any], first: Iterable[Any] = ()
    ) -> None:
        outbox: queue.SimpleQueue[Any] = queue.SimpleQueue()
        for message in first:
            outbox.put(message)

        def requests() -> Iterator[Any]:
            while (message := outbox.get()) is not _NO_MORE_REQUESTS:
                yield message

        self._outbox = outbox
        self._call = open_call(requests())
        self.responses: Iterator[Any] = iter(self._call)

    def send(self, message: Any) -> None:
        self._outbox.put(message)

    @property
    def ended(self) -> bool:
        """Whether the call has ended (its status arrived): a call kept open
        between uses may have ended meanwhile, e.g. with its server's stop."""
        return self._call.done()

    def ask(self, message: Any) -> Any:
        """Sends ``message`` and returns the next answer, for calls that
        answer each request with one response. grpc.RpcError if the call
        ended with a status, which it also does when it ended without one."""
        self._outbox.put(message)
        try:
            return next(self.responses)
        except StopIteration:
            raise _Ended() from None

    def end(self) -> None:
        """Ends the requests and cancels the call (answers not read are dropped)."""
        self._outbox.put(_NO_MORE_REQUESTS)
        self._call.cancel()
