"""Waiting for a server that is not up (yet), as Reverb's clients do.

Actors and learners are often started before their server. A call whose
server cannot be reached waits for it (up to the call's timeout, then
DeadlineExceededError; without a timeout until it comes up) instead of
failing at once. So that a mistyped address does not look like a hang, the
waiting logs a warning on the ``resound`` logger every
``WARNING_PERIOD_SECONDS`` naming the address and the last connection error.

An ``Outage`` is one client's view of one unreachable server (or of a set of
servers all unreachable): since when, the last connection error, when to
warn next. Every call waiting on that server shares it, so a stream of
short waits (such as a prefetching sampler's slices) still warns once per
period, and any call that gets through ends it.

Timeouts longer than a year mean "wait forever" (see
resound._wire.timeouts, which both ends of the wire share); every gRPC
deadline passes through its ``finite_timeout``.

``WARNING_PERIOD_SECONDS`` is a module constant, read when an outage starts;
tests shorten it with ``monkeypatch.setattr(waiting, 'WARNING_PERIOD_SECONDS', 0.05)``.

Example:
    >>> outage = Outage('localhost:1')
    >>> outage.note('refused')
    >>> print(outage.deadline_error('ServerInfo', 1.0))
    ServerInfo: the server at localhost:1 was not reachable within 1.0 s (last error: refused)
"""

from __future__ import annotations

import logging
import threading
import time

from resound._wire.operation import public_name
from resound._wire.timeouts import finite_timeout
from resound.errors import DeadlineExceededError

__all__ = [
    "WAIT_SLICE_SECONDS",
    "WARNING_PERIOD_SECONDS",
    "Outage",
    "deadline_after",
    "remaining",
]

# A client waiting for an unreachable server warns this often (seconds).
WARNING_PERIOD_SECONDS = 10.0
# Client waits run in slices this long, so that Ctrl-C reaches the caller and
# a closed stream is noticed.
WAIT_SLICE_SECONDS = 0.1

_LOGGER = logging.getLogger("resound")


def deadline_after(timeout: float | None) -> float | None:
    """The time.monotonic() ``timeout`` seconds from now (None: never, also
    for timeouts longer than a year)."""
    timeout = finite_timeout(timeout)
    return None if timeout is None else time.monotonic() + timeout


def remaining(deadline: float | None) -> float | None:
    """Seconds left until ``deadline`` (at least 0; None: no deadline)."""
    return None if deadline is None else max(0.0, deadline - time.monotonic())


class Outage:
    """An unreachable server as a client sees it (see the module doc)."""

    def __init__(self, address: str) -> None:
        self.address = address
        self.started = time.monotonic()
        self._period = WARNING_PERIOD_SECONDS
        self._next_warning = self.started + self._period
        self._lock = threading.Lock()
        self.last_error = "none yet"

    def note(self, error: object) -> None:
        """Records the latest connection error (an exception, or its text)."""
        details = getattr(error, "details", None)
        text = details() if callable(details) else None
        self.last_error = str(text or error)

    def until_warning(self) -> float:
        """Seconds until the next warning is due (0 if it is)."""
        return max(0.0, self._next_warning - time.monotonic())

    def warn_if_due(self, what: str) -> None:
        """Logs the warning if a period passed since the last one (once per
        period, however many calls wait)."""
        now = time.monotonic()
        with self._lock:
            if now < self._next_warning:
                return
            self._next_warning = now + self._period
        _LOGGER.warning(
            "%s: waiting for the server at %s, not reachable for %.0f s (last error: %s); "
            "is the address right and the server started?",
            public_name(what),
            self.address,
            now - self.started,
            self.last_error,
        )

    def deadline_error(self, what: str, timeout: float | None = None) -> DeadlineExceededError:
        within = "in time" if timeout is None else f"within {timeout} s"
        return DeadlineExceededError(
            f"{what}: the server at {self.address} was not reachable {within} "
            f"(last error: {self.last_error})"
        )
