"""Calls a transport keeps open between its callers' calls (the streams of
``sample``, ``insert`` and ``mutate_priorities``): a request on an open
stream costs one message each way, a call of its own several more.

Each caller takes an idle call, or opens one, and gives it back after; a
few are kept, the rest closed. A call whose stream ended while it sat idle
(its server stopped) is closed when next taken, so that the caller's call
goes as a new one would: to a server that follows at the address, or, as
to any unreachable server, waiting for one.

Example:
    >>> idle = IdleCalls(8, stale=lambda call: call.ended, close=OutboxCall.end)  # doctest: +SKIP
    >>> call = idle.take() or OutboxCall(open_call)  # doctest: +SKIP
    >>> idle.give_back(call, keep=True)  # doctest: +SKIP
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["IdleCalls"]

C = TypeVar("C")


class IdleCalls(Generic[C]):
    """Up to ``limit`` idle calls; ``stale(call)`` says a call ended while
    idle, ``close(call)`` ends one. Thread-safe."""

    def __init__(self, limit: int, stale: Callable[[C], bool], close: Callable[[C], None]) -> None:
        self._limit = limit
        self._stale = stale
        self._close = close
        self._lock = threading.Lock()
        self._idle: list[C] = []

    def take(self) -> C | None:
        """An idle call that is still open, or None (the caller opens one)."""
        while True:
            with self._lock:
                call = self._idle.pop() if self._idle else None
            if call is None or not self._stale(call):
                return call
            self._close(call)

    def give_back(self, call: C, keep: bool) -> None:
        """Keeps ``call`` for the next caller if ``keep`` (the transport is
        open) and there is room; else closes it."""
        with self._lock:
            if keep and len(self._idle) < self._limit:
                self._idle.append(call)
                return
        self._close(call)

    def close_all(self, lock_timeout: float = -1) -> None:
        """Closes every idle call. ``lock_timeout``: at most that many
        seconds spent waiting for the pool's lock (-1: no limit), after which
        the calls are left open (finalizers, whose thread may hold it)."""
        if not self._lock.acquire(timeout=lock_timeout):
            return
        try:
            idle, self._idle = self._idle, []
        finally:
            self._lock.release()
        for call in idle:
            self._close(call)
