"""Faults injected for real: a server killed while a writer flushes and a
sampler waits, client processes killed mid-stream, and a disk that fills up
or cannot be written during a checkpoint. Each ends in a clear error or a
recovery, within the caller's timeout, with nothing confirmed lost."""

from __future__ import annotations

import logging
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest

import resound
from resound import checkpointers
from resound._transport import waiting
from resound._wire import channel_options

from helpers.logs import Warnings
from helpers.server_processes import REPLAY_TABLE_TOML, ServerProcess, server_command
from helpers.waiting import SAFETY, Background, wait_until

SERVING = r"serving 1 table\(s\) on 127\.0\.0\.1:(\d+)"


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "server.toml"
    path.write_text(REPLAY_TABLE_TOML)
    return path


def served_port(served: ServerProcess, tables: int = 1) -> int:
    return int(served.wait_for(SERVING.replace("serving 1", f"serving {tables}")).group(1))


@pytest.fixture
def config_with_closed(tmp_path: Path) -> Path:
    """The replay table and "closed", an empty one that nothing writes to:
    a sampler of it waits for its rate limiter for as long as it is let."""
    path = tmp_path / "server.toml"
    path.write_text(REPLAY_TABLE_TOML + REPLAY_TABLE_TOML.replace('"replay"', '"closed"'))
    return path


def write(writer: resound.TrajectoryWriter, value: float, size: int = 1) -> None:
    writer.append([np.full(size, value, np.float32)])
    writer.create_item("replay", 1.0, [writer.history[0][-1:]])


# --- the server goes away


@pytest.mark.slow
def test_a_killed_server_is_waited_for_within_timeouts_and_writers_recover_on_restart(
    config_with_closed,
):
    config = config_with_closed
    served = ServerProcess(config)
    port = served_port(served, tables=2)
    client = resound.Client(f"127.0.0.1:{port}")
    writer = client.trajectory_writer(1)
    for value in range(10):
        write(writer, value)
    writer.flush(timeout_ms=int(SAFETY * 1000))  # 10 items confirmed

    # A sampler waits on a table the rate limiter keeps closed to it (empty);
    # once the server is gone it waits for it (as Reverb's samplers retry),
    # up to its timeout.
    sampler_error: list[BaseException] = []

    def wait_for_many() -> None:
        try:
            client.sample_batch("closed", 10, timeout=3.0)
        except BaseException as error:
            sampler_error.append(error)

    client.reset("replay")
    for value in range(10):
        write(writer, value)
    writer.flush(timeout_ms=int(SAFETY * 1000))
    sampler = threading.Thread(target=wait_for_many)
    sampler.start()
    for value in range(10, 15):  # on their way when the server dies
        write(writer, value)
    served.stop(signal.SIGKILL)
    sampler.join(SAFETY)
    assert not sampler.is_alive()
    assert len(sampler_error) == 1
    assert isinstance(sampler_error[0], resound.DeadlineExceededError), sampler_error
    # The writer's flush gives up at its timeout, keeping what it could not send.
    with pytest.raises(resound.DeadlineExceededError):
        writer.flush(timeout_ms=500)

    # The server restarts (empty: it was killed) and the writer sends again
    # everything the dead one had not confirmed.
    again = ServerProcess(config, "--port", str(port))
    try:
        served_port(again, tables=2)
        writer.flush(timeout_ms=int(SAFETY * 1000))
        restarted = resound.Client(f"127.0.0.1:{port}")
        assert restarted.server_info()["replay"].current_size >= 5
        values = sorted(
            float(s.data[0][0, 0]) for s in restarted.sample("replay", 2000, emit_timesteps=False)
        )
        assert set(range(10, 15)) <= set(values)
        writer.close()
    finally:
        assert again.stop() == 0


WRITER_PROCESS = textwrap.dedent(
    """
    import sys
    import numpy as np, resound
    client = resound.Client(sys.argv[1], transport="grpc")
    with client.trajectory_writer(1) as writer:
        step = 0
        while True:
            writer.append([np.full(256, step, np.float32)])
            writer.create_item("replay", 1.0, [writer.history[0][-1:]])
            step += 1
            if step % 100 == 0:
                writer.flush()
                print(step, flush=True)
    """
)
SAMPLER_PROCESS = textwrap.dedent(
    """
    import sys
    import resound
    client = resound.Client(sys.argv[1], transport="grpc")
    print("waiting", flush=True)
    client.sample_batch("empty", 10)  # blocks: the table stays empty
    """
)


def test_a_server_that_stops_answering_is_noticed_and_waited_for(config, monkeypatch) -> None:
    # A hung server (here stopped with SIGSTOP) keeps its connections open
    # and answers nothing. Keepalive pings (shortened here) notice it: the
    # sampler's call ends as on a lost connection, and the sampler says that
    # it waits for the server instead of waiting silently forever; it gets
    # its sample once the server answers again.
    monkeypatch.setattr(channel_options, "KEEPALIVE_MS", 300)
    monkeypatch.setattr(channel_options, "KEEPALIVE_TIMEOUT_MS", 300)
    monkeypatch.setattr(waiting, "WARNING_PERIOD_SECONDS", 0.05)
    noticed = Warnings("waiting for the server")
    logging.getLogger("resound").addHandler(noticed)
    served = ServerProcess(config)
    try:
        client = resound.Client(f"127.0.0.1:{served_port(served)}", transport="grpc")
        client.insert([np.float32(7.0)], priorities={"replay": 1.0})
        client.sample_batch("replay", 1, timeout=SAFETY)  # its stream stays open
        served.process.send_signal(signal.SIGSTOP)
        try:
            sampled = Background(client.sample_batch, "replay", 1)  # no timeout
            assert noticed.wait(SAFETY), "the sampler never noticed the hung server"
            assert not sampled.done()
        finally:
            served.process.send_signal(signal.SIGCONT)
        assert sampled.join().value().data[0].ravel().tolist() == [7.0]
    finally:
        logging.getLogger("resound").removeHandler(noticed)
        served.stop()


@pytest.mark.slow
def test_client_processes_killed_mid_stream_leave_the_server_whole() -> None:
    server = resound.Server(
        [
            resound.Table("replay", resound.selectors.Uniform(), resound.selectors.Fifo(),
                          100_000, resound.rate_limiters.MinSize(1)),
            resound.Table.queue("empty", 10),
        ]
    )  # fmt: skip
    address = f"127.0.0.1:{server.port}"
    try:
        writers = [
            subprocess.Popen([sys.executable, "-c", WRITER_PROCESS, address],
                             stdout=subprocess.PIPE, text=True)
            for _ in range(2)
        ]  # fmt: skip
        sampler = subprocess.Popen(
            [sys.executable, "-c", SAMPLER_PROCESS, address], stdout=subprocess.PIPE, text=True
        )
        confirmed = []
        for process in writers:  # each has had 300 items confirmed, and goes on
            assert process.stdout is not None
            for _ in range(3):
                line = process.stdout.readline()
            confirmed.append(int(line))
        assert sampler.stdout is not None and sampler.stdout.readline() == "waiting\n"
        for process in [*writers, sampler]:
            process.kill()
            process.wait(SAFETY)
            assert process.stdout is not None
            process.stdout.close()

        info = server.table("replay").info
        assert info.current_size >= sum(confirmed)
        # Every stored item is whole: its 256 values are its step.
        batch = server.in_process_client().sample_batch("replay", 500, timeout=SAFETY)
        rows = batch.data[0][:, 0, :]
        assert (rows == rows[:, :1]).all()
        # The server serves new clients, on both tables. (A sample request
        # whose client died may still take what comes in until the server
        # sees the connection closed, within its 0.1 s wait slices: as in
        # Reverb, such samples go to the dead client.)
        client = resound.Client(address, transport="grpc")
        client.insert([np.zeros(256, np.float32)], priorities={"replay": 1.0})

        def serves_the_queue() -> bool:
            client.insert([np.zeros(256, np.float32)], priorities={"empty": 1.0})
            try:
                return len(client.sample_batch("empty", 1, timeout=1.0).info.key) == 1
            except resound.DeadlineExceededError:
                return False  # taken by the dead sampler's request

        wait_until(serves_the_queue, "the queue serving a new client")
    finally:
        server.stop()


# --- the disk during a checkpoint

# Runs the server command with a file size limit, as a full disk would stop
# it: writes past the limit fail with EFBIG (the signal is ignored).
LIMITED = textwrap.dedent(
    """
    import os, resource, signal, sys
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    limit = int(sys.argv[1])
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    os.execv(sys.executable, [sys.executable, *sys.argv[2:]])
    """
)


class LimitedServer(ServerProcess):
    def __init__(self, config: Path, limit: int, *args: str) -> None:
        command = server_command("--config", str(config), *args)
        self.process = subprocess.Popen(
            [sys.executable, "-c", LIMITED, str(limit), *command[1:]],
            stderr=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            text=True,
        )
        self._start_reader()


@pytest.mark.slow
def test_a_full_disk_fails_the_checkpoint_clearly_and_keeps_the_previous_one(config, tmp_path):
    directory = tmp_path / "checkpoints"
    served = LimitedServer(config, 400_000, "--checkpoint-dir", str(directory))
    try:
        client = resound.Client(f"127.0.0.1:{served_port(served)}")
        with client.trajectory_writer(1) as writer:
            for value in range(20):
                write(writer, value, size=1000)  # 20 x 4 KB: fits
        first = client.checkpoint()
        with client.trajectory_writer(1) as writer:
            for value in range(20, 200):
                write(writer, value, size=1000)  # 200 x 4 KB: does not
        with pytest.raises(OSError, match="checkpoint not written.*File too large"):
            client.checkpoint()
        # Nothing half written is left, the first checkpoint is untouched,
        # and the server serves on with everything it holds.
        assert sorted(p.name for p in directory.iterdir()) == [Path(first).name]
        assert checkpointers.inspect(first)["tables"][0]["num_items"] == 20
        assert client.server_info()["replay"].current_size == 200
        assert len(client.sample_batch("replay", 200, timeout=SAFETY).info.key) == 200
        client.insert([np.zeros(1000, np.float32)], priorities={"replay": 1.0})
    finally:
        assert served.stop() == 0
    # A restart restores the last good checkpoint.
    again = ServerProcess(config, "--checkpoint-dir", str(directory))
    try:
        info = resound.Client(f"127.0.0.1:{served_port(again)}").server_info()
        assert info["replay"].current_size == 20
    finally:
        assert again.stop() == 0


@pytest.mark.parametrize("transport", ["grpc", "auto"])
def test_an_unwritable_checkpoint_directory_fails_clearly(tmp_path, transport) -> None:
    parent = tmp_path / "parent"
    parent.mkdir()
    server = resound.Server(
        [resound.Table.queue("q", 10)],
        checkpointer=checkpointers.DefaultCheckpointer(parent / "checkpoints"),
    )
    parent.rmdir()
    parent.write_text("the checkpoints' parent is now a file")  # as unwritable as it gets for root
    try:
        client = resound.Client(f"127.0.0.1:{server.port}", transport=transport)
        client.insert([np.float32(1.0)], priorities={"q": 1.0})
        with pytest.raises(OSError, match="Not a directory"):
            client.checkpoint()
        assert server.table("q").info.current_size == 1
        assert len(client.sample_batch("q", 1, timeout=SAFETY).info.key) == 1
    finally:
        server.stop()
