"""``Client.priority_histogram``: the server counts its items' priorities in
equal bins between the lowest and the highest, on both transports and over
several servers; ServerInfo without bins carries no histogram; bad bins are
refused naming ``bins`` and the allowed range."""

from __future__ import annotations

import grpc
import pytest

import resound
from resound import _proto
from resound.priority_histogram import PriorityHistogram, merged

from helpers.waiting import Background, wait_until


def uniform_table(name: str = "t", max_size: int = 100) -> resound.Table:
    return resound.Table(
        name,
        resound.selectors.Uniform(),
        resound.selectors.Fifo(),
        max_size=max_size,
        rate_limiter=resound.rate_limiters.MinSize(1),
    )


def insert_all(client: resound.Client, table: str, priorities: list[float]) -> None:
    for priority in priorities:
        client.insert([0], priorities={table: priority})


def test_counts_follow_the_inserted_priorities(serve):
    _, client = serve(uniform_table())
    # [0, 10] in 5 bins of width 2; 10 falls in the last bin.
    insert_all(client, "t", [0.0, 1.0, 2.0, 3.9, 5.0, 10.0, 10.0, 8.0])
    histogram = client.priority_histogram("t", bins=5)
    assert histogram == PriorityHistogram((2, 2, 1, 0, 3), 0.0, 10.0)
    assert histogram.edges == (0.0, 2.0, 4.0, 6.0, 8.0, 10.0)
    assert histogram.num_items == 8


def test_counts_follow_mutate_priorities(serve):
    server, client = serve(uniform_table())
    insert_all(client, "t", [1.0, 1.0, 1.0, 1.0])
    keys = [item.key for item in server.table("t")._core.snapshot()]
    client.mutate_priorities("t", updates={keys[0]: 5.0, keys[1]: 3.0}, deletes=[keys[2]])
    assert client.priority_histogram("t", bins=2) == PriorityHistogram((1, 2), 1.0, 5.0)


def test_an_empty_table_has_no_bins_and_equal_priorities_one(serve):
    _, client = serve(uniform_table("empty"), uniform_table("equal"))
    assert client.priority_histogram("empty", bins=10) == PriorityHistogram((), 0.0, 0.0)
    assert client.priority_histogram("empty").edges == ()
    insert_all(client, "equal", [2.5, 2.5, 2.5])
    assert client.priority_histogram("equal", bins=10) == PriorityHistogram((3,), 2.5, 2.5)


@pytest.mark.parametrize("bins", [0, -1, 1001, 2.0, True, "20"])
def test_bad_bins_are_refused_naming_the_range(serve, bins):
    _, client = serve(uniform_table())
    with pytest.raises(ValueError, match=r"bins must be an integer in \[1, 1000\]"):
        client.priority_histogram("t", bins=bins)


def test_an_unknown_table_raises_not_found_naming_the_tables(serve):
    _, client = serve(uniform_table())
    with pytest.raises(resound.errors.NotFoundError, match="nope.*t"):
        client.priority_histogram("nope")


def test_the_table_method_counts_the_same():
    table = uniform_table()
    server = resound.Server([table], listen=False)
    try:
        insert_all(server.in_process_client(), "t", [1.0, 2.0, 3.0])
        assert table.priority_histogram(2) == PriorityHistogram((1, 2), 1.0, 3.0)
        with pytest.raises(ValueError, match="bins"):
            table.priority_histogram(1001)
    finally:
        server.stop()


def test_server_info_carries_a_histogram_only_when_asked():
    server = resound.Server([uniform_table()])
    channel = grpc.insecure_channel(f"127.0.0.1:{server.port}")
    try:
        resound.Client(f"127.0.0.1:{server.port}").insert([0], priorities={"t": 4.0})
        info = channel.unary_unary(
            "/resound.v1.Replay/ServerInfo",
            request_serializer=_proto.ServerInfoRequest.SerializeToString,
            response_deserializer=_proto.ServerInfoResponse.FromString,
        )
        plain = info(_proto.ServerInfoRequest(), timeout=10).tables[0]
        assert not plain.HasField("priority_histogram")
        asked = info(_proto.ServerInfoRequest(priority_histogram_bins=3), timeout=10).tables[0]
        assert list(asked.priority_histogram.counts) == [1]
        assert asked.priority_histogram.min == asked.priority_histogram.max == 4.0
        with pytest.raises(grpc.RpcError) as refused:
            info(_proto.ServerInfoRequest(priority_histogram_bins=1001), timeout=10)
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "priority_histogram_bins must be an integer in [0, 1000]" in refused.value.details()
    finally:
        channel.close()
        server.stop()


def test_several_servers_merge_with_exact_range_and_total():
    servers = [resound.Server([uniform_table()]) for _ in range(2)]
    try:
        addresses = [f"127.0.0.1:{s.port}" for s in servers]
        insert_all(resound.Client(addresses[0]), "t", [0.0, 1.0])
        insert_all(resound.Client(addresses[1]), "t", [3.0, 3.0, 3.0, 3.0])
        client = resound.Client(addresses)
        each = client.priority_histograms("t", bins=2)
        assert each == {
            addresses[0]: PriorityHistogram((1, 1), 0.0, 1.0),
            addresses[1]: PriorityHistogram((4,), 3.0, 3.0),
        }
        # Bin centres 0.25, 0.75 and 3.0 in [0, 3] of 3 bins.
        assert client.priority_histogram("t", bins=3) == PriorityHistogram((2, 0, 4), 0.0, 3.0)
    finally:
        for server in servers:
            server.stop()


def test_merged_keeps_extreme_ranges_finite():
    big = 1.7e308
    result = merged([PriorityHistogram((1, 1), -big, 0.0), PriorityHistogram((1,), big, big)], 2)
    assert result == PriorityHistogram((2, 1), -big, big)
    assert merged([], 4) == PriorityHistogram(())


def test_server_info_counts_the_calls_waiting_for_the_rate_limiter(serve):
    _, client = serve(uniform_table())
    waiting = Background(client.sample_batch, "t", 1, timeout=20)

    def pending() -> int:
        return client.server_info()["t"].rate_limiter_info.sample_stats.pending

    wait_until(lambda: pending() == 1, "the sample waits for the rate limiter")
    client.insert([0], priorities={"t": 1.0})
    waiting.value()
    wait_until(lambda: pending() == 0, "the sample is done")
