"""A listening server's same-host endpoint (docs/local-transport.md).

``LocalEndpoint`` serves the server's tables on a Unix socket in a directory
of its own (mode 0700: only the server's user can enter it), on the core's
C++ threads: Insert, Sample and SampleStream run there without the GIL; the
other calls (priorities, reset, infos, why_blocked, checkpoint) come here,
to the gRPC servicer's own handlers, run on its event loop, so that both
transports answer them alike.

Clients find the endpoint in ``ServerInfoResponse.local_address``; the
socket hands each connection a token whose SHA-256 the same response
carries, which proves to a client that the socket it reached belongs to the
server it asked.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import secrets
import shutil
import tempfile
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from resound import _core, _proto
from resound._service.servicer import _status_of
from resound._wire.local_methods import LOCAL_METHODS

if TYPE_CHECKING:
    from resound._service.servicer import ReplayServicer
    from resound._table_host import TableHost

__all__ = ["LocalEndpoint"]

_LOGGER = logging.getLogger("resound")

MAX_CONNECTIONS = 1024
# A Unix socket's path holds at most 107 bytes.
_MAX_SOCKET_PATH = 107


class LocalEndpoint:
    """Serves ``server``'s tables on a new socket; ``servicer`` and ``loop``
    answer the calls the core hands back. A connection's shared memory is at
    most ``max_message_bytes`` each way (the largest message gRPC takes);
    ``uids``: the users let in (None: the server's own)."""

    def __init__(
        self,
        server: TableHost,
        servicer: ReplayServicer,
        loop: asyncio.AbstractEventLoop,
        store: _core.ChunkStore,
        max_bytes: int | None,
        max_message_bytes: int,
        uids: Sequence[int] | None = None,
    ) -> None:
        self._servicer = servicer
        self._loop = loop
        self._directory = _private_directory()
        self.path = os.path.join(self._directory, "replay.sock")
        token = secrets.token_bytes(32)
        self.token_sha256 = hashlib.sha256(token).digest()
        self.address = f"unix://{self.path}"
        allowed = [os.geteuid()] if uids is None else [int(uid) for uid in uids]
        handlers: dict[int, tuple[Any, Callable[..., Any]]] = {
            LOCAL_METHODS["MutatePriorities"]: (
                _proto.MutatePrioritiesRequest,
                servicer.mutate_priorities,
            ),
            LOCAL_METHODS["Reset"]: (_proto.ResetRequest, servicer.reset),
            LOCAL_METHODS["ServerInfo"]: (_proto.ServerInfoRequest, servicer.server_info),
            LOCAL_METHODS["WhyBlocked"]: (_proto.WhyBlockedRequest, servicer.why_blocked),
            LOCAL_METHODS["Checkpoint"]: (_proto.CheckpointRequest, servicer.checkpoint),
        }
        self._handlers = handlers
        try:
            self._core = _core.LocalServer(
                self.path,
                {name: table._core for name, table in server.tables.items()},
                store,
                max_bytes,
                token,
                allowed,
                MAX_CONNECTIONS,
                max_message_bytes,
                self._answer,
            )
        except BaseException:
            shutil.rmtree(self._directory, ignore_errors=True)
            raise
        _LOGGER.debug("same-host transport on %s", self.address)

    @property
    def num_connections(self) -> int:
        return int(self._core.num_connections)

    def stop(self) -> None:
        """Ends every connection and removes the socket's directory."""
        self._core.stop()
        shutil.rmtree(self._directory, ignore_errors=True)

    def _answer(self, method: int, raw: bytes) -> bytes:
        """A call the core hands back (on one of its threads, with the GIL):
        the servicer's handler, run on the server's event loop."""
        entry = self._handlers.get(method)
        if entry is None:
            raise _core.LocalStatusError(12, f"unknown method {method}")  # UNIMPLEMENTED
        request_class, handler = entry
        try:
            request = request_class.FromString(raw)
        except Exception as error:  # noqa: BLE001 - protobuf's DecodeError and kin
            name = request_class.DESCRIPTOR.name
            raise _core.LocalStatusError(3, f"malformed {name}: {error}") from None
        future = asyncio.run_coroutine_threadsafe(handler(request, None), self._loop)
        try:
            response = future.result()
        except BaseException as error:  # noqa: BLE001 - every failure becomes a status
            code, message = _status_of(error)  # a _StatusError's own code too
            raise _core.LocalStatusError(code.value[0], message) from None
        return bytes(response.SerializeToString())


def _private_directory() -> str:
    """A new directory only this user can enter, short enough for a socket
    path inside it (the temporary directory, else /tmp)."""
    for root in (tempfile.gettempdir(), "/tmp"):
        if len(os.path.join(root, "resound-local-xxxxxxxx", "replay.sock")) <= _MAX_SOCKET_PATH:
            with contextlib.suppress(OSError):
                return tempfile.mkdtemp(prefix="resound-local-", dir=root)  # mode 0700
    raise OSError("no temporary directory short enough for a Unix socket path")
