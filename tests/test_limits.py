"""Limits: a server's ``max_bytes`` refuses inserts that would pass it (a
clear ResourceExhaustedError, nothing stored lost, room again once items go),
including a client that sends chunks no item uses; a writer far ahead of its
server waits for room (test_remote_writer.py); bad limit values are refused."""

from __future__ import annotations

from pathlib import Path

import grpc
import numpy as np
import pytest

import resound
from resound import _proto

from conftest import SAFETY, ServerProcess, refused_start

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
