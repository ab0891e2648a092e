"""Checks of a TrajectoryWriter's arguments and of items against their
table (priority, table existence, signature)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from resound import specs
from resound._checks import as_priority

if TYPE_CHECKING:
    from resound.trajectory_writer._references import TrajectoryColumn

# A column chunk holds at most this many steps unless configured otherwise:
# long enough to amortise per-chunk costs, short enough that items over
# recent steps do not wait long for their chunk to complete.
DEFAULT_MAX_CHUNK_LENGTH = 16


class _ItemChecks:
    """The item checks of TrajectoryWriter; they use its ``_tables`` cache,
    ``_link`` and ``_validate_items``."""

    _tables: dict[str, Any]
    _link: Any
    _validate_items: bool

    def _table(self, name: str) -> Any:
        table = self._tables.get(name)
        if table is None:
            table = self._tables[name] = self._link.table_info_for_writer(name)
        return table

    def _check_item_priority(self, table: str, priority: Any) -> float:
        value = as_priority(priority)
        if math.isnan(value):
            raise ValueError("`priority` must not be nan.")
        if math.isinf(value):
            raise ValueError(f"priority must be finite, got {value}")
        meta = self._table_or_none(table)
        if value < 0 and meta is not None and meta.prioritized:
            raise ValueError(
                f"priority must be >= 0 for table {table!r} (it has a Prioritized "
                f"selector), got {value}"
            )
        return value

    def _table_or_none(self, table: str) -> Any:
        try:
            return self._table(table)
        except KeyError:
            if self._validate_items:
                raise ValueError(
                    f"Unable to create item in table '{table}' since the table could not be found."
                ) from None
            return None

    def _check_signature(self, table: str, leaves: list[TrajectoryColumn]) -> None:
        meta = self._table_or_none(table)
        if meta is None or meta.flat_signature is None:
            return
        expected = meta.flat_signature
        if len(leaves) != len(expected):
            raise ValueError(
                f"Unable to create item in table {table!r}: the trajectory has {len(leaves)} "
                f"fields but the table signature has {len(expected)} "
                f"({', '.join(specs.field_labels(meta.signature))})."
            )
        for index, (column, spec) in enumerate(zip(leaves, expected, strict=False)):
            shape = column.shape
            if not (
                specs.dtypes_match(spec.dtype, column.dtype)
                and specs.shapes_compatible(spec.shape, shape)
            ):
                label = specs.field_labels(meta.signature)[index]
                raise ValueError(specs.mismatch_text(table, label, column.dtype, shape, spec))


def _check_positive(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} ({value!r}) must be a positive integer")
    return int(value)


def _check_chunk_length(value: Any, keep_alive: int) -> int:
    if value is None:
        return min(keep_alive, DEFAULT_MAX_CHUNK_LENGTH)
    length = _check_positive(value, "max_chunk_length")
    if length > keep_alive:
        raise ValueError(
            f"num_keep_alive_refs ({keep_alive}) must be >= max_chunk_length ({length})."
        )
    return length
