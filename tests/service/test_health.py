"""The standard gRPC health service of a listening server: SERVING for the
server and resound.v1.Replay while it serves, NOT_SERVING from the moment
``stop()`` begins (watchers hear it before the calls end), and it answers
while the replay calls have used up the server's open-call limit."""

from __future__ import annotations

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

import resound

from helpers.waiting import SAFETY, Background, wait_until

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


@pytest.fixture
def server():
    server = resound.Server([resound.Table.queue("queue", 10)])
    yield server
    server.stop()


def health_stub(port: int) -> tuple[grpc.Channel, health_pb2_grpc.HealthStub]:
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    return channel, health_pb2_grpc.HealthStub(channel)


def check(stub: health_pb2_grpc.HealthStub, service: str) -> int:
    request = health_pb2.HealthCheckRequest(service=service)
    return stub.Check(request, timeout=SAFETY).status


def test_the_server_and_the_replay_service_are_serving(server):
    channel, stub = health_stub(server.port)
    with channel:
        assert check(stub, "") == SERVING
        assert check(stub, "resound.v1.Replay") == SERVING
        with pytest.raises(grpc.RpcError) as unknown:
            check(stub, "no.such.Service")
        assert unknown.value.code() == grpc.StatusCode.NOT_FOUND


def test_watchers_hear_not_serving_when_stop_begins(server):
    channel, stub = health_stub(server.port)
    with channel:
        overall = stub.Watch(health_pb2.HealthCheckRequest(service=""), timeout=SAFETY)
        replay = stub.Watch(
            health_pb2.HealthCheckRequest(service="resound.v1.Replay"), timeout=SAFETY
        )
        assert next(overall).status == SERVING
        assert next(replay).status == SERVING
        # A sample call waiting on the empty queue: still open while the
        # health service already says NOT_SERVING.
        client = resound.Client(f"127.0.0.1:{server.port}", transport="grpc")
        waiting = Background(lambda: next(client.sample("queue", timeout=SAFETY)))
        wait_until(lambda: server.open_calls == 1, "the sample call is open")
        stopping = Background(server.stop)
        assert next(overall).status == NOT_SERVING
        assert next(replay).status == NOT_SERVING
        # For good: the watches end there (the stop need not cut them off).
        assert list(overall) == [] and list(replay) == []
        stopping.value()
        waiting.raised(resound.errors.CancelledError)


def test_health_answers_while_the_open_call_limit_is_used_up():
    server = resound.Server([resound.Table.queue("queue", 10)], max_open_calls=1)
    try:
        client = resound.Client(f"127.0.0.1:{server.port}", transport="grpc")
        waiting = Background(lambda: next(client.sample("queue", timeout=SAFETY)))
        wait_until(lambda: server.open_calls == 1, "the sample call is open")
        # The limit is used up: another replay call is refused ...
        other = resound.Client(f"127.0.0.1:{server.port}", transport="grpc")
        with pytest.raises(resound.errors.ResourceExhaustedError, match="max_open_calls"):
            next(other.sample("queue", timeout=SAFETY))
        # ... and health still answers.
        channel, stub = health_stub(server.port)
        with channel:
            assert check(stub, "") == SERVING
            assert check(stub, "resound.v1.Replay") == SERVING
        # (Inserted in-process: a gRPC insert stream would be a call too.)
        server.in_process_client().insert(1.0, priorities={"queue": 1.0})
        assert waiting.value() is not None
    finally:
        server.stop()
