"""``resound.Server``: hosts tables for clients.

``Server(tables)`` serves the tables over gRPC on ``127.0.0.1:<port>``:
clients in other processes reach it with ``Client('localhost:<port>')``.
Only this machine can connect unless ``host`` says otherwise: serving other
hosts (``host='0.0.0.0'`` or an interface's address) is an explicit choice;
do it on trusted networks, or with ``tls=resound.ServerTls(...)`` (TLS, and
client certificates when it has a ``client_ca``). ``Server(tables,
listen=False)`` is the embedded mode: no socket at all, only in-process
clients, which call the C++ core directly. A
``Client`` given the address of a server in the same process also takes the
in-process path.

Example:
    >>> import resound
    >>> with resound.Server([resound.Table.queue('q', 10)], listen=False) as server:
    ...     client = server.in_process_client()
    ...     client.insert([1.0, 2.0], priorities={'q': 1.0})
    ...     [s.data for s in client.sample('q', emit_timesteps=False)]
    [[array([1.]), array([2.])]]
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from resound import _core
from resound._service.call_limits import (
    DEFAULT_MAX_OPEN_CALLS,
    DEFAULT_MAX_OPEN_CALLS_PER_CONNECTION,
    CallLimits,
)
from resound._service.response_budget import (
    DEFAULT_MAX_INFLIGHT_BYTES,
    DEFAULT_MAX_INFLIGHT_BYTES_PER_CONNECTION,
    ResponseBudget,
)
from resound._transport import local_servers
from resound._transport.malloc_thresholds import keep_message_buffers_warm
from resound._wire.channel_options import CHANNEL_OPTIONS, MAX_MESSAGE_BYTES, server_keepalive
from resound.checkpointers import (
    CheckpointerBase,
    DefaultCheckpointer,
    ServerTempCheckpointer,
    checkpoint_file,
)
from resound.client import Client
from resound.errors import CancelledError, NotFoundError
from resound.table import Table, shared_chunk_store
from resound.tls import ServerTls

# Start, stop, restores and checkpoints, at INFO (shown once the application
# configures logging, as resound-server does).
if TYPE_CHECKING:
    from resound._service.local_endpoint import LocalEndpoint

_LOGGER = logging.getLogger("resound.server")

__all__ = ["Server"]

# The smallest max_message_bytes: twice what a writer packs into a message.
_SMALLEST_MESSAGE_LIMIT = 64 << 20
# Guards the installation of the exit hook.
_exit_hook_lock = threading.Lock()
_STOP_GRACE_SECONDS = 1.0


def _stop_listening_servers() -> None:
    # Runs when the main thread ends, before the interpreter joins its
    # worker threads (the server's checkpoint workers among them): open
    # calls still get their CANCELLED answer, and the serving loop ends
    # while the interpreter is whole rather than dying with its daemon thread.
    for server in local_servers.listening_servers():
        with contextlib.suppress(Exception):
            server.stop()


def _stop_servers_at_exit() -> None:
    global _exit_hook_installed
    with _exit_hook_lock:
        if _exit_hook_installed:
            return
        _exit_hook_installed = True
    # threading's exit hooks run in reverse order of registration, so this
    # one (registered after concurrent.futures' own) runs before the worker
    # pools wait for their threads; atexit would run too late.
    register = getattr(threading, "_register_atexit", None)
    if register is not None:
        register(_stop_listening_servers)


_exit_hook_installed = False


def _check_uids(uids: Sequence[int] | None) -> list[int] | None:
    if uids is None:
        return None
    if isinstance(uids, (str, bytes)) or not all(
        isinstance(uid, int) and not isinstance(uid, bool) and uid >= 0 for uid in uids
    ):
        raise ValueError(f"local_transport_uids must be user ids (ints >= 0) or None, got {uids!r}")
    return list(uids)


def _bind_address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host and not host.startswith("[") else f"{host}:{port}"


class Server:
    """Hosts ``tables``; see the module docstring.

    Args:
      tables: the tables to host (at least one, unique names).
      port: the port of the address to serve under; None picks a free one.
        Ignored in embedded mode.
      checkpointer: a checkpointer (resound.checkpointers): the server
        restores its newest checkpoint at start, before serving, and writes
        checkpoints there when asked (``Client.checkpoint``). None: nothing
        is restored, and checkpoints go to
        ``<tempfile.gettempdir()>/resound-checkpoints-pid<pid>/server-<n>``
        (only the newest is kept; the directory is removed when the server
        stops, see ``checkpointers.ServerTempCheckpointer``).
      listen: False for the embedded mode (no socket, in-process clients only).
      host: the interface to serve on; the default (loopback) admits only
        this machine. ``'0.0.0.0'`` or ``'::'`` serves every interface.
      tls: None (plaintext), or a ``resound.tls.ServerTls``: only TLS
        connections are accepted, with client certificates required if it
        has a ``client_ca``.
      max_bytes: None (no limit), or the most chunk bytes this process may
        hold for the server (each chunk counted once, however many items,
        tables and insert streams use it): an insert message from a gRPC
        client that would take it past the limit is refused whole, and its
        client raises ResourceExhaustedError. Room freed by a reset or by
        removed items is free again once the chunks' writers let go of them.
        (In-process writers are the process's own and are not limited; the
        chunks of gRPC clients in this process are theirs until sent.)
      max_message_bytes: the largest request message the server reads
        (64 MiB to 1 GiB, the default); a larger one is refused
        (ResourceExhaustedError at its client) before it is buffered.
        Writers pack items into messages of up to 32 MiB of chunks, so only
        an item with larger chunks meets the limit.
      max_open_calls: the most long-lived calls (insert streams, sample
        calls waiting or streaming) open at once, from all clients (default
        65,536). An open call costs memory (about 25 KB), no thread.
      max_open_calls_per_connection: the same for one client connection
        (default 8,192), so one client cannot take them all. A call past
        either limit is refused at once: its client raises
        ResourceExhaustedError naming the limit.
      max_inflight_bytes: the most bytes of sample responses the server
        holds for clients that have not read them yet (default 2 GiB); a
        response past it is refused (ResourceExhaustedError), unless nothing
        else is in flight.
      max_inflight_bytes_per_connection: the same for one client connection
        (default 512 MiB).
      metrics_port: None (the default: no metrics), or the port to serve
        Prometheus metrics of the tables on, as ``http://host:port/metrics``
        (0: a free one; ``metrics_port`` tells which), on ``host`` as gRPC
        is, in embedded mode too. Needs prometheus_client (``pip install
        "resound-rl[metrics]"``; ImportError otherwise). See
        docs/observability.md for the metrics.
      local_transport: whether a listening server also serves processes of
        its host over the same-host transport (a Unix socket and shared
        memory, on Linux; docs/local-transport.md), which their clients use
        by themselves when they reach it. Default True.
      local_transport_uids: the user ids let in on it (default: only the
        server's own user), checked by the kernel's credentials of each
        connection.

    A listening server also serves the standard gRPC health service
    (``grpc.health.v1.Health``): the server (``""``) and
    ``resound.v1.Replay`` are SERVING until ``stop()`` begins, NOT_SERVING
    from then on.

    A server that listens (like a remote client) sets glibc malloc's mmap and
    trim thresholds for its process (32 MB and 64 MB), so that the
    megabyte-sized sample responses it builds reuse warm memory instead of
    fresh, page-faulted mappings: that halves the server's CPU per sample.
    The process keeps up to 64 MB of freed memory per heap arena in exchange;
    set ``RESOUND_KEEP_MALLOC_DEFAULTS=1`` to keep malloc's defaults.
    """

    def __init__(
        self,
        tables: Sequence[Table] | None = None,
        port: int | None = None,
        checkpointer: Any = None,
        *,
        listen: bool = True,
        host: str = "127.0.0.1",
        tls: ServerTls | None = None,
        max_bytes: int | None = None,
        max_message_bytes: int | None = None,
        max_open_calls: int | None = None,
        max_open_calls_per_connection: int | None = None,
        max_inflight_bytes: int | None = None,
        max_inflight_bytes_per_connection: int | None = None,
        metrics_port: int | None = None,
        local_transport: bool = True,
        local_transport_uids: Sequence[int] | None = None,
    ) -> None:
        if not tables:
            raise ValueError("At least one table must be provided")
        tables = list(tables)
        for table in tables:
            if not isinstance(table, Table):
                raise ValueError(f"tables must hold resound.Table objects, got {table!r}")
        names = [table.name for table in tables]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ValueError(
                f"Multiple items in tables have the same name: {', '.join(duplicates)}"
            )
        if checkpointer is not None and not isinstance(checkpointer, CheckpointerBase):
            raise ValueError(
                "checkpointer must be a resound.checkpointers checkpointer (e.g. "
                f"DefaultCheckpointer(path)) or None, got {checkpointer!r}"
            )
        if port is not None and (isinstance(port, bool) or not isinstance(port, int)):
            raise ValueError(f"port must be an int in [1, 65535] or None, got {port!r}")
        if port is not None and not 0 < port < 65536:
            raise ValueError(f"port must be an int in [1, 65535] or None, got {port!r}")
        if not isinstance(host, str) or not host:
            raise ValueError(f"host must be a nonempty str such as '127.0.0.1', got {host!r}")
        if metrics_port is not None and (
            isinstance(metrics_port, bool)
            or not isinstance(metrics_port, int)
            or not 0 <= metrics_port < 65536
        ):
            raise ValueError(
                f"metrics_port must be an int in [0, 65535] (0: a free port) or None (no "
                f"metrics), got {metrics_port!r}"
            )
        if tls is not None and not isinstance(tls, ServerTls):
            raise ValueError(f"tls must be a resound.tls.ServerTls or None, got {tls!r}")
        if tls is not None and not listen:
            raise ValueError(
                "tls needs a listening server (listen=True): embedded mode has no socket"
            )
        self._tls = tls
        if max_bytes is not None and (
            isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 1
        ):
            raise ValueError(f"max_bytes must be an int >= 1 or None, got {max_bytes!r}")
        self._max_bytes = max_bytes
        if max_message_bytes is not None and (
            isinstance(max_message_bytes, bool)
            or not isinstance(max_message_bytes, int)
            or not _SMALLEST_MESSAGE_LIMIT <= max_message_bytes <= MAX_MESSAGE_BYTES
        ):
            raise ValueError(
                f"max_message_bytes must be an int in [{_SMALLEST_MESSAGE_LIMIT}, "
                f"{MAX_MESSAGE_BYTES}] or None (resound's writers send messages of up to "
                f"32 MiB of chunks), got {max_message_bytes!r}"
            )
        self._max_message_bytes = max_message_bytes or MAX_MESSAGE_BYTES
        for name, value in (
            ("max_open_calls", max_open_calls),
            ("max_open_calls_per_connection", max_open_calls_per_connection),
            ("max_inflight_bytes", max_inflight_bytes),
            ("max_inflight_bytes_per_connection", max_inflight_bytes_per_connection),
        ):
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 1
            ):
                raise ValueError(f"{name} must be an int >= 1 or None (the default), got {value!r}")
        self._max_open_calls = max_open_calls or DEFAULT_MAX_OPEN_CALLS
        self._max_open_calls_per_connection = (
            max_open_calls_per_connection or DEFAULT_MAX_OPEN_CALLS_PER_CONNECTION
        )
        self._max_inflight_bytes = max_inflight_bytes or DEFAULT_MAX_INFLIGHT_BYTES
        self._max_inflight_bytes_per_connection = (
            max_inflight_bytes_per_connection or DEFAULT_MAX_INFLIGHT_BYTES_PER_CONNECTION
        )
        self._tables = {table.name: table for table in tables}
        self._checkpointer = checkpointer
        self._temp_checkpointer: ServerTempCheckpointer | None = None
        self._checkpoint_lock = threading.Lock()
        # The newest checkpoint written and each table's changes it holds
        # (see checkpoint(skip_unchanged=True)).
        self._last_checkpoint: tuple[str, dict[str, tuple[int, int]]] | None = None
        if checkpointer is not None:
            # Before any client can reach the tables.
            started = time.perf_counter()
            restored = checkpointer.load_latest(tables)
            own = isinstance(checkpointer, DefaultCheckpointer) and checkpointer.checkpoints()
            if own and restored in own:
                # The tables hold what that checkpoint does: nothing to write
                # until they change (a fallback elsewhere is no checkpoint here).
                self._last_checkpoint = (restored, self._change_counts())
            if restored is not None:
                _LOGGER.info(
                    "restored %s: %s in %.1f s",
                    restored,
                    self._contents(),
                    time.perf_counter() - started,
                )
        self._stopped = threading.Event()
        self._started = time.monotonic()
        self._port: int | None = None
        self._serving: Any = None  # the ServingLoop of a listening server
        if not isinstance(local_transport, bool):
            raise TypeError(
                f"local_transport must be True or False, got {type(local_transport).__name__}"
            )
        self._local_transport = local_transport
        self._local_transport_uids = _check_uids(local_transport_uids)
        self._local: LocalEndpoint | None = None
        self._metrics: Any = None  # the MetricsEndpoint, if asked for
        if metrics_port is not None:
            self._metrics = self._serve_metrics(host, metrics_port, listen)
        metrics = "" if self._metrics is None else f", metrics on {self._metrics.url}"
        if listen:
            try:
                self._port = self._serve(host, 0 if port is None else port)
            except BaseException:
                if self._metrics is not None:
                    self._metrics.stop()
                raise
            local_servers.register(self._port, self)
            security = "plaintext" if tls is None else repr(tls)
            _LOGGER.info(
                "serving %d table(s) on %s:%d (%s)%s",
                len(self._tables),
                host,
                self._port,
                security,
                metrics,
            )
        elif self._metrics is not None:
            _LOGGER.info("embedded server of %d table(s)%s", len(self._tables), metrics)

    def _contents(self) -> str:
        """What the tables hold, for the log: items and MiB."""
        infos = [table._core.info() for table in self._tables.values()]
        items = sum(info.current_size for info in infos)
        stored = sum(info.memory_bytes for info in infos)
        return f"{items:,} items, {stored / 2**20:,.1f} MiB in {len(self._tables)} table(s)"

    def _serve_metrics(self, host: str, port: int, listen: bool) -> Any:
        # Imported here: only a server with metrics loads prometheus_client.
        from resound._service.metrics import MetricsEndpoint, TablesCollector

        # Through a weak proxy: the endpoint's thread must not keep an
        # unstopped server alive (its finalizer stops the endpoint).
        server = weakref.proxy(self)
        calls = (lambda: server._call_counts()) if listen else None
        return MetricsEndpoint(TablesCollector(server, calls), host, port)

    def _call_counts(self) -> tuple[int, int]:
        serving = self._serving
        if serving is None:
            return 0, 0
        return serving.open_calls, serving.open_connections

    def _serve(self, host: str, port: int) -> int:
        keep_message_buffers_warm()

        # Imported here, by a server that listens: the servicer and its
        # serving loop import grpc (an embedded server never loads it).
        from resound._service.servicer import ReplayServicer
        from resound._service.serving_loop import ServingLoop

        limits = CallLimits(self._max_open_calls, self._max_open_calls_per_connection)
        budget = ResponseBudget(self._max_inflight_bytes, self._max_inflight_bytes_per_connection)
        servicer = ReplayServicer(self, limits, budget)
        serving = ServingLoop(
            servicer,
            [
                *(o for o in CHANNEL_OPTIONS if o[0] != "grpc.max_receive_message_length"),
                ("grpc.max_receive_message_length", self._max_message_bytes),
                *server_keepalive(),
                # A port another server holds is an error, not a shared port.
                ("grpc.so_reuseport", 0),
            ],
        )
        credentials = None if self._tls is None else self._tls.credentials()
        bound = serving.start(_bind_address(host, port), credentials)
        if bound == 0:
            tls_hint = ""
            if self._tls is not None:
                tls_hint = ", or the tls certificate_chain and private_key do not match"
            raise ValueError(
                f"cannot serve on {host}:{port}: port {port} is already in use (by this or "
                f"another process), or host {host!r} is not an address of this machine"
                f"{tls_hint}"
            )
        self._serving = serving
        if self._local_transport and _core.HAS_LOCAL_TRANSPORT:
            # Imported here too: it builds on the servicer (and grpc).
            from resound._service.local_endpoint import LocalEndpoint

            try:
                self._local = LocalEndpoint(
                    self,
                    servicer,
                    serving.loop,
                    shared_chunk_store(),
                    self._max_bytes,
                    self._max_message_bytes,
                    self._local_transport_uids,
                )
            except OSError as error:
                # gRPC serves on; clients on this host use it instead.
                _LOGGER.warning("no same-host transport: %s", error)
        _stop_servers_at_exit()
        return bound

    @property
    def local_address(self) -> str | None:
        """The same-host transport's address (``unix:///...``), where this
        server has one (a listening server on Linux, unless
        ``local_transport=False``); None otherwise."""
        return None if self._local is None else self._local.address

    @property
    def local_advertisement(self) -> tuple[str, bytes] | None:
        """(local_address, SHA-256 of its token) for ServerInfo; None without one."""
        local = self._local
        return None if local is None else (local.address, local.token_sha256)

    @property
    def port(self) -> int | None:
        """The port clients reach this server on; None in embedded mode."""
        return self._port

    @property
    def metrics_port(self) -> int | None:
        """The port of the server's ``/metrics`` (HTTP); None without metrics."""
        return None if self._metrics is None else self._metrics.port

    @property
    def max_bytes(self) -> int | None:
        """The limit on chunk bytes that gRPC clients' inserts respect (None: none)."""
        return self._max_bytes

    @property
    def open_calls(self) -> int:
        """Long-lived calls (insert streams, sample calls) open right now
        (0 in embedded mode)."""
        return 0 if self._serving is None else self._serving.open_calls

    @property
    def running(self) -> bool:
        return not self._stopped.is_set()

    @property
    def tables(self) -> dict[str, Table]:
        """The hosted tables by name."""
        return dict(self._tables)

    def table(self, name: str) -> Table:
        """The hosted table called ``name``; NotFoundError if there is none."""
        try:
            return self._tables[name]
        except KeyError:
            raise NotFoundError(
                f"Priority table {name} was not found. The following tables exist: "
                f"{', '.join(sorted(self._tables))}."
            ) from None

    def checkpoint(self, *, skip_unchanged: bool = False) -> str:
        """Writes a checkpoint of every table with the server's checkpointer;
        returns the checkpoint's directory (holding its file), as Reverb does.

        With ``skip_unchanged`` (what ``resound-server --checkpoint-every``
        and ``--checkpoint-on-stop`` use), nothing is written if no table
        changed since the newest checkpoint this server wrote and that
        checkpoint still exists (or the one it restored at start from its
        checkpointer's directory): its directory is returned, and the skip is
        logged. A table changes with every insert, deletion, sample (which
        counts times_sampled), priority update and reset, so a restore from
        the returned checkpoint gives the same state as a new one would. When
        some tables changed, a new checkpoint is written in which the files
        of the unchanged ones (tables sharing no chunk with a changed table)
        are hard-links to the last checkpoint's, not written again; the log
        names them. Without ``skip_unchanged`` every table is written.

        A server without a checkpointer writes into one directory of its own,
        ``<tempfile.gettempdir()>/resound-checkpoints-pid<pid>/server-<n>``,
        keeping only the newest checkpoint, and removes it when it stops (or
        the process exits): copy a checkpoint elsewhere to keep it.

        Example:
            >>> import resound
            >>> server = resound.Server([resound.Table.queue('q', 10)], listen=False)
            >>> first = server.checkpoint()
            >>> server.checkpoint(skip_unchanged=True) == first
            True
            >>> server.stop()
        """
        if not isinstance(skip_unchanged, bool):
            raise ValueError(f"skip_unchanged must be True or False, got {skip_unchanged!r}")
        with self._checkpoint_lock:
            if self._stopped.is_set() and self._checkpointer in (None, self._temp_checkpointer):
                # Its directory went when it stopped.
                raise CancelledError("checkpoint: the server stopped (and has no checkpointer)")
            if self._checkpointer is None:
                self._checkpointer = self._temp_checkpointer = ServerTempCheckpointer()
            checkpointer = self._checkpointer
            last = self._last_checkpoint
        # Read before the save: a change while it runs counts as after it.
        changes = self._change_counts()
        unchanged = [] if last is None else [n for n, c in changes.items() if last[1].get(n) == c]
        if (
            skip_unchanged
            and last is not None
            and len(unchanged) == len(changes)
            and os.path.exists(checkpoint_file(last[0]))
        ):
            _LOGGER.info("checkpoint skipped: no table changed since %s", last[0])
            return last[0]
        started = time.perf_counter()
        reused: list[str] = []
        if skip_unchanged and last is not None and isinstance(checkpointer, DefaultCheckpointer):
            # Files of unchanged tables are linked from the last checkpoint.
            path = checkpointer.save(
                list(self._tables.values()), previous=last[0], unchanged=unchanged
            )
            summary = checkpointer.last_save or {}
            reused = [name for f in summary.get("files", []) if f["reused"] for name in f["tables"]]
        else:
            path = checkpointer.save(list(self._tables.values()))
        with self._checkpoint_lock:
            self._last_checkpoint = (path, changes)
        _LOGGER.info(
            "checkpoint written: %s (%s, %.1f s)%s",
            path,
            self._contents(),
            time.perf_counter() - started,
            f"; linked unchanged from the last: {', '.join(reused)}" if reused else "",
        )
        return path

    def _change_counts(self) -> dict[str, tuple[int, int]]:
        """Each table's (core table, num_changes): equal, an equal checkpoint."""
        return {
            name: (id(table._core), table._core.info().num_changes)
            for name, table in self._tables.items()
        }

    def in_process_client(self) -> Client:
        """A client that calls this server's tables directly (no socket)."""
        return Client._in_process(self)

    def localhost_client(self) -> Client:
        """A client for this server; in-process, since it shares this process."""
        if self._port is None:
            return self.in_process_client()
        return Client(f"localhost:{self._port}")

    def stop(self) -> None:
        """Closes every table: blocked and later calls raise CancelledError.
        A listening server reports NOT_SERVING on its health service first;
        its metrics endpoint stops last. Idempotent."""
        self._stop(wait=True)

    def _stop(self, *, wait: bool) -> None:
        if self._stopped.is_set():
            return
        self._stopped.set()
        if self._serving is not None:
            # First, so that load balancers drain while the calls end.
            self._serving.stop_serving(wait=wait)
        if self._local is not None:
            # Its threads may wait for the loop (stopped below) or the GIL:
            # from a finalizer, stopped on a thread of its own.
            if wait:
                self._local.stop()
            else:
                threading.Thread(target=self._local.stop, daemon=True).start()
        for table in self._tables.values():
            table._core.close()
        if self._serving is not None:
            # Calls still running end with CANCELLED ("the server stopped",
            # which clients do not retry): those waiting for a table woke
            # when it closed, the others are cancelled. The grace lets their
            # answers go out; calls still running after it are cut off.
            self._serving.stop(grace=_STOP_GRACE_SECONDS, wait=wait)
        if self._port is not None:
            local_servers.unregister(self._port, self)
        if self._metrics is not None:
            if wait:
                self._metrics.stop()
            else:  # its stop waits for its thread, which may be this one
                threading.Thread(target=self._metrics.stop, daemon=True).start()
        if wait:  # (a finalizer's stop leaves the directory to the process's exit)
            with self._checkpoint_lock:
                if self._temp_checkpointer is not None:
                    self._temp_checkpointer.remove()
        if wait:  # not from a finalizer, which may run anywhere
            _LOGGER.info("stopped after %.0f s", time.monotonic() - self._started)

    def wait(self) -> None:
        """Blocks until :meth:`stop` is called (Ctrl-C raises KeyboardInterrupt
        and stops the server)."""
        try:
            self._stopped.wait()
        except KeyboardInterrupt:
            self.stop()
            raise

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def __del__(self) -> None:
        # Starts the stop without waiting for it: the garbage collector runs
        # this on whatever thread allocates, perhaps one holding a lock that
        # the serving loop's stop needs, and waiting there could block for good.
        with contextlib.suppress(Exception):  # the interpreter may be shutting down
            self._stop(wait=False)

    def __repr__(self) -> str:
        where = f"port={self._port}" if self._port is not None else "embedded"
        return f"Server({where}, tables={list(self._tables.values())!r})"
