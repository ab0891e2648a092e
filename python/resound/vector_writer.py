"""``VectorWriter``: one call writes a step of each of N parallel environments.

A vectorized environment (gymnasium's ``VectorEnv``, EnvPool, a JAX batch of
environments) hands over N steps at a time, each field with a leading axis
of N. With one ``TrajectoryWriter`` per environment, each step costs N
Python-level calls; a ``VectorWriter`` takes the whole batch in one call and
creates the items of all N environments in one more::

    with client.vector_writer(num_envs=16, max_sequence_length=2) as writer:
        observation = env.reset()
        while training:
            action = policy(observation)
            writer.append({"observation": observation, "action": action})
            writer.create_items("replay", priority=1.0, length=2)
            observation, reward, done, info = env.step(action)
            writer.end_episodes(done)  # those environments start new episodes

Each environment's steps and items are what a writer of its own would make:
its items slice its own newest steps, within its current episode, and its
chunks belong to its own episodes (so ``TableInfo.num_episodes``, sampling,
checkpoints and several tables work as with any writer). ``create_items``
makes an item for every selected environment that has at least ``length``
steps in its episode; environments with fewer are left out.

Items are inserted once the chunks holding their steps are complete: a chunk
completes after ``max_chunk_length`` steps, when its episode ends, and on
``flush()``. A table whose rate limiter holds items back holds them in the
writer; past ``max_in_flight_items`` of them, ``append`` and ``create_items``
wait (this is how a writer is throttled). ``flush()`` waits until every item
created so far is in its table.

Embedded (``Server(..., listen=False)``, ``server.in_process_client()``,
``Client(server)``), the work runs in the C++ core: about one microsecond
per environment step (``bench/bench_vector_writer.py``). Over gRPC and with
several servers the same API runs one trajectory writer per environment.

Example:
    >>> import numpy as np
    >>> import resound
    >>> server = resound.Server([resound.Table.queue("q", 100)], listen=False)
    >>> client = server.in_process_client()
    >>> with client.vector_writer(num_envs=4, max_sequence_length=2) as writer:
    ...     for _ in range(3):
    ...         writer.append({"obs": np.zeros((4, 3), np.float32)})
    ...         made = writer.create_items("q", priority=1.0, length=2)
    >>> client.server_info()["q"].current_size
    8
"""

from __future__ import annotations

import functools
import math
import operator
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, cast

import numpy as np
import numpy.typing as npt

from resound import _core, nest, wait_warnings
from resound.errors import DeadlineExceededError
from resound.table import shared_chunk_store

if TYPE_CHECKING:
    from resound._transport.protocol import ServerTransport
    from resound.trajectory_writer import TrajectoryWriter

__all__ = ["VectorWriter"]

_Method = TypeVar("_Method", bound=Callable[..., Any])

# Waits for a rate limiter run in slices this long, so that Ctrl-C is seen.
_WAIT_SLICE_SECONDS = 0.1
# Steps per chunk when not given: fewer, larger chunks cost less per step
# (a chunk is the unit of bookkeeping), at the price of items becoming
# sampleable up to this many steps after they are created.
_DEFAULT_CHUNK_LENGTH = 16


def _locked(method: _Method) -> _Method:
    """Runs ``method`` under the writer's lock. The C++ writer waits for a
    table without the GIL; a second thread calling into the same writer then
    waits here (without the GIL too) rather than in C++ holding the GIL,
    which would stop the thread that could make room in the table.

    The per-step calls (``append``, ``create_items``, ``end_episodes``) take
    the lock themselves with ``with self._lock``: this wrapper's ``*args``
    and ``**kwargs`` cost more than the rest of their Python."""

    @functools.wraps(method)
    def run(self: VectorWriter, *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            return method(self, *args, **kwargs)

    return cast(_Method, run)


def _check_count(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < 1:
        raise ValueError(f"{name} must be >= 1, got {value}")
    return int(value)


class VectorWriter:
    """Writes steps of ``num_envs`` environments at once; see the module doc.

    Create it with ``Client.vector_writer(num_envs, max_sequence_length)``.

    Args:
      transport: the client's transport to one server.
      num_envs: parallel environments; every field of a step has a leading
        axis of this length.
      max_sequence_length: the most steps an item may span.
      max_chunk_length: steps per chunk (default 16).
      max_in_flight_items: items created and not yet in their tables past
        which ``append`` and ``create_items`` wait (default
        ``num_envs * max(max_chunk_length, max_sequence_length) * 2``).
    """

    def __init__(
        self,
        transport: ServerTransport,
        num_envs: int,
        max_sequence_length: int,
        *,
        max_chunk_length: int | None = None,
        max_in_flight_items: int | None = None,
    ) -> None:
        self._num_envs = _check_count(num_envs, "num_envs")
        self._max_sequence_length = _check_count(max_sequence_length, "max_sequence_length")
        chunk_length = (
            _DEFAULT_CHUNK_LENGTH
            if max_chunk_length is None
            else _check_count(max_chunk_length, "max_chunk_length")
        )
        self._max_chunk_length = chunk_length
        if max_in_flight_items is None:
            max_in_flight_items = 2 * self._num_envs * max(chunk_length, self._max_sequence_length)
        self._max_in_flight = _check_count(max_in_flight_items, "max_in_flight_items")
        self._transport = transport
        server = getattr(transport, "server", None)
        self._embedded = server is not None and hasattr(server, "table")
        self._core: Any = None  # the core writer, from the first step's formats
        self._tables: dict[str, Any] = {}
        self._per_env: list[TrajectoryWriter] | None = None
        self._structure: Any = None
        # A flat dict step's leaves in its sorted keys' order: the fast path.
        self._get_leaves: Callable[[dict[Any, Any]], Any] | None = None
        self._formats: list[tuple[np.dtype[Any], tuple[int, ...]]] = []
        self._paths: list[Any] = []
        self._one = np.ones(1)
        self._closed = False
        self._lock = threading.RLock()  # close() flushes under it

    # --- properties

    @property
    def num_envs(self) -> int:
        return self._num_envs

    @property
    def max_sequence_length(self) -> int:
        return self._max_sequence_length

    @property
    def episode_steps(self) -> npt.NDArray[np.int64]:
        """Steps in each environment's current episode."""
        if self._core is not None:
            return np.asarray(self._core.episode_steps, np.int64)
        if self._per_env is not None:
            return np.asarray([w.episode_steps for w in self._per_env], np.int64)
        return np.zeros(self._num_envs, np.int64)

    @property
    def num_in_flight(self) -> int:
        """Items created and not yet in their tables."""
        if self._core is not None:
            return int(self._core.num_queued)
        if self._per_env is not None:
            return sum(w.num_pending_items for w in self._per_env)
        return 0

    # --- writing

    def append(self, step: Any) -> None:
        """Appends one step to each environment's episode.

        ``step`` is a nest (dict, tuple, list, namedtuple) of arrays, each
        with a leading axis of ``num_envs``: row ``i`` is environment
        ``i``'s step. The first call fixes the structure, dtypes and shapes;
        later steps must match them (ValueError naming the field otherwise).
        """
        with self._lock:  # as _locked does
            core = self._core
            if core is None:  # the first step, closed (close() drops the core) or over gRPC
                self._append_slow(step)
                return
            leaves = self._leaves(step)
            try:
                queued = core.append(leaves)
            except TypeError:
                # A leaf is not a C-contiguous array of its field's dtype and
                # shape, and the core appended nothing: convert it, or raise
                # the error naming the field.
                queued = core.append(self._coerced(leaves))
            self._wait_if_over(queued, "append")

    def create_items(
        self,
        table: str,
        priority: float | npt.ArrayLike = 1.0,
        *,
        length: int | None = None,
        envs: npt.ArrayLike | None = None,
    ) -> int:
        """Creates an item of each selected environment's newest ``length``
        steps (default ``max_sequence_length``) for ``table``; returns how
        many were created.

        Args:
          table: the table's name.
          priority: one priority, or one per environment.
          length: steps per item, 1 to ``max_sequence_length``.
          envs: which environments (a bool mask of ``num_envs``, or indices);
            default all. Environments with fewer than ``length`` steps in
            their episode are skipped.
        """
        with self._lock:  # as _locked does
            core = self._core
            if core is None:  # else open: close() drops the core
                self._check_open()
            if not isinstance(table, str):
                raise TypeError(f"table must be a str, got {type(table).__name__}")
            if length is None:
                length = self._max_sequence_length
            elif type(length) is not int or not 1 <= length <= self._max_sequence_length:
                length = self._check_length(length)
            priorities = (
                self._one
                if type(priority) is float and priority == 1.0
                else self._priorities(priority)
            )
            mask = None if envs is None else self._mask(envs)
            if core is None:
                return self._create_items_per_env(table, length, priorities, mask)
            try:
                table_core = self._tables[table]
            except KeyError:
                table_core = self._table(table)
            created: int
            created, queued = core.create_items(table_core, length, priorities, mask)
            self._wait_if_over(queued, "create_items")
            return created

    def end_episodes(self, envs: npt.ArrayLike | None = None) -> None:
        """Ends the episodes of the selected environments (a bool mask such
        as a vector environment's ``done``, or indices; default all): their
        next steps begin new episodes, and their items' chunks complete."""
        with self._lock:  # as _locked does
            core = self._core
            if core is None:  # else open: close() drops the core
                self._check_open()
            mask = None if envs is None else self._mask(envs)
            if core is not None:
                self._wait_if_over(core.end_episodes(mask), "end_episodes")
            elif self._per_env is not None:
                for env, writer in enumerate(self._per_env):
                    if mask is None or mask[env]:
                        writer.end_episode(clear_buffers=True)

    @_locked
    def flush(self, timeout_ms: int | None = None) -> None:
        """Waits until every item created so far is in its table; raises
        DeadlineExceededError after ``timeout_ms`` (None: no limit)."""
        self._check_open()
        deadline = None if timeout_ms is None else time.monotonic() + timeout_ms / 1000
        if self._core is not None:
            self._core.complete_chunks()
            self._wait_until(0, deadline, "flush")
        elif self._per_env is not None:
            for writer in self._per_env:
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                writer.flush(timeout_ms=None if left is None else int(left * 1000))

    @_locked
    def close(self) -> None:
        """Flushes and closes the writer; idempotent."""
        if self._closed:
            return
        try:
            self.flush()
        finally:
            self._closed = True
            if self._per_env is not None:
                for writer in self._per_env:
                    writer.close()
            self._core = None

    def __enter__(self) -> VectorWriter:
        return self

    def __exit__(self, exc_type: Any, exc: Any, traceback: Any) -> None:
        if exc_type is None:
            self.close()
        else:
            # Do not wait on a table after an error: drop what is queued.
            self._closed = True
            self._core = None
            if self._per_env is not None:
                for writer in self._per_env:
                    writer.close()

    def __repr__(self) -> str:
        return (
            f"VectorWriter(num_envs={self._num_envs}, "
            f"max_sequence_length={self._max_sequence_length}, "
            f"max_chunk_length={self._max_chunk_length}, in_flight={self.num_in_flight})"
        )

    # --- internals

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("the VectorWriter is closed")

    def _check_length(self, length: Any) -> int:
        if isinstance(length, bool) or not isinstance(length, (int, np.integer)):
            raise TypeError(f"length must be an int, got {type(length).__name__}")
        if not 1 <= length <= self._max_sequence_length:
            raise ValueError(
                f"length must be in [1, max_sequence_length={self._max_sequence_length}], "
                f"got {length}"
            )
        return int(length)

    def _priorities(self, priority: Any) -> npt.NDArray[np.float64]:
        if isinstance(priority, (int, float)) and not isinstance(priority, bool):
            if priority == 1.0:
                return self._one
            if not math.isfinite(priority):
                raise ValueError(f"priority must be finite, got {priority}")
            return np.array([priority], np.float64)
        values = np.asarray(priority, np.float64).reshape(-1)
        if values.size not in (1, self._num_envs):
            raise ValueError(
                f"priority must be one value or one per environment ({self._num_envs}), "
                f"got {values.size}"
            )
        if not np.isfinite(values).all():
            raise ValueError(f"priority must be finite, got {values.tolist()}")
        return values

    def _mask(self, envs: Any) -> npt.NDArray[np.bool_] | None:
        if envs is None:
            return None
        values = np.asarray(envs)
        if values.dtype == np.bool_:
            if values.shape != (self._num_envs,):
                raise ValueError(
                    f"envs as a mask must have shape ({self._num_envs},), got {values.shape}"
                )
            return values
        if values.dtype.kind not in "iu":
            raise TypeError(f"envs must be a bool mask or int indices, got dtype {values.dtype}")
        if values.size and (values.min() < 0 or values.max() >= self._num_envs):
            raise ValueError(
                f"envs indices must be in [0, {self._num_envs}), got {values.reshape(-1).tolist()}"
            )
        mask = np.zeros(self._num_envs, np.bool_)
        mask[values.reshape(-1)] = True
        return mask

    def _append_slow(self, step: Any) -> None:
        self._check_open()
        if self._structure is None:
            columns = self._first_step(step)
        else:
            columns = self._coerced(self._leaves(step))
        core = self._core
        if core is not None:
            self._wait_if_over(core.append(columns), "append")
        elif self._per_env is not None:
            for env, writer in enumerate(self._per_env):
                writer.append(nest.unflatten_as(self._structure, [c[env] for c in columns]))

    def _leaves(self, step: Any) -> Any:
        """A later step's leaves in the first step's order (a list or tuple),
        as given: the core checks their dtypes and shapes."""
        get_leaves = self._get_leaves
        if get_leaves is not None and type(step) is dict and len(step) == len(self._formats):
            try:
                return get_leaves(step)
            except KeyError:
                pass
        return self._flatten(step)

    def _coerced(self, leaves: Any) -> list[Any]:
        """``leaves`` as C-contiguous arrays of their fields' dtypes and
        shapes, converting what converts; ValueError naming the field if not."""
        leaves = list(leaves)
        for index, (dtype, shape) in enumerate(self._formats):
            leaf = leaves[index]
            if type(leaf) is not np.ndarray or leaf.dtype != dtype or leaf.shape != shape:
                leaves[index] = self._coerce(index, leaf)
            elif not leaf.flags.c_contiguous:
                leaves[index] = np.ascontiguousarray(leaf)
        return leaves

    def _flatten(self, step: Any) -> list[Any]:
        try:
            nest.assert_same_structure(self._structure, step)
        except (TypeError, ValueError) as error:
            raise ValueError(
                f"step does not have the structure of the first step: {error}"
            ) from None
        return nest.flatten(step)

    def _coerce(self, index: int, leaf: Any) -> Any:
        dtype, shape = self._formats[index]
        path = self._paths[index]
        if isinstance(leaf, np.ndarray):
            if leaf.dtype != dtype:
                raise ValueError(
                    f"field {path} is {leaf.dtype.name}, but the first step's was {dtype.name}"
                )
            array = leaf
        else:
            array = np.asarray(leaf)
            if array.dtype != dtype:
                if not np.can_cast(array.dtype, dtype, "same_kind"):
                    raise ValueError(
                        f"field {path} is {array.dtype.name}, but the first step's was {dtype.name}"
                    )
                array = array.astype(dtype)
        if array.shape != shape:
            raise ValueError(
                f"field {path} has shape {list(array.shape)}, but steps of {self._num_envs} "
                f"environments need {list(shape)} (a leading axis of num_envs)"
            )
        return np.ascontiguousarray(array)

    def _first_step(self, step: Any) -> list[Any]:
        flat = nest.flatten_with_path(step)
        if not flat:
            raise ValueError("step must hold at least one field")
        formats = []
        leaves = []
        for path, leaf in flat:
            array = np.ascontiguousarray(leaf)
            if array.dtype == object or array.dtype.kind in "OUSV":
                raise TypeError(
                    f"field {path} is {array.dtype}: a VectorWriter writes numeric and bool fields"
                )
            if array.ndim == 0 or array.shape[0] != self._num_envs:
                raise ValueError(
                    f"field {path} has shape {list(array.shape)}: every field needs a leading "
                    f"axis of num_envs={self._num_envs}"
                )
            formats.append((array.dtype, array.shape))
            leaves.append(array)
        # The core (or the per-environment writers) first: if it refuses the
        # formats (a dtype it cannot hold), the next step is a first step again.
        if self._embedded:
            self._core = _core.VectorWriter(
                shared_chunk_store(),
                self._num_envs,
                [(dtype.str, list(shape[1:])) for dtype, shape in formats],
                self._max_sequence_length,
                self._max_chunk_length,
            )
        else:
            self._per_env = [self._new_env_writer() for _ in range(self._num_envs)]
        self._structure = step
        self._formats = formats
        self._paths = [path for path, _ in flat]
        if type(step) is dict and all(len(path) == 1 for path in self._paths):
            keys = [path[0] for path in self._paths]
            if len(keys) > 1:
                self._get_leaves = operator.itemgetter(*keys)
            else:
                (key,) = keys
                self._get_leaves = lambda step: [step[key]]
        return leaves

    def _new_env_writer(self) -> TrajectoryWriter:
        from resound.trajectory_writer import TrajectoryWriter

        # Chunks as long as the C++ writer's: its keep-alive window covers an
        # item's steps while the chunk of its newest step fills.
        return TrajectoryWriter(
            self._transport,
            self._max_sequence_length + self._max_chunk_length - 1,
            max_chunk_length=self._max_chunk_length,
        )

    def _create_items_per_env(
        self,
        table: str,
        length: int,
        priorities: npt.NDArray[np.float64],
        mask: npt.NDArray[np.bool_] | None,
    ) -> int:
        if self._per_env is None:
            return 0  # nothing appended yet: no environment has a step
        created = 0
        for env, writer in enumerate(self._per_env):
            if (mask is not None and not mask[env]) or writer.episode_steps < length:
                continue
            value = priorities[0] if len(priorities) == 1 else priorities[env]
            trajectory = nest.map_structure(lambda column: column[-length:], writer.history)
            writer.create_item(table, float(value), trajectory)
            created += 1
        return created

    def _table(self, name: str) -> Any:
        table = self._tables.get(name)
        if table is None:
            try:
                table = self._transport.server.table(name)._core  # type: ignore[attr-defined]
            except (KeyError, ValueError) as error:
                raise ValueError(f"table {name!r} is not on the server: {error}") from None
            self._tables[name] = table
        return table

    def _wait_if_over(self, queued: int, call: str) -> None:
        """Waits, after a writing call, while more than max_in_flight_items
        of the writer's items are not in their tables yet."""
        if queued > self._max_in_flight:
            self._wait_until(self._max_in_flight, None, call)

    def _wait_until(self, keep: int, deadline: float | None, call: str) -> None:
        core = self._core
        blocked: wait_warnings.BlockedWait | None = None
        while True:
            core.insert_ready(0.0)
            if core.num_queued <= keep or (core.num_ready == 0 and keep > 0):
                return
            if blocked is None:
                blocked = wait_warnings.BlockedWait(wait_warnings.WRITER_LOGGER, "vector writer")
            if deadline is not None and time.monotonic() >= deadline:
                raise DeadlineExceededError(
                    f"{call}: {core.num_queued} items are still waiting for their tables; "
                    f"{self._why_blocked()}"
                )
            blocked.warn_if_due(self._why_blocked)
            left = (
                _WAIT_SLICE_SECONDS
                if deadline is None
                else min(_WAIT_SLICE_SECONDS, max(0.0, deadline - time.monotonic()))
            )
            core.insert_ready(left)

    def _why_blocked(self) -> str:
        reasons = [t.why_blocked(True) for t in self._tables.values() if not t.can_insert(1)]
        return "; ".join(reasons) or "the tables' rate limiters allowed no insert in time"
