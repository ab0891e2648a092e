"""Argument checks shared by the public API: each raises ValueError naming
the argument and what is allowed."""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

__all__ = ["as_priority", "as_updates", "check_count", "check_priority", "check_timeout"]


def check_count(value: Any, name: str) -> int:
    """An integer >= 1 (bools are refused)."""
    if type(value) is int and value >= 1:
        return value  # the common case, without the isinstance checks (per sample call)
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    return int(value)


def check_timeout(timeout: Any, name: str = "timeout", unit: str = "seconds") -> float | None:
    """None (wait forever) or a number >= 0, returned as a float."""
    if timeout is None:
        return None
    # "< 0 or NaN" rather than "not >= 0": typeshed's numbers.Real declares
    # only __lt__ and __le__.
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, numbers.Real)
        or timeout < 0
        or math.isnan(timeout)
    ):
        raise ValueError(f"{name} must be None (wait forever) or {unit} >= 0, got {timeout!r}")
    return float(timeout)


def as_priority(value: Any, name: str = "priority") -> float:
    """A priority as a float: any real number or 0-d numeric array or tensor
    (numpy, torch, JAX), but not a bool or a string. Range checks are the
    caller's (they depend on the table)."""
    if type(value) is float:
        return value
    if (
        isinstance(value, (bool, str, bytes))
        or getattr(getattr(value, "dtype", None), "kind", None) == "b"  # numpy bools
        or not (isinstance(value, numbers.Real) or hasattr(value, "__float__"))
    ):
        raise ValueError(f"{name} must be a number, got {value!r}")
    try:
        return float(value)
    except (TypeError, ValueError):  # e.g. an array of more than one element
        raise ValueError(f"{name} must be a number, got {value!r}") from None


def as_updates(updates: Any) -> Any:
    """A (keys, priorities) pair of arrays as two numpy arrays; a one-shot
    iterator of pairs as a list (see ``once_read``); a mapping other than a
    dict as a dict; other forms (dict, pairs) unchanged. Keys must come as
    an array (numpy, torch, JAX): a tuple of two Python (key, priority)
    pairs stays a list of pairs."""
    updates = once_read(updates)
    if type(updates) is dict:
        return updates
    if (
        isinstance(updates, tuple)
        and len(updates) == 2
        and hasattr(updates[0], "__array__")
        and np.ndim(updates[0]) == 1
    ):
        keys = np.asarray(updates[0])
        if keys.dtype.kind not in "iu":
            raise ValueError(f"updates keys must be integers, got an array of {keys.dtype}")
        try:
            priorities = np.asarray(updates[1], dtype=np.float64)
        except (TypeError, ValueError) as error:
            raise ValueError(f"updates priorities must be numbers: {error}") from None
        if priorities.ndim != 1 or len(priorities) != len(keys):
            raise ValueError(
                f"updates (keys, priorities) must have equal lengths, got {len(keys)} keys and "
                f"priorities of shape {priorities.shape}"
            )
        if keys.dtype.kind == "i" and len(keys) and keys.min() < 0:
            raise ValueError("updates keys must be >= 0")
        return (keys.astype(np.uint64, copy=False), priorities)
    if isinstance(updates, Mapping):
        return dict(updates)  # (the core reads dicts; other mappings as one)
    return updates


def once_read(values: Any) -> Any:
    """``values`` as a list if it is a one-shot iterator (a generator, a
    ``map``): a transport may read a call's arguments twice (the same-host
    transport hands a call to gRPC when its socket fails part-way, a client
    of several servers sends deletes to each), and a second read of an
    iterator finds it empty. Arrays, lists and other collections as given.

    Example:
        >>> once_read(k for k in (1, 2)), once_read((1, 2))
        ([1, 2], (1, 2))
    """
    if values is None or type(values) in _READ_AGAIN:
        return values  # the common forms, without isinstance's ABC check (200 -> 50 ns)
    return list(values) if isinstance(values, Iterator) else values


# Types that read the same every time: once_read passes them on as they are.
_READ_AGAIN = frozenset({dict, list, tuple, np.ndarray})


def check_priority(priority: Any, prioritized: bool, table: str) -> float:
    """A priority for an item of ``table``: finite, and >= 0 if the table
    is ``prioritized``."""
    value = as_priority(priority, f"priority for table {table!r}")
    if not math.isfinite(value):
        raise ValueError(f"priority for table {table!r} must be finite, got {value}")
    if prioritized and value < 0:
        raise ValueError(
            f"priority for table {table!r} must be >= 0 (Prioritized selector), got {value}"
        )
    return value
