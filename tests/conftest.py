"""Shared helpers for tests of resound._core.

Chunks are made with `chunk_factory`, which keeps handles alive for the test's
duration (a chunk lives only while a handle or an item references it).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator

import numpy as np
import pytest

from resound import _core


def column(chunk_key: int, offset: int = 0, length: int = 1, squeeze: bool = False) -> tuple:
    """A one-slice trajectory column."""
    return ([(chunk_key, offset, length)], squeeze)


def trajectory(chunk_key: int, offset: int = 0, length: int = 1) -> list:
    """A one-column trajectory over rows [offset, offset+length) of a chunk."""
    return [column(chunk_key, offset, length)]


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


def make_table(
    store: _core.ChunkStore,
    sampler: str = "uniform",
    remover: str = "fifo",
    max_size: int = 100,
    rate_limiter: _core.RateLimiter | None = None,
    max_times_sampled: int = 0,
    priority_exponent: float = 1.0,
    seed: int | None = 0,
    name: str = "table",
) -> _core.Table:
    def selector(kind: str) -> _core.ItemSelector:
        if kind == "prioritized":
            return _core.make_selector(kind, priority_exponent, seed=seed)
        if kind == "uniform":
            return _core.make_selector(kind, seed=seed)
        return _core.make_selector(kind)

    return _core.Table(
        name,
        selector(sampler),
        selector(remover),
        max_size,
        rate_limiter if rate_limiter is not None else _core.RateLimiter.min_size(1),
        max_times_sampled=max_times_sampled,
        chunk_store=store,
    )
