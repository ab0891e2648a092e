"""resound over gRPC against dm-reverb over gRPC: the server runs in another
process, the client here (the "remote" column of bench/README.md's reference
figures).

Workloads (4 KB payloads unless said otherwise):
  * insert_writer: append + create_item over the last step, flush at the end
    (400 B, 4 KB, 400 KB); insert_writer_flush2: flush(block_until_num_items=2)
    after every item (as Acme's adders write);
  * insert_trajectory: one step appended, one item over the last 10 steps;
  * insert_client: client.insert, one item per call;
  * sample_n1: client.sample(table, num_samples=1) per call;
  * update_priorities: keys/s, batches of 100 keys, Prioritized table;
  * concurrent_insert_N / concurrent_sample_N: N client processes at once
    (writers as insert_writer; samplers as sample_uniform);
  * sample_uniform / sample_prioritized: client.sample(table, 256), every
    sample consumed, tables of 20,000 items (2,000 at 400 KB);
  * sample_batch (resound only; compared with Reverb's client.sample);
  * grpc_ceiling (with any 400 KB sampling row): 400 KB items/s that a bare
    grpcio stream of ready-made messages carries between two processes here,
    the most any sampler served from Python can reach;
  * with any one-item round-trip row (insert_client, insert_writer_flush2,
    sample_n1, update_priorities), a second table puts it beside bare
    grpcio's round trip of the same 4 KB message between two processes
    here (a unary call, or one on an open stream: bench/_bare_grpcio.py).

Each library's server is a fresh subprocess per workload (`resound-server`
logic through resound.Server; reverb.Server for dm-reverb); dm-reverb is
measured when `import reverb` works in this interpreter, otherwise the
remote reference figures of bench/README.md are the reference and the table
says so. Rates are medians of 3 timed repeats, flushes included.

Targets (bench/README.md): writer inserts at 4 KB >= 2x (applied to every
writer row, concurrent ones included); sampling 256/call at 4 KB >= 3x (per
process count too) and at 400 KB >= 2x. Rows without a target are shown for
reference.

Usage: python bench/bench_remote.py [--quick] [--only NAME ...] [--no-reverb]
                                    [--transport grpc|local]
  --transport local: resound's clients use the server's same-host transport
  (a Unix socket and shared memory) instead of gRPC.
  --only takes workload names or shell patterns (sample_*), repeatable.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from _bare_grpcio import grpc_ceiling, grpc_floor
from _common import fmt_rate, print_table, reverb_here

PAYLOADS = {"400 B": 100, "4 KB": 1_000, "400 KB": 100_000}
ANCHORS = {  # dm-reverb 0.14.0, remote column of bench/README.md (items/s)
    ("insert_writer", "400 B"): 19_900,
    ("insert_writer", "4 KB"): 20_400,
    ("insert_writer", "400 KB"): 2_150,
    ("insert_trajectory", "4 KB"): 13_300,
    ("sample_uniform", "4 KB"): 7_200,
    ("sample_uniform", "400 KB"): 1_600,
    ("sample_prioritized", "4 KB"): 7_800,
    ("sample_prioritized", "400 KB"): 1_800,
    ("sample_batch", "4 KB"): 7_200,
    ("sample_batch", "400 KB"): 1_600,
    ("insert_writer_flush2", "4 KB"): 10_100,
    ("insert_client", "4 KB"): 3_500,
    ("sample_n1", "4 KB"): 2_200,
    ("update_priorities", "100/batch"): 513_000,
    ("concurrent_insert_1", "4 KB"): 16_200,
    ("concurrent_insert_2", "4 KB"): 19_200,
    ("concurrent_insert_4", "4 KB"): 24_100,
    ("concurrent_sample_1", "4 KB"): 8_600,
    ("concurrent_sample_2", "4 KB"): 9_000,
    ("concurrent_sample_4", "4 KB"): 8_900,
}
TARGETS = {
    ("insert_writer", "4 KB"): 2.0,
    ("insert_trajectory", "4 KB"): 2.0,
    ("sample_uniform", "4 KB"): 3.0,
    ("sample_prioritized", "4 KB"): 3.0,
    ("sample_uniform", "400 KB"): 2.0,
    ("sample_prioritized", "400 KB"): 2.0,
    ("sample_batch", "4 KB"): 3.0,
    ("sample_batch", "400 KB"): 2.0,
    # The writer-insert target, applied to every writer row at 4 KB.
    ("insert_writer_flush2", "4 KB"): 2.0,
    ("concurrent_insert_1", "4 KB"): 2.0,
    ("concurrent_insert_2", "4 KB"): 2.0,
    ("concurrent_insert_4", "4 KB"): 2.0,
    # The 256-per-call sampling target, applied per process count.
    ("concurrent_sample_1", "4 KB"): 3.0,
    ("concurrent_sample_2", "4 KB"): 3.0,
    ("concurrent_sample_4", "4 KB"): 3.0,
}

# Issue 17's targets for the same-host transport (--transport local), ratios
# to dm-reverb over gRPC in the same run.
LOCAL_TARGETS = {
    ("sample_uniform", "400 KB"): 5.0,
    ("sample_uniform", "4 KB"): 25.0,
    ("sample_n1", "4 KB"): 10.0,
    ("insert_client", "4 KB"): 10.0,
    ("insert_writer_flush2", "4 KB"): 4.0,
    ("insert_writer", "400 KB"): 3.0,
    ("update_priorities", "100/batch"): 5.0,
    ("concurrent_insert_1", "4 KB"): 3.0,
    ("concurrent_insert_2", "4 KB"): 3.0,
    ("concurrent_insert_4", "4 KB"): 3.0,
}
# 400 KB sampling over the same-host transport: at least this many bytes/s.
LOCAL_TARGET_GBPS = 4.5

# Server CPU seconds and units (items or keys) of the timed runs, per
# (library, workload, payload): the server's CPU per unit.
SERVER_CPU: dict[tuple[str, str, str], list[float]] = {}
_UNITS = [0]

# The server process: builds the tables of a JSON spec with the library
# given, prints its port, serves until its stdin closes.
SERVER = r"""
import json, socket, sys
lib, spec = sys.argv[1], json.loads(sys.argv[2])
mod = __import__(lib)
def table(t):
    sampler = mod.selectors.Prioritized(0.6) if t["prioritized"] else mod.selectors.Uniform()
    return mod.Table(name=t["name"], sampler=sampler, remover=mod.selectors.Fifo(),
                     max_size=t["max_size"], rate_limiter=mod.rate_limiters.MinSize(1))
tables = [table(t) for t in spec]
if lib == "reverb":
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = mod.Server(tables, port=port)
else:
    server = mod.Server(tables)
    port = server.port
print(port, flush=True)
sys.stdin.read()
server.stop()
"""


class ServerProcess:
    def __init__(self, lib: str, tables: list[dict[str, Any]]) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", SERVER, lib, json.dumps(tables)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert self.process.stdout is not None
        self.port = int(self.process.stdout.readline())

    def cpu_seconds(self) -> float:
        """User + system CPU time of the server process so far."""
        with open(f"/proc/{self.process.pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def measured(self, key: tuple[str, str, str], run: Callable[[], float]) -> float:
        """``run()``, the server's CPU and the units it counted recorded."""
        cpu, units = self.cpu_seconds(), _UNITS[0]
        rate = run()
        entry = SERVER_CPU.setdefault(key, [0.0, 0.0])
        entry[0] += self.cpu_seconds() - cpu
        entry[1] += _UNITS[0] - units
        return rate

    def stop(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=60)
        assert self.process.stdout is not None
        self.process.stdout.close()


# resound's client transport: gRPC, or the same-host transport (--transport).
RESOUND_TRANSPORT = "grpc"


def client_for(lib: str, port: int) -> Any:
    mod = __import__(lib)
    if lib == "resound":
        return mod.Client(f"localhost:{port}", transport=RESOUND_TRANSPORT)
    return mod.Client(f"localhost:{port}")


def payload_array(size: int) -> np.ndarray:
    raw = np.random.default_rng(0).integers(0, 256, size * 4, dtype=np.uint8)
    return raw.view(np.float32).copy()


def timed(step: Callable[[], int], seconds: float, finish: Callable[[], None]) -> float:
    start = time.perf_counter()
    units = 0
    while time.perf_counter() < start + seconds:
        units += step()
    finish()
    _UNITS[0] += units
    return units / (time.perf_counter() - start)


def insert(lib: str, payload: str, seconds: float, history: int, mode: str = "writer") -> float:
    """mode: "writer" (flush at the end), "flush2" (flush(block_until_num_items=2)
    after every item, as Acme's adders do) or "client" (client.insert, one
    item per call)."""
    x = payload_array(PAYLOADS[payload])
    max_size = 1_000 if payload == "400 KB" else 20_000
    server = ServerProcess(lib, [{"name": "t", "prioritized": False, "max_size": max_size}])
    try:
        client = client_for(lib, server.port)
        if mode == "client":

            def step() -> int:
                for _ in range(10):
                    client.insert({"obs": x}, priorities={"t": 1.0})
                return 10

            timed(step, min(seconds, 1.0), lambda: None)  # warm-up
            return server.measured(
                (lib, "insert_client", payload),
                lambda: statistics.median(timed(step, seconds, lambda: None) for _ in range(3)),
            )
        writer = client.trajectory_writer(num_keep_alive_refs=history)
        for _ in range(history):
            writer.append({"obs": x})
        block = 10 if payload == "400 KB" else 100

        def step() -> int:
            for _ in range(block):
                writer.append({"obs": x})
                column = (
                    writer.history["obs"][-1] if history == 1 else writer.history["obs"][-history:]
                )
                writer.create_item("t", 1.0, {"obs": column})
                if mode == "flush2":
                    writer.flush(block_until_num_items=2)
            return block

        timed(step, min(seconds, 1.0), writer.flush)  # warm-up
        rate = server.measured(
            (lib, f"insert_{mode}_{history}", payload),
            lambda: statistics.median(timed(step, seconds, writer.flush) for _ in range(3)),
        )
        writer.close()
        return rate
    finally:
        server.stop()


def sample(lib: str, payload: str, seconds: float, items: int, mode: str) -> float:
    x = payload_array(PAYLOADS[payload])
    items = min(items, 2_000) if payload == "400 KB" else items
    table = "p" if mode == "prioritized" else "u"
    spec = [
        {"name": "u", "prioritized": False, "max_size": items},
        {"name": "p", "prioritized": True, "max_size": items},
    ]
    server = ServerProcess(lib, spec)
    try:
        client = client_for(lib, server.port)
        with client.trajectory_writer(num_keep_alive_refs=1) as writer:
            for index in range(items):
                writer.append({"obs": x})
                writer.create_item(table, 1.0, {"obs": writer.history["obs"][-1:]})
                if index % 256 == 255:
                    writer.flush()
        if mode == "batch":

            def step() -> int:
                return len(client.sample_batch(table, 256).info.key)
        elif mode == "n1":

            def step() -> int:
                for _ in range(10):
                    for _ in client.sample(table, num_samples=1, emit_timesteps=False):
                        pass
                return 10
        else:

            def step() -> int:
                return sum(1 for _ in client.sample(table, num_samples=256, emit_timesteps=False))

        return server.measured(
            (lib, f"sample_{mode}", payload),
            lambda: statistics.median(timed(step, seconds, lambda: None) for _ in range(3)),
        )
    finally:
        server.stop()


def fill(lib: str, port: int, table: str, items: int, x: np.ndarray) -> None:
    with client_for(lib, port).trajectory_writer(num_keep_alive_refs=1) as writer:
        for index in range(items):
            writer.append({"obs": x})
            writer.create_item(table, 1.0, {"obs": writer.history["obs"][-1:]})
            if index % 256 == 255:
                writer.flush()


def update_priorities(lib: str, seconds: float, items: int) -> float:
    """Keys per second, in batches of 100 keys, on a Prioritized table."""
    server = ServerProcess(lib, [{"name": "p", "prioritized": True, "max_size": items}])
    try:
        fill(lib, server.port, "p", items, payload_array(PAYLOADS["4 KB"]))
        client = client_for(lib, server.port)
        keys: list[int] = []
        while len(set(keys)) < 1_000:
            keys += [int(s.info.key) for s in client.sample("p", 256, emit_timesteps=False)]
        keys = sorted(set(keys))
        rng = np.random.default_rng(0)
        # Drawn before the clock starts: the row measures the call, not numpy's draws.
        draws = [(rng.choice(keys, 100, replace=False), rng.random(100)) for _ in range(64)]
        updates = [
            {int(k): float(p) for k, p in zip(chosen, values, strict=True)}
            for chosen, values in draws
        ]
        turn = iter(range(1 << 62))

        def step() -> int:
            client.mutate_priorities("p", updates=updates[next(turn) % len(updates)])
            return 100

        return server.measured(
            (lib, "update_priorities", "100/batch"),
            lambda: statistics.median(timed(step, seconds, lambda: None) for _ in range(3)),
        )
    finally:
        server.stop()


# A client process of the concurrent rows: inserts (writer, 4 KB, flushed at
# the end) or samples (256 per call) for `seconds`, prints its units.
CLIENT = r"""
import sys, time
import numpy as np
lib, port, kind, seconds = sys.argv[1], int(sys.argv[2]), sys.argv[3], float(sys.argv[4])
mod = __import__(lib)
client = (mod.Client(f"localhost:{port}", transport=sys.argv[5]) if lib == "resound"
          else mod.Client(f"localhost:{port}"))
x = np.ones(1000, np.float32)
sys.stdout.write("ready\n"); sys.stdout.flush(); sys.stdin.readline()
units, start = 0, time.perf_counter()
if kind == "insert":
    writer = client.trajectory_writer(num_keep_alive_refs=1)
    while time.perf_counter() < start + seconds:
        for _ in range(100):
            writer.append({"obs": x})
            writer.create_item("u", 1.0, {"obs": writer.history["obs"][-1]})
        units += 100
    writer.flush()
else:
    while time.perf_counter() < start + seconds:
        units += sum(1 for _ in client.sample("u", num_samples=256, emit_timesteps=False))
print(units, time.perf_counter() - start, flush=True)
"""


def concurrent(lib: str, kind: str, processes: int, seconds: float, items: int) -> float:
    """Total units per second of `processes` client processes at once."""
    server = ServerProcess(lib, [{"name": "u", "prioritized": False, "max_size": items}])
    try:
        if kind == "sample":
            fill(lib, server.port, "u", items, payload_array(PAYLOADS["4 KB"]))

        def once() -> float:
            clients = [
                subprocess.Popen(
                    [sys.executable, "-c", CLIENT, lib, str(server.port), kind, str(seconds)]
                    + [RESOUND_TRANSPORT],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.DEVNULL,
                    text=True,
                )
                for _ in range(processes)
            ]
            for proc in clients:  # all started (imports done) before any begins
                assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
            for proc in clients:
                assert proc.stdin is not None
                proc.stdin.write("go\n")
                proc.stdin.flush()
            results = [proc.communicate(timeout=seconds + 120)[0].split() for proc in clients]
            _UNITS[0] += sum(int(u) for u, _ in results)
            return sum(int(u) for u, _ in results) / max(float(t) for _, t in results)

        return server.measured(
            (lib, f"concurrent_{kind}_{processes}", "4 KB"),
            lambda: statistics.median(once() for _ in range(3)),
        )
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="short runs (smoke)")
    parser.add_argument("--no-reverb", action="store_true", help="compare with bench/README.md")
    parser.add_argument(
        "--only", action="append", metavar="NAME", help="workload name or pattern (repeatable)"
    )
    parser.add_argument(
        "--transport",
        choices=("grpc", "local"),
        default="grpc",
        help="resound's client transport: gRPC (default) or the same-host transport",
    )
    args = parser.parse_args()
    global RESOUND_TRANSPORT
    RESOUND_TRANSPORT = args.transport
    seconds = 0.5 if args.quick else 3.0
    items = 2_000 if args.quick else 20_000
    libs = ["resound"]
    if reverb_here(
        args.no_reverb,
        "dm-reverb imported: its server runs in another process too",
        "dm-reverb not importable here: bench/README.md's remote figures are used",
    ):
        libs.append("reverb")
    workloads: list[tuple[str, str, Callable[[str], float]]] = []
    for payload in PAYLOADS:
        workloads.append(
            ("insert_writer", payload, lambda lib, p=payload: insert(lib, p, seconds, 1))
        )
    workloads.append(
        ("insert_writer_flush2", "4 KB", lambda lib: insert(lib, "4 KB", seconds, 1, "flush2"))
    )
    workloads.append(("insert_trajectory", "4 KB", lambda lib: insert(lib, "4 KB", seconds, 10)))
    workloads.append(
        ("insert_client", "4 KB", lambda lib: insert(lib, "4 KB", seconds, 1, "client"))
    )
    for payload in ("4 KB", "400 KB"):
        for mode in ("uniform", "prioritized"):
            workloads.append(
                (
                    f"sample_{mode}",
                    payload,
                    lambda lib, p=payload, m=mode: sample(lib, p, seconds, items, m),
                )
            )
        workloads.append(
            (
                "sample_batch",
                payload,
                lambda lib, p=payload: sample(lib, p, seconds, items, "batch"),
            )
        )
    workloads.append(("sample_n1", "4 KB", lambda lib: sample(lib, "4 KB", seconds, items, "n1")))
    workloads.append(
        ("update_priorities", "100/batch", lambda lib: update_priorities(lib, seconds, items))
    )
    for kind in ("insert", "sample"):
        for n in (1, 2, 4) if kind == "insert" else (1, 2, 4, 8):
            workloads.append(
                (
                    f"concurrent_{kind}_{n}",
                    "4 KB",
                    lambda lib, k=kind, n=n: concurrent(lib, k, n, seconds, items),
                )
            )
    if args.only:
        workloads = [w for w in workloads if any(fnmatch.fnmatchcase(w[0], p) for p in args.only)]
    rows = []
    for name, payload, run in workloads:
        ours = run("resound")
        print(f"  {name:20s} {payload:7s} resound {fmt_rate(ours):>10s}", flush=True)
        if "reverb" in libs and name != "sample_batch":
            reference, label = run("reverb"), "same run"
            print(f"  {name:20s} {payload:7s} reverb  {fmt_rate(reference):>10s}", flush=True)
        elif "reverb" in libs:
            reference = next(
                (r[3] for r in rows if r[0] == "sample_uniform" and r[1] == payload), 0
            )
            label = "[sample_uniform]"
        else:
            reference, label = ANCHORS.get((name, payload), 0.0), "anchor"
        ratio = ours / reference if reference else float("nan")
        targets = LOCAL_TARGETS if RESOUND_TRANSPORT == "local" else TARGETS
        target = targets.get((name, payload))
        met = "-" if target is None else ("yes" if ratio >= target else "NO")
        rows.append([name, payload, ours, reference, label, ratio, target, met])
    if any(r[1] == "400 KB" and r[0].startswith("sample") for r in rows):
        ceiling = grpc_ceiling(seconds)
        rows.append(
            ["grpc_ceiling", "400 KB", ceiling, 0.0, "bare grpcio", float("nan"), None, "-"]
        )
    floors = floor_rows(rows, seconds)
    print_table(
        f"resound over {RESOUND_TRANSPORT} vs dm-reverb over gRPC (server in another process; "
        "medians of 3)",
        ["workload", "payload", "resound", "reverb", "ratio", "target", "met"],
        [
            [
                n,
                p,
                fmt_rate(o),
                f"{fmt_rate(r)} ({lab})" if r else lab,
                f"{x:.2f}x" if x == x else "-",
                "-" if t is None else f">={t:g}x",
                m,
            ]
            for n, p, o, r, lab, x, t, m in rows
        ],
    )

    cpu_rows = [
        [name, payload, f"{cpu / units * 1e6:.1f}" if units else "-", lib]
        for (lib, name, payload), (cpu, units) in sorted(SERVER_CPU.items(), key=lambda e: e[0][1:])
    ]
    if cpu_rows:
        print_table(
            "server process CPU per unit (items; keys for update_priorities), timed runs",
            ["workload", "payload", "CPU us/unit", "library"],
            cpu_rows,
        )
        if RESOUND_TRANSPORT == "local":
            # (Otherwise a one-call-at-a-time row reads as work it is not.)
            print(
                "(over the same-host transport a connection's thread spins for its client's "
                "next request, up to 1 ms after each answer: a client calling in a loop keeps "
                "it busy, so one-call-at-a-time rows count that spin as server CPU)"
            )
    if RESOUND_TRANSPORT == "local":
        for r in rows:
            if r[0] == "sample_uniform" and r[1] == "400 KB":
                gbps = r[2] * PAYLOADS["400 KB"] * 4 / 1e9
                met = "yes" if gbps >= LOCAL_TARGET_GBPS else "NO"
                target = f"target >= {LOCAL_TARGET_GBPS} GB/s: {met}"
                print(f"\n400 KB sampling: {gbps:.2f} GB/s ({target})")

    if floors:
        print_table(
            "one-item round trips against bare grpcio's (the same 4 KB message, same run; "
            "target: within 15 % of its cost, >= 0.87x its rate)",
            ["workload", "payload", "resound", "bare grpcio", "ratio", "met"],
            floors,
        )


# Rows bound by one round trip each: the bare grpcio call they compare with
# (bench/_bare_grpcio.py) and items per round trip. client.insert and the
# flush2 writer go over an open insert stream; sample(num_samples=1) and
# mutate_priorities are calls of their own.
FLOOR_OF = {
    ("insert_client", "4 KB"): ("stream", 1),
    ("insert_writer_flush2", "4 KB"): ("stream", 1),
    ("sample_n1", "4 KB"): ("unary", 1),
    ("update_priorities", "100/batch"): ("unary", 100),
}
FLOOR_TARGET = 1 / 1.15


def floor_rows(rows: list[list[Any]], seconds: float) -> list[list[str]]:
    """The latency-bound rows against the bare grpcio floor, measured now."""
    measured = {(r[0], r[1]): r[2] for r in rows if (r[0], r[1]) in FLOOR_OF}
    rates = {kind: grpc_floor(kind, seconds) for kind in {FLOOR_OF[k][0] for k in measured}}
    table = []
    for (name, payload), ours in measured.items():
        kind, per_call = FLOOR_OF[(name, payload)]
        floor = rates[kind] * per_call
        ratio = ours / floor
        table.append(
            [name, payload, fmt_rate(ours), f"{fmt_rate(floor)} ({kind})", f"{ratio:.2f}x",
             "yes" if ratio >= FLOOR_TARGET else "NO"]
        )  # fmt: skip
    return table


if __name__ == "__main__":
    main()
