"""The chunk codec: numpy rows <-> chunk payload bytes (optionally lz4, delta).

A chunk holds ``num_steps`` rows of one column, row-major, as the numpy
dtype given by its type string (``'<f4'``, ``'|S7'``, ...). Compression
``'lz4'`` stores the lz4 block of those bytes; ``delta_encoded`` (integer
columns of rank >= 1 per step) stores row differences, which compress far
better for slowly changing counters or pixels.

Reading is the reverse: a chunk becomes an array ``[num_steps, *shape]``,
a zero-copy view of the stored bytes when the chunk is uncompressed.

Strings are stored as numpy fixed-width bytes (``'S'``): ``str`` values as
their UTF-8 encoding (``encode_strings``). Samples hand them out as Reverb
does (TensorFlow string tensors become numpy object arrays of ``bytes``):
``strings_as_objects`` turns every string column into an object array of
``bytes`` (chunks of ``'U'`` strings, from older writers, are encoded to
UTF-8 first). Like numpy's ``'S'`` type, stored strings do not keep
trailing NUL bytes.

Example:
    >>> encode_strings(np.array(['héllo', 'a']))
    array([b'h\\xc3\\xa9llo', b'a'], dtype='|S6')
    >>> strings_as_objects([np.array([b'a', b'bc'])])[0].tolist()
    [b'a', b'bc']
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = [
    "COMPRESSIONS",
    "decode_chunk",
    "encode_rows",
    "encode_strings",
    "gather_item",
    "strings_as_objects",
]

COMPRESSIONS = ("none", "lz4")


def _lz4() -> Any:
    import lz4.block  # imported on first use: only lz4 chunks need it

    return lz4.block


def check_compression(compression: str) -> str:
    if compression not in COMPRESSIONS:
        raise ValueError(f"compression must be one of {COMPRESSIONS}, got {compression!r}")
    return compression


def can_delta_encode(rows: np.ndarray) -> bool:
    """Delta encoding applies to integer columns whose steps have rank >= 1."""
    return rows.dtype.kind in "iu" and rows.ndim >= 2


def encode_rows(rows: np.ndarray, compression: str, delta: bool) -> tuple[Any, bool]:
    """Payload for ``rows`` (shape ``[steps, ...]``) and whether it is delta encoded.

    With no compression and no delta the array itself is returned: the core
    copies it straight into the chunk.
    """
    delta = delta and can_delta_encode(rows)
    if delta:
        unsigned = np.ascontiguousarray(rows).view(f"u{rows.dtype.itemsize}")
        flat = unsigned.reshape(len(rows), -1)
        encoded = np.empty_like(flat)
        encoded[0] = flat[0]
        np.subtract(flat[1:], flat[:-1], out=encoded[1:])  # wraps modulo 2**bits
        rows = encoded
    if compression == "lz4":
        return _lz4().compress(np.ascontiguousarray(rows).data, store_size=False), delta
    return np.ascontiguousarray(rows), delta


def encode_strings(array: np.ndarray) -> np.ndarray:
    """A ``str`` array (``'U'``) as the UTF-8 bytes (``'S'``) strings are
    stored as; the array itself if it holds no ``str``."""
    if array.dtype.kind != "U":
        return array
    return np.char.encode(array, "utf-8")


def strings_as_objects(columns: list[np.ndarray]) -> list[np.ndarray]:
    """``columns`` with every string column as an object array of ``bytes``
    (Reverb's form of a string tensor); ``columns`` itself if none is one."""
    for column in columns:  # a loop: any() of a generator costs more (per sample call)
        if column.dtype.kind in "SU":
            break
    else:
        return columns
    return [
        encode_strings(column).astype(object) if column.dtype.kind in "SU" else column
        for column in columns
    ]


def decode_chunk(chunk: Any) -> np.ndarray:
    """The rows of a core chunk as an array ``[num_steps, *shape]``."""
    rows = getattr(chunk, "decoded_rows", None)
    if rows is not None:
        return rows  # a gathered batch's column (resound._transport.gathered_batch)
    dtype = np.dtype(chunk.dtype)
    shape = (chunk.num_steps, *chunk.shape)
    if chunk.compression == "lz4":
        raw = _lz4().decompress(memoryview(chunk), uncompressed_size=chunk.uncompressed_size)
        array = np.frombuffer(raw, dtype=dtype)
    else:
        array = np.frombuffer(chunk, dtype=dtype)  # a view; keeps the chunk alive
    array = array.reshape(shape)
    if chunk.delta_encoded:
        unsigned = array.view(f"u{dtype.itemsize}").reshape(shape[0], -1)
        array = np.cumsum(unsigned, axis=0, dtype=unsigned.dtype).view(dtype).reshape(shape)
    return array


def gather_item(
    trajectory: list[tuple[list[tuple[int, int, int]], bool]],
    chunks: Any,
    cache: dict[int, np.ndarray],
    copy: bool = True,
) -> list[np.ndarray]:
    """The columns of one item, decoding each chunk once per ``cache``.
    ``copy=False`` may return read-only views of chunk memory (for callers
    that copy them anyway, e.g. into a stacked batch)."""
    columns = []
    for slices, squeeze in trajectory:
        parts = []
        for key, offset, length in slices:
            rows = cache.get(key)
            if rows is None:
                rows = cache[key] = decode_chunk(_find(chunks, key))
            parts.append(rows[offset : offset + length])
        # A copy: the caller owns writable data that does not pin the chunk.
        if len(parts) > 1:
            column = np.concatenate(parts)
        elif copy:
            column = parts[0].copy()
        else:
            column = parts[0]
        columns.append(column[0] if squeeze else column)
    return columns


def _find(chunks: Any, key: int) -> Any:
    for chunk in chunks:
        if chunk.key == key:
            return chunk
    raise KeyError(f"chunk {key} is not among the item's chunks")
