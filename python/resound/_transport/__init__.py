"""How a Client reaches tables. Every transport offers the same methods
(see ``embedded.EmbeddedTransport``); the Client API is written once on top.
"""
