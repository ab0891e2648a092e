"""The server side of the gRPC service: ``servicer`` (requests in, core calls
out), ``serving_loop`` (the grpc.aio server), ``table_waits``,
``call_limits``, ``response_budget``, ``peer_tally``, the standard
``health`` service and the Prometheus ``metrics``. It serves a
``resound._table_host.TableHost`` (what ``resound.Server`` is to it) and
shares the wire (messages, status codes, channel options) with the client
side through resound._wire, never importing resound._transport."""
