"""Trajectories and tables of ``resound._core`` built directly, and checks of
a table's accounting."""

from __future__ import annotations

from resound import _core


def column(chunk_key: int, offset: int = 0, length: int = 1, squeeze: bool = False) -> tuple:
    """A one-slice trajectory column."""
    return ([(chunk_key, offset, length)], squeeze)


def trajectory(chunk_key: int, offset: int = 0, length: int = 1) -> list:
    """A one-column trajectory over rows [offset, offset+length) of a chunk."""
    return [column(chunk_key, offset, length)]


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


def table_counters(table: _core.Table) -> tuple[int, int, int]:
    """(inserts, samples, deletes) of a table's rate limiter."""
    info = table.info().rate_limiter
    return info["inserts"], info["samples"], info["deletes"]


def check_accounting(table: _core.Table) -> list[_core.ItemSnapshot]:
    """Checks that the table's size, chunk, memory and episode figures agree
    with its items; returns the snapshot it checked against."""
    info = table.info()
    assert info.rate_limiter["inserts"] - info.rate_limiter["deletes"] == info.current_size
    assert info.current_size <= info.max_size
    snapshot = table.snapshot()
    assert len(snapshot) == info.current_size
    chunks = {c.key: c for item in snapshot for c in item.chunks}
    assert info.num_chunks == len(chunks)
    assert info.memory_bytes == sum(c.memory_bytes for c in chunks.values())
    assert info.num_episodes == len({c.episode_id for c in chunks.values()})
    return snapshot
