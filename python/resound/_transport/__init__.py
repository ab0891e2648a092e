"""How a Client reaches tables: the transports.

``protocol`` says what every transport offers (``Transport``: one server or
several; ``ServerTransport``: one server's, which writers write through;
``InsertLink``: a writer's stream). ``factory`` makes a Client's transport
and holds the choice between ``embedded`` (a server of this process,
called directly) and ``remote`` (gRPC); ``server_set`` is the transport of
several servers. What goes on the wire is resound._wire's, shared with the
server side (resound._service), which this package never imports.
"""
