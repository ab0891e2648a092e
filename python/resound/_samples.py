"""``Client.sample``'s samples: sample batches taken from a transport, given
out one ``ReplaySample`` at a time (or, with ``emit_timesteps``, a list of
them, one per timestep), as Reverb's ``Client.sample`` does.

Batches are taken as the rate limiter allows (``Transport.taker``, flexible:
as many as it gives at once); each chunk is decoded once per batch, and
items of equal shapes are stacked in one pass.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import numpy as np

from resound import _batch_assembly, _codec, _core
from resound.replay_sample import ReplaySample, SampleInfo

__all__ = ["sample_generator"]


def sample_generator(
    take: Any,
    num_samples: int,
    emit_timesteps: bool,
    signature: Any,
    timeout: float | None,
) -> Iterator[Any]:
    """Yields ``num_samples`` samples drawn with ``take(count, deadline,
    cancelled)``, each wait for the rate limiter bounded by ``timeout``;
    data packed as ``signature`` (None: a list of columns)."""
    remaining = num_samples
    while remaining > 0:
        deadline = None if timeout is None else time.monotonic() + timeout
        for batch in take(min(remaining, _core.MAX_SAMPLES_PER_CALL), deadline, None):
            remaining -= len(batch)
            infos = _infos(batch)
            stacked = _batch_assembly.stack_columns(batch)
            if stacked is not None:
                stacked = _codec.strings_as_objects(stacked)
            decoded: dict[int, np.ndarray] = {}  # each chunk decoded once per batch
            for index, info in enumerate(infos):
                item = None
                if stacked is not None:
                    columns = [column[index, ...] for column in stacked]
                else:
                    item = batch[index]
                    columns = _codec.strings_as_objects(
                        _codec.gather_item(item.trajectory, item.chunks, decoded)
                    )
                if emit_timesteps:
                    item = batch[index] if item is None else item
                    squeezed = [squeeze for _, squeeze in item.trajectory]
                    yield _timesteps(info, columns, squeezed, signature)
                else:
                    yield ReplaySample(info, _batch_assembly.pack(signature, columns))


def _infos(batch: Any) -> list[SampleInfo]:
    return [
        SampleInfo(*fields)
        for fields in zip(
            batch.keys.tolist(),
            batch.probabilities.tolist(),
            batch.table_sizes.tolist(),
            batch.priorities.tolist(),
            batch.times_sampled.tolist(),
            strict=False,
        )
    ]


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
