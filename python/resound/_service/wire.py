"""Conversions between the core's objects and the service's messages, used by
both ends of the wire.

Payload bytes are copied into and out of messages as they are; nothing here
decodes them.
"""

from __future__ import annotations

from typing import Any

from resound import _core, _proto, item_selectors, specs
from resound.table_info import RateLimiterCallStats, RateLimiterInfo, TableInfo

__all__ = [
    "add_chunk",
    "chunk_keys",
    "fill_chunk",
    "fill_columns",
    "table_info_from_message",
    "table_info_message",
    "trajectory_of",
]

# A trajectory as the core takes it: columns of (slices, squeeze), slices of
# (chunk_key, offset, length).
Trajectory = list[tuple[list[tuple[int, int, int]], bool]]


def fill_chunk(message: Any, chunk: Any) -> None:
    """Sets a Chunk message (e.g. one from ``repeated.add()``, which builds it
    in place: constructing messages and passing them in copies them)."""
    message.key = chunk.key
    message.dtype = chunk.dtype
    message.shape.extend(chunk.shape)
    message.num_steps = chunk.num_steps
    message.compression = chunk.compression
    message.delta_encoded = chunk.delta_encoded
    message.episode_id = chunk.episode_id
    message.start_step = chunk.start_step
    message.end_step = chunk.end_step
    message.data = bytes(memoryview(chunk))


def add_chunk(store: _core.ChunkStore, message: Any) -> _core.Chunk:
    """Adds a chunk message to ``store`` (the core validates it: ValueError)."""
    return store.add(
        message.key,
        message.data,
        message.dtype,
        tuple(message.shape),
        message.num_steps,
        message.compression or "none",
        message.delta_encoded,
        message.episode_id,
        message.start_step,
        message.end_step,
    )


def fill_columns(columns: Any, trajectory: Trajectory) -> None:
    """Appends a core trajectory to a repeated Column field, in place."""
    for slices, squeeze in trajectory:
        column = columns.add()
        column.squeeze = squeeze
        add = column.slices.add
        for key, offset, length in slices:
            add(chunk_key=key, offset=offset, length=length)


def trajectory_of(columns: Any) -> Trajectory:
    """The core trajectory of column messages."""
    return [
        ([(s.chunk_key, s.offset, s.length) for s in column.slices], column.squeeze)
        for column in columns
    ]


def chunk_keys(columns: Any) -> set[int]:
    return {s.chunk_key for column in columns for s in column.slices}


def table_info_message(info: TableInfo, signature: Any) -> Any:
    limiter = info.rate_limiter_info
    return _proto.TableInfo(
        name=info.name,
        sampler=_selector_message(info.sampler_options),
        remover=_selector_message(info.remover_options),
        max_size=info.max_size,
        max_times_sampled=info.max_times_sampled,
        samples_per_insert=limiter.samples_per_insert,
        min_diff=limiter.min_diff,
        max_diff=limiter.max_diff,
        min_size_to_sample=limiter.min_size_to_sample,
        inserts=limiter.insert_stats.completed,
        samples=limiter.sample_stats.completed,
        deletes=limiter.delete_stats.completed,
        current_size=info.current_size,
        num_episodes=info.num_episodes,
        num_deleted_episodes=info.num_deleted_episodes,
        num_unique_samples=info.num_unique_samples,
        num_chunks=info.num_chunks,
        memory_bytes=info.memory_bytes,
        signature=specs.encode_signature(signature),
    )


def table_info_from_message(message: Any) -> TableInfo:
    return TableInfo(
        name=message.name,
        sampler_options=_selector_from(message.sampler),
        remover_options=_selector_from(message.remover),
        max_size=message.max_size,
        max_times_sampled=message.max_times_sampled,
        rate_limiter_info=RateLimiterInfo(
            samples_per_insert=message.samples_per_insert,
            min_diff=message.min_diff,
            max_diff=message.max_diff,
            min_size_to_sample=message.min_size_to_sample,
            insert_stats=RateLimiterCallStats(message.inserts),
            sample_stats=RateLimiterCallStats(message.samples),
            delete_stats=RateLimiterCallStats(message.deletes),
        ),
        signature=specs.decode_signature(message.signature),
        current_size=message.current_size,
        num_episodes=message.num_episodes,
        num_deleted_episodes=message.num_deleted_episodes,
        num_unique_samples=message.num_unique_samples,
        num_chunks=message.num_chunks,
        memory_bytes=message.memory_bytes,
    )


def _selector_message(selector: item_selectors.ItemSelector) -> Any:
    options = selector.options
    return _proto.SelectorInfo(kind=options.kind, priority_exponent=options.priority_exponent)


def _selector_from(message: Any) -> item_selectors.ItemSelector:
    return item_selectors.from_options(
        _core.SelectorOptions(message.kind, message.priority_exponent)
    )
