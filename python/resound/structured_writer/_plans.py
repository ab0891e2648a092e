"""Configs compiled for fast evaluation by the StructuredWriter, with the
per-writer state of each (when it last applied)."""

from __future__ import annotations

from typing import Any, Final, cast

import numpy as np

from resound.structured_writer._config import _CMPS, _LEFTS, Config

# Codes of the compiled conditions: (left, index, cmp, a, b, inverse).
_STEP_INDEX, _STEPS_SINCE, _BUFFER_LENGTH, _END_EPISODE, _DATA = range(5)
_LEFT_CODES: Final = dict(zip(_LEFTS, range(5), strict=True))
_EQ, _GE, _MOD_EQ = range(3)
_CMP_CODES: Final = dict(zip(_CMPS, range(3), strict=True))

_TD_DTYPES: Final = frozenset(np.dtype(t) for t in (np.float32, np.float64, np.int32, np.int64))


def _condition_value(value: Any, column: int) -> int | str | None:
    """The int a data condition compares, or an error message."""
    if value is None:
        return None
    array = np.asarray(value)
    if array.size != 1:
        return (
            f"Config specified data condition on column {column} which does not contain "
            f"scalar values (got shape {array.shape})."
        )
    if array.dtype.kind not in "iub":
        return (
            f"Config specified data condition on column {column} has invalid data type "
            f"{array.dtype} (integers and bools only)."
        )
    return int(array.reshape(()))


def _td_value(value: Any, column: int) -> float | str | None:
    """The float a TD-error priority reads, or an error message."""
    if value is None:
        return None
    array = np.asarray(value)
    if array.shape != () or array.dtype not in _TD_DTYPES:
        return (
            f"td_error priority needs scalar float32, float64, int32 or int64 values in "
            f"column {column}, got shape {array.shape} and dtype {array.dtype}."
        )
    return float(array)


def _trunc_mod(left: int, mod: int) -> int:
    """C's ``%`` (the result has the sign of ``left``)."""
    remainder = abs(left) % mod
    return -remainder if left < 0 else remainder


class _Plan:
    """A config compiled for fast evaluation, with its per-writer state."""

    __slots__ = (
        "conditions",
        "config",
        "constant",
        "last_applied",
        "last_checked",
        "nodes",
        "steps_since_applied",
        "table",
        "td_node",
        "td_weight",
    )

    def __init__(self, config: Config) -> None:
        # ``config`` is valid (StructuredWriter validates it first): every
        # condition has ``left`` and ``cmp``, a node without ``start`` has
        # ``stop``, and the priority has exactly one of its two kinds.
        self.config = config
        self.table = config.table
        self.conditions = tuple(
            (
                _LEFT_CODES[cast(str, c.left)],
                c.flat_source_index,
                _CMP_CODES[cast(str, c.cmp)],
                c.mod if c.cmp == "mod_eq" else (c.ge if c.cmp == "ge" else c.eq),
                c.eq,
                bool(c.inverse),
            )
            for c in config.conditions
        )
        # Node: (column, first row relative to the end, length, step, squeeze).
        nodes: list[tuple[int, int, int, int, bool]] = []
        for node in config.flat:
            if node.start is not None:
                stop = node.stop if node.stop is not None else 0
                nodes.append(
                    (node.flat_source_index, node.start, stop - node.start, node.step or 1, False)
                )
            else:
                assert node.stop is not None
                nodes.append((node.flat_source_index, node.stop, 1, 1, True))
        self.nodes = tuple(nodes)
        priority = config.priority
        if priority.td_error is not None:
            self.constant = 0.0
            self.td_weight = priority.td_error.max_priority_weight
            self.td_node = next(
                i
                for i, node in enumerate(config.flat)
                if node.flat_source_index == priority.td_error.flat_source_index
            )
        else:
            assert priority.constant_fn is not None
            self.constant = float(priority.constant_fn.value)
            self.td_weight = 0.0
            self.td_node = -1
        self.last_applied: tuple[int, int] | None = None
        self.last_checked: tuple[int, int] | None = None
        self.steps_since_applied = 0
