"""Slice planning: the core slices (chunk key, first row, row count) of an
item's columns, and the chunks an item needs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from resound.trajectory_writer._references import CellRef, TrajectoryColumn

if TYPE_CHECKING:
    from resound.trajectory_writer._columns import _Chunk


def _all_complete(chunks: list[_Chunk]) -> bool:
    # A plain loop: all() over a generator costs more on this hot path.
    for chunk in chunks:  # noqa: SIM110
        if not chunk.length:
            return False
    return True


def _run_slices(refs: list[CellRef], index: int, chunks: list[_Chunk]) -> tuple[list[Any], bool]:
    """Core slices of consecutive values of one column: one slice per chunk.

    Such references are alive if the oldest is, and a chunk boundary is where
    a reference's offset is 0 again (each chunk starts at row 0).
    """
    first = refs[0]
    column = first._column
    if first._generation != column.generation or (
        not first._chunk.pins and first._seq < column.count - column.keep_alive
    ):
        # The oldest may be expired while a newer one is pinned: decide per reference.
        return _slices(TrajectoryColumn(refs), index, chunks)
    # Walk chunk by chunk: a complete chunk holds `length` rows, and the
    # newest (open) chunk holds all references that remain.
    total = len(refs)
    slices = []
    position = 0
    ref = first
    while True:
        chunk = ref._chunk
        start = ref._offset
        take = total - position
        if chunk.length and chunk.length - start < take:
            take = chunk.length - start
        slices.append((chunk.key, start, take))
        if chunk not in chunks:
            chunks.append(chunk)
        position += take
        if position >= total:
            break
        ref = refs[position]
    return slices, False


def _slices(column: TrajectoryColumn, index: int, chunks: list[_Chunk]) -> tuple[list[Any], bool]:
    """Core slices of a column: runs of strictly consecutive rows of one chunk."""
    slices: list[list[int]] = []
    last_chunk = None
    last_offset = -2
    first = None
    for ref in column._refs:
        if ref.expired:
            raise ValueError(f"Error in column {index}: Column contains expired CellRef.")
        chunk = ref._chunk
        if first is None:
            first = ref._column
        elif ref._column is not first and (
            ref._column.dtype != first.dtype or ref._column.shape != first.shape
        ):
            other = ref._column
            raise ValueError(
                f"Error in column {index}: references hold different dtypes or shapes "
                f"({first.dtype}{list(first.shape)} and {other.dtype}{list(other.shape)})"
            )
        if chunk is last_chunk and ref._offset == last_offset + 1:
            slices[-1][2] += 1
        else:
            slices.append([chunk.key, ref._offset, 1])
            if chunk not in chunks:
                chunks.append(chunk)
        last_chunk = chunk
        last_offset = ref._offset
    return [tuple(s) for s in slices], column._squeeze


def _empty_column_error(leaves: list[Any], index: int) -> Exception:
    """The error for an empty column ``index`` of a trajectory (Reverb: an
    empty trajectory if every column is empty)."""
    for position, leaf in enumerate(leaves):
        if type(leaf) is not TrajectoryColumn:
            return TypeError(
                f"trajectory leaves must be TrajectoryColumn (from writer.history), got "
                f"{type(leaf).__name__} at position {position}"
            )
    if any(len(leaf) for leaf in leaves):
        return ValueError(f"Error in column {index}: Column must not be empty.")
    return ValueError("trajectory must not be empty.")
