"""Nested structures of data, as Reverb (dm-tree) sees them.

A structure is a leaf or a container of structures. Containers are ``dict``
(and any other ``Mapping``; keys are visited in sorted order), ``list``,
``tuple`` and named tuples (fields in declaration order). Everything else,
``None`` included, is a leaf. resound uses this order everywhere a structure
is flattened: writer columns, table signatures and sampled data.

Example:
    >>> from resound import nest
    >>> nest.flatten({'b': 1, 'a': (2, [3])})
    [2, 3, 1]
    >>> nest.flatten_with_path({'b': 1, 'a': (2, [3])})
    [(('a', 0), 2), (('a', 1, 0), 3), (('b',), 1)]
    >>> nest.unflatten_as({'b': 0, 'a': (0, [0])}, [7, 8, 9])
    {'b': 9, 'a': (7, [8])}
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

__all__ = [
    "Path",
    "assert_same_structure",
    "flatten",
    "flatten_with_path",
    "is_nested",
    "map_structure",
    "unflatten_as",
]

Path = tuple[Any, ...]


def _is_namedtuple(value: Any) -> bool:
    return isinstance(value, tuple) and hasattr(type(value), "_fields")


# Whether values of a type are containers, learnt per type: the isinstance
# check against the Mapping ABC is slow, and writers ask for every leaf.
_NESTED_BY_TYPE: dict[type, bool] = {dict: True, list: True, tuple: True}


def is_nested(value: Any) -> bool:
    """True if ``value`` is a container (dict/Mapping, list, tuple, namedtuple)."""
    kind = type(value)
    nested = _NESTED_BY_TYPE.get(kind)
    if nested is None:
        nested = _NESTED_BY_TYPE[kind] = isinstance(value, (Mapping, list, tuple))
    return nested


def _sorted_keys(mapping: Mapping[Any, Any]) -> list[Any]:
    try:
        return sorted(mapping)
    except TypeError as error:
        raise TypeError(f"nested dict keys must be sortable, got {list(mapping)!r}") from error


def _children(value: Any) -> Iterator[tuple[Any, Any]]:
    """(key, child) pairs of a container, in flattening order."""
    if isinstance(value, Mapping):
        for key in _sorted_keys(value):
            yield key, value[key]
    elif _is_namedtuple(value):  # paths name the fields, as dm-tree does
        yield from zip(type(value)._fields, value, strict=False)
    else:
        yield from enumerate(value)


def flatten(structure: Any) -> list[Any]:
    """The leaves of ``structure`` in flattening order."""
    kind = type(structure)
    if kind is dict:
        if len(structure) == 1:  # the common {'obs': array} step, without sorting
            for child in structure.values():
                return flatten(child) if is_nested(child) else [child]
        out: list[Any] = []
        for key in _sorted_keys(structure):
            child = structure[key]
            if is_nested(child):
                out.extend(flatten(child))
            else:
                out.append(child)
        return out
    if not is_nested(structure):
        return [structure]
    out = []
    for _, child in _children(structure):
        if is_nested(child):
            out.extend(flatten(child))
        else:
            out.append(child)
    return out


def flatten_with_path(structure: Any) -> list[tuple[Path, Any]]:
    """``(path, leaf)`` pairs; a path is the tuple of keys/indices from the root."""
    out: list[tuple[Path, Any]] = []
    _walk(structure, (), out)
    return out


def _walk(value: Any, path: Path, out: list[tuple[Path, Any]]) -> None:
    if not is_nested(value):
        out.append((path, value))
        return
    for key, child in _children(value):
        _walk(child, (*path, key), out)


def unflatten_as(structure: Any, flat: Sequence[Any]) -> Any:
    """Builds a structure shaped like ``structure`` whose leaves are ``flat``.

    Raises ValueError if ``flat`` has a different number of leaves.
    """
    flat = list(flat)
    packed, used = _pack(structure, flat, 0)
    if used != len(flat):
        raise ValueError(
            f"structure has {used} leaves but {len(flat)} values were given "
            f"(structure: {structure!r})"
        )
    return packed


def _pack(structure: Any, flat: list[Any], index: int) -> tuple[Any, int]:
    if not is_nested(structure):
        if index >= len(flat):
            raise ValueError(f"too few values to fill the structure, needed more than {len(flat)}")
        return flat[index], index + 1
    if isinstance(structure, Mapping):
        values = {}
        for key in _sorted_keys(structure):
            values[key], index = _pack(structure[key], flat, index)
        # Keep the caller's key order (and mapping type) in the result.
        return _rebuild_mapping(structure, [(key, values[key]) for key in structure]), index
    items = []
    for child in structure:
        packed, index = _pack(child, flat, index)
        items.append(packed)
    if _is_namedtuple(structure):
        return type(structure)(*items), index
    if isinstance(structure, tuple):
        return (tuple(items) if type(structure) is tuple else type(structure)(items)), index
    return (items if type(structure) is list else type(structure)(items)), index


def _rebuild_mapping(structure: Mapping[Any, Any], pairs: list[tuple[Any, Any]]) -> Any:
    if type(structure) is dict:
        return dict(pairs)
    # A Mapping subclass's constructor is its own (Mapping declares none); the
    # ones that take no pairs raise TypeError.
    kind: Callable[..., Any] = type(structure)
    try:
        return kind(pairs)
    except TypeError:
        return dict(pairs)


def map_structure(function: Callable[..., Any], *structures: Any) -> Any:
    """Applies ``function`` to the leaves of equally shaped structures."""
    if not structures:
        raise ValueError("map_structure needs at least one structure")
    for other in structures[1:]:
        assert_same_structure(structures[0], other)
    flats = [flatten(s) for s in structures]
    return unflatten_as(structures[0], [function(*leaves) for leaves in zip(*flats, strict=False)])


def assert_same_structure(first: Any, second: Any) -> None:
    """Raises ValueError naming the first path where the two structures differ."""
    _compare(first, second, ())


def _compare(first: Any, second: Any, path: Path) -> None:
    first_nested, second_nested = is_nested(first), is_nested(second)
    if not first_nested and not second_nested:
        return
    if first_nested != second_nested or _kind(first) != _kind(second):
        raise ValueError(
            f"structures differ at path {path!r}: {type(first).__name__} vs {type(second).__name__}"
        )
    if isinstance(first, Mapping):
        if _sorted_keys(first) != _sorted_keys(second):
            raise ValueError(
                f"structures differ at path {path!r}: keys {_sorted_keys(first)!r} "
                f"vs {_sorted_keys(second)!r}"
            )
    elif len(first) != len(second):
        raise ValueError(
            f"structures differ at path {path!r}: length {len(first)} vs {len(second)}"
        )
    for (key, a), (_, b) in zip(_children(first), _children(second), strict=False):
        _compare(a, b, (*path, key))


def _kind(value: Any) -> str:
    if isinstance(value, Mapping):
        return "mapping"
    if _is_namedtuple(value):
        return type(value).__qualname__
    return "sequence"
