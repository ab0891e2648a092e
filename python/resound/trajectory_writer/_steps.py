"""Appending steps to a TrajectoryWriter: values into their columns, references
into the history, new fields into new columns.

An append checks every value before it adds any, so a rejected append
changes nothing. ``_StepAppender`` holds the writer's methods for it; they
use the attributes ``TrajectoryWriter.__init__`` sets (the columns, the
history bookkeeping, the episode step).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

import numpy as np

from resound import nest
from resound.trajectory_writer._columns import _Column
from resound.trajectory_writer._values import _as_array

if TYPE_CHECKING:
    from resound.trajectory_writer._references import CellRef
    from resound.trajectory_writer._writer import TrajectoryWriter


class _StepAppender:
    """The append methods of TrajectoryWriter (see the module doc)."""

    _columns: dict[nest.Path, _Column]
    _none_paths: set[nest.Path]
    _column_list: list[_Column]
    _configs: dict[nest.Path, tuple[int, int]]
    _default_keep_alive: int
    _default_chunk_length: int
    _history_size: int
    _steps_in_history: int
    _structure: Any
    _history: Any
    _fast_keys: tuple[Any, ...] | None
    _fast_columns: dict[Any, _Column | None]
    _episode_step: int
    _episode_steps: int
    _step_open: bool
    _closed: bool
    _error: BaseException | None

    if TYPE_CHECKING:  # defined by TrajectoryWriter

        def _check_usable(self, operation: str | None = None) -> None: ...

    def append(self, data: Any, *, partial_step: bool = False) -> Any:
        """Appends a step (or part of one, with ``partial_step=True``).

        Returns ``data``'s structure with a CellRef for every value (None
        where the value was None).

        A rejected append (ValueError: a value of the wrong dtype or shape, a
        value that is not numbers or strings, a field already set in the open
        step) changes nothing: the history, ``episode_steps``, the open step
        and the columns are as they were, and the step can be appended again
        with the value fixed.

        Example:
            >>> import numpy as np, resound
            >>> server = resound.Server([resound.Table.queue('q', 10)], listen=False)
            >>> writer = server.in_process_client().trajectory_writer(2)
            >>> refs = writer.append({'obs': np.zeros(2, np.float32)})
            >>> writer.append({'obs': np.zeros(3, np.float32)})
            Traceback (most recent call last):
            ...
            ValueError: Tensor of incompatible shape provided for column ('obs',). Got [3] \
which is incompatible with [2].
            >>> writer.episode_steps, len(writer.history['obs'])
            (1, 1)
        """
        if self._closed or self._error is not None:
            self._check_usable("TrajectoryWriter.append")
        step = self._episode_step
        fast_keys = self._fast_keys
        if type(data) is dict and fast_keys is not None and tuple(data) == fast_keys:
            if self._step_open:
                result: Any = self._append_to_open_step(data, step)
            else:
                # The hot path: a new step of the same plain {key: value} fields
                # as the last one, each with a column. Every value is checked
                # before any is added. (While _fast_keys is set, every one of
                # its fields has a column.)
                fast_columns = cast("dict[Any, _Column]", self._fast_columns)
                arrays: list[np.ndarray | None] = []
                for key, value in data.items():
                    if value is None:
                        arrays.append(None)
                        continue
                    column = fast_columns[key]
                    if (
                        type(value) is np.ndarray
                        and value.dtype is column.dtype
                        and value.shape == column.shape
                    ):
                        arrays.append(value)  # column.checked(value), inline
                    else:
                        arrays.append(column.checked(value))
                self._steps_in_history += 1
                refs: dict[Any, CellRef | None] = {}
                try:
                    for key, array in zip(data, arrays, strict=False):
                        column = fast_columns[key]
                        ref = refs[key] = None if array is None else column.add(array, step)
                        # column.push_history(ref), inline:
                        history = column.history
                        if len(history) == history.maxlen:
                            column.history_dropped += 1
                            if history[0] is None:
                                column.history_nones -= 1
                        history.append(ref)
                        if ref is None:
                            column.history_nones += 1
                except BaseException:
                    self._keep_step_open()  # only an interrupt or a failing store gets here
                    raise
                result = refs
        else:
            result = self._append_general(data, step)
        if not partial_step:
            self._step_open = False
            self._episode_step += 1
            self._episode_steps += 1
        else:
            self._step_open = True
        return result

    def _append_to_open_step(self, data: dict[Any, Any], step: int) -> dict[Any, Any]:
        """append() of the rest of an open step's plain {key: value} fields."""
        fast_columns = cast("dict[Any, _Column]", self._fast_columns)  # as in append()
        arrays: list[np.ndarray | None] = []
        for key, value in data.items():  # every value is checked before any is added
            if value is None:
                arrays.append(None)
                continue
            column = fast_columns[key]
            if column.history[-1] is not None:
                raise _already_set_error(column, value)
            arrays.append(column.checked(value))
        refs = {}
        for key, array in zip(data, arrays, strict=True):
            refs[key] = None if array is None else self._add(fast_columns[key], array, step)
        return refs

    def _append_general(self, data: Any, step: int) -> Any:
        flat = nest.flatten_with_path(data)
        step_open = self._step_open
        # First check every value and make the columns of new fields, changing
        # nothing; then record the step.
        entries: list[tuple[_Column, np.ndarray] | None] = []
        new_columns: list[_Column] = []
        new_none_paths = []
        for path, value in flat:
            if value is None:
                entries.append(None)
                if path not in self._columns and path not in self._none_paths:
                    # A field seen only as None so far: in history, all None.
                    new_none_paths.append(path)
                continue
            column = self._columns.get(path)
            if column is None:
                array = _as_array(value)
                column = self._make_column(path, array, len(self._column_list) + len(new_columns))
                new_columns.append(column)
            else:
                if step_open and column.history[-1] is not None:
                    raise _already_set_error(column, value)
                array = column.checked(value)
            entries.append((column, array))
        if not step_open:
            self._open_step()
        for column in new_columns:
            self._add_column(column)
        self._none_paths.update(new_none_paths)
        if new_columns or new_none_paths or self._structure is None:
            self._structure = _merge_structures(self._structure, data)
            self._history = None
        try:
            refs = [None if entry is None else self._add(*entry, step) for entry in entries]
        except BaseException:
            self._fast_keys = None
            self._keep_step_open()  # only an interrupt or a failing store gets here
            raise
        # Remember plain {key: leaf} steps so the next ones skip flattening.
        if (
            type(data) is dict
            and all(len(path) == 1 for path, _ in flat)
            and len(flat) == len(data)
        ):
            self._fast_keys = tuple(data)
            self._fast_columns = {key: self._columns.get((key,)) for key in data}
            if any(column is None for column in self._fast_columns.values()) or len(
                self._fast_columns
            ) != len(self._column_list):
                self._fast_keys = None
        else:
            self._fast_keys = None
        return nest.unflatten_as(data, refs)

    def _keep_step_open(self) -> None:
        """After an append failed while adding its checked values (an interrupt
        or a failing store): every column gets an entry for the step (None
        where no value was added), which stays open for the rest of its values."""
        for column in self._column_list:
            if column.history_length() < self._steps_in_history:
                column.push_history(None)
        self._step_open = True

    def _open_step(self) -> None:
        for column in self._column_list:
            column.push_history(None)
        self._steps_in_history += 1

    def _add(self, column: _Column, array: np.ndarray, step: int) -> CellRef:
        """Adds a checked value to the open step."""
        ref = column.add(array, step)
        column.history[-1] = ref
        column.history_nones -= 1
        return ref

    def _make_column(self, path: nest.Path, first: np.ndarray, index: int) -> _Column:
        """A column for a new field (not yet part of the writer)."""
        keep_alive, chunk_length = self._configs.get(
            path, (self._default_keep_alive, self._default_chunk_length)
        )
        writer = cast("TrajectoryWriter", self)  # the one class this mixin is part of
        return _Column(writer, path, index, first, keep_alive, chunk_length, self._history_size)

    def _add_column(self, column: _Column) -> None:
        # Earlier steps of a new column read as None.
        kept = min(self._steps_in_history, self._history_size)
        column.history.extend([None] * kept)
        column.history_dropped = self._steps_in_history - kept
        column.history_nones = kept
        self._columns[column.path] = column
        self._column_list.append(column)


def _already_set_error(column: _Column, value: Any) -> ValueError:
    return ValueError(
        f"Field {column.path!r} has already been set in the active step by previous "
        "(partial) append call and thus must be omitted or set to None but got: "
        f"{value!r}"
    )


def _merge_structures(old: Any, new: Any) -> Any:
    """The union of two structures (new keys and longer sequences are added)."""
    if old is None:
        return new
    if isinstance(old, dict) and isinstance(new, dict):
        merged = dict(old)
        for key, value in new.items():
            merged[key] = _merge_structures(old.get(key), value)
        return merged
    if isinstance(old, (list, tuple)) and isinstance(new, (list, tuple)) and type(old) is type(new):
        items = [
            _merge_structures(old[i] if i < len(old) else None, new[i] if i < len(new) else None)
            for i in range(max(len(old), len(new)))
        ]
        if hasattr(type(old), "_fields"):
            return type(old)(*items)
        return type(old)(items)
    return old if new is None else new
