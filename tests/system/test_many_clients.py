"""A server under a crowd: open calls cost no thread, busy clients all make
progress, a client that never reads holds up nobody, and a stop with a
thousand calls open ends every one of them.

Real servers on 127.0.0.1 ports they pick themselves. The crowds are real
gRPC calls: grpc.aio on this side (so a thousand open calls need no thousand
threads here either) and real client processes. Time limits are generous
deadlines, never speed assertions.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading

import grpc
import numpy as np
import pytest

import resound
from resound import _proto
from resound._wire.channel_options import CHANNEL_OPTIONS

from helpers.paths import REPO_ROOT
from helpers.waiting import SAFETY, Background, wait_until

P = _proto
OPEN_CALLS = 1_000
CONNECTIONS = 8


CROWD = REPO_ROOT / "tools" / "crowd.py"


class _Crowd:
    """A crowd's process (tools/crowd.py), its calls open once constructed."""

    def __init__(self, address: str, streams: int, samples: int) -> None:
        self._process = subprocess.Popen(
            [sys.executable, str(CROWD), address, "--streams", str(streams), "--samples",
             str(samples), "--connections", str(CONNECTIONS)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert self._answer() == "open"

    def ask(self, command: str) -> str:
        assert self._process.stdin is not None
        self._process.stdin.write(command + "\n")
        self._process.stdin.flush()
        return self._answer()

    def _answer(self) -> str:
        answer = Background(self._process.stdout.readline)  # type: ignore[union-attr]
        answer.join(10 * SAFETY)
        return answer.result.strip()

    def close(self) -> None:
        self._process.kill()
        self._process.wait(SAFETY)
        for pipe in (self._process.stdin, self._process.stdout):
            if pipe is not None:
                pipe.close()


def _server() -> resound.Server:
    return resound.Server(
        [
            resound.Table.queue("queue", OPEN_CALLS),
            resound.Table("sink", resound.selectors.Fifo(), resound.selectors.Fifo(),
                          10 * OPEN_CALLS, resound.rate_limiters.MinSize(1)),
            resound.Table("replay", resound.selectors.Uniform(), resound.selectors.Fifo(),
                          10_000, resound.rate_limiters.MinSize(1)),
        ]
    )  # fmt: skip


@pytest.mark.slow
def test_a_thousand_open_calls_leave_the_server_serving_others() -> None:
    server = _server()
    crowd = _Crowd(f"127.0.0.1:{server.port}", OPEN_CALLS // 2, OPEN_CALLS // 2)
    try:
        assert server.table("sink").info.current_size == OPEN_CALLS // 2
        # Another client is served as if nobody else were there: info,
        # inserts and samples of its own table.
        other = resound.Client(f"127.0.0.1:{server.port}", transport="grpc")
        assert {t.name for t in other.server_info(timeout=SAFETY).values()} >= {"queue", "sink"}
        other.insert([np.float32(3.0)], priorities={"replay": 1.0})
        [sample] = other.sample("replay", 1, emit_timesteps=False)
        assert sample.data[0] == np.float32(3.0)
        # The waiting samplers get what comes into their queue, one item each.
        for value in range(OPEN_CALLS // 2):
            other.insert([np.float32(value)], priorities={"queue": 1.0})
        assert crowd.ask("receive") == str(OPEN_CALLS // 2)
        assert server.table("queue").info.current_size == 0
    finally:
        server.stop()
        crowd.close()


@pytest.mark.slow
def test_stopping_a_server_with_a_thousand_calls_open_ends_each_of_them() -> None:
    server = _server()
    crowd = _Crowd(f"127.0.0.1:{server.port}", OPEN_CALLS // 2, OPEN_CALLS // 2)
    try:
        wait_until(lambda: server.open_calls == OPEN_CALLS, "every call open on the server")
        stop = Background(server.stop)
        stop.join(SAFETY)
        assert stop.error is None
        assert json.loads(crowd.ask("codes")) == {"CANCELLED": OPEN_CALLS}
    finally:
        server.stop()
        crowd.close()


def test_a_sampler_that_never_reads_holds_up_nobody() -> None:
    server = _server()
    address = f"127.0.0.1:{server.port}"
    payload = np.zeros(100_000, np.float32)  # 400 KB items
    writer = resound.Client(address, transport="grpc")
    for _ in range(20):
        writer.insert([payload], priorities={"replay": 1.0})
    channel = grpc.insecure_channel(address, options=CHANNEL_OPTIONS)
    try:
        # Asks for 64k samples of 400 KB (26 GB) and never reads a byte.
        request = P.SampleRequest(table="replay", num_samples=65_536, timeout_seconds=-1.0)
        opened = server.open_calls  # the writer's insert stream stays open
        greedy = channel.unary_stream(f"/{P.SERVICE}/Sample")(request.SerializeToString())
        wait_until(lambda: server.open_calls == opened + 1, "the greedy call open on the server")
        other = resound.Client(address, transport="grpc")
        for _ in range(20):
            assert len(other.sample_batch("replay", 4, timeout=SAFETY).info.key) == 4
            other.insert([payload], priorities={"replay": 1.0})
        greedy.cancel()
    finally:
        channel.close()
        server.stop()


def test_unread_responses_past_a_connections_budget_are_refused() -> None:
    server = resound.Server(
        [resound.Table("replay", resound.selectors.Uniform(), resound.selectors.Fifo(), 100,
                       resound.rate_limiters.MinSize(1))],
        max_inflight_bytes_per_connection=8 << 20,
    )  # fmt: skip
    address = f"127.0.0.1:{server.port}"
    writer = server.in_process_client()
    for _ in range(20):
        writer.insert([np.zeros(100_000, np.float32)], priorities={"replay": 1.0})
    channel = grpc.insecure_channel(address, options=CHANNEL_OPTIONS)
    request = P.SampleRequest(table="replay", num_samples=65_536, timeout_seconds=-1.0)
    sample = channel.unary_stream(f"/{P.SERVICE}/Sample")
    try:
        # The first call's first response (about 10 MB) is sent, however
        # large: nothing else of the connection is in flight. It is never read.
        greedy = sample(request.SerializeToString())
        wait_until(lambda: server.open_calls == 1, "the greedy call open")
        # A second call of the same connection would hold more: refused.
        with pytest.raises(grpc.RpcError) as caught:
            list(sample(request.SerializeToString(), timeout=SAFETY))
        assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "max_inflight_bytes_per_connection" in caught.value.details()
        # Other connections are served.
        other = resound.Client(address, transport="grpc")
        assert len(other.sample_batch("replay", 4, timeout=SAFETY).info.key) == 4
        greedy.cancel()
    finally:
        channel.close()
        server.stop()


# One client process of the busy crowd: THREADS threads, each with a client
# of its own, insert and sample one item at a time until the time is up, then
# print their counts.
BUSY_PROCESS = textwrap.dedent(
    """
    import sys, threading, time
    import numpy as np, resound
    address, threads, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    counts = [None] * threads
    def run(index):
        client = resound.Client(address, transport="grpc")
        inserts = samples = 0
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            client.insert([np.float32(index)], priorities={"replay": 1.0})
            inserts += 1
            samples += len(client.sample_batch("replay", 1, timeout=60).info.key)
        counts[index] = (inserts, samples)
    workers = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
    for worker in workers: worker.start()
    for worker in workers: worker.join()
    for inserts, samples in counts: print(inserts, samples)
    """
)


@pytest.mark.slow
def test_hundreds_of_busy_clients_each_make_progress() -> None:
    processes, threads, seconds = 4, 64, 3.0
    server = _server()
    try:
        runs = [
            subprocess.Popen(
                [sys.executable, "-c", BUSY_PROCESS, f"127.0.0.1:{server.port}", str(threads),
                 str(seconds)],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            )
            for _ in range(processes)
        ]  # fmt: skip
        counts = []
        for run in runs:
            out, err = run.communicate(timeout=10 * SAFETY)
            assert run.returncode == 0, err
            counts += [tuple(map(int, line.split())) for line in out.splitlines()]
        assert len(counts) == processes * threads
        assert all(inserts >= 1 and samples >= 1 for inserts, samples in counts), counts
        stats = server.table("replay").info.rate_limiter_info
        assert stats.insert_stats.completed == sum(inserts for inserts, _ in counts)
        assert stats.sample_stats.completed == sum(samples for _, samples in counts)
    finally:
        server.stop()


@pytest.mark.slow
def test_open_calls_cost_no_server_thread() -> None:
    server = _server()
    threads = threading.active_count()
    crowd = _Crowd(f"127.0.0.1:{server.port}", OPEN_CALLS // 2, OPEN_CALLS // 2)
    try:
        wait_until(lambda: server.open_calls == OPEN_CALLS, "every call open on the server")
        # The server serves them all from its loop: no thread per call.
        assert threading.active_count() - threads < 10
    finally:
        server.stop()
        crowd.close()


def test_open_calls_past_a_limit_are_refused_at_once_and_others_go_on() -> None:
    server = resound.Server(
        [resound.Table.queue("queue", 10)], max_open_calls=5, max_open_calls_per_connection=3
    )
    address = f"127.0.0.1:{server.port}"
    # Two client connections (gRPC shares one between channels of equal
    # options; a distinct option keeps them apart).
    first, second = (
        grpc.insecure_channel(address, options=[*CHANNEL_OPTIONS, ("resound.test", n)])
        for n in (1, 2)
    )
    request = P.SampleRequest(table="queue", num_samples=1, timeout_seconds=-1.0)

    def open_samples(channel: grpc.Channel, count: int) -> list[object]:
        """``count`` Sample calls on ``channel``, each open on the server (or
        refused) before the next starts."""
        calls = []
        for _ in range(count):
            opened = server.open_calls
            call = channel.unary_stream(f"/{P.SERVICE}/Sample")(request.SerializeToString())
            wait_until(
                lambda opened=opened, call=call: server.open_calls > opened or call.done(),
                "the call open or refused",
            )
            calls.append(call)
        return calls

    def refusal(call) -> tuple[grpc.StatusCode, str]:
        with pytest.raises(grpc.RpcError) as caught:
            list(call)
        return caught.value.code(), caught.value.details()

    def received(calls: list[object]) -> int:
        return sum(len(P.SampleResponse.FromString(raw).items.keys) for c in calls for raw in c)

    try:
        # One connection: 3 calls open, the 4th refused by the connection's limit.
        calls = open_samples(first, 4)
        code, details = refusal(calls[3])
        assert code == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "max_open_calls_per_connection" in details
        # Another connection: 2 more reach the server's limit of 5.
        more = open_samples(second, 3)
        code, details = refusal(more[2])
        assert code == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "max_open_calls" in details and "per_connection" not in details
        # Short calls are not counted; the open ones are served when items
        # come (put in by this process, as a client's insert stream would count).
        remote = resound.Client(address, transport="grpc")
        assert "queue" in {t.name for t in remote.server_info(timeout=SAFETY).values()}
        client = server.in_process_client()
        for value in range(5):
            client.insert([np.float32(value)], priorities={"queue": 1.0})
        assert received(calls[:3]) + received(more[:2]) == 5
        # Ended calls free their places.
        again = open_samples(first, 3)
        for value in range(3):
            client.insert([np.float32(value)], priorities={"queue": 1.0})
        assert received(again) == 3
    finally:
        first.close()
        second.close()
        server.stop()


def test_open_call_limits_are_checked() -> None:
    names = (
        "max_open_calls", "max_open_calls_per_connection", "max_inflight_bytes",
        "max_inflight_bytes_per_connection",
    )  # fmt: skip
    for name in names:
        for bad in (0, -1, 1.5, True, "8"):
            with pytest.raises(ValueError, match=name):
                resound.Server([resound.Table.queue("queue", 10)], **{name: bad})
