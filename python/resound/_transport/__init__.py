"""How a Client reaches tables. Every transport offers the same methods
(see ``embedded.EmbeddedTransport``); the Client API is written once on top.
What goes on the wire is resound._wire's, shared with the server.
"""
