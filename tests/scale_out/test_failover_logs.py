"""A client of several servers says, on ``resound.client``, when a server
goes down, when a writer fails over and when a server comes back, once per
transition (docs/scale-out.md). Real servers on 127.0.0.1; records via caplog.
"""

from __future__ import annotations

import logging

import numpy as np
import pytest

import resound

from helpers.waiting import SAFETY, wait_until


def _client_lines(caplog: pytest.LogCaptureFixture, needle: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "resound.client" and needle in r.getMessage()]


def test_a_server_going_down_and_coming_back_is_said_once_each(
    caplog: pytest.LogCaptureFixture,
) -> None:
    servers = [resound.Server([resound.Table.queue("q", 10)]) for _ in range(2)]
    addresses = [f"127.0.0.1:{s.port}" for s in servers]
    try:
        client = resound.Client(addresses, transport="grpc")
        client.server_info()
        port = servers[1].port
        servers[1].stop()
        with caplog.at_level(logging.INFO, logger="resound.client"):
            for _ in range(3):
                assert client.server_info()["q"].max_size == 10  # the other answers
            [down] = _client_lines(caplog, "is down")
            assert down.levelno == logging.WARNING
            assert down.getMessage().startswith(f"the server at {addresses[1]} is down")
            assert f"requests go to {addresses[0]} meanwhile" in down.getMessage()
            servers[1] = resound.Server([resound.Table.queue("q", 10)], port=port)

            def came_back() -> bool:
                client.server_info()
                return bool(_client_lines(caplog, "answers again"))

            wait_until(came_back, "the client saw the server again")
            client.server_info()
        [back] = _client_lines(caplog, "answers again")
        assert back.levelno == logging.INFO
        assert back.getMessage().startswith(f"the server at {addresses[1]} answers again after ")
        assert len(_client_lines(caplog, "is down")) == 1
    finally:
        for server in servers:
            server.stop()


def test_a_writer_failing_over_is_said(caplog: pytest.LogCaptureFixture) -> None:
    servers = [resound.Server([resound.Table.queue("q", 100)]) for _ in range(2)]
    addresses = [f"127.0.0.1:{s.port}" for s in servers]
    try:
        client = resound.Client(addresses, transport="grpc", failover=True)
        writer = client.trajectory_writer(num_keep_alive_refs=1)
        writer.append({"x": np.float32(0)})
        writer.create_item("q", 1.0, {"x": writer.history["x"][-1:]})
        writer.flush(timeout_ms=int(SAFETY * 1000))
        first = writer._link.transport.address
        gone, other = (0, 1) if first == addresses[0] else (1, 0)
        with caplog.at_level(logging.WARNING, logger="resound.client"):
            servers[gone].stop()
            writer.append({"x": np.float32(1)})
            writer.create_item("q", 1.0, {"x": writer.history["x"][-1:]})
            writer.flush(timeout_ms=int(SAFETY * 1000))
        writer.close()
        lines = _client_lines(caplog, "fail over")
        assert [r.getMessage() for r in lines] == [
            f"a writer's server at {addresses[gone]} went away: its unconfirmed items fail "
            f"over to {addresses[other]}"
        ]
        assert servers[other].table("q").info.current_size >= 1
    finally:
        for server in servers:
            server.stop()
