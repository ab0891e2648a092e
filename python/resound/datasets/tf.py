"""Reverb's ``TrajectoryDataset`` and ``TimestepDataset``: tables as ``tf.data.Dataset``\\ s.

Importing this module does not import TensorFlow; constructing a dataset
does (ImportError saying ``pip install tensorflow`` if it is missing).

Each element is a ``ReplaySample(info=SampleInfo(key, probability,
table_size, priority, times_sampled), data)`` with scalar info fields
(uint64, float64, int64, float64, int32) and ``data`` in the structure of
``dtypes``/``shapes`` (lists become tuples, as in Reverb; dicts and
namedtuples are kept). A ``TrajectoryDataset`` element is one whole item; a
``TimestepDataset`` element is one timestep of an item, the item's
timesteps in order. The datasets end (end of sequence, not an error) when a
wait for the rate limiter lasts longer than ``rate_limiter_timeout_ms``, or
after ``max_samples`` items.

Every iterator of a dataset samples with a client of its own, in batches of
``max_in_flight_samples_per_worker`` items through resound's batched sample
path, one batch fetched ahead on a background thread; tf.data splits the
batches into elements, so there is no Python per sample. ``dataset.batch(n)``
cuts the fetched batches into batches of ``n`` directly (the same batches
tf.data's ``batch`` makes, without splitting and stacking every sample). A dataset works
eagerly and when built while tf.data or ``tf.function`` traces a function
(e.g. inside ``tf.data.Dataset.range(n).interleave(...)``, as Acme does), with
servers in this process (called directly) and elsewhere (over gRPC). It runs
Python (through ``tf.numpy_function``), so it cannot be serialized to another
process (tf.data service, SavedModel).

Example:
    >>> import resound as reverb
    >>> dataset = reverb.TrajectoryDataset.from_table_signature(
    ...     'localhost:8000', 'replay', max_in_flight_samples_per_worker=512)  # doctest: +SKIP
    >>> for sample in dataset.batch(256, drop_remainder=True).as_numpy_iterator():  # doctest: +SKIP
    ...     keys = sample.info.key  # uint64 [256]
"""

from __future__ import annotations

import atexit
import functools
import itertools
import threading
import time
import types
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from resound._frameworks import import_tensorflow
from resound.datasets._batch_source import MAX_SAMPLES_PER_FETCH, ColumnSpec, ReplayBatchSource
from resound.replay_sample import ReplaySample, SampleInfo

__all__ = ["TimestepDataset", "TrajectoryDataset"]

_INFO_DTYPE_NAMES = ("uint64", "float64", "int64", "float64", "int32")


class _ReplayDataset:
    """What the two datasets share; a concrete dataset is also a ``tf.data.Dataset``.

    The class itself does not derive from ``tf.data.Dataset`` (that would
    import TensorFlow with this module); constructing one makes an instance
    of a subclass that derives from both, built on first use.
    """

    _emits_timesteps = False

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        del args, kwargs
        tf = import_tensorflow(f"resound.{cls.__name__}")
        if not issubclass(cls, tf.data.Dataset):
            cls = _with_dataset_base(cls, tf.data.Dataset)
        return super().__new__(cls)

    def __init__(
        self,
        server_address: Any,
        table: Any,
        dtypes: Any,
        shapes: Any,
        max_in_flight_samples_per_worker: int,
        num_workers_per_iterator: int = -1,
        max_samples_per_stream: int = -1,
        rate_limiter_timeout_ms: int = -1,
        max_samples: int = -1,
    ) -> None:
        tf = import_tensorflow(f"resound.{type(self).__name__}")
        structure, flat_dtypes, flat_shapes = _structure(tf, dtypes, shapes)
        _check_positive("max_in_flight_samples_per_worker", max_in_flight_samples_per_worker)
        _check_positive("num_workers_per_iterator", num_workers_per_iterator, or_minus_one=True)
        _check_positive("max_samples_per_stream", max_samples_per_stream, or_minus_one=True)
        _check_integer("rate_limiter_timeout_ms", rate_limiter_timeout_ms)
        if rate_limiter_timeout_ms < -1:
            raise ValueError(
                f"rate_limiter_timeout_ms ({rate_limiter_timeout_ms}) must be an integer >= -1"
            )
        _check_positive("max_samples", max_samples, or_minus_one=True)

        self._server_address = server_address
        self._table = table
        self._max_in_flight_samples_per_worker = max_in_flight_samples_per_worker
        self._num_workers_per_iterator = num_workers_per_iterator
        self._max_samples_per_stream = max_samples_per_stream
        self._rate_limiter_timeout_ms = rate_limiter_timeout_ms
        self._max_samples = max_samples

        info_dtypes = [tf.as_dtype(name) for name in _INFO_DTYPE_NAMES]
        self._element_spec_value = ReplaySample(
            info=SampleInfo(*(tf.TensorSpec([], dtype) for dtype in info_dtypes)),
            data=tf.nest.pack_sequence_as(
                structure,
                [tf.TensorSpec(s, d) for s, d in zip(flat_shapes, flat_dtypes, strict=True)],
            ),
        )
        options = _SourceOptions(
            specs=tuple(
                ColumnSpec(np.dtype(d.as_numpy_dtype), _shape_tuple(s))
                for d, s in zip(flat_dtypes, flat_shapes, strict=True)
            ),
            fetch_size=min(max_in_flight_samples_per_worker, MAX_SAMPLES_PER_FETCH),
            timesteps=self._emits_timesteps,
            max_samples=None if max_samples == -1 else max_samples,
            timeout=None if rate_limiter_timeout_ms == -1 else rate_limiter_timeout_ms / 1000,
            in_order=num_workers_per_iterator == 1,
        )
        batches = _batch_dataset(
            tf, server_address, table, options, info_dtypes + flat_dtypes, flat_shapes, structure
        )
        self._fetched_batches = batches
        tf.data.Dataset.__init__(self, batches.unbatch()._variant_tensor)

    @classmethod
    def from_table_signature(
        cls,
        server_address: str,
        table: str,
        max_in_flight_samples_per_worker: int,
        num_workers_per_iterator: int = -1,
        max_samples_per_stream: int = -1,
        rate_limiter_timeout_ms: int = -1,
        get_signature_timeout_secs: int | None = None,
        max_samples: int = -1,
    ) -> Any:
        """A dataset whose dtypes and shapes are the table's signature.

        Raises ValueError if the server has no table ``table`` or the table
        has no signature; DeadlineExceededError if the server does not answer
        within ``get_signature_timeout_secs`` (None: waits).
        """
        tf = import_tensorflow(f"resound.{cls.__name__}")
        from resound.client import Client

        info = Client(server_address).server_info(get_signature_timeout_secs)
        if table not in info:
            raise ValueError(
                f"Server at {server_address} does not contain any table named {table}. "
                f"Found: {', '.join(sorted(info))}."
            )
        signature = info[table].signature
        if not signature:
            raise ValueError(f"Table {table} at {server_address} does not have a signature.")
        return cls(
            server_address=server_address,
            table=table,
            dtypes=tf.nest.map_structure(lambda spec: _tf_dtype(tf, spec.dtype), signature),
            shapes=tf.nest.map_structure(
                lambda spec: tf.TensorShape(_shape_list(spec.shape)), signature
            ),
            max_in_flight_samples_per_worker=max_in_flight_samples_per_worker,
            num_workers_per_iterator=num_workers_per_iterator,
            max_samples_per_stream=max_samples_per_stream,
            rate_limiter_timeout_ms=rate_limiter_timeout_ms,
            max_samples=max_samples,
        )

    @property
    def element_spec(self) -> Any:
        """``ReplaySample(info=SampleInfo(...), data=...)`` of ``tf.TensorSpec``\\ s."""
        return self._element_spec_value

    def batch(
        self,
        batch_size: Any,
        drop_remainder: bool = False,
        num_parallel_calls: Any = None,
        deterministic: Any = None,
        name: str | None = None,
    ) -> Any:
        """``tf.data.Dataset.batch``, the same elements in the same batches,
        cut from the fetched batches (``rebatch``) instead of split into
        samples and stacked again."""
        if num_parallel_calls is not None or deterministic is not None:
            # tf.data.Dataset, which has batch, is a base added at run time
            # (_with_dataset_base).
            return super().batch(  # type: ignore[misc]
                batch_size, drop_remainder, num_parallel_calls, deterministic, name
            )
        return self._fetched_batches.rebatch(batch_size, drop_remainder=drop_remainder, name=name)

    def _inputs(self) -> list[Any]:
        return []


class TrajectoryDataset(_ReplayDataset):
    """A ``tf.data.Dataset`` of whole items sampled from a table (Reverb's).

    Args:
      server_address: ``'host:port'`` of the server (a string or a string
        tensor).
      table: the table to sample from (a string or a string tensor).
      dtypes: the dtypes of an item's data, nested as ``data`` should be.
      shapes: the shapes (``tf.TensorShape``, None for any size), nested as
        ``dtypes``; the time axis of a sequence column first.
      max_in_flight_samples_per_worker: items fetched per request (Reverb's
        rule of thumb: 2-3x the batch size); positive.
      num_workers_per_iterator: positive or -1 (auto). 1, as Reverb asks for
        FIFO tables, keeps the table's order: one request at a time. Otherwise
        (over gRPC) the next request runs ahead of the one being received.
        Each iterator fetches with one thread; interleave several datasets
        for more parallelism.
      max_samples_per_stream: accepted as in Reverb (positive or -1); resound
        opens one request per fetch.
      rate_limiter_timeout_ms: how long a wait for the rate limiter may last
        before the dataset ends; -1 (the default) waits forever.
      max_samples: items an iterator yields before it ends; -1: no limit.

    Raises:
      ValueError: if dtypes and shapes do not share one structure, or an
        argument is out of range.

    Example:
        >>> import tensorflow as tf, resound as reverb  # doctest: +SKIP
        >>> dataset = reverb.TrajectoryDataset(
        ...     'localhost:8000', 'replay',
        ...     dtypes={'obs': tf.float32}, shapes={'obs': tf.TensorShape([None, 3])},
        ...     max_in_flight_samples_per_worker=512)  # doctest: +SKIP
        >>> sample = next(iter(dataset))  # doctest: +SKIP
        >>> sample.data['obs'].shape, sample.info.key.dtype  # doctest: +SKIP
        (TensorShape([10, 3]), tf.uint64)
    """


class TimestepDataset(_ReplayDataset):
    """A ``tf.data.Dataset`` of single timesteps of sampled items (Reverb's).

    The arguments are those of ``TrajectoryDataset``, except that ``shapes``
    (and a signature, with ``from_table_signature``) describe one timestep.
    Every column of an item must have the same number of timesteps; the
    item's timesteps follow each other, each with the item's info.

    Example:
        >>> dataset = reverb.TimestepDataset(
        ...     'localhost:8000', 'replay', dtypes=tf.float32, shapes=tf.TensorShape([3]),
        ...     max_in_flight_samples_per_worker=64)  # doctest: +SKIP
        >>> for step in dataset.batch(10).take(1):  # doctest: +SKIP
        ...     print(step.data.shape)
        (10, 3)
    """

    _emits_timesteps = True


# --- the tf.data pipeline


class _SourceOptions:
    """What each iterator's ReplayBatchSource is made with (all but the address)."""

    def __init__(
        self,
        *,
        specs: tuple[ColumnSpec, ...],
        fetch_size: int,
        timesteps: bool,
        max_samples: int | None,
        timeout: float | None,
        in_order: bool,
    ) -> None:
        self.specs = specs
        self.fetch_size = fetch_size
        self.timesteps = timesteps
        self.max_samples = max_samples
        self.timeout = timeout
        self.in_order = in_order


def _batch_dataset(
    tf: Any,
    server_address: Any,
    table: Any,
    options: _SourceOptions,
    flat_dtypes: list[Any],
    data_shapes: list[Any],
    structure: Any,
) -> Any:
    """A dataset of batches: each iterator opens a source (init), takes its
    batches (next; StopIteration ends it) and closes it when destroyed."""
    from tensorflow.python.data.ops.from_generator_op import _GeneratorDataset

    batch_shapes = [tf.TensorShape([None])] * len(SampleInfo._fields) + [
        tf.TensorShape([None]).concatenate(shape) for shape in data_shapes
    ]
    batch_spec = _pack_replay_sample(
        tf,
        structure,
        [tf.TensorSpec(s, d) for s, d in zip(batch_shapes, flat_dtypes, strict=True)],
    )

    def init(address: Any, table_name: Any) -> Any:
        open_source = functools.partial(_open_source, options)
        return tf.numpy_function(open_source, [address, table_name], tf.int64)

    def next_batch(source_id: Any) -> Any:
        flat = tf.numpy_function(_next_batch, [source_id], flat_dtypes)
        for tensor, shape in zip(flat, batch_shapes, strict=True):
            tensor.set_shape(shape)
        return _pack_replay_sample(tf, structure, flat)

    def finalize(source_id: Any) -> Any:
        return tf.numpy_function(_close_source, [source_id], tf.int64)

    init_args = (
        tf.convert_to_tensor(server_address, tf.string),
        tf.convert_to_tensor(table, tf.string),
    )
    return _GeneratorDataset(init_args, init, next_batch, finalize, batch_spec)


def _pack_replay_sample(tf: Any, structure: Any, flat: list[Any]) -> ReplaySample:
    count = len(SampleInfo._fields)
    return ReplaySample(
        info=SampleInfo(*flat[:count]),
        data=tf.nest.pack_sequence_as(structure, list(flat[count:])),
    )


# Every open source by id: the ids travel through the graph as int64.
_SOURCES: dict[int, ReplayBatchSource] = {}
_SOURCE_IDS = itertools.count(1)
# Sources whose next batch tf.data is fetching, with how many calls, and
# those that ended (tf.data calls _close_source next). Changes are notified
# on _SOURCES_CHANGED, whose lock guards all three.
_CALLS: dict[int, int] = {}
_ENDED: set[int] = set()
_SOURCES_CHANGED = threading.Condition()


def _open_source(options: _SourceOptions, address: bytes, table: bytes) -> np.ndarray:
    from resound.client import Client

    source = ReplayBatchSource(
        Client(_text(address)),
        _text(table),
        options.specs,
        fetch_size=options.fetch_size,
        timesteps=options.timesteps,
        max_samples=options.max_samples,
        timeout=options.timeout,
        in_order=options.in_order,
    )
    with _SOURCES_CHANGED:
        source_id = next(_SOURCE_IDS)
        _SOURCES[source_id] = source
    return np.int64(source_id)


def _next_batch(source_id: np.ndarray) -> list[np.ndarray]:
    key = int(source_id)
    with _SOURCES_CHANGED:
        source = _SOURCES[key]
        _CALLS[key] = _CALLS.get(key, 0) + 1
        _SOURCES_CHANGED.notify_all()
    try:
        return source.next_batch()
    except StopIteration:
        with _SOURCES_CHANGED:
            _ENDED.add(key)
        raise
    finally:
        with _SOURCES_CHANGED:
            _CALLS[key] -= 1
            if not _CALLS[key]:
                del _CALLS[key]
            _SOURCES_CHANGED.notify_all()


def _close_source(source_id: np.ndarray) -> np.ndarray:
    key = int(source_id)
    with _SOURCES_CHANGED:
        source = _SOURCES.pop(key, None)
        _ENDED.discard(key)
        _SOURCES_CHANGED.notify_all()
    if source is not None:
        source.close()
    return np.int64(0)


def _close_open_sources() -> None:
    """At interpreter exit (atexit), while threads still run: ends every open
    source, then waits until tf.data is done calling into them.

    A tf.data thread (a prefetch) that calls ``_next_batch`` or
    ``_close_source`` once finalization has begun waits forever for the
    interpreter, and the iterator's destructor, which waits for that thread,
    then keeps the process from exiting (or TensorFlow aborts it). Once the
    sources are closed, each such thread gets StopIteration at its next call
    and closes the source; the wait ends when no call is under way, no ended
    source is left unclosed, and no new call came for a grace period (a
    thread between two calls makes the next within moments)."""
    with _SOURCES_CHANGED:
        sources = list(_SOURCES.values())
    deadline = time.monotonic() + _CLOSE_AT_EXIT_SECONDS
    for source in sources:
        source.close(timeout=max(0.0, deadline - time.monotonic()))
    with _SOURCES_CHANGED:
        while (left := deadline - time.monotonic()) > 0:
            if _CALLS or _ENDED & _SOURCES.keys():
                _SOURCES_CHANGED.wait(left)
            elif not _SOURCES_CHANGED.wait(min(left, _EXIT_GRACE_SECONDS)):
                return


# How long exit waits for the sources and tf.data's threads, in all.
_CLOSE_AT_EXIT_SECONDS = 2.0
_EXIT_GRACE_SECONDS = 0.05
atexit.register(_close_open_sources)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


# --- arguments


def _with_dataset_base(cls: type, dataset_base: type) -> type:
    """``cls`` with ``tf.data.Dataset`` as a further base (made once per class)."""
    made = cls.__dict__.get("_tf_dataset_class")
    if made is None:
        made = types.new_class(cls.__name__, (cls, dataset_base))
        made.__module__ = cls.__module__
        made.__qualname__ = cls.__qualname__
        made.__doc__ = cls.__doc__
        cls._tf_dataset_class = made  # type: ignore[attr-defined]  # a cache on any class
    return made


def _structure(tf: Any, dtypes: Any, shapes: Any) -> tuple[Any, list[Any], list[Any]]:
    """(the data structure with lists as tuples, flat tf dtypes, flat shapes)."""
    structure = _lists_to_tuples(dtypes)
    try:
        flat_shapes = _flatten_up_to(structure, shapes)
    except ValueError as error:
        raise ValueError(
            f"dtypes and shapes must have the same structure: {error} "
            f"(dtypes={dtypes!r}, shapes={shapes!r})"
        ) from None
    flat_dtypes = []
    for dtype in tf.nest.flatten(structure):
        try:
            flat_dtypes.append(_tf_dtype(tf, dtype))
        except (TypeError, ValueError) as error:
            raise ValueError(f"dtypes: {dtype!r} is not a dtype ({error})") from None
    converted = []
    for shape in flat_shapes:
        try:
            converted.append(tf.TensorShape(_shape_list(shape)))
        except (TypeError, ValueError) as error:
            raise ValueError(f"shapes: {shape!r} is not a shape ({error})") from None
    return structure, flat_dtypes, converted


def _lists_to_tuples(structure: Any) -> Any:
    """``structure`` with every list a tuple (tf.data's structures do not take lists)."""
    if isinstance(structure, Mapping):
        items = [(key, _lists_to_tuples(value)) for key, value in structure.items()]
        kind: Callable[..., Any] = type(structure)  # a Mapping subclass's own constructor
        return dict(items) if type(structure) is dict else kind(items)
    if isinstance(structure, (list, tuple)):
        values = [_lists_to_tuples(value) for value in structure]
        if hasattr(structure, "_fields"):  # a namedtuple
            return type(structure)(*values)
        return tuple(values)
    return structure


def _flatten_up_to(structure: Any, value: Any, path: str = "") -> list[Any]:
    """The parts of ``value`` at the leaves of ``structure`` (in tf.nest's
    order: mappings by sorted key), so shapes may be written as lists."""
    if not _is_nested(structure):
        return [value]
    if isinstance(structure, Mapping):
        if not isinstance(value, Mapping) or set(value) != set(structure):
            raise ValueError(f"at {path or 'the top'}: {value!r} does not match {structure!r}")
        return [
            leaf
            for key in sorted(structure)
            for leaf in _flatten_up_to(structure[key], value[key], f"{path}[{key!r}]")
        ]
    if not isinstance(value, (list, tuple)) or len(value) != len(structure):
        raise ValueError(f"at {path or 'the top'}: {value!r} does not match {structure!r}")
    return [
        leaf
        for index, (inner, part) in enumerate(zip(structure, value, strict=True))
        for leaf in _flatten_up_to(inner, part, f"{path}[{index}]")
    ]


def _is_nested(value: Any) -> bool:
    return isinstance(value, (Mapping, list, tuple))


def _tf_dtype(tf: Any, dtype: Any) -> Any:
    if isinstance(dtype, tf.dtypes.DType):
        return dtype
    if isinstance(dtype, (str, type)) and dtype in (str, bytes, "string"):
        return tf.string
    numpy_dtype = np.dtype(dtype)
    if numpy_dtype.kind in "SUO":
        return tf.string
    return tf.as_dtype(numpy_dtype)


def _shape_list(shape: Any) -> list[int | None] | None:
    """A shape (TensorShape, tuple, list, None) as TensorShape takes it."""
    if shape is None:
        return None
    as_list = getattr(shape, "as_list", None)
    if as_list is not None:
        try:
            return as_list()
        except ValueError:  # unknown rank
            return None
    return [None if d is None else int(d) for d in shape]


def _shape_tuple(shape: Any) -> tuple[int | None, ...] | None:
    dims = _shape_list(shape)
    return None if dims is None else tuple(dims)


def _check_integer(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an integer, got {value!r}")


def _check_positive(name: str, value: Any, *, or_minus_one: bool = False) -> None:
    _check_integer(name, value)
    if value >= 1 or (or_minus_one and value == -1):
        return
    allowed = "a positive integer or -1" if or_minus_one else "a positive integer"
    raise ValueError(f"{name} ({value}) must be {allowed}")
