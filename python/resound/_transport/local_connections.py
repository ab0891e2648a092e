"""The same-host transport's connections (docs/local-transport.md): a pool
of ``_core.LocalClient`` connections to one server's socket, each checked
against the token the server advertised, and the ``grpc.RpcError`` a failed
local call raises (the status its gRPC call would have).

Example:
    >>> connections = LocalConnections('/run/replay.sock', None)  # doctest: +SKIP
    >>> answer = call_once(connections, LOCAL_METHODS['ServerInfo'], b'', 5.0)  # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import threading
from typing import Any

import grpc

from resound import _core
from resound.errors import DeadlineExceededError

__all__ = ["CONNECT_SECONDS", "LocalConnections", "LocalRpcError", "call_once", "rpc_error"]

# Each connection's shared memory, each way: a sample answer larger than
# this comes in parts (one item larger than it, through a larger region).
_REGION_BYTES = 64 << 20
_IDLE_CONNECTIONS = 8
# The process's payload arena (address space; pages cost memory once
# written): its writers' chunks of 64 KB and more are built there, and the
# server copies them straight out of it instead of out of a copy of them in
# the connection's region (one copy of a 400 KB step fewer). Chunks beyond
# it are made in ordinary memory and copied, as before.
_PAYLOAD_ARENA_BYTES = 1 << 30
CONNECT_SECONDS = 5.0
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


def rpc_error(error: BaseException) -> LocalRpcError:
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
        # Without the lock: list.pop is atomic, and one that close() swapped
        # out is still handed back (give_back checks under the lock). A
        # take racing close() may get a connection close() is shutting down:
        # its call fails as UNAVAILABLE, as calls of a closing transport do.
        try:
            return self._idle.pop()
        except IndexError:
            pass
        try:
            client = _core.LocalClient(self.path, _REGION_BYTES, _REGION_BYTES, CONNECT_SECONDS)
        except BaseException as error:
            self.lost = True
            raise rpc_error(error) from None
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
        try:
            client.attach_arena(_PAYLOAD_ARENA_BYTES, CONNECT_SECONDS)
        except BaseException as error:
            client.shutdown()
            self.lost = True
            raise rpc_error(error) from None
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


def call_once(
    connections: LocalConnections, number: int, request: bytes, timeout: float | None
) -> bytes:
    """One request of a one-part answer on a pooled connection (LocalRpcError
    if it failed)."""
    client = connections.take()
    try:
        payload, _ = client.call(number, request, timeout)
    except (_core.LocalStatusError, DeadlineExceededError, OSError) as error:
        raise rpc_error(error) from None
    finally:
        connections.give_back(client)
    return payload
