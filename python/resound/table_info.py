"""``TableInfo``: what ``Client.server_info()`` and ``Table.info`` report.

The field names follow Reverb's ``reverb_types.TableInfo``; the option and
counter fields are plain Python objects instead of protos (the selectors
themselves, ``RateLimiterInfo`` with ``insert_stats.completed`` and
``sample_stats.completed``). resound adds the chunk count and the bytes the
table's items hold.

Example:
    >>> import resound
    >>> table = resound.Table.queue('q', max_size=10)
    >>> info = table.info
    >>> info.current_size, info.rate_limiter_info.max_diff
    (0, 10.0)
"""

from __future__ import annotations

import dataclasses
from typing import Any

from resound import _core, item_selectors

__all__ = ["RateLimiterCallStats", "RateLimiterInfo", "TableInfo", "TableWorkerTime", "combined"]


@dataclasses.dataclass(frozen=True)
class RateLimiterCallStats:
    completed: int = 0


@dataclasses.dataclass(frozen=True)
class RateLimiterInfo:
    samples_per_insert: float
    min_diff: float
    max_diff: float
    min_size_to_sample: int
    insert_stats: RateLimiterCallStats = RateLimiterCallStats()
    sample_stats: RateLimiterCallStats = RateLimiterCallStats()
    delete_stats: RateLimiterCallStats = RateLimiterCallStats()


@dataclasses.dataclass(frozen=True)
class TableWorkerTime:
    """Reverb's per-worker timings; resound has no table worker thread, so
    these stay zero and exist for code that reads them."""

    running_ms: int = 0
    sampling_ms: int = 0
    inserting_ms: int = 0
    sleeping_ms: int = 0
    waiting_for_sampling_ms: int = 0
    waiting_for_inserts_ms: int = 0


@dataclasses.dataclass(frozen=True)
class TableInfo:
    name: str
    sampler_options: item_selectors.ItemSelector
    remover_options: item_selectors.ItemSelector
    max_size: int
    max_times_sampled: int
    rate_limiter_info: RateLimiterInfo
    signature: Any
    current_size: int
    num_episodes: int
    num_deleted_episodes: int
    num_unique_samples: int
    table_worker_time: TableWorkerTime = TableWorkerTime()
    num_chunks: int = 0
    memory_bytes: int = 0
    max_bytes: int | None = None  # beyond Reverb: the table's memory bound, if any

    @classmethod
    def from_core(cls, info: _core.TableInfo, signature: Any) -> TableInfo:
        """Builds the Python view of a core table's info."""
        limiter = info.rate_limiter
        return cls(
            name=info.name,
            sampler_options=item_selectors.from_options(info.sampler),
            remover_options=item_selectors.from_options(info.remover),
            max_size=info.max_size,
            max_times_sampled=info.max_times_sampled,
            rate_limiter_info=RateLimiterInfo(
                samples_per_insert=limiter["samples_per_insert"],
                min_diff=limiter["min_diff"],
                max_diff=limiter["max_diff"],
                min_size_to_sample=int(limiter["min_size_to_sample"]),
                insert_stats=RateLimiterCallStats(int(limiter["inserts"])),
                sample_stats=RateLimiterCallStats(int(limiter["samples"])),
                delete_stats=RateLimiterCallStats(int(limiter["deletes"])),
            ),
            signature=signature,
            current_size=info.current_size,
            num_episodes=info.num_episodes,
            num_deleted_episodes=info.num_deleted_episodes,
            num_unique_samples=info.num_unique_samples,
            num_chunks=info.num_chunks,
            memory_bytes=info.memory_bytes,
            max_bytes=info.max_bytes or None,
        )


def combined(infos: list[TableInfo]) -> TableInfo:
    """One table's info summed over the servers that hold it (a client of
    several servers): sizes, counts, bytes and rate limiter call counts add
    up; the options and signature are those of the first server.

    Example:
        >>> import resound
        >>> info = resound.Table.queue('q', max_size=10).info
        >>> combined([info, info]).max_size
        20
    """
    if not infos:
        raise ValueError("combined() needs the info of at least one server")
    first = infos[0]
    limiter = first.rate_limiter_info

    def total(field: str) -> int:
        return sum(getattr(info, field) for info in infos)

    def calls(field: str) -> RateLimiterCallStats:
        return RateLimiterCallStats(
            sum(getattr(info.rate_limiter_info, field).completed for info in infos)
        )

    return dataclasses.replace(
        first,
        max_size=total("max_size"),
        rate_limiter_info=dataclasses.replace(
            limiter,
            insert_stats=calls("insert_stats"),
            sample_stats=calls("sample_stats"),
            delete_stats=calls("delete_stats"),
        ),
        current_size=total("current_size"),
        num_episodes=total("num_episodes"),
        num_deleted_episodes=total("num_deleted_episodes"),
        num_unique_samples=total("num_unique_samples"),
        num_chunks=total("num_chunks"),
        memory_bytes=total("memory_bytes"),
        max_bytes=None if any(i.max_bytes is None for i in infos) else total("max_bytes"),
    )
