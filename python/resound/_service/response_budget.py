"""How many bytes of sample responses a server holds while gRPC writes them:
in all, and per client connection.

A response waits in the server's memory until its client reads it (gRPC's
flow control holds it back otherwise). A client that asks for large batches
on many calls and never reads would hold that memory for as long as it
likes; so a response that would take its connection (or the server) past
its budget is refused with RESOURCE_EXHAUSTED and a message naming the
setting. A connection (and the server) with nothing in flight always gets
its next response, however large, so no single item is too big to send.

Example:
    >>> budget = ResponseBudget(total=100, per_connection=60)
    >>> budget.take('peer-a', 50) is None
    True
    >>> 'max_inflight_bytes_per_connection' in budget.take('peer-a', 20)
    True
    >>> budget.give('peer-a', 50)
"""

from __future__ import annotations

from resound._service.peer_tally import PeerTally

__all__ = [
    "DEFAULT_MAX_INFLIGHT_BYTES",
    "DEFAULT_MAX_INFLIGHT_BYTES_PER_CONNECTION",
    "ResponseBudget",
]

# A dataset iterator keeps two fetches (a few MB each) in flight, a learner's
# sample call one batch: far below these.
DEFAULT_MAX_INFLIGHT_BYTES = 2 << 30
DEFAULT_MAX_INFLIGHT_BYTES_PER_CONNECTION = 512 << 20


class ResponseBudget:
    """Bytes of responses being written, by client connection (gRPC's peer
    address), against ``total`` and ``per_connection``. Used on the
    server's loop only."""

    def __init__(self, total: int, per_connection: int) -> None:
        self.total = total
        self.per_connection = per_connection
        self._held = PeerTally()

    @property
    def held(self) -> int:
        """Bytes in flight right now."""
        return self._held.total

    def take(self, peer: str, size: int) -> str | None:
        """Counts a response of ``size`` bytes for ``peer``; or, past a
        budget, counts nothing and returns why it is refused."""
        mine = self._held.of(peer)
        if mine and mine + size > self.per_connection:
            return (
                f"the connection from {peer} has {mine} bytes of responses it has not read "
                f"yet, and this one of {size} bytes would pass its limit of "
                f"{self.per_connection} (max_inflight_bytes_per_connection); read them first"
            )
        held = self._held.total
        if held and held + size > self.total:
            return (
                f"the server holds {held} bytes of responses its clients have not read "
                f"yet, and this one of {size} bytes would pass its limit of {self.total} "
                "(max_inflight_bytes); try again later"
            )
        self._held.add(peer, size)
        return None

    def give(self, peer: str, size: int) -> None:
        """Uncounts a response that was taken and is now written (or dropped)."""
        self._held.remove(peer, size)
