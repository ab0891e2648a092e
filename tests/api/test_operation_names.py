"""Connection errors name the operation the user called and the server's
address, never an internal RPC name, and keep gRPC's own detail after it:
against a port with nothing listening and against a server that stopped."""

from __future__ import annotations

import logging
import re
import socket
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import resound
from resound import _operation_names
from resound._transport import waiting
from resound.errors import DeadlineExceededError

# The gRPC method names of replay.proto, which no message may start with.
RPC_NAMES = re.compile(
    r"^(Insert|Sample|SampleStream|MutatePriorities|Reset|ServerInfo|Checkpoint)\b"
)


def closed_port() -> int:
    """A port nothing listens on: picked free, then closed."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def failure(call: Callable[[], Any]) -> BaseException:
    with pytest.raises((ConnectionError, DeadlineExceededError, RuntimeError)) as raised:
        call()
    return raised.value


def check_named(error: BaseException, operation: str, address: str) -> None:
    message = str(error)
    assert message.startswith(operation), message
    assert not RPC_NAMES.search(message), message
    assert address in message, message


CALLS: dict[str, tuple[str, Callable[[resound.Client], Any]]] = {
    "insert": ("insert", lambda c: c.insert(np.zeros(3), {"replay": 1.0}, timeout=0.3)),
    "sample": ("sample from table 'replay'", lambda c: next(c.sample("replay", timeout=0.3))),
    "sample_batch": (
        "sample_batch from table 'replay'",
        lambda c: c.sample_batch("replay", 2, timeout=0.3),
    ),
    "sample_batches": (
        "sample_batches from table 'replay'",
        lambda c: next(iter(c.sample_batches("replay", 2, timeout=0.3))),
    ),
    "server_info": ("server_info", lambda c: c.server_info(timeout=0.3)),
    "checkpoint": ("checkpoint", lambda c: c.checkpoint()),
}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_nothing_listening(name: str) -> None:
    operation, call = CALLS[name]
    address = f"127.0.0.1:{closed_port()}"
    client = resound.Client(address, transport="grpc")
    error = failure(lambda: call(client))
    check_named(error, operation, address)
    assert re.search("connect|refused|not reachable", str(error)), str(error)


@pytest.mark.parametrize("name", sorted(CALLS))
def test_server_stopped(name: str) -> None:
    operation, call = CALLS[name]
    server = resound.Server([resound.Table.queue("replay", 10)])
    address = f"127.0.0.1:{server.port}"
    client = resound.Client(address, transport="grpc")
    client.server_info()  # connected once
    server.stop()
    check_named(failure(lambda: call(client)), operation, address)


@pytest.mark.parametrize("legacy", [False, True], ids=["TrajectoryWriter", "Writer"])
def test_a_writer_whose_server_stopped_names_its_own_method(legacy: bool) -> None:
    # (A writer against a server never reached waits for it, as Reverb's do.)
    server = resound.Server([resound.Table.queue("replay", 10)])
    address = f"127.0.0.1:{server.port}"
    client = resound.Client(address, transport="grpc")
    writer: Any = client.writer(1) if legacy else client.trajectory_writer(1)

    def write() -> None:
        writer.append(np.zeros(3, np.float32))
        if legacy:
            writer.create_item("replay", 1, 1.0)
            writer.flush()
        else:
            writer.create_item("replay", 1.0, writer.history[-1:])
            writer.flush(timeout_ms=300)

    write()
    server.stop()
    error = failure(write)
    # Whichever call finds the stream gone (append, once it is known) says so.
    check_named(error, "Writer." if legacy else "TrajectoryWriter.", address)
    assert str(error).endswith("the server stopped"), str(error)


def test_the_outermost_operation_names_the_error() -> None:
    error = ConnectionError("Insert: the server went away")
    _operation_names.rename(error, "TrajectoryWriter.flush", ["h:1"])
    _operation_names.rename(error, "Writer.flush", ["h:1"])
    assert str(error) == "Writer.flush at h:1: the server went away"
    other = ValueError("priority must be finite")
    _operation_names.rename(other, "insert", ["h:1"])
    assert str(other) == "priority must be finite"  # not a transport's message


def test_attributes_and_type_are_kept() -> None:
    error = DeadlineExceededError("Insert: the server at h:1 was not reachable within 1 s")
    error.num_inserted = 3
    _operation_names.rename(error, "insert", ["h:1"])
    assert isinstance(error, DeadlineExceededError)
    assert error.num_inserted == 3
    assert str(error) == "insert: the server at h:1 was not reachable within 1 s"


def test_waiting_warnings_name_the_operation(monkeypatch, caplog) -> None:
    monkeypatch.setattr(waiting, "WARNING_PERIOD_SECONDS", 0.05)
    address = f"127.0.0.1:{closed_port()}"
    client = resound.Client(address, transport="grpc")
    with caplog.at_level(logging.WARNING, logger="resound"):
        failure(lambda: client.insert(np.zeros(3), {"replay": 1.0}, timeout=0.5))
    warnings = [m for m in caplog.messages if "waiting for the server" in m]
    assert warnings, caplog.messages
    assert all(m.startswith(f"insert: waiting for the server at {address}") for m in warnings)
