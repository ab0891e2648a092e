"""The listening table hosts (``resound.Server``s) of this process, by port.

A server registers itself when it starts listening and leaves when it
stops; a client given an address of this machine finds it here and calls
its tables directly (resound._transport.factory) instead of over gRPC.
The registry holds the servers weakly: a server nobody references goes.
"""

from __future__ import annotations

import socket
import threading
import weakref
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from resound._table_host import TableHost

__all__ = ["find_local_server", "generation", "listening_servers", "register", "unregister"]

_LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1", "[::1]", "0.0.0.0", "[::]", "")
_servers_by_port: weakref.WeakValueDictionary[int, TableHost] = weakref.WeakValueDictionary()
_registry_lock = threading.Lock()
_generation = 0  # counts registrations: see generation()


def generation() -> int:
    """A number that changes whenever a server registers: a client that
    found no server of this process at its address need not look again
    until it does."""
    return _generation


def register(port: int, server: TableHost) -> None:
    """``server`` listens on ``port`` from now on."""
    global _generation
    with _registry_lock:
        _servers_by_port[port] = server
        _generation += 1


def unregister(port: int, server: TableHost) -> None:
    """``server`` stopped listening on ``port`` (a server registered there
    since is kept)."""
    with _registry_lock:
        if _servers_by_port.get(port) is server:
            del _servers_by_port[port]


def listening_servers() -> list[TableHost]:
    """Every registered server (running or not)."""
    with _registry_lock:
        return list(_servers_by_port.values())


def find_local_server(address: str) -> TableHost | None:
    """The running server of this process that ``address`` names, if any."""
    target = address
    for prefix in ("dns:///", "ipv4:", "ipv6:"):
        if target.startswith(prefix):
            target = target[len(prefix) :]
    host, _, port = target.rpartition(":")
    if host not in _LOCAL_HOSTS and host != socket.gethostname():
        return None
    try:
        number = int(port)
    except ValueError:
        return None
    with _registry_lock:
        server = _servers_by_port.get(number)
    return server if server is not None and server.running else None
