"""Building patterns and configs: reference steps, priorities, create_config."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from resound import nest
from resound.structured_writer._conditions import _ConditionBuilder, _incomplete_condition_error
from resound.structured_writer._config import (
    NO_STRUCTURE,
    ConditionProto,
    Config,
    ConstantPriorityFn,
    Pattern,
    PatternNode,
    Priority,
    ReferenceStep,
    TDError,
    _check_int,
    _default_priority,
)


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
        >>> from resound.structured_writer import Condition
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
