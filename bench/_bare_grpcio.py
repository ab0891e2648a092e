"""What bare grpcio does between two Python processes here, with no
application work at either end: the references of bench_remote.py's rows.

* ``grpc_ceiling``: 400 KB items/s that a stream of ready-made 16 MB
  messages carries (the most any sampler served from Python can reach);
* ``grpc_floor``: round trips/s of a 4 KB message, as a unary call
  (``"unary"``) or on one open bidirectional stream (``"stream"``): the
  least a one-item remote call can cost;
* ``grpc_crowd``: round trips/s of many client threads over several
  processes, each pinging 4 KB on two open streams in turn (the shape of
  bench_many_clients' busy clients: an insert, then a sample), against a
  grpc.aio server: how far Python gRPC itself scales on this machine.

Each runs a bare grpcio server in a subprocess (generic bytes handlers).
"""

from __future__ import annotations

import queue
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator

__all__ = ["grpc_ceiling", "grpc_crowd", "grpc_floor"]

_ITEM_BYTES_400KB = 400_000
_FLOOR_BYTES = 4_000

_SERVER = r"""
import os, sys
from concurrent import futures
import grpc
options = [("grpc.max_send_message_length", 1 << 30), ("grpc.max_receive_message_length", 1 << 30)]
blob = os.urandom(16 << 20)
def get(request, context):
    for _ in range(int.from_bytes(request, "little")):
        yield blob
def echo(request, context):
    return request
def chat(requests, context):
    for request in requests:
        yield request
server = grpc.server(futures.ThreadPoolExecutor(4), options=options)
server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler("bare.Service", {
    "Get": grpc.unary_stream_rpc_method_handler(get),
    "Echo": grpc.unary_unary_rpc_method_handler(echo),
    "Chat": grpc.stream_stream_rpc_method_handler(chat),
})])
port = server.add_insecure_port("127.0.0.1:0")
server.start()
print(port, flush=True)
sys.stdin.read()
server.stop(0)
"""

# The same echo on grpc.aio: a thread-pool server holds one thread per open
# stream, and a crowd keeps hundreds open.
_AIO_SERVER = r"""
import asyncio, sys
import grpc
async def chat(requests, context):
    async for request in requests:
        yield request
async def main():
    server = grpc.aio.server()
    server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler("bare.Service", {
        "Chat": grpc.stream_stream_rpc_method_handler(chat),
    })])
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    print(port, flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    await server.stop(0)
asyncio.run(main())
"""

# A process of the crowd: THREADS threads, each with a channel and two open
# streams; prints "ready", waits for a line, pings for SECONDS, prints the
# round trips it made.
_CROWD_PROCESS = r"""
import queue, sys, threading, time
import grpc
address, threads, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
payload = b"x" * 4000
def stream(channel):
    outbox = queue.SimpleQueue()
    def requests():
        while (message := outbox.get()) is not None:
            yield message
    return outbox, channel.stream_stream("/bare.Service/Chat")(requests())
calls = []
for _ in range(threads):
    channel = grpc.insecure_channel(address)
    calls.append((stream(channel), stream(channel)))
for pair in calls:
    for outbox, replies in pair:
        outbox.put(payload)
        next(replies)
counts = [0] * threads
def run(index):
    done, end = 0, time.monotonic() + seconds
    while time.monotonic() < end:
        for outbox, replies in calls[index]:
            outbox.put(payload)
            next(replies)
            done += 1
    counts[index] = done
print("ready", flush=True)
sys.stdin.readline()
workers = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
for worker in workers: worker.start()
for worker in workers: worker.join()
print(sum(counts), flush=True)
"""


def _timed(step: Callable[[], int], seconds: float) -> float:
    """Units/s of ``step`` (which returns how many it did), run for ``seconds``."""
    done = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        done += step()
    return done / (time.perf_counter() - start)


def _served(measure: Callable[[str], float], server: str = _SERVER) -> float:
    """``measure(address)`` against a bare server in a subprocess."""
    process = subprocess.Popen(
        [sys.executable, "-c", server],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert process.stdout is not None
        return measure(f"127.0.0.1:{int(process.stdout.readline())}")
    finally:
        assert process.stdin is not None
        process.stdin.close()
        process.wait(timeout=60)


def grpc_ceiling(seconds: float) -> float:
    """400 KB items/s that a bare grpcio stream carries here (medians of 3)."""
    import grpc

    def measure(address: str) -> float:
        options = [("grpc.max_receive_message_length", 1 << 30)]
        with grpc.insecure_channel(address, options=options) as channel:
            call = channel.unary_stream("/bare.Service/Get")

            def step() -> int:  # 7 messages of 16 MB: about one 256-item batch
                received = sum(len(message) for message in call((7).to_bytes(4, "little")))
                return received // _ITEM_BYTES_400KB

            step()
            return statistics.median(_timed(step, seconds) for _ in range(3))

    return _served(measure)


def grpc_floor(kind: str, seconds: float) -> float:
    """Round trips/s of a 4 KB message: ``kind`` "unary" (a call each) or
    "stream" (one open bidirectional stream). Medians of 3."""
    import grpc

    payload = b"x" * _FLOOR_BYTES

    def measure(address: str) -> float:
        with grpc.insecure_channel(address) as channel:
            if kind == "unary":
                echo = channel.unary_unary("/bare.Service/Echo")

                def step() -> int:
                    echo(payload)
                    return 1

            else:
                outbox: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()

                def requests() -> Iterator[bytes]:
                    while (message := outbox.get()) is not None:
                        yield message

                replies = channel.stream_stream("/bare.Service/Chat")(requests())

                def step() -> int:
                    outbox.put(payload)
                    next(replies)
                    return 1

            for _ in range(100):
                step()
            rate = statistics.median(_timed(step, seconds) for _ in range(3))
            if kind == "stream":
                outbox.put(None)
            return rate

    return _served(measure)


def grpc_crowd(threads: int, processes: int, seconds: float) -> float:
    """Round trips/s of ``threads`` client threads spread over ``processes``
    processes, each pinging 4 KB on its two open streams in turn, against a
    bare grpc.aio server (one run)."""

    def measure(address: str) -> float:
        crowd = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    _CROWD_PROCESS,
                    address,
                    str(threads // processes + (i < threads % processes)),
                    str(seconds),
                ],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
            )  # fmt: skip
            for i in range(processes)
        ]
        try:
            for process in crowd:
                assert process.stdout is not None and process.stdout.readline().strip() == "ready"
            for process in crowd:
                assert process.stdin is not None
                process.stdin.write("go\n")
                process.stdin.flush()
            total = 0
            for process in crowd:
                assert process.stdout is not None
                total += int(process.stdout.readline())
            return total / seconds
        finally:
            for process in crowd:
                process.kill()
                process.wait()

    return _served(measure, _AIO_SERVER)
