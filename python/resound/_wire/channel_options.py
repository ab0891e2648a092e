"""Message size limit and channel options of both ends of the service.

Plain values, no grpc import: ``Server`` checks its ``max_message_bytes``
against ``MAX_MESSAGE_BYTES`` without loading gRPC (an embedded server never
loads it).

Keepalive: each end pings the other over every connection it holds calls
on. A server that stops answering (hung, stopped, its machine gone without
a reset) is noticed by its clients within KEEPALIVE_MS + KEEPALIVE_TIMEOUT_MS:
the connection closes and its calls end UNAVAILABLE, which clients wait out
as any lost connection (warning meanwhile) instead of waiting silently
forever. A client gone the same way is noticed by the server, which then
frees its open calls. The server allows pings far more often than clients
send them, so no client is refused for pinging ("too many pings").
"""

from __future__ import annotations

__all__ = [
    "CHANNEL_OPTIONS",
    "KEEPALIVE_MS",
    "KEEPALIVE_TIMEOUT_MS",
    "MAX_MESSAGE_BYTES",
    "client_keepalive",
    "server_keepalive",
]

# The largest message either end reads, by default: messages may carry many
# large chunks.
MAX_MESSAGE_BYTES = 1 << 30

# Channel options of both ends (a server replaces the receive limit with its
# own max_message_bytes).
CHANNEL_OPTIONS = [
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
]

# A client pings after this long without hearing from the server, and gives
# the connection up if the answer takes longer than the timeout.
KEEPALIVE_MS = 30_000
KEEPALIVE_TIMEOUT_MS = 10_000
# The server pings its clients less often: a dead client only holds memory.
_SERVER_KEEPALIVE_MS = 120_000
_SERVER_KEEPALIVE_TIMEOUT_MS = 20_000
# The most often the server lets a client ping without data in between.
_SERVER_MIN_PING_INTERVAL_MS = 100


def client_keepalive() -> list[tuple[str, int]]:
    """A client channel's keepalive options (read at each channel's making)."""
    return [
        ("grpc.keepalive_time_ms", KEEPALIVE_MS),
        ("grpc.keepalive_timeout_ms", KEEPALIVE_TIMEOUT_MS),
        # gRPC waits this long for any ping's answer, its own bandwidth
        # probes' too (60 s by default; the keepalive timeout alone does not
        # shorten it for keepalive pings).
        ("grpc.http2.ping_timeout_ms", KEEPALIVE_TIMEOUT_MS),
        # Open calls that carry nothing for a while (idle streams kept for
        # the next call) are pinged as any: gRPC's default stops after two.
        ("grpc.http2.max_pings_without_data", 0),
    ]


def server_keepalive() -> list[tuple[str, int]]:
    """A server's keepalive options, and what it allows its clients."""
    return [
        ("grpc.keepalive_time_ms", _SERVER_KEEPALIVE_MS),
        ("grpc.keepalive_timeout_ms", _SERVER_KEEPALIVE_TIMEOUT_MS),
        ("grpc.http2.ping_timeout_ms", _SERVER_KEEPALIVE_TIMEOUT_MS),
        ("grpc.http2.max_pings_without_data", 0),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.min_ping_interval_without_data_ms", _SERVER_MIN_PING_INTERVAL_MS),
    ]
