"""The same-host transport's client (docs/local-transport.md).

A ``LocalTransport`` is a ``RemoteTransport`` whose calls go over the
server's Unix socket and shared memory instead of gRPC, carrying the same
request and response messages: each of the transport's gRPC methods is
replaced by a local one of the same shape (``UnaryMethod``,
``StreamMethod`` of local_calls.py), so that everything the gRPC transport does with its
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

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import grpc

from resound import _core, _proto, wait_warnings
from resound._transport.gathered_batch import GatheredSampleBatch
from resound._transport.local_calls import StreamMethod, UnaryMethod
from resound._transport.local_connections import (
    CONNECT_SECONDS,
    LocalConnections,
    LocalRpcError,
    rpc_error,
)
from resound._transport.remote import RemoteTransport
from resound._transport.sample_stream import RemoteSampleBatch, SampleStream, sample_timeout
from resound._wire.status import error_from_rpc, means_unreachable
from resound._wire.timeouts import finite_timeout
from resound.errors import DeadlineExceededError
from resound.tls import ClientTls

__all__ = ["UNIX_SCHEME", "LocalRpcError", "LocalTransport"]

_LOGGER = logging.getLogger("resound")

T = TypeVar("T")

UNIX_SCHEME = "unix://"
# After finding no endpoint, gRPC is used this long before looking again.
_LOOK_AGAIN_SECONDS = 2.0
# insert_step waits this long for its items before a watchdog (which warns
# of a long wait) is set up, then in slices this long.
_STEP_WAIT_SECONDS = 0.05
_STEP_SLICE_SECONDS = 0.5


def _details(error: grpc.RpcError) -> str:
    details = getattr(error, "details", None)
    return str(details() if callable(details) else error)


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

        def unary(name: str, grpc_method: Any, request: Any, response: Any) -> UnaryMethod:
            return UnaryMethod(
                self, name, grpc_method, request.SerializeToString, response.FromString
            )

        self._insert_call = StreamMethod(
            self, "Insert", self._insert_call, None, _core.insert_response_keys
        )
        self._sample_call = StreamMethod(
            self, "Sample", self._sample_call, P.SampleRequest.SerializeToString, None, single=True
        )
        self._sample_stream_call = StreamMethod(
            self, "SampleStream", self._sample_stream_call, P.SampleRequest.SerializeToString, None
        )
        self._mutate_call = unary(
            "MutatePriorities", self._mutate_call, P.MutatePrioritiesRequest,
            P.MutatePrioritiesResponse,
        )  # fmt: skip
        self._mutate_stream_call = StreamMethod(
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
        what = f"Sample from table {table!r}"

        def on_socket(client: Any) -> RemoteSampleBatch | GatheredSampleBatch:
            wait = finite_timeout(timeout)
            request = _core.encode_sample_request(
                table, num_samples, -1.0 if wait is None else wait
            )
            try:
                kind, *answer = client.sample_gathered(request, num_samples)
            except ValueError as error:
                raise ValueError(f"malformed response from the server: {error}") from None
            if kind == "gathered":
                return GatheredSampleBatch(*answer)
            return RemoteSampleBatch(answer[0], until_end_of_request=True)

        return self._on_socket(
            on_socket,
            lambda: super(LocalTransport, self).sample(table, num_samples, timeout),
            what,
            # As a SampleStream's request: a timeout is an answer.
            on_timeout=lambda error: sample_timeout(error, what),
        )

    def open_sample_stream(self, table: str) -> SampleStream | None:  # type: ignore[override]
        """None while the calls go over the socket: a dataset then takes its
        batches with ``sample`` (gathered, on the calling thread), which
        costs less than requests run ahead on a stream; a SampleStream over
        gRPC otherwise."""
        if self._local_connections() is not None:
            return None
        return super().open_sample_stream(table)

    def mutate_priorities(self, table: str, updates: Any, deletes: Any) -> tuple[int, int]:
        # (Written, sent and read in the core: bad updates raise ValueError.)
        return self._on_socket(
            lambda client: client.mutate_priorities(table, updates, deletes),
            lambda: super(LocalTransport, self).mutate_priorities(table, updates, deletes),
            f"MutatePriorities of {table!r}",
        )

    def insert_step(
        self, items: list[tuple[str, int, float]], arrays: list[Any], chunk_keys: list[int],
        episode_id: int,
    ) -> bool:  # fmt: skip
        """In one message on a pooled connection: the step's chunks, its
        items, and the chunks' release once the items hold them (see
        ``_core.LocalClient.insert_step``). False while the calls go over
        gRPC, and when the server is not reachable (or, to a client of
        several, stopped): the caller's general path then waits for it,
        fails over to another server or says why not, and sends the step
        with the same keys."""
        try:
            connections = self._local_connections()
            if connections is None:
                return False
            client = connections.take()
        except LocalRpcError:
            return False
        started = time.monotonic()
        ended = True  # unless answered: the session may hold the step's chunks
        try:
            wait = _STEP_WAIT_SECONDS
            confirmed, answered = client.insert_step(items, arrays, chunk_keys, episode_id, wait)
            if not answered:
                self._wait_for_step(client, items, confirmed, started)
            ended = False
            return True
        except ValueError:
            # Refused before it was sent (or a malformed answer, which shut
            # the connection): the connection is as it was.
            ended = False
            raise
        except (_core.LocalStatusError, OSError) as error:
            rpc = rpc_error(error)
            # A server that stopped is gone to a client of several (its
            # general path's stream fails over), as one not reachable is
            # to any client.
            stopped = rpc.code() == grpc.StatusCode.CANCELLED and self.failover is not None
            if means_unreachable(rpc) or stopped:
                return False
            raise error_from_rpc(rpc, "Insert") from None
        finally:
            if ended:
                client.shutdown()
            connections.give_back(client)

    def _wait_for_step(
        self, client: Any, items: list[tuple[str, int, float]], confirmed: int, started: float
    ) -> None:
        """The rest of insert_step's wait, for as long as the rate limiters
        hold its items, in slices (an interrupt is seen between them); a
        watchdog warns while it lasts (resound.wait_warnings)."""
        keys = [key for _, key, _ in items]
        blocked = wait_warnings.BlockedWait(wait_warnings.WRITER_LOGGER, "insert", started)

        def why() -> str:
            return self._why_insert(items[min(confirmed, len(items) - 1)][0])

        answered = False
        with wait_warnings.watching(blocked, why):
            while not answered:
                confirmed, answered = client.insert_step_wait(keys, confirmed, _STEP_SLICE_SECONDS)

    def _on_socket(
        self,
        call: Callable[[Any], T],
        over_grpc: Callable[[], T],
        what: str,
        on_timeout: Callable[[DeadlineExceededError], BaseException] | None = None,
    ) -> T:
        """``call(connection)`` on a pooled connection to the socket, or
        ``over_grpc()`` while there is none, and when the server is away
        (gRPC's call waits for it). Other failures raise as the gRPC call's
        would, naming ``what``; a timeout raises ``on_timeout(error)`` if
        given."""
        connections = self._local_connections()
        if connections is None:
            return over_grpc()
        try:
            client = connections.take()
        except LocalRpcError:
            return over_grpc()  # waits for the server
        try:
            return call(client)
        except DeadlineExceededError as error:
            if on_timeout is not None:
                raise on_timeout(error) from None
            raise error_from_rpc(rpc_error(error), what) from None
        except (_core.LocalStatusError, OSError) as error:
            rpc = rpc_error(error)
            if means_unreachable(rpc) and self.wait_for_server:
                return over_grpc()
            raise error_from_rpc(rpc, what) from None
        finally:
            connections.give_back(client)

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
        response = self._grpc_info(_proto.ServerInfoRequest(), timeout=CONNECT_SECONDS)
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
