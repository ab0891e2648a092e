"""What both ends of the gRPC service share, below both of them.

The client's transports (resound._transport) and the server's service
(resound._service) each import from here and never from each other:

* ``resound._proto``: the messages themselves (generated from protos/);
* ``message_codec``: core objects <-> messages (chunks, trajectories, table
  infos);
* ``status``: what a status code means to a client (wait, or which
  exception) and which status an exception ends a server's call with;
* ``channel_options``: the message size limit and channel options of both
  ends;
* ``timeouts``: how both ends read a timeout (past a year: forever);
* ``operation``: the public operation a thread runs, for the words of
  client warnings.

Only ``status`` and ``message_codec`` import grpc or protobuf;
``channel_options``, ``timeouts`` and ``operation`` are plain Python, so the public API
(``Server``'s argument checks, writers) can read them without loading gRPC.
"""
