"""Reverb's legacy ``Writer`` (``Client.writer``), on a TrajectoryWriter.

The legacy writer treats each appended structure as one timestep of flat
columns (its leaves, in ``resound.nest`` order) and makes items of the most
recent ``num_timesteps`` steps of every column: each column of an item is
``[num_timesteps, *step_shape]``. A writer is one episode. Steps go into
chunks of ``chunk_length``; an item that uses the chunk still filling waits
until it is full (or until ``flush`` or ``close``). New code should use
``Client.trajectory_writer``, which this class is built on.

As in Reverb, a failed ``append`` or ``create_item`` changes nothing, and
every method but ``__repr__`` raises once the writer is closed. Unlike
Reverb, a column's dtype and shape are fixed by the writer's first step (not
by each chunk's first), and a table signature must describe the whole item
(``[num_timesteps, ...]``) unless the item is a single step, which may also
match the step's own shape.

Example:
    >>> import numpy as np, resound
    >>> server = resound.Server([resound.Table.queue('queue', 10)], listen=False)
    >>> client = server.in_process_client()
    >>> with client.writer(max_sequence_length=3) as writer:
    ...     for step in range(3):
    ...         writer.append({'obs': np.full(2, step, np.float32), 'step': step})
    ...     writer.create_item('queue', num_timesteps=3, priority=1.0)
    >>> obs, step = next(client.sample('queue', emit_timesteps=False)).data
    >>> obs.shape, step.tolist()
    ((3, 2), [0, 1, 2])
"""

from __future__ import annotations

import contextlib
import logging
import math
import numbers
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from resound import nest, specs
from resound._operation_names import names_operation
from resound.errors import CancelledError
from resound.table_info import TableInfo
from resound.trajectory_writer import TrajectoryWriter

__all__ = ["Writer", "check_writer_arguments"]

_LOGGER = logging.getLogger("resound")
# Reverb's stand-in for "no limit" on the items in flight.
_UNLIMITED_IN_FLIGHT = 1_000_000
_DEFAULT_MAX_CHUNK_LENGTH = 10
_ARRAY_KINDS = "biufcSU"  # bool, integers, floats, complex, strings


def _positive_int(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{name} ({value!r}) must be a positive integer")
    return int(value)


def check_writer_arguments(
    max_sequence_length: Any, chunk_length: Any, max_in_flight_items: Any
) -> tuple[int, int, int]:
    """(max_sequence_length, chunk_length, max_in_flight_items) of
    ``Client.writer`` validated and with Reverb's defaults filled in:
    ``chunk_length`` ``min(10, max_sequence_length)``, ``max_in_flight_items``
    None as 1,000,000. ValueError names the argument.

    Example:
        >>> check_writer_arguments(4, None, None)
        (4, 4, 1000000)
    """
    max_sequence_length = _positive_int(max_sequence_length, "max_sequence_length")
    if chunk_length is None:
        chunk_length = min(_DEFAULT_MAX_CHUNK_LENGTH, max_sequence_length)
    if (
        isinstance(chunk_length, bool)
        or not isinstance(chunk_length, numbers.Integral)
        or not 1 <= int(chunk_length) <= max_sequence_length
    ):
        raise ValueError(
            f"chunk_length ({chunk_length!r}) must be a positive integer <= "
            f"max_sequence_length ({max_sequence_length})"
        )
    if max_in_flight_items is None:
        max_in_flight_items = _UNLIMITED_IN_FLIGHT
    max_in_flight_items = _positive_int(max_in_flight_items, "max_in_flight_items")
    return max_sequence_length, int(chunk_length), max_in_flight_items


def _step_array(value: Any, index: int) -> np.ndarray:
    """``value`` as the array a column stores (ValueError naming the leaf if
    it holds no numbers or strings)."""
    if value is None:
        raise ValueError(f"data must not hold None (leaf {index} of the flattened data)")
    array = value if type(value) is np.ndarray else np.asarray(value)
    if array.dtype.kind == "O":
        items = list(array.flat)
        if items and all(isinstance(item, bytes) for item in items):
            array = array.astype(np.bytes_)
        elif items and all(isinstance(item, str) for item in items):
            array = array.astype(np.str_)
    if array.dtype.kind not in _ARRAY_KINDS:
        raise ValueError(
            f"leaf {index} of the flattened data has dtype {array.dtype}: values must be bool, "
            "integer, float or complex numbers, or strings (str or bytes)"
        )
    return array


class Writer:
    """Reverb's legacy writer; made by ``Client.writer`` (see the module
    docstring)."""

    def __init__(
        self,
        writer: TrajectoryWriter,
        server_info: Callable[[], Mapping[str, TableInfo]],
        max_sequence_length: int,
        chunk_length: int,
        delta_encoded: bool,
        max_in_flight_items: int,
    ) -> None:
        self._writer = writer
        self._server_info = server_info
        self._max_sequence_length = max_sequence_length
        self._chunk_length = chunk_length
        self._delta_encoded = delta_encoded
        self._max_in_flight_items = max_in_flight_items
        self._tables: Mapping[str, TableInfo] | None = None
        # The dtype and shape of each column, from the first step.
        self._step_spec: list[tuple[np.dtype, tuple[int, ...]]] | None = None
        self._steps = 0  # steps appended
        self._open_steps = 0  # of them, in the chunk still filling
        self._items_on_open_chunk = 0  # items waiting for that chunk
        self._closed = False

    # --- context manager and lifetime

    def __enter__(self) -> Writer:
        if self._closed:
            raise ValueError("Cannot reuse already closed Writer")
        return self

    def __exit__(self, exc_type: Any, exc: Any, traceback: Any) -> None:
        if exc_type is None:
            self.flush()
            self.close()
            return
        if self._closed:
            return
        # Deliver what was written, as Reverb does, but let the body's error
        # through even if that fails too.
        try:
            self.close()
        except Exception as error:  # noqa: BLE001 - logged; the body's error propagates
            _LOGGER.warning("Writer.close() after an error in its with-block failed: %s", error)

    def __del__(self) -> None:
        if getattr(self, "_closed", True):
            return
        _LOGGER.warning("Writer-object deleted without calling .close explicitly.")
        with contextlib.suppress(Exception):  # the interpreter may be shutting down
            self.close()

    def __repr__(self) -> str:
        return (
            f"Writer(chunk_length={self._chunk_length}, "
            f"max_timesteps={self._max_sequence_length}, "
            f"delta_encoded={self._delta_encoded}, "
            f"max_in_flight_items={self._max_in_flight_items}, "
            f"index_within_episode={self._steps}, closed={self._closed}), "
            f"closed: {self._closed}"
        )

    def _error_addresses(self) -> list[str]:
        """The servers this writer writes to, for messages (see _operation_names)."""
        return self._writer._error_addresses()

    # --- writing

    @names_operation("Writer.append")
    def append(self, data: Any) -> None:
        """Adds one timestep: ``data``'s leaves, one per column.

        Every step must have as many leaves as the first, each of the first
        step's dtype and shape (ValueError otherwise; nothing is added).
        Appending alone stores nothing: items (``create_item``) do.

        Example:
            >>> writer.append({'obs': np.zeros(2, np.float32), 'step': 0})  # doctest: +SKIP
        """
        self._append_step(self._checked_step(nest.flatten(data)))

    @names_operation("Writer.append_sequence")
    def append_sequence(self, sequence: Any) -> None:
        """Adds ``T`` timesteps at once: every leaf of ``sequence`` is
        ``[T, ...]`` and step ``t`` is made of the leaves' rows ``t``, as
        ``T`` calls of ``append`` would add them.

        ValueError (and nothing added) if ``sequence`` is empty, a leaf is a
        scalar, or the leaves' first dimensions differ.

        Example:
            >>> writer.append_sequence([np.array([[1, 2, 3], [4, 5, 6]])])  # doctest: +SKIP
        """
        leaves = nest.flatten(sequence)
        if not leaves:
            raise ValueError("AppendSequence called with empty data.")
        arrays = [_step_array(leaf, index) for index, leaf in enumerate(leaves)]
        for index, array in enumerate(arrays):
            if array.ndim == 0:
                raise ValueError(f"AppendSequence called with scalar tensor at index {index}.")
        lengths = {array.shape[0] for array in arrays}
        if len(lengths) > 1:
            shapes = ", ".join(f"{a.dtype}{list(a.shape)}" for a in arrays)
            raise ValueError(
                f"AppendSequence called with tensors of non equal batch dimension: {shapes}."
            )
        if arrays[0].shape[0] == 0:
            self._check_open("Append")
            return
        # Every step has the same leaf types and shapes: checking the first
        # checks them all, so no step is added unless all can be.
        self._checked_step([array[0] for array in arrays])
        for row in range(arrays[0].shape[0]):
            self._append_step([array[row] for array in arrays])

    def _checked_step(self, leaves: list[Any]) -> list[np.ndarray]:
        self._check_open("Append")
        if not leaves:
            raise ValueError("append called with empty data: a step needs at least one value")
        arrays = [_step_array(leaf, index) for index, leaf in enumerate(leaves)]
        spec = self._step_spec
        if spec is None:
            return arrays
        if len(arrays) != len(spec):
            raise ValueError(
                "Number of tensors per timestep was inconsistent. Previously it was "
                f"{len(spec)}, but is now {len(arrays)}."
            )
        for index, (array, (dtype, shape)) in enumerate(zip(arrays, spec, strict=True)):
            if array.shape != shape:
                raise ValueError(
                    f"Unable to concatenate tensors at index {index} due to mismatched shapes. "
                    f"The writer's first step has shape {list(shape)}, but this step has shape "
                    f"{list(array.shape)}."
                )
            if not specs.dtypes_match(dtype, array.dtype):
                raise ValueError(
                    f"Unable to concatenate tensors at index {index} due to mismatched dtypes. "
                    f"The writer's first step has dtype {dtype}, but this step has dtype "
                    f"{array.dtype}."
                )
        return arrays

    def _append_step(self, arrays: list[np.ndarray]) -> None:
        self._writer.append(dict(enumerate(arrays)))
        if self._step_spec is None:
            self._step_spec = [(array.dtype, array.shape) for array in arrays]
        self._steps += 1
        self._open_steps += 1
        if self._open_steps == self._chunk_length:
            # The writer's chunkers completed the chunk: its items are sent.
            self._open_steps = 0
            self._items_on_open_chunk = 0
            self._bound_in_flight()

    @names_operation("Writer.create_item")
    def create_item(self, table: str, num_timesteps: int, priority: float) -> None:
        """Creates an item of the last ``num_timesteps`` steps in ``table``.

        It is sent once the chunk it uses is full, or at ``flush`` or
        ``close``. ValueError (and no item) if ``num_timesteps`` is not in
        ``[1, min(steps appended, max_sequence_length)]``, the priority is NaN
        (or negative for a prioritized table), the table does not exist or
        its signature does not fit the steps.

        Example:
            >>> writer.create_item('my_table', num_timesteps=2, priority=1.0)  # doctest: +SKIP
        """
        self._check_open("CreateItem")
        if (
            isinstance(num_timesteps, bool)
            or not isinstance(num_timesteps, numbers.Integral)
            or num_timesteps < 1
        ):
            raise ValueError(f"num_timesteps ({num_timesteps!r}) must be a positive integer")
        num_timesteps = int(num_timesteps)
        if num_timesteps > self._steps:
            raise ValueError(
                "Argument `num_timesteps` is larger than number of buffered timesteps."
            )
        if num_timesteps > self._max_sequence_length:
            raise ValueError("`num_timesteps` must be <= `max_timesteps`")
        if isinstance(priority, bool) or not isinstance(priority, numbers.Real):
            raise ValueError(f"priority must be a number, got {priority!r}")
        priority = float(priority)
        if math.isnan(priority):
            raise ValueError("`priority` must not be nan.")
        self._check_signature(table, num_timesteps, self._table(table).signature)
        history = self._writer.history
        assert self._step_spec is not None  # steps were appended
        trajectory = [history[index][-num_timesteps:] for index in range(len(self._step_spec))]
        self._writer.create_item(table, priority, trajectory)
        if self._open_steps:
            self._items_on_open_chunk += 1
        else:
            self._bound_in_flight()

    @names_operation("Writer.flush")
    def flush(self) -> None:
        """Sends every waiting item (completing the chunk still filling if
        one needs it) and waits until the server has them."""
        self._check_open("Flush")
        self._flush()

    @names_operation("Writer.close")
    def close(self, retry_on_unavailable: bool = True) -> None:
        """Sends what waits, waits for the server to confirm it, and closes
        the writer. ValueError if it was closed already. With
        ``retry_on_unavailable=False`` a server that is gone or stopping lets
        the writer close without delivering (otherwise its error is raised,
        and the writer is closed all the same)."""
        if self._closed:
            raise ValueError("close() has already been called on Writer.")
        self._closed = True
        try:
            self._flush()
        except (ConnectionError, CancelledError):  # the server is gone or stopping
            if retry_on_unavailable:
                raise
        finally:
            self._writer.close()

    # --- internals

    def _check_open(self, method: str) -> None:
        if self._closed:
            raise RuntimeError(f"Calling method {method} after Close has been called")

    def _flush(self) -> None:
        self._writer.flush()
        if self._items_on_open_chunk:
            # Flushing completed the chunk those items used.
            self._open_steps = 0
            self._items_on_open_chunk = 0

    def _bound_in_flight(self) -> None:
        """Waits while more than max_in_flight_items items are sent (or ready
        to be) and not yet confirmed. Called when no item waits for the chunk
        still filling (those are not in flight, and their chunk stays open)."""
        if self._writer.num_pending_items > self._max_in_flight_items:
            self._writer.flush(block_until_num_items=self._max_in_flight_items)

    def _table(self, name: str) -> TableInfo:
        tables = self._tables
        if tables is None or name not in tables:
            tables = self._tables = self._server_info()
        info = tables.get(name)
        if info is None:
            raise ValueError(
                f"Unable to find signatures for table '{name}' in signature cache. "
                f"Available tables: [{', '.join(sorted(tables))}]."
            )
        return info

    def _check_signature(self, table: str, num_timesteps: int, signature: Any) -> None:
        if signature is None:
            return
        assert self._step_spec is not None
        expected = specs.flat_signature(signature)
        if len(expected) != len(self._step_spec):
            raise ValueError(
                f"Unable to CreateItem in table '{table}' because Append was called with a "
                f"tensor signature inconsistent with table signature. Append was called with "
                f"{len(self._step_spec)} tensors, but table requires {len(expected)} tensors "
                "per entry."
            )
        for index, (spec, (dtype, shape)) in enumerate(zip(expected, self._step_spec, strict=True)):
            whole = specs.shapes_compatible(spec.shape, (num_timesteps, *shape))
            # One step may also match the signature without its time axis.
            step = num_timesteps == 1 and specs.shapes_compatible(spec.shape, shape)
            if not specs.dtypes_match(spec.dtype, dtype) or not (whole or step):
                label = specs.field_labels(signature)[index]
                item_shape = (num_timesteps, *shape)
                raise ValueError(
                    specs.mismatch_text(table, label, dtype, item_shape, spec)
                    + f" (the item's {num_timesteps} appended steps, each {_shape_text(shape)})"
                )


def _shape_text(shape: Any) -> str:
    if shape is None:
        return "<unknown>"
    return "[" + ", ".join("?" if size is None else str(size) for size in shape) + "]"
