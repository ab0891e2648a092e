"""Sampled items stacked into one batch of arrays, every buffer 64-byte aligned.

``Client.sample_batch`` and ``Client.sample_batches`` build their
``ReplaySample`` here from the sample batches of one or more core (or remote)
sample calls. Every array of a batch, info fields and data leaves alike, comes
from the core's buffer pool (``_core.pooled_empty``), whose buffers start on a
64-byte boundary: XLA's CPU client aliases such memory (``jnp.asarray``,
``jax.dlpack``, ``jax.device_put``) where it would copy memory that is only
16-byte aligned, and ``torch.from_numpy`` shares it either way. String
columns are the exception: they come back as object arrays of ``bytes``, as
Reverb returns them, which no framework takes without a copy.

Example:
    >>> batch = client.sample_batch('replay', 256)  # doctest: +SKIP
    >>> all(leaf.ctypes.data % 64 == 0 for leaf in resound.nest.flatten(batch))  # doctest: +SKIP
    True
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from resound import _codec, _core, nest, specs
from resound.replay_sample import ReplaySample, SampleInfo

__all__ = [
    "INFO_FIELDS",
    "Origin",
    "batch_sample",
    "concatenate_batches",
    "count",
    "pack",
    "stack_columns",
    "stack_parts",
]

# SampleInfo's fields as the core's (and the remote) sample batches name them.
INFO_FIELDS = ("keys", "probabilities", "table_sizes", "priorities", "times_sampled")


def count(parts: Sequence[Any]) -> int:
    """How many samples the sample batches ``parts`` hold."""
    return sum(len(part) for part in parts)


def stack_columns(batch: Any) -> list[np.ndarray] | None:
    """Every column stacked over the batch by the core, or None if some column
    needs decoding item by item (compressed chunks, unequal lengths, or a
    batch received from a remote server)."""
    stack = getattr(batch, "stack_columns", None)
    if stack is None:
        return None
    columns = stack()
    for column in columns:  # a loop: any() of a generator costs more (per sample call)
        if column is None:
            return None
    return columns


def pack(signature: Any, columns: list[Any]) -> Any:
    """``columns`` in the structure of ``signature`` (None: the flat list)."""
    if signature is None:
        return columns
    if len(nest.flatten(signature)) != len(columns):
        raise ValueError(
            f"the sample has {len(columns)} columns but the table signature has "
            f"{len(nest.flatten(signature))}"
        )
    return nest.unflatten_as(signature, columns)


def stack_parts(parts: Sequence[Any]) -> list[np.ndarray] | None:
    """Every column stacked by the core over all sample batches ``parts``
    (concatenated into aligned buffers), or None if some column needs
    decoding item by item or the parts' columns differ in dtype or shape."""
    stacked = [stack_columns(part) for part in parts]
    if any(columns is None for columns in stacked):
        return None
    if len(stacked) == 1:
        return stacked[0]  # the core's own arrays: pooled, aligned
    try:
        return [_concatenate(c) for c in zip(*stacked, strict=True)]
    except ValueError:
        return None


class Origin(NamedTuple):
    """What messages about a batch name: the call, its table and the
    signature's field labels (``fields()``, called only for a message; None
    if the table has no signature)."""

    call: str
    table: str
    fields: Callable[[], list[str] | None]


def batch_sample(
    parts: Sequence[Any], signature: Any, origin: Origin | None = None
) -> ReplaySample:
    """One ``ReplaySample`` of stacked, aligned arrays from sample batches."""
    columns = stack_parts(parts)
    if columns is None:
        columns = _stack_items(parts, origin)
    columns = _codec.strings_as_objects(columns)  # Reverb's form: object arrays of bytes
    info = SampleInfo(
        *(_concatenate([getattr(part, field) for part in parts]) for field in INFO_FIELDS)
    )
    return ReplaySample(info, pack(signature, columns))


def concatenate_batches(batches: Sequence[ReplaySample]) -> ReplaySample:
    """Batches of one table (same structure) as one batch, in order."""
    if len(batches) == 1:
        return batches[0]
    info = SampleInfo(
        *(_concatenate(fields) for fields in zip(*(b.info for b in batches), strict=True))
    )
    leaves = [
        _concatenate(column)
        for column in zip(*(nest.flatten(b.data) for b in batches), strict=True)
    ]
    return ReplaySample(info, nest.unflatten_as(batches[0].data, leaves))


def _column_name(origin: Origin | None, index: int) -> str:
    """The label of column ``index``: its signature field, else its index."""
    if origin is not None:
        try:
            labels = origin.fields()
        except Exception:  # noqa: BLE001 - the message must not hide the error it explains
            labels = None
        if labels is not None and index < len(labels):
            return labels[index]
    return f"column {index}"


def _shapes_text(shapes: Sequence[tuple[int, ...]]) -> str:
    counts = collections.Counter(shapes)
    return ", ".join(
        f"{specs.shape_text(shape)} ({n} item{'s' if n > 1 else ''})"
        for shape, n in sorted(counts.items())
    )


def _why_shapes_differ(shapes: set[tuple[int, ...]]) -> str:
    """Why a table's items can have unequal shapes in one field."""
    for shape in shapes:
        if shape[:1] == (1,) and shape[1:] in shapes:
            return (
                "insert() adds a time axis of length 1, which a writer's item over one squeezed "
                "step (history[...][-1]) does not have, so this table holds items of both"
            )
    if len({len(shape) for shape in shapes}) == 1 and len({shape[1:] for shape in shapes}) == 1:
        return "the items hold different numbers of steps"
    return "the items were written with different shapes"


def _stack_items(parts: Sequence[Any], origin: Origin | None = None) -> list[np.ndarray]:
    cache: dict[int, np.ndarray] = {}
    # Views of chunk rows: stacking below copies them once.
    items = [
        _codec.gather_item(s.trajectory, s.chunks, cache, copy=False)
        for part in parts
        for s in part
    ]
    widths = {len(columns) for columns in items}
    if len(widths) != 1:
        raise ValueError(
            f"items in the batch have different numbers of columns ({sorted(widths)}); "
            "sample them with Client.sample instead"
        )
    out = []
    for index, column in enumerate(zip(*items, strict=True)):
        shapes = {c.shape for c in column}
        if len(shapes) != 1:
            where = "" if origin is None else f"{origin.call} from table {origin.table!r}: "
            raise ValueError(
                f"{where}{_column_name(origin, index)} has different shapes across the batch: "
                f"{_shapes_text([c.shape for c in column])}; {_why_shapes_differ(shapes)}. "
                "A batch stacks each field, so it needs equal shapes: sample such items with "
                "Client.sample, or write them all the same way"
            )
        dtypes = {_dtype_key(c.dtype) for c in column}
        if len(dtypes) != 1:
            raise ValueError(
                f"column {index} has different dtypes across the batch ({sorted(dtypes)}); "
                "sample_batch needs one dtype per column, use Client.sample instead"
            )
        # Into a buffer from the core's pool: aligned, and a batch of large
        # items is a large array whose fresh pages would cost more than the copy.
        stacked = _core.pooled_empty((len(column), *column[0].shape), _widest(column))
        out.append(np.stack(column, out=stacked))
    return out


def _widest(arrays: Sequence[np.ndarray]) -> np.dtype:
    # Strings of different widths stack into the widest (as numpy does).
    return max((a.dtype for a in arrays), key=lambda dtype: dtype.itemsize)


def _dtype_key(dtype: np.dtype) -> str:
    # Strings of different widths stack fine; other dtypes must be equal (numpy
    # would promote them silently, e.g. uint64 and int64 to float64).
    return dtype.kind if dtype.kind in "SU" else dtype.str


def _concatenate(arrays: Sequence[np.ndarray]) -> np.ndarray:
    """``np.concatenate`` into an aligned pooled buffer."""
    if len({_dtype_key(a.dtype) for a in arrays}) != 1:
        raise ValueError("different dtypes")  # _stack_items reports it per column
    first = arrays[0]
    if any(a.shape[1:] != first.shape[1:] for a in arrays):
        raise ValueError("different shapes")  # _stack_items reports it per column
    shape = (sum(len(a) for a in arrays), *first.shape[1:])
    return np.concatenate(arrays, out=_core.pooled_empty(shape, _widest(arrays)))
