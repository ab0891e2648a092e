"""``resound.Table``: a replay table (Reverb's ``reverb.Table``).

A table holds items (a priority and a trajectory over shared chunks), picks
items to sample with its ``sampler``, evicts with its ``remover`` once it
holds ``max_size`` items, and gates writers and readers with its rate
limiter. Items sampled ``max_times_sampled`` times are deleted (< 1: never).
Beyond Reverb, ``max_bytes`` (keyword-only) bounds the table by memory too:
while the chunks its items hold take more bytes than that, the remover evicts
items, and an item larger on its own is refused with ValueError.

Example:
    >>> import resound
    >>> table = resound.Table(
    ...     name='replay',
    ...     sampler=resound.selectors.Prioritized(priority_exponent=0.8),
    ...     remover=resound.selectors.Fifo(),
    ...     max_size=1_000_000,
    ...     rate_limiter=resound.rate_limiters.MinSize(1000))
    >>> table.name, table.can_sample(1)
    ('replay', False)
"""

from __future__ import annotations

import numbers
import weakref
from collections.abc import Callable, Sequence
from typing import Any

from resound import _core, item_selectors, rate_limiters, specs
from resound._checks import check_count
from resound.priority_histogram import PriorityHistogram, check_bins
from resound.table_info import TableInfo

__all__ = ["Table", "shared_chunk_store"]

# One chunk store per process: every table keeps the chunks its items use
# here, so a chunk written once serves items in any number of tables.
_CHUNK_STORE = _core.ChunkStore()


def shared_chunk_store() -> _core.ChunkStore:
    """The process-wide chunk store that embedded tables share."""
    return _CHUNK_STORE


def _claim(components: Sequence[tuple[str, Any]], table: Table) -> None:
    """Binds selector and limiter objects to one table (Reverb forbids sharing).

    All are checked before any is bound, so a failed construction binds none.
    """
    for argument, component in components:
        owner_ref = getattr(component, "_resound_owner", None)
        owner = owner_ref() if owner_ref is not None else None
        if owner is not None and owner is not table:
            raise ValueError(
                f"{argument} {component!r} is already used by table {owner.name!r}; create a "
                "new selector or rate limiter object for each table"
            )
    for _, component in components:
        component._resound_owner = weakref.ref(table)


class Table:
    """A replay table: items, how they are sampled and evicted, and a rate
    limiter between its writers and readers.

    Args:
      name: the table's name, unique on its server; writers and samplers
        name it.
      sampler: picks the items to sample (``resound.selectors``: Uniform,
        Prioritized, Fifo, Lifo, MinHeap, MaxHeap).
      remover: picks the item to evict once ``max_size`` items are held
        (the same selectors; usually Fifo).
      max_size: the most items the table holds (>= 1).
      rate_limiter: gates inserts and samples (``resound.rate_limiters``:
        MinSize, SampleToInsertRatio, Queue, Stack).
      max_times_sampled: an item sampled this many times is deleted
        (< 1: never).
      extensions: Reverb's table extensions; only an empty sequence is
        accepted.
      signature: the structure, dtypes and shapes items must have (a nest of
        ``resound.TensorSpec``), or None for any.
      max_bytes: (keyword-only, beyond Reverb) the most bytes the chunks of
        the table's items may take; past it the remover evicts, and an item
        larger on its own is refused with ValueError. None: no bound.

    Example:
        >>> from resound import rate_limiters, selectors
        >>> table = Table('replay', selectors.Uniform(), selectors.Fifo(),
        ...               max_size=1000, rate_limiter=rate_limiters.MinSize(1))
        >>> table.info.max_size
        1000
    """

    def __init__(
        self,
        name: str,
        sampler: item_selectors.ItemSelector,
        remover: item_selectors.ItemSelector,
        max_size: int,
        rate_limiter: rate_limiters.RateLimiter,
        max_times_sampled: int = 0,
        extensions: Sequence[Any] = (),
        signature: Any = None,
        *,
        max_bytes: int | None = None,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"name must be a nonempty str, got {name!r}")
        if (
            isinstance(max_size, bool)
            or not isinstance(max_size, numbers.Integral)
            or max_size <= 0
        ):
            raise ValueError(f"max_size ({max_size!r}) must be a positive integer")
        if max_bytes is not None and (
            isinstance(max_bytes, bool)
            or not isinstance(max_bytes, numbers.Integral)
            or max_bytes <= 0
        ):
            raise ValueError(f"max_bytes ({max_bytes!r}) must be a positive integer or None")
        if isinstance(max_times_sampled, bool) or not isinstance(
            max_times_sampled, numbers.Integral
        ):
            raise ValueError(f"max_times_sampled must be an integer, got {max_times_sampled!r}")
        for argument, selector in (("sampler", sampler), ("remover", remover)):
            if not isinstance(selector, item_selectors.ItemSelector):
                raise ValueError(
                    f"{argument} must be a selector from resound.selectors (Uniform, Prioritized, "
                    f"Fifo, Lifo, MinHeap, MaxHeap), got {selector!r}"
                )
        if not isinstance(rate_limiter, rate_limiters.RateLimiter):
            raise ValueError(
                "rate_limiter must be a limiter from resound.rate_limiters (MinSize, "
                f"SampleToInsertRatio, Queue, Stack, RateLimiter), got {rate_limiter!r}"
            )
        if extensions:
            raise ValueError(
                "extensions are not supported: resound tables have no extension hooks "
                f"(got {list(extensions)!r})"
            )
        if signature is not None:
            specs.validate_signature(signature)
        encoded_signature = specs.encode_signature(signature)

        self._name: str = name
        self._sampler: item_selectors.ItemSelector = sampler
        self._remover: item_selectors.ItemSelector = remover
        self._rate_limiter: rate_limiters.RateLimiter = rate_limiter
        self._signature: Any = signature
        self._flat_signature: list[specs.TensorSpec] | None = (
            None if signature is None else specs.flat_signature(signature)
        )
        self._prioritized: bool = "prioritized" in (sampler.options.kind, remover.options.kind)
        self._core: _core.Table = _core.Table(
            name,
            _make_core_selector(sampler),
            _make_core_selector(remover),
            int(max_size),
            rate_limiter.internal_limiter,
            int(max_times_sampled),
            encoded_signature,
            _CHUNK_STORE,
            None
            if self._flat_signature is None
            else [
                (spec.dtype.str, spec.shape, label)
                for spec, label in zip(
                    self._flat_signature, specs.field_labels(signature), strict=True
                )
            ],
            0 if max_bytes is None else int(max_bytes),
        )
        # Last, so that a construction that fails leaves the objects unbound.
        _claim((("sampler", sampler), ("remover", remover), ("rate_limiter", rate_limiter)), self)

    @classmethod
    def queue(
        cls, name: str, max_size: int, extensions: Sequence[Any] = (), signature: Any = None
    ) -> Table:
        """A FIFO queue: each item is sampled once, in insertion order; inserts
        block while ``max_size`` items wait and samples block while it is empty.

        Example:
            >>> Table.queue('q', 100).info.max_times_sampled
            1
        """
        return cls._take_once(
            name, max_size, item_selectors.Fifo, rate_limiters.Queue, extensions, signature
        )

    @classmethod
    def stack(
        cls, name: str, max_size: int, extensions: Sequence[Any] = (), signature: Any = None
    ) -> Table:
        """A LIFO stack: like :meth:`queue` but the newest item comes out first."""
        return cls._take_once(
            name, max_size, item_selectors.Lifo, rate_limiters.Stack, extensions, signature
        )

    @classmethod
    def _take_once(
        cls,
        name: str,
        max_size: int,
        selector: Callable[[], item_selectors.ItemSelector],
        limiter: Callable[[int], rate_limiters.RateLimiter],
        extensions: Sequence[Any],
        signature: Any,
    ) -> Table:
        """A table whose items are each sampled once, in the selector's order."""
        return cls(
            name=name,
            sampler=selector(),
            remover=selector(),
            max_size=max_size,
            max_times_sampled=1,
            rate_limiter=limiter(max_size),
            extensions=extensions,
            signature=signature,
        )

    @property
    def name(self) -> str:
        return self._name

    @property
    def signature(self) -> Any:
        """The signature given at construction (or restored from a
        checkpoint, whose configuration wins), or None."""
        return self._signature

    @property
    def info(self) -> TableInfo:
        """Live state and counters of the table."""
        return TableInfo.from_core(self._core.info(), self._signature)

    def priority_histogram(self, bins: int = 20) -> PriorityHistogram:
        """How the items' priorities spread, in ``bins`` (1 to 1000) equal
        bins between the lowest and the highest (see
        resound.priority_histogram).

        Example:
            >>> table = Table.queue('q', 10)
            >>> table.priority_histogram(5)
            PriorityHistogram(counts=(), min_priority=0.0, max_priority=0.0)
        """
        return PriorityHistogram.from_core(self._core.priority_histogram(check_bins(bins)))

    def can_sample(self, num_samples: int) -> bool:
        """Whether the rate limiter would allow ``num_samples`` samples now
        (ignores max_size and max_times_sampled, as Reverb does)."""
        return self._core.can_sample(check_count(num_samples, "num_samples"))

    def can_insert(self, num_inserts: int) -> bool:
        """Whether the rate limiter would allow ``num_inserts`` inserts now."""
        return self._core.can_insert(check_count(num_inserts, "num_inserts"))

    def why_blocked(self, insert: bool = False) -> str:
        """Why one more insert (``insert=True``) or sample must wait now, in
        the words a timeout uses (docs/semantics.md §4.7); meaningful while
        ``can_insert(1)`` (or ``can_sample(1)``) is False.

        Example:
            >>> import resound
            >>> resound.Table.queue('q', 10).why_blocked()
            "table 'q' has 0 items; Queue(10) needs 1 before sampling"
        """
        if not isinstance(insert, bool):
            raise TypeError(f"insert must be True or False, got {insert!r}")
        return self._core.why_blocked(insert)

    def replace(
        self,
        name: str | None = None,
        sampler: item_selectors.ItemSelector | None = None,
        remover: item_selectors.ItemSelector | None = None,
        max_size: int | None = None,
        rate_limiter: rate_limiters.RateLimiter | None = None,
        max_times_sampled: int | None = None,
        extensions: Sequence[Any] | None = None,
        signature: Any = None,
        *,
        max_bytes: int | None = None,
    ) -> Table:
        """A new, empty table with the given options and this table's for the rest."""
        info = self._core.info()
        limiter = self._rate_limiter
        return Table(
            name=self._name if name is None else name,
            sampler=item_selectors.from_options(info.sampler) if sampler is None else sampler,
            remover=item_selectors.from_options(info.remover) if remover is None else remover,
            max_size=info.max_size if max_size is None else max_size,
            rate_limiter=rate_limiters.RateLimiter(
                limiter.samples_per_insert,
                limiter.min_size_to_sample,
                limiter.min_diff,
                limiter.max_diff,
            )
            if rate_limiter is None
            else rate_limiter,
            max_times_sampled=info.max_times_sampled
            if max_times_sampled is None
            else max_times_sampled,
            extensions=() if extensions is None else extensions,
            signature=self._signature if signature is None else signature,
            max_bytes=(info.max_bytes or None) if max_bytes is None else max_bytes,
        )

    def _adopt_configuration(self, other: Table) -> None:
        """Becomes ``other`` (a new table of the same name, configured as a
        checkpoint saved it, and restored): its selectors, limiter, signature
        and core table. ``other`` must not be used afterwards."""
        self._sampler, self._remover = other._sampler, other._remover
        self._rate_limiter = other._rate_limiter
        self._signature, self._flat_signature = other._signature, other._flat_signature
        self._prioritized = other._prioritized
        self._core = other._core
        for component in (self._sampler, self._remover, self._rate_limiter):
            component._resound_owner = weakref.ref(self)

    def __repr__(self) -> str:
        info = self._core.info()
        max_bytes = f"max_bytes={info.max_bytes}, " if info.max_bytes else ""
        return (
            f"Table(sampler={self._sampler!r}, remover={self._remover!r}, "
            f"max_size={info.max_size}, max_times_sampled={info.max_times_sampled}, {max_bytes}"
            f"name={self._name!r}, rate_limiter={self._rate_limiter!r}, "
            f"signature={self._signature!r})"
        )


def _make_core_selector(selector: item_selectors.ItemSelector) -> _core.ItemSelector:
    options = selector.options
    return _core.make_selector(options.kind, options.priority_exponent, options.seed)
