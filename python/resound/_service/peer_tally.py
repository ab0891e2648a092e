"""Amounts counted by client connection (gRPC's peer address) and in all:
what the server's limits on open calls and unread response bytes count.

Example:
    >>> tally = PeerTally()
    >>> tally.add('ipv4:127.0.0.1:5000', 3)
    >>> tally.of('ipv4:127.0.0.1:5000'), tally.total
    (3, 3)
    >>> tally.remove('ipv4:127.0.0.1:5000', 3)
    >>> tally.of('ipv4:127.0.0.1:5000'), tally.total
    (0, 0)
"""

from __future__ import annotations

__all__ = ["PeerTally"]


class PeerTally:
    """Counts by peer and in all; a peer whose count returns to 0 is
    forgotten (connections come and go). Used on the server's loop only."""

    def __init__(self) -> None:
        self.total = 0
        self._by_peer: dict[str, int] = {}

    @property
    def peers(self) -> int:
        """Peers with a count above 0."""
        return len(self._by_peer)

    def of(self, peer: str) -> int:
        return self._by_peer.get(peer, 0)

    def add(self, peer: str, amount: int) -> None:
        self._by_peer[peer] = self._by_peer.get(peer, 0) + amount
        self.total += amount

    def remove(self, peer: str, amount: int) -> None:
        """Takes back an amount added earlier for ``peer``."""
        self.total -= amount
        left = self._by_peer[peer] - amount
        if left:
            self._by_peer[peer] = left
        else:
            del self._by_peer[peer]
