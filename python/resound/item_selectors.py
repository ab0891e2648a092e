"""Item selectors (Reverb's ``reverb.selectors``): how a table chooses items
to sample (``sampler``) and to evict (``remover``).

Each selector object only describes a selector; the table builds its own
selector state from it. As in Reverb, one selector object belongs to one
table: giving it to a second table raises ValueError.

Example:
    >>> from resound import selectors
    >>> selectors.Prioritized(priority_exponent=0.8)
    PrioritizedSelector(priority_exponent=0.8)
    >>> isinstance(selectors.MinHeap(), type(selectors.MaxHeap()))
    True
"""

from __future__ import annotations

import math
import numbers
import sys
import weakref
from typing import Any, Protocol

from resound import _core

__all__ = [
    "Fifo",
    "HeapSelector",
    "ItemSelector",
    "Lifo",
    "MaxHeap",
    "MinHeap",
    "Prioritized",
    "Uniform",
    "from_options",
]


class ItemSelector:
    """Base class of the selectors; holds the core's options for the kind."""

    _kind: str = ""
    # Set by the table the selector is given to (one table per selector). Not
    # typed as a Table: this module is below resound.table (no import circle).
    _resound_owner: weakref.ref[object]

    def __init__(self, *, priority_exponent: float = 0.0, seed: int | None = None) -> None:
        # Building a core selector validates the options once, here.
        self._options = _core.SelectorOptions(self._kind, priority_exponent, seed)

    @property
    def options(self) -> _core.SelectorOptions:
        """The core options a table builds its selector from."""
        return self._options

    @property
    def is_deterministic(self) -> bool:
        """True for Fifo, Lifo and the heaps (same state, same choice)."""
        return self._options.is_deterministic

    def __eq__(self, other: Any) -> bool:
        if type(other) is type(self):
            return other._options == self._options
        # TableInfo reports selectors as Reverb's options messages: equal to
        # the selector they describe. (No message exists before protobuf,
        # and with it resound._proto, is loaded: nothing to import for that.)
        messages = sys.modules.get("resound._proto")
        if messages is not None and isinstance(other, messages.KeyDistributionOptions):
            return options_message(self._options) == other
        return False

    def __hash__(self) -> int:
        return hash((type(self), self._kind, self._options.priority_exponent))

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class Uniform(ItemSelector):
    """Every item equally likely (probability 1/n), O(1)."""

    _kind = "uniform"

    def __init__(self, *, seed: int | None = None) -> None:
        super().__init__(seed=seed)

    def __repr__(self) -> str:
        return "UniformSelector"


class Prioritized(ItemSelector):
    """Item i with probability p_i**priority_exponent / sum(p**priority_exponent).

    Zero priorities are never chosen; if every priority is zero the choice is
    uniform. O(log n) for every operation.
    """

    _kind = "prioritized"

    def __init__(self, priority_exponent: float, *, seed: int | None = None) -> None:
        if isinstance(priority_exponent, bool) or not isinstance(priority_exponent, numbers.Real):
            raise ValueError(f"priority_exponent must be a number >= 0, got {priority_exponent!r}")
        if not math.isfinite(priority_exponent) or priority_exponent < 0:
            raise ValueError(
                f"priority_exponent must be a finite number >= 0, got {priority_exponent!r}"
            )
        super().__init__(priority_exponent=float(priority_exponent), seed=seed)

    @property
    def priority_exponent(self) -> float:
        return self._options.priority_exponent

    def __repr__(self) -> str:
        return f"PrioritizedSelector(priority_exponent={self.priority_exponent:g})"


class Fifo(ItemSelector):
    """The oldest inserted item first; updates keep an item's place."""

    _kind = "fifo"

    def __init__(self) -> None:
        super().__init__()

    def __repr__(self) -> str:
        return "FifoSelector"


class Lifo(ItemSelector):
    """The newest inserted item first."""

    _kind = "lifo"

    def __init__(self) -> None:
        super().__init__()

    def __repr__(self) -> str:
        return "LifoSelector"


class HeapSelector(ItemSelector):
    """The lowest (``min_heap=True``) or highest priority first; ties go to the
    item least recently inserted or updated."""

    def __init__(self, min_heap: bool) -> None:
        self._kind = "min_heap" if min_heap else "max_heap"
        super().__init__()

    @property
    def min_heap(self) -> bool:
        return self._kind == "min_heap"

    def __repr__(self) -> str:
        return f"HeapSelector(sign={1 if self.min_heap else -1})"


def MinHeap() -> HeapSelector:  # noqa: N802 - Reverb's name for a constructor
    """A HeapSelector returning the lowest priority first."""
    return HeapSelector(min_heap=True)


def MaxHeap() -> HeapSelector:  # noqa: N802 - Reverb's name for a constructor
    """A HeapSelector returning the highest priority first."""
    return HeapSelector(min_heap=False)


class _Options(Protocol):
    """What :func:`from_options` reads: core options, or a checkpoint's
    record of them."""

    @property
    def kind(self) -> str: ...
    @property
    def priority_exponent(self) -> float: ...
    @property
    def seed(self) -> int | None: ...


def from_options(options: _Options) -> ItemSelector:
    """The selector object described by core options (used by TableInfo).

    Example:
        >>> from_options(Prioritized(0.5).options)
        PrioritizedSelector(priority_exponent=0.5)
    """
    kind = options.kind
    if kind == "uniform":
        return Uniform(seed=options.seed)
    if kind == "prioritized":
        return Prioritized(options.priority_exponent, seed=options.seed)
    if kind == "fifo":
        return Fifo()
    if kind == "lifo":
        return Lifo()
    if kind in ("min_heap", "max_heap"):
        return HeapSelector(min_heap=kind == "min_heap")
    raise ValueError(f"unknown selector kind {kind!r}")


def options_message(options: _core.SelectorOptions) -> Any:
    """The ``KeyDistributionOptions`` message (Reverb's) describing a
    selector's core options (see resound.table_info.key_distribution_options)."""
    # Imported here, on first use: the message needs protobuf, which
    # `import resound` does not load.
    from resound import _proto

    kind = options.kind
    message = _proto.KeyDistributionOptions(is_deterministic=options.is_deterministic)
    if kind == "prioritized":
        message.prioritized.priority_exponent = options.priority_exponent
    elif kind in ("min_heap", "max_heap"):
        message.heap.min_heap = kind == "min_heap"
        message.heap.SetInParent()  # set even when min_heap is False (the default)
    elif kind in ("fifo", "lifo", "uniform"):
        setattr(message, kind, True)
    else:
        raise ValueError(f"unknown selector kind {kind!r}")
    return message
