"""The gRPC service: what goes on the wire (``wire``), the server side
(``servicer``, ``grpc_server``). The client side is
``resound._transport.remote``."""
