"""The thread and asyncio event loop that run a listening server's gRPC.

``ServingLoop`` starts a grpc.aio server on a loop of its own, in a daemon
thread, so that ``resound.Server`` keeps its blocking API (it is built and
stopped from ordinary threads) while every call it serves is a coroutine:
the number of open streams and waiting calls is bound by memory, not by a
thread pool. The servicer's handlers run on this loop (see servicer.py), and
so does the standard gRPC health service (health.py), which ``stop_serving``
turns to NOT_SERVING when the server begins to stop.

Example:
    >>> loop = ServingLoop(servicer, options)  # doctest: +SKIP
    >>> port = loop.start('127.0.0.1:0', credentials=None)  # doctest: +SKIP
    >>> loop.stop(grace=1.0)  # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Sequence
from typing import Any

import grpc

from resound._service.health import ServingHealth
from resound._service.servicer import ReplayServicer

__all__ = ["ServingLoop"]

# Worker threads for what must not run on the loop (checkpoint files).
_WORKER_THREADS = 4


class ServingLoop:
    """A grpc.aio server for ``servicer`` with ``options``, on its own loop
    and thread; ``start`` binds and serves, ``stop`` ends both."""

    def __init__(self, servicer: ReplayServicer, options: Sequence[tuple[str, Any]]) -> None:
        self._servicer = servicer
        self._options = list(options)
        self._loop = asyncio.new_event_loop()
        self._workers = concurrent.futures.ThreadPoolExecutor(
            max_workers=_WORKER_THREADS, thread_name_prefix="resound-worker"
        )
        self._loop.set_default_executor(self._workers)
        self._thread = threading.Thread(target=self._run, name="resound-grpc-loop", daemon=True)
        self._server: Any = None
        self._health = ServingHealth()
        self._stopped = False

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The event loop the servicer's handlers run on."""
        return self._loop

    @property
    def open_calls(self) -> int:
        """Long-lived calls open right now (read from any thread)."""
        return self._servicer.open_calls

    @property
    def open_connections(self) -> int:
        """Client connections with a long-lived call open (read from any thread)."""
        return self._servicer.open_connections

    def stop_serving(self, *, wait: bool = True) -> None:
        """Reports NOT_SERVING on the health service from now on: the first
        step of a stop, so that load balancers drain before calls end.
        With ``wait=False``, and from the loop's own thread, it only starts."""
        if self._stopped or not self._loop.is_running():
            return
        if threading.current_thread() is self._thread:
            self._health.stop_serving()
            return
        done = asyncio.run_coroutine_threadsafe(self._stop_serving(), self._loop)
        if wait:
            done.result()

    def start(self, address: str, credentials: grpc.ServerCredentials | None) -> int:
        """Serves on ``address`` and returns the bound port, or 0 if it could
        not be bound (the loop is then stopped again)."""
        self._thread.start()
        port = asyncio.run_coroutine_threadsafe(
            self._start(address, credentials), self._loop
        ).result()
        if port == 0:
            self.stop(grace=0.0)
        return port

    def stop(self, grace: float, *, wait: bool = True) -> None:
        """Cancels the calls still running (they end with CANCELLED), stops
        the gRPC server within ``grace`` seconds and ends the loop's thread.
        Idempotent. With ``wait=False`` (finalizers), and always from the
        loop's own thread, it only starts the stop."""
        if self._stopped:
            return
        self._stopped = True
        if not self._loop.is_running():
            return
        done = asyncio.run_coroutine_threadsafe(self._stop(grace), self._loop)
        if not wait or threading.current_thread() is self._thread:
            return  # a handler (or a finalizer on this thread) cannot wait for itself
        done.result()
        self._thread.join()

    async def _start(self, address: str, credentials: grpc.ServerCredentials | None) -> int:
        server = grpc.aio.server(
            handlers=[self._servicer.handler()],
            options=self._options,
        )
        try:
            if credentials is None:
                port = server.add_insecure_port(address)
            else:
                port = server.add_secure_port(address, credentials)
        except RuntimeError:  # grpcio >= 1.63 raises instead of returning 0
            port = 0
        if port:
            self._health.serve_on(server)
            await server.start()
            self._server = server
        return port

    async def _stop_serving(self) -> None:
        self._health.stop_serving()

    async def _stop(self, grace: float) -> None:
        self._health.stop_serving()  # if stop_serving was not called first
        self._servicer.stop()
        if self._server is not None:
            await self._server.stop(grace)
        self._loop.call_soon(self._loop.stop)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_forever()
        finally:
            self._workers.shutdown(wait=False)
            self._loop.close()
