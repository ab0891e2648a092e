"""Fixtures of the framework interop tests (tools/check_frameworks.sh runs them).

These tests import TensorFlow, PyTorch or JAX at top level: they live outside
tests/ so that the default `python3 -m pytest` (testpaths = tests) never
collects them.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import resound

# TensorFlow's C++ start-up chatter (oneDNN, CPU features) is noise here.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def uniform_table(name: str, signature: Any = None, max_size: int = 1000) -> resound.Table:
    return resound.Table(
        name,
        resound.selectors.Uniform(),
        resound.selectors.Fifo(),
        max_size,
        resound.rate_limiters.MinSize(1),
        signature=signature,
    )


@pytest.fixture
def make_client() -> Iterator[Callable[..., resound.Client]]:
    """make_client(*tables) -> an in-process client of a new embedded server
    (default: one table 't' without a signature); servers stop at teardown."""
    servers: list[resound.Server] = []

    def make(*tables: resound.Table) -> resound.Client:
        server = resound.Server(list(tables) or [uniform_table("t")], listen=False)
        servers.append(server)
        return server.in_process_client()

    yield make
    for server in servers:
        server.stop()
