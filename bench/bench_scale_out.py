"""One client over 1, 2 and 3 resound servers (separate processes on this
machine): how inserts and samples scale with servers, and where the CPU goes.

Workloads (4 KB items, every server a fresh subprocess per row):
  * insert: each client process runs 3 trajectory writers in turn (append +
    create_item over the last step), flushing at the end; the writers go to
    the servers in turn, so with 1 server all 3 write to it;
  * sample_batch: each client process calls sample_batch(table, 256) in a
    loop; the servers hold 20,000 items between them.
Each row runs with 1 and with 2 client processes. The 1-server row of each
workload is the baseline in the same run (ratio column). CPU columns give the
cores each side used on average (user + system time of its processes over
the timed window, from /proc), and the CPU microseconds each side spends per
item, which show where the time goes: on a machine of few cores the servers
and clients share them, so more servers cannot add throughput once the cores
are busy (or while one client process, bound by its GIL, is the limit).

Usage: python bench/bench_scale_out.py [--quick] [--servers 1,2,3] [--clients 1,2]
                                      [--workloads insert,sample_batch]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from dataclasses import dataclass

import numpy as np

import resound

from _common import cpu_seconds, fmt_rate, print_table

# A server process: one Uniform table, prints its port, serves until stdin closes.
SERVER = r"""
import sys, resound
table = resound.Table("replay", resound.selectors.Uniform(), resound.selectors.Fifo(),
                      int(sys.argv[1]), resound.rate_limiters.MinSize(1))
server = resound.Server([table])
print(server.port, flush=True)
sys.stdin.read()
server.stop()
"""

# A client process: connects to every server, prints "ready", waits for "go",
# works for the given seconds, prints units and elapsed seconds.
CLIENT = r"""
import sys, time
import numpy as np, resound
addresses, kind, seconds = sys.argv[1].split(","), sys.argv[2], float(sys.argv[3])
client = resound.Client(addresses, transport="grpc")
x = np.random.default_rng(0).integers(0, 256, 4000, dtype=np.uint8)
if kind == "insert":
    writers = [client.trajectory_writer(1) for _ in range(3)]
else:
    client.sample_batch("replay", 256)  # connections up before the clock starts
print("ready", flush=True)
sys.stdin.readline()
start, units = time.perf_counter(), 0
if kind == "insert":
    while time.perf_counter() < start + seconds:
        for _ in range(50):
            for writer in writers:
                writer.append([x])
                writer.create_item("replay", 1.0, [writer.history[0][-1:]])
        units += 50 * len(writers)
    for writer in writers:
        writer.flush()
else:
    while time.perf_counter() < start + seconds:
        units += len(client.sample_batch("replay", 256).info.key)
print(units, time.perf_counter() - start, flush=True)
"""

ITEMS = 20_000


def spawn(script: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", script, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )


@dataclass
class Outcome:
    rate: float
    server_cores: float
    client_cores: float


def run_once(kind: str, num_servers: int, num_clients: int, seconds: float) -> Outcome:
    servers = [spawn(SERVER, str(200_000)) for _ in range(num_servers)]
    try:
        addresses = [f"127.0.0.1:{int(s.stdout.readline())}" for s in servers]  # type: ignore[union-attr]
        if kind == "sample_batch":
            filler = resound.Client(addresses, transport="grpc")
            x = np.zeros(1000, np.float32)
            writers = [filler.trajectory_writer(1) for _ in addresses]  # one per server
            for step in range(ITEMS):
                writer = writers[step % len(writers)]
                writer.append([x])
                writer.create_item("replay", 1.0, [writer.history[0][-1:]])
            for writer in writers:
                writer.close()
        clients = [
            spawn(CLIENT, ",".join(addresses), kind, str(seconds)) for _ in range(num_clients)
        ]
        for client in clients:
            assert client.stdout is not None and client.stdout.readline() == "ready\n"
        everyone = [p.pid for p in servers + clients]
        before = {pid: cpu_seconds(pid) for pid in everyone}
        for client in clients:
            assert client.stdin is not None
            client.stdin.write("go\n")
            client.stdin.flush()
        # Server CPU is read when the last client reports (before it exits).
        results = []
        for client in clients:
            assert client.stdout is not None
            results.append(client.stdout.readline().split())
        after_servers = {p.pid: cpu_seconds(p.pid) for p in servers}
        client_cpu = 0.0
        for client in clients:
            client_cpu += cpu_seconds(client.pid) - before[client.pid]
            client.communicate(timeout=60)
        elapsed = max(float(t) for _, t in results)
        server_cpu = sum(after_servers[p.pid] - before[p.pid] for p in servers)
        return Outcome(
            sum(int(u) for u, _ in results) / elapsed, server_cpu / elapsed, client_cpu / elapsed
        )
    finally:
        for server in servers:
            assert server.stdin is not None
            server.stdin.close()
            server.wait(timeout=60)
            assert server.stdout is not None
            server.stdout.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="short runs (smoke)")
    parser.add_argument("--servers", default="1,2,3", help="server counts (default 1,2,3)")
    parser.add_argument("--clients", default="1,2", help="client process counts (default 1,2)")
    parser.add_argument(
        "--workloads", default="insert,sample_batch", help="default insert,sample_batch"
    )
    args = parser.parse_args()
    seconds = 0.5 if args.quick else 3.0
    repeats = 1 if args.quick else 3
    server_counts = [int(n) for n in args.servers.split(",")]
    client_counts = [int(n) for n in args.clients.split(",")]
    print(f"{os.cpu_count()} cores; medians of {repeats} runs of {seconds} s")
    rows = []
    for kind in args.workloads.split(","):
        if kind not in ("insert", "sample_batch"):
            parser.error(f"--workloads: {kind!r} is not insert or sample_batch")
        for num_clients in client_counts:
            baseline = None
            for num_servers in server_counts:
                outcomes = [
                    run_once(kind, num_servers, num_clients, seconds) for _ in range(repeats)
                ]
                rate = statistics.median(o.rate for o in outcomes)
                servers_cores = statistics.median(o.server_cores for o in outcomes)
                clients_cores = statistics.median(o.client_cores for o in outcomes)
                baseline = baseline or rate
                rows.append(
                    [
                        kind,
                        str(num_clients),
                        str(num_servers),
                        fmt_rate(rate),
                        f"{rate / baseline:.2f}x",
                        f"{servers_cores:.2f}",
                        f"{clients_cores:.2f}",
                        f"{servers_cores + clients_cores:.2f}",
                        f"{servers_cores / rate * 1e6:.1f}",
                        f"{clients_cores / rate * 1e6:.1f}",
                    ]
                )
                print("  " + " | ".join(rows[-1]), flush=True)
    print_table(
        "4 KB items/s with 1-3 servers (ratio: against 1 server in this run; CPU in cores)",
        [
            "workload",
            "clients",
            "servers",
            "items/s",
            "ratio",
            "server CPU",
            "client CPU",
            "total",
            "server us/item",
            "client us/item",
        ],
        rows,
    )


if __name__ == "__main__":
    main()
