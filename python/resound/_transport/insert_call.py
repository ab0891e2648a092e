"""``Client.insert`` without a timeout, over an open Insert stream whose
caller reads its own confirmation (see resound._transport.remote).

An InsertStream (insert_stream.py) sends on gRPC's request thread and
receives on a thread of its own, which hands each confirmation to the
waiting writer: right for writers that keep many items in flight, but one
item per call then pays two thread handoffs on top of the round trip. Here
the calling thread sends its items and reads the confirmation itself, as a
bare grpcio ping-pong does. A call waits as long as the server holds its
items (the rate limiter), so calls with a timeout keep the InsertStream.

A lost connection is waited for like any call of the transport; the items
not confirmed are then sent again on a new stream (they are keyed, so
nothing is stored twice). One caller at a time per InsertCall: the
transport keeps a few idle ones.

Example:
    >>> call = InsertCall(transport)  # doctest: +SKIP
    >>> call.insert('replay', [(key, 1.0, trajectory)])  # doctest: +SKIP
    >>> call.close()  # doctest: +SKIP
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import grpc

from resound import _core
from resound._transport.insert_stream import _MAX_BYTES_PER_MESSAGE, _MAX_ITEMS_PER_MESSAGE
from resound._transport.outbox_call import OutboxCall
from resound._wire.status import error_from_rpc, means_unreachable
from resound.errors import CancelledError

if TYPE_CHECKING:
    from resound._transport.remote import RemoteTransport

__all__ = ["InsertCall"]


class InsertCall:
    """One Insert stream used call by call; see the module docstring."""

    def __init__(self, transport: RemoteTransport) -> None:
        self._transport = transport
        self._encoder = _core.InsertRequestEncoder(transport._store)
        self._call: OutboxCall | None = None

    def insert(self, table: str, requests: list[Any]) -> None:
        """Sends ``requests`` ((key, priority, trajectory) triples) and
        returns once the server confirmed them all."""
        encoder = self._encoder
        for key, priority, trajectory in requests:
            encoder.add(table, key, priority, trajectory)
        transport = self._transport
        while True:
            try:
                if self._call is None:
                    self._call = OutboxCall(transport._insert_call)
                self._send_queued(self._call)
                self._receive_confirmations(self._call)
                transport._outage = None
                return
            except grpc.RpcError as error:
                self._end_call()
                if error.code() == grpc.StatusCode.CANCELLED:
                    self._drop_unconfirmed()
                    raise CancelledError("Insert: the server stopped") from None
                if not (means_unreachable(error) and transport.wait_for_server):
                    self._drop_unconfirmed()
                    raise error_from_rpc(error, "Insert") from None
                outage = transport._note_outage(error)
                transport._wait_for_channel(outage, None, "Insert", None)
                # A new stream: the server keeps nothing of the old one.
                encoder.requeue()
            except BaseException:  # a stopping server, an interrupt: start afresh next time
                self._end_call()
                self._drop_unconfirmed()
                raise

    @property
    def ended(self) -> bool:
        """Whether its stream ended while idle (its server stopped)."""
        return self._call is not None and self._call.ended

    def close(self) -> None:
        """Ends the stream. Idempotent."""
        self._end_call()

    def _send_queued(self, call: OutboxCall) -> None:
        encoder = self._encoder
        while encoder.queued:  # messages as an InsertStream's
            call.send(encoder.take_message(_MAX_ITEMS_PER_MESSAGE, _MAX_BYTES_PER_MESSAGE))

    def _receive_confirmations(self, call: OutboxCall) -> None:
        encoder = self._encoder
        while encoder.unconfirmed:
            try:
                response = next(call.responses)
            except StopIteration:  # the server ended the stream: it is stopping
                raise CancelledError("Insert: the server stopped") from None
            encoder.confirm(response)  # the confirmed keys

    def _drop_unconfirmed(self) -> None:
        """After a failure the caller raises: a later call starts afresh."""
        self._encoder = _core.InsertRequestEncoder(self._transport._store)

    def _end_call(self) -> None:
        if self._call is not None:
            self._call.end()
            self._call = None
