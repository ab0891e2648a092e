"""Warnings about calls that wait long for a table's rate limiter.

A writer whose table refuses inserts (a ``SampleToInsertRatio`` waiting for
samples, a full ``Queue``) blocks in ``flush()``, ``end_episode()`` or
``create_item()``; a sampler of an empty table blocks in ``sample()``. Such
a wait is what the rate limiter is for, but one that goes on for minutes
usually means that the other side stopped. So a call that has waited
longer than the warning threshold (30 s unless set otherwise) says why, at
WARNING, on the ``resound.writer`` logger (inserts: writers,
``Client.insert``) or the ``resound.sampler`` logger (``Client.sample``,
datasets and sample iterators), in the process of the call, and again every
threshold while it still waits::

    writer blocked 30 s: table 'replay': SampleToInsertRatio(samples_per_insert=4.0,
    min_size_to_sample=1000, error_buffer=400.0) needs 412 more samples before inserting
    (1100 items, 1100 inserts and 3988 samples so far)

The reason is the one a timeout's ``DeadlineExceededError`` carries; over
gRPC the server tells it (see ``docs/semantics.md``).

The threshold is ``set_wait_warning(seconds)`` (None: never warn), or the
environment variable ``RESOUND_WAIT_WARNING_SECONDS`` read at import
(``off`` or ``0`` or an empty value: never warn).

Example:
    >>> import resound
    >>> resound.set_wait_warning(60.0)
    >>> resound.wait_warning_seconds()
    60.0
    >>> resound.set_wait_warning(30.0)
"""

from __future__ import annotations

import datetime
import functools
import itertools
import logging
import math
import os
import threading
import time
from collections.abc import Callable

__all__ = [
    "DEFAULT_WAIT_WARNING_SECONDS",
    "BlockedWait",
    "set_wait_warning",
    "timeout_message",
    "wait_warning_seconds",
    "watching",
]

DEFAULT_WAIT_WARNING_SECONDS = 30.0
_ENVIRONMENT = "RESOUND_WAIT_WARNING_SECONDS"

WRITER_LOGGER = logging.getLogger("resound.writer")
SAMPLER_LOGGER = logging.getLogger("resound.sampler")


def _check(seconds: object, name: str) -> float | None:
    if seconds is None:
        return None
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        raise TypeError(f"{name} must be a number of seconds > 0 or None, got {seconds!r}")
    value = float(seconds)
    if not value > 0 or math.isnan(value):
        raise ValueError(f"{name} must be a number of seconds > 0 or None, got {seconds!r}")
    return None if math.isinf(value) else value


def _from_environment() -> float | None:
    text = os.environ.get(_ENVIRONMENT)
    if text is None:
        return DEFAULT_WAIT_WARNING_SECONDS
    if text.strip().lower() in ("", "0", "off", "none", "never"):
        return None
    try:
        return _check(float(text), _ENVIRONMENT)
    except ValueError:
        raise ValueError(
            f"{_ENVIRONMENT} must be a number of seconds > 0 or 'off', got {text!r}"
        ) from None


_threshold = _from_environment()


def set_wait_warning(seconds: float | None) -> None:
    """Sets after how many seconds of waiting for a rate limiter a call
    warns (and how often it warns again while it waits); None: never.
    Applies to waits that start afterwards.

    Example:
        >>> import resound
        >>> resound.set_wait_warning(None)  # quiet
        >>> resound.set_wait_warning(30.0)  # the default
    """
    global _threshold  # noqa: PLW0603 - the module's one setting
    _threshold = _check(seconds, "seconds")


def wait_warning_seconds() -> float | None:
    """The threshold ``set_wait_warning`` set (None: no warnings)."""
    return _threshold


def timeout_message(call: str, seconds: float, reason: str | None) -> str:
    """A writer call's DeadlineExceededError text (Reverb's words), with
    why it waited when that is known: the same on every transport.

    Example:
        >>> timeout_message("Flush", 0.5, "table 'q': Queue(1) needs 1 more sample")[55:]
        "0:00:00.500000: table 'q': Queue(1) needs 1 more sample"
    """
    text = (
        f"{call} call did not complete within provided timeout of "
        f"{datetime.timedelta(seconds=seconds)}"
    )
    return f"{text}: {reason}" if reason else text


def _seconds(value: float) -> str:
    if value >= 10:
        return f"{value:.0f}"
    if value >= 1:
        return f"{value:.1f}"
    return f"{value:.2f}"


class BlockedWait:
    """One call's wait for a rate limiter, as the warnings see it: started
    when made; ``warn_if_due(reason)`` logs once the threshold passed since
    the start or the last warning (``reason`` may be a function, called
    only then). The calls of one wait may come from two threads (the
    caller's, the watchdog's): without a lock, which is made per call, at
    worst both warn once at the same moment."""

    __slots__ = ("_logger", "_next", "_period", "_who", "started")

    def __init__(self, logger: logging.Logger, who: str, started: float | None = None) -> None:
        self._logger = logger
        self._who = who
        self.started = time.monotonic() if started is None else started
        self._period = _threshold
        self._next = math.inf if self._period is None else self.started + self._period

    def until_due(self) -> float | None:
        """Seconds until the next warning is due (0 if it is; None: never)."""
        if self._period is None:
            return None
        return max(0.0, self._next - time.monotonic())

    def cap(self, timeout: float | None) -> float | None:
        """``timeout`` (None: forever), shortened to end when the next
        warning is due: how long the call's next wait may last."""
        due = self.until_due()
        if due is None:
            return timeout
        return due if timeout is None else min(timeout, due)

    def warn_if_due(self, reason: str | Callable[[], str]) -> bool:
        """Logs "<who> blocked <s> s: <reason>" if due; True if it did."""
        now = time.monotonic()
        if now < self._next or self._period is None:
            return False
        self._next = now + self._period
        text = reason() if callable(reason) else reason
        self._logger.warning("%s blocked %s s: %s", self._who, _seconds(now - self.started), text)
        return True


class _Watchdog:
    """Warns for calls that block where they cannot look at the clock (a
    gRPC stream's next answer): while they block they are registered, with
    their reason, and one daemon thread, started on first use, warns for
    each when it is due. Registering costs a lock and a dict entry; the
    thread looks at the registered calls only when the earliest is due."""

    def __init__(self) -> None:
        self._cv = threading.Condition(threading.Lock())
        self._active: dict[int, tuple[BlockedWait, Callable[[], str]]] = {}
        self._ids = itertools.count()
        self._thread: threading.Thread | None = None
        # When the thread's wait ends (inf: it waits for a registration).
        self._wakes_at = math.inf

    def register(self, wait: BlockedWait, reason: Callable[[], str]) -> int:
        ident = next(self._ids)
        due = wait.until_due()
        due_at = time.monotonic() + (math.inf if due is None else due)
        with self._cv:
            self._active[ident] = (wait, reason)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="resound-wait-warnings", daemon=True
                )
                self._thread.start()
            elif due_at < self._wakes_at:
                # Woken only for a call due before it would wake anyway: a
                # stream of short calls with one threshold costs no wake-ups.
                self._wakes_at = due_at
                self._cv.notify()
        return ident

    def unregister(self, ident: int) -> None:
        with self._cv:
            self._active.pop(ident, None)

    def _run(self) -> None:
        while True:
            with self._cv:
                if not self._active:
                    self._wakes_at = math.inf
                    self._cv.wait()
                    continue
                waits = list(self._active.values())
            dues = [(wait.until_due(), wait, reason) for wait, reason in waits]
            due_now = [(wait, reason) for due, wait, reason in dues if due == 0]
            for wait, reason in due_now:
                wait.warn_if_due(functools.partial(_reason_or_why_not, reason))
            if due_now:
                continue
            later = [due for due, _, _ in dues if due is not None]
            with self._cv:
                timeout = min(later) if later else None
                self._wakes_at = math.inf if timeout is None else time.monotonic() + timeout
                self._cv.wait(timeout)


class _Watching:
    __slots__ = ("_ident", "_reason", "_wait")

    def __init__(self, wait: BlockedWait, reason: Callable[[], str]) -> None:
        self._wait = wait
        self._reason = reason
        self._ident: int | None = None

    def __enter__(self) -> None:
        if self._wait.until_due() is not None:
            self._ident = _WATCHDOG.register(self._wait, self._reason)

    def __exit__(self, *exc_info: object) -> None:
        if self._ident is not None:
            _WATCHDOG.unregister(self._ident)


def _reason_or_why_not(reason: Callable[[], str]) -> str:
    try:
        return reason()
    except Exception as error:  # noqa: BLE001 - the warning goes out all the same
        return f"(why could not be read: {error})"


_WATCHDOG = _Watchdog()


def watching(wait: BlockedWait, reason: Callable[[], str]) -> _Watching:
    """While the ``with`` block runs (a call that blocks without slices),
    ``wait`` warns when due, from a thread of its own, with ``reason()``."""
    return _Watching(wait, reason)
