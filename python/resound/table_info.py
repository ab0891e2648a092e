"""``TableInfo``: what ``Client.server_info()`` and ``Table.info`` report.

The fields follow Reverb's ``reverb_types.TableInfo``, and so do their types:
``sampler_options`` and ``remover_options`` are ``KeyDistributionOptions``
messages, ``rate_limiter_info`` a ``RateLimiterInfo`` and
``table_worker_time`` a ``TableWorkerTime`` message (milliseconds since the
table was made: inserting and sampling under its lock, held up by its rate
limiter, and the rest as sleeping), with Reverb's fields and field numbers
(``WhichOneof('distribution')``, ``HasField('heap')``, ``SerializeToString()``
all work as with Reverb). resound adds the
limiter's ``delete_stats`` and the calls it held up (``blocked_inserts``,
``blocked_samples``) with the seconds they spent held up
(``blocked_insert_seconds``, ``blocked_sample_seconds``), the chunk count,
the bytes the table's items hold, its ``max_bytes``, and the keys priority
mutations updated and deleted (``num_priority_updates``,
``num_mutate_deletes``). An options message compares equal to the
selector it describes (``info.sampler_options == selectors.Fifo()``).

The message classes come from resound._proto, which needs protobuf: they
are imported when first needed (a TableInfo built, a message name read from
this module), so that ``import resound`` loads no protobuf.

Example:
    >>> import resound
    >>> table = resound.Table.queue('q', max_size=10)
    >>> info = table.info
    >>> info.current_size, info.rate_limiter_info.max_diff
    (0, 10.0)
    >>> info.sampler_options.WhichOneof('distribution'), info.sampler_options.is_deterministic
    ('fifo', True)
"""

from __future__ import annotations

import dataclasses
import types
from typing import Any

from resound import _core, item_selectors

__all__ = [
    "KeyDistributionOptions",  # noqa: F822 - a message class, from __getattr__
    "RateLimiterCallStats",  # noqa: F822 - a message class, from __getattr__
    "RateLimiterInfo",  # noqa: F822 - a message class, from __getattr__
    "TableInfo",
    "TableWorkerTime",  # noqa: F822 - a message class, from __getattr__
    "combined",
    "key_distribution_options",
    "selector_from_options",
]

_MESSAGE_NAMES = (
    "KeyDistributionOptions",
    "RateLimiterCallStats",
    "RateLimiterInfo",
    "TableWorkerTime",
)


def _messages() -> types.ModuleType:
    # Imported here, on first use: the messages need protobuf, which
    # `import resound` does not load.
    from resound import _proto

    return _proto


def __getattr__(name: str) -> Any:
    # The message classes as this module's names (Reverb's types), imported
    # when first read.
    if name in _MESSAGE_NAMES:
        value = globals()[name] = getattr(_messages(), name)
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def key_distribution_options(
    selector: item_selectors.ItemSelector | _core.SelectorOptions,
) -> Any:
    """The ``KeyDistributionOptions`` message describing ``selector`` (a
    selector object or the core's options of one).

    Example:
        >>> from resound import selectors
        >>> key_distribution_options(selectors.Prioritized(0.8)).prioritized.priority_exponent
        0.8
        >>> key_distribution_options(selectors.MaxHeap()).heap.min_heap
        False
    """
    options = selector.options if isinstance(selector, item_selectors.ItemSelector) else selector
    return item_selectors.options_message(options)


def selector_from_options(options: Any) -> item_selectors.ItemSelector:
    """The selector a ``KeyDistributionOptions`` message (or its serialized
    bytes) describes; ValueError if it names no distribution.

    Example:
        >>> selector_from_options(KeyDistributionOptions(lifo=True))
        LifoSelector
    """
    KeyDistributionOptions = _messages().KeyDistributionOptions  # noqa: N806 - the class
    if isinstance(options, (bytes, bytearray, memoryview)):
        try:
            options = KeyDistributionOptions.FromString(bytes(options))
        except Exception as error:  # noqa: BLE001 - protobuf's DecodeError
            raise ValueError(f"options are not a KeyDistributionOptions message: {error}") from None
    if not isinstance(options, KeyDistributionOptions):
        raise ValueError(
            f"options must be a KeyDistributionOptions message or its bytes, got {options!r}"
        )
    kind = options.WhichOneof("distribution")
    if kind == "prioritized":
        return item_selectors.Prioritized(options.prioritized.priority_exponent)
    if kind == "heap":
        return item_selectors.HeapSelector(min_heap=options.heap.min_heap)
    if kind == "fifo":
        return item_selectors.Fifo()
    if kind == "lifo":
        return item_selectors.Lifo()
    if kind == "uniform":
        return item_selectors.Uniform()
    raise ValueError(
        "KeyDistributionOptions must set one distribution (fifo, lifo, uniform, prioritized "
        f"or heap), got {options!r}"
    )


def _calls(completed: float, pending: float = 0) -> Any:
    # Counts from the core's rate limiter dict, typed dict[str, float] for
    # the float entries beside the counts. ``pending``: calls waiting now.
    return _messages().RateLimiterCallStats(completed=int(completed), pending=int(pending))


def _table_worker_time(times: dict[str, int] | None = None) -> Any:
    # The core's worker_time dict (milliseconds by field), or all zeros.
    return _messages().TableWorkerTime(**(times or {}))


@dataclasses.dataclass(frozen=True)
class TableInfo:
    name: str
    sampler_options: Any  # KeyDistributionOptions
    remover_options: Any  # KeyDistributionOptions
    max_size: int
    max_times_sampled: int
    rate_limiter_info: Any  # RateLimiterInfo
    signature: Any
    current_size: int
    num_episodes: int
    num_deleted_episodes: int
    num_unique_samples: int
    # Not compared: two reads of one table in the same state are equal
    # infos, whenever they were read (running_ms moves on by itself).
    table_worker_time: Any = dataclasses.field(default_factory=_table_worker_time, compare=False)
    num_chunks: int = 0
    memory_bytes: int = 0
    max_bytes: int | None = None  # beyond Reverb: the table's memory bound, if any
    # Beyond Reverb: keys mutate_priorities found and updated, and found and
    # deleted, since the table was created.
    num_priority_updates: int = 0
    num_mutate_deletes: int = 0

    @classmethod
    def from_core(cls, info: _core.TableInfo, signature: Any) -> TableInfo:
        """Builds the Python view of a core table's info."""
        limiter = info.rate_limiter
        return cls(
            name=info.name,
            sampler_options=key_distribution_options(info.sampler),
            remover_options=key_distribution_options(info.remover),
            max_size=info.max_size,
            max_times_sampled=info.max_times_sampled,
            rate_limiter_info=_messages().RateLimiterInfo(
                samples_per_insert=limiter["samples_per_insert"],
                min_diff=limiter["min_diff"],
                max_diff=limiter["max_diff"],
                min_size_to_sample=int(limiter["min_size_to_sample"]),
                insert_stats=_calls(limiter["inserts"], limiter["waiting_inserts"]),
                sample_stats=_calls(limiter["samples"], limiter["waiting_samples"]),
                delete_stats=_calls(limiter["deletes"]),
                blocked_inserts=int(limiter["blocked_inserts"]),
                blocked_samples=int(limiter["blocked_samples"]),
                blocked_insert_seconds=limiter["blocked_insert_seconds"],
                blocked_sample_seconds=limiter["blocked_sample_seconds"],
            ),
            signature=signature,
            current_size=info.current_size,
            num_episodes=info.num_episodes,
            num_deleted_episodes=info.num_deleted_episodes,
            num_unique_samples=info.num_unique_samples,
            table_worker_time=_table_worker_time(info.worker_time),
            num_chunks=info.num_chunks,
            memory_bytes=info.memory_bytes,
            max_bytes=info.max_bytes or None,
            num_priority_updates=info.num_priority_updates,
            num_mutate_deletes=info.num_mutate_deletes,
        )


def combined(infos: list[TableInfo]) -> TableInfo:
    """One table's info summed over the servers that hold it (a client of
    several servers): sizes, counts, bytes and rate limiter call counts add
    up (and so do the calls waiting for the rate limiters); the options and
    signature are those of the first server.

    Example:
        >>> import resound
        >>> info = resound.Table.queue('q', max_size=10).info
        >>> combined([info, info]).max_size
        20
    """
    if not infos:
        raise ValueError("combined() needs the info of at least one server")
    first = infos[0]

    def total(field: str) -> int:
        return sum(getattr(info, field) for info in infos)

    limiter = _messages().RateLimiterInfo()
    limiter.CopyFrom(first.rate_limiter_info)
    for field in ("insert_stats", "sample_stats", "delete_stats"):
        stats = getattr(limiter, field)
        stats.completed = sum(getattr(info.rate_limiter_info, field).completed for info in infos)
        stats.pending = sum(getattr(info.rate_limiter_info, field).pending for info in infos)
    for field in (
        "blocked_inserts",
        "blocked_samples",
        "blocked_insert_seconds",
        "blocked_sample_seconds",
    ):
        setattr(limiter, field, sum(getattr(info.rate_limiter_info, field) for info in infos))
    # Each server's table worked on its own: the times add up as well.
    worker_time = _table_worker_time()
    for field in worker_time.DESCRIPTOR.fields_by_name:
        setattr(worker_time, field, sum(getattr(i.table_worker_time, field) for i in infos))
    return dataclasses.replace(
        first,
        max_size=total("max_size"),
        rate_limiter_info=limiter,
        table_worker_time=worker_time,
        current_size=total("current_size"),
        num_episodes=total("num_episodes"),
        num_deleted_episodes=total("num_deleted_episodes"),
        num_unique_samples=total("num_unique_samples"),
        num_chunks=total("num_chunks"),
        memory_bytes=total("memory_bytes"),
        num_priority_updates=total("num_priority_updates"),
        num_mutate_deletes=total("num_mutate_deletes"),
        max_bytes=None if any(i.max_bytes is None for i in infos) else total("max_bytes"),
    )
