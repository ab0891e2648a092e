"""The server's log of the requests it refuses, rate-limited per cause.

A refused request (a bad signature, an unknown table, a server over its
limits, a malformed message) ends with a status the client sees; the server
also says so on the ``resound.server`` logger at WARNING, so that whoever
runs it learns that some actor sends what cannot be stored. A broken actor
refused a thousand times a second must not flood that log: each cause (the
status code and the method) is logged the first time, then at most once per
``PERIOD_SECONDS``, with how many were refused meanwhile without a line.

Example:
    >>> import grpc
    >>> clock = iter([0.0, 1.0, 2.0, 11.0]).__next__
    >>> log = RefusalLog(period=10.0, clock=clock)
    >>> log.refused("Insert", grpc.StatusCode.NOT_FOUND, "no table 'x'", "ipv4:127.0.0.1:5")
    >>> log.refused("Insert", grpc.StatusCode.NOT_FOUND, "no table 'x'", "ipv4:127.0.0.1:5")
    >>> log.refused("Insert", grpc.StatusCode.NOT_FOUND, "no table 'x'", "ipv4:127.0.0.1:5")
    >>> log.refused("Insert", grpc.StatusCode.NOT_FOUND, "no table 'y'", "ipv4:127.0.0.1:5")

logs two lines: the first refusal, and at 11 s the fourth, saying that 2
more were refused without a line since the last one.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import grpc

__all__ = ["LOGGED_CODES", "PERIOD_SECONDS", "RefusalLog"]

# At most one line per cause this often (seconds), after the first.
PERIOD_SECONDS = 10.0
# The status codes that mean "refused": what the client sent (or how much)
# cannot be served. Timeouts (the rate limiter's, the client's own) and a
# stopping server's CANCELLED are the normal course of things, not refusals.
LOGGED_CODES = frozenset(
    {
        grpc.StatusCode.INVALID_ARGUMENT,
        grpc.StatusCode.NOT_FOUND,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        grpc.StatusCode.FAILED_PRECONDITION,
        grpc.StatusCode.UNAUTHENTICATED,
        grpc.StatusCode.PERMISSION_DENIED,
        grpc.StatusCode.OUT_OF_RANGE,
        grpc.StatusCode.INTERNAL,
    }
)

_LOGGER = logging.getLogger("resound.server")


class _Cause:
    __slots__ = ("next_line", "suppressed")

    def __init__(self) -> None:
        self.next_line = 0.0
        self.suppressed = 0


class RefusalLog:
    """Logs refused requests, at most one line per cause per ``period``
    seconds (see the module doc). ``clock`` is time.monotonic unless a test
    gives its own."""

    def __init__(
        self, period: float | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._period = PERIOD_SECONDS if period is None else period
        self._clock = clock
        self._causes: dict[tuple[str, grpc.StatusCode], _Cause] = {}
        self._lock = threading.Lock()

    def refused(self, method: str, code: grpc.StatusCode, message: str, peer: str) -> None:
        """Notes that ``method``'s call from ``peer`` ended with ``code``
        and ``message``; logs it unless its cause was logged less than a
        period ago (then counts it for the next line)."""
        if code not in LOGGED_CODES:
            return
        now = self._clock()
        with self._lock:
            cause = self._causes.setdefault((method, code), _Cause())
            if now < cause.next_line:
                cause.suppressed += 1
                return
            suppressed, cause.suppressed = cause.suppressed, 0
            cause.next_line = now + self._period
        also = ""
        if suppressed:
            also = (
                f" ({suppressed} more {method} request{'s' if suppressed != 1 else ''} refused "
                f"with {code.name} since the last line were not logged)"
            )
        _LOGGER.warning(
            "refused %s from %s: %s: %s%s", method, peer or "an unknown peer", code.name, message,
            also,
        )  # fmt: skip
