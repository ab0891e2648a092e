"""One server of a ServerSet (``Member``): its address, its transport, its
health, and the ``resound.client`` log lines of its transitions.

A server that fails a call (unreachable, stopped) is left out for a
back-off (0.5 s, doubling up to 2 s per failure) and then tried again; the
first success brings it back. The log says each transition once, not each
failed request: WARNING when a server goes down (naming the servers the
requests go to meanwhile), INFO when it answers again (after how long), and
WARNING when a writer's insert stream fails over to another server.

Example:
    >>> member = Member('localhost:1', transport=None)  # the set gives its transport
    >>> member.mark_down(), member.mark_down()  # only the first goes down
    (True, False)
    >>> member.mark_up() is not None
    True
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from resound._transport.factory import AddressTransport

__all__ = ["Member", "log_failover"]

# A server that failed a call is left out this long, doubling per failure.
_DOWN_BACKOFF_START, _DOWN_BACKOFF_MAX = 0.5, 2.0

_LOGGER = logging.getLogger("resound.client")


class Member:
    """One server of the set: its address, its transport, its health."""

    def __init__(self, address: str, transport: AddressTransport) -> None:
        self.address = address
        # Embedded or gRPC, chosen at each use as for a client of one server.
        self.connection = transport
        self.failures = 0
        self.down_until = 0.0
        self.down_since = 0.0
        # Tables whose last sample request here found nothing to give, and when.
        self.starved: dict[str, float] = {}

    def __repr__(self) -> str:
        return f"Member({self.address!r})"

    def mark_down(self) -> bool:
        """Leaves the server out for its next back-off; True if it was up
        until now (the set's lock held)."""
        now = time.monotonic()
        backoff = min(_DOWN_BACKOFF_START * 2**self.failures, _DOWN_BACKOFF_MAX)
        went_down = self.failures == 0
        if went_down:
            self.down_since = now
        self.failures += 1
        self.down_until = now + backoff
        return went_down

    def mark_up(self) -> float | None:
        """Takes the server back; the seconds it was down, or None if it was
        not (the set's lock held)."""
        if not self.failures:
            return None
        self.failures = 0
        self.down_until = 0.0
        return time.monotonic() - self.down_since

    def log_down(self, error: BaseException | None, others: list[str]) -> None:
        why = "" if error is None else f" ({error})"
        meanwhile = (
            f"requests go to {', '.join(others)} meanwhile"
            if others
            else "no other server is live: calls wait for one"
        )
        _LOGGER.warning(
            "the server at %s is down%s; it is left out and tried again every %.1f-%.1f s; %s",
            self.address, why, _DOWN_BACKOFF_START, _DOWN_BACKOFF_MAX, meanwhile,
        )  # fmt: skip

    def log_up(self, seconds_down: float) -> None:
        _LOGGER.info(
            "the server at %s answers again after %.1f s down; it is back in the set",
            self.address,
            seconds_down,
        )


def log_failover(failed: str, to: str | None) -> None:
    """A writer's insert stream left the server at ``failed`` for ``to``
    (None: no other server was live)."""
    if to is None:
        _LOGGER.warning(
            "a writer's server at %s went away and no other server is live to fail over to",
            failed,
        )
    else:
        _LOGGER.warning(
            "a writer's server at %s went away: its unconfirmed items fail over to %s",
            failed,
            to,
        )
