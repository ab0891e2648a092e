"""Reverb's ``TFClient``: sample, insert and update priorities from TensorFlow.

Each method builds a TensorFlow op (a ``tf.numpy_function`` that calls a
:class:`resound.Client`), so it runs eagerly, inside ``tf.function``, inside
``tf.data`` functions and in a TF1 graph run by a ``tf.compat.v1.Session``.
TensorFlow is imported when a method is first called, not when this module
is imported.

Example:
    >>> import tensorflow as tf  # doctest: +SKIP
    >>> client = resound.TFClient(f'localhost:{server.port}')  # doctest: +SKIP
    >>> client.insert([tf.constant([1, 2, 3], tf.int8)], tables=tf.constant(['replay']),
    ...               priorities=tf.constant([1.0], tf.float64))  # doctest: +SKIP
    >>> @tf.function
    ... def learn():
    ...     sample = client.sample('replay', [tf.int8])
    ...     client.update_priorities('replay', [sample.info.key], tf.constant([0.5], tf.float64))
    ...     return sample.data[0]  # doctest: +SKIP

Errors raised while the op runs are TensorFlow's ``tf.errors`` classes:
``NotFoundError`` for an unknown table, ``InternalError`` when the sampled
data does not have ``data_dtypes``, ``InvalidArgumentError`` for bad
arguments (and ``DeadlineExceededError``, ``CancelledError``,
``ResourceExhaustedError``, ``UnavailableError`` as the client reports them).
Eagerly the exact class is raised. In graph mode TensorFlow keeps only the
``InvalidArgumentError`` class of an error raised in Python; the others
arrive as ``UnknownError`` whose message names the original class.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np

from resound import nest
from resound._frameworks import import_tensorflow
from resound.errors import (
    CancelledError,
    DeadlineExceededError,
    NotFoundError,
    ResourceExhaustedError,
)
from resound.replay_sample import ReplaySample, SampleInfo

__all__ = ["TFClient"]

_FunctionT = TypeVar("_FunctionT", bound=Callable[..., Any])


def not_converted(function: _FunctionT) -> _FunctionT:
    """Marks ``function`` for TensorFlow's AutoGraph as one of its own
    artifacts, so that ``tf.function`` calls it as it is rather than
    rewriting it (and every function it calls) with logged warnings."""
    # AutoGraph's own marker, an attribute Callable does not declare.
    function.autograph_info__ = frozenset()  # type: ignore[attr-defined]
    return function


# (key, probability, table_size, priority, times_sampled), as Reverb's op.
_INFO_DTYPES = ("uint64", "float64", "int64", "float64", "int32")

# Clients shared by TFClients created with the same shared_name.
_shared_clients: dict[tuple[str, str, str], Any] = {}
_shared_lock = threading.Lock()


def _tf_error_classes(tf: Any) -> dict[str, type[Exception]]:
    """TF error classes by name; InvalidArgumentError also derives from
    ValueError, the one Python error class TF's graph-mode py functions turn
    into INVALID_ARGUMENT (eagerly the exception is raised as is)."""
    classes = getattr(_tf_error_classes, "cache", None)
    if classes is None:

        class InvalidArgumentError(tf.errors.InvalidArgumentError, ValueError):
            """TF's InvalidArgumentError, also a ValueError."""

        InvalidArgumentError.__module__ = __name__
        InvalidArgumentError.__qualname__ = "InvalidArgumentError"

        classes = {
            "InvalidArgumentError": InvalidArgumentError,
            "NotFoundError": tf.errors.NotFoundError,
            "InternalError": tf.errors.InternalError,
            "DeadlineExceededError": tf.errors.DeadlineExceededError,
            "CancelledError": tf.errors.CancelledError,
            "ResourceExhaustedError": tf.errors.ResourceExhaustedError,
            "UnavailableError": tf.errors.UnavailableError,
            "UnknownError": tf.errors.UnknownError,
        }
        _tf_error_classes.cache = classes  # type: ignore[attr-defined]  # a function attribute
    return classes


def _tf_error(tf: Any, kind: str, message: str) -> Exception:
    """A ``tf.errors.<kind>`` carrying ``message`` (graph mode's UnknownError
    message names the class)."""
    return _tf_error_classes(tf)[kind](None, None, message)


def _translate(tf: Any, error: Exception) -> Exception:
    """The TF error for an error of the resound client."""
    if isinstance(error, tf.errors.OpError):
        return error
    if isinstance(error, NotFoundError):  # before ValueError / RuntimeError: it is both
        kind = "NotFoundError"
    elif isinstance(error, DeadlineExceededError):
        kind = "DeadlineExceededError"
    elif isinstance(error, CancelledError):
        kind = "CancelledError"
    elif isinstance(error, ResourceExhaustedError):
        kind = "ResourceExhaustedError"
    elif isinstance(error, ConnectionError):
        kind = "UnavailableError"
    elif isinstance(error, (ValueError, TypeError)):
        kind = "InvalidArgumentError"
    else:
        return _tf_error(tf, "UnknownError", f"{type(error).__name__}: {error}")
    return _tf_error(tf, kind, str(error))


def _run_translating(tf: Any, function: Callable[..., Any]) -> Callable[..., Any]:
    """``function`` raising TF errors instead of resound's."""

    @not_converted
    def run(*args: Any) -> Any:
        try:
            return function(*args)
        except Exception as error:
            raise _translate(tf, error) from error

    return run


def _text(value: Any) -> str:
    """A table name from what a string tensor gives a numpy function."""
    if isinstance(value, np.ndarray):
        value = value.item()
    return value.decode() if isinstance(value, bytes) else str(value)


def _dtype_matches(expected: np.dtype, actual: np.dtype) -> bool:
    if expected.kind == "O":  # tf.string: bytes (or str) arrays
        return actual.kind in "SUO"
    return expected == actual


class TFClient:
    """Calls a resound (or Reverb) server from TensorFlow ops.

    Args:
        server_address: ``'host:port'`` of the server (as ``resound.Client``
            takes it; a server of this process is called directly).
        shared_name: if set, TFClients with the same ``shared_name`` and
            address share one connection.
        name: prefix of the ops' names.
        transport: ``'auto'`` or ``'grpc'``, as ``resound.Client`` (resound only).
        tls: a ``resound.tls.ClientTls`` for a TLS server (resound only).

    Example:
        >>> client = TFClient('localhost:8000')
        >>> client.server_address
        'localhost:8000'
    """

    def __init__(
        self,
        server_address: str,
        shared_name: str | None = None,
        name: str = "reverb",
        *,
        transport: str = "auto",
        tls: Any = None,
    ) -> None:
        from resound.client import Client

        if not isinstance(name, str) or not name:
            raise ValueError(f"name must be a non-empty str, got {name!r}")
        if shared_name is not None and not isinstance(shared_name, str):
            raise ValueError(f"shared_name must be a str or None, got {shared_name!r}")
        self._name = name
        self._server_address = server_address
        if shared_name:
            key = (shared_name, str(server_address), transport)
            with _shared_lock:
                client = _shared_clients.get(key)
                if client is None:
                    client = _shared_clients[key] = Client(
                        server_address, transport=transport, tls=tls
                    )
        else:
            client = Client(server_address, transport=transport, tls=tls)
        self._client = client

    @property
    def server_address(self) -> str:
        """The address given to the constructor."""
        return self._server_address

    @not_converted
    def sample(self, table: Any, data_dtypes: Any, name: str | None = None) -> ReplaySample:
        """An op sampling one item of ``table``; blocks until the table can be sampled.

        As Reverb's op, it returns the item's first timestep (an item written
        by :meth:`insert` or ``Client.insert`` has one), so every column of
        the item must have the same length.

        Args:
            table: the table's name (str or scalar string tensor).
            data_dtypes: the dtypes of the item's columns, in any nest (the
                data comes back in that nest).
            name: the op's name (default ``'<name>_sample'``).

        Returns:
            ``ReplaySample(info=SampleInfo(key uint64, probability float64,
            table_size int64, priority float64, times_sampled int32), data)``
            of tensors; the info fields are scalars, the data shapes unknown.

        Raises (when the op runs):
            tf.errors.NotFoundError: no such table.
            tf.errors.InternalError: the sampled data's dtypes differ from
                ``data_dtypes``.
            tf.errors.InvalidArgumentError: the item has another number of
                columns than ``data_dtypes``, or columns of unequal lengths.

        Example:
            >>> sample = client.sample('replay', [tf.float64])  # doctest: +SKIP
            >>> sample.info.key.dtype, sample.data[0].dtype  # doctest: +SKIP
            (tf.uint64, tf.float64)
        """
        tf = import_tensorflow("resound.TFClient")
        flat_dtypes = [tf.as_dtype(dtype) for dtype in nest.flatten(data_dtypes)]
        expected = [np.dtype(dtype.as_numpy_dtype) for dtype in flat_dtypes]
        info_dtypes = [tf.as_dtype(dtype) for dtype in _INFO_DTYPES]
        client = self._client

        def sample_one(table_name: Any) -> list[Any]:
            table = _text(table_name)
            timestep = next(client.sample(table, 1, emit_timesteps=True))[0]
            columns = list(timestep.data)
            if len(columns) != len(expected):
                raise _tf_error(
                    tf,
                    "InvalidArgumentError",
                    f"The sampled item of table {table!r} has {len(columns)} columns but "
                    f"data_dtypes has {len(expected)}.",
                )
            out: list[Any] = [
                np.uint64(timestep.info.key),
                np.float64(timestep.info.probability),
                np.int64(timestep.info.table_size),
                np.float64(timestep.info.priority),
                np.int32(timestep.info.times_sampled),
            ]
            for index, (column, dtype) in enumerate(zip(columns, expected, strict=True)):
                column = np.asarray(column)
                if not _dtype_matches(dtype, column.dtype):
                    raise _tf_error(
                        tf,
                        "InternalError",
                        f"Column {index} of the item sampled from table {table!r} has dtype "
                        f"{column.dtype} but data_dtypes says {flat_dtypes[index].name}.",
                    )
                out.append(column)
            return out

        with tf.name_scope(name or f"{self._name}_sample"):
            table_tensor = tf.convert_to_tensor(table, tf.string)
            outputs = tf.numpy_function(
                _run_translating(tf, sample_one),
                [table_tensor],
                info_dtypes + flat_dtypes,
                stateful=True,
                name="sample",
            )
        for tensor in outputs[:5]:
            tensor.set_shape([])
        return ReplaySample(
            info=SampleInfo(*outputs[:5]),
            data=nest.unflatten_as(data_dtypes, list(outputs[5:])),
        )

    @not_converted
    def insert(
        self,
        data: Sequence[Any],
        tables: Any,
        priorities: Any,
        name: str | None = None,
    ) -> Any:
        """An op inserting ``data`` as one item (of one timestep) into each table.

        ``tables[i]`` gets an item with priority ``priorities[i]`` (a table
        may be named more than once). Blocks while a rate limiter refuses.

        Args:
            data: the tensors of the item's columns (a list, or any nest).
            tables: rank-1 string tensor of table names.
            priorities: rank-1 float64 tensor, the same shape as ``tables``.
            name: the op's name (default ``'<name>_insert'``).

        Returns:
            The op in graph mode; None eagerly (the insert is done).

        Raises:
            ValueError: ``tables`` is not a rank-1 string tensor, or
                ``priorities`` not a rank-1 float64 tensor, or their shapes
                differ.
            tf.errors.NotFoundError (when the op runs): no such table.

        Example:
            >>> client.insert([tf.constant([1, 2, 3], tf.int8)], tf.constant(['a', 'b']),
            ...               tf.constant([1.0, 2.0], tf.float64))  # doctest: +SKIP
        """
        tf = import_tensorflow("resound.TFClient")
        tables = tf.convert_to_tensor(tables)
        priorities = tf.convert_to_tensor(priorities)
        if tables.dtype != tf.string or tables.shape.rank != 1:
            raise ValueError(
                f"tables must be a string tensor of rank 1, got {tables.dtype.name} of shape "
                f"{tables.shape}"
            )
        if priorities.dtype != tf.float64 or priorities.shape.rank != 1:
            raise ValueError(
                f"priorities must be a float64 tensor of rank 1, got {priorities.dtype.name} "
                f"of shape {priorities.shape}"
            )
        if not tables.shape.is_compatible_with(priorities.shape):
            raise ValueError(
                f"priorities and tables must have the same shape, got {priorities.shape} and "
                f"{tables.shape}"
            )
        client = self._client

        def insert_one(table_names: Any, priority_values: Any, *columns: Any) -> None:
            if table_names.shape != priority_values.shape:
                raise _tf_error(
                    tf,
                    "InvalidArgumentError",
                    f"Tensors `tables` and `priorities` do not match in shape "
                    f"({list(table_names.shape)} vs. {list(priority_values.shape)}).",
                )
            # One client.insert per round of distinct tables: a table named
            # twice gets two items.
            rounds: list[dict[str, float]] = []
            for table_name, priority in zip(table_names, priority_values, strict=True):
                table = _text(table_name)
                for round_ in rounds:
                    if table not in round_:
                        round_[table] = float(priority)
                        break
                else:
                    rounds.append({table: float(priority)})
            for round_ in rounds:
                client.insert(list(columns), round_)

        with tf.name_scope(name or f"{self._name}_insert"):
            flat = [tf.convert_to_tensor(leaf) for leaf in nest.flatten(data)]
            op = tf.numpy_function(
                _run_translating(tf, insert_one),
                [tables, priorities, *flat],
                [],
                stateful=True,
                name="insert",
            )
        return None if tf.executing_eagerly() else op

    @not_converted
    def update_priorities(
        self,
        table: Any,
        keys: Any,
        priorities: Any,
        name: str | None = None,
    ) -> Any:
        """An op setting the priorities of ``keys`` in ``table``; missing keys are ignored.

        Args:
            table: the table's name (str or scalar string tensor).
            keys: rank-1 uint64 tensor (or list) of item keys.
            priorities: rank-1 float64 tensor (or list), one per key.
            name: the op's name (default ``'<name>_update_priorities'``).

        Returns:
            The op in graph mode; None eagerly (the update is done).

        Raises (when the op runs):
            tf.errors.InvalidArgumentError: ``keys`` is not of rank 1, or
                ``keys`` and ``priorities`` differ in shape, or a priority is
                not allowed (NaN, infinite, negative for Prioritized).
            tf.errors.NotFoundError: no such table.

        Example:
            >>> client.update_priorities('replay', sample.info.key[None],
            ...                          tf.constant([2.0], tf.float64))  # doctest: +SKIP
        """
        tf = import_tensorflow("resound.TFClient")
        client = self._client

        def update(table_name: Any, key_values: Any, priority_values: Any) -> None:
            if key_values.ndim != 1:
                raise _tf_error(
                    tf,
                    "InvalidArgumentError",
                    "Tensors `keys` and `priorities` must be of rank 1.",
                )
            if key_values.shape != priority_values.shape:
                raise _tf_error(
                    tf,
                    "InvalidArgumentError",
                    f"Tensors `keys` and `priorities` do not match in shape "
                    f"({list(key_values.shape)} vs. {list(priority_values.shape)}).",
                )
            client.mutate_priorities(_text(table_name), updates=(key_values, priority_values))

        with tf.name_scope(name or f"{self._name}_update_priorities"):
            op = tf.numpy_function(
                _run_translating(tf, update),
                [
                    tf.convert_to_tensor(table, tf.string),
                    tf.convert_to_tensor(keys, tf.uint64),
                    tf.convert_to_tensor(priorities, tf.float64),
                ],
                [],
                stateful=True,
                name="update_priorities",
            )
        return None if tf.executing_eagerly() else op
