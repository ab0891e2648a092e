"""``python -m resound``: an embedded demo of the main job, on the Reverb API.

Actor threads play random episodes and write overlapping sequences with a
``TrajectoryWriter`` into a prioritized table; a learner thread samples
batches (prefetched on a background thread) under a SampleToInsertRatio
rate limiter and writes new priorities back. Everything runs in this process
with no socket (``Server(..., listen=False)``). It prints a progress bar, or
plain lines every few seconds when stdout is not a terminal, and a summary.

``resound top ADDRESS`` (``python -m resound top ADDRESS``) is instead the
live view of a running server's tables, as ``resound-server stats``.

Example:
    $ python -m resound --seconds 5 --actors 2
"""

from __future__ import annotations

import argparse
import sys
import threading
import time

import numpy as np

import resound

_OBSERVATION_SIZE = 100  # float32 elements per step (400 bytes)
_TABLE = "replay"


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m resound", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"resound {resound.__version__}")
    parser.add_argument("--seconds", type=float, default=5.0, help="how long to run (default 5)")
    parser.add_argument("--actors", type=int, default=2, help="actor threads (default 2)")
    parser.add_argument("--batch-size", type=int, default=64, help="learner batch (default 64)")
    parser.add_argument("--sequence-length", type=int, default=10, help="steps per item")
    parser.add_argument("--period", type=int, default=5, help="steps between items")
    parser.add_argument("--max-size", type=int, default=100_000, help="table capacity")
    parser.add_argument(
        "--samples-per-insert", type=float, default=4.0, help="SampleToInsertRatio target"
    )
    args = parser.parse_args(argv)
    for name in ("seconds", "actors", "batch_size", "sequence_length", "period", "max_size"):
        if getattr(args, name) <= 0:
            parser.error(f"--{name.replace('_', '-')} must be > 0")
    if args.samples_per_insert <= 0:
        parser.error("--samples-per-insert must be > 0")
    return args


def _actor(
    actor_id: int, client: resound.Client, args: argparse.Namespace, stop: threading.Event
) -> None:
    rng = np.random.default_rng(actor_id)
    # A pool of pre-drawn steps stands in for the environment, so the demo
    # measures resound rather than the random number generator.
    observations = rng.standard_normal((1024, _OBSERVATION_SIZE), dtype=np.float32)
    actions = rng.integers(0, 4, size=1024).astype(np.int32)
    rewards = rng.standard_normal(1024).astype(np.float32)
    writer = client.trajectory_writer(num_keep_alive_refs=args.sequence_length)
    t = 0
    try:
        while not stop.is_set():
            episode_length = int(rng.integers(20, 200))
            for _ in range(episode_length):
                t = (t + 1) % 1024
                writer.append(
                    {"observation": observations[t], "action": actions[t], "reward": rewards[t]}
                )
                steps = writer.episode_steps
                if steps >= args.sequence_length and steps % args.period == 0:
                    history = writer.history
                    trajectory = {
                        name: history[name][-args.sequence_length :]
                        for name in ("observation", "action", "reward")
                    }
                    writer.create_item(_TABLE, priority=1.0, trajectory=trajectory)
                    # Acme's habit: keep at most a few items in flight, so the
                    # rate limiter slows the actor down when the learner lags.
                    _flush(writer, 4, stop)
                if stop.is_set():
                    return
            writer.end_episode(timeout_ms=None)
    except resound.CancelledError:
        return  # the server stopped
    finally:
        writer.close()


def _flush(writer: resound.TrajectoryWriter, keep: int, stop: threading.Event) -> None:
    while not stop.is_set():
        try:
            writer.flush(block_until_num_items=keep, timeout_ms=200)
            return
        except resound.DeadlineExceededError:
            continue


def _learner(
    client: resound.Client, args: argparse.Namespace, stop: threading.Event, stats: dict
) -> None:
    rng = np.random.default_rng(12345)
    try:
        with client.sample_batches(_TABLE, args.batch_size) as batches:
            for batch in batches:
                # A real learner computes TD errors here; the demo draws them.
                td_errors = rng.uniform(0.1, 2.0, size=len(batch.info.key))
                client.update_priorities(
                    _TABLE, dict(zip(batch.info.key.tolist(), td_errors.tolist(), strict=True))
                )
                stats["samples"] += len(batch.info.key)
                stats["batches"] += 1
                if stop.is_set():
                    return
    except resound.CancelledError:
        return


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["top"]:
        # `resound top ADDRESS`: the live view of a server's tables.
        from resound import stats_view

        return stats_view.main(argv[1:], prog="resound top")
    args = _parse_args(argv)
    table = resound.Table(
        name=_TABLE,
        sampler=resound.selectors.Prioritized(priority_exponent=0.6),
        remover=resound.selectors.Fifo(),
        max_size=args.max_size,
        rate_limiter=resound.rate_limiters.SampleToInsertRatio(
            samples_per_insert=args.samples_per_insert,
            min_size_to_sample=1000,
            error_buffer=args.samples_per_insert * 100,
        ),
    )
    server = resound.Server([table], listen=False)
    client = server.in_process_client()
    stop = threading.Event()
    stats = {"samples": 0, "batches": 0}
    threads = [
        threading.Thread(target=_actor, args=(i, client, args, stop), daemon=True)
        for i in range(args.actors)
    ]
    threads.append(threading.Thread(target=_learner, args=(client, args, stop, stats), daemon=True))
    print(
        f"resound demo (embedded, no network): {args.actors} actor(s) writing sequences of "
        f"{args.sequence_length} steps every {args.period} steps; learner batch "
        f"{args.batch_size}; prioritized table of {args.max_size:,} items; "
        f"{args.samples_per_insert:g} samples per insert; {args.seconds:g} s"
    )
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    width = 30
    # On a terminal, one bar redrawn in place; elsewhere (a log file, a CI
    # job), a plain line every few seconds instead of carriage returns.
    terminal = sys.stdout.isatty()
    refresh = 0.25 if terminal else min(5.0, max(1.0, args.seconds / 10))
    while (elapsed := time.perf_counter() - start) < args.seconds:
        time.sleep(min(refresh, args.seconds - elapsed))
        done = min(1.0, (time.perf_counter() - start) / args.seconds)
        info = client.server_info()[_TABLE]
        limiter = info.rate_limiter_info
        counts = (
            f"items {limiter.insert_stats.completed:>9,}  "
            f"samples {limiter.sample_stats.completed:>10,}  size {info.current_size:>7,}"
        )
        if terminal:
            sys.stdout.write(f"\r[{'#' * int(done * width):<{width}}] {done:4.0%}  {counts}")
        else:
            sys.stdout.write(f"{time.perf_counter() - start:5.1f} s  {done:4.0%}  {counts}\n")
        sys.stdout.flush()
    stop.set()
    info = client.server_info()[_TABLE]
    elapsed = time.perf_counter() - start
    server.stop()
    for thread in threads:
        thread.join(timeout=5)
    limiter = info.rate_limiter_info
    inserts, samples = limiter.insert_stats.completed, limiter.sample_stats.completed
    if terminal:
        print()  # ends the bar's line
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
