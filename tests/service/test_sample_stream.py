"""The SampleStream call (requests answered in order on one long-lived call),
spoken to directly and through the client's SampleStream: markers, timeouts
that leave the stream open, bad requests, a stopping and a restarted server.
Servers listen on 127.0.0.1 ports they pick themselves (or a free one)."""

from __future__ import annotations

import signal

import grpc
import numpy as np
import pytest

import resound
from resound import _proto
from resound._wire.channel_options import CHANNEL_OPTIONS
from resound.errors import CancelledError, DeadlineExceededError, NotFoundError

from helpers.server_processes import REPLAY_TABLE_TOML, ServerProcess
from helpers.waiting import SAFETY, Background

SERVING = r"serving 1 table\(s\) on 127\.0\.0\.1:(\d+)"

P = _proto


def uniform_table() -> resound.Table:
    """'t': uniform sampling, any size from one item on."""
    return resound.Table(
        "t",
        resound.selectors.Uniform(),
        resound.selectors.Fifo(),
        100,
        resound.rate_limiters.MinSize(1),
    )


@pytest.fixture
def service():
    """(server, raw channel, gRPC client) for a uniform table 't' of 5 items
    (values 0..4) and an empty queue 'q'."""
    server = resound.Server([uniform_table(), resound.Table.queue("q", 10)])
    client = resound.Client(f"127.0.0.1:{server.port}", transport="grpc")
    for value in range(5):
        client.insert([np.float32(value)], priorities={"t": 1.0})
    channel = grpc.insecure_channel(f"127.0.0.1:{server.port}", options=CHANNEL_OPTIONS)
    yield server, channel, client
    channel.close()
    server.stop()


def raw_stream(channel: grpc.Channel, requests: list, serialize: bool = True) -> list:
    """Every response of a SampleStream call sending ``requests`` then closing."""
    call = channel.stream_stream(
        f"/{P.SERVICE}/SampleStream",
        request_serializer=P.SampleRequest.SerializeToString if serialize else None,
        response_deserializer=P.SampleResponse.FromString,
    )
    return list(call(iter(requests), timeout=SAFETY))


def test_each_request_is_answered_in_order_and_its_last_response_is_marked(service):
    _, channel, _ = service
    responses = raw_stream(
        channel,
        [
            P.SampleRequest(table="t", num_samples=2),
            P.SampleRequest(table="t", num_samples=3, max_per_response=1),
        ],
    )
    sizes = [len(r.items.keys) for r in responses]
    marks = [r.end_of_request for r in responses]
    assert (sizes, marks) == ([2, 1, 1, 1], [True, False, False, True])
    assert not any(r.timed_out for r in responses)


def test_a_request_that_times_out_is_answered_and_the_stream_goes_on(service):
    _, channel, _ = service
    responses = raw_stream(
        channel,
        [
            P.SampleRequest(table="q", num_samples=1, timeout_seconds=0.01),
            P.SampleRequest(table="t", num_samples=1),
        ],
    )
    assert [(r.timed_out, r.end_of_request, len(r.items.keys)) for r in responses] == [
        (True, True, 0),
        (False, True, 1),
    ]


@pytest.mark.parametrize(
    ("request_bytes", "code"),
    [
        (P.SampleRequest(table="nope", num_samples=1).SerializeToString(), "NOT_FOUND"),
        (P.SampleRequest(table="t", num_samples=0).SerializeToString(), "INVALID_ARGUMENT"),
        (b"\xff\xff\xff", "INVALID_ARGUMENT"),
    ],
)
def test_a_bad_request_ends_the_stream_with_its_status(service, request_bytes, code):
    _, channel, client = service
    good = P.SampleRequest(table="t", num_samples=1).SerializeToString()
    call = channel.stream_stream(
        f"/{P.SERVICE}/SampleStream",
        request_serializer=None,
        response_deserializer=P.SampleResponse.FromString,
    )
    received = []
    with pytest.raises(grpc.RpcError) as caught:
        for response in call(iter([good, request_bytes, good]), timeout=SAFETY):
            received.append(len(response.items.keys))
    assert caught.value.code().name == code
    assert received == [1]  # the request before the bad one was answered
    assert len(client.sample_batch("t", 2).info.key) == 2  # the server still serves


def test_the_clients_stream_receives_in_order_and_survives_timeouts(service):
    _, _, client = service
    for value in range(5):  # the queue gives them back in this order
        client.insert([np.float32(value)], priorities={"q": 1.0})
    stream = client._transport.open_sample_stream("q")
    first, second = stream.start(2, 1.0), stream.start(3, 1.0)
    values = [batch.stack_columns()[0].ravel().tolist() for batch in (first(), second())]
    assert values == [[0.0, 1.0], [2.0, 3.0, 4.0]]
    with pytest.raises(DeadlineExceededError, match="'q'"):
        stream.start(1, 0.01)()
    client.insert([np.float32(7)], priorities={"q": 1.0})
    assert stream.start(1, 1.0)().stack_columns()[0].ravel().tolist() == [7.0]
    missing = client._transport.open_sample_stream("nope")
    with pytest.raises(NotFoundError):
        missing.start(1, 1.0)()
    for each in (stream, missing):
        each.close()
        each.close()  # idempotent


def test_stopping_the_server_wakes_a_stream_waiting_for_samples(service):
    server, _, client = service
    stream = client._transport.open_sample_stream("q")
    waiting = Background(stream.start(1, None))  # 'q' stays empty: waits until the stop
    server.stop()
    waiting.raised(CancelledError)
    stream.close()


def test_after_a_server_stopped_the_next_request_reaches_its_successor(service):
    server, _, client = service
    port = server.port
    stream = client._transport.open_sample_stream("t")
    assert len(stream.start(1, SAFETY)()) == 1
    server.stop()
    # The open call ends with the stop (a stopped server is not waited for).
    with pytest.raises(CancelledError, match="stopped"):
        stream.start(1, SAFETY)()
    successor = resound.Server([uniform_table()], port=port)
    try:
        successor.in_process_client().insert([np.float32(9)], priorities={"t": 1.0})
        assert stream.start(1, SAFETY)().stack_columns()[0].ravel().tolist() == [9.0]
    finally:
        stream.close()
        successor.stop()


def test_a_killed_server_is_waited_for_and_the_unanswered_requests_sent_again(tmp_path):
    config = tmp_path / "server.toml"
    config.write_text(REPLAY_TABLE_TOML)
    served = ServerProcess(config)
    port = int(served.wait_for(SERVING).group(1))
    client = resound.Client(f"127.0.0.1:{port}", transport="grpc")
    client.insert([np.ones(1, np.float32)], priorities={"replay": 1.0})
    stream = client._transport.open_sample_stream("replay")
    assert len(stream.start(1, SAFETY)()) == 1
    served.stop(signal.SIGKILL)  # no status: the connection is just gone
    first, second = stream.start(1, SAFETY), stream.start(2, SAFETY)
    again = ServerProcess(config, "--port", str(port))
    try:
        int(again.wait_for(SERVING).group(1))
        refill = resound.Client(f"127.0.0.1:{port}", transport="grpc")
        refill.insert([np.full(1, 5, np.float32)], priorities={"replay": 1.0})
        assert (len(first()), len(second())) == (1, 2)
    finally:
        stream.close()
        assert again.stop() == 0
