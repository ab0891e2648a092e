"""A Client's transport: which one, for which servers, and when it changes.

``transport_for(target, ...)`` is the one place that decides:

* several servers (a list, ``ipv4:``, ``dns:``): a ``ServerSet`` over one
  ``AddressTransport`` per server;
* one address: an ``AddressTransport``. With ``kind='auto'`` it calls a
  server of this process directly (``EmbeddedTransport``) and any other
  over gRPC (``RemoteTransport``), and chooses again at every call: a
  server of this process may start at the address later (the gRPC
  transport is then closed and replaced), and a stopped one may be
  replaced by a new one at the same address (as a remote client would
  reconnect; until then its calls raise CancelledError). A server in
  another process is called over its same-host transport where it has one
  this process reaches (``LocalTransport``), else over gRPC. With
  ``kind='grpc'`` it always uses gRPC; with ``kind='local'`` only the
  same-host transport.

gRPC is imported only when a gRPC transport is made, so that a client of an
embedded server never loads it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from resound._transport import local_servers
from resound._transport.embedded import EmbeddedTransport

if TYPE_CHECKING:
    from resound._table_host import TableHost
    from resound._transport.protocol import ServerTransport, TableMeta, Take, Transport
    from resound._transport.sample_stream import SampleStream
    from resound._transport.targets import Target
    from resound.priority_histogram import PriorityHistogram
    from resound.table_info import TableInfo
    from resound.tls import ClientTls

__all__ = ["AddressTransport", "in_process_transport", "transport_for"]

KINDS = ("auto", "grpc", "local")


def transport_for(
    target: Target,
    kind: str = "auto",
    *,
    failover: bool = True,
    tls: ClientTls | None = None,
    turn: int | None = None,
) -> Transport:
    """The transport of a Client of ``target`` (see the module doc);
    ``turn``: where a client of several servers starts its turns (a pickled
    copy's, see ``Transport.turn_for_copy``)."""
    if kind not in KINDS:
        raise ValueError(f"transport must be 'auto', 'grpc' or 'local', got {kind!r}")
    if not target.several:
        return AddressTransport(target.text, kind, tls)
    # Imported here: a set of servers talks gRPC (ServerSet imports grpc).
    from resound._transport.server_set import ServerSet

    servers = ServerSet(target, lambda address: AddressTransport(address, kind, tls), failover)
    if turn is not None:
        servers.start_turns_at(turn)
    return servers


def in_process_transport(server: TableHost) -> AddressTransport:
    """The transport of ``server.in_process_client()``: its tables, directly."""
    embedded = EmbeddedTransport(server)
    return AddressTransport(embedded.address, "auto", None, embedded)


class AddressTransport:
    """The Transport of one server address, embedded or gRPC as the module
    doc says: each call goes to the transport ``chosen()`` returns then."""

    def __init__(
        self,
        address: str,
        kind: str,
        tls: ClientTls | None,
        current: ServerTransport | None = None,
    ) -> None:
        self._address = address
        self._kind = kind
        self._tls = tls
        self._current = current
        self._looked_at = -1  # local_servers.generation() when last looked (see chosen)

    @property
    def current(self) -> ServerTransport | None:
        """The transport chosen last (None before the first call), without
        choosing again."""
        return self._current

    def chosen(self) -> ServerTransport:
        """The transport to call now: chooses again (see the module doc)."""
        transport = self._current
        if transport is not None and not isinstance(transport, EmbeddedTransport):
            if self._kind != "auto":  # 'grpc' and 'local' never switch
                return transport
            # A server of this process may have started at the address since
            # (looked for again only after a server registered).
            generation = local_servers.generation()
            if generation == self._looked_at:
                return transport
            server = local_servers.find_local_server(self._address)
            if server is None:
                self._looked_at = generation
                return transport
            transport.close()
            transport = self._current = EmbeddedTransport(server, self._address)
            return transport
        # A stopped server may have been replaced by a new one at the same
        # address (as a remote client would reconnect); else its calls raise
        # CancelledError.
        if transport is None or not transport.server.running:
            server = None
            if self._kind == "auto":
                server = local_servers.find_local_server(self._address)
            if server is None:
                if transport is not None:
                    return transport
                transport = self._current = _remote_transport(self._address, self._kind, self._tls)
                return transport
            transport = self._current = EmbeddedTransport(server, self._address)
        return transport

    # --- the Transport protocol, each call on the transport chosen now

    @property
    def addresses(self) -> list[str]:
        return [self._address]

    def one_server(
        self, tables: Iterable[str] = (), timeout: float | None = None
    ) -> ServerTransport:
        del tables, timeout  # one address: nothing to choose between
        return self.chosen()

    def table_info_for_writer(self, name: str, timeout: float | None = None) -> TableMeta:
        return self.chosen().table_info_for_writer(name, timeout)

    def taker(self, table: str, *, flexible: bool = False) -> Take:
        return self.chosen().taker(table, flexible=flexible)

    def open_sample_stream(self, table: str) -> SampleStream | None:
        return self.chosen().open_sample_stream(table)

    def signature(self, table: str) -> Any:
        return self.chosen().signature(table)

    def mutate_priorities(
        self,
        table: str,
        updates: Mapping[int, float] | Iterable[tuple[int, float]] | tuple[Any, Any] | None,
        deletes: Iterable[int] | None,
    ) -> tuple[int, int]:
        return self.chosen().mutate_priorities(table, updates, deletes)

    def reset(self, table: str) -> None:
        self.chosen().reset(table)

    def server_info(self, timeout: float | None) -> dict[str, TableInfo]:
        return self.chosen().server_info(timeout)

    def server_infos(self, timeout: float | None) -> dict[str, dict[str, TableInfo]]:
        # By the address as the client was given it.
        return {self._address: self.chosen().server_info(timeout)}

    def priority_histogram(self, table: str, bins: int, timeout: float | None) -> PriorityHistogram:
        return self.chosen().priority_histogram(table, bins, timeout)

    def priority_histograms(
        self, table: str, bins: int, timeout: float | None
    ) -> dict[str, PriorityHistogram]:
        # By the address as the client was given it.
        return {self._address: self.chosen().priority_histogram(table, bins, timeout)}

    def checkpoint(self) -> str:
        return self.chosen().checkpoint()

    def turn_for_copy(self) -> int | None:
        return None

    def close_client_stream(self) -> None:
        if self._current is not None:  # nothing to choose: it is about what was opened
            self._current.close_client_stream()

    def close(self) -> None:
        if self._current is not None:
            self._current.close()


def _remote_transport(address: str, kind: str, tls: ClientTls | None) -> ServerTransport:
    """The transport of a server in another process: over gRPC, or its
    same-host transport where it has one that this process reaches ('auto'
    uses it then, 'local' requires it; a ``unix://`` address is one)."""
    # Imported here, on first use: gRPC is loaded only by clients that use it.
    from resound import _core
    from resound._transport.remote import RemoteTransport

    if _core.HAS_LOCAL_TRANSPORT and (kind != "grpc" or address.startswith("unix://")):
        from resound._transport.local import LocalTransport

        return LocalTransport(address, tls, required=kind == "local")
    if kind == "local":
        raise ValueError("transport='local' needs the same-host transport, which only Linux has")
    return RemoteTransport(address, tls)
