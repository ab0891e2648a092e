"""``ReplayBatchSource``: one dataset iterator's supply of flat sample batches.

The TensorFlow datasets (resound.datasets.tf) hand TF whole batches and let
tf.data split them into elements: each call of ``next_batch`` returns the
five ``SampleInfo`` arrays followed by one array per column, all with a
leading axis of samples (for timesteps: of timesteps). A background thread
fetches the next batch through the client's batched sample path while TF
consumes the current one. Plain numpy: no TensorFlow here.

Items whose columns stack (equal shapes) come back as one batch with no
per-sample Python; items of differing lengths are gathered item by item and
returned as runs of consecutive items of equal shapes, in sampling order.

Example:
    >>> source = ReplayBatchSource(client, 'replay', specs, fetch_size=512)  # doctest: +SKIP
    >>> keys, probabilities, table_sizes, priorities, times_sampled, *columns = (
    ...     source.next_batch())  # doctest: +SKIP
"""

from __future__ import annotations

import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from resound import _codec, _core
from resound._batch_assembly import stack_parts
from resound.client import Client
from resound.errors import DeadlineExceededError
from resound.replay_sample import SampleInfo
from resound.wait_warnings import SAMPLER_LOGGER, BlockedWait

__all__ = ["ColumnSpec", "ReplayBatchSource"]

# How long one wait for the rate limiter lasts before the fetch thread looks
# whether its iterator was closed.
_WAIT_SLICE_SECONDS = 0.1
_INFO_FIELDS = ("keys", "probabilities", "table_sizes", "priorities", "times_sampled")
_INFO_DTYPES = SampleInfo.dtypes()
_END = object()


class ColumnSpec(NamedTuple):
    """What one column of every sample must be: a numpy dtype (``object``
    for strings) and a shape per sample (per timestep for timesteps), with
    None for a dimension of any size (None alone: any shape)."""

    dtype: np.dtype
    shape: tuple[int | None, ...] | None


class ReplayBatchSource:
    """Fetches batches of ``table`` for one iterator; see the module docstring.

    Args:
      client: the client to sample with.
      table: the table's name.
      specs: one ColumnSpec per column of the items, in flattened order.
      fetch_size: samples (items) asked for per fetch.
      timesteps: emit one row per timestep (each item's info repeated).
      max_samples: items in all before the source ends (None: no end).
      timeout: seconds to wait for the rate limiter to allow a sample before
        the source ends (None: forever). Samples taken before then are
        returned first.
      in_order: one request at a time, so batches keep the order in which
        the table gave the samples (a FIFO queue's order); otherwise, over
        gRPC, the next request runs ahead of this one.
    """

    def __init__(
        self,
        client: Client,
        table: str,
        specs: Sequence[ColumnSpec],
        *,
        fetch_size: int,
        timesteps: bool = False,
        max_samples: int | None = None,
        timeout: float | None = None,
        in_order: bool = False,
    ) -> None:
        self._table = table
        self._specs = list(specs)
        self._timesteps = timesteps
        self._remaining = max_samples
        self._timeout = timeout
        self._start, parallel, self._stop = _request_starter(client, table)
        self._request_size = fetch_size
        self._requests_ahead = 1
        if parallel and not in_order:
            # Over gRPC: two requests of a whole fetch on their way at once
            # (on one SampleStream call), so the server prepares the next one
            # while this one is received and converted. More did not help:
            # gRPC's receiving is the slowest stage then.
            self._requests_ahead = 2
        # One converted batch waits for the consumer while the next is fetched.
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=1)
        self._closed = threading.Event()
        self._pending: list[list[np.ndarray]] = []
        self._finished = False
        self._thread = threading.Thread(target=self._run, name="resound-dataset-fetch", daemon=True)
        self._thread.start()

    # --- consumer side

    def next_batch(self) -> list[np.ndarray]:
        """The next batch's arrays (info fields, then columns); StopIteration
        once ``max_samples`` were returned or a wait timed out. Errors of the
        fetch (a missing table, a column that does not match its spec) are
        raised here."""
        while not self._pending:
            if self._finished:
                raise StopIteration
            try:
                # In slices: a source closed while this waits (at interpreter
                # exit, see tf.py) ends the wait instead of blocking forever.
                value = self._queue.get(timeout=_WAIT_SLICE_SECONDS)
            except queue.Empty:
                if self._closed.is_set():
                    self._finished = True
                continue
            if value is _END:
                self._finished = True
                raise StopIteration
            if isinstance(value, BaseException):
                self._finished = True
                raise value
            self._pending = value
            self._pending.reverse()
        return self._pending.pop()

    def close(self, timeout: float | None = None) -> None:
        """Stops the fetch thread and waits for it: it ends within a wait
        slice, or once a request under way is answered; ``timeout`` bounds
        the wait (seconds; None: until it ended). Idempotent."""
        self._closed.set()
        self._finished = True
        deadline = None if timeout is None else time.monotonic() + timeout
        while self._thread.is_alive():
            if deadline is not None and time.monotonic() >= deadline:
                return
            try:
                self._queue.get_nowait()  # room for a put the thread may be blocked in
            except queue.Empty:
                self._thread.join(_WAIT_SLICE_SECONDS)

    # --- fetch thread

    def _run(self) -> None:
        try:
            self._fetch_all()
            self._put(_END)
        except BaseException as error:  # noqa: BLE001 - handed to the consumer
            self._put(error)
        finally:
            self._stop()

    def _fetch_all(self) -> None:
        outstanding: deque[tuple[int, Callable[[], list[Any]]]] = deque()
        asked = 0  # samples in outstanding requests
        last_sample = time.monotonic()
        blocked: BlockedWait | None = None
        wait = _WAIT_SLICE_SECONDS
        if self._timeout is not None:
            wait = min(wait, self._timeout)
        while not self._closed.is_set():
            while len(outstanding) < self._requests_ahead:
                count = self._request_size
                if self._remaining is not None:
                    count = min(count, self._remaining - asked)
                if count <= 0:
                    break
                outstanding.append((count, self._start(count, wait)))
                asked += count
            if not outstanding:
                return  # max_samples reached
            count, receive = outstanding.popleft()
            asked -= count
            try:
                parts = receive()
            except DeadlineExceededError as error:
                if self._timeout is not None and time.monotonic() - last_sample >= self._timeout:
                    return
                # Only a wait slice ended: look at _closed, ask again (and
                # say why, if the wait since the last sample is long).
                if blocked is None:
                    blocked = BlockedWait(SAMPLER_LOGGER, "sampler", last_sample)
                blocked.warn_if_due(str(error))
                continue
            last_sample = time.monotonic()
            blocked = None
            if self._remaining is not None:
                self._remaining -= sum(len(part) for part in parts)
            self._put(self._batches(parts))

    def _put(self, value: Any) -> None:
        while not self._closed.is_set():
            try:
                self._queue.put(value, timeout=_WAIT_SLICE_SECONDS)
                return
            except queue.Full:
                continue

    # --- conversion

    def _batches(self, parts: list[Any]) -> list[list[np.ndarray]]:
        info = [
            np.concatenate([getattr(part, field) for part in parts]).astype(dtype, copy=False)
            for field, dtype in zip(_INFO_FIELDS, _INFO_DTYPES, strict=True)
        ]
        columns = stack_parts(parts)
        if columns is not None and self._fits(columns):
            return [self._rows(info, columns)]
        # Item by item: runs of consecutive items whose columns have equal shapes.
        cache: dict[int, np.ndarray] = {}
        items = [
            _codec.gather_item(item.trajectory, item.chunks, cache, copy=False)
            for part in parts
            for item in part
        ]
        batches = []
        start = 0
        for end in range(1, len(items) + 1):
            if end < len(items) and _shapes(items[end]) == _shapes(items[start]):
                continue
            run = items[start:end]
            if self._timesteps:
                batches.append(self._timestep_run(info, start, run))
            else:
                stacked = [np.stack(column) for column in zip(*run, strict=True)]
                self._check(stacked, start)
                batches.append([field[start:end] for field in info] + stacked)
            start = end
        return batches

    def _fits(self, columns: list[np.ndarray]) -> bool:
        """Whether stacked columns match the specs; if not, the item by item
        path finds and reports the item that does not."""
        if len(columns) != len(self._specs):
            return False
        lead = 2 if self._timesteps else 1
        for column, spec in zip(columns, self._specs, strict=True):
            if not _dtype_fits(spec.dtype, column.dtype):
                return False
            if not _shape_fits(spec.shape, column.shape[lead:]):
                return False
            if self._timesteps and (column.ndim < 2 or column.shape[1] != columns[0].shape[1]):
                return False
        return True

    def _rows(self, info: list[np.ndarray], columns: list[np.ndarray]) -> list[np.ndarray]:
        if not self._timesteps:
            return info + columns
        length = columns[0].shape[1]
        rows = [column.reshape((-1, *column.shape[2:])) for column in columns]
        return [np.repeat(field, length) for field in info] + rows

    def _timestep_run(self, info: list[np.ndarray], start: int, run: list[Any]) -> list[np.ndarray]:
        lengths = []
        for offset, item in enumerate(run):
            item_lengths = {len(column) if column.ndim else None for column in item}
            if len(item_lengths) != 1 or None in item_lengths:
                raise ValueError(
                    f"sampled item {int(info[0][start + offset])} of table {self._table!r} has "
                    "columns of different lengths (or without a time axis), so it cannot be "
                    "split into timesteps; use TrajectoryDataset for such items"
                )
            lengths.append(item_lengths.pop())
        columns = [np.concatenate(column) for column in zip(*run, strict=True)]
        self._check(columns, start)
        repeats = np.asarray(lengths)
        return [np.repeat(field[start : start + len(run)], repeats) for field in info] + columns

    def _check(self, columns: list[np.ndarray], first_item: int) -> None:
        """Raises ValueError naming the column that does not match its spec."""
        if len(columns) != len(self._specs):
            raise ValueError(
                f"items of table {self._table!r} have {len(columns)} columns but the "
                f"dataset's dtypes and shapes describe {len(self._specs)}"
            )
        for index, (column, spec) in enumerate(zip(columns, self._specs, strict=True)):
            if not _dtype_fits(spec.dtype, column.dtype):
                raise ValueError(
                    f"column {index} of table {self._table!r} holds {column.dtype}, but the "
                    f"dataset's dtypes say {spec.dtype}"
                )
            if not _shape_fits(spec.shape, column.shape[1:]):
                what = "timestep" if self._timesteps else "sample"
                raise ValueError(
                    f"column {index} of table {self._table!r} has shape {column.shape[1:]} per "
                    f"{what}, which does not match the dataset's shape {spec.shape}"
                )


def _request_starter(
    client: Client, table: str
) -> tuple[Callable[..., Any], bool, Callable[[], None]]:
    """``(start(count, wait), parallel, stop)``: ``start`` asks for up to
    ``count`` samples (as many as the rate limiter allows at once, at least
    one, waiting at most ``wait`` seconds: DeadlineExceededError) and returns
    the function that receives them as core sample batches, in the order
    started; ``parallel``: whether started requests proceed before they are
    received (gRPC); ``stop`` ends what ``start`` opened."""
    stream = client._transport.open_sample_stream(table)
    if stream is not None:  # one server over gRPC: requests run ahead on one stream

        def start(count: int, wait: float) -> Callable[[], list[Any]]:
            receive = stream.start(count, wait)
            return lambda: [receive()]

        return start, True, stream.close
    take = client._taker(table, flexible=True)

    def start_later(count: int, wait: float) -> Callable[[], list[Any]]:
        return lambda: take(count, time.monotonic() + wait, None)

    return start_later, False, lambda: None


def _shapes(columns: list[np.ndarray]) -> tuple[Any, ...]:
    return tuple((column.shape, column.dtype.kind) for column in columns)


def _dtype_fits(expected: np.dtype, actual: np.dtype) -> bool:
    if expected.kind == "O":  # tf.string
        return actual.kind in "SUO"
    return expected == actual


def _shape_fits(expected: tuple[int | None, ...] | None, actual: tuple[int, ...]) -> bool:
    if expected is None:
        return True
    if len(expected) != len(actual):
        return False
    return all(e is None or e == a for e, a in zip(expected, actual, strict=True))


# Core limit of one sample call, re-exported for the datasets' fetch sizes.
MAX_SAMPLES_PER_FETCH = _core.MAX_SAMPLES_PER_CALL
