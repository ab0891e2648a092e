"""Embedded servers and tables for the framework interop tests in
tests/interop (tools/check_frameworks.sh runs them beside TensorFlow, PyTorch
and JAX; the default `python3 -m pytest` does not collect them).
"""

from __future__ import annotations

from typing import Any

import resound


def uniform_table(name: str, signature: Any = None, max_size: int = 1000) -> resound.Table:
    return resound.Table(
        name,
        resound.selectors.Uniform(),
        resound.selectors.Fifo(),
        max_size,
        resound.rate_limiters.MinSize(1),
        signature=signature,
    )


class Servers:
    """``make_client(*tables)`` gives an in-process client of a new embedded
    server (default: one table 't' without a signature); ``close()`` stops
    them all. Each test file wraps it in a ``make_client`` fixture."""

    def __init__(self) -> None:
        self._servers: list[resound.Server] = []

    def make_client(self, *tables: resound.Table) -> resound.Client:
        server = resound.Server(list(tables) or [uniform_table("t")], listen=False)
        self._servers.append(server)
        return server.in_process_client()

    def close(self) -> None:
        for server in self._servers:
            server.stop()
