"""``Client.sample``'s samples: sample batches taken from a transport, given
out one ``ReplaySample`` at a time (or, with ``emit_timesteps``, a list of
them, one per timestep), as Reverb's ``Client.sample`` does.

Batches are taken as the rate limiter allows (``Transport.taker``, flexible:
as many as it gives at once); each chunk is decoded once per batch, and
items of equal shapes are stacked in one pass.

A batch is bounded in bytes as well as in count (``BatchSizer``): its
samples are views of its stacked arrays, so ``sample(table, 100_000)`` of
400 KB items would otherwise gather 26 GB before giving out the first one,
and even a batch of 100 MB leaves the cache before its samples are read.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Iterator
from typing import Any

import numpy as np

from resound import _batch_assembly, _codec, _core
from resound._operation_names import mark, rename_for
from resound.replay_sample import ReplaySample, SampleInfo

__all__ = ["BatchSizer", "sample_generator"]

# What one batch of Client.sample holds at most (unless one sample is larger):
# small enough to stay in the cache between being gathered and being read
# (400 KB samples taken and read back here ran ~1.3x faster in batches of
# 4-6 MB than of 100 MB), large enough that small samples still come in
# thousands per call.
BATCH_BYTES = 4 << 20


class BatchSizer:
    """How many samples of one table to take at once: as many as fit in
    ``BATCH_BYTES`` at the size its last batch had; one before any batch
    was seen (a sample's size cannot be known before)."""

    def __init__(self) -> None:
        self._bytes_per_sample: int | None = None

    def count(self, remaining: int) -> int:
        if self._bytes_per_sample is None:
            return 1
        fitting = BATCH_BYTES // max(1, self._bytes_per_sample)
        return max(1, min(remaining, _core.MAX_SAMPLES_PER_CALL, fitting))

    def observe(self, bytes_per_sample: int) -> None:
        """Notes the size of a sample of the latest batch."""
        self._bytes_per_sample = bytes_per_sample


def _nbytes(columns: list[np.ndarray], count: int) -> int:
    """Bytes per sample of ``count`` samples held in ``columns``, measured
    before strings become Python objects (whose ``nbytes`` would count
    pointers, and whose scalars are ``bytes``)."""
    total = 0
    for column in columns:  # a loop: a generator costs more than one column's sum
        total += column.nbytes
    return total // max(1, count)


def sample_generator(
    take: Any,
    num_samples: int,
    emit_timesteps: bool,
    signature: Any,
    timeout: float | None,
    sizer: BatchSizer,
    owner: Any,
) -> Iterator[Any]:
    """Yields ``num_samples`` samples drawn with ``take(count, deadline,
    cancelled)``, each wait for the rate limiter bounded by ``timeout``;
    data packed as ``signature`` (None: a list of columns); batches as
    large as ``sizer`` says (and tells it the sizes it sees). An error
    names the operation ``sample`` and ``owner``'s addresses: renamed
    here rather than by a wrapping generator, a second generator per call
    that ``sample(num_samples=1)``, called once per sample, paid for."""
    try:
        remaining = num_samples
        while remaining > 0:
            deadline = None if timeout is None else time.monotonic() + timeout
            for batch in take(sizer.count(remaining), deadline, None):
                count = len(batch)
                remaining -= count
                stacked = _batch_assembly.stack_columns(batch)
                if stacked is not None:
                    sizer.observe(_nbytes(stacked, count))
                    stacked = _codec.strings_as_objects(stacked)
                    if not emit_timesteps and stacked:
                        if count == 1:
                            yield _one_sample(batch, stacked, signature)
                        else:
                            yield from _stacked_samples(_infos(batch), stacked, signature)
                        continue
                infos = _infos(batch)
                decoded: dict[int, np.ndarray] = {}  # each chunk decoded once per batch
                squeezed: list[bool] = []
                if stacked is not None and emit_timesteps:
                    # Columns stack only where every sample squeezes them
                    # alike: the first sample's flags are every sample's.
                    squeezed = [squeeze for _, squeeze in batch[0].trajectory]
                for index, info in enumerate(infos):
                    if stacked is not None:
                        columns = [column[index, ...] for column in stacked]
                    else:
                        item = batch[index]
                        gathered = _codec.gather_item(item.trajectory, item.chunks, decoded)
                        if index == 0:
                            sizer.observe(_nbytes(gathered, 1))
                        columns = _codec.strings_as_objects(gathered)
                        if emit_timesteps:
                            squeezed = [squeeze for _, squeeze in item.trajectory]
                    if emit_timesteps:
                        yield _timesteps(info, columns, squeezed, signature)
                    else:
                        yield ReplaySample(info, _batch_assembly.pack(signature, columns))
    except Exception as error:
        rename_for(error, "sample", owner)
        raise


# Warnings logged while a step of it runs name `sample` (see _operation_names).
mark(sample_generator.__code__, "sample")


def _one_sample(batch: Any, stacked: list[np.ndarray], signature: Any) -> ReplaySample:
    """The sample of a batch of one whose columns stacked (what
    ``_stacked_samples`` gives for one, without its iterators); the info
    fields in ``_infos``' order, read with item() instead of tolist()."""
    info = _make_info(
        (
            batch.keys.item(0),
            batch.probabilities.item(0),
            batch.table_sizes.item(0),
            batch.priorities.item(0),
            batch.times_sampled.item(0),
        )
    )
    columns = [column[0, ...] for column in stacked]
    return _make_sample((info, _batch_assembly.pack(signature, columns)))


def _stacked_samples(
    infos: list[SampleInfo], stacked: list[np.ndarray], signature: Any
) -> Iterator[ReplaySample]:
    """The samples of a batch whose columns stacked: each sample's columns
    are views of the stacked arrays (``column[index, ...]``), the rows of a
    column of more than one axis made in C by iterating it; with
    ``map`` and ``zip`` no Python frame runs per sample (a third of
    ``sample``'s time per sample of a 4 KB batch went to that)."""
    count = len(infos)
    rows = [
        list(column) if column.ndim > 1 else [column[index, ...] for index in range(count)]
        for column in stacked
    ]
    columns: Iterator[Any] = map(list, zip(*rows, strict=True))
    if signature is not None:
        columns = map(functools.partial(_batch_assembly.pack, signature), columns)
    return map(_make_sample, zip(infos, columns, strict=True))


_make_sample = ReplaySample._make
_make_info = SampleInfo._make


def _infos(batch: Any) -> list[SampleInfo]:
    return list(
        map(
            _make_info,
            zip(
                batch.keys.tolist(),
                batch.probabilities.tolist(),
                batch.table_sizes.tolist(),
                batch.priorities.tolist(),
                batch.times_sampled.tolist(),
                strict=False,
            ),
        )
    )


def _timesteps(
    info: SampleInfo, columns: list[np.ndarray], squeezed: list[bool], signature: Any
) -> list[ReplaySample]:
    """One sample per timestep. A squeezed column (one step without its time
    axis) counts as one step, as in Reverb, and is given whole."""
    lengths = {
        1 if squeeze else len(column) for column, squeeze in zip(columns, squeezed, strict=True)
    }
    if len(lengths) != 1:
        raise ValueError("Can't split non timestep trajectory into timesteps.")
    (length,) = lengths
    return [
        ReplaySample(
            info,
            _batch_assembly.pack(
                signature,
                [
                    column if squeeze else column[t, ...]
                    for column, squeeze in zip(columns, squeezed, strict=True)
                ],
            ),
        )
        for t in range(length)
    ]
