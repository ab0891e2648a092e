"""Conditions on when a config inserts: the ``Condition`` builders."""

from __future__ import annotations

import dataclasses
from typing import Any

from resound import nest
from resound.structured_writer._config import _INT32_MAX, ConditionProto, _check_int


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

    # == and != build conditions (Reverb's DSL), as numpy's compare arrays.
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

    __hash__ = None  # type: ignore[assignment]  # unhashable: == does not compare

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


def _incomplete_condition_error(position: int, builder: _ConditionBuilder) -> ValueError:
    return ValueError(
        f"Condition at position {position} is incomplete: {builder!r} must be compared with "
        "a value, e.g. `Condition.step_index() >= 3` or `Condition.step_index() % 2 == 0`."
    )
