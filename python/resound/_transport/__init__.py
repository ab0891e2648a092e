"""How a Client reaches tables. Every transport offers the same methods
(see ``embedded.EmbeddedTransport``); the Client API is written once on top.
"""

# The largest message either end reads, by default: messages may carry many
# large chunks. (Here, not in remote.py: the Server checks its argument
# against it without importing grpc.)
MAX_MESSAGE_BYTES = 1 << 30
