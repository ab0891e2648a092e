"""Helpers of the framework interop tests (tools/check_frameworks.sh runs them).

These tests import TensorFlow, PyTorch or JAX at top level: they live outside
tests/ so that the default `python3 -m pytest` (testpaths = tests) never
collects them. There is no conftest.py here: pytest runs tests/ and this
folder in one process, and a second top-level `conftest` module would shadow
the one tests/ imports helpers from.
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
