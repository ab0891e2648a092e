"""A Client of several servers, against servers of this process (over gRPC
and in-process): the address forms, how samples are spread and shared out,
what happens when servers have nothing or are gone. The same against
``resound-server`` processes is in test_scale_out.py."""

from __future__ import annotations

import gc
import pickle
import socket
import threading
import weakref
from collections.abc import Iterator

import numpy as np
import pytest

import resound
from resound import _core
from resound._transport.targets import parse_target, resolve_name

from helpers.waiting import SAFETY, wait_until


def queue_table() -> resound.Table:
    return resound.Table.queue("q", max_size=1000)


def replay_table() -> resound.Table:
    return resound.Table(
        "replay",
        resound.selectors.Uniform(),
        resound.selectors.Fifo(),
        1000,
        resound.rate_limiters.MinSize(1),
    )


@pytest.fixture
def servers() -> Iterator[list[resound.Server]]:
    started = [resound.Server([queue_table(), replay_table()]) for _ in range(3)]
    try:
        yield started
    finally:
        for server in started:
            server.stop()


def addresses(servers: list[resound.Server]) -> list[str]:
    return [f"127.0.0.1:{server.port}" for server in servers]


def sizes(servers: list[resound.Server], table: str) -> list[int]:
    return [server.table(table).info.current_size for server in servers]


# --- address forms


@pytest.mark.parametrize(
    ("target", "expected", "several"),
    [
        ("localhost:8000", ["localhost:8000"], False),
        ("unix:/tmp/socket", ["unix:/tmp/socket"], False),
        (["a:1", "b:2"], ["a:1", "b:2"], True),
        (["a:1"], ["a:1"], True),
        ("a:1,b:2", ["a:1", "b:2"], True),
        ("ipv4:10.0.0.1:8000,10.0.0.2:8000", ["10.0.0.1:8000", "10.0.0.2:8000"], True),
        ("ipv6:[::1]:1,[::1]:2", ["[::1]:1", "[::1]:2"], True),
    ],
)
def test_address_forms(target, expected, several) -> None:
    parsed = parse_target(target)
    assert parsed.addresses == expected and parsed.several is several
    assert resound.Client(target).server_addresses == expected


@pytest.mark.parametrize(
    ("target", "dns_name"),
    [
        ("dns:///replay.svc:8000", ("replay.svc", 8000)),
        ("dns://10.0.0.53/replay.svc:8000", ("replay.svc", 8000)),
        ("dns:replay.svc:8000", ("replay.svc", 8000)),
    ],
)
def test_dns_targets_are_resolved_on_use(target, dns_name) -> None:
    parsed = parse_target(target)
    assert (parsed.addresses, parsed.dns_name, parsed.several) == (None, dns_name, True)


@pytest.mark.parametrize(
    ("target", "kind", "message"),
    [
        ([], ValueError, "empty list"),
        (["a:1", "a:1"], ValueError, "twice"),
        (["a:1", ""], ValueError, "nonempty"),
        (["a:1", 8000], TypeError, "must be 'host:port' str"),
        (["a:1,b:2"], ValueError, "each be one"),
        ("a:1,b", ValueError, "not 'host:port'"),
        ("localhost", ValueError, "'localhost' is not 'host:port'"),
        ("localhost:", ValueError, "not 'host:port'"),
        ("ipv4:a:0", ValueError, "not 'host:port'"),
        ("ipv4:a:99999", ValueError, "not 'host:port'"),
        ("dns://authority-only", ValueError, "dns:///name:port"),
        (b"a:1", TypeError, "server_address must be"),
    ],
)
def test_bad_addresses_are_refused_naming_the_argument(target, kind, message) -> None:
    with pytest.raises(kind, match="server_address") as raised:
        resound.Client(target)
    assert message in str(raised.value)


def test_bad_failover_is_refused() -> None:
    with pytest.raises(ValueError, match="failover must be True or False"):
        resound.Client(["a:1", "b:2"], failover="yes")  # type: ignore[arg-type]


def test_resolving_a_name_gives_every_distinct_address() -> None:
    def several(host, port, type):  # noqa: A002 - getaddrinfo's own keyword
        assert (host, port, type) == ("replay.svc", 8000, socket.SOCK_STREAM)
        return [
            (socket.AF_INET, type, 6, "", ("10.0.0.1", port)),
            (socket.AF_INET, type, 6, "", ("10.0.0.2", port)),
            (socket.AF_INET, type, 6, "", ("10.0.0.1", port)),
            (socket.AF_INET6, type, 6, "", ("fd00::3", port, 0, 0)),
        ]

    found = resolve_name("replay.svc", 8000, getaddrinfo=several)
    assert found == ["10.0.0.1:8000", "10.0.0.2:8000", "[fd00::3]:8000"]


def test_a_dns_target_reaches_the_servers_it_resolves_to(servers) -> None:
    client = resound.Client(f"dns:///localhost:{servers[0].port}", transport="grpc")
    assert f"127.0.0.1:{servers[0].port}" in client.server_addresses
    client.insert([np.float32(1.0)], priorities={"q": 1.0})
    assert servers[0].table("q").info.current_size == 1
    assert len(client.sample_batch("q", 1, timeout=SAFETY).info.key) == 1


def test_an_unresolvable_name_raises_connection_error_on_use() -> None:
    client = resound.Client("dns:///no-such-host.invalid:8000")
    with pytest.raises(ConnectionError, match="does not resolve"):
        client.server_info()


def test_pickling_keeps_the_servers_and_failover(servers) -> None:
    client = resound.Client(addresses(servers), failover=False)
    copy = pickle.loads(pickle.dumps(client))
    assert copy.server_addresses == client.server_addresses
    assert copy._failover is False
    assert repr(copy) == f"Client, server_address={','.join(addresses(servers))}"
    assert copy.server_info()["q"].max_size == 3000


def test_pickled_copies_start_their_writers_on_the_servers_in_turn(servers) -> None:
    # A driver pickles the client once per actor task: each copy's first
    # writer goes to the next server, so actors spread evenly.
    client = resound.Client(addresses(servers), transport="grpc")
    for actor in range(6):
        copy = pickle.loads(pickle.dumps(client))
        with copy.trajectory_writer(1) as writer:
            writer.append([np.float32(actor)])
            writer.create_item("q", 1.0, [writer.history[0][-1:]])
    assert sizes(servers, "q") == [2, 2, 2]


# --- sampling


@pytest.mark.parametrize("transport", ["grpc", "auto"])
def test_batches_draw_from_every_server_at_once(servers, transport) -> None:
    client = resound.Client(addresses(servers), transport=transport)
    for index, server in enumerate(servers):
        direct = server.in_process_client()
        for value in range(10):
            direct.insert([np.float32(100 * index + value)], priorities={"replay": 1.0})
    batch = client.sample_batch("replay", 384, timeout=SAFETY)
    origins = np.bincount(batch.data[0][:, 0].astype(int) // 100, minlength=3)
    assert origins.tolist() == [128, 128, 128]  # a share for each, none waits
    # Smaller batches go to fewer servers (requests of >= 128), in turn.
    for _ in range(6):
        small = client.sample_batch("replay", 256, timeout=SAFETY)
        origins += np.bincount(small.data[0][:, 0].astype(int) // 100, minlength=3)
    assert origins.tolist() == [640, 640, 640]
    assert [s.table("replay").info.rate_limiter_info.sample_stats.completed for s in servers] == (
        origins.tolist()
    )


def test_a_server_with_nothing_to_give_leaves_its_share_to_the_others(servers) -> None:
    client = resound.Client(addresses(servers), transport="grpc")
    direct = servers[2].in_process_client()
    for value in range(5):
        direct.insert([np.float32(value)], priorities={"replay": 1.0})
    for _ in range(5):  # servers 0 and 1 stay empty: their MinSize(1) refuses
        batch = client.sample_batch("replay", 64, timeout=SAFETY)
        assert len(batch.info.key) == 64
    # A server that gets items again is sampled again.
    servers[0].in_process_client().insert([np.float32(7.0)], priorities={"replay": 1.0})

    def sampled_again() -> bool:
        return 7.0 in client.sample_batch("replay", 64, timeout=SAFETY).data[0][:, 0]

    wait_until(sampled_again, "the server with an item again being sampled")


def test_sample_yields_what_the_servers_have_and_waits_for_the_rest(servers) -> None:
    client = resound.Client(addresses(servers), transport="grpc")
    for server in servers[:2]:
        for value in range(3):
            server.in_process_client().insert([np.float32(value)], priorities={"q": 1.0})
    samples = client.sample("q", 7, emit_timesteps=False, timeout=SAFETY)
    got = [next(samples) for _ in range(6)]  # every item there, from both servers
    assert sorted(float(s.data[0][0]) for s in got) == [0, 0, 1, 1, 2, 2]
    # The 7th waits until an item comes, on whichever server.
    threading.Timer(0.2, client.insert, ([np.float32(9.0)], {"q": 1.0})).start()
    assert float(next(samples).data[0][0]) == 9.0
    assert sizes(servers, "q") == [0, 0, 0]


def test_a_batch_waits_for_items_on_any_server_and_times_out_without(servers) -> None:
    client = resound.Client(addresses(servers), transport="grpc")
    with pytest.raises(resound.DeadlineExceededError):
        client.sample_batch("q", 4, timeout=0.3)
    with client.sample_batches("q", 4, num_batches=1, timeout=SAFETY) as batches:
        for value in range(4):
            servers[value % 3].in_process_client().insert([np.float32(value)], {"q": 1.0})
        (batch,) = list(batches)
    assert sorted(batch.data[0][:, 0].tolist()) == [0, 1, 2, 3]


def test_with_every_server_gone_calls_wait_for_one_up_to_their_timeout(servers) -> None:
    # As a client of one server waits for it (tests/service/test_wait_for_server.py).
    client = resound.Client(addresses(servers), transport="grpc")
    client.insert([np.float32(1.0)], priorities={"q": 1.0})
    for server in servers:
        server.stop()
    with pytest.raises(resound.DeadlineExceededError, match="not reachable"):
        client.sample_batch("q", 4, timeout=0.3)
    with pytest.raises(resound.DeadlineExceededError, match="not reachable"):
        client.server_info(timeout=0.3)
    with pytest.raises(ConnectionError, match="did not reach 3 server"):
        client.checkpoint()  # at once, as Reverb's checkpoint


def test_a_stopped_server_is_left_out_and_the_rest_serve(servers) -> None:
    client = resound.Client(addresses(servers), transport="grpc")
    servers[1].stop()
    for value in range(6):
        client.insert([np.float32(value)], priorities={"q": 1.0, "replay": 1.0})
    assert sum(sizes([servers[0], servers[2]], "q")) == 6  # the stopped one's turns moved on
    fresh = resound.Client(addresses(servers), transport="grpc")  # has not seen it stop
    for value in range(3):  # so the second writer starts out bound to the stopped server
        with fresh.trajectory_writer(1) as writer:
            writer.append([np.float32(value)])
            writer.create_item("q", 1.0, [writer.history[0][-1:]])
    assert sum(sizes([servers[0], servers[2]], "q")) == 9
    batch = client.sample_batch("replay", 50, timeout=SAFETY)
    assert len(batch.info.key) == 50
    assert set(client.server_infos()) == {addresses(servers)[0], addresses(servers)[2]}
    with pytest.raises(ConnectionError, match=f"did not reach 1 server.*{servers[1].port}"):
        client.reset("replay")
    assert sizes([servers[0], servers[2]], "replay") == [0, 0]  # the others were reset


@pytest.mark.parametrize("transport", ["grpc", "local"])
def test_inserts_move_on_from_a_server_stopped_after_they_reached_it(servers, transport) -> None:
    # Over the same-host transport each client.insert is one call on a
    # pooled connection: one whose server stopped must move on to the next
    # server as the general path does, not raise.
    if transport == "local" and not _core.HAS_LOCAL_TRANSPORT:
        pytest.skip("the same-host transport needs Linux")
    client = resound.Client(addresses(servers), transport=transport)
    for value in range(6):  # two for each server: a connection to each
        client.insert([np.float32(value)], priorities={"q": 1.0})
    assert sizes(servers, "q") == [2, 2, 2]
    servers[1].stop()
    for value in range(6):
        client.insert([np.float32(value)], priorities={"q": 1.0})
    assert sum(sizes([servers[0], servers[2]], "q")) == 10
    client.close()


def test_unknown_tables_raise_not_found(servers) -> None:
    client = resound.Client(addresses(servers), transport="grpc")
    with pytest.raises(resound.NotFoundError):
        client.sample_batch("nope", 2, timeout=SAFETY)
    with pytest.raises(resound.NotFoundError):
        client.update_priorities("nope", {1: 1.0})


def test_a_dropped_client_leaves_no_thread_or_stream_behind(servers) -> None:
    before = {t for t in threading.enumerate() if t.name == "resound-insert-stream"}
    client = resound.Client(addresses(servers), transport="grpc")
    for value in range(3):
        client.insert([np.float32(value)], priorities={"q": 1.0})
    client.sample_batch("q", 3, timeout=SAFETY)
    streams = {t for t in threading.enumerate() if t.name == "resound-insert-stream"} - before
    assert len(streams) == 3  # each server's insert() stream
    servers[0].stop()
    with pytest.raises(ConnectionError):
        client.reset("q")  # the calls ran on pool threads, one failed
    servers_ref = weakref.ref(client._transport)
    del client
    gc.collect()
    wait_until(lambda: not any(t.is_alive() for t in streams), "the streams ended")
    assert servers_ref() is None


def test_structured_writers_stick_to_one_server_each(servers) -> None:
    from resound import structured_writer as sw

    step = sw.create_reference_step({"x": None})
    config = sw.create_config({"x": step["x"][-2:]}, "q", [sw.Condition.step_index() >= 1])
    client = resound.Client(addresses(servers), transport="grpc")
    for writer_index in range(3):
        with client.structured_writer([config]) as writer:
            for value in range(5):
                writer.append({"x": np.float32(10 * writer_index + value)})
    assert sizes(servers, "q") == [4, 4, 4]
    for server in servers:  # each server holds one writer's pairs of steps
        samples = list(server.in_process_client().sample("q", 4, emit_timesteps=False))
        pairs = [s.data[0].tolist() for s in samples]
        first = int(pairs[0][0]) // 10 * 10
        assert pairs == [[first + v, first + v + 1] for v in range(4)]
