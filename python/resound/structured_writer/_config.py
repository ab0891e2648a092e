"""The config data types of the structured writer: Reverb's patterns.proto
messages (``StructuredWriterConfig`` and its parts) as dataclasses."""

from __future__ import annotations

import dataclasses
from typing import Any, Final, TypeAlias

import numpy as np

_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1


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


def _check_int(value: Any, what: str) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{what} must be an int, got {value!r} (type {type(value).__name__}).")
    value = int(value)
    if not _INT32_MIN <= value <= _INT32_MAX:
        raise ValueError(f"{what} must fit in int32, got {value}.")
    return value
