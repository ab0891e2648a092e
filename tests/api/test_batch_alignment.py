"""Every array of a sampled batch starts on a 64-byte boundary, over both
transports: info fields and data leaves, numbers and strings, small and
pooled (large) columns, columns the core stacks and those stacked item by
item (compressed, received over gRPC), batches of one sample call and of
several, and the remainder of a batch iterator. (XLA's CPU client aliases
64-byte aligned memory and copies memory aligned to 16; tests/interop/
checks that side with JAX itself.)"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import resound
from resound import _core, nest

from helpers.waiting import SAFETY, Background, wait_until

ALIGNMENT = 64


def misaligned(batch: resound.ReplaySample) -> list[tuple[int, int]]:
    """(leaf index, address % 64) of every leaf not on a 64-byte boundary.

    String leaves are object arrays of bytes (Reverb's form), which no
    framework takes without a copy: they are not held to the alignment."""
    leaves = nest.flatten(batch)
    assert all(isinstance(leaf, np.ndarray) for leaf in leaves)
    return [
        (index, leaf.ctypes.data % ALIGNMENT)
        for index, leaf in enumerate(leaves)
        if leaf.dtype != object and leaf.ctypes.data % ALIGNMENT
    ]


def step(index: int) -> dict[str, Any]:
    # Odd byte sizes: leaves packed one after another would not stay aligned.
    return {
        "bytes": np.full(3, index % 128, np.int8),
        "obs": np.full((2, 3), index, np.float32),
        "scalar": np.float64(index),
        "text": np.array(b"x" * (1 + index % 3)),  # strings of different widths
        "large": np.full(70_000, index, np.float32),  # > 256 KB a batch: pooled buffers
    }


def write(client: resound.Client, table: str, start: int, count: int, **writer_args: Any) -> None:
    with client.trajectory_writer(2, **writer_args) as writer:
        for index in range(start, start + count):
            writer.append(step(index))
            history = writer.history
            writer.create_item(
                table,
                1.0,
                {
                    "bytes": history["bytes"][-1:],
                    "obs": history["obs"][-1:],
                    "scalar": history["scalar"][-1],  # squeezed: no time axis
                    "text": history["text"][-1:],
                    "large": history["large"][-1:],
                },
            )
        writer.flush()


@pytest.mark.parametrize("compression", ["none", "lz4"])
def test_sample_batch_leaves_are_aligned(serve: Any, compression: str) -> None:
    _, client = serve(resound.Table.queue("q", 100))
    write(client, "q", 0, 5, compression=compression)
    batch = client.sample_batch("q", 5)
    # Columns in sorted key order: bytes, large, obs, scalar, text.
    assert batch.data[1].shape == (5, 1, 70_000)
    np.testing.assert_array_equal(batch.data[3], np.arange(5, dtype=np.float64))
    # Strings come back as Reverb gives them: object arrays of bytes.
    assert batch.data[4].dtype == object
    assert [row[0] for row in batch.data[4]] == [b"x", b"xx", b"xxx", b"x", b"xx"]
    assert misaligned(batch) == []


def test_a_batch_of_several_sample_calls_is_aligned(serve: Any) -> None:
    # The sampler waits for 6 items of a queue that gets 2, then 4: its batch
    # is assembled from more than one sample call.
    server, client = serve(resound.Table.queue("q", 100))
    write(client, "q", 0, 2)
    sampling = Background(client.sample_batch, "q", 6, timeout=SAFETY)
    wait_until(lambda: server.table("q").info.current_size == 0, "the first items are taken")
    write(client, "q", 2, 4)
    batch = sampling.value()
    np.testing.assert_array_equal(batch.data[3], np.arange(6, dtype=np.float64))
    assert misaligned(batch) == []


def test_prefetched_batches_and_a_remainder_are_aligned(serve: Any) -> None:
    _, client = serve(resound.Table.queue("q", 100))
    write(client, "q", 0, 7)
    batches = client.sample_batches("q", 3, timeout=0.2, drop_remainder=True)
    got = [next(batches), next(batches)]
    with pytest.raises(resound.DeadlineExceededError):
        next(batches)
    remainder = batches.remainder()
    assert remainder is not None and len(remainder.info.key) == 1
    for batch in (*got, remainder):
        assert misaligned(batch) == []


def test_pooled_empty_is_aligned_for_every_size() -> None:
    for size in (0, 1, 7, 100, 4097, 300_000, 5_000_001):
        array = _core.pooled_empty((size,), np.uint8)
        assert array.ctypes.data % ALIGNMENT == 0, size
