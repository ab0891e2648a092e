"""Message size limit and channel options of both ends of the service.

Plain values, no grpc import: ``Server`` checks its ``max_message_bytes``
against ``MAX_MESSAGE_BYTES`` without loading gRPC (an embedded server never
loads it).
"""

from __future__ import annotations

__all__ = ["CHANNEL_OPTIONS", "MAX_MESSAGE_BYTES"]

# The largest message either end reads, by default: messages may carry many
# large chunks.
MAX_MESSAGE_BYTES = 1 << 30

# Channel options of both ends (a server replaces the receive limit with its
# own max_message_bytes).
CHANNEL_OPTIONS = [
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
]
