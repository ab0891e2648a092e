"""``PriorityHistogram``: how the priorities of a table's items spread, as
``Client.priority_histogram`` and ``Table.priority_histogram`` report it.

The server counts its items in ``bins`` equal bins between the lowest and
the highest priority, under the table's lock, and sends only the counts: a
table of millions of items costs a few numbers on the wire. All-equal
priorities make one bin; an empty table has none.

Example:
    >>> import resound
    >>> table = resound.Table('t', resound.selectors.Uniform(), resound.selectors.Fifo(),
    ...                       max_size=10, rate_limiter=resound.rate_limiters.MinSize(1))
    >>> client = resound.Server([table]).in_process_client()
    >>> for priority in (1.0, 2.0, 2.5, 5.0):
    ...     client.insert([0], priorities={'t': priority})
    >>> histogram = client.priority_histogram('t', bins=2)
    >>> histogram.counts, histogram.edges
    ((3, 1), (1.0, 3.0, 5.0))
"""

from __future__ import annotations

import dataclasses
import numbers
from collections.abc import Iterable
from typing import Any

from resound import _core

__all__ = ["MAX_BINS", "PriorityHistogram", "check_bins", "merged"]

# The most bins a server computes (the core's bound).
MAX_BINS: int = _core.MAX_HISTOGRAM_BINS


def check_bins(bins: Any) -> int:
    """``bins`` as an int; ValueError unless it is an integer in [1, MAX_BINS].

    Example:
        >>> check_bins(0)
        Traceback (most recent call last):
        ...
        ValueError: bins must be an integer in [1, 1000], got 0
    """
    if (
        isinstance(bins, bool)
        or not isinstance(bins, numbers.Integral)
        or not 1 <= int(bins) <= MAX_BINS
    ):
        raise ValueError(f"bins must be an integer in [1, {MAX_BINS}], got {bins!r}")
    return int(bins)


@dataclasses.dataclass(frozen=True)
class PriorityHistogram:
    """``counts[i]`` items have a priority in bin ``i`` of ``len(counts)``
    equal bins spanning [``min_priority``, ``max_priority``] (the last bin
    includes the maximum). No bins: the table is empty (both bounds 0)."""

    counts: tuple[int, ...]
    min_priority: float = 0.0
    max_priority: float = 0.0

    @property
    def num_items(self) -> int:
        """The items counted (the table's size when it was read)."""
        return sum(self.counts)

    @property
    def edges(self) -> tuple[float, ...]:
        """The bins' bounds: ``len(counts) + 1`` numbers, ``()`` when empty."""
        if not self.counts:
            return ()
        # Half widths: max - min may overflow a double (priorities of both
        # signs near its limits), its half cannot.
        half_width = (self.max_priority / 2 - self.min_priority / 2) / len(self.counts)
        inner = tuple(self.min_priority + 2 * (i * half_width) for i in range(1, len(self.counts)))
        return (self.min_priority, *inner, self.max_priority)

    @classmethod
    def from_core(cls, histogram: _core.PriorityHistogram) -> PriorityHistogram:
        """The core table's histogram (``_core.Table.priority_histogram``)."""
        return cls(tuple(histogram.counts), histogram.min, histogram.max)

    @classmethod
    def from_message(cls, message: Any) -> PriorityHistogram:
        """A ``PriorityHistogram`` message of the wire (resound.v1)."""
        return cls(tuple(message.counts), message.min, message.max)


def merged(histograms: Iterable[PriorityHistogram], bins: int) -> PriorityHistogram:
    """One histogram of ``bins`` bins over the items of several (a table
    spread over several servers). The range and the total are exact; each
    source bin's items go to the target bin holding the source bin's centre,
    so an item may land one source bin's width from its exact bin.

    Example:
        >>> a = PriorityHistogram((1, 1), 0.0, 2.0)
        >>> b = PriorityHistogram((4,), 3.0, 3.0)
        >>> merged([a, b], bins=3)
        PriorityHistogram(counts=(1, 1, 4), min_priority=0.0, max_priority=3.0)
    """
    present = [h for h in histograms if h.counts]
    if not present:
        return PriorityHistogram(())
    low = min(h.min_priority for h in present)
    high = max(h.max_priority for h in present)
    if low == high:
        return PriorityHistogram((sum(h.num_items for h in present),), low, high)
    counts = [0] * bins
    for histogram in present:
        edges = histogram.edges
        for i, count in enumerate(histogram.counts):
            # Halved, as the core does: sums and differences may overflow.
            centre = edges[i] / 2 + edges[i + 1] / 2
            position = int((centre / 2 - low / 2) / (high / 2 - low / 2) * bins)
            counts[min(max(position, 0), bins - 1)] += count
    return PriorityHistogram(tuple(counts), low, high)
