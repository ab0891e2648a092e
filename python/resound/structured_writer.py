"""StructuredWriter: items built from static patterns over the recent steps.

A *pattern* names, for every leaf of the items to insert, which field of the
appended steps it reads and which of the most recent steps it takes
(``x[-1]`` the newest value, ``x[-3:]`` the last three, ``x[-5::2]`` every
second of the last five). A :class:`Config` pairs a pattern with a table, a
priority and *conditions* on when to insert (every step, every ``period``
steps, at the end of the episode, when a flag in the data is set, ...). A
:class:`StructuredWriter` appends steps, evaluates every config after each
append and inserts an item for each config whose conditions hold. This is the
writer behind Acme's structured adders (n-step transitions, sequences,
episodes).

Configs are plain dataclasses standing in for Reverb's
``StructuredWriterConfig`` protocol buffer (see :class:`Config`); build them
with :func:`create_reference_step` / :func:`pattern_from_transform`,
:class:`Condition` and :func:`create_config`.

Example:
    >>> from resound import structured_writer as sw
    >>> step = {'obs': None, 'reward': None}
    >>> ref = sw.create_reference_step(step)
    >>> config = sw.create_config(
    ...     pattern={'obs': ref['obs'][-2:], 'reward': ref['reward'][-2]},
    ...     table='transitions',
    ...     conditions=[sw.Condition.step_index() % 2 == 1],
    ... )
    >>> config.flat
    [PatternNode(flat_source_index=0, start=-2, stop=None, step=None), \
PatternNode(flat_source_index=1, start=None, stop=-2, step=None)]
    >>> [config] = sw.prepare_configs([config])  # adds `buffer_length >= 2`
    >>> config.conditions[-1]
    ConditionProto(left='buffer_length', cmp='ge', ge=2)
    >>> sw.required_keep_alive_refs([config])
    2

With a client (``client.structured_writer(configs)``) the writer is used as::

    with client.structured_writer([config]) as writer:
        for t in range(10):
            writer.append({'obs': np.float32(t), 'reward': np.float32(-t)})
        writer.end_episode()
"""

from __future__ import annotations

import dataclasses
import logging
import math
import re
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final, TypeAlias

import numpy as np

from resound import nest
from resound.errors import ReverbError
from resound.specs import TensorSpec
from resound.trajectory_writer import TrajectoryColumn

__all__ = [
    "NO_STRUCTURE",
    "Condition",
    "ConditionProto",
    "Config",
    "ConstantPriorityFn",
    "Pattern",
    "PatternNode",
    "Priority",
    "StructuredWriter",
    "TDError",
    "add_buffer_length_condition",
    "constant_priority_fn",
    "create_config",
    "create_reference_step",
    "infer_signature",
    "pattern_from_transform",
    "prepare_configs",
    "required_keep_alive_refs",
    "td_error",
    "unpack_pattern",
    "validate_config",
]

_log = logging.getLogger(__name__)

_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1


# --------------------------------------------------------------------------
# Config data types (the patterns.proto messages as dataclasses).


@dataclasses.dataclass(frozen=True)
class PatternNode:
    """Which rows of one step field a pattern leaf takes.

    ``flat_source_index`` is the field's position in the flattened step;
    ``start``/``stop``/``step`` are Python slice bounds counted from the end of
    the history (``None`` = unset). ``stop`` alone (``x[-2]``) takes a single,
    squeezed row; with ``start`` (``x[-3:]``, ``x[-3:-1]``, ``x[-5::2]``) it
    takes a sequence, an unset ``stop`` meaning "up to the newest step".

    Example:
        >>> ref = create_reference_step([None, None])
        >>> ref[1][-3:-1]
        PatternNode(flat_source_index=1, start=-3, stop=-1, step=None)
        >>> ref[0][-1]
        PatternNode(flat_source_index=0, start=None, stop=-1, step=None)
    """

    flat_source_index: int
    start: int | None = None
    stop: int | None = None
    step: int | None = None


# The kinds of `left` operand and comparison a condition can have.
_LEFTS: Final = (
    "step_index",
    "steps_since_applied",
    "buffer_length",
    "is_end_episode",
    "flat_source_index",
)
_CMPS: Final = ("eq", "ge", "mod_eq")


@dataclasses.dataclass(frozen=True)
class ConditionProto:
    """A condition on when a config is applied (Reverb's ``Condition`` proto).

    ``left`` is one of ``'step_index'``, ``'steps_since_applied'``,
    ``'buffer_length'``, ``'is_end_episode'`` or ``'flat_source_index'`` (the
    newest value of the step field at ``flat_source_index``, a scalar integer
    or bool). ``cmp`` is ``'eq'`` (``left == eq``), ``'ge'`` (``left >= ge``)
    or ``'mod_eq'`` (``left % mod == eq``); ``inverse`` negates the result.
    Build conditions with :class:`Condition` rather than by hand.

    Example:
        >>> Condition.step_index() % 5 == 0
        ConditionProto(left='step_index', cmp='mod_eq', eq=0, mod=5)
        >>> Condition.steps_since_applied() < 3
        ConditionProto(left='steps_since_applied', cmp='ge', ge=3, inverse=True)
    """

    left: str | None = None
    cmp: str | None = None
    eq: int = 0
    ge: int = 0
    mod: int = 0
    inverse: bool = False
    flat_source_index: int = 0

    # Proto-style presence checks (``cond.buffer_length`` is True iff the
    # condition reads the buffer length), handy for code written for Reverb.
    @property
    def step_index(self) -> bool:
        return self.left == "step_index"

    @property
    def steps_since_applied(self) -> bool:
        return self.left == "steps_since_applied"

    @property
    def buffer_length(self) -> bool:
        return self.left == "buffer_length"

    @property
    def is_end_episode(self) -> bool:
        return self.left == "is_end_episode"

    def __repr__(self) -> str:
        parts = [f"left={self.left!r}"]
        if self.left == "flat_source_index":
            parts.append(f"flat_source_index={self.flat_source_index}")
        parts.append(f"cmp={self.cmp!r}")
        if self.cmp == "ge":
            parts.append(f"ge={self.ge}")
        elif self.cmp in ("eq", "mod_eq"):
            parts.append(f"eq={self.eq}")
        if self.cmp == "mod_eq":
            parts.append(f"mod={self.mod}")
        if self.inverse:
            parts.append("inverse=True")
        return f"ConditionProto({', '.join(parts)})"

    def describe(self) -> str:
        """The condition as an expression, e.g. ``step_index % 5 == 0``."""
        left = (
            f"data[{self.flat_source_index}]"
            if self.left == "flat_source_index"
            else str(self.left)
        )
        if self.cmp == "eq":
            text = f"{left} {'!=' if self.inverse else '=='} {self.eq}"
        elif self.cmp == "mod_eq":
            text = f"{left} % {self.mod} {'!=' if self.inverse else '=='} {self.eq}"
        elif self.cmp == "ge":
            text = f"{left} {'<' if self.inverse else '>='} {self.ge}"
        else:
            text = f"{left} <no comparison>"
        return text


@dataclasses.dataclass(frozen=True)
class ConstantPriorityFn:
    """Every item gets priority ``value``."""

    value: float = 1.0


@dataclasses.dataclass(frozen=True)
class TDError:
    """Priority from the TD errors in the item's column read from a step field.

    ``priority = w * max|x| + (1 - w) * mean|x|`` with ``w =
    max_priority_weight`` and ``x`` the values of the pattern node whose
    ``flat_source_index`` is this ``flat_source_index``.
    """

    max_priority_weight: float
    flat_source_index: int


@dataclasses.dataclass(frozen=True)
class Priority:
    """How a config computes item priorities: exactly one of the two is set.

    Example:
        >>> constant_priority_fn(2.5)
        Priority(constant_fn=ConstantPriorityFn(value=2.5), td_error=None)
    """

    constant_fn: ConstantPriorityFn | None = None
    td_error: TDError | None = None


class _NoStructure:
    """Marker for a config without ``pattern_structure`` (unpacks to a flat list)."""

    _instance: _NoStructure | None = None

    def __new__(cls) -> _NoStructure:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "NO_STRUCTURE"

    def __reduce__(self) -> str:
        return "NO_STRUCTURE"


NO_STRUCTURE: Final = _NoStructure()
"""``Config.pattern_structure`` when unset: :func:`unpack_pattern` returns ``flat``."""


def _default_priority() -> Priority:
    return Priority(constant_fn=ConstantPriorityFn(1.0))


@dataclasses.dataclass
class Config:
    """A StructuredWriter config (Reverb's ``StructuredWriterConfig`` proto).

    Attributes:
        flat: the pattern's leaves, a list of :class:`PatternNode` in
            flattening order.
        pattern_structure: the pattern's nest with ``None`` leaves (or with
            any leaves), used to unflatten ``flat``; :data:`NO_STRUCTURE` if
            unset.
        table: name of the table items are inserted into.
        priority: a :class:`Priority` (constant 1.0 by default).
        conditions: list of :class:`ConditionProto`; all must hold for an item
            to be inserted.

    Example:
        >>> ref = create_reference_step({'a': None})
        >>> config = create_config({'a': ref['a'][-1]}, 'table')
        >>> unpack_pattern(config)
        {'a': PatternNode(flat_source_index=0, start=None, stop=-1, step=None)}
    """

    flat: list[PatternNode] = dataclasses.field(default_factory=list)
    pattern_structure: Any = NO_STRUCTURE
    table: str = ""
    priority: Priority = dataclasses.field(default_factory=_default_priority)
    conditions: list[ConditionProto] = dataclasses.field(default_factory=list)


StructuredWriterConfig = Config  # the proto's name in Reverb
Pattern: TypeAlias = Any
"""A nest (dict, list, tuple, namedtuple) whose leaves are :class:`PatternNode`."""
ReferenceStep: TypeAlias = Any


# --------------------------------------------------------------------------
# Building patterns.


def _check_int(value: Any, what: str) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{what} must be an int, got {value!r} (type {type(value).__name__}).")
    value = int(value)
    if not _INT32_MIN <= value <= _INT32_MAX:
        raise ValueError(f"{what} must fit in int32, got {value}.")
    return value


class _RefNode:
    """A step field in a reference step: indexing it builds a PatternNode."""

    __slots__ = ("_index",)

    def __init__(self, index: int) -> None:
        self._index = index

    def __getitem__(self, key: Any) -> PatternNode:
        if isinstance(key, slice):
            bounds = {}
            for name in ("start", "stop", "step"):
                value = getattr(key, name)
                bounds[name] = None if value is None else _check_int(value, f"slice {name}")
            return PatternNode(self._index, **bounds)
        if isinstance(key, (int, np.integer)) and not isinstance(key, (bool, np.bool_)):
            return PatternNode(self._index, stop=_check_int(key, "index"))
        raise ValueError(f"Key must be int or slice but got {key!r} (type {type(key).__name__}).")

    def __repr__(self) -> str:
        return f"<reference to step field {self._index}>"


def create_reference_step(step_structure: Any) -> ReferenceStep:
    """A structure like ``step_structure`` whose leaves build PatternNodes.

    ``ref[k]`` (an int, e.g. ``-1``) selects one row, ``ref[a:b:c]`` a slice of
    rows, both counted from the newest step.

    Example:
        >>> ref = create_reference_step({'a': None, 'b': {'c': None}})
        >>> ref['b']['c'][-2:]
        PatternNode(flat_source_index=1, start=-2, stop=None, step=None)
    """
    count = len(nest.flatten(step_structure))
    return nest.unflatten_as(step_structure, [_RefNode(i) for i in range(count)])


def pattern_from_transform(
    step_structure: Any, transform: Callable[[ReferenceStep], Pattern]
) -> Pattern:
    """``transform(create_reference_step(step_structure))``.

    Example:
        >>> pattern_from_transform({'x': None}, lambda step: step['x'][-4:])
        PatternNode(flat_source_index=0, start=-4, stop=None, step=None)
    """
    return transform(create_reference_step(step_structure))


def constant_priority_fn(value: float) -> Priority:
    """A priority that is ``value`` for every item.

    Example:
        >>> constant_priority_fn(0.5).constant_fn.value
        0.5
    """
    return Priority(constant_fn=ConstantPriorityFn(float(value)))


def td_error(
    max_priority_weight: float,
    step_structure: Any,
    get_field_from_step_fn: Callable[[Any], Any],
) -> Priority:
    """A priority computed from TD errors stored in a step field.

    ``get_field_from_step_fn`` is called with ``step_structure`` whose leaves
    are their flat indices and must return the index of the TD-error field.
    The item's priority is ``w * max|x| + (1 - w) * mean|x|`` over the values
    ``x`` that the pattern takes from that field (``w = max_priority_weight``).

    Example:
        >>> td_error(0.9, {'obs': None, 'td': None}, lambda step: step['td'])
        Priority(constant_fn=None, td_error=TDError(max_priority_weight=0.9, flat_source_index=1))
    """
    count = len(nest.flatten(step_structure))
    index = get_field_from_step_fn(nest.unflatten_as(step_structure, list(range(count))))
    if isinstance(index, _RefNode):
        index = index._index
    index = _check_int(index, "the field selected by get_field_from_step_fn")
    if not 0 <= index < count:
        raise ValueError(
            f"get_field_from_step_fn must select a leaf of step_structure "
            f"(0 <= index < {count}), got {index}."
        )
    return Priority(td_error=TDError(float(max_priority_weight), index))


def _as_priority(priority: Priority | float | None) -> Priority:
    if priority is None:
        return _default_priority()
    if isinstance(priority, Priority):
        return priority
    if isinstance(priority, (int, float, np.integer, np.floating)) and not isinstance(
        priority, bool
    ):
        return constant_priority_fn(float(priority))
    raise ValueError(
        "priority must be None, a number or a Priority (constant_priority_fn(...) or "
        f"td_error(...)), got {priority!r}."
    )


def _incomplete_condition_error(position: int, builder: _ConditionBuilder) -> ValueError:
    return ValueError(
        f"Condition at position {position} is incomplete: {builder!r} must be compared with "
        "a value, e.g. `Condition.step_index() >= 3` or `Condition.step_index() % 2 == 0`."
    )


def create_config(
    pattern: Pattern,
    table: str,
    conditions: Sequence[ConditionProto] = (),
    priority: Priority | float | None = None,
) -> Config:
    """A config inserting ``pattern`` into ``table`` whenever ``conditions`` hold.

    ``priority`` defaults to a constant 1.0; a number means a constant.
    The buffer-length condition every config needs is added by
    :func:`prepare_configs` (which ``Client.structured_writer`` calls).

    Example:
        >>> ref = create_reference_step([None])
        >>> config = create_config([ref[0][-3:]], 'seq', [Condition.is_end_episode()])
        >>> config.pattern_structure, config.table, config.priority.constant_fn.value
        ([None], 'seq', 1.0)
    """
    flat = nest.flatten(pattern)
    for path, leaf in nest.flatten_with_path(pattern):
        if not isinstance(leaf, PatternNode):
            raise ValueError(
                f"Pattern leaves must be PatternNode (e.g. `create_reference_step(step)"
                f"['obs'][-1]`), got {leaf!r} at path {path!r}."
            )
    conditions = list(conditions)
    for position, condition in enumerate(conditions):
        if isinstance(condition, _ConditionBuilder):
            raise _incomplete_condition_error(position, condition)
    return Config(
        flat=flat,
        pattern_structure=nest.map_structure(lambda _: None, pattern),
        table=table,
        priority=_as_priority(priority),
        conditions=conditions,
    )


def unpack_pattern(config: Config) -> Pattern:
    """The config's pattern as a nest (a flat list without ``pattern_structure``).

    Example:
        >>> ref = create_reference_step({'a': None, 'b': None})
        >>> unpack_pattern(create_config({'x': ref['b'][-1]}, 't'))
        {'x': PatternNode(flat_source_index=1, start=None, stop=-1, step=None)}
    """
    if config.pattern_structure is NO_STRUCTURE:
        return list(config.flat)
    return nest.unflatten_as(config.pattern_structure, list(config.flat))


# --------------------------------------------------------------------------
# Conditions.


def _plus_one(value: Any) -> int:
    value = _check_int(value, "The compared value")
    if value == _INT32_MAX:
        raise ValueError(f"The compared value must be < {_INT32_MAX} for `>` and `<=`.")
    return value + 1


class _ConditionBuilder:
    """Left-hand side of a condition; comparing it yields a ConditionProto."""

    __slots__ = ("_index", "_left", "_mod")

    def __init__(self, left: str, index: int = 0, mod: int | None = None) -> None:
        self._left = left
        self._index = index
        self._mod = mod

    def _make(self, cmp: str, *, eq: int = 0, ge: int = 0, inverse: bool = False) -> ConditionProto:
        return ConditionProto(
            left=self._left,
            cmp=cmp,
            eq=eq,
            ge=ge,
            mod=self._mod or 0,
            inverse=inverse,
            flat_source_index=self._index,
        )

    def _no_mod(self, op: str) -> None:
        if self._mod is not None:
            raise ValueError(
                f"Only `==` and `!=` can follow `% {self._mod}` in a condition, got `{op}`."
            )

    def __mod__(self, mod: int) -> _ConditionBuilder:
        self._no_mod("%")
        return _ConditionBuilder(self._left, self._index, _check_int(mod, "The modulus"))

    def __eq__(self, value: object) -> ConditionProto:  # type: ignore[override]
        value = _check_int(value, "The compared value")
        if self._mod is not None:
            return self._make("mod_eq", eq=value)
        return self._make("eq", eq=value)

    def __ne__(self, value: object) -> ConditionProto:  # type: ignore[override]
        return dataclasses.replace(self == value, inverse=True)

    def __ge__(self, value: int) -> ConditionProto:
        self._no_mod(">=")
        return self._make("ge", ge=_check_int(value, "The compared value"))

    def __gt__(self, value: int) -> ConditionProto:
        self._no_mod(">")
        return self._make("ge", ge=_plus_one(value))

    def __le__(self, value: int) -> ConditionProto:
        self._no_mod("<=")
        return self._make("ge", ge=_plus_one(value), inverse=True)

    def __lt__(self, value: int) -> ConditionProto:
        self._no_mod("<")
        return self._make("ge", ge=_check_int(value, "The compared value"), inverse=True)

    __hash__ = None  # type: ignore[assignment]

    def __bool__(self) -> bool:
        raise TypeError("A condition builder has no truth value; compare it with a value.")

    def __repr__(self) -> str:
        left = (
            f"Condition.data(...)[{self._index}]"
            if self._left == "flat_source_index"
            else (f"Condition.{self._left}()")
        )
        return left if self._mod is None else f"{left} % {self._mod}"


class Condition:
    """Builders of the conditions a config can require.

    Example:
        >>> Condition.step_index() >= 4
        ConditionProto(left='step_index', cmp='ge', ge=4)
        >>> Condition.step_index() % 5 != 0
        ConditionProto(left='step_index', cmp='mod_eq', eq=0, mod=5, inverse=True)
        >>> Condition.is_end_episode()
        ConditionProto(left='is_end_episode', cmp='eq', eq=1)
        >>> Condition.data({'done': None, 'obs': None})['done'] == 1
        ConditionProto(left='flat_source_index', flat_source_index=0, cmp='eq', eq=1)
    """

    @staticmethod
    def step_index() -> _ConditionBuilder:
        """Index (from 0) of the newest step within the episode."""
        return _ConditionBuilder("step_index")

    @staticmethod
    def steps_since_applied() -> _ConditionBuilder:
        """Number of steps since the config last inserted an item (counting this one)."""
        return _ConditionBuilder("steps_since_applied")

    @staticmethod
    def is_end_episode() -> ConditionProto:
        """True only while ``end_episode`` is being called."""
        return ConditionProto(left="is_end_episode", cmp="eq", eq=1)

    @staticmethod
    def data(step_structure: Any) -> Any:
        """``step_structure`` with builders reading the newest value of each field.

        The field must hold scalar integers or bools.
        """
        count = len(nest.flatten(step_structure))
        return nest.unflatten_as(
            step_structure, [_ConditionBuilder("flat_source_index", i) for i in range(count)]
        )


# --------------------------------------------------------------------------
# Validation and the client-side preparation of configs.


def _max_age(node: PatternNode) -> int:
    if node.start is not None:
        return abs(node.start)
    return abs(node.stop) if node.stop is not None else 0


def _config_max_age(config: Config) -> int:
    return max((_max_age(n) for n in config.flat if isinstance(n, PatternNode)), default=0)


def _validate_node(node: Any) -> None:
    if not isinstance(node, PatternNode):
        raise ValueError(f"`flat` must hold PatternNode, got {node!r}.")
    index = _check_int(node.flat_source_index, "`flat_source_index`")
    start, stop, step = node.start, node.stop, node.step
    for name, value in (("start", start), ("stop", stop), ("step", step)):
        if value is not None:
            _check_int(value, f"`{name}`")
    if index < 0:
        raise ValueError(f"`flat_source_index` must be >= 0 but got {index}.")
    if start is None and stop is None:
        raise ValueError("At least one of `start` and `stop` must be specified.")
    if start is not None and start >= 0:
        raise ValueError(f"`start` must be < 0 but got {start}.")
    if stop is not None and stop > 0:
        raise ValueError(f"`stop` must be <= 0 but got {stop}.")
    if start is not None and stop is not None and start >= stop:
        raise ValueError(f"`stop` ({stop}) must be > `start` ({start}) when both are specified.")
    if start is None and stop == 0:
        raise ValueError("`stop` must be < 0 when `start` isn't set but got 0.")
    if step is not None and start is None:
        raise ValueError("`step` must only be set when `start` is set.")
    if step is not None and step <= 0:
        raise ValueError(f"`step` must be > 0 but got {step}.")


def _validate_condition(position: int, condition: Any) -> None:
    if isinstance(condition, _ConditionBuilder):
        raise _incomplete_condition_error(position, condition)
    if not isinstance(condition, ConditionProto):
        raise ValueError(
            f"Condition at position {position} must be a ConditionProto (built with "
            f"`Condition`), got {condition!r}."
        )
    if condition.left is None:
        raise ValueError("Conditions must specify a value for `left`.")
    if condition.left not in _LEFTS:
        raise ValueError(f"Condition `left` must be one of {_LEFTS}, got {condition.left!r}.")
    if condition.left == "flat_source_index":
        index = _check_int(condition.flat_source_index, "Condition `flat_source_index`")
        if index < 0:
            raise ValueError(f"flat_source_index must be >= 0 but got {index}.")
    if condition.cmp is None:
        raise ValueError("Conditions must specify a value for `cmp`.")
    if condition.cmp not in _CMPS:
        raise ValueError(f"Condition `cmp` must be one of {_CMPS}, got {condition.cmp!r}.")
    if condition.cmp == "mod_eq":
        if _check_int(condition.mod, "`mod_eq.mod`") <= 0:
            raise ValueError(f"`mod_eq.mod` must be > 0 but got {condition.mod}.")
        if _check_int(condition.eq, "`mod_eq.eq`") < 0:
            raise ValueError(f"`mod_eq.eq` must be >= 0 but got {condition.eq}.")
    else:
        _check_int(condition.eq if condition.cmp == "eq" else condition.ge, f"`{condition.cmp}`")
    if condition.left == "is_end_episode" and (
        condition.cmp != "eq" or condition.eq != 1 or condition.inverse
    ):
        raise ValueError("Condition must use `eq=1` when using `is_end_episode`.")


def _validate_priority(config: Config) -> None:
    priority = config.priority
    if not isinstance(priority, Priority) or (
        (priority.constant_fn is None) == (priority.td_error is None)
    ):
        raise ValueError(
            "`priority` must be a Priority with exactly one of `constant_fn` and `td_error` "
            f"set, got {priority!r}."
        )
    if priority.constant_fn is not None:
        value = priority.constant_fn.value
        if not isinstance(value, (int, float, np.integer, np.floating)) or not math.isfinite(value):
            raise ValueError(f"The constant priority must be a finite number, got {value!r}.")
        return
    td = priority.td_error
    weight = td.max_priority_weight
    if not isinstance(weight, (int, float, np.integer, np.floating)) or not 0 <= weight <= 1:
        raise ValueError(f"`td_error.max_priority_weight` must be in [0, 1], got {weight!r}.")
    index = _check_int(td.flat_source_index, "`td_error.flat_source_index`")
    if not any(node.flat_source_index == index for node in config.flat):
        raise ValueError(
            f"`td_error.flat_source_index` is {index} but no node of the pattern reads that "
            "field, so there are no TD errors to compute the priority from."
        )


def validate_config(config: Config) -> None:
    """Raises ValueError (naming the problem) unless ``config`` is valid.

    Besides well-formed nodes, conditions and priority, a config must contain
    the condition ``buffer_length >= N`` with ``N`` at least the oldest step
    any node reads (:func:`add_buffer_length_condition` adds it).

    Example:
        >>> ref = create_reference_step([None])
        >>> validate_config(create_config([ref[0][-2]], 't'))
        Traceback (most recent call last):
        ...
        ValueError: Config does not contain the required buffer length condition \
`buffer_length >= 2` (ConditionProto(left='buffer_length', cmp='ge', ge=2)).
    """
    if not isinstance(config, Config):
        raise ValueError(f"Expected a structured_writer.Config, got {type(config).__name__}.")
    if not config.flat:
        raise ValueError("`flat` must not be empty.")
    if not isinstance(config.table, str) or not config.table:
        raise ValueError(f"`table` must be a non-empty str, got {config.table!r}.")
    for node in config.flat:
        _validate_node(node)
    for position, condition in enumerate(config.conditions):
        _validate_condition(position, condition)
    _validate_priority(config)
    max_age = _config_max_age(config)
    if not any(
        c.left == "buffer_length" and c.cmp == "ge" and c.ge >= max_age and not c.inverse
        for c in config.conditions
    ):
        want = ConditionProto(left="buffer_length", cmp="ge", ge=max_age)
        raise ValueError(
            "Config does not contain the required buffer length condition "
            f"`buffer_length >= {max_age}` ({want!r})."
        )


def add_buffer_length_condition(config: Config) -> Config:
    """A copy of ``config`` with ``buffer_length >= max_age`` added if needed.

    ``max_age`` is the oldest step any node reads (``|start|`` or ``|stop|``).
    Nothing is added when a condition with an equal or larger threshold is
    present. ``config`` itself is not modified.

    Example:
        >>> ref = create_reference_step([None])
        >>> add_buffer_length_condition(create_config([ref[0][-3:]], 't')).conditions
        [ConditionProto(left='buffer_length', cmp='ge', ge=3)]
    """
    conditions = list(config.conditions)
    max_age = _config_max_age(config)
    if config.flat and not any(
        isinstance(c, ConditionProto)
        and c.left == "buffer_length"
        and c.cmp == "ge"
        and not c.inverse
        and c.ge >= max_age
        for c in conditions
    ):
        conditions.append(ConditionProto(left="buffer_length", cmp="ge", ge=max_age))
    return dataclasses.replace(config, flat=list(config.flat), conditions=conditions)


def prepare_configs(configs: Iterable[Config]) -> list[Config]:
    """What ``Client.structured_writer`` does to configs before using them.

    Adds the buffer-length condition to each (see
    :func:`add_buffer_length_condition`) and validates it; an invalid config
    raises ``ValueError('Invalid configuration at position i: ...')``.

    Example:
        >>> prepare_configs([Config()])
        Traceback (most recent call last):
        ...
        ValueError: Invalid configuration at position 0: `flat` must not be empty.
    """
    out = []
    for position, config in enumerate(configs):
        try:
            if not isinstance(config, Config):
                raise ValueError(
                    f"Expected a structured_writer.Config, got {type(config).__name__}."
                )
            config = add_buffer_length_condition(config)
            validate_config(config)
        except ValueError as error:
            raise ValueError(f"Invalid configuration at position {position}: {error}") from error
        out.append(config)
    if not out:
        raise ValueError("At least one config must be provided.")
    return out


def required_keep_alive_refs(configs: Iterable[Config]) -> int:
    """How many references per column the underlying TrajectoryWriter must keep.

    The largest ``|min(start, stop)|`` over all nodes (unset reads as 0), and
    at least 1.

    Example:
        >>> ref = create_reference_step({'a': None, 'b': None})
        >>> required_keep_alive_refs([create_config([ref['a'][-4:-1], ref['b'][-2]], 't')])
        4
    """
    need = 1
    for config in configs:
        for node in config.flat:
            start = node.start if node.start is not None else 0
            stop = node.stop if node.stop is not None else 0
            need = max(need, abs(min(start, stop)))
    return need


# --------------------------------------------------------------------------
# Signatures.


def _same_structure(a: Any, b: Any) -> bool:
    if a is NO_STRUCTURE or b is NO_STRUCTURE:
        return a is b
    try:
        nest.assert_same_structure(a, b)
    except (ValueError, TypeError):
        return False
    return len(nest.flatten(a)) == len(nest.flatten(b))


def _node_length(node: PatternNode) -> int:
    stop = node.stop if node.stop is not None else 0
    step = node.step if node.step is not None else 1
    return -(-(stop - node.start) // step)  # ceil


def _leaf_spec(leaf: Any, index: int, path: Any) -> TensorSpec:
    if hasattr(leaf, "shape") and hasattr(leaf, "dtype"):
        return TensorSpec(leaf.shape, leaf.dtype)
    if leaf is None:
        raise ValueError(
            f"step_spec has no shape and dtype for field {index} (path {path!r}) but a config "
            "reads it."
        )
    return TensorSpec.from_value(leaf)


def infer_signature(configs: Sequence[Config], step_spec: Any) -> Any:
    """The table signature (a nest of TensorSpec) of the items ``configs`` insert.

    ``step_spec`` is a step-shaped nest whose leaves have ``.shape`` and
    ``.dtype`` (resound or TF TensorSpecs, numpy arrays). All configs must
    share ``pattern_structure`` and ``table``; per leaf they must agree on the
    dtype and on the shape apart from the leading dimension, which becomes
    ``None`` where they differ. Spec names are the leaf paths joined by ``/``.

    Example:
        >>> import numpy as np
        >>> ref = create_reference_step({'x': None})
        >>> config = create_config({'last4': ref['x'][-4:], 'odd': ref['x'][-5::2]}, 't')
        >>> infer_signature([config], {'x': np.zeros([3], np.float32)})
        {'last4': TensorSpec(shape=(4, 3), dtype=float32, name='last4'), \
'odd': TensorSpec(shape=(3, 3), dtype=float32, name='odd')}
    """
    configs = list(configs)
    if not configs:
        raise ValueError("At least one config must be provided.")
    first = configs[0]
    if any(
        not _same_structure(c.pattern_structure, first.pattern_structure)
        or len(c.flat) != len(first.flat)
        for c in configs[1:]
    ):
        raise ValueError("All configs must have exactly the same pattern_structure.")
    tables = sorted({c.table for c in configs})
    if len(tables) > 1:
        raise ValueError(
            f"All configs must target the same table but provided configs included "
            f"{', '.join(tables)}."
        )
    for config in configs:
        for node in config.flat:
            _validate_node(node)

    flat_step = nest.flatten_with_path(step_spec)
    leaf_specs: dict[int, TensorSpec] = {}

    def source_spec(index: int) -> TensorSpec:
        if index not in leaf_specs:
            if index >= len(flat_step):
                raise ValueError(
                    f"A config reads field {index} of the step but step_spec has only "
                    f"{len(flat_step)} leaves."
                )
            path, leaf = flat_step[index]
            leaf_specs[index] = _leaf_spec(leaf, index, path)
        return leaf_specs[index]

    paths = [path for path, _ in nest.flatten_with_path(unpack_pattern(first))]
    specs = []
    for position, path in enumerate(paths):
        nodes = [c.flat[position] for c in configs]
        sources = [source_spec(node.flat_source_index) for node in nodes]
        dtypes = [s.dtype for s in sources]
        if any(d != dtypes[0] for d in dtypes):
            raise ValueError(
                f"Configs produce trajectories with multiple dtypes at {path!r}. "
                f"Got {[d.name for d in dtypes]}."
            )
        shapes: list[tuple[int | None, ...] | None] = []
        for node, source in zip(nodes, sources, strict=True):
            if source.shape is None:
                shapes.append(None)
            elif node.start is not None:
                shapes.append((_node_length(node), *source.shape))
            else:
                shapes.append(source.shape)
        known = [s for s in shapes if s is not None]
        if len(known) < len(shapes):
            merged = None  # an unknown rank stays unknown
        else:
            rank = len(known[0])
            if any(len(s) != rank for s in known) or (
                rank > 1 and any(s[1:] != known[0][1:] for s in known)
            ):
                raise ValueError(
                    f"Configs produce trajectories with incompatible shapes at {path!r}. "
                    f"Got {[list(s) for s in known]}."
                )
            same = all(s == known[0] for s in known)
            merged = known[0] if same else (None, *known[0][1:])
        specs.append(TensorSpec(merged, dtypes[0], "/".join(str(p) for p in path)))
    return nest.unflatten_as(unpack_pattern(first), specs)


# --------------------------------------------------------------------------
# The writer.

# Codes of the compiled conditions: (left, index, cmp, a, b, inverse).
_STEP_INDEX, _STEPS_SINCE, _BUFFER_LENGTH, _END_EPISODE, _DATA = range(5)
_LEFT_CODES: Final = dict(zip(_LEFTS, range(5), strict=True))
_EQ, _GE, _MOD_EQ = range(3)
_CMP_CODES: Final = dict(zip(_CMPS, range(3), strict=True))

_TD_DTYPES: Final = frozenset(np.dtype(t) for t in (np.float32, np.float64, np.int32, np.int64))


def _condition_value(value: Any, column: int) -> int | str | None:
    """The int a data condition compares, or an error message."""
    if value is None:
        return None
    array = np.asarray(value)
    if array.size != 1:
        return (
            f"Config specified data condition on column {column} which does not contain "
            f"scalar values (got shape {array.shape})."
        )
    if array.dtype.kind not in "iub":
        return (
            f"Config specified data condition on column {column} has invalid data type "
            f"{array.dtype} (integers and bools only)."
        )
    return int(array.reshape(()))


def _td_value(value: Any, column: int) -> float | str | None:
    """The float a TD-error priority reads, or an error message."""
    if value is None:
        return None
    array = np.asarray(value)
    if array.shape != () or array.dtype not in _TD_DTYPES:
        return (
            f"td_error priority needs scalar float32, float64, int32 or int64 values in "
            f"column {column}, got shape {array.shape} and dtype {array.dtype}."
        )
    return float(array)


def _trunc_mod(left: int, mod: int) -> int:
    """C's ``%`` (the result has the sign of ``left``)."""
    remainder = abs(left) % mod
    return -remainder if left < 0 else remainder


class _Plan:
    """A config compiled for fast evaluation, with its per-writer state."""

    __slots__ = (
        "conditions",
        "config",
        "constant",
        "last_applied",
        "last_checked",
        "nodes",
        "steps_since_applied",
        "table",
        "td_node",
        "td_weight",
    )

    def __init__(self, config: Config) -> None:
        self.config = config
        self.table = config.table
        self.conditions = tuple(
            (
                _LEFT_CODES[c.left],
                c.flat_source_index,
                _CMP_CODES[c.cmp],
                c.mod if c.cmp == "mod_eq" else (c.ge if c.cmp == "ge" else c.eq),
                c.eq,
                bool(c.inverse),
            )
            for c in config.conditions
        )
        # Node: (column, first row relative to the end, length, step, squeeze).
        nodes = []
        for node in config.flat:
            if node.start is not None:
                stop = node.stop if node.stop is not None else 0
                nodes.append(
                    (node.flat_source_index, node.start, stop - node.start, node.step or 1, False)
                )
            else:
                nodes.append((node.flat_source_index, node.stop, 1, 1, True))
        self.nodes = tuple(nodes)
        priority = config.priority
        if priority.td_error is not None:
            self.constant = 0.0
            self.td_weight = priority.td_error.max_priority_weight
            self.td_node = next(
                i
                for i, node in enumerate(config.flat)
                if node.flat_source_index == priority.td_error.flat_source_index
            )
        else:
            self.constant = float(priority.constant_fn.value)
            self.td_weight = 0.0
            self.td_node = -1
        self.last_applied: tuple[int, int] | None = None
        self.last_checked: tuple[int, int] | None = None
        self.steps_since_applied = 0


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
        configs = list(configs)
        if not configs:
            raise ValueError("At least one config must be provided.")
        for position, config in enumerate(configs):
            try:
                validate_config(config)
            except ValueError as error:
                raise ValueError(
                    f"Invalid configuration at position {position}: {error}"
                ) from error
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

    @property
    def step_is_open(self) -> bool:
        """True if the most recent ``append`` was partial (``partial_step=True``)."""
        return self._step_is_open

    @property
    def configs(self) -> list[Config]:
        """The configs this writer applies."""
        return list(self._configs)

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
                field's first value.
        """
        flat = nest.flatten(data)
        if self._flat_length is None:
            if self._max_index >= len(flat):
                raise ValueError(
                    f"The configs read field {self._max_index} of the step but the flattened "
                    f"data has only {len(flat)} fields."
                )
            self._flat_length = len(flat)
        elif len(flat) != self._flat_length:
            raise ValueError(
                f"Flattened data has an unexpected length, got {len(flat)} but wanted "
                f"{self._flat_length}."
            )

        # Only the fields some config reads go to the writer, as {flat index:
        # value}: the column paths are (index,) whichever fields are present.
        forward = {i: flat[i] for i in self._used}
        try:
            refs = self._writer.append(forward, partial_step=partial_step)
        except ValueError as error:
            raise self._reword(error, data) from error

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
                    if history[i][-1] is not None:
                        raise ValueError(
                            f"Field {i} got a value from more than one append call in the same "
                            "step."
                        )
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

    def end_episode(self, clear_buffers: bool = True, timeout_ms: int | None = None) -> None:
        """Inserts the end-of-episode items, flushes and starts a new episode.

        Configs are evaluated once more for the last step with
        ``is_end_episode`` true, then the underlying writer ends its episode
        (flushing all items). With ``clear_buffers=False`` the history is kept
        and later items may span both episodes; step indices restart at 0
        either way.

        Raises:
            DeadlineExceededError: the flush did not finish within
                ``timeout_ms``; the items keep being sent and the episode is
                not ended (call ``end_episode`` again).
        """
        self._apply_configs(True)
        self._writer.end_episode(clear_buffers, timeout_ms=timeout_ms)
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
