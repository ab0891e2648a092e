"""``BatchIterator``: sampled batches prefetched on a background thread.

Returned by ``Client.sample_batches``. The thread keeps up to ``prefetch``
batches ready; iteration raises whatever error the thread hit. ``close()``
(or leaving the ``with`` block) stops the thread.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Callable
from typing import Any

from resound.replay_sample import ReplaySample

__all__ = ["BatchIterator"]

# How often a thread blocked on a full queue looks whether close() was called.
_WAIT_SLICE_SECONDS = 0.1
_DONE = object()


class BatchIterator:
    """Iterator of batches; see the module docstring."""

    def __init__(
        self,
        produce: Callable[[threading.Event], ReplaySample | None],
        *,
        num_batches: int | None,
        prefetch: int,
    ) -> None:
        self._produce = produce
        self._num_batches = num_batches
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=prefetch)
        self._closed = threading.Event()
        self._finished = False
        self._thread = threading.Thread(
            target=self._run, name="resound-batch-prefetch", daemon=True
        )
        self._thread.start()

    def _run(self) -> None:
        produced = 0
        try:
            while not self._closed.is_set() and (
                self._num_batches is None or produced < self._num_batches
            ):
                batch = self._produce(self._closed)
                if batch is None:
                    return
                if not self._put(batch):
                    return
                produced += 1
            self._put(_DONE)
        except BaseException as error:  # noqa: BLE001 - handed to the consumer
            self._put(error)

    def _put(self, value: Any) -> bool:
        while not self._closed.is_set():
            try:
                self._queue.put(value, timeout=_WAIT_SLICE_SECONDS)
                return True
            except queue.Full:
                continue
        return False

    def __iter__(self) -> BatchIterator:
        return self

    def __next__(self) -> ReplaySample:
        if self._finished:
            raise StopIteration
        value = self._queue.get()
        if value is _DONE:
            self._finished = True
            raise StopIteration
        if isinstance(value, BaseException):
            self._finished = True
            raise value
        return value

    def close(self) -> None:
        """Stops the prefetch thread and waits for it. Idempotent."""
        self._closed.set()
        self._finished = True
        self._thread.join()
        # Wakes a consumer blocked in __next__ on another thread (if the queue
        # is full, nobody is blocked and __next__ stops on _finished).
        with contextlib.suppress(queue.Full):
            self._queue.put_nowait(_DONE)

    def __enter__(self) -> BatchIterator:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __del__(self) -> None:
        self._closed.set()
