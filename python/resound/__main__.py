"""``python -m resound``: an embedded demo of the main job on the core.

Actor threads write overlapping sequences (chunks of steps plus items that
slice them) into a prioritized table; a learner thread samples batches under a
SampleToInsertRatio rate limiter and writes new priorities back. Everything
runs in this process with no network. It prints progress and a summary.

Example:
    $ python -m resound --seconds 5 --actors 2
"""

from __future__ import annotations

import argparse
import sys
import threading
import time

import numpy as np

from resound import _core

_OBSERVATION_SIZE = 100  # float32 elements per step (400 bytes)
_CHUNK_LENGTH = 10  # steps per chunk
_SEQUENCE_LENGTH = 5  # steps per item


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m resound", description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="how long to run (default 5)")
    parser.add_argument("--actors", type=int, default=2, help="actor threads (default 2)")
    parser.add_argument("--batch-size", type=int, default=64, help="learner batch (default 64)")
    parser.add_argument("--max-size", type=int, default=100_000, help="table capacity")
    parser.add_argument(
        "--samples-per-insert", type=float, default=4.0, help="SampleToInsertRatio target"
    )
    args = parser.parse_args(argv)
    if args.seconds <= 0:
        parser.error("--seconds must be > 0")
    if args.actors < 1:
        parser.error("--actors must be >= 1")
    if args.batch_size < 1:
        parser.error("--batch-size must be >= 1")
    return args


def _actor(
    actor_id: int, table: _core.Table, store: _core.ChunkStore, stop: threading.Event
) -> None:
    rng = np.random.default_rng(actor_id)
    key = actor_id << 40
    step = 0
    while not stop.is_set():
        # One chunk of _CHUNK_LENGTH steps, then one item per step over the
        # last _SEQUENCE_LENGTH steps of the chunk (overlapping sequences
        # share the chunk, so they cost no extra memory).
        steps = rng.standard_normal((_CHUNK_LENGTH, _OBSERVATION_SIZE), dtype=np.float32)
        key += 1
        chunk = store.add(
            key,
            steps,
            "<f4",
            (_OBSERVATION_SIZE,),
            _CHUNK_LENGTH,
            episode_id=actor_id,
            start_step=step,
        )
        items = []
        for end in range(_SEQUENCE_LENGTH, _CHUNK_LENGTH + 1):
            key += 1
            slices = [(chunk.key, end - _SEQUENCE_LENGTH, _SEQUENCE_LENGTH)]
            items.append((key, 1.0, [(slices, False)]))
        try:
            table.insert_batch(items, timeout=0.5)
        except _core.DeadlineExceededError:
            continue
        except _core.CancelledError:
            return
        step += _CHUNK_LENGTH


def _learner(
    table: _core.Table, batch_size: int, stop: threading.Event, stats: dict[str, int]
) -> None:
    rng = np.random.default_rng(12345)
    while not stop.is_set():
        try:
            batch = table.sample(batch_size, timeout=0.5)
        except (_core.DeadlineExceededError, _core.CancelledError):
            continue
        # A real learner computes TD errors; here new priorities are random.
        new_priorities = rng.uniform(0.1, 2.0, size=len(batch))
        table.mutate_priorities(
            [(s.key, float(p)) for s, p in zip(batch, new_priorities, strict=True)]
        )
        stats["samples"] += len(batch)
        stats["batches"] += 1


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    store = _core.ChunkStore()
    limiter = _core.RateLimiter.sample_to_insert_ratio(
        args.samples_per_insert, 1000, args.samples_per_insert * 100
    )
    table = _core.Table(
        "replay",
        _core.make_selector("prioritized", 0.6),
        _core.make_selector("fifo"),
        args.max_size,
        limiter,
        chunk_store=store,
    )
    stop = threading.Event()
    stats = {"samples": 0, "batches": 0}
    threads = [
        threading.Thread(target=_actor, args=(i, table, store, stop), daemon=True)
        for i in range(args.actors)
    ]
    threads.append(
        threading.Thread(target=_learner, args=(table, args.batch_size, stop, stats), daemon=True)
    )
    print(
        f"resound demo: {args.actors} actor(s), learner batch {args.batch_size}, "
        f"prioritized table of {args.max_size:,} items, "
        f"{args.samples_per_insert} samples per insert, {args.seconds:g} s"
    )
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    width = 30
    while (elapsed := time.perf_counter() - start) < args.seconds:
        time.sleep(min(0.25, args.seconds - elapsed))
        done = min(1.0, (time.perf_counter() - start) / args.seconds)
        info = table.info()
        bar = "#" * int(done * width)
        sys.stdout.write(
            f"\r[{bar:<{width}}] {done:4.0%}  items {info.rate_limiter['inserts']:>9,}  "
            f"samples {info.rate_limiter['samples']:>10,}  size {info.current_size:>7,}"
        )
        sys.stdout.flush()
    stop.set()
    table.close()
    for thread in threads:
        thread.join(timeout=5)
    elapsed = time.perf_counter() - start
    info = table.info()
    counters = info.rate_limiter
    print()
    inserts, samples = counters["inserts"], counters["samples"]
    print(f"inserted  {inserts:>10,} items   ({inserts / elapsed:,.0f} items/s)")
    print(f"sampled   {samples:>10,} items   ({samples / elapsed:,.0f} samples/s)")
    print(
        f"table     {info.current_size:>10,} items, {info.num_chunks:,} chunks, "
        f"{info.memory_bytes / 2**20:,.1f} MiB, {info.num_episodes} episodes"
    )
    print(f"learner   {stats['batches']:>10,} batches with priority updates")
    return 0


if __name__ == "__main__":
    sys.exit(main())
