"""Many clients against one server in its own process, loopback only.

For 1, 8, 64, 256 and 512 busy clients (threads spread over up to 8
processes, each thread with a client of its own, inserting one 4 KB item and
sampling one item in turn), beside 0, 1,024 and 4,096 idle calls (half insert
streams between episodes, half samples waiting on an empty queue: the crowd
of tools/crowd.py): aggregate items/s and samples/s, p50 / p99 of a
``server_info`` probe sent meanwhile from this process, the server's RSS and
its CPU time per operation (insert or sample). The same against dm-reverb
when ``import reverb`` works here (busy clients only: the crowd speaks
resound's protocol).

Targets (issue 15): every client makes progress; aggregate throughput at 512
clients no lower than at 8. Beside them, bare grpcio with the same threads and
processes (no application work: two 4 KB stream round trips per turn against
a grpc.aio echo server, bench/_bare_grpcio.py): how Python gRPC itself scales
from 8 to 512 clients on this machine.

Usage: python bench/bench_many_clients.py [--quick] [--no-reverb] [--seconds S]
"""

from __future__ import annotations

import argparse
import contextlib
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from _bare_grpcio import grpc_crowd
from _common import cpu_seconds, fmt_rate, print_table, reverb_here

CLIENTS = (1, 8, 64, 256, 512)
IDLE_CALLS = (0, 1024, 4096)
MAX_PROCESSES = 8
PROBE_EVERY = 0.05
CROWD = Path(__file__).parent.parent / "tools" / "crowd.py"

# The server: tables 'replay' (what the busy clients use), 'sink' (the idle
# streams' one item each) and 'queue' (empty: the idle samples wait on it);
# prints its port and serves until its stdin closes.
SERVER = r"""
import sys
lib = sys.argv[1]
mod = __import__(lib)
def table(name, sampler, remover, size):
    return mod.Table(name=name, sampler=sampler, remover=remover, max_size=size,
                     rate_limiter=mod.rate_limiters.MinSize(1))
server = mod.Server(tables=[
    table("replay", mod.selectors.Uniform(), mod.selectors.Fifo(), 100_000),
    table("sink", mod.selectors.Fifo(), mod.selectors.Fifo(), 100_000),
    mod.Table.queue("queue", 10),
])
print(server.port, flush=True)
sys.stdin.read()
server.stop()
"""

# A process of busy clients: builds THREADS clients, prints "ready", waits for
# a line on stdin, then each thread inserts and samples for SECONDS; prints one
# "inserts samples" line per thread.
BUSY = r"""
import sys, threading, time
import numpy as np
lib, address, threads, seconds = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
mod = __import__(lib)
clients = [mod.Client(address) for _ in range(threads)]
for client in clients:
    client.server_info()
payload = np.zeros(1000, np.float32)
counts = [None] * threads
def run(index):
    client, inserts, samples = clients[index], 0, 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        client.insert([payload], priorities={"replay": 1.0})
        inserts += 1
        samples += len(list(client.sample("replay", num_samples=1)))
    counts[index] = (inserts, samples)
print("ready", flush=True)
sys.stdin.readline()
workers = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
for worker in workers: worker.start()
for worker in workers: worker.join()
for inserts, samples in counts: print(inserts, samples, flush=True)
"""


def _spawn(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )


def _line(process: subprocess.Popen[str]) -> str:
    assert process.stdout is not None
    return process.stdout.readline().strip()


def _end(process: subprocess.Popen[str]) -> None:
    assert process.stdin is not None
    with contextlib.suppress(BrokenPipeError):
        process.stdin.close()
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    if process.stdout is not None:
        process.stdout.close()


@contextlib.contextmanager
def _served(lib: str) -> Iterator[tuple[int, int]]:
    """(pid, port) of a fresh server of ``lib`` in another process."""
    process = _spawn("-c", SERVER, lib)
    try:
        yield process.pid, int(_line(process))
    finally:
        _end(process)


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _probe(lib: str, address: str, stop: threading.Event, latencies: list[float]) -> None:
    client = __import__(lib).Client(address)
    client.server_info()
    while not stop.wait(PROBE_EVERY):
        start = time.perf_counter()
        client.server_info()
        latencies.append(time.perf_counter() - start)


def measure(lib: str, clients: int, idle: int, seconds: float) -> dict[str, Any]:
    with _served(lib) as (pid, port):
        address = f"127.0.0.1:{port}"
        crowd = None
        if idle:
            crowd = _spawn(str(CROWD), address, "--streams", str(idle // 2),
                           "--samples", str(idle - idle // 2))  # fmt: skip
            assert _line(crowd) == "open", "the crowd could not open its calls"
        processes = min(clients, MAX_PROCESSES)
        busy = [
            _spawn("-c", BUSY, lib, address, str(clients // processes + (i < clients % processes)),
                   str(seconds))
            for i in range(processes)
        ]  # fmt: skip
        try:
            for process in busy:
                assert _line(process) == "ready", "a client process could not start"
            latencies: list[float] = []
            stop = threading.Event()
            prober = threading.Thread(target=_probe, args=(lib, address, stop, latencies))
            prober.start()
            cpu = cpu_seconds(pid)
            for process in busy:
                assert process.stdin is not None
                process.stdin.write("go\n")
                process.stdin.flush()
            counts = []
            for process in busy:
                assert process.stdout is not None
                counts += [tuple(map(int, line.split())) for line in process.stdout]
            cpu = cpu_seconds(pid) - cpu
            rss = _rss_mb(pid)
            stop.set()
            prober.join()
        finally:
            for process in busy:
                _end(process)
            if crowd is not None:
                _end(crowd)
    inserts = sum(c[0] for c in counts)
    samples = sum(c[1] for c in counts)
    latencies.sort()
    return {
        "clients": clients,
        "idle": idle,
        "inserts": inserts / seconds,
        "samples": samples / seconds,
        "all_progressed": len(counts) == clients and all(min(c) >= 1 for c in counts),
        "p50": latencies[len(latencies) // 2] if latencies else float("nan"),
        "p99": latencies[int(len(latencies) * 0.99)] if latencies else float("nan"),
        "rss_mb": rss,
        "cpu_us_per_op": cpu * 1e6 / max(1, inserts + samples),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer, shorter runs (smoke)")
    parser.add_argument("--no-reverb", action="store_true", help="resound only")
    parser.add_argument("--seconds", type=float, default=None, help="busy time per run")
    args = parser.parse_args()
    seconds = args.seconds or (2.0 if args.quick else 5.0)
    clients = CLIENTS[:3] if args.quick else CLIENTS
    idle_calls = IDLE_CALLS[:2] if args.quick else IDLE_CALLS
    libs = ["resound"]
    if reverb_here(args.no_reverb, "dm-reverb imported: measured in the same run", "resound only"):
        libs.append("reverb")
    rows = []
    results: dict[tuple[str, int, int], dict[str, Any]] = {}
    for lib in libs:
        for idle in idle_calls if lib == "resound" else (0,):
            for count in clients:
                result = measure(lib, count, idle, seconds)
                results[(lib, count, idle)] = result
                print(f"  {lib} clients={count} idle={idle}: {result}", flush=True)
                rows.append([
                    lib, str(count), str(idle), fmt_rate(result["inserts"]),
                    fmt_rate(result["samples"]), "yes" if result["all_progressed"] else "NO",
                    f"{result['p50'] * 1e3:.1f} / {result['p99'] * 1e3:.1f}",
                    f"{result['rss_mb']:.0f}", f"{result['cpu_us_per_op']:.0f}",
                ])  # fmt: skip
    print_table(
        f"busy clients beside idle calls, one server in its own process ({seconds:g} s runs)",
        ["library", "clients", "idle calls", "inserts/s", "samples/s", "all progressed",
         "server_info p50 / p99 ms", "server RSS MB", "server CPU us/op"],
        rows,
    )  # fmt: skip
    bare = {count: grpc_crowd(count, min(count, MAX_PROCESSES), seconds) for count in clients}
    print_table(
        "bare grpcio, the same client threads and processes (4 KB stream round trips)",
        ["clients", "round trips/s"],
        [[str(count), fmt_rate(rate)] for count, rate in bare.items()],
    )
    if 8 in bare and clients[-1] > 8:
        print(
            f"bare grpcio: throughput at {clients[-1]} clients is "
            f"{bare[clients[-1]] / bare[8]:.2f}x that at 8"
        )
    for lib in libs:
        for idle in idle_calls if lib == "resound" else (0,):
            low, high = results.get((lib, 8, idle)), results.get((lib, clients[-1], idle))
            if low and high and clients[-1] > 8:
                ratio = (high["inserts"] + high["samples"]) / (low["inserts"] + low["samples"])
                print(
                    f"{lib}, {idle} idle calls: throughput at {clients[-1]} clients is "
                    f"{ratio:.2f}x that at 8 (target >= 1)"
                )


if __name__ == "__main__":
    main()
