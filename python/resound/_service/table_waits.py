"""Calls waiting for a table's rate limiter on the server's event loop, with
no thread per wait.

A handler tries its insert or sample without waiting; when the limiter holds
it up, it waits here. Each table and side (inserts, samples) has a queue of
waiters in arrival order. The core arms the table's wake descriptor
(``Table.arm_wake``) and makes it readable once that side may proceed; the
loop then wakes the first waiter only. That waiter retries and, whatever the
outcome, passes the turn on (``pass_on``): the next waiter is woken at once
if the side may still proceed, or when the core says so again. So a table
that lets one sample through wakes one waiter, not thousands, and waiters
are served in the order they came. A call keeps its place and its turn in a
``Waiter``, which also counts it in the table's waiting and blocked figures.

Example (inside a handler on the loop):
    >>> waiter = TableWaits(table_core, loop).waiter(_core.WAKE_SAMPLES)  # doctest: +SKIP
    >>> try:  # doctest: +SKIP
    ...     while (batch := try_sample()) is None:
    ...         await waiter.wait(remaining_seconds())
    ... finally:
    ...     waiter.end()
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from typing import Any

from resound import _core

__all__ = ["TableWaits", "Waiter"]

_SIDES = (_core.WAKE_INSERTS, _core.WAKE_SAMPLES)


class TableWaits:
    """The waiters of one table (``table_core``: its ``_core.Table``), all on
    ``loop``, which must be the running loop of every call."""

    def __init__(self, table_core: Any, loop: asyncio.AbstractEventLoop) -> None:
        self._table = table_core
        self._loop = loop
        self._queues: dict[int, deque[asyncio.Future[None]]] = {side: deque() for side in _SIDES}
        self._watching = False

    def __len__(self) -> int:
        return sum(len(queue) for queue in self._queues.values())

    def waiter(self, side: int) -> Waiter:
        """The waits of one call for ``side``; see Waiter."""
        return Waiter(self, side)

    async def wait(self, side: int, timeout: float | None, first: bool = False) -> bool:
        """Waits until ``side`` may proceed: True once it may (the caller then
        holds the turn and must ``pass_on`` after its retry), also when it
        may already. asyncio.TimeoutError when ``timeout`` seconds (None:
        no limit) passed first. ``first`` puts the caller at the head of
        the queue: a woken waiter whose retry found the side held up again
        keeps its place."""
        if not self._table.arm_wake(side):
            return True
        if not self._watching:
            self._loop.add_reader(self._table.wake_fd, self._on_wake)
            self._watching = True
        future: asyncio.Future[None] = self._loop.create_future()
        queue = self._queues[side]
        if first:
            queue.appendleft(future)
        else:
            queue.append(future)
        try:
            if timeout is None:
                await future
            else:
                await asyncio.wait_for(future, max(0.0, timeout))
        except BaseException:
            if future.done() and not future.cancelled():
                self.pass_on(side)  # woken, but leaving: the next one's turn
            else:
                future.cancel()
                with contextlib.suppress(ValueError):  # already taken off by a wake
                    queue.remove(future)
            raise
        return True

    def pass_on(self, side: int) -> None:
        """Ends a woken waiter's turn: wakes the next waiter now if ``side``
        may still proceed, or arms the table to say when."""
        queue = self._queues[side]
        while queue and queue[0].done():
            queue.popleft()
        if queue and not self._table.arm_wake(side):
            self._wake_first(side)

    def close(self) -> None:
        """Stops watching the table (the loop is about to end)."""
        if self._watching:
            self._loop.remove_reader(self._table.wake_fd)
            self._watching = False

    def _on_wake(self) -> None:
        raised = self._table.take_wakes()
        for side in _SIDES:
            if raised & side:
                self._wake_first(side)

    def _wake_first(self, side: int) -> None:
        queue = self._queues[side]
        while queue:
            future = queue.popleft()
            if not future.done():
                future.set_result(None)
                return


class Waiter:
    """One call's waits for one side of a table, from its first wait to
    ``end()``: it keeps the call's place (a call woken whose retry found the
    side held up again waits first in line), passes its turn on when it
    ends, and counts the call in the table's waiting and blocked figures
    (as a thread waiting in the core is counted) while it waits."""

    def __init__(self, waits: TableWaits, side: int) -> None:
        self._waits = waits
        self._side = side
        self._woken = False  # holds the turn: must pass it on
        self._counted = False

    async def wait(self, timeout: float | None) -> None:
        """Waits until the side may proceed (see TableWaits.wait); the
        caller then retries. asyncio.TimeoutError after ``timeout`` s."""
        if not self._counted:
            self._waits._table.note_external_wait(self._side, 1)
            self._counted = True
        first, self._woken = self._woken, False
        self._woken = await self._waits.wait(self._side, timeout, first)

    def end(self) -> None:
        """The call is done with the table (served, failed or gone)."""
        if self._woken:
            self._woken = False
            self._waits.pass_on(self._side)
        if self._counted:
            self._counted = False
            self._waits._table.note_external_wait(self._side, -1)
