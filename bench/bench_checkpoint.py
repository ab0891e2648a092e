"""Checkpoint save and load speed, and the stall a sampler sees during a save.

A table of 4 KB items (1 GiB of payload by default) is saved with
client.checkpoint() and loaded by a new Server with the same checkpointer.
Baselines from the same run: writing and reading the same number of bytes as
one plain file (numpy tofile + fsync, then fromfile), so the ratios show what
the format and the tables cost beyond the disk. The stall is the longest
single client.sample(table, 1) call of a sampler thread while the save runs,
next to the longest one over the same time without a save.

Usage: python bench/bench_checkpoint.py [--items N] [--dir DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable

import numpy as np

import resound
from resound import checkpointers, rate_limiters, selectors

from _common import print_table

ITEM_BYTES = 4_000


def tables(items: int) -> list[resound.Table]:
    limiter = rate_limiters.MinSize(1)
    return [resound.Table("t", selectors.Uniform(), selectors.Fifo(), items, limiter)]


def longest_sample_call(client: resound.Client, until: threading.Event) -> tuple[float, float]:
    """(the longest client.sample(t, 1) call until `until` is set, when it began)."""
    longest, at = 0.0, 0.0
    while not until.is_set():
        start = time.perf_counter()
        for _ in client.sample("t", 1, emit_timesteps=False):
            pass
        took = time.perf_counter() - start
        if took > longest:
            longest, at = took, start
    return longest, at


def sampler_during(
    client: resound.Client, work: Callable[[], object]
) -> tuple[float, float, float]:
    """(seconds `work` took, the longest sample call meanwhile, and how many
    seconds into `work` it began)."""
    done = threading.Event()
    result: list[tuple[float, float]] = []
    sampler = threading.Thread(target=lambda: result.append(longest_sample_call(client, done)))
    sampler.start()
    start = time.perf_counter()
    work()
    elapsed = time.perf_counter() - start
    done.set()
    sampler.join()
    longest, at = result[0]
    return elapsed, longest, at - start


def raw_file_speeds(directory: str, nbytes: int) -> tuple[float, float]:
    """MB/s of writing (with fsync) and reading one plain file of nbytes."""
    data = np.ones(nbytes // 4, np.float32)
    path = os.path.join(directory, "raw.bin")
    start = time.perf_counter()
    with open(path, "wb") as file:
        data.tofile(file)
        file.flush()
        os.fsync(file.fileno())
    write = nbytes / (time.perf_counter() - start) / 1e6
    start = time.perf_counter()
    np.fromfile(path, np.float32)
    read = nbytes / (time.perf_counter() - start) / 1e6
    os.remove(path)
    return write, read


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=(1 << 30) // ITEM_BYTES)
    parser.add_argument("--dir", help="where to write (default: a temporary directory)")
    args = parser.parse_args()
    directory = tempfile.mkdtemp(prefix="resound-bench-", dir=args.dir)
    try:
        checkpointer = checkpointers.DefaultCheckpointer(directory)
        server = resound.Server(tables(args.items), listen=False, checkpointer=checkpointer)
        client = server.in_process_client()
        rng = np.random.default_rng(0)
        rows = rng.random((64, ITEM_BYTES // 4), dtype=np.float32)
        with client.trajectory_writer(num_keep_alive_refs=1) as writer:
            for step in range(args.items):
                writer.append({"x": rows[step % 64]})
                writer.create_item("t", 1.0, {"x": writer.history["x"][-1]})
        payload = args.items * ITEM_BYTES
        print(f"table of {args.items:,} items, {payload / 1e9:.2f} GB of payload")

        quiet_seconds, quiet_stall, _ = sampler_during(client, lambda: time.sleep(2.0))
        paths: list[str] = []
        save_seconds, save_stall, stall_at = sampler_during(
            client, lambda: paths.append(client.checkpoint())
        )
        file_bytes = os.path.getsize(paths[0])
        start = time.perf_counter()
        restored = resound.Server(tables(args.items), listen=False, checkpointer=checkpointer)
        load_seconds = time.perf_counter() - start
        assert restored.table("t").info.current_size == args.items
        restored.stop()
        server.stop()
        raw_write, raw_read = raw_file_speeds(directory, file_bytes)
        save = file_bytes / save_seconds / 1e6
        load = file_bytes / load_seconds / 1e6
        print_table(
            f"checkpoint of {file_bytes / 1e9:.2f} GB ({args.items:,} items of 4 KB), same run",
            ["measure", "value", "baseline (same run)", "ratio"],
            [
                ["save", f"{save:,.0f} MB/s ({save_seconds:.2f} s)", f"{raw_write:,.0f} MB/s "
                 "(plain file write + fsync)", f"{save / raw_write:.2f}x"],
                ["load", f"{load:,.0f} MB/s ({load_seconds:.2f} s)", f"{raw_read:,.0f} MB/s "
                 "(plain file read)", f"{load / raw_read:.2f}x"],
                ["longest sample call during the save", f"{save_stall * 1e3:.1f} ms "
                 f"({stall_at:.2f} s into it)",
                 f"{quiet_stall * 1e3:.1f} ms (over {quiet_seconds:.0f} s without a save)", "-"],
            ],
        )  # fmt: skip
    finally:
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
