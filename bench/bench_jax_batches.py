"""Batches into JAX on the CPU: what 64-byte aligned batch buffers save.

Samples batches of 256 items (4 KB and 400 KB each) from an embedded table
and measures ``jax.device_put`` of the batch's data leaf as resound returns it
(64-byte aligned: XLA aliases it) against the same bytes 16 bytes off a 64-byte
boundary (what malloc gives, and what resound returned before: XLA copies),
and batches per second through ``resound.datasets.jax.DeviceIterator``.
Ratios, not absolute speeds, are the point.

    python bench/bench_jax_batches.py
"""

from __future__ import annotations

import sys
import time

import numpy as np

import resound
from resound import _core

try:
    import jax
except ImportError:
    sys.exit('bench/bench_jax_batches.py needs JAX: pip install "jax[cpu]"')

from resound.datasets.jax import DeviceIterator

from _common import fmt_rate, median_rate, print_table

BATCH = 256


def unaligned_copy(array: np.ndarray) -> np.ndarray:
    """``array``'s bytes in a buffer 16 bytes past a 64-byte boundary."""
    base = _core.pooled_empty((array.nbytes + 64,), np.uint8)
    shifted = base[16 : 16 + array.nbytes].view(array.dtype).reshape(array.shape)
    shifted[...] = array
    assert shifted.ctypes.data % 64 == 16
    return shifted


def device_puts_per_second(array: np.ndarray, count: int = 50) -> float:
    def run() -> int:
        for _ in range(count):
            jax.device_put(array).block_until_ready()
        return count

    return median_rate(run)


def main() -> None:
    rows = []
    for item_bytes in (4 * 1024, 400 * 1024):
        server = resound.Server([resound.Table.queue("q", 10 * BATCH)], listen=False)
        client = server.in_process_client()
        step = np.zeros(item_bytes // 4, np.float32)
        for _ in range(3 * BATCH):
            client.insert(step, priorities={"q": 1.0})
        leaf = client.sample_batch("q", BATCH).data[0]
        aligned = device_puts_per_second(leaf)
        shifted = device_puts_per_second(unaligned_copy(leaf))
        rows.append(
            [
                f"{item_bytes // 1024} KB x {BATCH}",
                fmt_rate(aligned),
                fmt_rate(shifted),
                f"{aligned / shifted:.1f}x",
            ]
        )
        start = time.perf_counter()
        with DeviceIterator(client, "q", BATCH, num_batches=2, drop_remainder=True) as batches:
            for batch in batches:
                batch.data[0].block_until_ready()
        rows[-1].append(fmt_rate(2 / (time.perf_counter() - start)))
        server.stop()
    print_table(
        "jax.device_put of a batch leaf (CPU)",
        ["batch", "aligned (resound)", "16-byte aligned", "ratio", "DeviceIterator batches"],
        rows,
    )


if __name__ == "__main__":
    main()
