"""Refused requests are logged on ``resound.server`` at WARNING,
rate-limited per cause (docs/semantics.md §7.4). Real servers on
127.0.0.1; records via caplog.
"""

from __future__ import annotations

import logging

import grpc
import pytest

import resound
from resound import _proto
from resound._service.refusal_log import RefusalLog

from helpers.waiting import SAFETY


def _refusals(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "resound.server" and r.getMessage().startswith("refused ")
    ]


def test_refused_requests_are_logged_once_per_cause(caplog: pytest.LogCaptureFixture) -> None:
    server = resound.Server([resound.Table.queue("q", 10)])
    try:
        client = resound.Client(f"127.0.0.1:{server.port}", transport="grpc")
        channel = grpc.insecure_channel(f"127.0.0.1:{server.port}")
        reset = channel.unary_unary(f"/{_proto.SERVICE}/Reset")
        with caplog.at_level(logging.WARNING, logger="resound.server"):
            for _ in range(3):
                with pytest.raises(resound.NotFoundError):
                    client.reset("nope")
            for _ in range(2):
                with pytest.raises(grpc.RpcError) as raised:
                    reset(b"\xff\xff", timeout=SAFETY)
                assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            client.reset("q")  # answered: nothing to say
        channel.close()
    finally:
        server.stop()
    lines = _refusals(caplog)
    assert len(lines) == 2, lines  # the first of each cause
    assert lines[0].startswith("refused Reset from ipv4:127.0.0.1:")
    assert ": NOT_FOUND: Priority table nope was not found" in lines[0]
    assert ": INVALID_ARGUMENT: malformed ResetRequest" in lines[1]
    assert all(r.levelno == logging.WARNING for r in caplog.records if r.name == "resound.server")


def test_a_cause_logs_again_after_its_period_with_the_count_left_out(
    caplog: pytest.LogCaptureFixture,
) -> None:
    now = [0.0]
    log = RefusalLog(period=10.0, clock=lambda: now[0])
    with caplog.at_level(logging.WARNING, logger="resound.server"):
        for at in (0.0, 1.0, 2.0, 9.9, 10.0, 10.5, 25.0):
            now[0] = at
            log.refused("Insert", grpc.StatusCode.RESOURCE_EXHAUSTED, "over max_bytes", "peer")
        log.refused("Insert", grpc.StatusCode.DEADLINE_EXCEEDED, "not a refusal", "peer")
        log.refused("Sample", grpc.StatusCode.RESOURCE_EXHAUSTED, "another cause", "peer")
    lines = _refusals(caplog)
    assert lines == [
        "refused Insert from peer: RESOURCE_EXHAUSTED: over max_bytes",
        "refused Insert from peer: RESOURCE_EXHAUSTED: over max_bytes (3 more Insert requests "
        "refused with RESOURCE_EXHAUSTED since the last line were not logged)",
        "refused Insert from peer: RESOURCE_EXHAUSTED: over max_bytes (1 more Insert request "
        "refused with RESOURCE_EXHAUSTED since the last line were not logged)",
        "refused Sample from peer: RESOURCE_EXHAUSTED: another cause",
    ]
