"""The embedded Python API of resound against dm-reverb, workload by workload.

Every workload of bench/README.md ("Reference figures"), through the public
API only:

  * resound in embedded mode: ``Server(tables, listen=False)`` and
    ``server.in_process_client()``;
  * dm-reverb in-process, when ``import reverb`` works in this interpreter:
    ``reverb.Server(tables)`` and ``reverb.Client(f'localhost:{server.port}')``.
    Without it, the in-process reference figures of bench/README.md
    (dm-reverb 0.14.0) are the reference and the table says so.

Each rate is the median of 3 repeats; each repeat runs for a fixed time
(time.perf_counter) and counts the units done, flushes included. Resound and
Reverb are measured back to back per workload, so the ratio column compares
numbers from the same minute of the same run.

Notes on the set-up (the same for both libraries):
  * payloads are float32 arrays of 100 / 1,000 / 100,000 random values
    (400 B / 4 KB / 400 KB; random bits, so compression gains nothing);
  * sample tables hold 20,000 items (2,000 for 400 KB: 20k x 400 KB would
    need 8 GB per library), one Uniform and one Prioritized table sharing the
    data; their items are created over ``history['obs'][-1:]`` (one timestep)
    so that ``client.sample``'s default ``emit_timesteps=True`` yields one
    timestep per item rather than splitting the 1-D payload into scalars;
  * insert tables hold 20,000 items (1,000 for 400 KB) and are filled before
    timing, so timed inserts run in the steady state (each one evicts, Fifo);
  * "concurrent" uses threads in this one process (the reference figures are
    for processes against a gRPC server; embedded mode has no server process);
  * memory, import time and idle RSS are measured in fresh subprocesses.

Targets come from the targets table of bench/README.md. Where it names a
path rather than a row, this bench applies the path's target to every row on
it: the writer-insert target (>= 5x and >= cpprb's 97k/s) to insert_writer,
insert_writer_flush2 and insert_trajectory at 400 B and 4 KB; the
client.sample target (>= 5x; >= 1.5x at 400 KB) to sample_*, sample_n1 and
concurrent_sample_*; >= 5x to concurrent_insert_*.

Usage: python bench/bench_api.py [--quick] [--only NAME ...] [--no-reverb]
  --only takes workload names or shell patterns (sample_*), repeatable.
"""

from __future__ import annotations

import argparse
import fnmatch
import gc
import importlib
import importlib.metadata
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import resound

from _common import fmt_rate, print_table

# --- the reference figures (dm-reverb 0.14.0, in-process column of bench/README.md)

PAYLOADS = {"400 B": 100, "4 KB": 1_000, "400 KB": 100_000}
CPPRB_ADD_1_PER_CALL = 97_000.0

ANCHORS: dict[tuple[str, str], float] = {
    ("insert_writer", "400 B"): 18_900,
    ("insert_writer", "4 KB"): 22_800,
    ("insert_writer", "400 KB"): 2_050,
    ("insert_writer_flush2", "4 KB"): 13_100,
    ("insert_trajectory", "4 KB"): 14_500,
    ("insert_client", "4 KB"): 4_600,
    ("sample_uniform", "400 B"): 22_000,
    ("sample_uniform", "4 KB"): 21_500,
    ("sample_uniform", "400 KB"): 9_500,
    ("sample_prioritized", "400 B"): 23_000,
    ("sample_prioritized", "4 KB"): 24_200,
    ("sample_prioritized", "400 KB"): 9_100,
    ("sample_n1", "4 KB"): 3_400,
    ("update_priorities", "100/batch"): 522_000,
    ("concurrent_insert_1", "4 KB"): 19_000,
    ("concurrent_insert_2", "4 KB"): 26_600,
    ("concurrent_insert_4", "4 KB"): 28_300,
    ("concurrent_sample_1", "4 KB"): 7_100,
    ("concurrent_sample_2", "4 KB"): 9_600,
    ("concurrent_sample_4", "4 KB"): 10_800,
    ("memory", "4 KB"): 1_600,  # bytes per item beyond the payload
    ("import_time", "-"): 2.3,  # seconds
    ("idle_rss", "-"): 480e6,  # bytes
}
# Batched sampling has no Reverb counterpart: it is compared with Reverb's
# client.sample of the same table (which is what its target means).
for _payload in PAYLOADS:
    for _name in ("sample_batch", "sample_batches"):
        ANCHORS[(_name, _payload)] = ANCHORS[("sample_uniform", _payload)]


@dataclass
class Target:
    """A target from bench/README.md: ratio (resound/reverb) >= or <= `ratio`, and
    optionally an absolute bound on resound's own value."""

    ratio: float
    higher_is_better: bool = True
    absolute: float | None = None
    absolute_text: str = ""

    def text(self) -> str:
        sign = ">=" if self.higher_is_better else "<="
        extra = f" & {self.absolute_text}" if self.absolute_text else ""
        return f"{sign}{self.ratio:g}x{extra}"

    def met(self, value: float, ratio: float) -> bool:
        ok = ratio >= self.ratio if self.higher_is_better else ratio <= self.ratio
        if self.absolute is not None:
            ok = ok and (
                value >= self.absolute if self.higher_is_better else value <= self.absolute
            )
        return ok


WRITER_TARGET = Target(5, absolute=CPPRB_ADD_1_PER_CALL, absolute_text=">=97k/s (cpprb add)")


def target_for(workload: str, payload: str) -> Target | None:
    if workload in ("insert_writer", "insert_writer_flush2", "insert_trajectory"):
        return WRITER_TARGET if payload in ("400 B", "4 KB") else None
    if workload == "insert_client":
        return Target(10)
    if workload in ("sample_batch", "sample_batches"):
        return {"4 KB": Target(20), "400 KB": Target(1.5)}.get(payload)
    if workload in ("sample_uniform", "sample_prioritized", "sample_n1"):
        return Target(1.5) if payload == "400 KB" else Target(5)
    if workload == "update_priorities":
        return Target(5)
    if workload.startswith("concurrent_insert"):
        return Target(5)  # the writer-insert target, applied per thread count
    if workload.startswith("concurrent_sample"):
        return Target(5)  # the client.sample target, applied per thread count
    if workload == "memory":
        return Target(0.25, False, 400, "<=400 B")
    if workload in ("import_time", "idle_rss"):
        return Target(0.2, False)
    return None


# --- the two libraries behind one interface


@dataclass
class Lib:
    name: str
    mod: Any
    embedded: bool

    def connect(self, tables: list[Any]) -> tuple[Any, Any]:
        if self.embedded:
            server = self.mod.Server(tables, listen=False)
            return server, server.in_process_client()
        server = self.mod.Server(tables)
        return server, self.mod.Client(f"localhost:{server.port}")

    def client_for(self, server: Any) -> Any:
        if self.embedded:
            return server.in_process_client()
        return self.mod.Client(f"localhost:{server.port}")

    def table(self, name: str, max_size: int, prioritized: bool = False) -> Any:
        mod = self.mod
        sampler = mod.selectors.Prioritized(0.6) if prioritized else mod.selectors.Uniform()
        return mod.Table(
            name=name,
            sampler=sampler,
            remover=mod.selectors.Fifo(),
            max_size=max_size,
            rate_limiter=mod.rate_limiters.MinSize(1),
        )


def payload_array(size: int, seed: int = 0) -> np.ndarray:
    """float32 values of random bits: incompressible (Reverb compresses chunks)."""
    raw = np.random.default_rng(seed).integers(0, 256, size * 4, dtype=np.uint8)
    return raw.view(np.float32).copy()


def stop(server: Any) -> None:
    server.stop()
    gc.collect()


# --- timing


@dataclass
class Settings:
    seconds: float  # per repeat
    repeats: int
    sample_items: int
    quick: bool


def timed(
    step: Callable[[], int], seconds: float, finish: Callable[[], None] | None = None
) -> float:
    """Calls `step` (returns units done) until `seconds` pass, then `finish`; units/s."""
    start = time.perf_counter()
    deadline = start + seconds
    units = 0
    while time.perf_counter() < deadline:
        units += step()
    if finish is not None:
        finish()
    return units / (time.perf_counter() - start)


def median(measure: Callable[[], float], settings: Settings) -> float:
    return statistics.median(measure() for _ in range(settings.repeats))


# --- workloads (each returns the median rate for one library)


def insert_max_size(payload: str) -> int:
    return 1_000 if payload == "400 KB" else 20_000


def fill(step: Callable[[], int], max_size: int, finish: Callable[[], None] | None = None) -> None:
    """Untimed warm-up: runs `step` until the table is full, so that the timed
    inserts run in the steady state of a replay buffer (each one evicts)."""
    done = 0
    while done < max_size + 100:
        done += step()
    if finish is not None:
        finish()


def w_insert_writer(lib: Lib, payload: str, s: Settings, flush2: bool = False) -> float:
    x = payload_array(PAYLOADS[payload])
    server, client = lib.connect([lib.table("t", insert_max_size(payload))])
    writer = client.trajectory_writer(num_keep_alive_refs=1)
    block = 10 if payload == "400 KB" else 100

    def step() -> int:
        for _ in range(block):
            writer.append({"obs": x})
            writer.create_item("t", 1.0, {"obs": writer.history["obs"][-1]})
            if flush2:
                writer.flush(block_until_num_items=2)
        return block

    fill(step, insert_max_size(payload), writer.flush)
    rate = median(lambda: timed(step, s.seconds, writer.flush), s)
    writer.close()
    stop(server)
    return rate


def w_insert_trajectory(lib: Lib, payload: str, s: Settings) -> float:
    x = payload_array(PAYLOADS[payload])
    server, client = lib.connect([lib.table("t", insert_max_size(payload))])
    writer = client.trajectory_writer(num_keep_alive_refs=10)
    for _ in range(9):
        writer.append({"obs": x})

    def step() -> int:
        for _ in range(100):
            writer.append({"obs": x})
            writer.create_item("t", 1.0, {"obs": writer.history["obs"][-10:]})
        return 100

    fill(step, insert_max_size(payload), writer.flush)
    rate = median(lambda: timed(step, s.seconds, writer.flush), s)
    writer.close()
    stop(server)
    return rate


def w_insert_client(lib: Lib, payload: str, s: Settings) -> float:
    x = payload_array(PAYLOADS[payload])
    server, client = lib.connect([lib.table("t", insert_max_size(payload))])
    priorities = {"t": 1.0}

    def step() -> int:
        for _ in range(100):
            client.insert({"obs": x}, priorities=priorities)
        return 100

    fill(step, insert_max_size(payload))
    rate = median(lambda: timed(step, s.seconds), s)
    stop(server)
    return rate


class SampleFixture:
    """A server with a Uniform table 'u' and a Prioritized table 'p' holding the
    same items (random priorities in 'p'); one per library at a time."""

    _current: dict[str, SampleFixture] = {}

    def __init__(self, lib: Lib, payload: str, items: int) -> None:
        self.key = (payload, items)
        self.items = items
        self.server, self.client = lib.connect(
            [lib.table("u", items), lib.table("p", items, prioritized=True)]
        )
        x = payload_array(PAYLOADS[payload])
        priorities = np.random.default_rng(1).uniform(0.1, 10.0, items).tolist()
        writer = self.client.trajectory_writer(num_keep_alive_refs=1)
        for index in range(items):
            writer.append({"obs": x})
            trajectory = {"obs": writer.history["obs"][-1:]}
            writer.create_item("u", 1.0, trajectory)
            writer.create_item("p", priorities[index], trajectory)
            if index % 100 == 99:
                writer.flush()  # Reverb warns about (and suffers from) long queues
        writer.flush()
        writer.close()

    @classmethod
    def get(cls, lib: Lib, payload: str, s: Settings) -> SampleFixture:
        items = sample_table_items(payload, s)
        fixture = cls._current.get(lib.name)
        if fixture is not None and fixture.key == (payload, items):
            return fixture
        cls.drop(lib)
        fixture = cls._current[lib.name] = SampleFixture(lib, payload, items)
        return fixture

    @classmethod
    def drop(cls, lib: Lib) -> None:
        fixture = cls._current.pop(lib.name, None)
        if fixture is not None:
            stop(fixture.server)


def sample_table_items(payload: str, s: Settings) -> int:
    return min(s.sample_items, 2_000) if payload == "400 KB" else s.sample_items


def consume_sample(client: Any, table: str, n: int) -> int:
    count = 0
    for timesteps in client.sample(table, num_samples=n):
        data = timesteps[0].data[0]
        count += data.ndim > 0  # every sample taken out of the generator and touched
    assert count == n
    return n


def w_sample(lib: Lib, payload: str, s: Settings, table: str) -> float:
    client = SampleFixture.get(lib, payload, s).client
    return median(lambda: timed(lambda: consume_sample(client, table, 256), s.seconds), s)


def w_sample_batch(lib: Lib, payload: str, s: Settings) -> float:
    client = SampleFixture.get(lib, payload, s).client

    def step() -> int:
        batch = client.sample_batch("u", 256)
        assert batch.data[0].shape[0] == 256 and batch.info.key.shape == (256,)
        return 256

    return median(lambda: timed(step, s.seconds), s)


def w_sample_batches(lib: Lib, payload: str, s: Settings) -> float:
    client = SampleFixture.get(lib, payload, s).client

    def measure() -> float:
        start = time.perf_counter()
        deadline = start + s.seconds
        units = 0
        with client.sample_batches("u", 256) as batches:
            for batch in batches:
                assert batch.data[0].shape[0] == 256
                units += 256
                if time.perf_counter() >= deadline:
                    break
            elapsed = time.perf_counter() - start
        return units / elapsed

    return median(measure, s)


def w_sample_n1(lib: Lib, payload: str, s: Settings) -> float:
    client = SampleFixture.get(lib, payload, s).client

    def step() -> int:
        for _ in range(20):
            sample = next(client.sample("u", 1))
            assert sample[0].data[0].ndim == 1
        return 20

    return median(lambda: timed(step, s.seconds), s)


def w_update_priorities(lib: Lib, payload: str, s: Settings) -> float:
    items = s.sample_items
    server, client = lib.connect([lib.table("p", items, prioritized=True)])
    writer = client.trajectory_writer(num_keep_alive_refs=1)
    x = payload_array(100)
    for index in range(items):
        writer.append({"obs": x})
        writer.create_item("p", 1.0, {"obs": writer.history["obs"][-1:]})
        if index % 100 == 99:
            writer.flush()
    writer.flush()
    writer.close()
    # Keys come from sampling (the API has no key listing): ~70% of the table.
    keys = sorted({ts[0].info.key for ts in client.sample("p", num_samples=items * 5 // 4)})
    rng = np.random.default_rng(2)
    batches = [
        {
            keys[i]: priority
            for i, priority in zip(
                rng.choice(len(keys), 100, replace=False).tolist(),
                rng.uniform(0.1, 10.0, 100).tolist(),
                strict=True,
            )
        }
        for _ in range(64)
    ]
    position = [0]

    def step() -> int:
        for _ in range(10):
            client.mutate_priorities("p", updates=batches[position[0] % len(batches)])
            position[0] += 1
        return 1000

    rate = median(lambda: timed(step, s.seconds), s)
    stop(server)
    return rate


def run_threads(threads: int, work: Callable[[int, float], int], seconds: float) -> float:
    """Runs work(index, deadline) on `threads` threads; total units / wall time."""
    barrier = threading.Barrier(threads + 1)
    counts = [0] * threads
    errors: list[BaseException] = []
    start_box = [0.0]

    def body(index: int) -> None:
        try:
            barrier.wait()
            counts[index] = work(index, start_box[0] + seconds)
        except BaseException as error:  # noqa: BLE001 - re-raised below
            errors.append(error)

    workers = [threading.Thread(target=body, args=(i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    start_box[0] = time.perf_counter()
    barrier.wait()
    for worker in workers:
        worker.join()
    elapsed = time.perf_counter() - start_box[0]
    if errors:
        raise errors[0]
    return sum(counts) / elapsed


def w_concurrent_insert(lib: Lib, payload: str, s: Settings, threads: int) -> float:
    x = payload_array(PAYLOADS[payload])
    server, _ = lib.connect([lib.table("t", insert_max_size(payload))])
    clients = [lib.client_for(server) for _ in range(threads)]

    def work(index: int, deadline: float) -> int:
        writer = clients[index].trajectory_writer(num_keep_alive_refs=1)
        units = 0
        while time.perf_counter() < deadline:
            for _ in range(100):
                writer.append({"obs": x})
                writer.create_item("t", 1.0, {"obs": writer.history["obs"][-1]})
            units += 100
        writer.flush()
        writer.close()
        return units

    filler = clients[0].trajectory_writer(num_keep_alive_refs=1)

    def fill_step() -> int:
        for _ in range(100):
            filler.append({"obs": x})
            filler.create_item("t", 1.0, {"obs": filler.history["obs"][-1]})
        return 100

    fill(fill_step, insert_max_size(payload), filler.flush)
    filler.close()
    rate = median(lambda: run_threads(threads, work, s.seconds), s)
    stop(server)
    return rate


def w_concurrent_sample(lib: Lib, payload: str, s: Settings, threads: int) -> float:
    fixture = SampleFixture.get(lib, payload, s)
    clients = [lib.client_for(fixture.server) for _ in range(threads)]

    def work(index: int, deadline: float) -> int:
        units = 0
        while time.perf_counter() < deadline:
            units += consume_sample(clients[index], "u", 256)
        return units

    return median(lambda: run_threads(threads, work, s.seconds), s)


# --- subprocess measurements: memory, import time, idle RSS

CHILD_SETUP = """
import gc, json, sys, time
def rss():
    with open('/proc/self/statm') as f:
        return int(f.read().split()[1]) * 4096
"""

IMPORT_CODE = """
import time
start = time.perf_counter()
import {module}
print(time.perf_counter() - start)
"""

IDLE_CODE = (
    CHILD_SETUP
    + """
import {module} as mod
table = mod.Table(name='t', sampler=mod.selectors.Uniform(), remover=mod.selectors.Fifo(),
                  max_size=1000, rate_limiter=mod.rate_limiters.MinSize(1))
{connect}
time.sleep(1.0)
print(rss())
"""
)

CONNECT = {
    "resound": "server = mod.Server([table], listen=False); client = server.in_process_client()",
    "reverb": "server = mod.Server([table]); client = mod.Client(f'localhost:{server.port}')",
}

MEMORY_CODE = (
    CHILD_SETUP
    + """
import numpy as np
import {module} as mod
n = {items}
table = mod.Table(name='t', sampler=mod.selectors.Prioritized(0.6),
                  remover=mod.selectors.Fifo(), max_size=n + 1000,
                  rate_limiter=mod.rate_limiters.MinSize(1))
{connect}
x = np.random.default_rng(0).integers(0, 256, 4000, dtype=np.uint8).view(np.float32)
writer = client.trajectory_writer(num_keep_alive_refs=1)
def put(count):
    for _ in range(count):
        writer.append({{'obs': x}})
        writer.create_item('t', 1.0, {{'obs': writer.history['obs'][-1]}})
    writer.flush()
put(1000)  # warm up every path before the baseline
gc.collect(); time.sleep(0.2)
before = rss()
put(n)
gc.collect(); time.sleep(0.5)
after = rss()
size = client.server_info()['t'].current_size
print(json.dumps({{'per_item': (after - before) / n, 'size': size}}))
"""
)


def child(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=600
    )
    if done.returncode != 0:
        raise RuntimeError(f"subprocess failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return done.stdout.strip().splitlines()[-1]


def w_memory(lib: Lib, payload: str, s: Settings) -> float:
    items = 10_000 if s.quick else 50_000
    code = MEMORY_CODE.format(module=lib.name, items=items, connect=CONNECT[lib.name])
    result = json.loads(child(code))
    assert result["size"] == items + 1000, result
    return result["per_item"] - 4_000


def w_import_time(lib: Lib, payload: str, s: Settings) -> float:
    code = IMPORT_CODE.format(module=lib.name)
    child(code)  # warm the page cache
    return statistics.median(float(child(code)) for _ in range(s.repeats))


def w_idle_rss(lib: Lib, payload: str, s: Settings) -> float:
    return float(child(IDLE_CODE.format(module=lib.name, connect=CONNECT[lib.name])))


# --- the list of rows


@dataclass
class Row:
    name: str
    payload: str
    run: Callable[[Lib, str, Settings], float]
    unit: str = "items/s"  # items/s, steps/s, keys/s, B/item, bytes, s
    uses_fixture: bool = False  # samples from the shared SampleFixture tables
    reference_row: tuple[str, str] | None = None  # resound only: compare with that row
    results: dict[str, float] = field(default_factory=dict)


def build_rows() -> list[Row]:
    """All rows, in the display order of bench/README.md."""
    rows = [Row("insert_writer", payload, w_insert_writer) for payload in PAYLOADS]
    rows += [
        Row("insert_writer_flush2", "4 KB", lambda *a: w_insert_writer(*a, flush2=True)),
        Row("insert_trajectory", "4 KB", w_insert_trajectory, unit="steps/s"),
        Row("insert_client", "4 KB", w_insert_client),
    ]
    for table, name in (("u", "sample_uniform"), ("p", "sample_prioritized")):
        rows += [
            Row(name, p, lambda lib, p, s, t=table: w_sample(lib, p, s, t), uses_fixture=True)
            for p in PAYLOADS
        ]
    for name, run in (("sample_batch", w_sample_batch), ("sample_batches", w_sample_batches)):
        rows += [
            Row(name, p, run, uses_fixture=True, reference_row=("sample_uniform", p))
            for p in PAYLOADS
        ]
    rows += [
        Row("sample_n1", "4 KB", w_sample_n1, uses_fixture=True),
        Row("update_priorities", "100/batch", w_update_priorities, unit="keys/s"),
    ]
    rows += [
        Row(
            f"concurrent_insert_{n}",
            "4 KB",
            lambda lib, p, s, n=n: w_concurrent_insert(lib, p, s, n),
        )
        for n in (1, 2, 4)
    ]
    rows += [
        Row(
            f"concurrent_sample_{n}",
            "4 KB",
            lambda lib, p, s, n=n: w_concurrent_sample(lib, p, s, n),
            uses_fixture=True,
        )
        for n in (1, 2, 4)
    ]
    rows += [
        Row("memory", "4 KB", w_memory, unit="B/item"),
        Row("import_time", "-", w_import_time, unit="s"),
        Row("idle_rss", "-", w_idle_rss, unit="bytes"),
    ]
    return rows


def execution_order(rows: list[Row]) -> list[Row]:
    """Rows without sample tables first, then the sampling rows grouped by
    payload, so that each payload's tables are filled once (stable sort)."""
    payloads = list(PAYLOADS)
    return sorted(
        rows, key=lambda r: (r.uses_fixture, payloads.index(r.payload) if r.uses_fixture else 0)
    )


def fmt_value(value: float, unit: str) -> str:
    if unit == "bytes":
        return f"{value / 1e6:,.0f} MB"
    if unit == "B/item":
        return f"{value:,.0f} B/item"
    if unit == "s":
        return f"{value:.3f} s"
    suffix = {"steps/s": " steps", "keys/s": " keys"}.get(unit, "")
    return fmt_rate(value) + suffix


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short runs, small tables (smoke)")
    parser.add_argument(
        "--only", action="append", metavar="NAME", help="workload name or pattern (repeatable)"
    )
    parser.add_argument(
        "--no-reverb", action="store_true", help="do not import reverb; use bench/README.md"
    )
    args = parser.parse_args()
    settings = (
        Settings(seconds=0.2, repeats=3, sample_items=2_000, quick=True)
        if args.quick
        else Settings(seconds=1.0, repeats=3, sample_items=20_000, quick=False)
    )

    libs = [Lib("resound", resound, embedded=True)]
    reverb_error = "disabled by --no-reverb" if args.no_reverb else None
    if not args.no_reverb:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # TensorFlow's start-up chatter
        try:
            reverb = importlib.import_module("reverb")
            libs.append(Lib("reverb", reverb, embedded=False))
        except Exception as error:  # noqa: BLE001 - any failure means "absent"
            reverb_error = f"{type(error).__name__}: {error}"
    have_reverb = len(libs) == 2

    print(
        f"python {sys.version.split()[0]} ({sys.executable}), numpy {np.__version__}, "
        f"resound {resound.__version__} from {os.path.dirname(resound.__file__)}"
    )
    if have_reverb:
        try:
            version = importlib.metadata.version("dm-reverb")
        except importlib.metadata.PackageNotFoundError:
            version = "?"
        print(f"dm-reverb {version} imported: measured in-process in this run")
    else:
        print(f"dm-reverb is ABSENT in this interpreter ({reverb_error});")
        print("the reference column shows bench/README.md's in-process figures (dm-reverb 0.14.0)")
    with open("/proc/loadavg") as loadavg:
        print(f"load average at start: {' '.join(loadavg.read().split()[:3])}")
    print("concurrent_* rows use threads in one process (embedded mode has no server process)")
    if args.quick:
        print("--quick: 0.2 s per repeat, sample tables of 2,000 items (smoke run, not numbers)")

    rows = build_rows()
    if args.only:
        wanted = {
            (r.name, r.payload)
            for r in rows
            if any(fnmatch.fnmatchcase(r.name, pattern) for pattern in args.only)
        }
        if not wanted:
            print(f"no workload matches {args.only}", file=sys.stderr)
            return 2
        # A batched row needs the row it is compared with.
        wanted |= {
            r.reference_row for r in rows if (r.name, r.payload) in wanted and r.reference_row
        }
        rows = [r for r in rows if (r.name, r.payload) in wanted]
    for row in execution_order(rows):
        for lib in libs:
            if lib.name == "reverb" and row.reference_row is not None:
                continue  # no such call in Reverb
            started = time.perf_counter()
            row.results[lib.name] = row.run(lib, row.payload, settings)
            print(
                f"  {row.name:<22} {row.payload:<9} {lib.name:<8} "
                f"{fmt_value(row.results[lib.name], row.unit):>18}  "
                f"({time.perf_counter() - started:.1f} s)",
                flush=True,
            )
    for lib in libs:
        SampleFixture.drop(lib)

    measured = {(r.name, r.payload): r.results for r in rows}
    table_rows = []
    met_flags = []
    for row in rows:
        ours = row.results["resound"]
        reference_key = row.reference_row or (row.name, row.payload)
        if have_reverb:
            reference = measured[reference_key]["reverb"]
            reference_text = fmt_value(reference, row.unit)
        else:
            reference = ANCHORS[reference_key]
            reference_text = fmt_value(reference, row.unit) + " (anchor)"
        if row.reference_row is not None:
            reference_text += f" [{row.reference_row[0]}]"
        ratio = ours / reference
        target = target_for(row.name, row.payload)
        met = "-" if target is None else ("yes" if target.met(ours, ratio) else "NO")
        if target is not None:
            met_flags.append(met == "yes")
        table_rows.append(
            [
                row.name,
                row.payload,
                fmt_value(ours, row.unit),
                reference_text,
                f"{ratio:.2f}x",
                target.text() if target else "-",
                met,
            ]
        )
    reference_header = "reverb (same run)" if have_reverb else "reverb 0.14.0 (bench/README.md)"
    print_table(
        "resound embedded API vs dm-reverb in-process (medians of "
        f"{settings.repeats}; ratio = resound / reference)",
        ["workload", "payload", "resound", reference_header, "ratio", "target", "met"],
        table_rows,
    )
    with open("/proc/loadavg") as loadavg:
        print(f"load average at end: {' '.join(loadavg.read().split()[:3])}")
    print(f"targets met: {sum(met_flags)} of {len(met_flags)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
