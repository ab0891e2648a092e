"""Values a TrajectoryWriter accepts: conversion to numpy arrays, and the
names its errors give dtypes and shapes."""

from __future__ import annotations

from typing import Any

import numpy as np

from resound import _codec


def _as_array(value: Any) -> np.ndarray:
    array = value if type(value) is np.ndarray else np.asarray(value)
    if array.dtype.kind == "O":
        # Only strings may hide in object arrays (e.g. from pandas or TF);
        # anything else (None, sets, objects) would otherwise become its repr.
        target: type[np.bytes_] | type[np.str_]
        if _all_of(array, bytes):
            target = np.bytes_
        elif _all_of(array, str):
            target = np.str_
        elif _all_of(array, (bytes, str)):
            target = np.bytes_
        else:
            raise ValueError(
                f"unsupported object data {value!r}: values must be numbers, bools, arrays "
                "or strings (str or bytes)"
            )
        try:
            array = array.astype(target)
        except (TypeError, ValueError, UnicodeEncodeError) as error:
            raise ValueError(f"unsupported object data {value!r}: {error}") from None
    elif array.dtype.kind == "V":
        # Structured and extension types (e.g. ml_dtypes' bfloat16) have no
        # portable type string: they would come back as raw bytes.
        raise ValueError(
            f"unsupported dtype {array.dtype} of {type(value).__name__}: values must be bool, "
            "integer, float or complex numbers, or strings (convert e.g. bfloat16 with "
            ".astype(np.float32))"
        )
    return _codec.encode_strings(array)  # str is stored as UTF-8 bytes


def _all_of(array: np.ndarray, types: type | tuple[type, ...]) -> bool:
    return all(isinstance(item, types) for item in array.flat)


def _dtype_name(dtype: np.dtype) -> str:
    if dtype.kind == "S":
        return "bytes"
    if dtype.kind == "U":
        return "str"
    return dtype.name


def _shape_text(shape: Any) -> str:
    if shape is None:
        return "<unknown>"
    return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"
