"""Reverb's ``PatternDataset``: structured-writer patterns applied to a ``tf.data.Dataset``.

Given a dataset of steps, :class:`PatternDataset` yields the trajectories a
:class:`resound.structured_writer.StructuredWriter` with the same configs
would insert if the steps were appended to it (and ``end_episode`` called
after each step for which ``is_end_of_episode`` is true), in the order it
would insert them, without a server. The configs, their conditions and the
way trajectories are cut are resound's structured writer's own.

Example:
    >>> import tensorflow as tf  # doctest: +SKIP
    >>> from resound import structured_writer as sw
    >>> steps = tf.data.Dataset.from_tensor_slices(
    ...     {'obs': [0, 1, 2, 3], 'last': [False, True, False, True]})  # doctest: +SKIP
    >>> ref = sw.create_reference_step(steps.element_spec)  # doctest: +SKIP
    >>> config = sw.create_config({'obs': ref['obs'][-2], 'next': ref['obs'][-1]},
    ...                           table='unused')  # doctest: +SKIP
    >>> pairs = PatternDataset(steps, [config], respect_episode_boundaries=True,
    ...                        is_end_of_episode=lambda step: step['last'])  # doctest: +SKIP
    >>> [(int(p['obs']), int(p['next'])) for p in pairs]  # doctest: +SKIP
    [(0, 1), (2, 3)]

``PatternDataset`` is a ``tf.data.Dataset`` subclass, built when the name is
first used (this module imports without TensorFlow). It can be created
eagerly or while TensorFlow traces a function (e.g. in ``flat_map``); each
iterator over it has its own writer state. Steps are fed to the writer in
small batches, so an iterator reads a few steps of its input ahead.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from resound import nest
from resound._frameworks import import_tensorflow
from resound.datasets.tf_client import not_converted
from resound.structured_writer import ConditionProto, Config, StructuredWriter, validate_configs

__all__ = ["PatternDataset", "pattern_dataset_with_info"]

# The tf.data.Dataset subclass, made by __getattr__ on first use.
PatternDataset: type

# Steps per batch handed to the writer: enough to spread the cost of a call
# from TensorFlow into Python; fewer for large steps (by static size).
_MAX_STEPS_PER_FEED = 64
_FEED_BYTES = 1 << 20


def __getattr__(name: str) -> Any:
    if name == "PatternDataset":
        cls = _pattern_dataset_class()
        globals()["PatternDataset"] = cls
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _with_buffer_length_conditions(configs: Sequence[Config]) -> list[Config]:
    """Copies of ``configs``, each with the ``buffer_length >= N`` condition
    Reverb's PatternDataset adds to it.

    N is the oldest step read by any node of this config *or of the configs
    before it* (Reverb keeps one running maximum over the list), so a short
    pattern after a long one waits for as many steps as the long one.
    """
    out = []
    history = 0
    for position, config in enumerate(configs):
        if not isinstance(config, Config):
            raise ValueError(
                f"configs[{position}] must be a resound.structured_writer.Config (made with "
                f"create_config), got {type(config).__name__}"
            )
        for node in config.flat:
            start = node.start if node.start is not None else 0
            stop = node.stop if node.stop is not None else 0
            history = max(history, abs(min(start, stop)))
        conditions = list(config.conditions)
        if not any(
            isinstance(c, ConditionProto)
            and c.left == "buffer_length"
            and c.cmp == "ge"
            and not c.inverse
            and c.ge >= history
            for c in conditions
        ):
            conditions.append(ConditionProto(left="buffer_length", cmp="ge", ge=history))
        out.append(dataclasses.replace(config, conditions=conditions))
    return out


def _used_fields(configs: Sequence[Config]) -> list[int]:
    """Flat indices of the step fields a node or a data condition reads."""
    used = {node.flat_source_index for config in configs for node in config.flat}
    used.update(
        condition.flat_source_index
        for config in configs
        for condition in config.conditions
        if condition.left == "flat_source_index"
    )
    return sorted(used)


class _ItemQueue:
    """The writer under the StructuredWriter: the reference to a value is a
    1-tuple holding it (the writer compares references with None, which an
    array would answer elementwise); created items are queued, their table
    and priority unused."""

    def __init__(self) -> None:
        self.items: list[list[Any]] = []

    def append(self, data: dict[int, Any], partial_step: bool = False) -> dict[int, Any]:
        return {index: None if value is None else (value,) for index, value in data.items()}

    def create_item(self, table: str, priority: float, trajectory: list[Any]) -> None:
        self.items.append(trajectory)

    def end_episode(self, clear_buffers: bool = True, timeout_ms: int | None = None) -> None:
        pass

    def flush(self, block_until_num_items: int = 0, timeout_ms: int | None = None) -> None:
        pass

    def close(self) -> None:
        pass


@dataclasses.dataclass(frozen=True)
class _Leaf:
    """How one output leaf travels from the writer back to TensorFlow."""

    dtype: np.dtype
    shape: tuple[int | None, ...] | None
    ragged: bool  # leading dim differs between configs: values + offsets

    def empty(self) -> np.ndarray:
        dims = () if self.shape is None else tuple(d or 0 for d in self.shape)
        # Stacked: [0, *shape]; ragged: the values of no rows, [0, *shape[1:]].
        return np.empty((0, *dims[1:]) if self.ragged else (0, *dims), self.dtype)


def _stack(rows: list[Any], dtype: np.dtype) -> np.ndarray:
    """``np.stack(rows)``, keeping strings as objects (numpy would make
    fixed-width bytes of them, dropping trailing NUL bytes)."""
    if dtype.kind == "O" and rows and not np.ndim(rows[0]):
        out = np.empty(len(rows), object)
        out[:] = rows
        return out
    return np.stack(rows)


def _pack_leaf(leaf: _Leaf, columns: list[Any]) -> list[np.ndarray]:
    """One leaf of ``len(columns)`` items (TrajectoryColumns): ``[values]``
    stacked, or for a ragged leaf ``[values concatenated, offsets]``."""
    if not columns:
        return [leaf.empty(), np.zeros(1, np.int64)] if leaf.ragged else [leaf.empty()]
    values = [
        next(iter(column))[0]
        if column.is_squeezed
        else _stack([ref[0] for ref in column], leaf.dtype)
        for column in columns
    ]
    if not leaf.ragged:
        return [_stack(values, leaf.dtype)]
    offsets = np.cumsum([0, *(len(value) for value in values)], dtype=np.int64)
    return [np.concatenate(values), offsets]


class _PatternState:
    """One iterator's writer: feeds it batches of steps, returns the items."""

    def __init__(
        self,
        configs: list[Config],
        num_fields: int,
        used: list[int],
        leaves: list[_Leaf],
        clear_buffers: bool,
    ) -> None:
        self._queue = _ItemQueue()
        self._writer = StructuredWriter(self._queue, configs)
        self._num_fields = num_fields
        self._used = used
        self._leaves = leaves
        self._clear_buffers = clear_buffers
        self._shapes: list[tuple[int, ...] | None] = [None] * len(used)

    def feed(self, ends: np.ndarray, columns: tuple[np.ndarray, ...]) -> list[np.ndarray]:
        for position, column in enumerate(columns):
            shape = column.shape[1:]
            first = self._shapes[position]
            if first is None:
                self._shapes[position] = shape
            elif shape != first:
                raise ValueError(
                    f"Tensor of wrong shape provided for field {self._used[position]} of the "
                    f"step. Got {list(shape)} but expected {list(first)}."
                )
        rows = [list(column) for column in columns]
        step: list[Any] = [None] * self._num_fields
        writer = self._writer
        used = self._used
        for index, end in enumerate(ends.tolist()):
            for position, field in enumerate(used):
                step[field] = rows[position][index]
            writer.append(step)
            if end:
                writer.end_episode(self._clear_buffers)
        items = self._queue.items
        self._queue.items = []
        # The op's outputs: each leaf's values, then the offsets of the
        # ragged leaves.
        values: list[np.ndarray] = []
        offsets = []
        for position, leaf in enumerate(self._leaves):
            packed = _pack_leaf(leaf, [item[position] for item in items])
            values.append(packed[0])
            offsets.extend(packed[1:])
        return values + offsets


# Writer states of live iterators, by id (an id travels through the dataset
# as a tensor; the state itself stays here).
_states: dict[int, _PatternState] = {}
_states_lock = threading.Lock()
_state_ids = itertools.count(1)


def _state_generator(make_state: Callable[[], _PatternState]) -> Callable[[], Iterator[int]]:
    """A generator function for ``from_generator``: each call (one per
    iterator) registers a new state and yields its id for ever; the state
    goes when TensorFlow drops the generator (the iterator is destroyed)."""

    def generate() -> Iterator[int]:
        state_id = next(_state_ids)
        with _states_lock:
            _states[state_id] = make_state()
        try:
            while True:
                yield state_id
        finally:
            with _states_lock:
                _states.pop(state_id, None)

    return generate


def _feed_size(specs: list[Any]) -> int:
    size = 0
    for spec in specs:
        dims = spec.shape.as_list() if spec.shape.rank is not None else []
        elements = int(np.prod([d or 1 for d in dims], dtype=np.int64))
        size += elements * (spec.dtype.size or 8)
    return int(max(1, min(_MAX_STEPS_PER_FEED, _FEED_BYTES // max(size, 1))))


def _build(
    tf: Any,
    input_dataset: Any,
    configs: Sequence[Config],
    respect_episode_boundaries: bool,
    is_end_of_episode: Callable[..., Any],
) -> tuple[Any, Any]:
    """The pipeline behind a PatternDataset, and its element spec."""
    if not isinstance(input_dataset, tf.data.Dataset):
        raise ValueError(
            f"input_dataset must be a tf.data.Dataset, got {type(input_dataset).__name__}"
        )
    if not isinstance(respect_episode_boundaries, (bool, np.bool_)):
        raise ValueError(
            f"respect_episode_boundaries must be True or False, got {respect_episode_boundaries!r}"
        )
    if not callable(is_end_of_episode):
        raise ValueError(f"is_end_of_episode must be callable, got {is_end_of_episode!r}")
    configs = validate_configs(_with_buffer_length_conditions(list(configs)))

    from resound.structured_writer import infer_signature

    step_spec = input_dataset.element_spec
    num_fields = len(nest.flatten(step_spec))
    signature = infer_signature(configs, step_spec)
    out_specs = [
        tf.TensorSpec(tf.TensorShape(spec.shape), tf.as_dtype(spec.dtype))
        for spec in nest.flatten(signature)
    ]
    leaves = [
        _Leaf(
            np.dtype(spec.dtype.as_numpy_dtype),
            None if spec.shape.rank is None else tuple(spec.shape.as_list()),
            spec.shape.rank is not None and spec.shape.rank > 0 and spec.shape[0] is None,
        )
        for spec in out_specs
    ]
    used = _used_fields(configs)
    clear_buffers = bool(respect_episode_boundaries)

    def mark(*element: Any) -> tuple[Any, Any]:
        step = element[0] if len(element) == 1 else element
        end = tf.convert_to_tensor(is_end_of_episode(*element))
        if end.dtype != tf.bool or not end.shape.is_compatible_with([]):
            raise ValueError(
                "Invalid `is_end_of_episode`. `is_end_of_episode` must return `bool`, but its "
                f"return type is {tf.TensorSpec(end.shape, end.dtype)}."
            )
        flat = nest.flatten(step)
        return tuple(flat[i] for i in used), tf.ensure_shape(end, [])

    marked = input_dataset.map(mark)
    steps = marked.batch(_feed_size(list(marked.element_spec[0])))

    def make_state() -> _PatternState:
        return _PatternState(configs, num_fields, used, leaves, clear_buffers)

    state_ids = tf.data.Dataset.from_generator(
        _state_generator(make_state), output_signature=tf.TensorSpec([], tf.int64)
    )

    @not_converted
    def feed_py(state_id: Any, ends: Any, *columns: Any) -> list[np.ndarray]:
        with _states_lock:
            state = _states[int(state_id)]
        try:
            return state.feed(ends, columns)
        except ValueError as error:  # TF turns it into InvalidArgumentError
            raise ValueError(f"PatternDataset: {error}") from error

    out_dtypes = [spec.dtype for spec in out_specs]
    out_dtypes += [tf.int64 for leaf in leaves if leaf.ragged]
    batched_shapes = [tf.TensorShape([None]).concatenate(spec.shape) for spec in out_specs]

    @not_converted
    def feed(state_id: Any, batch: Any) -> tuple[Any, ...]:
        """A batch of steps -> the items they complete, stacked (a ragged
        tensor for a leaf whose length differs between configs)."""
        columns, ends = batch
        arrays = tf.numpy_function(
            feed_py, [state_id, ends, *columns], out_dtypes, stateful=True, name="pattern"
        )
        offsets = iter(arrays[len(leaves) :])
        stacked = []
        for leaf, values, shape in zip(leaves, arrays, batched_shapes, strict=False):
            if leaf.ragged:
                values.set_shape(shape[1:])
                splits = next(offsets)
                splits.set_shape([None])
                stacked.append(tf.RaggedTensor.from_row_splits(values, splits, validate=False))
            else:
                values.set_shape(shape)
                stacked.append(values)
        return tuple(stacked)

    @not_converted
    def item(*flat: Any) -> Any:
        return nest.unflatten_as(signature, list(flat))

    items = tf.data.Dataset.zip((state_ids, steps)).map(feed).unbatch().map(item)
    return items, items.element_spec


@functools.cache
def _pattern_dataset_class() -> type:
    tf = import_tensorflow("resound.PatternDataset")

    # tf is a module bound at run time (import_tensorflow), not a name mypy can resolve.
    class PatternDataset(tf.data.Dataset):  # type: ignore[name-defined]
        """A ``tf.data.Dataset`` of the trajectories ``configs`` cut from a dataset of steps.

        Args:
            input_dataset: a dataset of steps (flatten a dataset of episodes first).
            configs: ``resound.structured_writer`` configs (``create_config``);
                all must share the pattern structure and the table, as for
                ``infer_signature``. Each gets the condition ``buffer_length
                >= N`` unless it has one, N being the oldest step read by its
                nodes or by any config before it in the list (as Reverb
                does); the given configs are not modified.
            respect_episode_boundaries: if True, no trajectory spans two
                episodes (the writer's history is cleared at each episode's
                end); if False, trajectories may start in one episode and
                end in the next (step indices still restart at 0).
            is_end_of_episode: ``step -> bool`` tensor, called as
                ``tf.data.Dataset.map`` calls its function; a true value ends
                the episode after that step (and end-of-episode conditions
                are checked for it).

        Raises:
            ValueError: a bad argument or config, or ``is_end_of_episode``
                returns something other than a scalar bool.

        Elements are the patterns' structure of tensors: a field read with
        ``x[-k]`` has the field's shape, one read with ``x[a:b:c]`` gets a
        leading time axis (``None`` where the configs' lengths differ). Reading
        a dataset whose fields change shape raises ``InvalidArgumentError``.

        Example:
            >>> ref = sw.create_reference_step(steps.element_spec)  # doctest: +SKIP
            >>> config = sw.create_config(ref['obs'][-3:], table='unused')  # doctest: +SKIP
            >>> windows = PatternDataset(
            ...     steps, [config], True, lambda s: s['last'])  # doctest: +SKIP
            >>> windows.element_spec  # doctest: +SKIP
            TensorSpec(shape=(3,), dtype=tf.int32, name=None)
        """

        @not_converted
        def __init__(
            self,
            input_dataset: Any,
            configs: Sequence[Config],
            respect_episode_boundaries: bool,
            is_end_of_episode: Callable[..., Any],
        ) -> None:
            self._input_dataset = input_dataset
            self._pipeline, self._element_spec = _build(
                tf, input_dataset, configs, respect_episode_boundaries, is_end_of_episode
            )
            super().__init__(self._pipeline._variant_tensor)

        def _inputs(self) -> list[Any]:
            return [self._pipeline]

        @property
        def element_spec(self) -> Any:
            return self._element_spec

    PatternDataset.__module__ = __name__
    PatternDataset.__qualname__ = "PatternDataset"
    return PatternDataset


@not_converted
def pattern_dataset_with_info(
    input_dataset: Any,
    configs: Sequence[Config],
    respect_episode_boundaries: bool,
    is_end_of_episode: Callable[..., Any],
) -> Any:
    """A :class:`PatternDataset` whose elements are ``ReplaySample(info, data)``,
    ``info`` a ``SampleInfo`` of zeros (uint64, float64, int64, float64,
    int32 scalars), as Reverb's function of the same name.

    Example:
        >>> samples = pattern_dataset_with_info(steps, [config], True,
        ...                                     lambda s: False)  # doctest: +SKIP
        >>> next(iter(samples)).info.key  # doctest: +SKIP
        <tf.Tensor: shape=(), dtype=uint64, numpy=0>
    """
    from resound.replay_sample import ReplaySample, SampleInfo

    tf = import_tensorflow("resound.datasets.tf_patterns")
    dataset = _pattern_dataset_class()(
        input_dataset, configs, respect_episode_boundaries, is_end_of_episode
    )
    dtypes = ("uint64", "float64", "int64", "float64", "int32")

    @not_converted
    def with_info(*data: Any) -> ReplaySample:
        info = SampleInfo(*(tf.zeros([], dtype) for dtype in dtypes))
        return ReplaySample(info=info, data=data[0] if len(data) == 1 else data)

    return dataset.map(with_info)
