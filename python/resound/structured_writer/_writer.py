"""StructuredWriter: appends steps and inserts the items its configs describe."""

from __future__ import annotations

import logging
import re
from collections import deque
from collections.abc import Sequence
from typing import Any

from resound import nest
from resound._operation_names import names_operation
from resound.errors import DeadlineExceededError, ReverbError
from resound.structured_writer._config import Config
from resound.structured_writer._plans import (
    _BUFFER_LENGTH,
    _END_EPISODE,
    _EQ,
    _GE,
    _STEP_INDEX,
    _STEPS_SINCE,
    _condition_value,
    _Plan,
    _td_value,
    _trunc_mod,
)
from resound.structured_writer._validation import _max_age, validate_configs
from resound.trajectory_writer import TrajectoryColumn

# The package's logger (one name for the whole structured writer).
_log = logging.getLogger("resound.structured_writer")


# How the TrajectoryWriter names a column in its errors: `column (3,)`, `Field (3,)`.
_COLUMN_ERROR = re.compile(r"\b(column|Field) \((\d+),\)")


class StructuredWriter:
    """Appends steps and inserts the items its configs describe.

    Created by ``Client.structured_writer(configs)``, which prepares the
    configs (:func:`prepare_configs`) and wraps a TrajectoryWriter made with
    ``num_keep_alive_refs=required_keep_alive_refs(configs)``. Every
    ``append`` must pass a step with the same flattened length (leaves may be
    ``None``). After each append, every config whose conditions hold for the
    newest step inserts one item (at most once per step per config); a config
    whose pattern would read a step without a value is skipped for that step.

    Example (``client`` is a resound client, ``config`` inserts ``x[-2:]``)::

        with client.structured_writer([config]) as writer:
            writer.append({'x': 1.0})
            writer.append({'x': 2.0})  # inserts [1.0, 2.0]
            writer.append({'x': 3.0}, partial_step=True)  # inserts [2.0, 3.0]
            writer.append({'x': None})  # closes the step; nothing new
            writer.end_episode()
    """

    def __init__(self, writer: Any, configs: Sequence[Config]) -> None:
        """Wraps ``writer`` (a TrajectoryWriter) and applies ``configs``.

        ``configs`` must be valid (see :func:`validate_config`); they are
        validated again here and ``ValueError`` is raised otherwise.
        """
        configs = validate_configs(configs)
        self._writer = writer
        self._configs = configs
        self._plans = [_Plan(config) for config in configs]

        # Rows each used column keeps: the oldest row a node reads, 1 for data
        # conditions.
        max_age: dict[int, int] = {}
        cond_columns: set[int] = set()
        td_columns: set[int] = set()
        for config in configs:
            for node in config.flat:
                index = node.flat_source_index
                max_age[index] = max(max_age.get(index, 0), _max_age(node))
            for condition in config.conditions:
                if condition.left == "flat_source_index":
                    index = condition.flat_source_index
                    max_age[index] = max(max_age.get(index, 0), 1)
                    cond_columns.add(index)
            if config.priority.td_error is not None:
                td_columns.add(config.priority.td_error.flat_source_index)
        self._max_index = max(max_age)
        self._used = sorted(max_age)
        self._max_buffer = max(max_age.values())
        # Per used column: the references of its recent rows (None: no value).
        self._history: dict[int, deque[Any]] = {i: deque(maxlen=age) for i, age in max_age.items()}
        # Newest value of each data-condition column, as the int compared.
        self._cond_columns = sorted(cond_columns)
        self._cond_values: dict[int, int | str | None] = dict.fromkeys(cond_columns)
        # TD-error columns keep their values too (the priority needs them).
        self._td_columns = sorted(td_columns)
        self._td_values: dict[int, deque[Any]] = {i: deque(maxlen=max_age[i]) for i in td_columns}

        self._flat_length: int | None = None
        self._step_is_open = False
        self._rows = 0  # rows pushed since the buffers were last cleared
        self._row_has_data = False  # the newest row holds at least one reference
        self._row_id = (0, 0)  # (episode, step index) of the newest row
        self._episode = 0
        self._next_step = 0  # index of the next step to open in this episode

    # -- public API ---------------------------------------------------------

    def _error_addresses(self) -> list[str]:
        """The servers this writer writes to, for messages (see _operation_names)."""
        return self._writer._error_addresses()

    @property
    def step_is_open(self) -> bool:
        """True if the most recent ``append`` was partial (``partial_step=True``)."""
        return self._step_is_open

    @property
    def configs(self) -> list[Config]:
        """The configs this writer applies."""
        return list(self._configs)

    @names_operation("StructuredWriter.append")
    def append(self, data: Any, *, partial_step: bool = False) -> None:
        """Appends a step (or part of one) and inserts the items that are due.

        Args:
            data: the step, a nest with the same flattened length on every call;
                leaves may be ``None`` (no value for that field in this call).
            partial_step: if True the step stays open and later calls fill its
                remaining fields; the call completing it passes False. A field
                must not get two values in the same step.

        Raises:
            ValueError: the flattened length changed, a field got a second value
                in the same step, or a value's dtype/shape differs from the
                field's first value. A rejected append changes nothing (in
                this writer or the TrajectoryWriter under it): the same step,
                fixed, can be appended next.
        """
        flat = nest.flatten(data)
        if self._flat_length is None:
            if self._max_index >= len(flat):
                raise ValueError(
                    f"The configs read field {self._max_index} of the step but the flattened "
                    f"data has only {len(flat)} fields."
                )
        elif len(flat) != self._flat_length:
            raise ValueError(
                f"Flattened data has an unexpected length, got {len(flat)} but wanted "
                f"{self._flat_length}."
            )

        # Only the fields some config reads go to the writer, as {flat index:
        # value}: the column paths are (index,) whichever fields are present.
        # It checks every value (dtype, shape, a field set twice in a step)
        # before it takes any: a rejected step leaves no trace there, nor here.
        forward = {i: flat[i] for i in self._used}
        try:
            refs = self._writer.append(forward, partial_step=partial_step)
        except ValueError as error:
            raise self._reword(error, data) from error
        self._flat_length = len(flat)

        history = self._history
        if not self._step_is_open:
            has_data = False
            for i in self._used:
                ref = refs[i]
                history[i].append(ref)
                if ref is not None:
                    has_data = True
            for i in self._cond_columns:
                self._cond_values[i] = _condition_value(flat[i], i)
            for i in self._td_columns:
                self._td_values[i].append(_td_value(flat[i], i))
            self._rows += 1
            self._row_has_data = has_data
            self._row_id = (self._episode, self._next_step)
        else:
            for i in self._used:
                ref = refs[i]
                if ref is not None:
                    history[i][-1] = ref
                    self._row_has_data = True
            for i in self._cond_columns:
                if flat[i] is not None:
                    self._cond_values[i] = _condition_value(flat[i], i)
            for i in self._td_columns:
                if flat[i] is not None:
                    self._td_values[i][-1] = _td_value(flat[i], i)
        if not partial_step:
            self._next_step += 1
        self._step_is_open = partial_step
        self._apply_configs(False)

    @names_operation("StructuredWriter.flush")
    def flush(self, block_until_num_items: int = 0, timeout_ms: int | None = None) -> None:
        """Waits until at most ``block_until_num_items`` items are unconfirmed.

        Raises:
            ValueError: ``block_until_num_items`` is negative.
            DeadlineExceededError: not done within ``timeout_ms`` (``None`` waits
                forever); the items keep being sent.
        """
        if block_until_num_items < 0:
            raise ValueError(f"block_until_num_items must be >= 0, got {block_until_num_items}")
        self._writer.flush(block_until_num_items, timeout_ms=timeout_ms)

    @names_operation("StructuredWriter.end_episode")
    def end_episode(self, clear_buffers: bool = True, timeout_ms: int | None = None) -> None:
        """Inserts the end-of-episode items, flushes and starts a new episode.

        Configs are evaluated once more for the last step with
        ``is_end_episode`` true, then the underlying writer ends its episode
        (flushing all items). With ``clear_buffers=False`` the history is kept
        and later items may span both episodes; step indices restart at 0
        either way.

        Raises:
            DeadlineExceededError: the flush did not finish within
                ``timeout_ms``. The new episode has started all the same
                (buffers cleared or kept as asked) and the items keep being
                sent in the background.
        """
        self._apply_configs(True)
        try:
            self._writer.end_episode(clear_buffers, timeout_ms=timeout_ms)
        except DeadlineExceededError:
            self._start_episode(clear_buffers)
            raise
        self._start_episode(clear_buffers)

    def _start_episode(self, clear_buffers: bool) -> None:
        if clear_buffers:
            for column in self._history.values():
                column.clear()
            for values in self._td_values.values():
                values.clear()
            self._cond_values = dict.fromkeys(self._cond_columns)
            self._rows = 0
            self._row_has_data = False
        self._episode += 1
        self._next_step = 0
        self._step_is_open = False

    @names_operation("StructuredWriter.close")
    def close(self) -> None:
        """Closes the underlying writer without flushing (pending items are dropped)."""
        self._writer.close()

    def __enter__(self) -> StructuredWriter:
        return self

    def __exit__(self, exc_type: Any, exc_value: Any, traceback: Any) -> None:
        """Flushes, unless a ReverbError is propagating (the writer stays open)."""
        if exc_type is None or not issubclass(exc_type, ReverbError):
            self.flush()

    # -- internals ----------------------------------------------------------

    def _reword(self, error: ValueError, data: Any) -> ValueError:
        """Names the flat index and path of the field in dtype/shape errors."""
        message = str(error)
        match = _COLUMN_ERROR.search(message)
        if match is None:
            return error
        index = int(match.group(2))
        paths = [path for path, _ in nest.flatten_with_path(data)]
        path = paths[index] if index < len(paths) else ()
        return ValueError(
            message[: match.start()]
            + f"{match.group(1)} {index} (path={path!r})"
            + message[match.end() :]
        )

    def _apply_configs(self, is_end_episode: bool) -> None:
        if not self._row_has_data:
            return
        current = self._row_id
        history = self._history
        for plan in self._plans:
            if plan.last_applied == current:
                continue
            if plan.last_checked != current:
                plan.steps_since_applied += 1
                plan.last_checked = current
            if not self._conditions_hold(plan, current[1], is_end_episode):
                continue

            columns = []
            td_rows = None
            for position, (column, first, length, step, squeeze) in enumerate(plan.nodes):
                rows = history[column]
                offset = len(rows) + first
                if offset < 0:
                    break
                if squeeze:
                    ref = rows[offset]
                    if ref is None:
                        break
                    selected = [ref]
                else:
                    selected = [rows[offset + k] for k in range(0, length, step)]
                    if None in selected:
                        break
                if position == plan.td_node:
                    td_rows = (column, offset, length, step)
                columns.append(TrajectoryColumn(selected, squeeze=squeeze))
            else:
                priority = plan.constant if td_rows is None else self._td_priority(plan, td_rows)
                self._writer.create_item(plan.table, priority, columns)
                plan.last_applied = current
                plan.steps_since_applied = 0

    def _conditions_hold(self, plan: _Plan, step_index: int, is_end_episode: bool) -> bool:
        for left_code, index, cmp, a, b, inverse in plan.conditions:
            if left_code == _STEP_INDEX:
                left = step_index
            elif left_code == _BUFFER_LENGTH:
                left = min(self._rows, self._max_buffer)
            elif left_code == _STEPS_SINCE:
                left = plan.steps_since_applied
            elif left_code == _END_EPISODE:
                left = 1 if is_end_episode else 0
            else:
                value = self._cond_values[index]
                if value is None:
                    return False
                if isinstance(value, str):
                    _log.error("%s", value)
                    return False
                left = value
            if cmp == _GE:
                holds = left >= a
            elif cmp == _EQ:
                holds = left == a
            else:
                holds = _trunc_mod(left, a) == b
            if holds == inverse:
                return False
        return True

    def _td_priority(self, plan: _Plan, rows: tuple[int, int, int, int]) -> float:
        column, offset, length, step = rows
        stored = self._td_values[column]
        values = [stored[offset + k] for k in range(0, length, step)]
        for value in values:
            if isinstance(value, str):
                raise ValueError(value)
        magnitudes = [abs(v) for v in values]
        weight = plan.td_weight
        return weight * max(magnitudes) + (1 - weight) * sum(magnitudes) / len(magnitudes)
