"""Conversions between the core's objects and the service's messages, used by
both ends of the wire.

Chunks and items travel as parallel arrays (see protos/): the core packs and
unpacks a whole message per call. Sample responses are written and read by
the core alone (``SampleBatch.encode_response``, ``decode_sample_response``);
insert requests are written by the core and read here, their chunk payloads in
place.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from resound import _core, _proto, specs, table_info
from resound.table_info import TableInfo

__all__ = [
    "add_chunks",
    "decode",
    "packed_trajectories",
    "table_info_from_message",
    "table_info_message",
    "to_array",
]


def to_array(field: Any, dtype: Any) -> np.ndarray:
    """A repeated field of a parsed message as a numpy array. Through a list:
    numpy reads a list about twice as fast as protobuf's container."""
    return np.array(list(field), dtype)


def decode(message_class: Any, raw: bytes) -> tuple[Any, memoryview]:
    """(message, chunk payloads) of a serialized message with a
    ``chunk_data`` field; the payloads are a view into ``raw`` (not copied,
    and not parsed into the message). ValueError if ``raw`` is malformed."""
    view = memoryview(raw)
    number = message_class.DESCRIPTOR.fields_by_name["chunk_data"].number
    found = _core.find_bytes_field(view, number)
    if found is None:
        return _parse(message_class, view), view[0:0]
    start, end, value = found
    rest = view[:start] if end == len(view) else bytes(view[:start]) + bytes(view[end:])
    return _parse(message_class, rest), view[value:end]


def _parse(message_class: Any, data: Any) -> Any:
    try:
        return message_class.FromString(data)
    except Exception as error:  # noqa: BLE001 - protobuf's DecodeError and kin
        raise ValueError(f"malformed {message_class.DESCRIPTOR.name}: {error}") from None


def add_chunks(
    holder: _core.ChunkHolder, store: _core.ChunkStore, batch: Any, payloads: Any
) -> None:
    """Adds the chunks a ChunkBatch message describes, their payloads back to
    back in ``payloads``, to ``store`` and ``holder`` (the core validates
    them: ValueError names the first bad one)."""
    if not batch.keys and not len(payloads):
        return
    layouts = [
        (layout.dtype, list(layout.shape), layout.compression or "none", layout.delta_encoded)
        for layout in batch.layouts
    ]
    holder.add(
        store,
        layouts,
        to_array(batch.keys, np.uint64),
        to_array(batch.layout_indices, np.uint32),
        to_array(batch.num_steps, np.int64),
        to_array(batch.episode_ids, np.uint64),
        to_array(batch.start_steps, np.int64),
        to_array(batch.end_steps, np.int64),
        to_array(batch.data_sizes, np.int64),
        payloads,
    )


def packed_trajectories(message: Any) -> _core.PackedTrajectories:
    """The core's view of a Trajectories message (ValueError if its arrays
    do not add up)."""
    return _core.PackedTrajectories(
        to_array(message.num_columns, np.uint32),
        to_array(message.num_slices, np.uint32),
        to_array(message.squeeze, np.bool_),
        to_array(message.chunk_keys, np.uint64),
        to_array(message.offsets, np.int64),
        to_array(message.lengths, np.int64),
    )


def table_info_message(info: TableInfo, signature: Any) -> Any:
    return _proto.TableInfo(
        name=info.name,
        sampler_options=info.sampler_options,
        remover_options=info.remover_options,
        max_size=info.max_size,
        max_times_sampled=info.max_times_sampled,
        rate_limiter_info=info.rate_limiter_info,
        current_size=info.current_size,
        num_episodes=info.num_episodes,
        num_deleted_episodes=info.num_deleted_episodes,
        num_unique_samples=info.num_unique_samples,
        table_worker_time=info.table_worker_time,
        num_chunks=info.num_chunks,
        memory_bytes=info.memory_bytes,
        signature=specs.encode_signature(signature),
        max_bytes=info.max_bytes or 0,
        num_priority_updates=info.num_priority_updates,
        num_mutate_deletes=info.num_mutate_deletes,
    )


def table_info_now(template: Any, info: _core.TableInfo) -> Any:
    """A copy of the TableInfo message ``template`` (table_info_message of
    the same table) with the counters of the core's ``info``."""
    message = _proto.TableInfo()
    message.CopyFrom(template)
    message.current_size = info.current_size
    message.num_episodes = info.num_episodes
    message.num_deleted_episodes = info.num_deleted_episodes
    message.num_unique_samples = info.num_unique_samples
    message.num_chunks = info.num_chunks
    message.memory_bytes = info.memory_bytes
    counts = info.rate_limiter
    limiter = message.rate_limiter_info
    limiter.insert_stats.completed = int(counts["inserts"])
    limiter.insert_stats.pending = int(counts["waiting_inserts"])
    limiter.sample_stats.completed = int(counts["samples"])
    limiter.sample_stats.pending = int(counts["waiting_samples"])
    limiter.delete_stats.completed = int(counts["deletes"])
    limiter.blocked_inserts = int(counts["blocked_inserts"])
    limiter.blocked_samples = int(counts["blocked_samples"])
    limiter.blocked_insert_seconds = counts["blocked_insert_seconds"]
    limiter.blocked_sample_seconds = counts["blocked_sample_seconds"]
    message.num_priority_updates = info.num_priority_updates
    message.num_mutate_deletes = info.num_mutate_deletes
    for field, milliseconds in info.worker_time.items():
        setattr(message.table_worker_time, field, milliseconds)
    return message


def table_info_from_message(message: Any) -> TableInfo:
    # The options must name a selector (as every server's do); checked here
    # so that a malformed answer fails at once, not at first use.
    for options in (message.sampler_options, message.remover_options):
        if options.WhichOneof("distribution") is None:
            table_info.selector_from_options(options)  # raises, saying what is missing
    return TableInfo(
        name=message.name,
        sampler_options=message.sampler_options,
        remover_options=message.remover_options,
        max_size=message.max_size,
        max_times_sampled=message.max_times_sampled,
        rate_limiter_info=message.rate_limiter_info,
        signature=specs.decode_signature(message.signature),
        current_size=message.current_size,
        num_episodes=message.num_episodes,
        num_deleted_episodes=message.num_deleted_episodes,
        num_unique_samples=message.num_unique_samples,
        table_worker_time=message.table_worker_time,
        num_chunks=message.num_chunks,
        memory_bytes=message.memory_bytes,
        max_bytes=message.max_bytes or None,
        num_priority_updates=message.num_priority_updates,
        num_mutate_deletes=message.num_mutate_deletes,
    )
