"""Limits: a server's ``max_bytes`` refuses inserts that would pass it (a
clear ResourceExhaustedError, nothing stored lost, room again once items go),
including a client that sends chunks no item uses; a writer far ahead of its
server waits for room (test_remote_writer.py); bad limit values are refused."""

from __future__ import annotations

import gc
from pathlib import Path

import grpc
import numpy as np
import pytest

import resound
from resound import _proto
from resound.table import shared_chunk_store

from helpers.server_processes import ServerProcess, refused_start
from helpers.waiting import SAFETY, wait_until

P = _proto
CONFIG = """
[[tables]]
name = "q"
kind = "queue"
max_size = 100000
"""
SERVING = r"serving 1 table\(s\) on 127\.0\.0\.1:(\d+)"
LIMIT = 300 * 1024


@pytest.fixture
def limited(tmp_path: Path):
    config = tmp_path / "server.toml"
    config.write_text(CONFIG)
    served = ServerProcess(config, "--max-bytes", "300K")
    try:
        yield f"127.0.0.1:{served.wait_for(SERVING).group(1)}"
    finally:
        assert served.stop() == 0


def test_inserts_past_max_bytes_are_refused_and_room_comes_back(limited) -> None:
    client = resound.Client(limited)
    writer = client.trajectory_writer(1)
    written = 0
    with pytest.raises(resound.ResourceExhaustedError, match=f"past its max_bytes of {LIMIT}"):
        for value in range(1000):  # 4 MB in all, far past the limit
            writer.append([np.full(1000, value, np.float32)])
            writer.create_item("q", 1.0, [writer.history[0][-1:]])
            writer.flush(timeout_ms=int(SAFETY * 1000))
            written += 1
    assert 40 <= written < 80  # about 300 KB of 4 KB items were taken
    info = client.server_info()["q"]
    assert info.current_size == written
    # What is stored is whole and in order.
    values = [float(s.data[0][0, 0]) for s in client.sample("q", written, emit_timesteps=False)]
    assert values == [float(v) for v in range(written)]
    # Sampling the queue freed the room: a new writer gets in again.
    with client.trajectory_writer(1) as again:
        again.append([np.zeros(1000, np.float32)])
        again.create_item("q", 1.0, [again.history[0][-1:]])
    assert client.server_info()["q"].current_size == 1


def test_a_client_sending_chunks_no_item_uses_is_stopped_at_the_limit(limited) -> None:
    channel = grpc.insecure_channel(limited)
    payload = np.zeros(16 * 1024, np.float32).tobytes()  # 64 KB a message

    def chunk_only(key: int) -> bytes:
        batch = P.ChunkBatch(
            layouts=[P.ChunkLayout(dtype="<f4", shape=[16 * 1024], compression="none")],
            keys=[key], layout_indices=[0], num_steps=[1], episode_ids=[1],
            start_steps=[0], end_steps=[0], data_sizes=[len(payload)],
        )  # fmt: skip
        return P.InsertRequest(chunks=batch, chunk_data=payload).SerializeToString()

    call = channel.stream_stream(
        f"/{P.SERVICE}/Insert", response_deserializer=P.InsertResponse.FromString
    )
    with pytest.raises(grpc.RpcError) as refused:
        list(call(iter([chunk_only(key) for key in range(1, 100)]), timeout=SAFETY))
    assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "nothing of the message was stored" in refused.value.details()
    channel.close()
    # The stream's chunks died with it: the server takes items again.
    client = resound.Client(limited)
    client.insert([np.zeros(1000, np.float32)], priorities={"q": 1.0})
    assert client.server_info()["q"].current_size == 1


def write_items(writer: resound.TrajectoryWriter, count: int, table: str = "q") -> None:
    """``count`` items of one 10 KB step each, then a flush."""
    for value in range(count):
        writer.append([np.full(2500, value, np.float32)])
        writer.create_item(table, 1.0, [writer.history[0][-1:]])
    writer.flush(timeout_ms=int(SAFETY * 1000))


def test_max_bytes_counts_each_stored_byte_once_and_freed_room_is_free() -> None:
    # A client in the server's process: its writers' chunks used to share the
    # server's store, counted there too, and the chunks the server kept for a
    # stream never looked unused to the writer, so it never released them.
    store = shared_chunk_store()  # the server's chunks (its tables' store)
    gc.collect()
    # What other tables of this process still hold (earlier tests' tables,
    # maybe freed meanwhile) counts against the limit as well: 1 MB on top.
    before = store.memory_bytes
    limit = before + 1_000_000
    table = resound.Table.queue("q", 1000)
    server = resound.Server([table], max_bytes=limit)
    try:
        client = resound.Client(f"127.0.0.1:{server.port}", transport="grpc")
        first = client.trajectory_writer(1)
        write_items(first, 80)  # 800 KB, flushed once: was refused after 1 item
        assert table.info.current_size == 80
        # Each chunk once: the store holds the table's chunks, nothing more.
        assert table.info.memory_bytes <= store.memory_bytes <= before + table.info.memory_bytes
        kept = table.info.memory_bytes // 80  # the one chunk ``first`` keeps alive
        # The idle writer releases what it let go of: after a reset the
        # server holds only the chunk the writer may still use.
        client.reset("q")
        wait_until(
            lambda: store.memory_bytes <= before + kept, "the idle writer's chunks are released"
        )
        second = client.trajectory_writer(1)
        write_items(second, 80)
        assert table.info.current_size == 80
        # Past the limit: refused, and what is stored stays within it.
        with pytest.raises(resound.ResourceExhaustedError, match=f"past its max_bytes of {limit}"):
            write_items(second, 80)
        assert 80 <= table.info.current_size < 160
        assert store.memory_bytes <= limit
        # The refused stream's chunks went with it; reset frees the rest.
        client.reset("q")
        wait_until(
            lambda: store.memory_bytes <= before + kept, "the refused stream's chunks are freed"
        )
        with client.trajectory_writer(1) as third:
            write_items(third, 80)
        assert table.info.current_size == 80
        first.close()
    finally:
        server.stop()


def test_chunks_sent_again_bring_no_new_bytes(limited) -> None:
    # A writer that reconnects sends its unconfirmed items' chunks again; one
    # an item still uses is stored once, so it takes no room.
    channel = grpc.insecure_channel(limited)
    payload = np.ones(16 * 1024, np.float32).tobytes()  # 64 KB a chunk

    def request(key: int, chunk_key: int) -> bytes:
        batch = P.ChunkBatch(
            layouts=[P.ChunkLayout(dtype="<f4", shape=[16 * 1024], compression="none")],
            keys=[chunk_key], layout_indices=[0], num_steps=[1], episode_ids=[1],
            start_steps=[0], end_steps=[0], data_sizes=[len(payload)],
        )  # fmt: skip
        items = P.ItemBatch(
            tables=["q"], table_indices=[0], keys=[key], priorities=[1.0],
            trajectories=P.Trajectories(num_columns=[1], num_slices=[1], squeeze=[False],
                                        chunk_keys=[chunk_key], offsets=[0], lengths=[1]),
        )  # fmt: skip
        return P.InsertRequest(chunks=batch, chunk_data=payload, items=items).SerializeToString()

    call = channel.stream_stream(
        f"/{P.SERVICE}/Insert", response_deserializer=P.InsertResponse.FromString
    )
    # Four chunks of 64 KB with their items: 256 KB of the 300 KB.
    first = [request(key, chunk_key=key) for key in range(1, 5)]
    confirmed = [k for r in call(iter(first), timeout=SAFETY) for k in r.item_keys]
    assert confirmed == [1, 2, 3, 4]
    # Chunk 4 again (with another item), as a reconnected stream sends it.
    again = call(iter([request(5, chunk_key=4)]), timeout=SAFETY)
    assert [k for r in again for k in r.item_keys] == [5]
    assert resound.Client(limited).server_info()["q"].current_size == 5
    channel.close()


@pytest.mark.parametrize("value", [0, -1, 1.5, True, "1G"])
def test_bad_max_bytes_is_refused(value) -> None:
    with pytest.raises(ValueError, match="max_bytes must be an int >= 1 or None"):
        resound.Server([resound.Table.queue("q", 10)], max_bytes=value)


@pytest.mark.parametrize(
    ("args", "config", "message"),
    [
        (["--max-bytes", "lots"], "", "must be a positive integer of bytes"),
        (["--max-bytes", "0"], "", "must be a positive integer of bytes"),
        ([], "[server]\nmax_bytes = -5\n", "server.max_bytes must be an integer >= 1"),
    ],
)
def test_the_server_command_refuses_bad_limits(tmp_path, args, config, message) -> None:
    path = tmp_path / "server.toml"
    path.write_text(config + CONFIG)
    assert message in refused_start("--config", str(path), *args)


@pytest.mark.slow
def test_a_message_past_max_message_bytes_is_refused_before_it_is_read(tmp_path) -> None:
    config = tmp_path / "server.toml"
    config.write_text(CONFIG)
    served = ServerProcess(config, "--max-message-bytes", "64M")
    try:
        address = f"127.0.0.1:{served.wait_for(SERVING).group(1)}"
        client = resound.Client(address)
        client.insert([np.zeros(1000, np.float32)], priorities={"q": 1.0})
        huge = np.zeros(20 << 20, np.float32)  # one 80 MB chunk
        with pytest.raises(resound.ResourceExhaustedError, match="larger than max"):
            client.insert([huge], priorities={"q": 1.0})
        # What was stored stays, and the server serves new clients.
        again = resound.Client(address)
        assert again.server_info()["q"].current_size == 1
    finally:
        assert served.stop() == 0


@pytest.mark.parametrize("value", [1 << 20, (1 << 30) + 1, 2.0])
def test_bad_max_message_bytes_is_refused(value) -> None:
    with pytest.raises(ValueError, match=r"max_message_bytes must be an int in \[67108864, "):
        resound.Server([resound.Table.queue("q", 10)], max_message_bytes=value)


# --- a table's max_bytes


def bytes_table(max_bytes: int, remover: resound.selectors.ItemSelector) -> resound.Table:
    return resound.Table(
        "b", resound.selectors.Uniform(), remover, 1000, resound.rate_limiters.MinSize(1),
        max_bytes=max_bytes,
    )  # fmt: skip


@pytest.mark.parametrize("transport", ["embedded", "grpc"])
def test_a_table_evicts_by_its_remover_to_stay_within_max_bytes(transport) -> None:
    table = bytes_table(50_000, resound.selectors.Fifo())
    server = resound.Server([table], listen=transport == "grpc")
    try:
        client = (
            server.in_process_client()
            if transport == "embedded"
            else resound.Client(f"127.0.0.1:{server.port}", transport="grpc")
        )
        with client.trajectory_writer(1) as writer:
            for value in range(100):  # 100 items of 4 KB: 400 KB
                writer.append([np.full(1000, value, np.float32)])
                writer.create_item("b", 1.0, [writer.history[0][-1:]])
                writer.flush()
                info = client.server_info()["b"]
                assert info.memory_bytes <= 50_000
        assert info.max_bytes == 50_000 and 9 <= info.current_size <= 12
        # Fifo kept the newest items.
        kept = sorted(float(s.data[0][0, 0]) for s in client.sample("b", 500, emit_timesteps=False))
        assert set(kept) == set(range(100 - info.current_size, 100))
    finally:
        server.stop()


def test_an_item_larger_than_max_bytes_is_refused_and_nothing_changes() -> None:
    table = bytes_table(10_000, resound.selectors.Lifo())
    server = resound.Server([table], listen=False)
    client = server.in_process_client()
    client.insert([np.zeros(1000, np.float32)], priorities={"b": 1.0})
    with pytest.raises(ValueError, match="more than the max_bytes 10000 of table 'b'"):
        client.insert([np.zeros(5000, np.float32)], priorities={"b": 1.0})
    assert table.info.current_size == 1
    assert "max_bytes=10000" in repr(table)
    assert table.replace(name="c").info.max_bytes == 10_000


@pytest.mark.parametrize("value", [0, -1, 2.5, True])
def test_bad_table_max_bytes_is_refused(value) -> None:
    with pytest.raises(ValueError, match="max_bytes"):
        bytes_table(value, resound.selectors.Fifo())


@pytest.mark.slow
def test_the_server_command_takes_a_table_max_bytes(tmp_path) -> None:
    config = tmp_path / "server.toml"
    config.write_text(
        CONFIG.replace('kind = "queue"', "").replace(
            "max_size = 100000",
            'sampler = "uniform"\nremover = "fifo"\nmax_size = 100000\nmax_bytes = 65536\n'
            'rate_limiter = { kind = "min_size", min_size_to_sample = 1 }',
        )
    )
    served = ServerProcess(config)
    try:
        client = resound.Client(f"127.0.0.1:{served.wait_for(SERVING).group(1)}")
        assert client.server_info()["q"].max_bytes == 65536
    finally:
        assert served.stop() == 0
    bad = tmp_path / "bad.toml"
    bad.write_text(config.read_text().replace("65536", '"lots"'))
    assert "max_bytes must be an integer >= 1" in refused_start("--config", str(bad))


@pytest.mark.slow
def test_the_server_command_takes_the_open_call_and_inflight_limits(tmp_path) -> None:
    config = tmp_path / "server.toml"
    config.write_text(
        "[server]\nmax_open_calls = 100\nmax_inflight_bytes = 1_000_000_000\n" + CONFIG
    )
    served = ServerProcess(
        config, "--max-open-calls-per-connection", "2", "--max-inflight-bytes-per-connection", "64M"
    )
    try:
        address = f"127.0.0.1:{served.wait_for(SERVING).group(1)}"
        channel = grpc.insecure_channel(address)
        request = P.SampleRequest(table="q", num_samples=1, timeout_seconds=-1.0)
        sample = channel.unary_stream(f"/{P.SERVICE}/Sample")
        # Three calls of one connection on an empty queue: two wait, the
        # third (in gRPC's order) is refused at once.
        calls = [sample(request.SerializeToString()) for _ in range(3)]
        wait_until(lambda: any(call.done() for call in calls), "a call refused")
        [refused] = [call for call in calls if call.done()]
        assert refused.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "max_open_calls_per_connection" in refused.details()
        for call in calls:
            call.cancel()
        channel.close()
    finally:
        assert served.stop() == 0
    bad = tmp_path / "bad.toml"
    bad.write_text("[server]\nmax_open_calls = 0\n" + CONFIG)
    assert "max_open_calls must be an integer >= 1" in refused_start("--config", str(bad))
