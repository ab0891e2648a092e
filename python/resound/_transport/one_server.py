"""What every transport to one server does alike (embedded, gRPC, and any
to come): ``OneServerTransport``, their shared base.

A client of one server has no turns to take and no other server to choose:
``one_server`` is the transport itself, ``server_infos`` its one server's.
Sampling a number of samples is a loop of ``sample`` calls (``_take``), each
waiting for the rate limiter in slices while a caller may cancel, and no
longer than until the next wait warning is due (resound.wait_warnings): a
call that timed out says why, which the warning repeats.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from resound import _core, wait_warnings
from resound.errors import DeadlineExceededError

if TYPE_CHECKING:
    from typing_extensions import Self

    from resound._transport.protocol import Take
    from resound._transport.sample_stream import SampleStream
    from resound.priority_histogram import PriorityHistogram
    from resound.table_info import TableInfo

__all__ = ["OneServerTransport"]

# While a caller may cancel, the rate limiter is waited for in slices this long.
_CANCEL_CHECK_SECONDS = 0.1


class OneServerTransport:
    """The shared part of one server's transports (see the module doc).
    Subclasses provide ``address``, ``sample``, ``server_info`` and
    ``priority_histogram``."""

    if TYPE_CHECKING:
        # An attribute of the subclass or a property: read here only.
        @property
        def address(self) -> str: ...

    def sample(self, table: str, num_samples: int, timeout: float | None) -> Any:
        raise NotImplementedError

    def server_info(self, timeout: float | None) -> dict[str, TableInfo]:
        raise NotImplementedError

    def insert_step(
        self, items: list[tuple[str, int, float]], arrays: list[Any], chunk_keys: list[int],
        episode_id: int,
    ) -> bool:  # fmt: skip
        del items, arrays, chunk_keys, episode_id
        return False  # no path of its own: chunks and inserts, as a writer's

    @property
    def addresses(self) -> list[str]:
        return [self.address]

    def one_server(self, tables: Iterable[str] = (), timeout: float | None = None) -> Self:
        del tables, timeout  # one server: nothing to choose, nobody to wait for
        return self

    def taker(self, table: str, *, flexible: bool = False) -> Take:
        if flexible:
            return functools.partial(_take_flexible, self, table)
        return functools.partial(_take, self, table)

    def open_sample_stream(self, table: str) -> SampleStream | None:
        del table
        return None

    def server_infos(self, timeout: float | None) -> dict[str, dict[str, TableInfo]]:
        return {self.address: self.server_info(timeout)}

    def priority_histogram(self, table: str, bins: int, timeout: float | None) -> PriorityHistogram:
        raise NotImplementedError

    def priority_histograms(
        self, table: str, bins: int, timeout: float | None
    ) -> dict[str, PriorityHistogram]:
        return {self.address: self.priority_histogram(table, bins, timeout)}

    def turn_for_copy(self) -> int | None:
        return None

    def close_client_stream(self) -> None:
        pass


def _take_flexible(
    transport: OneServerTransport,
    table: str,
    count: int,
    deadline: float | None,
    cancelled: threading.Event | None,
) -> list[Any]:
    del cancelled
    started = time.monotonic()
    blocked: wait_warnings.BlockedWait | None = None
    while True:
        wait = None if deadline is None else max(0.0, deadline - time.monotonic())
        capped = _capped(wait, blocked, started)
        try:
            return [transport.sample(table, count, capped)]
        except DeadlineExceededError as error:
            if capped == wait:
                raise
            blocked = _warned(blocked, started, error)


def _capped(
    wait: float | None, blocked: wait_warnings.BlockedWait | None, started: float
) -> float | None:
    """``wait``, ending when the call's next wait warning is due."""
    if blocked is not None:
        return blocked.cap(wait)
    threshold = wait_warnings.wait_warning_seconds()
    if threshold is None:
        return wait
    due = max(0.0, started + threshold - time.monotonic())
    return due if wait is None else min(wait, due)


def _warned(
    blocked: wait_warnings.BlockedWait | None, started: float, error: DeadlineExceededError
) -> wait_warnings.BlockedWait:
    """The call's BlockedWait (made on its first timeout), which warned
    with ``error``'s reason if that was due."""
    if blocked is None:
        blocked = wait_warnings.BlockedWait(wait_warnings.SAMPLER_LOGGER, "sampler", started)
    blocked.warn_if_due(str(error))
    return blocked


def _take(
    transport: OneServerTransport,
    table: str,
    count: int,
    deadline: float | None,
    cancelled: threading.Event | None,
) -> list[Any]:
    """Core sample batches holding ``count`` samples in all, fewer if the
    deadline passes after the first sample or ``cancelled`` is set."""
    parts: list[Any] = []
    taken = 0
    started = time.monotonic()
    blocked: wait_warnings.BlockedWait | None = None
    while taken < count:
        wait = None if deadline is None else max(0.0, deadline - time.monotonic())
        if cancelled is not None:
            if cancelled.is_set():
                break
            wait = _CANCEL_CHECK_SECONDS if wait is None else min(wait, _CANCEL_CHECK_SECONDS)
        try:
            part = transport.sample(
                table,
                min(count - taken, _core.MAX_SAMPLES_PER_CALL),
                _capped(wait, blocked, started),
            )
        except DeadlineExceededError as error:
            if deadline is not None and time.monotonic() >= deadline:
                if not parts:
                    raise
                break
            blocked = _warned(blocked, started, error)
            continue  # only a cancellation check slice (or a warning's) ended
        parts.append(part)
        taken += len(part)
        if blocked is not None:  # a new wait, if any, starts now
            blocked, started = None, time.monotonic()
    return parts
