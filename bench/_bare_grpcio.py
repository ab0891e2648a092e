"""What bare grpcio does between two Python processes here, with no
application work at either end: the references of bench_remote.py's rows.

* ``grpc_ceiling``: 400 KB items/s that a stream of ready-made 16 MB
  messages carries (the most any sampler served from Python can reach);
* ``grpc_floor``: round trips/s of a 4 KB message, as a unary call
  (``"unary"``) or on one open bidirectional stream (``"stream"``): the
  least a one-item remote call can cost.

Each runs a bare grpcio server in a subprocess (generic bytes handlers).
"""

from __future__ import annotations

import queue
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator

__all__ = ["grpc_ceiling", "grpc_floor"]

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


def _timed(step: Callable[[], int], seconds: float) -> float:
    """Units/s of ``step`` (which returns how many it did), run for ``seconds``."""
    done = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        done += step()
    return done / (time.perf_counter() - start)


def _served(measure: Callable[[str], float]) -> float:
    """``measure(address)`` against a bare server in a subprocess."""
    process = subprocess.Popen(
        [sys.executable, "-c", _SERVER],
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
