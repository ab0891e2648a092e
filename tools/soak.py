"""A bounded soak test: writer and sampler processes against one
resound-server for a while, watching the server's memory, throughput and
counters.

    python3 tools/soak.py                  # 60 s, 2 writers, 2 samplers; exits 1 if a check fails
    python3 tools/soak.py --seconds 600 --writers 4 --samplers 4

Writers append 4 KB steps and create items over the last 3 steps (so items
share chunks), flushing every 100 steps; samplers take batches of 64 and
write new priorities for half of each batch. The table (Prioritized, Fifo
remover) fills within the first seconds and then evicts as fast as writers
insert. Every second the server's resident memory, table size and counters
are read.

Checks, once the table is full:
  * memory stays flat: the server's largest resident size in the second half
    of the run is at most 10 % (plus 16 MB) above its largest in the first;
  * throughput does not decay: inserts and samples per second over the last
    quarter are at least half of those over the second quarter;
  * counters add up: the server counted exactly the items the writers had
    confirmed and the samples the samplers received.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

import resound

CONFIG = """
[[tables]]
name = "replay"
sampler = "prioritized"
priority_exponent = 0.6
remover = "fifo"
max_size = {max_size}
rate_limiter = {{ kind = "min_size", min_size_to_sample = 100 }}
"""

# The client processes run until SIGTERM, then finish their call and print
# their count.
PREAMBLE = textwrap.dedent(
    """
    import signal, sys
    import numpy as np, resound
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    client = resound.Client(sys.argv[1], transport="grpc")
    rng = np.random.default_rng(int(sys.argv[2]))
    count = 0
    """
)
WRITER = PREAMBLE + textwrap.dedent(
    """
    with client.trajectory_writer(3) as writer:
        print("ready", flush=True)
        while not stop:
            for _ in range(100):
                writer.append([rng.random(1000, dtype=np.float32)])
                if writer.episode_steps >= 3:
                    writer.create_item("replay", 1.0, [writer.history[0][-3:]])
                    count += 1
                if writer.episode_steps == 50:
                    writer.end_episode()
            writer.flush()
    print(count, flush=True)
    """
)
SAMPLER = PREAMBLE + textwrap.dedent(
    """
    print("ready", flush=True)
    while not stop:
        batch = client.sample_batch("replay", 64)
        count += len(batch.info.key)
        keys = batch.info.key[::2]
        client.update_priorities("replay", (keys, rng.random(len(keys)) + 0.1))
    print(count, flush=True)
    """
)


def resident_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


@dataclass
class Reading:
    seconds: float
    rss: int
    size: int
    inserts: int
    samples: int


def spawn(script: str, address: str, seed: int) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [sys.executable, "-c", script, address, str(seed)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None and process.stdout.readline() == "ready\n"
    return process


def rate(readings: list[Reading], field: str, start: float, end: float) -> float:
    window = [r for r in readings if start <= r.seconds <= end]
    if len(window) < 2:
        return float("nan")
    first, last = window[0], window[-1]
    return (getattr(last, field) - getattr(first, field)) / (last.seconds - first.seconds)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--writers", type=int, default=2)
    parser.add_argument("--samplers", type=int, default=2)
    parser.add_argument("--max-size", type=int, default=20_000, help="table max_size (items)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as directory:
        config = Path(directory) / "server.toml"
        config.write_text(CONFIG.format(max_size=args.max_size))
        server = subprocess.Popen(
            [sys.executable, "-m", "resound.server_command", "--config", str(config)],
            stderr=subprocess.PIPE,
            text=True,
        )
        assert server.stderr is not None
        port = None
        while port is None:
            line = server.stderr.readline()
            if not line:
                raise RuntimeError("the server exited before serving")
            if "serving" in line:
                port = int(line.split(" on ")[1].split(":")[1].split()[0])
        address = f"127.0.0.1:{port}"
        client = resound.Client(address)
        writers = [spawn(WRITER, address, seed) for seed in range(args.writers)]
        samplers = [spawn(SAMPLER, address, 100 + seed) for seed in range(args.samplers)]
        readings: list[Reading] = []
        start = time.monotonic()
        full_at = None
        print(f"{'s':>5} {'server RSS':>11} {'size':>7} {'inserts/s':>10} {'samples/s':>10}")
        while time.monotonic() - start < args.seconds:
            time.sleep(1.0)
            info = client.server_info()["replay"]
            reading = Reading(
                time.monotonic() - start,
                resident_bytes(server.pid),
                info.current_size,
                info.rate_limiter_info.insert_stats.completed,
                info.rate_limiter_info.sample_stats.completed,
            )
            if full_at is None and reading.size >= args.max_size:
                full_at = reading.seconds
            previous = readings[-1] if readings else Reading(0.0, 0, 0, 0, 0)
            span = reading.seconds - previous.seconds
            readings.append(reading)
            print(
                f"{reading.seconds:5.0f} {reading.rss / 2**20:8.1f} MB {reading.size:7d} "
                f"{(reading.inserts - previous.inserts) / span:10.0f} "
                f"{(reading.samples - previous.samples) / span:10.0f}",
                flush=True,
            )
        for process in writers + samplers:
            process.send_signal(signal.SIGTERM)
        counts = []
        for process in writers + samplers:
            out, _ = process.communicate(timeout=60)
            counts.append(int(out.split()[-1]))
        written, sampled = sum(counts[: args.writers]), sum(counts[args.writers :])
        final = client.server_info()["replay"]
        server.send_signal(signal.SIGTERM)
        server.communicate(timeout=60)

    failures = []
    if full_at is None:
        failures.append(f"the table never filled ({readings[-1].size} of {args.max_size} items)")
    else:
        after = [r for r in readings if r.seconds > full_at]
        half = len(after) // 2
        if half >= 2:
            first_peak = max(r.rss for r in after[:half])
            second_peak = max(r.rss for r in after[half:])
            print(
                f"server RSS once full: {first_peak / 2**20:.1f} MB (first half), "
                f"{second_peak / 2**20:.1f} MB (second half)"
            )
            if second_peak > first_peak * 1.10 + 16 * 2**20:
                failures.append("server memory grew after the table was full")
        end = readings[-1].seconds
        for field in ("inserts", "samples"):
            early = rate(readings, field, end * 0.25, end * 0.5)
            late = rate(readings, field, end * 0.75, end)
            print(f"{field}/s: {early:.0f} (second quarter), {late:.0f} (last quarter)")
            if not late >= 0.5 * early:
                failures.append(f"{field} per second decayed: {early:.0f} -> {late:.0f}")
    inserts = final.rate_limiter_info.insert_stats.completed
    samples = final.rate_limiter_info.sample_stats.completed
    print(f"writers confirmed {written} items; the server counted {inserts} inserts")
    print(f"samplers received {sampled} samples; the server counted {samples}")
    if inserts != written:
        failures.append(f"inserts: writers confirmed {written}, the server counted {inserts}")
    if samples != sampled:
        failures.append(f"samples: samplers received {sampled}, the server counted {samples}")
    if final.current_size != min(args.max_size, inserts):
        failures.append(f"table size {final.current_size} after {inserts} inserts")
    for failure in failures:
        print(f"FAILED: {failure}", file=sys.stderr)
    print("soak: OK" if not failures else "soak: FAILED")
    return 1 if failures else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
