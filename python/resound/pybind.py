"""The names of Reverb's ``reverb.pybind`` module that user code touches.

Reverb's Python selectors and rate limiters are thin wrappers around the
classes of its compiled ``pybind`` module, and code written for Reverb
sometimes names them directly (``reverb.pybind.PrioritizedSelector(0.8)``,
``isinstance(x, reverb.pybind.ItemSelector)``). Here they are resound's own
classes under Reverb's names: ``resound.pybind.FifoSelector is
resound.selectors.Fifo``, and ``WeakCellRef`` is the TrajectoryWriter's
``CellRef`` (``numpy()``, ``shape``, ``dtype``, ``expired``). Reverb's
internal writer, sampler, client and server classes have no counterpart: use
the public ones. ``selector_from_proto`` builds a selector from a
serialized ``KeyDistributionOptions`` (as ``TableInfo.sampler_options``
holds).

Example:
    >>> from resound import pybind, selectors
    >>> pybind.HeapSelector(min_heap=True) == selectors.MinHeap()
    True
    >>> pybind.PrioritizedSelector is selectors.Prioritized
    True
"""

from __future__ import annotations

from resound import item_selectors, rate_limiters, table_info
from resound.trajectory_writer import CellRef

__all__ = [
    "FifoSelector",
    "HeapSelector",
    "ItemSelector",
    "LifoSelector",
    "PrioritizedSelector",
    "RateLimiter",
    "UniformSelector",
    "WeakCellRef",
    "selector_from_proto",
]

ItemSelector = item_selectors.ItemSelector
FifoSelector = item_selectors.Fifo
LifoSelector = item_selectors.Lifo
UniformSelector = item_selectors.Uniform
PrioritizedSelector = item_selectors.Prioritized
HeapSelector = item_selectors.HeapSelector
RateLimiter = rate_limiters.RateLimiter
WeakCellRef = CellRef


def selector_from_proto(options: bytes) -> item_selectors.ItemSelector:
    """The selector described by serialized ``KeyDistributionOptions``
    (ValueError if the bytes are not such a message or set no distribution).

    Example:
        >>> from resound import table_info
        >>> selector_from_proto(table_info.KeyDistributionOptions(fifo=True).SerializeToString())
        FifoSelector
    """
    return table_info.selector_from_options(options)
