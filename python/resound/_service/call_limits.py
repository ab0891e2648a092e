"""How many long-lived calls (insert streams, sample calls and streams) a
server holds open at once: in all, and per client connection.

An open call costs the server memory only (see serving_loop.py), but a
client that opens calls and abandons them, or opens thousands and never
reads, must not take all of it. A call past a limit is refused at once with
RESOURCE_EXHAUSTED and a message naming the limit, never queued.

Example:
    >>> limits = CallLimits(total=2, per_connection=1)
    >>> limits.admit('ipv4:127.0.0.1:5000') is None
    True
    >>> 'max_open_calls_per_connection' in limits.admit('ipv4:127.0.0.1:5000')
    True
    >>> limits.leave('ipv4:127.0.0.1:5000')
"""

from __future__ import annotations

from resound._service.peer_tally import PeerTally

__all__ = ["DEFAULT_MAX_OPEN_CALLS", "DEFAULT_MAX_OPEN_CALLS_PER_CONNECTION", "CallLimits"]

# About 25 KB of server memory per open call here (4,096 calls: ~100 MB),
# so the defaults bound that at about 1.6 GB in all and 200 MB per client
# connection, well past what Reverb's crowds (hundreds to thousands of
# actors) need.
DEFAULT_MAX_OPEN_CALLS = 65_536
DEFAULT_MAX_OPEN_CALLS_PER_CONNECTION = 8_192


class CallLimits:
    """Counts open calls by client connection (gRPC's peer address) against
    ``total`` and ``per_connection``. Used on the server's loop only."""

    def __init__(self, total: int, per_connection: int) -> None:
        self.total = total
        self.per_connection = per_connection
        self._open = PeerTally()

    @property
    def open(self) -> int:
        """Calls open right now."""
        return self._open.total

    @property
    def connections(self) -> int:
        """Client connections with a call open right now."""
        return self._open.peers

    def admit(self, peer: str) -> str | None:
        """Counts a new call of ``peer``; or, past a limit, counts nothing
        and returns why it is refused."""
        held = self._open.of(peer)
        if held >= self.per_connection:
            return (
                f"the connection from {peer} has {held} calls open, its limit "
                "(max_open_calls_per_connection); end some of them, or raise the limit"
            )
        if self._open.total >= self.total:
            return (
                f"the server has {self._open.total} calls open, its limit (max_open_calls); "
                "try again later, or raise the limit"
            )
        self._open.add(peer, 1)
        return None

    def leave(self, peer: str) -> None:
        """Uncounts an admitted call that ended."""
        self._open.remove(peer, 1)
