"""A client whose server is not up yet waits for it, as Reverb's does (actors
and learners are often started before the server): calls up to their
timeout (then DeadlineExceededError, not an immediate ConnectionError),
without one until the server comes up; writers' streams until they get
through; samplers likewise. While it waits, the client warns on the
``resound`` logger, naming the address and the last connection error.

Every test starts a real server on a port it picked, after the call began
waiting (seen by its first warning, with the warning period shortened).
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import resound
from resound import rate_limiters, selectors
from resound import structured_writer as sw
from resound._transport import waiting
from resound.errors import DeadlineExceededError

from helpers.logs import Warnings
from helpers.waiting import SAFETY, Background


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def fifo_table() -> resound.Table:
    """Items come out in order, each once."""
    return resound.Table(
        "t", selectors.Fifo(), selectors.Fifo(), 100, rate_limiters.MinSize(1), max_times_sampled=1
    )


@pytest.fixture
def warnings(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str], Warnings]]:
    """watch(text) -> the warnings naming ``text``, with a 50 ms period."""
    monkeypatch.setattr(waiting, "WARNING_PERIOD_SECONDS", 0.05)
    logger = logging.getLogger("resound")
    handlers: list[Warnings] = []

    def watch(text: str) -> Warnings:
        handler = Warnings(text)
        logger.addHandler(handler)
        handlers.append(handler)
        return handler

    yield watch
    for handler in handlers:
        logger.removeHandler(handler)


@pytest.fixture(params=["auto", "grpc"])
def transport(request: Any) -> str:
    """The client's transport: 'auto' (the server will be in this process)
    or 'grpc' (always over the socket)."""
    return request.param


@pytest.fixture
def later() -> Iterator[Callable[[int], resound.Server]]:
    """start(port) -> a server of fifo_table() on that port; stopped at teardown."""
    servers: list[resound.Server] = []

    def start(port: int) -> resound.Server:
        server = resound.Server([fifo_table()], port=port)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


def waits_then_gets_through(
    call: Callable[[], Any], port: int, warnings: Callable[[str], Warnings], start: Any
) -> tuple[Any, resound.Server]:
    """Runs ``call`` on a thread; once it warned that it waits for the server
    at ``port``, starts that server; the call's result and the server."""
    seen = warnings(f"127.0.0.1:{port}")
    background = Background(call)
    assert seen.wait(SAFETY), "the waiting call never warned"
    assert not background.done(), background.error
    server = start(port)
    return background.value(), server


# --- unary calls


def test_server_info_with_a_timeout_waits_for_it_then_raises_deadline_exceeded(transport):
    client = resound.Client(f"127.0.0.1:{free_port()}", transport=transport)
    started = time.monotonic()
    with pytest.raises(DeadlineExceededError, match="not reachable within 1.0 s"):
        client.server_info(timeout=1.0)
    assert time.monotonic() - started >= 0.9  # it waited, it did not fail at once


def test_server_info_without_a_timeout_returns_once_the_server_is_up(transport, warnings, later):
    port = free_port()
    client = resound.Client(f"127.0.0.1:{port}", transport=transport)
    info, _ = waits_then_gets_through(client.server_info, port, warnings, later)
    assert info["t"].current_size == 0


def test_the_warning_names_the_address_and_the_last_connection_error(warnings):
    port = free_port()
    seen = warnings(f"127.0.0.1:{port}")
    with pytest.raises(DeadlineExceededError):
        resound.Client(f"127.0.0.1:{port}", transport="grpc").server_info(timeout=0.5)
    assert seen.messages, "no warning while waiting 0.5 s with a 50 ms period"
    message = seen.messages[0]
    assert message.startswith("server_info: waiting for") and "last error: " in message
    assert "refused" in message.lower() or "connect" in message.lower(), message


def test_mutate_priorities_and_reset_wait_for_the_server(transport, warnings, later):
    port = free_port()
    client = resound.Client(f"127.0.0.1:{port}", transport=transport)

    def reset_then_update() -> int:
        client.reset("t")
        client.mutate_priorities("t", updates={1: 1.0})
        return client.server_info()["t"].current_size

    size, _ = waits_then_gets_through(reset_then_update, port, warnings, later)
    assert size == 0


def test_checkpoint_fails_at_once_as_reverbs_does():
    client = resound.Client(f"127.0.0.1:{free_port()}", transport="grpc")
    with pytest.raises(ConnectionError):
        client.checkpoint()


# --- writers


def test_insert_with_a_timeout_raises_deadline_exceeded(transport):
    client = resound.Client(f"127.0.0.1:{free_port()}", transport=transport)
    with pytest.raises(DeadlineExceededError):
        client.insert([np.float32(1.0)], priorities={"t": 1.0}, timeout=0.5)


def test_insert_without_a_timeout_goes_in_once_the_server_is_up(transport, warnings, later):
    port = free_port()
    client = resound.Client(f"127.0.0.1:{port}", transport=transport)
    _, server = waits_then_gets_through(
        lambda: client.insert([np.float32(7.0)], priorities={"t": 1.0}), port, warnings, later
    )
    assert server.table("t").info.current_size == 1


def write_with_a_trajectory_writer(client: resound.Client) -> None:
    with client.trajectory_writer(2) as writer:
        for step in range(3):
            writer.append({"x": np.float32(step)})
            writer.create_item("t", 1.0, {"x": writer.history["x"][-1:]})
        writer.flush()


def write_with_a_structured_writer(client: resound.Client) -> None:
    config = sw.create_config(sw.pattern_from_transform({"x": None}, lambda s: s["x"][-1:]), "t")
    with client.structured_writer([config]) as writer:
        for step in range(3):
            writer.append({"x": np.float32(step)})
        writer.flush()


@pytest.mark.parametrize("write", [write_with_a_trajectory_writer, write_with_a_structured_writer])
def test_writers_started_before_the_server_deliver_once_it_is_up(transport, warnings, later, write):
    port = free_port()
    client = resound.Client(f"127.0.0.1:{port}", transport=transport)
    _, server = waits_then_gets_through(lambda: write(client), port, warnings, later)
    assert server.table("t").info.current_size == 3


def test_a_writers_flush_times_out_while_no_server_is_up(warnings, later):
    # The client knows the table from a server that has stopped since (a
    # server killed under a writer: tests/system/test_faults.py).
    first = resound.Server([fifo_table()])
    port = first.port
    client = resound.Client(f"127.0.0.1:{port}", transport="grpc")
    client.server_info()
    first.stop()
    seen = warnings(f"127.0.0.1:{port}")
    writer = client.trajectory_writer(1)
    writer.append([np.float32(1.0)])
    writer.create_item("t", 1.0, [writer.history[0][-1:]])
    with pytest.raises(DeadlineExceededError):
        writer.flush(timeout_ms=300)
    assert seen.wait(SAFETY), "the waiting stream never warned"
    assert "Insert" in seen.messages[0]
    server = later(port)
    writer.flush(timeout_ms=int(SAFETY * 1000))  # the stream reached the new server
    assert server.table("t").info.current_size == 1
    writer.close()


# --- samplers


def test_samplers_with_a_timeout_raise_deadline_exceeded(transport):
    client = resound.Client(f"127.0.0.1:{free_port()}", transport=transport)
    with pytest.raises(DeadlineExceededError):
        next(client.sample("t", 1, timeout=0.5))
    with pytest.raises(DeadlineExceededError):
        client.sample_batch("t", 2, timeout=0.5)
    with (
        client.sample_batches("t", 2, timeout=0.5) as batches,
        pytest.raises(DeadlineExceededError),
    ):
        next(iter(batches))


@pytest.mark.parametrize("how", ["sample", "sample_batch", "sample_batches"])
def test_samplers_started_before_the_server_sample_once_it_is_up(transport, warnings, later, how):
    port = free_port()
    client = resound.Client(f"127.0.0.1:{port}", transport=transport)
    seen = warnings(f"127.0.0.1:{port}")

    def sample() -> list[float]:
        if how == "sample":
            return [float(s.data[0][0]) for s in client.sample("t", 2, emit_timesteps=False)]
        if how == "sample_batch":
            return client.sample_batch("t", 2).data[0][:, 0].tolist()
        with client.sample_batches("t", 2, num_batches=1) as batches:
            return [value for batch in batches for value in batch.data[0][:, 0].tolist()]

    background = Background(sample)
    assert seen.wait(SAFETY), "the waiting sampler never warned"
    server = later(port)
    writer = server.in_process_client()
    for value in (1.0, 2.0):
        writer.insert([np.float32(value)], priorities={"t": 1.0})
    assert background.value() == [1.0, 2.0]


# --- several servers


def test_with_every_server_down_a_client_of_several_waits_for_one(warnings, later):
    ports = [free_port(), free_port()]
    client = resound.Client([f"127.0.0.1:{p}" for p in ports], transport="grpc")
    with pytest.raises(DeadlineExceededError):
        client.server_info(timeout=0.5)
    with pytest.raises(DeadlineExceededError):
        client.sample_batch("t", 2, timeout=0.5)
    with pytest.raises(DeadlineExceededError):
        client.insert([np.float32(1.0)], priorities={"t": 1.0}, timeout=0.5)
    with pytest.raises(ConnectionError, match="did not reach 2 server"):
        client.checkpoint()  # fails at once, as with one server

    seen = warnings("every server")
    background = Background(lambda: client.server_info()["t"].current_size)
    assert seen.wait(SAFETY), "the waiting client never warned"
    assert str(ports[0]) in seen.messages[0]
    server = later(ports[1])
    assert background.value() == 0
    sampled = Background(lambda: client.sample_batch("t", 1, timeout=SAFETY).data[0].tolist())
    server.in_process_client().insert([np.float32(3.0)], priorities={"t": 1.0})
    assert sampled.value() == [[3.0]]


def test_priority_updates_go_on_one_open_call_and_reach_a_successor_server():
    def prioritized() -> resound.Table:
        return resound.Table(
            "p", selectors.Prioritized(1.0), selectors.Fifo(), 10, rate_limiters.MinSize(1)
        )

    def update_and_read_back(server: resound.Server, client: resound.Client) -> float:
        local = server.in_process_client()
        local.insert(np.float32(1), priorities={"p": 1.0})
        key = int(local.sample_batch("p", 1).info.key[0])
        client.mutate_priorities("p", updates={key: 7.5})
        return float(local.sample_batch("p", 1).info.priority[0])

    port = free_port()
    client = resound.Client(f"127.0.0.1:{port}", transport="grpc")
    server = resound.Server([prioritized()], port=port)
    try:
        assert update_and_read_back(server, client) == 7.5
        # The updates' call stays open for the next ones (one per thread).
        assert server.open_calls == 1
        client.mutate_priorities("p", updates={1: 1.0})
        client.mutate_priorities("p", updates={2: 1.0})
        assert server.open_calls == 1
    finally:
        server.stop()
    # That call ended with the stop, as a call of its own would have: the
    # next update reaches the server that follows at the address.
    successor = resound.Server([prioritized()], port=port)
    try:
        assert update_and_read_back(successor, client) == 7.5
    finally:
        successor.stop()
