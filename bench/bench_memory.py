"""Memory each item costs beyond its payload: RSS growth while a table fills
through the trajectory writer, one chunk per item, next to dm-reverb's in
the same run when `import reverb` works here.

Two set-ups, each in fresh processes:
  * embedded: resound's Server(listen=False) and its in-process client in
    one process (dm-reverb: its server and a client of it in one process);
    the growth of that process;
  * server: the server in a process of its own, a writer in another
    (resound over its same-host transport, dm-reverb over gRPC); the growth
    of the server's process.

Each run writes 1,000 items first (every path warmed up), then takes the
baseline, writes N items of one step each (`append` of a float32 payload
of random bits, so compression gains nothing, then `create_item` over it)
into a Prioritized + Fifo table large enough to keep them all, flushes,
and reads the RSS again. "Beyond the payload" is the growth per item minus
the payload's bytes. Runs that would need more memory than the machine has
free (with a margin) are skipped and say so; 10M items of 4 KB need 40 GB.

Usage: python bench/bench_memory.py [--items N ...] [--payloads B ...]
                                    [--setups embedded server] [--no-reverb] [--quick]
  defaults: --items 50000 1000000 10000000 --payloads 400 4000
  --quick: 50,000 items of 4 KB only.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from typing import Any

from _common import print_table, reverb_here

# The table, the writer and the measurement, shared by both set-ups.
# {module}: resound or reverb; {items}, {size}: items and payload bytes.
WRITE = """
import gc, json, sys, time
import numpy as np
import {module} as mod

def rss(pid='self'):
    with open(f'/proc/{{pid}}/statm') as f:
        return int(f.read().split()[1]) * 4096

def table(n):
    return mod.Table(name='t', sampler=mod.selectors.Prioritized(0.6),
                     remover=mod.selectors.Fifo(), max_size=n + 1000,
                     rate_limiter=mod.rate_limiters.MinSize(1))

def fill(client, n, size, measure):
    x = np.random.default_rng(0).integers(0, 256, size, dtype=np.uint8).view(np.float32)
    writer = client.trajectory_writer(num_keep_alive_refs=1)
    def put(count):
        for index in range(count):
            writer.append({{'obs': x}})
            writer.create_item('t', 1.0, {{'obs': writer.history['obs'][-1]}})
            if index % 10_000 == 9_999:
                writer.flush()
        writer.flush()
    put(1000)  # every path warmed up before the baseline
    gc.collect(); time.sleep(0.2)
    before = measure()
    put(n)
    writer.close()
    gc.collect(); time.sleep(0.5)
    after = measure()
    size_now = client.server_info()['t'].current_size
    return {{'per_item': (after - before) / n, 'size': size_now}}
"""

EMBEDDED = (
    WRITE
    + """
n, size = {items}, {size}
if '{module}' == 'resound':
    server = mod.Server([table(n)], listen=False)
    client = server.in_process_client()
else:
    server = mod.Server([table(n)])
    client = mod.Client(f'localhost:{{server.port}}')
print(json.dumps(fill(client, n, size, rss)))
"""
)

# The server's process: prints its port and pid, serves until stdin closes.
SERVER = (
    WRITE
    + """
n = {items}
if '{module}' == 'resound':
    server = mod.Server([table(n)])
else:
    import socket
    with socket.socket() as probe:
        probe.bind(('127.0.0.1', 0))
        port = probe.getsockname()[1]
    server = mod.Server([table(n)], port=port)
print(server.port if '{module}' == 'resound' else port, flush=True)
sys.stdin.read()
server.stop()
"""
)

WRITER = (
    WRITE
    + """
n, size, port, pid = {items}, {size}, {port}, {pid}
if '{module}' == 'resound':
    client = mod.Client(f'localhost:{{port}}', transport='local')
else:
    client = mod.Client(f'localhost:{{port}}')
print(json.dumps(fill(client, n, size, lambda: rss(pid))))
"""
)


def free_bytes() -> int:
    with open("/proc/meminfo") as meminfo:
        fields = {line.split(":")[0]: int(line.split()[1]) * 1024 for line in meminfo}
    return fields["MemAvailable"]


def last_line(process: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    if process.returncode != 0:
        raise RuntimeError(
            f"a bench process failed ({process.returncode}):\n{process.stderr[-3000:]}"
        )
    return json.loads(process.stdout.strip().splitlines()[-1])


def run_embedded(module: str, items: int, size: int) -> dict[str, Any]:
    code = EMBEDDED.format(module=module, items=items, size=size)
    return last_line(
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=7200)
    )


def run_server(module: str, items: int, size: int) -> dict[str, Any]:
    # The server's errors go to a file (a pipe nobody reads could fill up
    # with TensorFlow's log lines and stall it), shown if it fails to start.
    with tempfile.TemporaryFile("w+") as errors:
        server = subprocess.Popen(
            [sys.executable, "-c", SERVER.format(module=module, items=items, size=size)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=errors,
            text=True,
        )
        try:
            assert server.stdout is not None
            line = server.stdout.readline()
            if not line.strip():
                errors.seek(0)
                raise RuntimeError(
                    f"the {module} server process did not start:\n{errors.read()[-3000:]}"
                )
            code = WRITER.format(
                module=module, items=items, size=size, port=int(line), pid=server.pid
            )
            return last_line(
                subprocess.run(
                    [sys.executable, "-c", code], capture_output=True, text=True, timeout=7200
                )
            )
        finally:
            assert server.stdin is not None
            server.stdin.close()
            server.wait(timeout=120)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, nargs="+", default=[50_000, 1_000_000, 10_000_000])
    parser.add_argument("--payloads", type=int, nargs="+", default=[400, 4000])
    parser.add_argument(
        "--setups", nargs="+", choices=("embedded", "server"), default=["embedded", "server"]
    )
    parser.add_argument("--no-reverb", action="store_true", help="resound only")
    parser.add_argument("--quick", action="store_true", help="50,000 items of 4 KB only")
    args = parser.parse_args()
    if args.quick:
        args.items, args.payloads = [50_000], [4000]
    modules = ["resound"]
    if reverb_here(args.no_reverb, "dm-reverb imported: measured in the same run", "no dm-reverb"):
        modules.append("reverb")
    runs = {"embedded": run_embedded, "server": run_server}
    # Generous per-item bounds: dm-reverb's server keeps ~1.6 KB beyond the
    # payload and its client a copy while it sends.
    overhead = {"resound": 1_000, "reverb": 4_000}
    rows = []
    for setup in args.setups:
        for size in args.payloads:
            for items in args.items:
                results = {}
                for module in modules:
                    what = f"{setup} {module} {items:,} x {size} B"
                    need = items * (size + overhead[module]) * 1.3
                    if need > free_bytes():
                        results[module] = None
                        print(f"  {what}: skipped (needs ~{need / 2**30:.0f} GB)")
                        continue
                    result = runs[setup](module, items, size)
                    if result["size"] != items + 1000:
                        raise RuntimeError(
                            f"{module} kept {result['size']} items of {items + 1000}"
                        )
                    results[module] = result["per_item"] - size
                    print(f"  {what}: {results[module]:,.0f} B beyond the payload", flush=True)
                ours, theirs = results["resound"], results.get("reverb")
                ratio = f"{ours / theirs:.2f}x" if ours is not None and theirs else "-"
                met = "-"
                if ours is not None:
                    met = (
                        "yes" if ours <= 400 and (theirs is None or ours <= 0.25 * theirs) else "NO"
                    )
                rows.append(
                    [
                        setup,
                        f"{size:,} B",
                        f"{items:,}",
                        "skipped" if ours is None else f"{ours:,.0f} B",
                        "-" if theirs is None else f"{theirs:,.0f} B",
                        ratio,
                        met,
                    ]
                )
    print_table(
        "memory per item beyond the payload (RSS growth; target <= 400 B, <= 25 % of dm-reverb's)",
        ["set-up", "payload", "items", "resound", "dm-reverb (same run)", "ratio", "met"],
        rows,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
