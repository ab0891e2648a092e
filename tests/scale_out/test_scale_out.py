"""One client over three ``resound-server`` processes on 127.0.0.1: writers
and inserts spread over the servers (a writer's items stay together), samples
come from all of them, priority updates reach the server holding each key,
``reset`` and ``checkpoint`` reach every server, and a server killed mid-run
neither stops the others' traffic nor hangs anyone, and rejoins on restart."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import resound

from helpers.server_processes import REPLAY_TABLE_TOML, ServerProcess
from helpers.waiting import SAFETY, wait_until

pytestmark = pytest.mark.slow  # every test starts resound-server processes

CONFIG = (
    """
[server]
host = "127.0.0.1"

[[tables]]
name = "queue"
kind = "queue"
max_size = 10000
"""
    + REPLAY_TABLE_TOML
)
SERVING = r"serving 2 table\(s\) on 127\.0\.0\.1:(\d+)"


class Cluster:
    """Three servers from one config, each checkpointing into a directory of
    its own; each can be killed and restarted on its port."""

    def __init__(self, config: Path, checkpoints: Path) -> None:
        self.config = config
        self.args = [("--checkpoint-dir", str(checkpoints / f"server{i}")) for i in range(3)]
        self.processes = [ServerProcess(config, *self.args[i]) for i in range(3)]
        self.ports = [int(p.wait_for(SERVING).group(1)) for p in self.processes]
        self.addresses = [f"127.0.0.1:{port}" for port in self.ports]

    def direct(self, index: int) -> resound.Client:
        """A client of server ``index`` alone."""
        return resound.Client(self.addresses[index])

    def sizes(self, table: str) -> list[int]:
        return [self.direct(i).server_info()[table].current_size for i in range(3)]

    def kill(self, index: int) -> None:
        self.processes[index].stop(signal.SIGKILL)

    def restart(self, index: int) -> None:
        port = str(self.ports[index])
        process = ServerProcess(self.config, *self.args[index], "--port", port)
        self.processes[index] = process
        process.wait_for(SERVING)

    def stop(self) -> None:
        for process in self.processes:
            if process.process.poll() is None:
                process.stop()


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    config = tmp_path / "server.toml"
    config.write_text(CONFIG)
    servers = Cluster(config, tmp_path / "checkpoints")
    try:
        yield servers
    finally:
        servers.stop()


def drain(client: resound.Client, table: str) -> list[float]:
    """Every item of a queue table of one server, in order (the first value)."""
    size = client.server_info()[table].current_size
    if not size:
        return []
    return [
        float(sample.data[0][0])
        for sample in client.sample(table, size, emit_timesteps=False, timeout=SAFETY)
    ]


def test_writers_and_inserts_spread_over_the_servers_and_a_writer_sticks_to_one(cluster):
    client = resound.Client(cluster.addresses)
    assert client.server_addresses == cluster.addresses
    # Six writers, each writing items of 3 overlapping steps valued by writer.
    writers = [client.trajectory_writer(3, max_chunk_length=2) for _ in range(6)]
    for step in range(20):
        for index, writer in enumerate(writers):
            writer.append([np.float32(100 * index + step)])
            if step >= 2:
                writer.create_item("queue", 1.0, [writer.history[0][-3:]])
    for writer in writers:
        writer.end_episode()
        writer.close()
    for value in range(30):
        client.insert([np.float32(10_000 + value)], priorities={"queue": 1.0})

    # The servers in turn: two writers (2 x 18 items) and 10 inserts each.
    assert cluster.sizes("queue") == [46, 46, 46]
    assert client.server_info()["queue"].current_size == 138
    per_server = [drain(cluster.direct(i), "queue") for i in range(3)]
    writers_seen = [{int(v) // 100 for v in values if v < 10_000} for values in per_server]
    # Writers n and n + 3 share a server (the first server is a random one).
    assert sorted(sorted(seen) for seen in writers_seen) == [[0, 3], [1, 4], [2, 5]]
    inserted = sorted(v for values in per_server for v in values if v >= 10_000)
    assert inserted == [10_000 + v for v in range(30)]
    assert all(sum(v >= 10_000 for v in values) == 10 for values in per_server)


def fill_replay(cluster: Cluster, per_server: int) -> list[set[int]]:
    """Inserts ``per_server`` items into each server's replay table directly;
    the keys each server holds."""
    keys = []
    for index in range(3):
        direct = cluster.direct(index)
        for value in range(per_server):
            direct.insert([np.float32(index * 1000 + value)], priorities={"replay": 1.0})
        batch = direct.sample_batch("replay", 2000, timeout=SAFETY)
        keys.append(set(batch.info.key.tolist()))
        assert len(keys[-1]) == per_server  # 2000 uniform draws see every item
    return keys


def priorities_on(cluster: Cluster, index: int) -> dict[int, float]:
    batch = cluster.direct(index).sample_batch("replay", 2000, timeout=SAFETY)
    return dict(zip(batch.info.key.tolist(), batch.info.priority.tolist(), strict=True))


def test_samples_come_from_every_server_and_updates_reach_the_right_one(cluster):
    keys = fill_replay(cluster, 20)
    client = resound.Client(cluster.addresses)
    before = [cluster.direct(i).server_info()["replay"] for i in range(3)]
    batch = client.sample_batch("replay", 384, timeout=SAFETY)  # 128 from each
    assert batch.data[0].shape == (384, 1)
    sampled = batch.info.key.tolist()
    sources = [sum(key in held for key in sampled) for held in keys]
    assert sources == [128, 128, 128]
    after = [cluster.direct(i).server_info()["replay"] for i in range(3)]
    taken = [
        a.rate_limiter_info.sample_stats.completed - b.rate_limiter_info.sample_stats.completed
        for a, b in zip(after, before, strict=True)
    ]
    assert taken == sources  # each sample was taken on the server that holds its key
    # Each sample's data is its server's.
    for key, value in zip(sampled, batch.data[0][:, 0].tolist(), strict=True):
        assert key in keys[int(value) // 1000]

    # Keys this client sampled, and keys it never saw (sampled by another
    # client): both reach the server holding them, and only those change.
    chosen = sorted(set(sampled))[:10]
    client.update_priorities("replay", (np.array(chosen, np.uint64), np.full(10, 5.0)))
    unseen = [sorted(held - set(sampled))[0] for held in keys if held - set(sampled)]
    resound.Client(cluster.addresses).mutate_priorities(
        "replay", updates={key: 7.0 for key in unseen}
    )
    expected = {key: 5.0 for key in chosen} | {key: 7.0 for key in unseen}
    for index in range(3):
        priorities = priorities_on(cluster, index)
        assert set(priorities) == keys[index]
        for key, priority in priorities.items():
            assert priority == expected.get(key, 1.0), (index, key)

    # A bad priority changes nothing anywhere.
    with pytest.raises(ValueError, match="finite"):
        client.update_priorities("replay", {chosen[0]: 2.0, chosen[1]: float("nan")})
    assert priorities_on(cluster, 0).get(chosen[0], 5.0) == 5.0

    # Pairs are pairs here too, and a bad key is named before anything goes.
    client.update_priorities("replay", ((chosen[0], 6.0), (chosen[1], 6.5)))
    assert {**priorities_on(cluster, 0), **priorities_on(cluster, 1), **priorities_on(cluster, 2)}[
        chosen[1]
    ] == 6.5
    with pytest.raises(ValueError, match="deletes key must be an integer"):
        client.mutate_priorities("replay", updates={chosen[0]: 1.0}, deletes=[-1])

    # Deletes are routed too.
    client.mutate_priorities("replay", deletes=chosen[:4] + unseen)
    assert client.server_info()["replay"].current_size == 60 - 4 - len(unseen)


def test_server_info_sums_and_reset_and_checkpoint_reach_every_server(cluster):
    fill_replay(cluster, 5)
    client = resound.Client(cluster.addresses)
    per_server = client.server_infos()
    assert list(per_server) == cluster.addresses
    assert [infos["replay"].current_size for infos in per_server.values()] == [5, 5, 5]
    total = client.server_info()["replay"]
    assert (total.current_size, total.max_size) == (15, 300_000)
    assert total.rate_limiter_info.insert_stats.completed == 15

    paths = client.checkpoint()
    assert isinstance(paths, dict) and list(paths) == cluster.addresses
    for index, address in enumerate(cluster.addresses):
        path = Path(paths[address])
        assert path.parent.name == f"server{index}" and path.exists()
        tables = {t["name"]: t for t in resound.checkpointers.inspect(str(path))["tables"]}
        assert tables["replay"]["num_items"] == 5

    client.reset("replay")
    assert cluster.sizes("replay") == [0, 0, 0]


def test_a_killed_server_does_not_stop_the_others_and_rejoins_after_a_restart(cluster):
    fill_replay(cluster, 10)
    client = resound.Client(cluster.addresses)
    stop = threading.Event()
    errors: list[BaseException] = []
    progress = {"written": 0, "batches": 0}

    def write() -> None:
        try:
            writers = [client.trajectory_writer(1) for _ in range(3)]  # one per server
            step = 0
            while not stop.is_set():
                for writer in writers:
                    writer.append([np.float32(step)])
                    writer.create_item("replay", 1.0, [writer.history[0][-1:]])
                step += 1
                if step % 20 == 0:
                    for writer in writers:
                        writer.flush(timeout_ms=int(SAFETY * 1000))
                    progress["written"] = 3 * step
            for writer in writers:
                writer.close()
        except BaseException as error:
            errors.append(error)

    def sample() -> None:
        try:
            with client.sample_batches("replay", 16, timeout=SAFETY) as batches:
                for _ in batches:
                    progress["batches"] += 1
                    if stop.is_set():
                        return
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=write), threading.Thread(target=sample)]
    for thread in threads:
        thread.start()
    try:
        wait_until(lambda: progress["written"] >= 300 and progress["batches"] >= 20, "traffic")
        cluster.kill(1)
        # Traffic goes on past the kill, on the two others.
        written, batches = progress["written"], progress["batches"]
        wait_until(
            lambda: progress["written"] >= written + 600 and progress["batches"] >= batches + 50,
            "traffic after the kill",
        )
        assert not errors, errors
        alive = [cluster.direct(i).server_info()["replay"].current_size for i in (0, 2)]
        assert all(size > 10 for size in alive), alive
        assert set(client.server_infos()) == {cluster.addresses[0], cluster.addresses[2]}

        # A restarted server (empty: it was killed) rejoins: new writes and
        # samples reach it again.
        cluster.restart(1)
        rejoined = cluster.direct(1)

        def serves_again() -> bool:
            client.insert([np.float32(-1.0)], priorities={"replay": 1.0})
            info = rejoined.server_info()["replay"]
            return info.current_size > 0 and info.rate_limiter_info.sample_stats.completed > 0

        wait_until(serves_again, "the restarted server taking inserts and samples")
        assert set(client.server_infos()) == set(cluster.addresses)
    finally:
        stop.set()
        for thread in threads:
            thread.join(SAFETY)
    assert not any(thread.is_alive() for thread in threads)
    assert not errors, errors


def test_inserts_reach_a_restarted_server_again(cluster):
    client = resound.Client(cluster.addresses)
    inserted = 0

    def insert() -> None:
        nonlocal inserted
        client.insert([np.float32(inserted)], priorities={"replay": 1.0}, timeout=SAFETY)
        inserted += 1

    for _ in range(6):
        insert()
    assert cluster.sizes("replay") == [2, 2, 2]
    cluster.kill(1)
    # The killed server's turn comes within three inserts: its insert moves
    # to another server, and nothing is lost.
    for _ in range(6):
        insert()
    alive = [cluster.direct(i).server_info()["replay"].current_size for i in (0, 2)]
    assert sum(alive) == 10, alive

    # Restarted (empty), it gets inserts again: they no longer follow the
    # stream that moved away from it.
    cluster.restart(1)
    rejoined = cluster.direct(1)

    def reaches_the_restarted_server() -> bool:
        insert()
        return rejoined.server_info()["replay"].current_size > 0

    wait_until(reaches_the_restarted_server, "an insert reaching the restarted server")
    assert sum(cluster.sizes("replay")) == 10 + inserted - 12


def test_without_failover_a_writer_of_a_killed_server_raises(cluster):
    client = resound.Client(cluster.addresses, failover=False)
    writers = [client.trajectory_writer(1) for _ in range(3)]  # one per server

    def write(writer: resound.TrajectoryWriter, value: float) -> None:
        writer.append([np.float32(value)])
        writer.create_item("replay", 1.0, [writer.history[0][-1:]])
        writer.flush(timeout_ms=int(SAFETY * 1000))

    for index, writer in enumerate(writers):
        write(writer, index)
    # The writer of server 0 is the one whose value it holds.
    on_server0 = int(cluster.direct(0).sample_batch("replay", 1).data[0][0, 0])
    cluster.kill(0)
    with pytest.raises(ConnectionError, match="went away"):
        for _ in range(10_000):  # until the stream notices, within SAFETY
            write(writers[on_server0], 2.0)
    others = [writer for index, writer in enumerate(writers) if index != on_server0]
    for writer in others:  # the others carry on
        write(writer, 3.0)
    assert [cluster.direct(i).server_info()["replay"].current_size for i in (1, 2)] == [2, 2]
    # New writers go to the servers that answer.
    write(client.trajectory_writer(1), 4.0)
    assert client.server_info()["replay"].current_size == 5
