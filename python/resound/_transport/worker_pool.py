"""Daemon threads that run a multi-server client's calls side by side.

concurrent.futures' pool joins its threads at interpreter exit, so one call
waiting on a rate limiter would hold up the exit; these threads are daemons.
The pool grows when every thread is busy (calls may wait for a while, and a
call must never wait for a thread) and an idle thread ends after a minute.

Example:
    >>> pool = WorkerPool('example')
    >>> results = queue.SimpleQueue()
    >>> pool.submit(lambda: results.put(6 * 7))
    >>> results.get(timeout=10)
    42
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["WorkerPool"]

_IDLE_EXIT_SECONDS = 60.0


class WorkerPool:
    """Runs submitted functions on daemon threads named ``resound-<name>``."""

    def __init__(self, name: str) -> None:
        self._name = f"resound-{name}"
        self._lock = threading.Lock()
        # The job slots of idle threads, most recently idle last (so the
        # fewest threads stay warm and the rest time out).
        self._idle: list[queue.SimpleQueue[Callable[[], None]]] = []

    def start(self, call: Callable[[], Any]) -> Callable[[], Any]:
        """Runs ``call()`` on a pool thread; returns the function that waits
        for its result (raising what ``call`` raised)."""
        done: queue.SimpleQueue[tuple[Any, BaseException | None]] = queue.SimpleQueue()

        def run() -> None:
            try:
                done.put((call(), None))
            except BaseException as error:  # noqa: BLE001 - raised by finish()
                done.put((None, error))

        def finish() -> Any:
            result, error = done.get()
            if error is not None:
                raise error
            return result

        self.submit(run)
        return finish

    def submit(self, job: Callable[[], None]) -> None:
        """Runs ``job()`` on a pool thread; what it raises is ignored, so jobs
        report their results themselves."""
        with self._lock:
            if self._idle:
                self._idle.pop().put(job)
                return
        # The job goes through the slot, not the thread's arguments: a Thread
        # keeps its arguments until it ends, and with them whatever the job
        # references.
        slot: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        slot.put(job)
        threading.Thread(target=self._work, args=(slot,), name=self._name, daemon=True).start()

    def _work(self, slot: queue.SimpleQueue[Callable[[], None]]) -> None:
        job: Callable[[], None] | None = slot.get()
        while job is not None:
            with contextlib.suppress(BaseException):  # jobs report their own outcome
                job()
            job = None
            with self._lock:
                self._idle.append(slot)
            try:
                job = slot.get(timeout=_IDLE_EXIT_SECONDS)
            except queue.Empty:
                with self._lock:
                    if slot in self._idle:
                        self._idle.remove(slot)
                        return
                # A submit took the slot just before the lock: its job is in it.
                job = slot.get()
