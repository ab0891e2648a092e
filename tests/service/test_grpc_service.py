"""The Replay gRPC service spoken to directly (malformed and hostile
requests get the documented status and leave the tables working), and the
remote client's behaviour when the server stops or another client vanishes.
Servers listen on 127.0.0.1 ports they pick themselves."""

from __future__ import annotations

import math
import subprocess
import sys
import threading

import grpc
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import resound
from resound import _proto
from resound._wire.channel_options import CHANNEL_OPTIONS

from helpers.waiting import SAFETY, Background, wait_until
from helpers.wire_requests import chunks, fresh_key, item, items

P = _proto


@pytest.fixture
def service():
    """(server, raw channel, gRPC client) for a uniform table 't' and a queue 'q'."""
    server = resound.Server(
        [
            resound.Table(
                "t",
                resound.selectors.Uniform(),
                resound.selectors.Fifo(),
                100,
                resound.rate_limiters.MinSize(1),
                signature={"x": resound.TensorSpec([None], np.float32)},
            ),  # fmt: skip
            resound.Table.queue("q", 2),
        ]
    )
    channel = grpc.insecure_channel(f"127.0.0.1:{server.port}", options=CHANNEL_OPTIONS)
    client = resound.Client(f"127.0.0.1:{server.port}", transport="grpc")
    yield server, channel, client
    channel.close()
    server.stop()


@pytest.fixture(scope="module")
def service_for_fuzzing():
    """As ``service``, shared by every example of a property test."""
    server = resound.Server(
        [resound.Table("t", resound.selectors.Uniform(), resound.selectors.Fifo(), 100,
                       resound.rate_limiters.MinSize(1))]
    )  # fmt: skip
    channel = grpc.insecure_channel(f"127.0.0.1:{server.port}", options=CHANNEL_OPTIONS)
    client = resound.Client(f"127.0.0.1:{server.port}", transport="grpc")
    yield server, channel, client
    channel.close()
    server.stop()


def insert_stream(channel: grpc.Channel):
    return channel.stream_stream(
        f"/{P.SERVICE}/Insert",
        request_serializer=P.InsertRequest.SerializeToString,
        response_deserializer=P.InsertResponse.FromString,
    )


def send(channel: grpc.Channel, *requests: object) -> list[object]:
    return list(insert_stream(channel)(iter(requests), timeout=SAFETY))


def assert_refused(channel, code: grpc.StatusCode, match: str, *requests) -> None:
    with pytest.raises(grpc.RpcError) as caught:
        send(channel, *requests)
    assert caught.value.code() == code, caught.value.details()
    assert match in caught.value.details()


def table_size(server: resound.Server, name: str = "t") -> int:
    return server.table(name).info.current_size


def test_a_well_formed_stream_inserts_and_confirms_in_order(service):
    server, channel, _ = service
    key = fresh_key()
    responses = send(
        channel,
        P.InsertRequest(**chunks(key, [1, 2, 3]), items=items(item(10, key), item(11, key, 1, 2))),
        P.InsertRequest(items=items(item(12, key, 2)), release_chunk_keys=[key]),
    )
    assert [list(r.item_keys) for r in responses] == [[10, 11], [12]]
    assert table_size(server) == 3


# Each case builds its request around a chunk key no other test uses.
MALFORMED = {
    "unknown-chunk": (
        lambda k: P.InsertRequest(items=items(item(10, k))),
        grpc.StatusCode.INVALID_ARGUMENT,
        "uses chunk",
    ),
    "slice-outside-chunk": (
        lambda k: P.InsertRequest(**chunks(k, [1, 2]), items=items(item(10, k, 1, 5))),
        grpc.StatusCode.INVALID_ARGUMENT,
        "",
    ),
    "nan-priority": (
        lambda k: P.InsertRequest(**chunks(k, [1]), items=items(item(10, k, priority=math.nan))),
        grpc.StatusCode.INVALID_ARGUMENT,
        "priority",
    ),
    "unknown-table": (
        lambda k: P.InsertRequest(**chunks(k, [1]), items=items(item(10, k, table="nope"))),
        grpc.StatusCode.NOT_FOUND,
        "nope",
    ),
    "payload-size": (
        lambda k: P.InsertRequest(**chunks(k, [1], data=b"abc")),
        grpc.StatusCode.INVALID_ARGUMENT,
        "is invalid",
    ),
    "negative-shape": (
        lambda k: P.InsertRequest(**chunks(k, [1], shape=[-2])),
        grpc.StatusCode.INVALID_ARGUMENT,
        "is invalid",
    ),
    "signature-dtype": (
        lambda k: P.InsertRequest(**chunks(k, [1], dtype="<i4"), items=items(item(10, k))),
        grpc.StatusCode.INVALID_ARGUMENT,
        "",
    ),
    "no-columns": (
        lambda k: P.InsertRequest(
            **chunks(k, [1]), items=items(dict(key=10, chunk_key=k, columns=False))
        ),
        grpc.StatusCode.INVALID_ARGUMENT,
        "no columns",
    ),
    "keys-and-priorities-differ": (
        lambda k: P.InsertRequest(
            **chunks(k, [1]),
            items=P.ItemBatch(
                tables=["t"],
                table_indices=[0, 0],
                keys=[10, 11],
                priorities=[1.0],
                trajectories=items(item(10, k), item(11, k)).trajectories,
            ),  # fmt: skip
        ),
        grpc.StatusCode.INVALID_ARGUMENT,
        "must pair up",
    ),
    "table-index-out-of-range": (
        lambda k: P.InsertRequest(
            **chunks(k, [1]),
            items=P.ItemBatch(
                tables=["t"],
                table_indices=[1],
                keys=[10],
                priorities=[1.0],
                trajectories=items(item(10, k)).trajectories,
            ),  # fmt: skip
        ),
        grpc.StatusCode.INVALID_ARGUMENT,
        "table index 1",
    ),
    "slices-do-not-add-up": (
        lambda k: P.InsertRequest(
            **chunks(k, [1]),
            items=P.ItemBatch(
                tables=["t"],
                table_indices=[0],
                keys=[10],
                priorities=[1.0],
                trajectories=P.Trajectories(
                    num_columns=[1],
                    num_slices=[2],
                    squeeze=[False],
                    chunk_keys=[k],
                    offsets=[0],
                    lengths=[1],
                ),
            ),  # fmt: skip
        ),
        grpc.StatusCode.INVALID_ARGUMENT,
        "num_slices adds up to 2",
    ),
    "data-sizes-short-of-data": (
        lambda k: P.InsertRequest(**chunks(k, [1], data=b"\0" * 8)),
        grpc.StatusCode.INVALID_ARGUMENT,
        "data_sizes add up to 4",
    ),
    "layout-index-out-of-range": (
        lambda k: P.InsertRequest(**chunks(k, [1], layout_indices=[3])),
        grpc.StatusCode.INVALID_ARGUMENT,
        "layout index 3",
    ),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_inserts_are_refused_and_the_table_still_works(service, case):
    server, channel, client = service
    make, code, match = MALFORMED[case]
    assert_refused(channel, code, match, make(fresh_key()))
    assert table_size(server) == 0
    client.insert({"x": np.ones(2, np.float32)}, priorities={"t": 1.0})
    assert table_size(server) == 1


@pytest.mark.parametrize("dtype", ["<f3", "<c2", "<i3", "<u16", "<f32", "<c4"])
def test_chunks_of_a_dtype_numpy_has_no_type_for_are_refused(service, dtype):
    # Stored, they made every sampler that drew them raise "data type not
    # understood".
    server, channel, client = service
    key, size = fresh_key(), 3 * int(dtype[2:])
    request = P.InsertRequest(
        **chunks(key, [0, 0, 0], dtype=dtype, data=bytes(size), data_sizes=[size]),
        items=items(item(10, key, table="q")),
    )
    with pytest.raises(grpc.RpcError) as caught:
        send(channel, request)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT, caught.value.details()
    message = caught.value.details()
    assert f"got '{dtype}'" in message and "layouts[0]" in message
    assert "i, u: 1, 2, 4, 8; f: 2, 4, 8, 16; c: 8, 16, 32" in message  # the allowed ones
    assert table_size(server, "q") == 0 and server.table("q").info.num_chunks == 0
    # Sizes numpy has are stored and come back.
    values = np.array([1.5, -2.0], np.float16)
    client.insert({"x": values}, priorities={"q": 1.0})
    (sample,) = client.sample("q", emit_timesteps=False, timeout=SAFETY)
    np.testing.assert_array_equal(sample.data[0], [values])


def test_items_before_a_refused_one_are_confirmed_first(service):
    server, channel, _ = service
    key = fresh_key()
    call = insert_stream(channel)(
        iter(
            [
                P.InsertRequest(**chunks(key, [1]), items=items(item(10, key))),
                P.InsertRequest(items=items(item(11, key), item(12, key, table="nope"))),
            ]
        ),
        timeout=SAFETY,
    )
    confirmed = []
    with pytest.raises(grpc.RpcError) as caught:
        for response in call:
            confirmed.extend(response.item_keys)
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND
    assert confirmed == [10, 11] and table_size(server) == 2


@pytest.mark.parametrize("letter", ["a", "é"])
def test_errors_echo_long_values_shortened_so_the_status_arrives(service, letter):
    # A 1 MB table name echoed whole made the trailers pass gRPC's limit:
    # the client saw RESOURCE_EXHAUSTED instead of NOT_FOUND.
    server, channel, _ = service
    name = letter * 1_000_000

    def call(method: str, kind: str, request: object, reply: object) -> grpc.RpcError:
        stub = getattr(channel, kind)(
            f"/{P.SERVICE}/{method}",
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=reply.FromString,  # type: ignore[attr-defined]
        )
        with pytest.raises(grpc.RpcError) as caught:
            response = stub(request, timeout=SAFETY)
            if kind != "unary_unary":
                list(response)  # a stream's status comes with its end
        return caught.value

    no_table = items(item(1, 0, table=name, columns=False))
    sample = P.SampleRequest(table=name, num_samples=1)
    refusals = [
        call("Sample", "unary_stream", sample, P.SampleResponse),
        call("Reset", "unary_unary", P.ResetRequest(table=name), P.ResetResponse),
        call("MutatePriorities", "unary_unary", P.MutatePrioritiesRequest(table=name),
             P.MutatePrioritiesResponse),
        call("Insert", "stream_stream", iter([P.InsertRequest(items=no_table)]), P.InsertResponse),
    ]  # fmt: skip
    for error in refusals:
        assert error.code() == grpc.StatusCode.NOT_FOUND, error.details()
        assert error.details() == (
            f"Priority table {name[:100]}… (1000000 characters) was not found. "
            "The following tables exist: q, t."
        )
    # A chunk's dtype, which the core's message repeats.
    bad_dtype = P.InsertRequest(**chunks(fresh_key(), [1], dtype="<" + name))
    error = call("Insert", "stream_stream", iter([bad_dtype]), P.InsertResponse)
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, error.details()
    assert f"got '<{name[:99]}… (1000001 characters)': unsupported kind" in error.details()
    assert len(error.details().encode()) <= 2048
    assert table_size(server) == 0


def test_status_messages_are_cut_to_a_few_kilobytes() -> None:
    from resound._service.servicer import _status_message

    cut = _status_message("é" * 5000)  # 10 KB of UTF-8, 30 KB percent-encoded
    assert len(cut.encode()) <= 2048 and cut.endswith("… (cut; 5000 characters in all)")
    assert _status_message("short", ["a" * 500]) == "short"


def test_sample_and_unary_calls_validate_their_requests(service):
    server, channel, client = service
    sample = channel.unary_stream(
        f"/{P.SERVICE}/Sample",
        request_serializer=P.SampleRequest.SerializeToString,
        response_deserializer=P.SampleResponse.FromString,
    )
    with pytest.raises(grpc.RpcError) as caught:
        list(sample(P.SampleRequest(table="t", num_samples=0), timeout=SAFETY))
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(grpc.RpcError) as caught:
        list(sample(P.SampleRequest(table="t", num_samples=1, timeout_seconds=0.0), timeout=SAFETY))
    assert caught.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    with pytest.raises(ValueError, match="same length"):
        remote = client._transport.one_server()
        remote._unary(
            remote._mutate_call,
            P.MutatePrioritiesRequest(table="t", update_keys=[1, 2], update_priorities=[1.0]),
            "MutatePriorities",
        )
    with pytest.raises(ValueError):
        client.mutate_priorities("t", updates={1: math.nan})
    client.insert({"x": np.ones(2, np.float32)}, priorities={"t": 1.0})
    assert table_size(server) == 1


def test_stopping_the_server_wakes_blocked_clients(service):
    server, _, client = service
    # 't' stays empty: its sampler waits until the server stops.
    blocked_sample = Background(lambda: next(client.sample("t", emit_timesteps=False)))
    writer = client.trajectory_writer(1)
    for i in range(4):  # the queue holds 2: the rest wait on the server
        writer.append({"x": np.float32(i)})
        writer.create_item("q", 1.0, {"x": writer.history["x"][-1]})
    blocked_flush = Background(writer.flush)
    # The stream must be up (two items in), or the stop could turn its start
    # into a lost connection, which writers retry for a while (as they should
    # while a server restarts) instead of failing at once.
    wait_until(lambda: server.table("q").info.current_size == 2, "the first items to go in")
    server.stop()
    blocked_sample.join(SAFETY)
    blocked_flush.join(SAFETY)
    assert blocked_sample.error is not None
    assert isinstance(blocked_flush.error, (resound.errors.CancelledError, ConnectionError))


def test_a_client_that_vanishes_mid_stream_leaves_the_server_serving(service):
    server, channel, client = service
    gone = threading.Event()
    key = fresh_key()

    def requests():
        yield P.InsertRequest(**chunks(key, [1, 2]), items=items(item(10, key)))
        gone.wait(SAFETY)  # the stream stays open until the client gives up

    call = insert_stream(channel)(requests(), timeout=SAFETY)
    assert list(next(call).item_keys) == [10]
    call.cancel()
    gone.set()
    client.insert({"x": np.ones(2, np.float32)}, priorities={"t": 1.0})
    assert table_size(server) == 2
    assert len(list(client.sample("t", 2, emit_timesteps=False))) == 2


# A child still running after 45 s writes its threads' stacks and exits, so
# that a hang at exit shows where it is in the test's failure.
EXIT_WITH_AN_OPEN_STREAM = """
import faulthandler
faulthandler.dump_traceback_later(45, exit=True)
import numpy as np, resound
server = resound.Server([resound.Table.queue("q", 10)])
client = resound.Client(f"127.0.0.1:{server.port}", transport="grpc")
writer = client.trajectory_writer(1)
writer.append({"x": np.float32(1)})
writer.create_item("q", 1.0, writer.history["x"][-1])
writer.flush()
print("exiting")
"""


def test_a_script_ending_with_a_served_open_stream_exits():
    # The writer's stream is still open when the main thread ends: the
    # server stops at exit instead of waiting on the stream forever.
    result = subprocess.run(
        [sys.executable, "-c", EXIT_WITH_AN_OPEN_STREAM],
        capture_output=True,
        text=True,
        timeout=SAFETY * 3,
        check=False,
    )
    assert (result.returncode, result.stdout) == (0, "exiting\n"), result.stderr


def test_a_stopped_server_ends_its_serving_threads():
    before = set(threading.enumerate())
    server = resound.Server([resound.Table.queue("q", 10)])
    client = resound.Client(f"127.0.0.1:{server.port}", transport="grpc")
    client.insert({"x": np.ones(2, np.float32)}, priorities={"q": 1.0})
    assert len(list(client.sample("q", 1, emit_timesteps=False))) == 1
    client.checkpoint()  # runs on a worker thread of the server's
    serving = {t.name.rstrip("_0123456789") for t in set(threading.enumerate()) - before}
    assert {"resound-grpc-loop", "resound-worker"} <= serving
    serving = [t for t in set(threading.enumerate()) - before if t.name.startswith("resound-")]
    server.stop()
    for thread in serving:
        thread.join(SAFETY)
    assert [t.name for t in serving if t.is_alive()] == []


def _valid_insert(key: int) -> bytes:
    return P.InsertRequest(
        **chunks(key, [1, 2, 3]), items=items(item(10, key), item(11, key, 1, 2))
    ).SerializeToString()


# (hypothesis' failure report imports libcst, which warns; see test_sum_tree.)
@pytest.mark.filterwarnings("ignore:mypy_extensions.TypedDict is deprecated:DeprecationWarning")
@settings(max_examples=150, deadline=None, derandomize=True)
@given(
    data=st.one_of(
        st.binary(max_size=200),
        st.tuples(st.integers(0, 400), st.integers(0, 255), st.integers(0, 400)),
    )
)
def test_garbage_on_the_insert_stream_is_refused_cleanly(service_for_fuzzing, data):
    # Random bytes, and valid requests with a byte changed and cut short: the
    # server refuses what it cannot use with INVALID_ARGUMENT (or NOT_FOUND
    # for a table name), never an internal error, and keeps serving.
    server, channel, client = service_for_fuzzing
    if isinstance(data, tuple):
        position, value, cut = data
        raw = bytearray(_valid_insert(fresh_key()))
        raw[position % len(raw)] = value
        raw = bytes(raw[: max(1, len(raw) - cut % len(raw))])
    else:
        raw = data
    call = channel.stream_stream(
        f"/{P.SERVICE}/Insert", response_deserializer=P.InsertResponse.FromString
    )
    try:
        list(call(iter([raw]), timeout=SAFETY))
    except grpc.RpcError as error:
        assert error.code() in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND), (
            error.code(),
            error.details(),
        )
    client.insert({"x": np.ones(2, np.float32)}, priorities={"t": 1.0})
