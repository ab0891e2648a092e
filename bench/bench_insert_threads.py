"""Insert throughput into ONE table from 1, 2 and 4 threads.

Each thread writes 4 KB items: it adds a chunk (payload copy, GIL released)
and inserts batches of 64 items (one table lock per batch, GIL released).
The table's lock covers only selector and limiter work, so threads overlap
on everything else; the ratio column is throughput relative to 1 thread
measured in the same run. This machine has 2 cores, so 4 threads can at
best match 2.

The table is filled to capacity before timing starts, so the measurement is
the steady state of a replay buffer (every insert evicts the oldest item and
memory is recycled) rather than the first fill, where the kernel's page-fault
handling of fresh memory dominates and serialises the threads.

Usage: python bench/bench_insert_threads.py [--items N]
"""

from __future__ import annotations

import argparse
import sys
import threading
import time

import numpy as np

from resound import _core

from _common import fmt_rate, print_table

BATCH = 64
CAPACITY = 50_000


def run(threads: int, items_per_thread: int, payload: np.ndarray) -> float:
    store = _core.ChunkStore()
    table = _core.Table(
        "bench",
        _core.make_selector("prioritized", 0.6, seed=1),
        _core.make_selector("fifo"),
        CAPACITY,
        _core.RateLimiter.min_size(1),
        chunk_store=store,
    )
    barrier = threading.Barrier(threads + 1)
    block = np.ascontiguousarray(np.broadcast_to(payload, (BATCH, payload.size)))

    def write(base: int, count: int) -> None:
        for start in range(0, count, BATCH):
            keys = range(base + start, base + min(count, start + BATCH))
            chunk = store.add(base + start, block[: len(keys)], "<f4", (payload.size,), len(keys))
            table.insert_batch(
                [(k, 1.0, [([(chunk.key, i, 1)], False)]) for i, k in enumerate(keys)]
            )

    def writer(index: int) -> None:
        barrier.wait()
        write((index + 1) << 40, items_per_thread)

    write(0, CAPACITY)  # fill to capacity, untimed
    workers = [threading.Thread(target=writer, args=(i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    barrier.wait()
    start = time.perf_counter()
    for worker in workers:
        worker.join()
    elapsed = time.perf_counter() - start
    info = table.info()
    assert info.current_size == CAPACITY
    assert info.rate_limiter["inserts"] == CAPACITY + threads * items_per_thread
    return threads * items_per_thread / elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=100_000, help="items per thread")
    args = parser.parse_args()
    payload = np.ones(1000, dtype=np.float32)
    rows = []
    base = None
    for threads in (1, 2, 4):
        rates = sorted(run(threads, args.items, payload) for _ in range(3))
        rate = rates[1]
        base = base or rate
        rows.append([str(threads), fmt_rate(rate), f"{rate / base:.2f}x"])
    print_table(
        f"insert throughput into one full table of {CAPACITY:,} items "
        "(4 KB items, 64 per batch, median of 3)",
        ["threads", "items/s", "vs 1 thread"],
        rows,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
