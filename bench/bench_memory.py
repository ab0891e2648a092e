"""Memory held per item by the core: RSS growth while a table fills with
items of one 4 KB chunk each, minus the payload, next to the core's own
accounting (TableInfo.memory_bytes counts chunks only).

Usage: python bench/bench_memory.py [--items N]
"""

from __future__ import annotations

import argparse
import gc
import sys

import numpy as np

from resound import _core

from _common import print_table

PAYLOAD_BYTES = 4000


def rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=100_000)
    args = parser.parse_args()
    n = args.items
    payload = np.zeros(PAYLOAD_BYTES // 4, np.float32)
    store = _core.ChunkStore()
    table = _core.Table(
        "memory",
        _core.make_selector("prioritized", 0.6),
        _core.make_selector("fifo"),
        n,
        _core.RateLimiter.min_size(1),
        chunk_store=store,
    )
    gc.collect()
    before = rss_bytes()
    for start in range(0, n, 1000):
        keys = range(start, min(n, start + 1000))
        handles = [store.add(k, payload, "<f4", (payload.size,), 1) for k in keys]
        table.insert_batch([(k, 1.0, [([(k, 0, 1)], False)]) for k in keys])
        del handles
    gc.collect()
    growth = (rss_bytes() - before) / n
    rows = [
        ["RSS growth per item", f"{growth:,.0f} B"],
        ["of which beyond the payload", f"{growth - PAYLOAD_BYTES:,.0f} B"],
        [
            "chunk memory per item (TableInfo.memory_bytes)",
            f"{table.info().memory_bytes / n:,.0f} B",
        ],
    ]
    print_table(
        f"memory per item, {n:,} items of one 4 KB chunk each (prioritized + fifo)",
        ["measure", "value"],
        rows,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
