"""``BatchIterator``: sampled batches prefetched on a background thread.

Returned by ``Client.sample_batches``. The thread keeps up to ``prefetch``
batches ready; iteration raises whatever error the thread hit. ``close()``
(or leaving the ``with`` block) stops the thread.

Nothing taken from the table is lost without a trace: samples the iterator
took but did not yield (a batch ``drop_remainder`` held back when the timeout
passed, batches still prefetched when it was closed) are its ``remainder``
once it has ended or been closed.

Example:
    >>> batches = client.sample_batches(  # doctest: +SKIP
    ...     'queue', 128, timeout=0.5, drop_remainder=True)
    >>> with batches:  # doctest: +SKIP
    ...     try:
    ...         for batch in batches:
    ...             learn(batch)                 # always 128 samples
    ...     except resound.DeadlineExceededError:
    ...         leftover = batches.remainder()   # the last < 128 samples, or None
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections.abc import Callable
from typing import Any, NamedTuple

from resound import _batch_assembly
from resound.replay_sample import ReplaySample

__all__ = ["BatchFiller", "BatchIterator"]

# How often a thread blocked on a full queue looks whether close() was called.
_WAIT_SLICE_SECONDS = 0.1
_DONE = object()


class _Ready(NamedTuple):
    host: ReplaySample  # as sampled
    output: Any  # what __next__ returns: transform(host), or host


class BatchFiller:
    """Takes samples until a batch is complete; keeps what it could not yield.

    ``take(count, deadline, cancelled)`` returns sample batches holding at
    most ``count`` samples (fewer once the deadline passes after the first
    sample, or once ``cancelled`` is set) and raises DeadlineExceededError if
    none came in time (Client._taker).

    Each wait is bounded by ``timeout``. When it passes with some samples but
    not ``batch_size``: without ``drop_remainder`` they are yielded as a
    smaller batch; with it they are held, and the next wait adds to them, so
    every batch has exactly ``batch_size`` samples and no sample is dropped.
    A wait that brings no sample at all raises DeadlineExceededError; what is
    held then (fewer than ``batch_size``) is ``held()``.
    """

    def __init__(
        self,
        take: Callable[..., list[Any]],
        batch_size: int,
        *,
        timeout: float | None,
        drop_remainder: bool,
        signature: Any,
        origin: _batch_assembly.Origin | None = None,
    ) -> None:
        self._take = take
        self._batch_size = batch_size
        self._timeout = timeout
        self._drop_remainder = drop_remainder
        self._signature = signature
        self._origin = origin
        self._parts: list[Any] = []
        self._held = 0

    def produce(self, cancelled: threading.Event) -> ReplaySample | None:
        """The next batch, or None once ``cancelled`` is set (the samples
        taken meanwhile stay held)."""
        while True:
            deadline = None if self._timeout is None else time.monotonic() + self._timeout
            parts = self._take(self._batch_size - self._held, deadline, cancelled)
            self._parts.extend(parts)
            self._held += _batch_assembly.count(parts)
            if cancelled.is_set():
                return None
            if self._held == self._batch_size or (self._held and not self._drop_remainder):
                batch = _batch_assembly.batch_sample(self._parts, self._signature, self._origin)
                self._parts, self._held = [], 0
                return batch

    def held(self) -> ReplaySample | None:
        """The samples taken and not yet in a batch, as one batch (or None)."""
        if not self._held:
            return None
        return _batch_assembly.batch_sample(self._parts, self._signature, self._origin)


class BatchIterator:
    """Iterator of batches; see the module docstring."""

    def __init__(
        self,
        produce: Callable[[threading.Event], ReplaySample | None],
        *,
        num_batches: int | None,
        prefetch: int,
        held: Callable[[], ReplaySample | None] | None = None,
        transform: Callable[[ReplaySample], Any] | None = None,
    ) -> None:
        self._produce = produce
        self._transform = transform
        self._held = held
        self._num_batches = num_batches
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=prefetch)
        self._closed = threading.Event()
        self._finished = False
        self._unconsumed: list[ReplaySample] = []
        # Produced, and not queued (closed meanwhile, or the transform raised).
        self._unqueued: ReplaySample | None = None
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
                # The host batch travels with what is yielded, for remainder();
                # a transform that raises leaves it there too.
                self._unqueued = batch
                output = batch if self._transform is None else self._transform(batch)
                if not self._put(_Ready(batch, output)):
                    return
                self._unqueued = None
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

    def __next__(self) -> Any:
        if self._finished:
            raise StopIteration
        value = self._queue.get()
        if value is _DONE:
            self._finished = True
            raise StopIteration
        if isinstance(value, BaseException):
            self._finished = True
            raise value
        return value.output

    def remainder(self) -> ReplaySample | None:
        """Samples taken from the table and never yielded, as one batch in the
        order taken (None if there are none): what a ``drop_remainder``
        iterator held when its timeout passed, and the batches prefetched but
        not consumed when it was closed. Stops the iterator (see ``close``).

        Example:
            >>> batches.remainder()  # doctest: +SKIP
            ReplaySample(info=SampleInfo(key=array([...], dtype=uint64), ...), data=[...])
        """
        self.close()
        batches = list(self._unconsumed)
        held = self._held() if self._held is not None else None
        if held is not None:
            batches.append(held)
        return _batch_assembly.concatenate_batches(batches) if batches else None

    def close(self) -> None:
        """Stops the prefetch thread and waits for it. Idempotent."""
        self._closed.set()
        self._finished = True
        self._thread.join()
        # Batches still queued were taken from the table: remainder() has them.
        with contextlib.suppress(queue.Empty):
            while True:
                value = self._queue.get_nowait()
                if isinstance(value, _Ready):
                    self._unconsumed.append(value.host)
        if self._unqueued is not None:
            self._unconsumed.append(self._unqueued)
            self._unqueued = None
        # Wakes a consumer blocked in __next__ on another thread.
        self._queue.put_nowait(_DONE)

    def __enter__(self) -> BatchIterator:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __del__(self) -> None:
        self._closed.set()
