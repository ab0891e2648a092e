"""The same-host transport (docs/local-transport.md) beyond the API suite,
which runs on it through the ``serve`` fixture: which transport a client
picks, the proof of the server's identity, who is let in, faults, and
frames no client library sends."""

from __future__ import annotations

import array
import contextlib
import fcntl
import gc
import os
import random
import signal
import socket
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import resound
from resound import _core
from resound._transport.local import LocalTransport
from resound._transport.remote import RemoteTransport
from resound.table import shared_chunk_store

from helpers.server_processes import REPLAY_TABLE_TOML, ServerProcess
from helpers.waiting import SAFETY, wait_until

pytestmark = pytest.mark.skipif(
    not _core.HAS_LOCAL_TRANSPORT, reason="the same-host transport needs Linux"
)


def replay() -> resound.Table:
    return resound.Table(
        "replay",
        resound.selectors.Uniform(),
        resound.selectors.Fifo(),
        1000,
        resound.rate_limiters.MinSize(1),
    )


def chosen(client: resound.Client) -> Any:
    return client._transport.chosen()  # type: ignore[attr-defined]


def insert_and_sample(client: resound.Client, value: float) -> None:
    client.insert({"x": np.full(4, value, np.float32)}, priorities={"replay": 1.0})
    sample = next(client.sample("replay", emit_timesteps=False))
    assert np.asarray(sample.data[0]).size >= 4  # no signature: the leaves, flat


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "server.toml"
    path.write_text('[server]\nhost = "127.0.0.1"\nport = 0\n' + REPLAY_TABLE_TOML)
    return path


def serving_port(served: ServerProcess) -> int:
    return int(served.wait_for(r"serving 1 table\(s\) on 127\.0\.0\.1:(\d+)").group(1))


# --- which transport


def test_a_client_of_a_server_in_another_process_uses_it_and_grpc_when_told(config):
    served = ServerProcess(config)
    try:
        port = serving_port(served)
        client = resound.Client(f"127.0.0.1:{port}")
        insert_and_sample(client, 1.0)
        transport = chosen(client)
        assert isinstance(transport, LocalTransport)
        assert transport.local_path is not None and transport.local_path.endswith("replay.sock")
        forced = resound.Client(f"127.0.0.1:{port}", transport="grpc")
        insert_and_sample(forced, 2.0)
        assert type(chosen(forced)) is RemoteTransport
        # The socket's address works as an address of its own.
        direct = resound.Client(f"unix://{transport.local_path}")
        assert direct.server_info()["replay"].current_size == 2
        client.close(), forced.close(), direct.close()
    finally:
        assert served.stop() == 0


def test_a_socket_with_another_token_is_not_used(monkeypatch):
    server = resound.Server([replay()])
    other = resound.Server([replay()])
    try:
        assert server._local is not None and other._local is not None
        # The server advertises the other's socket with its own token's hash:
        # what a client finds at the path is not the server it asked.
        monkeypatch.setattr(server._local, "address", other._local.address)
        transport = LocalTransport(f"127.0.0.1:{server.port}")
        assert transport._local_connections() is None  # gRPC, then
        assert transport.server_info(SAFETY)["replay"].current_size == 0
        required = LocalTransport(f"127.0.0.1:{server.port}", required=True)
        with pytest.raises(ConnectionError, match="offers no same-host transport"):
            required.server_info(SAFETY)
        transport.close(), required.close()
    finally:
        server.stop()
        other.stop()


def test_a_server_without_it_advertises_none_and_clients_use_grpc():
    server = resound.Server([replay()], local_transport=False)
    try:
        assert server.local_address is None
        client = resound.Client(f"127.0.0.1:{server.port}", transport="local")
        with pytest.raises(ConnectionError, match="offers no same-host transport"):
            client.server_info()
        transport = LocalTransport(f"127.0.0.1:{server.port}")
        assert transport.server_info(SAFETY)["replay"].current_size == 0
        assert transport.local_path is None
        client.close(), transport.close()
    finally:
        server.stop()


# --- who is let in


def test_only_the_allowed_users_are_let_in():
    server = resound.Server([replay()], local_transport_uids=[os.geteuid() + 4242])
    try:
        assert server.local_address is not None
        path = server.local_address[len("unix://") :]
        with pytest.raises(_core.LocalStatusError, match="not let in"):
            _core.LocalClient(path, 4096, 4096, SAFETY)
        # An auto client then uses gRPC.
        transport = LocalTransport(f"127.0.0.1:{server.port}")
        assert transport.server_info(SAFETY)["replay"].current_size == 0
        assert transport.local_path is None
        transport.close()
    finally:
        server.stop()


def test_the_sockets_directory_admits_only_the_servers_user(tmp_path):
    server = resound.Server([replay()])
    try:
        path = server.local_address[len("unix://") :]
        assert os.stat(os.path.dirname(path)).st_mode & 0o777 == 0o700
        if os.geteuid() != 0:
            return  # another user's process cannot be made here; the mode is the proof
        # A child that becomes another user (nobody) cannot even reach the socket.
        child = os.fork()
        if child == 0:
            try:
                os.setgid(65534)
                os.setuid(65534)
                with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as sock:
                    sock.connect(path)
                os._exit(1)  # reached it: wrong
            except PermissionError:
                os._exit(0)
            except BaseException:
                os._exit(2)
        _, status = os.waitpid(child, 0)
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    finally:
        server.stop()
    assert not os.path.exists(os.path.dirname(path))  # removed at stop


# --- faults

WRITER = """
import sys, numpy as np, resound
client = resound.Client(sys.argv[1], transport="local")
with client.trajectory_writer(1) as writer:
    writer.append({"x": np.zeros(100_000, np.float32)})
    writer.create_item("replay", 1.0, {"x": writer.history["x"][-1]})
    writer.flush()
    print("wrote", flush=True)
    while True:
        writer.append({"x": np.ones(100_000, np.float32)})
        writer.create_item("replay", 1.0, {"x": writer.history["x"][-1]})
"""


def test_client_inserts_leave_nothing_in_the_session_of_their_connection():
    # client.insert sends a step's chunks, its items and the chunks' release
    # in one message on a pooled connection: the chunks live exactly as long
    # as the items (a session that kept them would hold the last step's).
    server = resound.Server([replay(), resound.Table.queue("other", 10)])
    try:
        client = resound.Client(f"127.0.0.1:{server.port}", transport="local")
        for step in range(5):
            observation = np.full((2, 3), step, np.float32)
            data = {"obs": observation, "step": np.int64(step)}
            client.insert(data, priorities={"replay": 1.0, "other": 2.0})
        items = server.table("replay")._core.snapshot()
        assert len(items) == len(server.table("other")._core.snapshot()) == 5
        keys = [chunk.key for item in items for chunk in item.chunks]
        assert len(set(keys)) == 10  # a chunk per field and step, shared by both tables
        sampled = client.sample_batch("other", 5)  # a queue: each once, in order
        assert sampled.data[0][:, 0, 0, 0].tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]
        assert sampled.data[1][:, 0].tolist() == [0, 1, 2, 3, 4]
        store = shared_chunk_store()
        assert all(key in store for key in keys)
        del items, sampled
        client.reset("replay")
        client.reset("other")
        assert not any(key in store for key in keys)
        client.close()
    finally:
        server.stop()


def test_large_chunks_reach_the_server_through_the_payload_arena():
    # A writer's chunks of 64 KB and more are built in the process's payload
    # arena, which the server maps: inserts name them there (the server
    # copies them once, into its own store) and every byte arrives; the
    # arena's blocks go back once the writer lets go of its chunks.
    server = resound.Server([resound.Table.queue("queue", 10)])
    try:
        client = resound.Client(f"127.0.0.1:{server.port}", transport="local")
        before = _core.payload_arena_bytes_in_use()
        steps = [
            np.arange(40_000, dtype=np.float32) + np.float32(1_000_000 * step) for step in range(6)
        ]
        with client.trajectory_writer(num_keep_alive_refs=2) as writer:
            for step in steps:
                writer.append({"obs": step})
                writer.create_item("queue", 1.0, {"obs": writer.history["obs"][-1]})
            # The last two steps' chunks (160 KB each) are kept for the items to come.
            assert _core.payload_arena_bytes_in_use() >= before + 2 * steps[0].nbytes
            writer.flush()
        # (The writer keeps its history's chunks while it lives, and it is
        # part of a reference cycle: collected by the cycle collector.)
        del writer
        gc.collect()
        connections = chosen(client)._local_connections()
        idle = list(connections._idle)
        assert idle and all(connection.arena_attached for connection in idle)
        sampled = client.sample_batch("queue", 6)  # each item once, in order
        assert np.array_equal(sampled.data[0], np.stack(steps))
        assert _core.payload_arena_bytes_in_use() == before
        client.close()
    finally:
        server.stop()


def test_a_client_killed_mid_insert_leaves_no_connection_behind():
    server = resound.Server([replay()])
    try:
        process = subprocess.Popen(
            [sys.executable, "-c", WRITER, f"127.0.0.1:{server.port}"],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert process.stdout is not None
        assert process.stdout.readline().strip() == "wrote"
        assert server._local is not None
        wait_until(lambda: server._local.num_connections >= 1, "the writer's connection")
        process.send_signal(signal.SIGKILL)
        process.wait(SAFETY)
        process.stdout.close()
        wait_until(lambda: server._local.num_connections == 0, "the connection to end")
        # What went in stays, and the server serves on.
        size = server.table("replay").info.current_size
        assert size >= 1
        client = resound.Client(f"127.0.0.1:{server.port}", transport="local")
        insert_and_sample(client, 3.0)
        assert server.table("replay").info.current_size == size + 1
        client.close()
    finally:
        server.stop()


def test_calls_end_when_the_server_stops_and_find_a_restarted_one(config, tmp_path):
    served = ServerProcess(config)
    port = serving_port(served)
    client = resound.Client(f"127.0.0.1:{port}", transport="local")
    insert_and_sample(client, 1.0)
    first = chosen(client).local_path
    assert served.stop(signal.SIGKILL) == -signal.SIGKILL
    with pytest.raises((resound.errors.DeadlineExceededError, ConnectionError)):
        client.server_info(timeout=1.0)
    # A new server on the same port: the client finds its socket.
    config.write_text(f'[server]\nhost = "127.0.0.1"\nport = {port}\n' + REPLAY_TABLE_TOML)
    again = ServerProcess(config)
    try:
        serving_port(again)
        assert client.server_info(timeout=SAFETY)["replay"].current_size == 0
        insert_and_sample(client, 2.0)
        assert chosen(client).local_path not in (None, first)
        client.close()
    finally:
        assert again.stop() == 0


# --- frames no client library sends

_HEADER = struct.Struct("<IHHIIQQQ")
# This build's protocol version (a frame of another is refused before anything else).
_VERSION = getattr(_core, "LOCAL_FRAME_VERSION", 0)
# A region's control page (its doorbell), before its payloads.
_CONTROL = getattr(_core, "LOCAL_CONTROL_BYTES", 0)


def frame(kind: int, method: int = 0, flags: int = 0, request: int = 1, offset: int = 0,
          length: int = 0, version: int = _VERSION) -> bytes:  # fmt: skip
    return _HEADER.pack(0x464C5352, version, kind, method, flags, request, offset, length)


def sealed_region(size: int) -> int:
    fd = os.memfd_create("fuzz", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    os.ftruncate(fd, size)
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW)
    return fd


def send(sock: socket.socket, data: bytes, fds: list[int] = ()) -> None:  # type: ignore[assignment]
    ancillary = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))] if fds else []
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the server closed it
        sock.sendmsg([data], ancillary)


def step_request(rng: random.Random, table: bytes) -> bytes:
    """An InsertStep request of one float32 field of 4 values into `table`
    (docs/local-transport.md), with its data tail, 0-3 of its bytes changed."""
    message = struct.pack("<QII", rng.getrandbits(64), 1, 1)
    message += struct.pack("<QQ16sII", rng.getrandbits(64), 16, b"<f4", 1, 0)
    message += struct.pack("<q", 4)
    message += struct.pack("<QdII", rng.getrandbits(64), 1.0, len(table), 0) + table.ljust(8, b"\0")
    payload = np.arange(4, dtype="<f4").tobytes()
    data = bytearray(struct.pack("<Q", len(message)) + message + payload)
    for _ in range(rng.randrange(4)):
        data[rng.randrange(len(data))] = rng.randrange(256)
    return bytes(data)


def served_with_five_items() -> tuple[resound.Server, resound.Client, list[int]]:
    """A server of the replay table, a same-host client that inserted five
    items, and their keys (sorted)."""
    server = resound.Server([replay()])
    client = resound.Client(f"127.0.0.1:{server.port}", transport="local")
    for value in range(5):
        client.insert({"x": np.full(4, value, np.float32)}, priorities={"replay": 1.0})
    return server, client, sorted(item.key for item in server.table("replay")._core.snapshot())


def test_random_frames_leave_the_tables_intact():
    server, client, before = served_with_five_items()
    try:
        connections = server._local.num_connections  # the client's own, idle
        path = server.local_address[len("unix://") :]
        rng = random.Random(11)
        region = sealed_region(_CONTROL + 4096)
        hello = frame(1, length=16) + struct.pack("<QQ", 4096, 4096)
        welcomed = 0
        for trial in range(300):
            with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as sock:
                sock.settimeout(SAFETY)
                sock.connect(path)
                if trial % 3:
                    send(sock, hello, [region])
                    try:
                        welcome, fds, _, _ = sock.recvmsg(70_000, 64)  # the welcome (or why not)
                    except OSError:
                        continue
                    welcomed += _HEADER.unpack_from(welcome)[2] == 2  # (kind 2: welcome)
                    for _, _, data in fds:  # the server's region: not needed
                        for fd in array.array("i", data):
                            os.close(fd)
                    if trial % 3 == 1:  # the region again, as a payload arena (of some size)
                        arena_bytes = rng.choice([_CONTROL + 4096, 0, 4096, 2**40])
                        send(sock, frame(8, length=8) + struct.pack("<Q", arena_bytes), [region])
                # The payloads' head: a data tail's message size, and bytes.
                size = rng.choice([0, 8, 150, 4000, 2**63])
                os.pwrite(region, struct.pack("<Q", size) + rng.randbytes(200), _CONTROL)
                # The control page: a doorbell count (1 rings a request) and
                # the rung frame's header.
                rung = frame(
                    rng.choice([3, 4, 6, 7]),
                    method=rng.choice([0, 1, 2, 4, 11, 12, 12, 99]),
                    flags=rng.choice([0, 1, 4, 5, 8, 16, 21]),
                    offset=rng.choice([0, 4000]),
                    length=rng.choice([0, 16, 200, 5000]),
                )
                count = rng.choice([0, 1, 1, 2, 2**64 - 1])
                os.pwrite(region, struct.pack("<Q", count) + rung, 0)
                data = bytearray(
                    frame(
                        rng.choice([1, 2, 3, 4, 5, 7, 8, 9]),
                        method=rng.choice([0, 1, 2, 3, 4, 6, 11, 12, 99]),
                        flags=rng.choice([0, 1, 2, 3, 4, 5, 8, 9, 16, 20, 21, 32]),
                        offset=rng.choice([0, 4000, 2**63]),
                        length=rng.choice([0, 16, 200, 5000, 2**40]),
                    )
                )
                data += rng.randbytes(rng.choice([0, 16, 100]))
                for _ in range(rng.randrange(3)):
                    data[rng.randrange(len(data))] = rng.randrange(256)
                send(sock, bytes(data), [region] if rng.random() < 0.1 else [])
        os.close(region)
        assert welcomed == 200  # the frames got past the handshake
        wait_until(
            lambda: server._local.num_connections == connections, "the fuzzed connections to end"
        )
        after = sorted(item.key for item in server.table("replay")._core.snapshot())
        assert after == before
        insert_and_sample(client, 9.0)
        client.close()
    finally:
        server.stop()


def test_changed_step_inserts_leave_the_tables_intact():
    server, client, before = served_with_five_items()
    try:
        gc.collect()
        chunks = len(shared_chunk_store())
        connections = server._local.num_connections
        path = server.local_address[len("unix://") :]
        rng = random.Random(12)
        region = sealed_region(_CONTROL + 4096)
        # Asleep, says this side's control page: the server sends a wake (or
        # an error) over the socket with its answer, which the test waits for.
        os.pwrite(region, struct.pack("<I", 1), 64)
        hello = frame(1, length=16) + struct.pack("<QQ", 4096, 4096)
        answered = ended = 0
        for _ in range(200):
            os.pwrite(region, struct.pack("<Q", 0), 0)  # no frame rung yet on a new connection
            with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as sock:
                sock.settimeout(SAFETY)
                sock.connect(path)
                send(sock, hello, [region])
                _, fds, _, _ = sock.recvmsg(70_000, 64)
                for _, _, data in fds:
                    for fd in array.array("i", data):
                        os.close(fd)
                # Into a table that does not exist: an unchanged request goes
                # as far as the server takes one (its chunks made, then let go).
                request = step_request(rng, b"absent")
                os.pwrite(region, request, _CONTROL)
                # A request in the region (flag 1) with a data tail (flag 4).
                rung = frame(3, method=12, flags=1 | 4, length=len(request))
                os.pwrite(region, struct.pack("<Q", 1) + rung, 0)
                send(sock, frame(7))  # a wake, in case the server slept already
                try:
                    answer = sock.recv(70_000)
                except ConnectionResetError:
                    answer = b""
                if not answer:  # a malformed frame: the server ended the connection
                    ended += 1
                    continue
                # A response, or an error (INVALID_ARGUMENT, NOT_FOUND, ...).
                answered += _HEADER.unpack_from(answer)[2] in (4, 5)
        os.close(region)
        assert answered + ended == 200 and answered > 150
        wait_until(
            lambda: server._local.num_connections == connections, "the fuzzed connections to end"
        )
        after = sorted(item.key for item in server.table("replay")._core.snapshot())
        assert after == before
        gc.collect()
        assert len(shared_chunk_store()) == chunks  # the refused steps' chunks went
        insert_and_sample(client, 9.0)
        client.close()
    finally:
        server.stop()


def test_a_frame_of_another_protocol_version_is_refused():
    # A client and a server of different versions: the hello is answered
    # with an error frame and the connection closed (the client then uses
    # gRPC), the tables as they were.
    server = resound.Server([replay()])
    try:
        path = server.local_address[len("unix://") :]
        region = sealed_region(_CONTROL + 4096)
        with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as sock:
            sock.settimeout(SAFETY)
            sock.connect(path)
            hello = frame(1, length=16, version=_VERSION - 1) + struct.pack("<QQ", 4096, 4096)
            send(sock, hello, [region])
            answer = sock.recv(70_000)
            assert _HEADER.unpack_from(answer)[2] == 5  # kind 5: an error
            assert b"version" in answer
            assert sock.recv(70_000) == b""  # closed
        os.close(region)
        client = resound.Client(server.local_address)
        insert_and_sample(client, 4.0)
        client.close()
    finally:
        server.stop()


# --- batches gathered into shared memory


def test_held_batches_keep_their_data_and_regions_are_lent_again_once_let_go():
    # Each item is 4 x 1,000 floats of its own value; batches of 8 are views
    # of regions the client lends the server (four per connection), lent
    # again only once nothing views them: with all four held, batches come
    # copied, and no held batch ever changes.
    server = resound.Server([replay()])
    try:
        client = resound.Client(server.local_address)
        for value in range(50):
            client.insert({"x": np.full((4, 1000), value, np.float32)}, priorities={"replay": 1.0})
        held = [client.sample_batch("replay", batch_size=8) for _ in range(8)]
        expected = [np.array(batch.data[0]) for batch in held]
        in_region = [isinstance(batch.data[0].base, _core.LocalBatchRegion) for batch in held]
        # The first batch teaches the client the size; four regions at most.
        assert in_region[0] is False and sum(in_region) == 4, in_region
        for batch, values in zip(held, expected, strict=True):
            np.testing.assert_array_equal(batch.data[0], values)
            keys_values = batch.data[0][:, 0, 0, 0]
            assert set(keys_values.tolist()) <= set(range(50))
        # Let go of the region batches: their regions serve the next ones.
        addresses = {b.data[0].ctypes.data for b, r in zip(held, in_region, strict=True) if r}
        held = [b for b, r in zip(held, in_region, strict=True) if not r]
        again = client.sample_batch("replay", batch_size=8)
        assert isinstance(again.data[0].base, _core.LocalBatchRegion)
        assert again.data[0].ctypes.data in addresses
        # A batch of another size (larger) gets a region of its own size.
        larger = client.sample_batch("replay", batch_size=32)
        assert larger.data[0].shape == (32, 1, 4, 1000)
        for row in larger.data[0]:
            assert np.all(row == row.flat[0])
        client.close()
    finally:
        server.stop()


def test_an_item_larger_than_the_connections_region_is_sampled_through_a_larger_one():
    # 80 MB items, past the 64 MB each connection's region starts with: the
    # server makes a larger region for them (up to its max_message_bytes)
    # and the client maps it in place of the old one, as gRPC would carry
    # them. Stacked (gathered) and as SampleResponses (lz4 chunks).
    big = np.random.default_rng(0).random(20_000_000, dtype=np.float32)
    server = resound.Server([replay()])
    try:
        client = resound.Client(server.local_address)
        client.insert({"x": big}, priorities={"replay": 1.0})
        batch = client.sample_batch("replay", batch_size=1)
        np.testing.assert_array_equal(batch.data[0][0, 0], big)
        sample = next(client.sample("replay", emit_timesteps=False))
        np.testing.assert_array_equal(np.asarray(sample.data[0]).ravel(), big)
        client.reset("replay")
        with client.trajectory_writer(1, compression="lz4") as writer:
            writer.append({"x": big})
            writer.create_item("replay", 1.0, {"x": writer.history["x"][-1]})
        sample = next(client.sample("replay", emit_timesteps=False))
        np.testing.assert_array_equal(np.asarray(sample.data[0]).ravel(), big)
        # Small items go on through the larger region.
        client.reset("replay")
        insert_and_sample(client, 3.0)
        assert isinstance(chosen(client), LocalTransport)
        client.close()
    finally:
        server.stop()
