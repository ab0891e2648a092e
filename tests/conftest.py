"""Fixtures shared by every test folder: chunks and tables of resound._core,
and servers over each transport. What tests share besides fixtures is in
tests/helpers/.

Chunks are made with `chunk_factory`, which keeps handles alive for the test's
duration (a chunk lives only while a handle or an item references it).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import resound
from resound import _core

from helpers.core_tables import make_table


@pytest.fixture
def store() -> _core.ChunkStore:
    return _core.ChunkStore()


@pytest.fixture
def chunk_factory(store: _core.ChunkStore) -> Iterator[Callable[..., _core.Chunk]]:
    """Returns make(num_steps=4, episode_id=0, shape=(3,), key=None) -> Chunk."""
    handles: list[_core.Chunk] = []
    keys = itertools.count(1_000_000)

    def make(
        num_steps: int = 4,
        episode_id: int = 0,
        shape: tuple[int, ...] = (3,),
        key: int | None = None,
        dtype: str = "<f4",
    ) -> _core.Chunk:
        key = next(keys) if key is None else key
        data = np.arange(num_steps * int(np.prod(shape)), dtype=np.dtype(dtype))
        chunk = store.add(key, data, dtype, shape, num_steps, episode_id=episode_id)
        handles.append(chunk)
        return chunk

    yield make
    handles.clear()


@pytest.fixture
def tables(store: _core.ChunkStore) -> Iterator[Callable[..., _core.Table]]:
    """make(**make_table kwargs) -> Table; every table is closed at teardown so
    a failing test never leaves a thread blocked."""
    made: list[_core.Table] = []

    def make(**kwargs: Any) -> _core.Table:
        table = make_table(store, **kwargs)
        made.append(table)
        return table

    yield make
    for table in made:
        table.close()


TRANSPORTS = ["embedded", "grpc", *(["local"] if _core.HAS_LOCAL_TRANSPORT else [])]


@pytest.fixture(params=TRANSPORTS)
def serve(request: Any) -> Iterator[Callable[..., tuple[resound.Server, resound.Client]]]:
    """serve(*tables) -> (server, client) over each transport: an embedded
    server with an in-process client, a server on a 127.0.0.1 port it picks
    with a gRPC client, and (on Linux) the same server with a client of its
    same-host transport. Servers stop at teardown."""
    servers: list[resound.Server] = []

    def make(*tables: resound.Table) -> tuple[resound.Server, resound.Client]:
        if request.param == "embedded":
            server = resound.Server(list(tables), listen=False)
            servers.append(server)
            return server, server.in_process_client()
        server = resound.Server(list(tables))
        servers.append(server)
        return server, resound.Client(f"127.0.0.1:{server.port}", transport=request.param)

    yield make
    for server in servers:
        server.stop()
