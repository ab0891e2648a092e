"""How both ends of the service read a timeout.

Timeouts longer than ``FOREVER_SECONDS`` (a year), ``float('inf')``
included, mean "wait forever", as they do in the core (deadline.cc): no
caller can tell the two apart, and gRPC cannot take them (its deadlines are
int64 nanoseconds since the epoch, which overflow from about 7e9 s on; the
call then fails at once with DEADLINE_EXCEEDED). ``finite_timeout`` maps
them to None: the client passes every gRPC deadline and request timeout
through it, the server every timeout a request carries.
"""

from __future__ import annotations

__all__ = ["FOREVER_SECONDS", "finite_timeout"]

# Timeouts longer than this (seconds) wait forever (see the module doc); the
# core's rule too (Deadline::AfterSeconds).
FOREVER_SECONDS = 365.0 * 24 * 3600


def finite_timeout(timeout: float | None) -> float | None:
    """``timeout``, or None (wait forever) if it is None or longer than
    FOREVER_SECONDS (``inf`` included): what a gRPC call may be given.

    Example:
        >>> finite_timeout(2.5), finite_timeout(float('inf')), finite_timeout(1e10)
        (2.5, None, None)
    """
    return None if timeout is None or timeout > FOREVER_SECONDS else timeout
