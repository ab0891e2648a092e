"""TrajectoryDataset throughput: resound's against dm-reverb's, in one run.

Samples/s through ``TrajectoryDataset(..., max_in_flight_samples_per_worker=512)
.batch(256).as_numpy_iterator()`` ("batch", the target's pipeline) and through
Acme's shape (``make_reverb_dataset``: two datasets interleaved, batch(256,
drop_remainder=True), prefetch; "acme", for reference), every batch's arrays
touched, for:
  * item_4kb: items of one 4 KB step (``obs``: 1,000 float32);
  * seq10: items of 10 steps (``obs`` [10, 100] float32, ``action`` [10]
    int32, ``reward`` [10] float32: about 4 KB an item);
each with the server in this process ("embedded": resound calls it
directly, dm-reverb over its in-process gRPC server) and in another process
("remote": gRPC over 127.0.0.1 for both). Tables hold 10,000 items, Uniform
sampling. dm-reverb is measured when ``import reverb`` works here (dm-reverb
0.14 needs TF 2.15 and Python <= 3.11); otherwise the table says it is absent.
Rates are medians of 3 timed runs of a fresh dataset after 5 warm-up batches;
both libraries' tables are up at once and their runs take turns, so that a
slow spell of a shared machine falls on both.

Target (issue 14): >= 2x dm-reverb's dataset throughput in both modes.

Usage: python bench/bench_datasets.py [--quick] [--only NAME ...] [--no-reverb]
"""

from __future__ import annotations

import argparse
import contextlib
import fnmatch
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import numpy as np

from _common import fmt_rate, print_table, reverb_here

BATCH = 256
IN_FLIGHT = 512
ITEMS = 10_000
TARGET = 2.0
RUNS = 3

# Step and item layouts of each workload: column -> (per-step shape, dtype).
WORKLOADS = {
    "item_4kb": ({"obs": ((1000,), "float32")}, 1),
    "seq10": (
        {"obs": ((100,), "float32"), "action": ((), "int32"), "reward": ((), "float32")},
        10,
    ),
}

# The server process: builds one table with the library given, fills it,
# prints its port, serves until its stdin closes.
SERVER = r"""
import json, socket, sys
sys.path.insert(0, sys.argv[3])
import bench_datasets
lib, workload = sys.argv[1], sys.argv[2]
server, port = bench_datasets.start_server(lib)
bench_datasets.fill(lib, port, workload)
print(port, flush=True)
sys.stdin.read()
server.stop()
"""


def start_server(lib: str) -> tuple[Any, int]:
    mod = __import__(lib)
    table = mod.Table(
        name="replay",
        sampler=mod.selectors.Uniform(),
        remover=mod.selectors.Fifo(),
        max_size=ITEMS * 2,
        rate_limiter=mod.rate_limiters.MinSize(1),
    )
    if lib == "reverb":
        import socket

        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        return mod.Server([table], port=port), port
    server = mod.Server([table])
    return server, server.port


def fill(lib: str, port: int, workload: str) -> None:
    columns, length = WORKLOADS[workload]
    mod = __import__(lib)
    rng = np.random.default_rng(0)
    steps = [
        {
            name: rng.standard_normal(shape).astype(dtype)
            if dtype.startswith("float")
            else np.asarray(rng.integers(0, 10, shape), dtype)
            for name, (shape, dtype) in columns.items()
        }
        for _ in range(64)
    ]
    with mod.Client(f"localhost:{port}").trajectory_writer(num_keep_alive_refs=length) as writer:
        for index in range(ITEMS + length - 1):
            writer.append(steps[index % len(steps)])
            if index + 1 >= length:
                writer.create_item(
                    "replay", 1.0, {name: writer.history[name][-length:] for name in columns}
                )
            if index % 32 == 31:  # dm-reverb warns past ~100 unconfirmed items
                writer.flush()


def make_dataset(lib: str, port: int, workload: str) -> Any:
    import tensorflow as tf

    mod = __import__(lib)
    columns, length = WORKLOADS[workload]
    dtypes = {name: tf.as_dtype(dtype) for name, (_, dtype) in columns.items()}
    shapes = {name: tf.TensorShape([length, *shape]) for name, (shape, _) in columns.items()}
    return mod.TrajectoryDataset(
        f"localhost:{port}",
        "replay",
        dtypes=dtypes,
        shapes=shapes,
        max_in_flight_samples_per_worker=IN_FLIGHT,
    )


def pipeline(lib: str, port: int, workload: str, shape: str) -> Any:
    """``batch``: dataset.batch(256); ``acme``: as Acme's make_reverb_dataset,
    two datasets interleaved (built while tf.data traces), batch(256,
    drop_remainder=True), prefetch."""
    import tensorflow as tf

    if shape == "batch":
        return make_dataset(lib, port, workload).batch(BATCH)
    interleaved = tf.data.Dataset.range(2).interleave(
        lambda _: make_dataset(lib, port, workload),
        cycle_length=2,
        num_parallel_calls=2,
        deterministic=False,
    )
    return interleaved.batch(BATCH, drop_remainder=True).prefetch(4)


def rate(lib: str, port: int, workload: str, shape: str, seconds: float) -> float:
    """Samples/s of one fresh pipeline, after warm-up batches."""
    batches = pipeline(lib, port, workload, shape).as_numpy_iterator()
    for _ in range(5):
        next(batches)
    samples = 0
    start = time.perf_counter()
    while time.perf_counter() < start + seconds:
        batch = next(batches)
        samples += len(batch.info.key)
        for leaf in batch.data.values():
            leaf.sum()  # the consumer reads the data
    return samples / (time.perf_counter() - start)


@contextlib.contextmanager
def served(lib: str, mode: str, workload: str) -> Iterator[int]:
    """The port of a filled table of ``lib``'s, served in this process
    (embedded) or another (remote), until the block ends."""
    if mode == "embedded":
        server, port = start_server(lib)
        try:
            fill(lib, port, workload)
            yield port
        finally:
            server.stop()
        return
    process = subprocess.Popen(
        [sys.executable, "-c", SERVER, lib, workload, sys.path[0]],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert process.stdin is not None and process.stdout is not None
    try:
        yield int(process.stdout.readline())
    finally:
        process.stdin.close()
        process.wait(timeout=60)
        process.stdout.close()


def measure(libs: list[str], mode: str, workload: str, shape: str, seconds: float) -> list[float]:
    """Median samples/s of each library's, their timed runs taking turns
    (both tables are up at once, the idle one waits), so that a slow spell
    of this shared machine falls on both rather than on one."""
    rates: dict[str, list[float]] = {lib: [] for lib in libs}
    with contextlib.ExitStack() as stack:
        ports = {lib: stack.enter_context(served(lib, mode, workload)) for lib in libs}
        for _ in range(RUNS):
            for lib in libs:
                rates[lib].append(rate(lib, ports[lib], workload, shape, seconds))
    return [statistics.median(rates[lib]) for lib in libs]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="short runs (smoke)")
    parser.add_argument("--no-reverb", action="store_true", help="resound only")
    parser.add_argument(
        "--only", action="append", metavar="NAME", help="mode/workload or pattern (repeatable)"
    )
    args = parser.parse_args()
    seconds = 0.5 if args.quick else 2.0
    has_reverb = reverb_here(
        args.no_reverb,
        "dm-reverb imported: measured in the same run",
        "dm-reverb is absent here: resound's figures only",
    )
    rows = []
    for mode in ("embedded", "remote"):
        for workload in WORKLOADS:
            for shape in ("batch", "acme"):
                name = f"{mode}/{workload}/{shape}"
                if args.only and not any(fnmatch.fnmatchcase(name, p) for p in args.only):
                    continue
                libs = ["resound", "reverb"] if has_reverb else ["resound"]
                ours, reference = [*measure(libs, mode, workload, shape, seconds), 0.0][:2]
                print(f"  {name:24s} resound {fmt_rate(ours):>10s}", flush=True)
                if has_reverb:
                    print(f"  {name:24s} reverb  {fmt_rate(reference):>10s}", flush=True)
                ratio = ours / reference if reference else float("nan")
                met = "-" if not reference else ("yes" if ratio >= TARGET else "NO")
                target = f">={TARGET:g}x" if shape == "batch" else "-"
                if shape != "batch":
                    met = "-"
                rows.append([mode, workload, shape, ours, reference, ratio, target, met])
    print_table(
        f"TrajectoryDataset samples/s, .batch({BATCH}).as_numpy_iterator(), "
        f"max_in_flight_samples_per_worker={IN_FLIGHT} (medians of {RUNS}, in turns)",
        ["mode", "workload", "pipeline", "resound", "dm-reverb", "ratio", "target", "met"],
        [
            [
                mode,
                workload,
                shape,
                fmt_rate(ours),
                fmt_rate(reference) if reference else "absent",
                f"{ratio:.2f}x" if ratio == ratio else "-",
                target,
                met,
            ]
            for mode, workload, shape, ours, reference, ratio, target, met in rows
        ],
    )
    print(json.dumps({"/".join(r[:3]): {"resound": r[3], "reverb": r[4]} for r in rows}))


if __name__ == "__main__":
    main()
