"""Validation of configs and their client-side preparation (the buffer-length
condition, the keep-alive the underlying TrajectoryWriter needs)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable
from typing import Any

import numpy as np

from resound.structured_writer._conditions import _ConditionBuilder, _incomplete_condition_error
from resound.structured_writer._config import (
    _CMPS,
    _LEFTS,
    ConditionProto,
    Config,
    PatternNode,
    Priority,
    _check_int,
)


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
    assert td is not None  # exactly one of constant_fn and td_error is set (above)
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
        >>> from resound.structured_writer import create_config, create_reference_step
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
        >>> from resound.structured_writer import create_config, create_reference_step
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


def validate_configs(configs: Iterable[Config]) -> list[Config]:
    """``configs`` as a list, each checked by :func:`validate_config`; raises
    ``ValueError('Invalid configuration at position i: ...')`` for the first
    invalid one, and ``ValueError`` if there is none at all.

    Example:
        >>> validate_configs([])
        Traceback (most recent call last):
        ...
        ValueError: At least one config must be provided.
    """
    configs = list(configs)
    if not configs:
        raise ValueError("At least one config must be provided.")
    for position, config in enumerate(configs):
        try:
            validate_config(config)
        except ValueError as error:
            raise ValueError(f"Invalid configuration at position {position}: {error}") from error
    return configs


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
        >>> from resound.structured_writer import create_config, create_reference_step
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
