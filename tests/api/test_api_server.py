"""resound.Server (docs/semantics.md §7, docs/compatibility.md items 8 and 22):
construction errors, the embedded mode and the addresses clients reach it
under, stop() cancelling blocked callers, wait() and the context manager."""

from __future__ import annotations

import logging
import os
import re
import socket

import numpy as np
import pytest

import resound
from resound import rate_limiters, selectors

from helpers.waiting import SAFETY, Background, wait_until


def uniform_table(name: str = "t", max_size: int = 10, min_size: int = 1) -> resound.Table:
    return resound.Table(
        name, selectors.Uniform(), selectors.Fifo(), max_size, rate_limiters.MinSize(min_size)
    )


def limiter_counter(table: resound.Table, name: str) -> int:
    return int(table._core.info().rate_limiter[name])


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def open_sockets() -> set[str]:
    """The socket inodes this process holds open ('socket:[1234]')."""
    found = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # the listing's own directory fd is gone by now
            continue
        if target.startswith("socket:"):
            found.add(target)
    return found


# --- construction


@pytest.mark.parametrize("tables", [None, [], ()])
def test_server_needs_at_least_one_table(tables: object) -> None:
    with pytest.raises(ValueError, match="At least one table must be provided"):
        resound.Server(tables, listen=False)  # type: ignore[arg-type]


def test_duplicate_table_names_are_listed_in_the_error() -> None:
    tables = [uniform_table("b"), uniform_table("a"), uniform_table("b"), uniform_table("a")]
    tables.append(uniform_table("c"))
    with pytest.raises(ValueError, match="Multiple items in tables have the same name: a, b$"):
        resound.Server(tables, listen=False)


def test_tables_must_be_resound_tables() -> None:
    with pytest.raises(ValueError, match="resound.Table"):
        resound.Server(["t"], listen=False)  # type: ignore[list-item]


@pytest.mark.parametrize("port", [0, -1, 65536, 1.5, "8000", True])
def test_bad_port_is_rejected(port: object) -> None:
    with pytest.raises(ValueError, match="port"):
        resound.Server([uniform_table()], port=port)  # type: ignore[arg-type]


def test_checkpointer_must_be_a_checkpointer() -> None:
    with pytest.raises(ValueError, match="checkpointer must be a resound.checkpointers"):
        resound.Server([uniform_table()], checkpointer=object(), listen=False)


def test_a_port_cannot_be_served_twice_in_one_process() -> None:
    first = resound.Server([uniform_table()])
    with pytest.raises(ValueError, match=f"port {first.port} is already in use"):
        resound.Server([uniform_table()], port=first.port)
    first.stop()
    second = resound.Server([uniform_table()], port=first.port)  # free again after stop
    try:
        assert second.port == first.port
    finally:
        second.stop()


# --- addresses and clients


def test_default_server_has_a_port_and_an_explicit_port_is_kept() -> None:
    with resound.Server([uniform_table()]) as server:
        assert isinstance(server.port, int)
        assert 0 < server.port < 65536
    port = free_port()
    with resound.Server([uniform_table()], port=port) as server:
        assert server.port == port


def test_embedded_server_has_no_port() -> None:
    with resound.Server([uniform_table()], listen=False) as server:
        assert server.port is None
        assert server.running
        assert list(server.tables) == ["t"]


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1", "[::1]", "dns:///localhost"])
def test_client_given_the_address_reaches_the_server_in_this_process(host: str) -> None:
    with resound.Server([uniform_table()]) as server:
        client = resound.Client(f"{host}:{server.port}")
        assert client.server_address == f"{host}:{server.port}"
        client.insert(np.arange(3), priorities={"t": 1.0})
        assert server.table("t").info.current_size == 1
        assert client.server_info()["t"].current_size == 1
        (sample,) = client.sample("t", emit_timesteps=False)
        np.testing.assert_array_equal(sample.data[0], [[0, 1, 2]])


def test_localhost_client_and_in_process_client_share_the_tables() -> None:
    with resound.Server([uniform_table()]) as server:
        local = server.localhost_client()
        assert isinstance(local, resound.Client)
        assert local.server_address == f"localhost:{server.port}"
        local.insert(1.0, priorities={"t": 1.0})
        direct = server.in_process_client()
        direct.insert(2.0, priorities={"t": 1.0})
        assert local.server_info()["t"].current_size == 2
        assert direct.server_info()["t"].current_size == 2


def test_embedded_server_clients_are_in_process() -> None:
    with resound.Server([uniform_table()], listen=False) as server:
        client = server.localhost_client()  # no port: the in-process client
        assert client.server_address == "in-process"
        client.insert(1.0, priorities={"t": 1.0})
        assert server.in_process_client().server_info()["t"].current_size == 1


def test_client_construction_contacts_nothing_and_use_of_an_unserved_address_waits() -> None:
    port = free_port()
    client = resound.Client(f"localhost:{port}")  # nothing serves it: still fine
    # Calls wait for the server (as Reverb's), up to their timeout
    # (tests/service/test_wait_for_server.py has the rest).
    with pytest.raises(resound.DeadlineExceededError, match=str(port)):
        client.server_info(timeout=0.2)
    # Once a server serves that port, the same client object reaches it.
    with resound.Server([uniform_table()], port=port):
        assert client.server_info()["t"].current_size == 0


def test_a_stopped_server_is_no_longer_found_by_address() -> None:
    server = resound.Server([uniform_table()])
    address = f"localhost:{server.port}"
    server.stop()
    with pytest.raises(resound.DeadlineExceededError):
        resound.Client(address).server_info(timeout=0.2)


def test_a_client_reaches_a_new_server_at_the_address_of_a_stopped_one() -> None:
    first = resound.Server([uniform_table()])
    client = resound.Client(f"localhost:{first.port}")
    client.insert(1, priorities={"t": 1.0})
    first.stop()
    with pytest.raises(resound.CancelledError):  # nothing serves the address now
        client.insert(2, priorities={"t": 1.0})
    with resound.Server([uniform_table()], port=first.port) as second:
        client.insert(3, priorities={"t": 1.0})
        assert second.table("t").info.current_size == 1
        assert client.server_info()["t"].current_size == 1
    assert first.table("t").info.current_size == 1


def test_unknown_table_name() -> None:
    with (
        resound.Server([uniform_table("a"), uniform_table("b")], listen=False) as server,
        pytest.raises(resound.NotFoundError, match="nope.*a, b"),
    ):
        server.table("nope")


def test_embedded_mode_opens_no_socket() -> None:
    before = open_sockets()
    server = resound.Server([uniform_table()], listen=False)
    client = server.in_process_client()
    client.insert({"x": np.arange(4.0)}, priorities={"t": 1.0})
    (sample,) = client.sample("t", emit_timesteps=False)
    batch = client.sample_batch("t", 3)
    client.server_info()
    opened = open_sockets() - before
    server.stop()
    np.testing.assert_array_equal(sample.data[0], [np.arange(4.0)])
    assert batch.data[0].shape == (3, 1, 4)
    assert opened == set()


def test_the_socket_check_sees_sockets() -> None:
    # Guards the test above: a socket opened here does show up.
    before = open_sockets()
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM):
        assert len(open_sockets() - before) == 1


# --- stop, wait, context manager


def test_stop_is_idempotent_and_later_calls_are_cancelled() -> None:
    server = resound.Server([uniform_table()], listen=False)
    client = server.in_process_client()
    client.insert(1.0, priorities={"t": 1.0})
    server.stop()
    assert not server.running
    server.stop()  # again: no error
    assert not server.running
    with pytest.raises(resound.CancelledError):
        client.insert(2.0, priorities={"t": 1.0})
    with pytest.raises(resound.CancelledError):
        client.sample_batch("t", 1)
    with pytest.raises(resound.CancelledError):
        next(client.sample("t"))
    assert server.table("t").info.current_size == 1


def test_stop_cancels_a_sampler_blocked_on_an_empty_table() -> None:
    server = resound.Server([uniform_table()], listen=False)
    table = server.table("t")
    client = server.in_process_client()
    blocked = Background(lambda: next(client.sample("t")))
    wait_until(lambda: limiter_counter(table, "waiting_samples") == 1, "the sampler waits")
    assert not blocked.done()
    server.stop()
    error = blocked.raised(resound.CancelledError)
    assert isinstance(error, RuntimeError)
    assert limiter_counter(table, "samples") == 0


def test_stop_cancels_a_batch_sampler_blocked_on_an_empty_table() -> None:
    server = resound.Server([uniform_table()], listen=False)
    table = server.table("t")
    blocked = Background(server.in_process_client().sample_batch, "t", 4)
    wait_until(lambda: limiter_counter(table, "waiting_samples") == 1, "the sampler waits")
    server.stop()
    blocked.raised(resound.CancelledError)


def test_stop_cancels_a_blocked_inserter_without_inserting() -> None:
    server = resound.Server([resound.Table.queue("q", 1)], listen=False)
    table = server.table("q")
    client = server.in_process_client()
    client.insert(1, priorities={"q": 1.0})
    blocked = Background(client.insert, 2, priorities={"q": 1.0})
    wait_until(lambda: limiter_counter(table, "waiting_inserts") == 1, "the inserter waits")
    server.stop()
    blocked.raised(resound.CancelledError)
    info = table.info
    assert info.current_size == 1  # the cancelled insert was not performed
    assert info.rate_limiter_info.insert_stats.completed == 1


def test_wait_returns_after_stop_from_another_thread() -> None:
    server = resound.Server([uniform_table()], listen=False)
    waiter = Background(server.wait)
    # A negative check: wait() must still be blocked while the server runs.
    waiter._thread.join(0.05)
    assert not waiter.done()
    server.stop()
    assert waiter.value() is None


def test_wait_returns_at_once_when_already_stopped() -> None:
    server = resound.Server([uniform_table()], listen=False)
    server.stop()
    assert Background(server.wait).join(SAFETY).error is None


def test_context_manager_returns_the_server_and_stops_it() -> None:
    with resound.Server([uniform_table()], listen=False) as server:
        assert isinstance(server, resound.Server)
        assert server.running
        client = server.in_process_client()
        client.insert(1.0, priorities={"t": 1.0})
    assert not server.running
    with pytest.raises(resound.CancelledError):
        client.insert(1.0, priorities={"t": 1.0})


def test_context_manager_stops_the_server_when_the_block_raises() -> None:
    with pytest.raises(KeyError), resound.Server([uniform_table()], listen=False) as server:
        raise KeyError("boom")
    assert not server.running


def test_repr_names_the_mode_and_tables() -> None:
    with resound.Server([uniform_table("replay")], listen=False) as server:
        text = repr(server)
        assert text.startswith("Server(embedded, tables=[Table(")
        assert "name='replay'" in text
    with resound.Server([uniform_table("replay")]) as server:
        assert repr(server).startswith(f"Server(port={server.port}, tables=[")


def listening_on(port: int) -> set[str]:
    """The local addresses (hex, as /proc/net shows them) listening on ``port``."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as lines:
            for line in list(lines)[1:]:
                fields = line.split()
                address, port_hex = fields[1].rsplit(":", 1)
                if int(port_hex, 16) == port and fields[3] == "0A":  # LISTEN
                    if address.startswith("0000000000000000FFFF0000"):  # IPv4-mapped IPv6
                        address = address[-8:]
                    elif address == "0" * 32:  # ::, as 0.0.0.0
                        address = "0" * 8
                    found.add(address)
    return found


def test_the_server_listens_on_loopback_only_unless_told_otherwise() -> None:
    server = resound.Server([uniform_table()])
    try:
        assert listening_on(server.port) == {"0100007F"}  # 127.0.0.1
    finally:
        server.stop()
    everywhere = resound.Server([uniform_table()], host="0.0.0.0")
    try:
        assert listening_on(everywhere.port) == {"00000000"}
    finally:
        everywhere.stop()


def test_a_server_logs_its_start_checkpoints_restores_and_stop(tmp_path, caplog) -> None:
    caplog.set_level(logging.INFO, logger="resound.server")
    checkpointer = resound.checkpointers.DefaultCheckpointer(str(tmp_path))
    with resound.Server([resound.Table.queue("q", 10)], checkpointer=checkpointer) as server:
        server.in_process_client().insert(np.zeros(1000, np.float32), priorities={"q": 1.0})
        path = server.checkpoint()
    restored = resound.Server(
        [resound.Table.queue("q", 10)], listen=False, checkpointer=checkpointer
    )
    restored.stop()
    lines = [record.getMessage() for record in caplog.records if record.name == "resound.server"]
    assert lines[0] == f"serving 1 table(s) on 127.0.0.1:{server.port} (plaintext)"
    assert re.fullmatch(
        rf"checkpoint written: {re.escape(path)} \(1 items, [\d.]+ MiB in 1 table\(s\), [\d.]+ s\)",
        lines[1],
    )
    assert re.fullmatch(r"stopped after \d+ s", lines[2])
    assert re.fullmatch(
        rf"restored {re.escape(path)}: 1 items, [\d.]+ MiB in 1 table\(s\) in [\d.]+ s", lines[3]
    )
    assert re.fullmatch(r"stopped after \d+ s", lines[4]) and len(lines) == 5
