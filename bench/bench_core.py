"""Core micro-benchmarks of resound._core (no Python API layer, no network).

Measures, medians of 3 runs:
  * insert: one item per call (chunk add + insert) and 256 items per call;
  * sample, 256 per call, for every selector at 10k and 1M items, and the
    1M/10k cost ratio (the O(log n) target for Prioritized is <= 2x);
  * priority updates in batches of 100 keys on a prioritized table.
Each row also shows a baseline measured in the same run: the same operation
done by a straightforward pure-Python replay table (bench/_python_reference.py),
so the ratio column says how much the core buys over writing it in Python.

Usage: python bench/bench_core.py [--quick]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import OrderedDict

import numpy as np

from resound import _core

from _common import fmt_rate, median_of, median_rate, print_table
from _python_reference import PythonTable

PAYLOAD = np.zeros(1000, dtype=np.float32)  # 4 KB per item


def make_table(kind: str, max_size: int, store: _core.ChunkStore) -> _core.Table:
    sampler = _core.make_selector(kind, 1.0 if kind == "prioritized" else 0.0, seed=1)
    return _core.Table(
        "bench",
        sampler,
        _core.make_selector("fifo"),
        max_size,
        _core.RateLimiter.min_size(1),
        chunk_store=store,
    )


def fill(table: _core.Table, store: _core.ChunkStore, n: int, steps_per_chunk: int = 100) -> list:
    """Fills `table` with n items of one 4-byte step each, sharing chunks."""
    handles = []
    key = 0
    rng = np.random.default_rng(0)
    for start in range(0, n, steps_per_chunk):
        count = min(steps_per_chunk, n - start)
        chunk = store.add(10**9 + start, np.zeros(count, np.float32), "<f4", (), count)
        handles.append(chunk)
        priorities = rng.uniform(0.1, 10.0, size=count)
        items = []
        for i in range(count):
            items.append((key, float(priorities[i]), [([(chunk.key, i, 1)], False)]))
            key += 1
        table.insert_batch(items)
    return handles


def bench_insert(quick: bool) -> list[list[str]]:
    """Steady-state inserts: the table is filled to capacity first (untimed),
    so every timed insert also evicts the oldest item, as in a running
    replay buffer."""
    capacity = 20_000
    n = 20_000 if quick else 100_000

    def full_table() -> tuple[_core.ChunkStore, _core.Table]:
        store = _core.ChunkStore()
        table = make_table("uniform", capacity, store)
        for key in range(capacity):
            chunk = store.add(key, PAYLOAD, "<f4", (1000,), 1)
            table.insert(key, 1.0, [([(key, 0, 1)], False)])
        del chunk
        return store, table

    def one_per_call() -> float:
        store, table = full_table()
        start = time.perf_counter()
        for key in range(capacity, capacity + n):
            chunk = store.add(key, PAYLOAD, "<f4", (1000,), 1)
            table.insert(key, 1.0, [([(key, 0, 1)], False)])
            del chunk
        return n / (time.perf_counter() - start)

    def batched() -> float:
        store, table = full_table()
        start = time.perf_counter()
        for first in range(capacity, capacity + n, 256):
            keys = range(first, min(capacity + n, first + 256))
            handles = [store.add(k, PAYLOAD, "<f4", (1000,), 1) for k in keys]
            table.insert_batch([(k, 1.0, [([(k, 0, 1)], False)]) for k in keys])
            del handles
        return n / (time.perf_counter() - start)

    def python_baseline() -> float:
        reference = PythonTable("uniform", capacity + n)
        data: OrderedDict[int, bytes] = OrderedDict()
        for key in range(capacity):
            data[key] = PAYLOAD.tobytes()
            reference.insert(key, 1.0)
        start = time.perf_counter()
        for key in range(capacity, capacity + n):
            data[key] = PAYLOAD.tobytes()
            reference.insert(key, 1.0)
            data.popitem(last=False)
        return n / (time.perf_counter() - start)

    base = median_of(python_baseline)
    rows = []
    for name, run in [
        ("insert 4 KB, 1 per call (full table)", one_per_call),
        ("insert 4 KB, 256 per call (full table)", batched),
    ]:
        rate = median_of(run)
        rows.append([name, fmt_rate(rate), fmt_rate(base), f"{rate / base:.2f}x"])
    return rows


def bench_sample(quick: bool) -> tuple[list[list[str]], dict[tuple[str, int], float]]:
    sizes = [10_000, 200_000] if quick else [10_000, 1_000_000]
    calls = 200 if quick else 1000
    rows = []
    rates: dict[tuple[str, int], float] = {}
    for kind in ["uniform", "prioritized", "fifo", "lifo", "min_heap", "max_heap"]:
        for size in sizes:
            store = _core.ChunkStore()
            table = make_table(kind, size, store)
            handles = fill(table, store, size)

            def run(table: _core.Table = table) -> int:
                consumed = 0
                for _ in range(calls):
                    batch = table.sample(256)
                    consumed += batch.keys.size + batch.probabilities.size // 2
                return calls * 256

            rate = median_rate(run)
            reference = PythonTable(kind, size)
            priorities = np.random.default_rng(0).uniform(0.1, 10.0, size=size).tolist()
            for key, priority in enumerate(priorities):
                reference.insert(key, priority)
            base_calls = max(1, calls // 20)

            def run_base(reference: PythonTable = reference, base_calls: int = base_calls) -> int:
                for _ in range(base_calls):
                    reference.sample(256)
                return base_calls * 256

            base = median_rate(run_base)
            rates[(kind, size)] = rate
            rows.append(
                [
                    f"sample 256/call {kind} @ {size:,}",
                    fmt_rate(rate),
                    fmt_rate(base),
                    f"{rate / base:.2f}x",
                ]
            )
            del handles, table, store
    return rows, rates


def bench_updates(quick: bool) -> list[list[str]]:
    size = 20_000
    store = _core.ChunkStore()
    table = make_table("prioritized", size, store)
    handles = fill(table, store, size)
    rng = np.random.default_rng(0)
    batches = [
        list(
            zip(rng.integers(0, size, 100).tolist(), rng.uniform(0.1, 5, 100).tolist(), strict=True)
        )
        for _ in range(200 if quick else 1000)
    ]

    def run() -> int:
        for updates in batches:
            table.mutate_priorities(updates)
        return len(batches) * 100

    reference = PythonTable("prioritized", size)
    for key in range(size):
        reference.insert(key, 1.0)

    def baseline() -> int:
        for updates in batches:
            for key, priority in updates:
                reference.update(key, priority)
        return len(batches) * 100

    rate, base = median_rate(run), median_rate(baseline)
    del handles
    return [
        [
            "priority updates, 100/batch @ 20,000",
            fmt_rate(rate),
            fmt_rate(base),
            f"{rate / base:.2f}x",
        ]
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes (smoke run)")
    args = parser.parse_args()
    header = ["workload", "resound core", "pure-Python baseline", "ratio"]
    rows = bench_insert(args.quick)
    sample_rows, rates = bench_sample(args.quick)
    rows += sample_rows
    rows += bench_updates(args.quick)
    print_table("resound._core micro-benchmarks (medians of 3; items/s)", header, rows)
    small, large = (10_000, 200_000) if args.quick else (10_000, 1_000_000)
    ratio_rows = [
        [kind, f"{rates[(kind, small)] / rates[(kind, large)]:.2f}x"]
        for kind in ["uniform", "prioritized", "fifo", "lifo", "min_heap", "max_heap"]
    ]
    print_table(
        f"cost per sample at {large:,} items relative to {small:,} (target for prioritized: <= 2x)",
        ["selector", "cost ratio"],
        ratio_rows,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
