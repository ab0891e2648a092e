"""Argument checks shared by the public API: each raises ValueError naming
the argument and what is allowed."""

from __future__ import annotations

import numbers
from typing import Any

__all__ = ["as_priority", "check_count", "check_timeout"]


def check_count(value: Any, name: str) -> int:
    """An integer >= 1 (bools are refused)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    return int(value)


def check_timeout(timeout: Any, name: str = "timeout", unit: str = "seconds") -> float | None:
    """None (wait forever) or a number >= 0, returned as a float."""
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, numbers.Real) or not timeout >= 0:
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
