"""References to appended values: CellRef (one cell), TrajectoryColumn (the
column of an item) and the history views that hand them out."""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from resound import nest

if TYPE_CHECKING:
    from resound.trajectory_writer._columns import _Chunk, _Column
    from resound.trajectory_writer._writer import TrajectoryWriter

# object.__new__: the hot paths build slotted objects field by field, which
# costs about half of a call to their __init__.
_new = object.__new__


class CellRef:
    """A reference to one value appended to a column (Reverb's WeakCellRef)."""

    __slots__ = ("_chunk", "_column", "_generation", "_offset", "_seq")

    def __init__(
        self, column: _Column, chunk: _Chunk, offset: int, seq: int, generation: int
    ) -> None:
        self._column = column
        self._chunk = chunk
        self._offset = offset
        self._seq = seq
        self._generation = generation

    @property
    def expired(self) -> bool:
        """True once the writer no longer keeps the value: it left the
        keep-alive window (unless an item waiting in the writer uses it), or
        ``end_episode`` cleared the buffers since it was appended."""
        column = self._column
        if self._generation != column.generation:
            return True
        if self._chunk.pins:
            return False
        return self._seq < column.count - column.keep_alive

    @property
    def shape(self) -> tuple[int, ...]:
        return self._column.shape

    @property
    def dtype(self) -> np.dtype:
        return self._column.dtype

    def numpy(self) -> np.ndarray:
        """A copy of the referenced value."""
        if self.expired:
            raise RuntimeError("Cannot access data from expired WeakCellRef")
        return self._chunk.row(self._offset)

    def __repr__(self) -> str:
        state = "expired" if self.expired else "alive"
        return f"CellRef(column={self._column.path!r}, step={self._seq}, {state})"


def _none_reference_error(refs: Sequence[CellRef | None], path: Any) -> ValueError:
    return ValueError(
        "TrajectoryColumns cannot contain any None data references: "
        f"TrajectoryColumn at path {path!r} got {list(refs)!r}"
    )


class TrajectoryColumn:
    """A column of an item: references to cells, optionally squeezed.

    A squeezed column holds exactly one reference and has no time axis.

    Example:
        >>> col = writer.history['obs'][-3:]  # doctest: +SKIP
        >>> col.shape  # doctest: +SKIP
        (3, 4)
    """

    # _contiguous: the references are consecutive values of one column (a
    # history slice), which lets create_item skip per-reference work.
    __slots__ = ("_contiguous", "_path", "_refs", "_squeeze")

    def __init__(
        self, data_references: Sequence[CellRef], *, squeeze: bool = False, path: Any = None
    ) -> None:
        refs = list(data_references)
        for ref in refs:
            if ref is None:
                raise _none_reference_error(refs, path)
        if squeeze and len(refs) != 1:
            raise ValueError(
                f"Columns must contain exactly one data reference when squeeze set, got {len(refs)}"
            )
        self._refs = refs
        self._squeeze = bool(squeeze)
        self._path = path
        self._contiguous = False

    @classmethod
    def _single(cls, ref: CellRef | None, path: Any) -> TrajectoryColumn:
        """``TrajectoryColumn([ref], squeeze=True, path=path)`` without the
        general checks (the hot path of ``history[...][-1]``)."""
        if ref is None:
            raise _none_reference_error([ref], path)
        column = cls.__new__(cls)
        column._refs = [ref]
        column._squeeze = True
        column._path = path
        column._contiguous = True
        return column

    @classmethod
    def _run(cls, refs: list[CellRef], path: Any) -> TrajectoryColumn:
        """An unsqueezed column of consecutive values of one column (the caller
        guarantees it and that no reference is None)."""
        column = cls.__new__(cls)
        column._refs = refs
        column._squeeze = False
        column._path = path
        column._contiguous = True
        return column

    @property
    def is_squeezed(self) -> bool:
        return self._squeeze

    @property
    def shape(self) -> tuple[int, ...]:
        if not self._refs:
            return (0,)
        element = tuple(self._refs[0].shape)
        return element if self._squeeze else (len(self._refs), *element)

    @property
    def dtype(self) -> np.dtype:
        if not self._refs:
            raise ValueError("an empty TrajectoryColumn has no dtype")
        return self._refs[0].dtype

    def numpy(self) -> np.ndarray:
        """The referenced values (stacked unless squeezed); RuntimeError if
        any reference expired."""
        values = [ref.numpy() for ref in self._refs]
        return values[0] if self._squeeze else np.stack(values)

    def __len__(self) -> int:
        return len(self._refs)

    def __iter__(self) -> Iterator[CellRef]:
        return iter(self._refs)

    def __getitem__(self, index: Any) -> TrajectoryColumn:
        if isinstance(index, (int, np.integer)) and not isinstance(index, bool):
            return TrajectoryColumn([self._refs[index]], squeeze=True, path=self._path)
        if isinstance(index, slice):
            refs = self._refs[index]
            if self._contiguous and refs and index.step in (None, 1):
                return TrajectoryColumn._run(refs, self._path)
            return TrajectoryColumn(refs, path=self._path)
        if isinstance(index, (list, tuple, np.ndarray)):
            return TrajectoryColumn([self._refs[i] for i in index], path=self._path)
        raise TypeError(f"TrajectoryColumn indices must be int, slice or list, got {index!r}")

    def __repr__(self) -> str:
        return (
            f"TrajectoryColumn(path={self._path!r}, length={len(self._refs)}, "
            f"squeeze={self._squeeze})"
        )


class _ColumnHistory:
    """All steps of one column since the episode began; older than the
    keep-alive window read as None."""

    __slots__ = ("_column", "_path", "_writer")

    def __init__(self, writer: TrajectoryWriter, column: _Column | _NoColumn) -> None:
        self._writer = writer
        self._column = column
        self._path = column.path

    def __len__(self) -> int:
        return self._column.history_length()

    def _position(self, position: int) -> int:
        """``position`` counted from the episode's start (IndexError if out of range)."""
        length = self._column.history_length()
        if position < 0:
            position += length
        if not 0 <= position < length:
            raise IndexError(f"step {position} out of range for a history of {length} steps")
        return position

    def __getitem__(self, index: Any) -> TrajectoryColumn:
        column = self._column
        if index.__class__ is int and index == -1:
            # The hot path of single steps: history['x'][-1].
            history = column.history
            if history:
                ref = history[-1]
                if ref is not None:
                    single = _new(TrajectoryColumn)
                    single._refs = [ref]
                    single._squeeze = True
                    single._path = self._path
                    single._contiguous = True
                    return single
        if type(index) is slice:  # the hot path of sequences: history['x'][-10:]
            # A _NoColumn (a field only ever None) counts every step as
            # dropped, so its slices take the general path below.
            dropped = column.history_dropped
            start, stop, step = index.indices(dropped + len(column.history))
            if step == 1 and dropped <= start < stop:
                # Consecutive steps still in the history: one C-level copy.
                refs = list(itertools.islice(column.history, start - dropped, stop - dropped))
                if not column.history_nones or None not in refs:
                    run = _new(TrajectoryColumn)
                    run._refs = cast("list[CellRef]", refs)  # no None: checked just above
                    run._squeeze = False
                    run._path = self._path
                    run._contiguous = True
                    return run
            positions: Sequence[int] = range(start, stop, step)
            return self._column_at(positions, [column.history_at(p) for p in positions], False)
        if isinstance(index, (int, np.integer)) and not isinstance(index, bool):
            position = self._position(int(index))
            ref = column.history_at(position)
            if ref is not None:
                return TrajectoryColumn._single(ref, self._path)
            return self._column_at([position], [ref], True)
        if isinstance(index, (list, tuple, np.ndarray)):
            positions = [self._position(int(p)) for p in index]
            return self._column_at(positions, [column.history_at(p) for p in positions], False)
        raise TypeError(f"history indices must be int, slice or list, got {index!r}")

    def _column_at(
        self, positions: Sequence[int], refs: list[CellRef | None], squeeze: bool
    ) -> TrajectoryColumn:
        try:
            present = [ref for ref in refs if ref is not None]
            if len(present) != len(refs):
                raise _none_reference_error(refs, self._path)
            return TrajectoryColumn(present, squeeze=squeeze, path=self._path)
        except ValueError as error:
            # A None is a step where the column had no value, or a step that
            # left the writer's history: say which, naming the setting.
            if isinstance(self._column, _NoColumn):
                raise  # no value at any step yet: not a keep-alive matter
            dropped = self._column.history_dropped
            expired = [p for p in positions if p < dropped]
            if not expired or isinstance(self._column, _NoColumn):  # (it drops nothing)
                raise
            kept = self._column.history.maxlen
            raise ValueError(
                f"{error}: step {expired[0]} of the episode is older than the last {kept} "
                f"steps the writer keeps (num_keep_alive_refs={kept}); make "
                "num_keep_alive_refs at least as long as the items it writes"
            ) from None

    def __repr__(self) -> str:
        return f"ColumnHistory(path={self._path!r}, length={len(self)})"


class _NoColumn:
    """The history side of a field that has only been None so far (it has no
    column yet): every step reads None."""

    __slots__ = ("_writer", "history", "path")

    def __init__(self, writer: TrajectoryWriter, path: nest.Path) -> None:
        self._writer = writer
        self.path = path
        self.history = ()

    def history_length(self) -> int:
        return self._writer._steps_in_history

    @property
    def history_dropped(self) -> int:
        # Every step counts as out of the (empty) history, so that slices take
        # the general path and read None for each step.
        return self.history_length()

    @property
    def history_nones(self) -> int:
        return self.history_length()

    def history_at(self, position: int) -> None:
        return None
