"""Tensor specs: the shape and dtype a table signature expects.

``TensorSpec(shape, dtype, name=None)`` is resound's own spec (numpy dtypes,
``None`` for a dimension of unknown size). A table signature is a nested
structure of specs; besides ``TensorSpec`` any object with ``.shape`` and
``.dtype`` that is not an array (``tf.TensorSpec``, ``jax.ShapeDtypeStruct``)
is accepted. Arrays are data, not specs, and are rejected.

Example:
    >>> import numpy as np
    >>> from resound import TensorSpec
    >>> spec = TensorSpec((None, 3), np.float32, name='obs')
    >>> spec.is_compatible_with(np.zeros((5, 3), np.float32))
    True
    >>> spec.is_compatible_with(np.zeros((5, 4), np.float32))
    False
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Mapping
from typing import Any

import numpy as np

from resound import nest

__all__ = ["TensorSpec", "decode_signature", "encode_signature", "flat_signature"]

Shape = tuple[int | None, ...]


def as_dtype(dtype: Any) -> np.dtype:
    """A numpy dtype from a numpy dtype, a type, a name or a TF/JAX dtype."""
    numpy_dtype = getattr(dtype, "as_numpy_dtype", None)  # tf.DType
    if numpy_dtype is not None:
        dtype = numpy_dtype
    if dtype is str:
        return np.dtype("U")
    if dtype is bytes or dtype is object:  # tf.string maps to object
        return np.dtype("S")
    try:
        return np.dtype(dtype)
    except TypeError as error:
        raise ValueError(f"dtype must be a numpy dtype or dtype name, got {dtype!r}") from error


def as_shape(shape: Any) -> Shape | None:
    """A tuple of ints or None (unknown dims); None for an unknown rank."""
    if shape is None:
        return None
    as_list = getattr(shape, "as_list", None)  # tf.TensorShape
    if as_list is not None:
        try:
            shape = as_list()
        except ValueError:  # unknown rank
            return None
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    if not hasattr(shape, "__iter__"):
        raise ValueError(f"shape must hold ints or None, got {shape!r}")
    dims: list[int | None] = []
    for dim in shape:
        value = getattr(dim, "value", dim)  # tf.Dimension in old TF
        if value is None or (isinstance(value, (int, np.integer)) and value < 0):
            dims.append(None)
        elif isinstance(value, (int, np.integer)) and not isinstance(value, bool):
            dims.append(int(value))
        else:
            raise ValueError(f"shape must hold ints or None, got {shape!r}")
    return tuple(dims)


def dtypes_match(expected: np.dtype, actual: np.dtype) -> bool:
    """Equal dtypes; strings ('S' or 'U', stored as 'S') match strings of any width."""
    if expected.kind in "SU":
        return actual.kind in "SU"
    return expected == actual


def shapes_compatible(expected: Shape | None, actual: Shape | None) -> bool:
    """Same rank and equal sizes wherever both are known."""
    if expected is None or actual is None:
        return True
    if len(expected) != len(actual):
        return False
    return all(e is None or a is None or e == a for e, a in zip(expected, actual, strict=False))


class TensorSpec:
    """Shape, dtype and optional name of a tensor.

    Two specs are equal when shape, dtype and name are equal.

    Example:
        >>> TensorSpec([2], 'int64')
        TensorSpec(shape=(2,), dtype=int64, name=None)
    """

    __slots__ = ("_dtype", "_name", "_shape")

    def __init__(self, shape: Any, dtype: Any, name: str | None = None) -> None:
        self._shape = as_shape(shape)
        self._dtype = as_dtype(dtype)
        if name is not None and not isinstance(name, str):
            raise ValueError(f"name must be a str or None, got {name!r}")
        self._name = name

    @classmethod
    def from_value(cls, value: Any, name: str | None = None) -> TensorSpec:
        """The spec of an array-like value (anything ``np.asarray`` takes)."""
        array = np.asarray(value)
        return cls(array.shape, array.dtype, name)

    @classmethod
    def from_spec(cls, spec: Any, name: str | None = None) -> TensorSpec:
        """A TensorSpec from any object with ``.shape`` and ``.dtype``."""
        if isinstance(spec, TensorSpec):
            return spec
        return cls(
            spec.shape, spec.dtype, name if name is not None else getattr(spec, "name", None)
        )

    @property
    def shape(self) -> Shape | None:
        return self._shape

    @property
    def dtype(self) -> np.dtype:
        return self._dtype

    @property
    def name(self) -> str | None:
        return self._name

    def is_compatible_with(self, value: Any) -> bool:
        """True if ``value`` (a spec, an array or anything with .shape and
        .dtype) has a matching dtype and a compatible shape."""
        try:
            if hasattr(value, "shape") and hasattr(value, "dtype"):
                shape, dtype = as_shape(value.shape), as_dtype(value.dtype)
            else:
                array = np.asarray(value)
                shape, dtype = array.shape, array.dtype
        except (TypeError, ValueError):
            return False
        return dtypes_match(self._dtype, dtype) and shapes_compatible(self._shape, shape)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TensorSpec):
            return NotImplemented
        return (self._shape, self._dtype, self._name) == (other._shape, other._dtype, other._name)

    def __hash__(self) -> int:
        return hash((self._shape, self._dtype.str, self._name))

    def __repr__(self) -> str:
        return f"TensorSpec(shape={self._shape}, dtype={self._dtype}, name={self._name!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (TensorSpec, (self._shape, self._dtype, self._name))


def is_spec(leaf: Any) -> bool:
    """A spec has .shape and .dtype and is not itself data (an array)."""
    if isinstance(leaf, TensorSpec):
        return True
    if isinstance(leaf, (np.ndarray, np.generic)) or hasattr(leaf, "__array__"):
        return False
    return hasattr(leaf, "shape") and hasattr(leaf, "dtype")


def validate_signature(signature: Any) -> None:
    """Raises ValueError unless every leaf of ``signature`` is a spec."""
    for path, leaf in nest.flatten_with_path(signature):
        if not is_spec(leaf):
            what = "an array (data, not a spec)" if hasattr(leaf, "__array__") else repr(leaf)
            raise ValueError(
                f"Unsupported signature spec at path {path!r}: got {what}. Use resound.TensorSpec "
                "(or another spec object with .shape and .dtype, e.g. tf.TensorSpec)."
            )
        TensorSpec.from_spec(leaf)  # the dtype and shape must be understood


def flat_signature(signature: Any) -> list[TensorSpec]:
    """The signature's leaves as TensorSpecs, named by path when unnamed."""
    specs = []
    for path, leaf in nest.flatten_with_path(signature):
        spec = TensorSpec.from_spec(leaf)
        if spec.name is None:
            spec = TensorSpec(spec.shape, spec.dtype, "/".join(str(p) for p in path) or None)
        specs.append(spec)
    return specs


def field_label(path: tuple[Any, ...], spec: TensorSpec | None = None) -> str:
    """How messages name a signature field: by its path in the nest, or by
    the spec's name when the signature is a single spec.

    Example:
        >>> field_label(('obs', 'pixels'))
        "field ('obs', 'pixels')"
        >>> field_label((), TensorSpec([4], np.float32, 'obs'))
        "field 'obs'"
        >>> field_label(())
        'the value'
    """
    if path:
        return f"field {tuple(path)!r}"
    if spec is not None and spec.name:
        return f"field {spec.name!r}"
    return "the value"


def field_labels(signature: Any) -> list[str]:
    """``field_label`` of each leaf of ``signature``, in flattened order."""
    return [
        field_label(tuple(path), TensorSpec.from_spec(leaf))
        for path, leaf in nest.flatten_with_path(signature)
    ]


def dtype_name(dtype: Any) -> str:
    """numpy's name of a dtype, strings by kind (widths never matter).

    Example:
        >>> dtype_name('<f8'), dtype_name(np.dtype('<U7')), dtype_name(bool)
        ('float64', 'str', 'bool')
    """
    dtype = np.dtype(dtype)
    if dtype.kind == "U":
        return "str"
    if dtype.kind == "S":
        return "bytes"
    return dtype.name


def shape_text(shape: Any) -> str:
    """A shape as messages spell it: ``[?, 4]`` (``?``: any size)."""
    if shape is None:
        return "<any shape>"
    return "[" + ", ".join("?" if size is None or size < 0 else str(size) for size in shape) + "]"


def mismatch_text(table: str, label: str, dtype: Any, shape: Any, spec: TensorSpec) -> str:
    """The message for a value that does not match its signature field, the
    same from every writer, ``insert`` and the core's own check.

    Example:
        >>> spec = TensorSpec([4], np.float32)
        >>> mismatch_text('replay', "field ('obs',)", np.float64, (1, 4), spec)
        "table 'replay': field ('obs',) is float64 [1, 4] but the signature expects float32 [4]"
    """
    return (
        f"table {table!r}: {label} is {dtype_name(dtype)} {shape_text(shape)} but the "
        f"signature expects {dtype_name(spec.dtype)} {shape_text(spec.shape)}"
    )


# --- A versioned JSON encoding, so signatures travel and persist without pickle.

_FORMAT = "resound.signature/1"


def encode_signature(signature: Any) -> bytes:
    """Encodes a signature (or None) as bytes; leaves become TensorSpecs."""
    if signature is None:
        return b""
    return json.dumps({"format": _FORMAT, "tree": _encode(signature)}).encode()


def _encode(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {"dict": [[_encode_key(k), _encode(v)] for k, v in value.items()]}
    kind = type(value)
    if isinstance(value, tuple) and hasattr(kind, "_fields"):
        return {
            "namedtuple": {
                "module": kind.__module__,
                "name": kind.__qualname__,
                "fields": list(kind._fields),
                "items": [_encode(v) for v in value],
            }
        }
    if isinstance(value, tuple):
        return {"tuple": [_encode(v) for v in value]}
    if isinstance(value, list):
        return {"list": [_encode(v) for v in value]}
    spec = TensorSpec.from_spec(value)
    return {
        "spec": {
            "shape": None if spec.shape is None else list(spec.shape),
            "dtype": spec.dtype.str,
            "name": spec.name,
        }
    }


def _encode_key(key: Any) -> Any:
    if isinstance(key, (str, int)) and not isinstance(key, bool):
        return key
    raise ValueError(f"signature dict keys must be str or int, got {key!r}")


def decode_signature(data: bytes) -> Any:
    """Inverse of :func:`encode_signature` (leaves come back as TensorSpec)."""
    if not data:
        return None
    try:
        document = json.loads(data)
        if document.get("format") != _FORMAT:
            raise ValueError(f"unknown signature format {document.get('format')!r}")
        return _decode(document["tree"])
    except (KeyError, TypeError, json.JSONDecodeError) as error:
        raise ValueError(f"malformed table signature: {error}") from error


def _decode(node: Any) -> Any:
    ((kind, body),) = node.items()
    if kind == "dict":
        return {key: _decode(value) for key, value in body}
    if kind == "tuple":
        return tuple(_decode(v) for v in body)
    if kind == "list":
        return [_decode(v) for v in body]
    if kind == "namedtuple":
        items = [_decode(v) for v in body["items"]]
        return _namedtuple_type(body["module"], body["name"], body["fields"])(*items)
    if kind == "spec":
        shape = None if body["shape"] is None else tuple(body["shape"])
        return TensorSpec(shape, np.dtype(body["dtype"]), body["name"])
    raise ValueError(f"unknown signature node {kind!r}")


def _namedtuple_type(module: str, qualname: str, fields: list[str]) -> Any:
    """The original namedtuple class if importable with the same fields, else a look-alike."""
    try:
        found: Any = importlib.import_module(module)
        for part in qualname.split("."):
            found = getattr(found, part)
        if list(getattr(found, "_fields", ())) == fields:
            return found
    except (ImportError, AttributeError):
        pass
    from collections import namedtuple

    return namedtuple(qualname.rsplit(".", 1)[-1], fields)
